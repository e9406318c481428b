"""Indexing and data movement: Shape, Size, ConstantOfShape, EyeLike, Range,
Slice, Split, Expand, Tile, DepthToSpace, SpaceToDepth, Gather,
GatherElements, GatherND, ScatterElements, ScatterND, OneHot, Trilu,
ArgMax/ArgMin, CumSum/CumProd, TopK, Compress, ReverseSequence, Dropout,
NonZero/Unique (compile-time only).

Pure data movement (Slice, Expand, Tile, DepthToSpace, Split, ...) is one
strided copy: the output is walked in order while the input is read through
per-dimension strides computed at compile time (0 for a broadcast dimension,
negative for a reversed slice); adjacent dimensions that stay contiguous are
merged, so most copies are one or two loops.

Shape-like operands (Slice's starts/ends, Expand's shape, TopK's k, ...) must
be known at compile time (constants, bound graph inputs, or computed from
static shapes); they become attributes in `canonicalize`.
"""
from __future__ import annotations

import numpy as np

from ..codegen.cwriter import (ArrayDecl, Assign, Binary, Cast, Const, Decl, Expr, ExprStmt, For,
                               If, Index, Raw, RawExpr, Type, Var, and_, call, eq, ge, gt,
                               index_type, le, lt, not_, operand, or_, param, render_c, select)
from ..errors import UnsupportedError
from .base import Op, move_input_to_attr, need_const, register


I64 = Type("int64")


# -- loop helpers -----------------------------------------------------------------------

def prod(dims) -> int:
    return int(np.prod(dims, dtype=np.int64))


def strides_of(shape) -> list[int]:
    s, out = 1, []
    for d in reversed(shape):
        out.append(s)
        s *= d
    return list(reversed(out))


def naxis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def nest(shape, body: list[str], var: str = "i") -> list[str]:
    """Loops over `shape` (variables i0, i1, ...) around `body` (C lines)."""
    stmts = [Raw("\n".join(body))] if body else []
    for d in reversed(range(len(shape))):
        stmts = [For(Var(f"{var}{d}"), shape[d], stmts)]
    return render_c(stmts).splitlines()


def index_expr(base: int, terms) -> str:
    """C expression base + sum(var * stride) (size_t arithmetic; the total is
    never negative, so negative strides are written as subtractions)."""
    parts = [str(base)] if base else []
    for var, s in terms:
        if s == 0:
            continue
        mag = f"{var}" if abs(s) == 1 else f"{var} * {abs(s)}"
        parts.append(("- " if s < 0 else "+ ") + mag if parts else
                     (f"{mag}" if s > 0 else f"0 - {mag}"))
    return " ".join(parts) if parts else "0"


def _merge(shape, stride_lists):
    """Drop size-1 dims and merge adjacent dims that are contiguous in every view."""
    dims = [(n, [sl[d] for sl in stride_lists]) for d, n in enumerate(shape) if n != 1]
    out: list = []
    for n, ss in dims:
        if out:
            pn, ps = out[-1]
            if all(p == s * n for p, s in zip(ps, ss)):
                out[-1] = (pn * n, ss)
                continue
        out.append((n, ss))
    return [n for n, _ in out], [[ss[j] for _, ss in out] for j in range(len(stride_lists))]


def strided_copy(out_shape, src: str, base: int, strides, dst: str = "out0",
                 dst_base: int = 0) -> list[str]:
    """dst[dst_base + flat(i)] = src[base + sum(i_d * strides_d)] over out_shape."""
    if prod(out_shape) == 0:
        return []
    shape, (ss, ds) = _merge(out_shape, [list(strides), strides_of(out_shape)])
    dst_v, src_v = Var(dst), Var(src)
    if not shape:
        return [render_c(Assign(dst_v[dst_base], src_v[base]))]
    if len(shape) == 1 and ss[0] == 1 and ds[0] == 1 and shape[0] > 1:
        return [render_c(ExprStmt(call("memcpy", RawExpr(f"&{dst}[{dst_base}]"),
                                       RawExpr(f"&{src}[{base}]"),
                                       RawExpr(f"{shape[0]} * sizeof {dst}[0]"))))]
    vs = [f"i{d}" for d in range(len(shape))]
    return nest(shape, [render_c(Assign(Index(dst_v, RawExpr(index_expr(dst_base, zip(vs, ds)))),
                                        Index(src_v, RawExpr(index_expr(base, zip(vs, ss))))))])


def _loops(shape, body: list) -> list:
    """For loops over `shape` (variables i0, i1, ...) around C writer statements."""
    for d in reversed(range(len(shape))):
        body = [For(Var(f"i{d}"), shape[d], body)]
    return body


