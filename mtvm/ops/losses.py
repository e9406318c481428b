"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (class weights,
ignore_index, the none/sum/mean reductions, any number of spatial dims).

One kernel with loops over rows; the cross-entropy's log-softmax is recomputed
per row, so no [N, C, D] buffer is held unless its log_prob output is asked for."""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .base import Op, register
from ..codegen.cwriter import (Assign, Cast, Comment, Const, Decl, For, If, Type, Var, call, eq,
                               gt, index_type, param, render_c, select)
from .indexing import prod
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
        dt = k.outs[0].dtype
        T, CT = Type(dt), Type(dt, const=True)
        X, out = param(x), param(k.outs[0], output=True)
        i0, i1, c = Var("i0"), Var("i1"), Var("c")
        total, wsum = Var("total", T), Var("wsum", T)
        tv, wv = Var("tg", Type("int64", const=True)), Var("w", CT)
        zero = Const(0, dt)
        lines = [Decl(total, zero), Decl(wsum, zero)]
        inner = [Decl(tv, Cast(Type("int64"), param(tg)[i0 * D + i1]))]
        ignored = eq(tv, Const(ignore_index, "int64")) if ignore_index is not None else Const(0)
        inner.append(Decl(wv, select(ignored, zero, param(w)[tv] if w is not None
                                     else Const(1, dt))))
        at = (i0 * C + c) * D + i1
        picked = X[(i0 * C + Cast(index_type(), tv)) * D + i1]
        if self.softmax:
            m, se, lse = Var("m", T), Var("se", T), Var("lse", CT)
            inner += [Decl(m, X[i0 * (C * D) + i1]),
                      For(c, C, [If(gt(X[at], m), [Assign(m, X[at])])], begin=Const(1)),
                      Decl(se, zero),
                      For(c, C, [Assign(se, call(libm(k, "exp"), X[at] - m), "+=")]),
                      Decl(lse, m + call(libm(k, "log"), se))]
            if log_prob_out:
                inner.append(For(c, C, [Assign(param(k.outs[1], output=True)[at],
                                               X[at] - lse)]))
            picked = picked - lse
        loss = Var("l", CT)
        inner.append(Decl(loss, select(ignored, zero, -picked * wv)))
        if reduction == "none":
            inner.append(Assign(out[i0 * D + i1], loss))
            lines = [Comment("reduction none: one loss per element")]
        else:
            inner += [Assign(total, loss, "+="), Assign(wsum, wv, "+=")]
        lines.append(For(i0, N, [For(i1, D, inner)]))
        if reduction == "sum":
            lines.append(Assign(out[0], total))
        elif reduction == "mean":
            lines.append(Assign(out[0], total / wsum))
        return render_c(lines)


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
