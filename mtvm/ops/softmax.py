"""Softmax, LogSoftmax and Hardmax along an axis.

Opset 13 changed the meaning of `axis`: before, the input is coerced to 2-D
[prod(shape[:axis]), prod(shape[axis:])] and the op runs along the second
dim (default axis 1); from 13 it runs along the one dim `axis` (default -1).
Canonical form: `axis` (non-negative) and `end_axis`, the last dim of the
contiguous block the op runs along (rank - 1 for the old semantics, `axis`
for the new). Both are then the same (outer, n, inner) row loop.

Softmax is numerically stable: exp(x - max(x)) / sum. float32/float64 only; float
rows take the kernel library's libm-free exponential (mtvm_exp_f32.h), and on x86 and
the portable target a contiguous row of 16 or more is computed in passes gcc
vectorizes (Softmax.vector_row_body: the maximum and the sum in eight lanes).
NaN and infinities as NumPy and onnxruntime: a NaN or a +inf in a row makes
the whole row NaN (Softmax, LogSoftmax; x - max is NaN there), -inf gives 0
(Softmax) or -inf (LogSoftmax); Hardmax marks the first NaN, as np.argmax
(onnxruntime's depends on the NaN's position).
"""
from __future__ import annotations

import numpy as np

from ..codegen.cwriter import (
    Assign,
    Decl,
    For,
    If,
    Pragma,
    Stmt,
    Var,
    and_,
    call,
    eq,
    gt,
    index_type,
    kernel_lit,
    not_,
    or_,
    param,
    select,
    sum_of,
)
from .base import Op, register
from .reduce import BASE, at, libm, norm_axis, require_float, row_loops, split_axis, store, value


def _block(x, axis, end_axis):
    """x viewed as (outer, n, inner) and the axis (1) to reduce over."""
    return x.reshape(split_axis(x.shape, axis, end_axis))


# Softmax rows on a vector host: lanes of this many partial maxima and sums (one AVX2
# vector), so that gcc vectorizes them too (a float max or sum loop is a chain it may not
# reorder). The pairwise sum of the lanes below is written for eight.
LANES = 8


def vector_rows(k, n: int, inner: int) -> bool:
    """Whether Softmax's rows take the lanes form: float rows that are contiguous and at
    least two blocks long, on an x86 or the portable target (which hosts compile).
    Microcontroller targets keep the one-pass loop: nothing vectorizes there, and the
    lanes would only add instructions."""
    return (k.ctype == "float" and inner == 1 and n >= 2 * LANES
            and (k.target.is_generic or k.target.is_x86))


def exp_fn(k) -> str:
    """e^x for the rows' exponentials: the library's libm-free one in float (x -
    max(x) <= 0 there; the microcontroller form's flush of results below FLT_MIN
    to 0 changes no output), libm's exp in double."""
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

    def ir_body(self, k, *, axis=-1, end_axis=None):
        return (self.loops(k, axis, end_axis))

    def loops(self, k, axis, end_axis) -> list[Stmt]:
        x = k.ins[0]
        axis = norm_axis(axis, len(x.shape))
        outer, n, inner = split_axis(x.shape, axis, axis if end_axis is None else end_axis)
        return row_loops(outer, n, inner, self.row_body(k, param(x), n, inner))

    def max_loop(self, k, x: Var, n, inner) -> list[Stmt]:
        """mx = the row's maximum."""
        mx, e, r = value(k, "mx"), value(k, "x", const=True), Var("r")
        return [Decl(mx, x[BASE]),
                For(r, n, [Decl(e, x[at(BASE, r, inner)]), Assign(mx, select(gt(e, mx), e, mx))],
                    begin=1)]

    def store_loop(self, k, n, inner, element) -> list[Stmt]:
        """for r: idx; v = element(idx, r); the fused tail; out0[idx] = v."""
        r, idx, v = Var("r"), Var("idx", index_type(const=True)), value(k, "v")
        return [For(r, n, [Decl(idx, at(BASE, r, inner)), Decl(v, element(idx, r)),
                           *store(k, v, idx)])]


