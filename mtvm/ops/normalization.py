"""Normalizations (inference): BatchNormalization, InstanceNormalization,
LayerNormalization, LpNormalization, RMSNormalization, GroupNormalization,
MeanVarianceNormalization and LRN.

BatchNormalization with constant statistics is folded into the producing
Conv/Gemm, or lowered to a Mul and an Add, by mtvm/passes/batchnorm.py; the
kernel here runs when neither happened (statistics computed at run time, or
compiling without that pass).

Unsupported (float32/float64 only): training (BatchNormalization
training_mode=1 or its running-statistics outputs: "training_mode=1 is not
supported (inference only); export the model in eval mode"), LayerNormalization
stash_type != 1, LpNormalization p other than 1 and 2.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedError
from ..codegen.cwriter import (
    ArrayDecl,
    Assign,
    Decl,
    Expr,
    For,
    Stmt,
    Var,
    call,
    eq,
    ge,
    index_type,
    kernel_lit,
    lt,
    param,
    scaled,
    select,
    sum_of,
)
from .base import Op, register
from .elementwise import broadcast_strides
from .indexing import naxis, strides_of
from .reduce import (
    BASE,
    at,
    libm,
    loop_nest,
    norm_axis,
    prod,
    require_float,
    row_loops,
    split_axis,
    store,
    value,
)

IDX = Var("idx", index_type(const=True))


def _sqrt(k, x: Expr) -> Expr:
    """sqrtf(x) in float kernels, sqrt(x) in double."""
    return call(libm(k, "sqrt"), x)


def _index_loops(counts, body: list[Stmt]) -> list[Stmt]:
    """Loops over `counts` (variables i0, i1, ...) around `body`."""
    return loop_nest(((Var(f"i{d}"), n) for d, n in enumerate(counts)), body)


def _channel_loops(k, n: int, c: int, inner: int, per_channel: list[Stmt],
                   per_element) -> list[Stmt]:
    """for c: <per_channel>; for n, s: <per_element(flat index)>  (NC... layout)."""
    cv, nv, sv = Var("c"), Var("n"), Var("s")
    if inner == 1:
        elements = [Decl(IDX, nv * c + cv), *per_element(IDX)]
    else:
        elements = [Decl(BASE, nv * (c * inner) + cv * inner),
                    For(sv, inner, per_element(BASE + sv))]
    return [For(cv, c, [*per_channel, For(nv, n, elements)])]


def _store(k, value_expr: Expr, idx: Expr, ch: Expr | None) -> list[Stmt]:
    v = value(k, "v")
    return [Decl(v, value_expr), *store(k, v, idx, ch)]


@register("BatchNormalization")
class BatchNormalization(Op):
    """y = (x - mean) / sqrt(var + epsilon) * scale + B, per channel (axis 1)."""
    anchor = True

    def canonicalize(self, node, graph, opset):
        if node.attrs.get("training_mode", 0):
            raise UnsupportedError("training_mode=1 is not supported (inference only); "
                                   "export the model in eval mode")
        if any(node.outputs[1:]):
            raise UnsupportedError("the running mean/variance outputs (training) are not "
                                   "supported; export the model in eval mode")
        node.attrs.pop("training_mode", None)
        node.attrs.pop("momentum", None)   # training only
        node.attrs.pop("spatial", None)    # opset < 9 only; 1 is the per-channel form

    def check(self, node, inputs):
        require_float(node, inputs)
        if len(inputs[0].shape) < 2:
            raise UnsupportedError("input must have rank >= 2 (N, C, ...)")

    def reference(self, x, scale, b, mean, var, *, epsilon=1e-5):
        shape = (1, -1) + (1,) * (x.ndim - 2)
        r = lambda a: np.asarray(a).reshape(shape)  # noqa: E731
        y = (x - r(mean)) / np.sqrt(r(var) + np.asarray(epsilon, x.dtype)) * r(scale) + r(b)
        return y.astype(x.dtype)

    def infer(self, node, inputs, consts):
        return [(inputs[0].shape, inputs[0].dtype)]

    def macs(self, node, inputs, outputs):
        return inputs[0].size

    def ir_body(self, k, *, epsilon=1e-5):
        x, scale, b, mean, var = (param(buf) for buf in k.ins[:5])
        n, c = k.ins[0].shape[:2]
        cv, g, t = Var("c"), value(k, "g", const=True), value(k, "t", const=True)
        per_channel = [Decl(g, scale[cv] / _sqrt(k, var[cv] + kernel_lit(k, epsilon))),
                       Decl(t, b[cv] - mean[cv] * g)]
        return (_channel_loops(k, n, c, prod(k.ins[0].shape[2:]), per_channel,
                                       lambda i: _store(k, x[i] * g + t, i, cv)))


@register("InstanceNormalization")
class InstanceNormalization(Op):
    """Per (n, c): y = (x - mean) / sqrt(var + epsilon) * scale[c] + B[c], the
    statistics taken over the spatial dims."""
    anchor = True

    def check(self, node, inputs):
        require_float(node, inputs)
        if len(inputs[0].shape) < 3:
            raise UnsupportedError("input must have rank >= 3 (N, C, D1, ...)")

    def reference(self, x, scale, b, *, epsilon=1e-5):
        axes = tuple(range(2, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
        shape = (1, -1) + (1,) * (x.ndim - 2)
        y = (x - mean) / np.sqrt(var + np.asarray(epsilon, x.dtype)) * scale.reshape(shape) \
            + b.reshape(shape)
        return y.astype(x.dtype)

    def infer(self, node, inputs, consts):
        return [(inputs[0].shape, inputs[0].dtype)]

    def macs(self, node, inputs, outputs):
        return 3 * inputs[0].size

    def ir_body(self, k, *, epsilon=1e-5):
        x, scale, b = (param(buf) for buf in k.ins[:3])
        n, c = k.ins[0].shape[:2]
        inner = prod(k.ins[0].shape[2:])
        nv, cv, s = Var("n"), Var("c"), Var("s")
        g, t = value(k, "g", const=True), value(k, "t", const=True)
        body = [Decl(BASE, nv * (c * inner) + cv * inner),
                *_mean_inv_std(k, x, BASE, inner, epsilon),
                Decl(g, value(k, "inv_std") * scale[cv]),
                Decl(t, b[cv] - value(k, "mean") * g),
                For(s, inner, _store(k, x[BASE + s] * g + t, BASE + s, cv))]
        return ([For(nv, n, [For(cv, c, body)])])


def _mean_inv_std(k, x: Var, base: Expr, count: int, epsilon) -> list[Stmt]:
    """Two-pass `mean` and `inv_std` = 1/sqrt(variance + epsilon) of x[base .. base + count)."""
    total, mean, sq = value(k, "sum"), value(k, "mean", const=True), value(k, "sq")
    d, s = value(k, "d", const=True), Var("s")
    n = kernel_lit(k, count)
    return [Decl(total, kernel_lit(k, 0)),
            For(s, count, [Assign(total, x[base + s], "+=")]),
            Decl(mean, total / n),
            Decl(sq, kernel_lit(k, 0)),
            For(s, count, [Decl(d, x[base + s] - mean), Assign(sq, d * d, "+=")]),
            Decl(value(k, "inv_std", const=True),
                 kernel_lit(k, 1) / _sqrt(k, sq / n + kernel_lit(k, epsilon)))]


@register("LayerNormalization")
class LayerNormalization(Op):
    """Statistics over the dims from `axis` on; Scale and B broadcast (unidirectionally)
    to those dims.
    Optional outputs Mean and InvStdDev (shape: x.shape[:axis] + 1s)."""
    anchor = True
    min_opset = 17

    def check(self, node, inputs):
        require_float(node, inputs)
        if node.attrs.get("stash_type", 1) != 1:
            raise UnsupportedError("stash_type other than 1 (float32 statistics) is not "
                                   "supported")
        shape = inputs[0].shape
        axis = norm_axis(node.attrs.get("axis", -1), len(shape))
        for t in inputs[1:]:
            if t is not None and np.broadcast_shapes(t.shape, shape[axis:]) != shape[axis:]:
                raise ShapeError(f"Scale/B of shape {list(t.shape)} does not broadcast to "
                                 f"the normalized shape {list(shape[axis:])}")

    def reference(self, x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
        axis = norm_axis(axis, x.ndim)
        axes = tuple(range(axis, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
        inv_std = 1 / np.sqrt(var + np.asarray(epsilon, x.dtype))
        y = (x - mean) * inv_std * scale
        if b is not None:
            y = y + b
        return y.astype(x.dtype), mean.astype(x.dtype), inv_std.astype(x.dtype)

    def infer(self, node, inputs, consts):
        x = inputs[0]
        axis = norm_axis(node.attrs.get("axis", -1), len(x.shape))
        stats = tuple(x.shape[:axis]) + (1,) * (len(x.shape) - axis)
        return [(x.shape, x.dtype), (stats, x.dtype), (stats, x.dtype)]

    def macs(self, node, inputs, outputs):
        return 4 * inputs[0].size

    def ir_body(self, k, *, axis=-1, epsilon=1e-5, stash_type=1):
        x = k.ins[0]
        axis = norm_axis(axis, len(x.shape))
        rows, cols = prod(x.shape[:axis]), prod(x.shape[axis:])

        norm_shape = x.shape[axis:]
        params = [b for b in k.ins[1:3] if b is not None]
        # Scale/B of the full normalized shape (or scalars) are read at j; others
        # broadcast along some normalized dims, which then get a loop each.
        nested = any(b.size not in (1, cols) for b in params)
        j = Var("j", index_type(const=nested))
        js = [Var(f"j{d}") for d in range(len(norm_shape))]

        def read(buf):
            if buf.size == 1:
                return param(buf)[0]
            if not nested:
                return param(buf)[j]
            st = broadcast_strides(buf.shape, norm_shape)
            return param(buf)[sum_of(scaled(v, t) for v, t in zip(js, st) if t)]

        r = Var("r")
        row = r * cols
        base = Var("base", index_type(const=True))
        y = (param(x)[base + j] - value(k, "mean")) * value(k, "inv_std") * read(k.ins[1])
        if len(k.ins) > 2 and k.ins[2] is not None:
            y = y + read(k.ins[2])
        body = [Decl(base, row), *_mean_inv_std(k, param(x), base, cols, epsilon)]
        for i, what in ((1, "mean"), (2, "inv_std")):
            if len(k.outs) > i and k.outs[i] is not None:
                body.append(Assign(param(k.outs[i], output=True)[r], value(k, what)))
        elements = _store(k, y, base + j, None)
        if not nested:
            body.append(For(j, cols, elements))
        else:
            flat = sum_of(scaled(v, st) for v, st in zip(js, prod_strides(norm_shape)))
            body += loop_nest(zip(js, norm_shape), [Decl(j, flat), *elements])
        return ([For(r, rows, body)])


def prod_strides(shape) -> list[int]:
    """Row-major element strides of `shape`."""
    return [prod(shape[d + 1:]) for d in range(len(shape))]


@register("LpNormalization")
class LpNormalization(Op):
    """x / ||x||_p along `axis` (p = 1 or 2); a zero norm gives 0."""
    anchor = True

    def check(self, node, inputs):
        require_float(node, inputs)
        if node.attrs.get("p", 2) not in (1, 2):
            raise UnsupportedError(f"p={node.attrs.get('p')}: only p=1 and p=2 exist")

    def reference(self, x, *, axis=-1, p=2):
        norm = np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1 else \
            np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(norm == 0, 0, x / norm).astype(x.dtype)

    def infer(self, node, inputs, consts):
        return [(inputs[0].shape, inputs[0].dtype)]

    def macs(self, node, inputs, outputs):
        return 2 * inputs[0].size

    def ir_body(self, k, *, axis=-1, p=2):
        x = param(k.ins[0])
        outer, n, inner = split_axis(k.ins[0].shape, norm_axis(axis, len(k.ins[0].shape)))
        r = Var("r")
        elem = x[at(BASE, r, inner)]
        total = value(k, "sum")
        norm, inv = value(k, "norm", const=True), value(k, "inv", const=True)
        zero = kernel_lit(k, 0)
        body = [Decl(total, zero),
                For(r, n, [Assign(total, call(libm(k, "fabs"), elem) if p == 1 else elem * elem,
                                  "+=")]),
                Decl(norm, total if p == 1 else _sqrt(k, total)),
                Decl(inv, select(eq(norm, zero), zero, kernel_lit(k, 1) / norm)),
                For(r, n, [Decl(IDX, at(BASE, r, inner)), *_store(k, x[IDX] * inv, IDX, None)])]
        return (row_loops(outer, n, inner, body))


def bcast_offset(idx: Expr, in_shape, out_shape) -> Expr:
    """Offset into a tensor of in_shape broadcast to out_shape, for the flat
    output index `idx`."""
    terms = []
    for d, s in enumerate(broadcast_strides(in_shape, out_shape)):
        if not s:
            continue
        inner = prod(out_shape[d + 1:])
        c = idx / inner if inner > 1 else idx
        terms.append(scaled(c % out_shape[d] if d > 0 else c, s))
    return sum_of(terms)


@register("RMSNormalization")
class RMSNormalization(Op):
    def reference(self, x, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
        a = naxis(axis, x.ndim)
        ms = np.mean(np.square(x.astype(np.float64)), axis=tuple(range(a, x.ndim)),
                     keepdims=True)
        return (x / np.sqrt(ms + epsilon) * scale).astype(x.dtype)

    def ir_body(self, k, *, axis=-1, epsilon=1e-5, stash_type=1):
        x, w = param(k.ins[0]), param(k.ins[1])
        shape = k.ins[0].shape
        a = naxis(axis, len(shape))
        outer, n = prod(shape[:a]), prod(shape[a:])
        i0, j = Var("i0"), Var("j")
        pos = Var("p", index_type(const=True))
        ss, r, v = value(k, "ss"), value(k, "r"), value(k, "v")
        return ([For(i0, outer, [
            Decl(BASE, i0 * n),
            Decl(ss, kernel_lit(k, 0)),
            For(j, n, [Assign(ss, x[BASE + j] * x[BASE + j], "+=")]),
            Decl(r, kernel_lit(k, 1) / _sqrt(k, ss / kernel_lit(k, n) + kernel_lit(k, epsilon))),
            For(j, n, [Decl(pos, BASE + j),
                       Decl(v, x[pos] * r * w[bcast_offset(pos, k.ins[1].shape, shape)]),
                       *store(k, v, pos)])])])


@register("LRN")
class LRN(Op):
    """Local response normalization across channels (NCHW...)."""

    def reference(self, x, *, size, alpha=1e-4, beta=0.75, bias=1.0):
        C = x.shape[1]
        sq = np.square(x.astype(np.float64))
        s = np.zeros_like(sq)
        lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
        for c in range(C):
            s[:, c] = sq[:, max(0, c - lo):min(C, c + hi + 1)].sum(axis=1)
        return (x / (bias + alpha / size * s) ** beta).astype(x.dtype)

    def ir_body(self, k, *, size, alpha=1e-4, beta=0.75, bias=1.0):
        x = param(k.ins[0])
        N, C = k.ins[0].shape[:2]
        inner = prod(k.ins[0].shape[2:])
        lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
        i0, i1, i2, c = Var("i0"), Var("i1"), Var("i2"), Var("c")
        c0, c1 = Var("c0", index_type(const=True)), Var("c1", index_type(const=True))
        pos = Var("p", index_type(const=True))
        total, sq, v = value(k, "s"), value(k, "v", const=True), value(k, "v")
        return (_index_loops([N, C, inner], [
            Decl(c0, select(ge(i1, lo), i1 - lo, 0)),
            Decl(c1, select(lt(i1 + hi, C), i1 + (hi + 1), C)),   # the window's end
            Decl(total, kernel_lit(k, 0)),
            For(c, c1, [Decl(sq, x[(i0 * C + c) * inner + i2]), Assign(total, sq * sq, "+=")],
                begin=c0),
            Decl(pos, (i0 * C + i1) * inner + i2),
            Decl(v, x[pos] / call(libm(k, "pow"), kernel_lit(k, bias)
                                  + kernel_lit(k, alpha / size) * total, kernel_lit(k, beta))),
            *store(k, v, pos)]))


def _mean_var(k, n: int, at_j) -> list[Stmt]:
    """`mean` and `var` of the n values at_j(j), j = 0 .. n - 1."""
    mean, var, d, j = value(k, "mean"), value(k, "var"), value(k, "d", const=True), Var("j")
    count = kernel_lit(k, n)
    return [Decl(mean, kernel_lit(k, 0)),
            Decl(var, kernel_lit(k, 0)),
            For(j, n, [Assign(mean, at_j(j), "+=")]),
            Assign(mean, count, "/="),
            For(j, n, [Decl(d, at_j(j) - mean), Assign(var, d * d, "+=")]),
            Assign(var, count, "/=")]


@register("MeanVarianceNormalization")
class MeanVarianceNormalization(Op):
    def reference(self, x, *, axes=(0, 2, 3)):
        ax = tuple(naxis(a, x.ndim) for a in axes)
        m = x.mean(axis=ax, keepdims=True)
        v = ((x - m) ** 2).mean(axis=ax, keepdims=True)
        return ((x - m) / np.sqrt(v + 1e-9)).astype(x.dtype)

    def ir_body(self, k, *, axes=(0, 2, 3)):
        x = k.ins[0]
        rank = len(x.shape)
        ax = sorted(naxis(a, rank) for a in axes)
        kept = [d for d in range(rank) if d not in ax]
        st = strides_of(x.shape)
        n = prod([x.shape[d] for d in ax])
        # Offsets of the reduced elements relative to a kept position: a table.
        red = [0]
        for d in ax:
            red = [o + i * st[d] for o in red for i in range(x.shape[d])]
        table = Var("red", index_type(const=True))
        xs, out = param(x), param(k.out, output=True)
        j, r = Var("j"), value(k, "r", const=True)
        base = sum_of((Var(f"i{i}") * st[d] for i, d in enumerate(kept)), empty=0)

        def at_j(jv):
            return xs[BASE + table[jv]]

        body = [Decl(BASE, base), *_mean_var(k, n, at_j),
                Decl(r, kernel_lit(k, 1) / _sqrt(k, value(k, "var") + kernel_lit(k, 1e-9))),
                For(j, n, [Assign(out[BASE + table[j]], (at_j(j) - value(k, "mean")) * r)])]
        return ([ArrayDecl(table, red),
                         *_index_loops([x.shape[d] for d in kept] or [1], body)])


@register("GroupNormalization")
class GroupNormalization(Op):
    def reference(self, x, scale, bias, *, num_groups, epsilon=1e-5, stash_type=1):
        N, C = x.shape[:2]
        g = x.reshape(N, num_groups, -1).astype(np.float64)
        m = g.mean(axis=2, keepdims=True)
        v = g.var(axis=2, keepdims=True)
        y = ((g - m) / np.sqrt(v + epsilon)).reshape(x.shape)
        shp = (1, C) + (1,) * (x.ndim - 2)
        if scale.size == num_groups and num_groups != C:   # opset 18 form: per group
            scale = np.repeat(scale, C // num_groups)
            bias = np.repeat(bias, C // num_groups)
        return (y * scale.reshape(shp) + bias.reshape(shp)).astype(x.dtype)

    def ir_body(self, k, *, num_groups, epsilon=1e-5, stash_type=1):
        x, sc = k.ins[0], k.ins[1]
        N, C = x.shape[:2]
        inner = prod(x.shape[2:])
        G = num_groups
        n = C // G * inner
        i0, i1, j = Var("i0"), Var("i1"), Var("j")
        xs, w, b = param(x), param(sc), param(k.ins[2])
        per_group = sc.size == G and G != C
        ch = i1 if per_group else i1 * (C // G) + j / inner
        r, v = value(k, "r", const=True), value(k, "v")
        return (_index_loops([N, G], [
            Decl(BASE, (i0 * G + i1) * n),
            *_mean_var(k, n, lambda jv: xs[BASE + jv]),
            Decl(r, kernel_lit(k, 1) / _sqrt(k, value(k, "var") + kernel_lit(k, epsilon))),
            For(j, n, [Decl(v, (xs[BASE + j] - value(k, "mean")) * r * w[ch] + b[ch]),
                       *store(k, v, BASE + j)])]))
