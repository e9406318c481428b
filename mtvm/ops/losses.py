"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (class weights,
ignore_index, the none/sum/mean reductions, any number of spatial dims).

One kernel with loops over rows; the cross-entropy's log-softmax is recomputed
per row, so no [N, C, D] buffer is held unless its log_prob output is asked for."""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .base import Op, register
from .indexing import nest, prod
from .reduce import libm


class _Loss(Op):
    """Shared kernel: per (n, d) a weighted -log p[target], then none/sum/mean."""
    softmax = False

    def check(self, node, inputs):
        if len(inputs[0].shape) < 2:
            raise UnsupportedError(f"{node.op}: input must have rank >= 2")

    def _ref(self, x, target, weight, reduction, ignore_index, get_log_prob):
        N, C = x.shape[:2]
        D = prod(x.shape[2:])
        xx = x.reshape(N, C, D).astype(np.float64)
        if self.softmax:
            m = xx.max(axis=1, keepdims=True)
            lse = m + np.log(np.exp(xx - m).sum(axis=1, keepdims=True))
            logp = xx - lse
        else:
            logp = xx
        t = target.reshape(N, D).astype(np.int64)
        ign = np.zeros_like(t, bool) if ignore_index is None else t == ignore_index
        tc = np.where(ign, 0, t)
        w = np.ones((N, D)) if weight is None else weight.astype(np.float64)[tc]
        w = np.where(ign, 0.0, w)
        picked = np.take_along_axis(logp, tc[:, None, :], axis=1)[:, 0, :]
        loss = -picked * w
        if reduction == "none":
            out = loss.reshape(target.shape)
        elif reduction == "sum":
            out = loss.sum()
        else:
            out = loss.sum() / w.sum()
        out = np.asarray(out).astype(x.dtype)
        if get_log_prob:
            return out, logp.reshape(x.shape).astype(x.dtype)
        return out

    def _emit(self, k, reduction, ignore_index, log_prob_out):
        x, tg = k.ins[0], k.ins[1]
        w = k.ins[2] if len(k.ins) > 2 else None
        N, C = x.shape[:2]
        D = prod(x.shape[2:])
        t = k.ctype
        lines = [f"{t} total = {k.lit(0)}, wsum = {k.lit(0)};"]
        inner = [f"const int64_t tg = (int64_t)in1[i0 * {D} + i1];"]
        ignored = f"tg == INT64_C({ignore_index})" if ignore_index is not None else "0"
        wexpr = "in2[tg]" if w is not None else k.lit(1)
        inner.append(f"const {t} w = ({ignored}) ? {k.lit(0)} : {wexpr};")
        at = f"(i0 * {C} + c) * {D} + i1"
        if self.softmax:
            inner += [f"{t} m = in0[i0 * {C * D} + i1];",
                      f"for (size_t c = 1; c < {C}; ++c) {{",
                      f"    if (in0[{at}] > m) m = in0[{at}];", "}",
                      f"{t} se = {k.lit(0)};",
                      f"for (size_t c = 0; c < {C}; ++c) {{",
                      f"    se += {libm(k, 'exp')}(in0[{at}] - m);", "}",
                      f"const {t} lse = m + {libm(k, 'log')}(se);"]
            if log_prob_out:
                inner += [f"for (size_t c = 0; c < {C}; ++c) {{",
                          f"    out1[{at}] = in0[{at}] - lse;", "}"]
            pick = f"(in0[(i0 * {C} + (size_t)tg) * {D} + i1] - lse)"
        else:
            pick = f"in0[(i0 * {C} + (size_t)tg) * {D} + i1]"
        inner.append(f"const {t} l = ({ignored}) ? {k.lit(0)} : -{pick} * w;")
        if reduction == "none":
            inner.append(f"out0[i0 * {D} + i1] = l;")
            lines[0] = "/* reduction none: one loss per element */"
        else:
            inner += ["total += l;", "wsum += w;"]
        lines += nest([N, D], inner)
        if reduction == "sum":
            lines.append("out0[0] = total;")
        elif reduction == "mean":
            lines.append("out0[0] = total / wsum;")
        return "\n".join(lines)


@register("NegativeLogLikelihoodLoss")
class NLLLoss(_Loss):
    def reference(self, x, target, weight=None, *, reduction="mean", ignore_index=None):
        return self._ref(x, target, weight, reduction, ignore_index, False)

    def emit(self, k, *, reduction="mean", ignore_index=None):
        return self._emit(k, reduction, ignore_index, False)


@register("SoftmaxCrossEntropyLoss")
class SoftmaxCrossEntropyLoss(_Loss):
    softmax = True

    def reference(self, x, target, weight=None, *, reduction="mean", ignore_index=None):
        return self._ref(x, target, weight, reduction, ignore_index, True)

    def infer(self, node, inputs, consts):
        x, tg = inputs[0], inputs[1]
        out = [(tuple(tg.shape) if node.attrs.get("reduction", "mean") == "none" else (),
                np.dtype(x.dtype))]
        if len(node.outputs) > 1:
            out.append((tuple(x.shape), np.dtype(x.dtype)))
        return out

    def emit(self, k, *, reduction="mean", ignore_index=None):
        want = len(k.outs) > 1 and k.outs[1] is not None
        return self._emit(k, reduction, ignore_index, want)