@register("Softmax")
class Softmax(AlongAxis):
    @staticmethod
    def np_rows(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def row_body(self, k, x, n, inner):
        if vector_rows(k, n, inner):
            return self.vector_row_body(k, x, n)
        out = param(k.out, output=True)
        total, inv_sum = value(k, "sum"), value(k, "inv_sum", const=True)
        r, idx, e = Var("r"), Var("idx", index_type(const=True)), value(k, "e", const=True)
        # The exponentials go to the output first, then are scaled in place.
        return [*self.max_loop(k, x, n, inner),
                Decl(total, kernel_lit(k, 0)),
                For(r, n, [Decl(idx, at(BASE, r, inner)),
                           Decl(e, call(exp_fn(k), x[idx] - value(k, "mx"))),
                           Assign(out[idx], e),
                           Assign(total, e, "+=")]),
                Decl(inv_sum, kernel_lit(k, 1) / total),
                *self.store_loop(k, n, inner, lambda i, _: out[i] * inv_sum)]

    def vector_row_body(self, k, x, n):
        """A contiguous row in passes gcc vectorizes: the maximum in LANES lanes kept in
        the row's output (overwritten next), the exponentials, their sum in LANES
        accumulators (reassociated: within float rounding of the one-pass sum), the
        scaling. Each pass runs over whole blocks of LANES, then the row's tail: a
        count of whole vectors is what gcc -O2 vectorizes (its very cheap cost model
        takes no loop that needs a scalar epilogue). NaN and inf as the one-pass loop:
        any NaN or +inf in the row makes the row NaN (through the maximum or the sum)."""
        out = param(k.out, output=True)
        r, j, e = Var("r"), Var("j"), value(k, "x", const=True)
        idx, v = Var("idx", index_type(const=True)), value(k, "v")
        blocks_end = n // LANES * LANES
        lane = out[BASE + j]

        def larger(a, b):
            return select(gt(b, a), b, a)

        def blocks_then_tail(body) -> list[Stmt]:
            """body(r) for r over [0, blocks_end), then over [blocks_end, n)."""
            tail_loop = [For(r, n, body, begin=blocks_end)] if blocks_end < n else []
            return [For(r, blocks_end, body), *tail_loop]

        mx, total, inv_sum = value(k, "mx"), value(k, "sum"), value(k, "inv_sum", const=True)
        sums = [value(k, f"sum{i}") for i in range(LANES)]
        # "GCC unroll 1": unrolled, the lanes' selects would be branches, which stop
        # vectorization; a loop of LANES is if-converted and vectorized. (gcc only; other
        # compilers ignore a GCC pragma or, like clang, take it the same way.)
        return [For(j, LANES, [Assign(lane, x[BASE + j])]),
                For(r, blocks_end, [Pragma("GCC unroll 1"),
                                    For(j, LANES, [Decl(e, x[BASE + r + j]),
                                                   Assign(lane, larger(lane, e))])],
                    begin=LANES, step=LANES),
                Decl(mx, out[BASE]),
                For(j, LANES, [Assign(mx, larger(mx, lane))], begin=1),
                *([For(r, n, [Decl(e, x[BASE + r]), Assign(mx, larger(mx, e))],
                       begin=blocks_end)] if blocks_end < n else []),
                *blocks_then_tail([Assign(out[BASE + r], call(exp_fn(k), x[BASE + r] - mx))]),
                *[Decl(s_, kernel_lit(k, 0)) for s_ in sums],
                Pragma("GCC unroll 1"),   # a loop, not unrolled: its sums become one vector
                For(r, blocks_end, [Assign(s_, out[sum_of([BASE, r, i])], "+=")
                                    for i, s_ in enumerate(sums)], step=LANES),
                Decl(total, ((sums[0] + sums[1]) + (sums[2] + sums[3]))
                     + ((sums[4] + sums[5]) + (sums[6] + sums[7]))),
                *([For(r, n, [Assign(total, out[BASE + r], "+=")], begin=blocks_end)]
                  if blocks_end < n else []),
                Decl(inv_sum, kernel_lit(k, 1) / total),
                *blocks_then_tail([Decl(idx, BASE + r), Decl(v, out[idx] * inv_sum),
                                   *store(k, v, idx)])]


@register("LogSoftmax")
class LogSoftmax(AlongAxis):
    @staticmethod
    def np_rows(x):
        s = x - x.max(axis=1, keepdims=True)
        return s - np.log(np.exp(s).sum(axis=1, keepdims=True))

    def row_body(self, k, x, n, inner):
        # (x - max) - log(sum), not x - (max + log(sum)): with logits in the thousands the
        # sum max + log(sum) rounds away the log's low bits (1e-2 off at 1e6)
        total, lse, r = value(k, "sum"), value(k, "lse", const=True), Var("r")
        mx = value(k, "mx")
        return [*self.max_loop(k, x, n, inner),
                Decl(total, kernel_lit(k, 0)),
                For(r, n, [Assign(total, call(exp_fn(k), x[at(BASE, r, inner)] - mx), "+=")]),
                Decl(lse, call(libm(k, "log"), total)),
                *self.store_loop(k, n, inner, lambda i, _: (x[i] - mx) - lse)]


@register("Hardmax")
class Hardmax(AlongAxis):
    """1 at the first maximum of each row (the first NaN if there is one), 0 elsewhere."""

    @staticmethod
    def np_rows(x):
        y = np.zeros_like(x)
        np.put_along_axis(y, np.expand_dims(np.argmax(x, axis=1), 1), 1, axis=1)
        return y

    def row_body(self, k, x, n, inner):
        best, mx, e, r = Var("best"), value(k, "mx"), value(k, "x", const=True), Var("r")
        takes = or_(gt(e, mx), and_(call("isnan", e), not_(call("isnan", mx))))
        return [Decl(best, 0),
                Decl(mx, x[BASE]),
                For(r, n, [Decl(e, x[at(BASE, r, inner)]),
                           If(takes, [Assign(mx, e), Assign(best, r)])], begin=1),
                *self.store_loop(k, n, inner, lambda _, ri: select(
                    eq(ri, best), kernel_lit(k, 1), kernel_lit(k, 0)))]