def _memcpy(dst: str, src: str, count: int) -> ExprStmt:
    """memcpy of `count` elements of out0's type (dst, src: C text of pointers)."""
    return ExprStmt(call("memcpy", RawExpr(dst), RawExpr(src),
                         RawExpr(f"{count} * sizeof out0[0]")))


def body(lines: list[str]) -> str:
    if not lines:
        return "/* empty output: nothing to compute */"
    return "\n".join(lines)


# -- values known from static shapes ---------------------------------------------------------

@register("Shape")
class Shape(Op):
    def reference(self, x, *, start=0, end=None):
        return np.array(np.shape(x)[slice(start, end)], np.int64)

    def static_outputs(self, node, inputs):
        return [self.reference(np.empty(inputs[0].shape, np.uint8), **node.attrs)]

    def infer(self, node, inputs, consts):
        return [(self.static_outputs(node, inputs)[0].shape, np.dtype(np.int64))]

    def emit(self, k, **attrs):   # folded before code generation
        raise UnsupportedError("Shape is folded at compile time")


@register("Size")
class Size(Op):
    def reference(self, x):
        return np.array(np.size(x), np.int64)

    def static_outputs(self, node, inputs):
        return [np.array(prod(inputs[0].shape), np.int64)]

    def infer(self, node, inputs, consts):
        return [((), np.dtype(np.int64))]


@register("EyeLike")
class EyeLike(Op):
    def reference(self, x, *, dtype=None, k=0):
        from .cast import np_dtype
        dt = np_dtype(dtype) if dtype is not None else x.dtype
        return np.eye(x.shape[0], x.shape[1], k=k, dtype=dt)

    def static_outputs(self, node, inputs):
        return [self.reference(np.empty(inputs[0].shape, inputs[0].dtype), **node.attrs)]


@register("ConstantOfShape")
class ConstantOfShape(Op):
    def canonicalize(self, node, graph, opset):
        move_input_to_attr(graph, node, 0, "shape")

    def reference(self, *, shape, value=None):
        v = np.zeros(1, np.float32) if value is None else np.asarray(value).ravel()
        return np.full(tuple(int(d) for d in shape), v[0], dtype=v.dtype)


@register("Range")
class Range(Op):
    def canonicalize(self, node, graph, opset):
        for i, name in ((2, "delta"), (1, "limit"), (0, "start")):
            move_input_to_attr(graph, node, i, name, lambda v: v)

    def reference(self, *, start, limit, delta):
        dt = np.asarray(start).dtype
        start, limit, delta = (np.asarray(v).ravel()[0] for v in (start, limit, delta))
        n = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
        return (start + np.arange(n) * delta).astype(dt)


# -- Slice, Split, Expand, Tile, DepthToSpace, SpaceToDepth ----------------------------------

def slice_params(shape, starts, ends, axes=None, steps=None):
    """Per input dim: (start, step, count) of the ONNX slice."""
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else [naxis(a, rank) for a in axes]
    steps = [1] * len(starts) if steps is None else list(steps)
    out = [(0, 1, d) for d in shape]
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            raise UnsupportedError("Slice step 0 is invalid")
        lo, hi, step = slice(int(s), int(e), int(st)).indices(shape[a])
        out[a] = (lo, step, len(range(lo, hi, step)))
    return out


@register("Slice")
class Slice(Op):
    def canonicalize(self, node, graph, opset):
        if opset >= 10:
            for i, name in ((4, "steps"), (3, "axes"), (2, "ends"), (1, "starts")):
                move_input_to_attr(graph, node, i, name)

    def reference(self, x, *, starts, ends, axes=None, steps=None):
        idx = tuple(slice(lo, lo + step * n if lo + step * n >= 0 else None, step)
                    for lo, step, n in slice_params(x.shape, starts, ends, axes, steps))
        return x[idx]

    def emit(self, k, *, starts, ends, axes=None, steps=None):
        x = k.ins[0]
        params = slice_params(x.shape, starts, ends, axes, steps)
        base = sum(lo * s for (lo, _, _), s in zip(params, x.strides))
        strides = [st * s for (_, st, _), s in zip(params, x.strides)]
        return body(strided_copy(k.out.shape, "in0", base, strides))


@register("Split")
class Split(Op):
    def canonicalize(self, node, graph, opset):
        if opset >= 13:
            move_input_to_attr(graph, node, 1, "split")
        node.attrs.setdefault("num_outputs", len(node.outputs))

    def _sizes(self, dim, split, num_outputs):
        if split is not None:
            return list(split)
        n = num_outputs
        chunk = -(-dim // n)
        return [min(chunk, max(dim - chunk * i, 0)) for i in range(n)]

    def reference(self, x, *, axis=0, split=None, num_outputs=None):
        a = naxis(axis, x.ndim)
        sizes = self._sizes(x.shape[a], split, num_outputs)
        return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=a))

    def emit(self, k, *, axis=0, split=None, num_outputs=None):
        x = k.ins[0]
        a = naxis(axis, len(x.shape))
        lines, off = [], 0
        for j, (b, n) in enumerate(zip(k.outs, self._sizes(x.shape[a], split, num_outputs))):
            if b is not None:
                lines += strided_copy(b.shape, "in0", off * x.strides[a], x.strides, b.c)
            off += n
        return body(lines)


