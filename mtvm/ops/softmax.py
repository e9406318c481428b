"""Softmax, LogSoftmax and Hardmax along an axis.

Opset 13 changed the meaning of `axis`: before, the input is coerced to 2-D
[prod(shape[:axis]), prod(shape[axis:])] and the op runs along the second
dim (default axis 1); from 13 it runs along the one dim `axis` (default -1).
Canonical form: `axis` (non-negative) and `end_axis`, the last dim of the
contiguous block the op runs along (rank - 1 for the old semantics, `axis`
for the new). Both are then the same (outer, n, inner) row loop.

Softmax is numerically stable: exp(x - max(x)) / sum. float32/float64 only; float
rows take the kernel library's libm-free exponential (mtvm_exp_f32.h).
NaN and infinities as NumPy and onnxruntime: a NaN or a +inf in a row makes
the whole row NaN (Softmax, LogSoftmax; x - max is NaN there), -inf gives 0
(Softmax) or -inf (LogSoftmax); Hardmax marks the first NaN, as np.argmax
(onnxruntime's depends on the NaN's position).
"""
from __future__ import annotations

import numpy as np

from .base import Op, register
from .reduce import at, libm, norm_axis, require_float, row_loops, split_axis


def _block(x, axis, end_axis):
    """x viewed as (outer, n, inner) and the axis (1) to reduce over."""
    return x.reshape(split_axis(x.shape, axis, end_axis))


def exp_fn(k) -> str:
    """e^x for the rows' exponentials: the library's libm-free one in float (x -
    max(x) <= 0 there; its flush of results below FLT_MIN to 0 changes no
    output), libm's exp in double."""
    if k.ctype == "float":
        k.library("mtvm_exp_f32.h")
        return "mtvm_exp_f32"
    return libm(k, "exp")


class AlongAxis(Op):
    anchor = True

    def canonicalize(self, node, graph, opset):
        rank = len(graph.tensors[node.inputs[0]].shape)
        axis = norm_axis(node.attrs.get("axis", 1 if opset < 13 else -1), rank)
        node.attrs["axis"] = axis
        node.attrs["end_axis"] = rank - 1 if opset < 13 else axis

    def check(self, node, inputs):
        require_float(node, inputs)

    def infer(self, node, inputs, consts):
        return [(inputs[0].shape, inputs[0].dtype)]

    def macs(self, node, inputs, outputs):
        return inputs[0].size

    def reference(self, x, *, axis=-1, end_axis=None):
        axis = norm_axis(axis, x.ndim)
        end_axis = axis if end_axis is None else end_axis
        return self.np_rows(_block(x, axis, end_axis)).reshape(x.shape).astype(x.dtype)

    def emit(self, k, *, axis=-1, end_axis=None):
        x = k.ins[0]
        axis = norm_axis(axis, len(x.shape))
        outer, n, inner = split_axis(x.shape, axis, axis if end_axis is None else end_axis)
        body = self.row_body(k, x.c, n, inner)
        return "\n".join(row_loops(outer, n, inner, body))

    def max_loop(self, k, xc, n, inner) -> list[str]:
        t = k.ctype
        return [f"{t} mx = {xc}[base];",
                f"for (size_t r = 1; r < {n}; ++r) {{",
                f"    const {t} x = {xc}[{at('base', 'r', inner)}];",
                "    mx = x > mx ? x : mx;",
                "}"]

    def store_loop(self, k, n, inner, value) -> list[str]:
        """for r: idx; v = value(idx); epilogue; out0[idx] = v."""
        lines = [f"for (size_t r = 0; r < {n}; ++r) {{",
                 f"    const size_t idx = {at('base', 'r', inner)};",
                 f"    {k.ctype} v = {value('idx')};"]
        ep = k.epilogue("v", "idx")
        if ep:
            lines.append("    " + ep)
        lines += ["    out0[idx] = v;", "}"]
        return lines


@register("Softmax")
class Softmax(AlongAxis):
    @staticmethod
    def np_rows(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def row_body(self, k, xc, n, inner):
        t = k.ctype
        lines = self.max_loop(k, xc, n, inner)
        # The exponentials go to the output first, then are scaled in place.
        lines += [f"{t} sum = {k.lit(0)};",
                  f"for (size_t r = 0; r < {n}; ++r) {{",
                  f"    const size_t idx = {at('base', 'r', inner)};",
                  f"    const {t} e = {exp_fn(k)}({xc}[idx] - mx);",
                  "    out0[idx] = e;",
                  "    sum += e;",
                  "}",
                  f"const {t} inv_sum = {k.lit(1)} / sum;"]
        return lines + self.store_loop(k, n, inner, lambda i: f"out0[{i}] * inv_sum")


@register("LogSoftmax")
class LogSoftmax(AlongAxis):
    @staticmethod
    def np_rows(x):
        s = x - x.max(axis=1, keepdims=True)
        return s - np.log(np.exp(s).sum(axis=1, keepdims=True))

    def row_body(self, k, xc, n, inner):
        t = k.ctype
        lines = self.max_loop(k, xc, n, inner)
        lines += [f"{t} sum = {k.lit(0)};",
                  f"for (size_t r = 0; r < {n}; ++r) {{",
                  f"    sum += {exp_fn(k)}({xc}[{at('base', 'r', inner)}] - mx);",
                  "}",
                  f"const {t} shift = mx + {libm(k, 'log')}(sum);"]
        return lines + self.store_loop(k, n, inner, lambda i: f"{xc}[{i}] - shift")


@register("Hardmax")
class Hardmax(AlongAxis):
    """1 at the first maximum of each row (the first NaN if there is one), 0 elsewhere."""

    @staticmethod
    def np_rows(x):
        y = np.zeros_like(x)
        np.put_along_axis(y, np.expand_dims(np.argmax(x, axis=1), 1), 1, axis=1)
        return y

    def row_body(self, k, xc, n, inner):
        t = k.ctype
        lines = ["size_t best = 0;",
                 f"{t} mx = {xc}[base];",
                 f"for (size_t r = 1; r < {n}; ++r) {{",
                 f"    const {t} x = {xc}[{at('base', 'r', inner)}];",
                 "    if (x > mx || (isnan(x) && !isnan(mx))) {",
                 "        mx = x;",
                 "        best = r;",
                 "    }",
                 "}"]
        return lines + self.store_loop(
            k, n, inner, lambda i: f"r == best ? {k.lit(1)} : {k.lit(0)}")