@register("Expand")
class Expand(Op):
    def canonicalize(self, node, graph, opset):
        move_input_to_attr(graph, node, 1, "shape")

    def reference(self, x, *, shape):
        return x * np.ones(tuple(int(d) for d in shape), x.dtype)

    def emit(self, k, *, shape):
        from .elementwise import broadcast_strides
        x = k.ins[0]
        return body(strided_copy(k.out.shape, "in0", 0, broadcast_strides(x.shape, k.out.shape)))


@register("Tile")
class Tile(Op):
    def canonicalize(self, node, graph, opset):
        move_input_to_attr(graph, node, 1, "repeats")

    def reference(self, x, *, repeats):
        return np.tile(x, [int(r) for r in repeats])

    def emit(self, k, *, repeats):
        x = k.ins[0]
        # out viewed as (r0, d0, r1, d1, ...): the repeat dims have stride 0.
        shape, strides = [], []
        for r, d, s in zip(repeats, x.shape, x.strides):
            shape += [int(r), d]
            strides += [0, s]
        return body(strided_copy(shape, "in0", 0, strides))


def _permuted_view(in_shape6, perm):
    st = strides_of(in_shape6)
    return [in_shape6[p] for p in perm], [st[p] for p in perm]


@register("DepthToSpace")
class DepthToSpace(Op):
    def _view(self, shape, blocksize, mode):
        b, c, h, w = shape
        bs = blocksize
        if mode == "CRD":
            return _permuted_view([b, c // (bs * bs), bs, bs, h, w], [0, 1, 4, 2, 5, 3])
        return _permuted_view([b, bs, bs, c // (bs * bs), h, w], [0, 3, 4, 1, 5, 2])

    def reference(self, x, *, blocksize, mode="DCR"):
        b, c, h, w = x.shape
        bs = blocksize
        if mode == "CRD":
            t = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
        else:
            t = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
        return t.reshape(b, c // (bs * bs), h * bs, w * bs)

    def emit(self, k, *, blocksize, mode="DCR"):
        shape, strides = self._view(k.ins[0].shape, blocksize, mode)
        return body(strided_copy(shape, "in0", 0, strides))


@register("SpaceToDepth")
class SpaceToDepth(Op):
    PERM = {"DCR": [0, 3, 5, 1, 2, 4], "CRD": [0, 1, 3, 5, 2, 4]}

    def reference(self, x, *, blocksize, mode="DCR"):
        b, c, h, w = x.shape
        bs = blocksize
        t = x.reshape(b, c, h // bs, bs, w // bs, bs).transpose(*self.PERM[mode])
        return t.reshape(b, c * bs * bs, h // bs, w // bs)

    def emit(self, k, *, blocksize, mode="DCR"):
        b, c, h, w = k.ins[0].shape
        bs = blocksize
        shape, strides = _permuted_view([b, c, h // bs, bs, w // bs, bs], self.PERM[mode])
        return body(strided_copy(shape, "in0", 0, strides))


# -- gathers and scatters ------------------------------------------------------------------

def _wrap(var: str, src, dim: int, idx_dtype) -> list:
    """int64_t var = src, with a negative index counted from the end (C writer
    statements; src an expression or C text)."""
    v = Var(var, I64)
    out = [Decl(v, Cast(I64, operand(src)))]
    if np.dtype(idx_dtype).kind != "u":
        out.append(If(lt(v, 0), [Assign(v, Const(dim), "+=")]))
    return out


@register("Gather")
class Gather(Op):
    def reference(self, x, indices, *, axis=0):
        a = naxis(axis, x.ndim)
        idx = np.where(indices < 0, indices + x.shape[a], indices)
        return np.take(x, idx.astype(np.int64), axis=a)

    def emit(self, k, *, axis=0):
        x, ind = k.ins
        a = naxis(axis, len(x.shape))
        outer, dim, inner = prod(x.shape[:a]), x.shape[a], prod(x.shape[a + 1:])
        n = ind.size
        if k.out.size == 0:
            return body([])
        o, j, idx = Var("o"), Var("j"), Var("idx", I64)
        X, out = param(x), param(k.out, output=True)
        at = o * dim + Cast(index_type(), idx)
        if inner > 1:
            copy = _memcpy(f"&out0[{render_c((o * n + j) * inner)}]",
                           f"&in0[{render_c(at * inner)}]", inner)
        else:
            copy = Assign(out[o * n + j], X[at])
        inner_stmts = _wrap("idx", param(ind)[j], dim, ind.dtype) + [copy]
        return render_c(For(o, outer, [For(j, n, inner_stmts)]))


@register("GatherElements")
class GatherElements(Op):
    def reference(self, x, indices, *, axis=0):
        a = naxis(axis, x.ndim)
        idx = np.where(indices < 0, indices + x.shape[a], indices)
        return np.take_along_axis(x, idx.astype(np.int64), axis=a)

    def emit(self, k, *, axis=0):
        x, ind = k.ins
        a = naxis(axis, len(x.shape))
        if k.out.size == 0:
            return body([])
        vs = [f"i{d}" for d in range(len(ind.shape))]
        flat = index_expr(0, zip(vs, strides_of(ind.shape)))
        src = index_expr(0, [(v, s) for d, (v, s) in enumerate(zip(vs, x.strides)) if d != a])
        idx = Var("idx", I64)
        inner = _wrap("idx", f"in1[{flat}]", x.shape[a], ind.dtype)
        inner.append(Assign(Index(Var("out0"), RawExpr(flat)),
                            param(x)[RawExpr(src) + Cast(index_type(), idx) * x.strides[a]]))
        return body(nest(ind.shape, render_c(inner).splitlines()))


@register("ScatterElements", "Scatter")
class ScatterElements(Op):
    def reference(self, x, indices, updates, *, axis=0, reduction="none"):
        a = naxis(axis, x.ndim)
        out = x.copy()
        idx = np.where(indices < 0, indices + x.shape[a], indices).astype(np.int64)
        for pos in np.ndindex(*indices.shape):
            dst = list(pos)
            dst[a] = idx[pos]
            dst = tuple(dst)
            out[dst] = _reduce(reduction, out[dst], updates[pos])
        return out

    def emit(self, k, *, axis=0, reduction="none"):
        x, ind, upd = k.ins
        a = naxis(axis, len(x.shape))
        lines = [render_c(_memcpy("out0", "in0", x.size))] if x.size else []
        if ind.size:
            vs = [f"i{d}" for d in range(len(ind.shape))]
            flat = index_expr(0, zip(vs, strides_of(ind.shape)))
            dst = index_expr(0, [(v, s) for d, (v, s) in enumerate(zip(vs, x.strides)) if d != a])
            idx, d = Var("idx", I64), Var("d", Type(k.out.dtype, pointer=True))
            inner = _wrap("idx", f"in1[{flat}]", x.shape[a], ind.dtype)
            inner += [Decl(d, param(k.out, output=True) + RawExpr(dst)
                           + Cast(index_type(), idx) * x.strides[a]),
                      _c_reduce(reduction, d[0], Index(Var("in2"), RawExpr(flat)))]
            lines += nest(ind.shape, render_c(inner).splitlines())
        return body(lines)


def _reduce(reduction, old, new):
    if reduction == "add":
        return old + new
    if reduction == "mul":
        return old * new
    if reduction == "max":
        return np.maximum(old, new)
    if reduction == "min":
        return np.minimum(old, new)
    return new


def _c_reduce(reduction, d: Expr, u: Expr) -> Assign:
    """d = reduction(d, u) as a statement."""
    if reduction == "add":
        return Assign(d, d + u)
    if reduction == "mul":
        return Assign(d, d * u)
    if reduction == "max":
        return Assign(d, select(gt(d, u), d, u))
    if reduction == "min":
        return Assign(d, select(lt(d, u), d, u))
    return Assign(d, u)


@register("GatherND")
class GatherND(Op):
    def reference(self, x, indices, *, batch_dims=0):
        b = batch_dims
        bshape = x.shape[:b]
        m = indices.shape[-1]
        out_shape = indices.shape[:-1] + x.shape[b + m:]
        xb = x.reshape((prod(bshape),) + x.shape[b:])
        ib = indices.reshape((prod(bshape), -1, m))
        res = []
        for bi in range(xb.shape[0]):
            for t in ib[bi]:
                t = tuple(int(v) + (xb.shape[1 + j] if v < 0 else 0) for j, v in enumerate(t))
                res.append(xb[bi][t])
        return np.asarray(res, x.dtype).reshape(out_shape)

    def emit(self, k, *, batch_dims=0):
        x, ind = k.ins
        b, m = batch_dims, ind.shape[-1]
        B = prod(x.shape[:b])
        Q = prod(ind.shape[b:-1])
        inner = prod(x.shape[b + m:])
        if k.out.size == 0:
            return body([])
        bi, q = Var("bi"), Var("q")
        t, off = Var("t", index_type(const=True)), Var("off")
        cell = [Decl(t, (bi * Q + q) * m), Decl(off, bi * prod(x.shape[b:]))]
        for j in range(m):
            cell += _wrap(f"v{j}", param(ind)[t + j], x.shape[b + j], ind.dtype)
            cell.append(Assign(off, Cast(index_type(), Var(f"v{j}", I64))
                               * prod(x.shape[b + j + 1:]), "+="))
        cell.append(_memcpy(f"&out0[{render_c((bi * Q + q) * inner)}]", "&in0[off]", inner))
        return render_c(For(bi, B, [For(q, Q, cell)]))


@register("ScatterND")
class ScatterND(Op):
    def reference(self, x, indices, updates, *, reduction="none"):
        out = x.copy()
        m = indices.shape[-1]
        ind = indices.reshape(-1, m)
        upd = updates.reshape((ind.shape[0],) + x.shape[m:])
        for t, u in zip(ind, upd):
            t = tuple(int(v) + (x.shape[j] if v < 0 else 0) for j, v in enumerate(t))
            out[t] = _reduce(reduction, out[t], u)
        return out

    def emit(self, k, *, reduction="none"):
        x, ind, upd = k.ins
        m = ind.shape[-1]
        Q = prod(ind.shape[:-1])
        inner = prod(x.shape[m:])
        lines = [render_c(_memcpy("out0", "in0", x.size))] if x.size else []
        if Q and inner:
            q, e, off = Var("q"), Var("e"), Var("off")
            cell = [Decl(off, 0)]
            for j in range(m):
                cell += _wrap(f"v{j}", param(ind)[q * m + j], x.shape[j], ind.dtype)
                cell.append(Assign(off, Cast(index_type(), Var(f"v{j}", I64))
                                   * prod(x.shape[j + 1:]), "+="))
            out = param(k.out, output=True)
            cell.append(For(e, inner, [_c_reduce(reduction, out[off + e],
                                                 param(upd)[q * inner + e])]))
            lines.append(render_c(For(q, Q, cell)))
        return body(lines)


@register("OneHot")
class OneHot(Op):
    def canonicalize(self, node, graph, opset):
        d = need_const(graph, node, 1, "depth")
        node.attrs["depth"] = int(np.asarray(d).ravel()[0])
        node.inputs[1] = ""

    def axis_ranks(self, node, inputs):   # an axis of the output: one more dim
        return {"axis": (len(inputs[0].shape) + 1, 0)} if "axis" in node.attrs else {}

    def reference(self, indices, _unused, values, *, depth, axis=-1):
        idx = np.asarray(indices).astype(np.int64)
        idx = np.where(idx < 0, idx + depth, idx)
        rank = idx.ndim + 1
        a = naxis(axis, rank)
        hot = np.moveaxis(np.arange(depth) == idx[..., None], -1, a)
        return np.where(hot, values[1], values[0]).astype(values.dtype)

    def emit(self, k, *, depth, axis=-1):
        ind, _, val = k.ins
        a = naxis(axis, len(ind.shape) + 1)
        outer, inner = prod(ind.shape[:a]), prod(ind.shape[a:])
        if k.out.size == 0:
            return body([])
        i0, i1, i2 = Var("i0"), Var("i1"), Var("i2")
        idx, vals = Var("idx", I64), param(val)
        cell = _wrap("idx", param(ind)[i0 * inner + i2], depth, np.int64)
        cell.append(Assign(param(k.out, output=True)[(i0 * depth + i1) * inner + i2],
                           select(eq(idx, Cast(I64, i1)), vals[1], vals[0])))
        return render_c(_loops([outer, depth, inner], cell))


@register("Trilu")
class Trilu(Op):
    def canonicalize(self, node, graph, opset):
        v = need_const(graph, node, 1, "k")
        node.attrs["k"] = 0 if v is None else int(np.asarray(v).ravel()[0])
        node.inputs = node.inputs[:1]

    def reference(self, x, *, upper=1, k=0):
        return np.triu(x, k) if upper else np.tril(x, k)

    def emit(self, kk, *, upper=1, k=0):
        x = kk.ins[0]
        if kk.out.size == 0:
            return body([])
        R, C = x.shape[-2], x.shape[-1]
        i0, r, c = Var("i0"), Var("r"), Var("c")
        p = Var("p", index_type(const=True))
        diff = Cast(I64, c) - Cast(I64, r)
        cond = ge(diff, Const(k, "int64")) if upper else le(diff, Const(k, "int64"))
        return render_c(For(i0, prod(x.shape[:-2]), [For(r, R, [For(c, C, [
            Decl(p, (i0 * R + r) * C + c),
            Assign(param(kk.out, output=True)[p],
                   select(cond, param(x)[p], Const(0, kk.out.dtype)))])])]))


# -- along an axis: ArgMax/ArgMin, CumSum/CumProd, TopK ---------------------------------------

@register("ArgMax", "ArgMin")
class ArgMinMax(Op):
    def reference(self, x, *, axis=0, keepdims=1, select_last_index=0):
        a = naxis(axis, x.ndim)
        fn = np.argmax if self.name == "ArgMax" else np.argmin
        if select_last_index:
            r = x.shape[a] - 1 - fn(np.flip(x, a), axis=a)
        else:
            r = fn(x, axis=a)
        if keepdims:
            r = np.expand_dims(r, a)
        return r.astype(np.int64)

    def emit(self, k, *, axis=0, keepdims=1, select_last_index=0):
        x = k.ins[0]
        a = naxis(axis, len(x.shape))
        outer, n, inner = prod(x.shape[:a]), x.shape[a], prod(x.shape[a + 1:])
        cmp = ">" if self.name == "ArgMax" else "<"
        cmp += "=" if select_last_index else ""
        take = f"v {cmp} best"
        if np.dtype(x.dtype).kind == "f":   # the first (last) NaN wins, as np.argmax
            take = (f"v {cmp} best || isnan(v)" if select_last_index else
                    f"(v {cmp} best || isnan(v)) && !isnan(best)")
        if k.out.size == 0:
            return body([])
        X, i0, i1, r = param(x), Var("i0"), Var("i1"), Var("r")
        base = Var("base", index_type(const=True))
        best, v, at = Var("best", Type(x.dtype)), Var("v", Type(x.dtype)), Var("at", I64)
        cell = [Decl(base, i0 * (n * inner) + i1), Decl(best, X[base]), Decl(at, Const(0)),
                For(r, n, [Decl(v, X[base + r * inner]),
                           If(RawExpr(take), [Assign(best, v), Assign(at, Cast(I64, r))])],
                    begin=Const(1)),
                Assign(param(k.out, output=True)[i0 * inner + i1], at)]
        return render_c(For(i0, outer, [For(i1, inner, cell)]))


@register("CumSum", "CumProd")
class CumSum(Op):
    def canonicalize(self, node, graph, opset):
        v = need_const(graph, node, 1, "axis")
        node.attrs["axis"] = int(np.asarray(v).ravel()[0])
        node.inputs = node.inputs[:1]

    def reference(self, x, *, axis, exclusive=0, reverse=0):
        a = naxis(axis, x.ndim)
        fn = np.cumsum if self.name == "CumSum" else np.cumprod
        y = np.flip(x, a) if reverse else x
        r = fn(y, axis=a, dtype=x.dtype)
        if exclusive:
            ident = 0 if self.name == "CumSum" else 1
            pad = np.full_like(np.take(r, [0], axis=a), ident)
            r = np.concatenate([pad, np.take(r, range(r.shape[a] - 1), axis=a)], axis=a)
        return (np.flip(r, a) if reverse else r).astype(x.dtype)

    def emit(self, k, *, axis, exclusive=0, reverse=0):
        x = k.ins[0]
        a = naxis(axis, len(x.shape))
        outer, n, inner = prod(x.shape[:a]), x.shape[a], prod(x.shape[a + 1:])
        if k.out.size == 0:
            return body([])
        op, ident = ("+", 0) if self.name == "CumSum" else ("*", 1)
        i0, i1, r = Var("i0"), Var("i1"), Var("r")
        p, acc = Var("p", index_type(const=True)), Var("acc", Type(k.out.dtype))
        pos = (n - 1) - r if reverse else r
        store = Assign(param(k.out, output=True)[p], acc)
        update = Assign(acc, Binary(op, acc, param(x)[p]))
        cell = [Decl(acc, Const(ident, k.out.dtype)),
                For(r, n, [Decl(p, i0 * (n * inner) + pos * inner + i1),
                           *([store, update] if exclusive else [update, store])])]
        return render_c(For(i0, outer, [For(i1, inner, cell)]))


@register("TopK")
class TopK(Op):
    def canonicalize(self, node, graph, opset):
        if opset >= 10:
            v = need_const(graph, node, 1, "K")
            node.attrs["k"] = int(np.asarray(v).ravel()[0])
            node.inputs = node.inputs[:1]

    def reference(self, x, *, k, axis=-1, largest=1, sorted=1):
        a = naxis(axis, x.ndim)
        key = -x if largest else x
        if x.dtype.kind == "u" and largest:
            key = np.iinfo(x.dtype).max - x
        order = np.argsort(key, axis=a, kind="stable")
        if x.dtype.kind == "f" and largest:
            # NaN is the largest value (ONNX reference, onnxruntime): first, by index
            nan = np.isnan(np.take_along_axis(x, order, axis=a))
            order = np.take_along_axis(order, np.argsort(~nan, axis=a, kind="stable"), axis=a)
        idx = np.take(order, range(k), axis=a)
        return np.take_along_axis(x, idx, axis=a), idx.astype(np.int64)

    def emit(self, kk, *, k, axis=-1, largest=1, sorted=1):
        x = kk.ins[0]
        a = naxis(axis, len(x.shape))
        outer, n, inner = prod(x.shape[:a]), x.shape[a], prod(x.shape[a + 1:])
        if kk.outs[0].size == 0:
            return body([])
        cmp = ">" if largest else "<"
        # Repeated selection without scratch: the t-th pick is the best element
        # that comes after pick t-1 in the order (value, then lower index first).
        before = (lambda p, q: f"(in0[base + {p} * {inner}] {cmp} in0[base + {q} * {inner}] || "
                  f"(in0[base + {p} * {inner}] == in0[base + {q} * {inner}] && {p} < {q}))")
        if np.dtype(x.dtype).kind == "f":   # NaN ranks above every number, ties by index
            def before(p, q):
                xp, xq = f"in0[base + {p} * {inner}]", f"in0[base + {q} * {inner}]"
                first, second = (xp, xq) if largest else (xq, xp)
                return (f"({xp} {cmp} {xq} || (isnan({first}) && !isnan({second})) || "
                        f"(({xp} == {xq} || (isnan({xp}) && isnan({xq}))) && {p} < {q}))")
        i0, i1, t, r = Var("i0"), Var("i1"), Var("t"), Var("r")
        base, prev, best = Var("base", index_type(const=True)), Var("prev"), Var("best")
        out_idx = i0 * (k * inner) + t * inner + i1
        X = param(x)
        pick = For(r, n, [If(not_(and_(gt(t, 0), not_(RawExpr(before("prev", "r"))))), [
            If(or_(eq(best, n), RawExpr(before("r", "best"))), [Assign(best, r)])])])
        cell = [Decl(base, i0 * (n * inner) + i1), Decl(prev, 0),
                For(t, k, [Decl(best, n), pick,
                           Assign(param(kk.outs[0], output=True)[out_idx], X[base + best * inner]),
                           Assign(param(kk.outs[1], output=True)[out_idx], Cast(I64, best)),
                           Assign(prev, best)])]
        return render_c(For(i0, outer, [For(i1, inner, cell)]))


# -- with a compile-time condition / no data-dependent shapes -------------------------------

@register("Compress")
class Compress(Op):
    def canonicalize(self, node, graph, opset):
        v = need_const(graph, node, 1, "condition (its values decide the output shape)")
        node.attrs["condition"] = [bool(c) for c in np.asarray(v).ravel()]
        node.inputs = node.inputs[:1]

    def reference(self, x, *, condition, axis=None):
        return np.compress(condition, x, axis=axis)

    def emit(self, k, *, condition, axis=None):
        x = k.ins[0]
        if axis is None:
            shape, strides = [x.size], [1]
        else:
            shape, strides = list(x.shape), list(x.strides)
        a = 0 if axis is None else naxis(axis, len(x.shape))
        keep = [i for i, c in enumerate(condition[:shape[a]]) if c]
        outer, inner = prod(shape[:a]), prod(shape[a + 1:])
        if not keep or k.out.size == 0:
            return body([])
        table = Var("keep", index_type(const=True))
        i0, i1, i2 = Var("i0"), Var("i1"), Var("i2")
        copy = Assign(param(k.out, output=True)[(i0 * len(keep) + i1) * inner + i2],
                      param(x)[(i0 * shape[a] + table[i1]) * inner + i2])
        return render_c([ArrayDecl(table, [Const(i) for i in keep]),
                         *_loops([outer, len(keep), inner], [copy])])


class _DataDependent(Op):
    def check(self, node, inputs):
        raise UnsupportedError(
            f"{node.op}: the output shape depends on run-time values, which a statically "
            "planned program cannot hold; make its input a constant (or bind it with --bind) "
            "so it is computed at compile time")


@register("NonZero")
class NonZero(_DataDependent):
    def reference(self, x):
        return np.array(np.nonzero(x), np.int64)


@register("NonMaxSuppression")
class NonMaxSuppression(_DataDependent):
    """One output row per selected box: a count only known at run time."""

    def reference(self, *inputs, **attrs):
        raise UnsupportedError("NonMaxSuppression is not supported")


@register("Unique")
class Unique(_DataDependent):
    def reference(self, x, *, axis=None, sorted=1):
        raise UnsupportedError("Unique is not supported")


@register("ReverseSequence")
class ReverseSequence(Op):
    def reference(self, x, lens, *, batch_axis=1, time_axis=0):
        out = x.copy()
        t_in_slice = time_axis if time_axis < batch_axis else time_axis - 1
        for b in range(x.shape[batch_axis]):
            sel = [slice(None)] * x.ndim
            sel[batch_axis] = b
            sel[time_axis] = slice(0, int(lens[b]))
            out[tuple(sel)] = np.flip(x[tuple(sel)], axis=t_in_slice)
        return out

    def emit(self, k, *, batch_axis=1, time_axis=0):
        x = k.ins[0]
        st = x.strides
        inner = prod(x.shape[2:])
        T, B = x.shape[time_axis], x.shape[batch_axis]
        if k.out.size == 0:
            return body([])
        b, t, e = Var("b"), Var("t"), Var("e")
        n, src_t = Var("n", index_type(const=True)), Var("src_t", index_type(const=True))
        sb, sti = st[batch_axis], st[time_axis]
        return render_c(For(b, B, [For(t, T, [
            Decl(n, Cast(index_type(), param(k.ins[1])[b])),
            Decl(src_t, select(lt(t, n), n - 1 - t, t)),
            For(e, inner, [Assign(param(k.out, output=True)[b * sb + t * sti + e],
                                  param(x)[b * sb + src_t * sti + e])])])]))


@register("Dropout")
class Dropout(Op):
    """Inference: the identity (mask all true). Training mode with a ratio
    above 0 is random and not supported."""

    def canonicalize(self, node, graph, opset):
        if opset >= 12:
            tm = need_const(graph, node, 2, "training_mode")
            ratio = need_const(graph, node, 1, "ratio")
            if tm is not None and bool(np.asarray(tm).ravel()[0]) and \
                    (ratio is None or float(np.asarray(ratio).ravel()[0]) > 0):
                raise UnsupportedError("Dropout in training mode is random: not supported")
            node.inputs = node.inputs[:1]

    def reference(self, x, *, seed=None, ratio=None, is_test=None):
        return x.copy(), np.ones(x.shape, np.bool_)

    def emit(self, k, **attrs):
        lines = []
        if k.out.size:
            lines.append(_memcpy("out0", "in0", k.out.size))
        if len(k.outs) > 1 and k.outs[1] is not None and k.outs[1].size:
            lines.append(ExprStmt(call("memset", param(k.outs[1], output=True), 1,
                                       k.outs[1].size)))
        return render_c(lines) if lines else body([])


@register("TensorScatter")
class TensorScatter(Op):
    """KV-cache update: update's rows are written into past_cache along `axis`
    from each batch's write index (wrapping around in circular mode)."""

    def reference(self, cache, update, write_indices=None, *, axis=-2, mode="linear"):
        out = cache.copy()
        a = naxis(axis, cache.ndim)
        S, s = cache.shape[a], update.shape[a]
        for b in range(cache.shape[0]):
            start = 0 if write_indices is None else int(write_indices[b])
            for j in range(s):
                p = (start + j) % S if mode == "circular" else start + j
                src = [b] + [slice(None)] * (cache.ndim - 1)
                dst = list(src)
                src[a], dst[a] = j, p
                out[tuple(dst)] = update[tuple(src)]
        return out

    def emit(self, k, *, axis=-2, mode="linear"):
        cache, upd = k.ins[0], k.ins[1]
        idx = k.ins[2] if len(k.ins) > 2 else None
        a = naxis(axis, len(cache.shape))
        B = cache.shape[0]
        mid = prod(cache.shape[1:a])
        S, s, inner = cache.shape[a], upd.shape[a], prod(cache.shape[a + 1:])
        i0, i1, i2 = Var("i0"), Var("i1"), Var("i2")
        p = Var("p", index_type(const=True))
        start = Cast(index_type(), param(idx)[i0]) if idx is not None else Const(0)
        pos = (start + i2) % S if mode == "circular" else start + i2
        copy = _memcpy(f"&out0[{render_c(((i0 * mid + i1) * S + p) * inner)}]",
                       f"&in1[{render_c(((i0 * mid + i1) * s + i2) * inner)}]", inner)
        return render_c([_memcpy("out0", "in0", cache.size),
                         *_loops([B, mid, s], [Decl(p, pos), copy])])


@register("ArrayFeatureExtractor", domain="ai.onnx.ml")
class ArrayFeatureExtractor(Op):
    """Selects elements of the last axis by index."""

    def reference(self, x, indices):
        idx = np.asarray(indices).ravel().astype(np.int64)
        out = np.take(x, idx, axis=-1)
        return out if x.ndim > 1 else out.reshape(1, -1)

    def emit(self, k):
        x, ind = k.ins
        n = ind.size
        last = x.shape[-1]
        outer = prod(x.shape[:-1])
        i0, i1 = Var("i0"), Var("i1")
        return render_c(_loops([outer, n], [Assign(
            param(k.out, output=True)[i0 * n + i1],
            param(x)[i0 * last + Cast(index_type(), param(ind)[i1])])]))
