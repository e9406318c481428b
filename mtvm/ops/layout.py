"""Data movement: Transpose, Concat, Pad, CenterCropPad, Col2Im. They work for any dtype (they only
copy), the Pad constant is written in the tensor's type.

Unsupported: pads or axes computed at run time ("input 1 (pads) must be a
constant"); reflect padding of at least the axis size, or wrap padding of more
than it ("mode 'reflect': padding axis 1 of size 3 by (3, 0) is not supported;
at most 2 on each side"); NumPy would reflect repeatedly.
Negative pads crop first; the mode then pads the cropped tensor.
"""
from __future__ import annotations

import numpy as np

from ..codegen.cwriter import (VOID, Assign, Cast, Decl, ExprStmt, For, If, Index, Raw, RawExpr,
                               Type, Var, and_, call, ge, index_type, kernel_dtype, lt, param,
                               render_c, sum_of, tail)
from ..errors import ShapeError, UnsupportedError
from .base import Op, move_input_to_attr, need_const, register
from .indexing import body, strides_of
from .reduce import indent, norm_axis, prod


def _strides(shape) -> list[int]:
    return [prod(shape[d + 1:]) for d in range(len(shape))]


def _index(terms: list[tuple[str, int]]) -> str:
    """sum of var * stride as C (stride 1 written bare, 0 dropped)."""
    parts = [v if s == 1 else f"{v} * {s}" for v, s in terms if s]
    return " + ".join(parts) or "0"


def _nest(sizes: list[int], names: list[str], body: list[str]) -> list[str]:
    """Nested for loops over `sizes` with loop variables `names` around `body`."""
    stmts = [Raw("\n".join(body))] if body else []
    for size, v in reversed(list(zip(sizes, names))):
        stmts = [For(Var(v), size, stmts)]
    return render_c(stmts).splitlines()


def _memset(out0: Var, count: int) -> ExprStmt:
    """out0's `count` elements set to zero."""
    return ExprStmt(call("memset", out0, 0, RawExpr(f"{count} * sizeof out0[0]")))


def _store(k, value: str, idx: str) -> list[str]:
    """v = value; the fused tail; out0[idx] = v (C lines; value and idx C text)."""
    v = Var("v", Type(kernel_dtype(k)))
    return render_c([Decl(v, RawExpr(value)), *tail(k, v, RawExpr(idx)),
                     Assign(Index(Var("out0"), RawExpr(idx)), v)]).splitlines()


# -- Transpose ----------------------------------------------------------------------

def transpose_dims(shape, perm) -> list[list[int]]:
    """A Transpose's output dims as [size, input stride], outermost first: size-1 dims
    dropped, dims that stay adjacent in the input merged ([[1, 1]] for one element)."""
    perm = list(perm) if perm else list(reversed(range(len(shape))))
    in_st = _strides(shape)
    dims: list[list[int]] = []
    for p in perm:
        size, st = shape[p], in_st[p]
        if size == 1:
            continue
        if dims and dims[-1][1] == size * st:
            dims[-1] = [dims[-1][0] * size, st]
        else:
            dims.append([size, st])
    return dims or [[1, 1]]


@register("Transpose")
class Transpose(Op):
    """out[i0, i1, ...] = x[... indexed by perm ...]; perm defaults to reversed."""
    anchor = True

    def reference(self, x, *, perm=None):
        return np.transpose(x, perm)

    def infer(self, node, inputs, consts):
        shape = inputs[0].shape
        perm = node.attrs.get("perm") or list(reversed(range(len(shape))))
        if sorted(perm) != list(range(len(shape))):
            raise ShapeError(f"perm {list(perm)} is not a permutation of {len(shape)} axes")
        return [(tuple(shape[p] for p in perm), inputs[0].dtype)]

    def emit(self, k, *, perm=None):
        x = k.ins[0]
        dims = transpose_dims(x.shape, perm)
        sizes = [d[0] for d in dims]
        names = [f"i{d}" for d in range(len(dims))]
        out_idx = _index(list(zip(names, _strides(sizes))))
        in_idx = _index([(v, d[1]) for v, d in zip(names, dims)])
        return "\n".join(_nest(sizes, names, _store(k, f"{x.c}[{in_idx}]", out_idx)))


# -- Concat -------------------------------------------------------------------------

@register("Concat")
class Concat(Op):
    """Along `axis` (negative counts from the end): each input's slab is copied
    once per outer index with memcpy."""

    def canonicalize(self, node, graph, opset):
        if "axis" not in node.attrs:
            raise UnsupportedError("Concat needs an axis attribute")
        rank = len(graph.tensors[node.inputs[0]].shape)
        node.attrs["axis"] = norm_axis(node.attrs["axis"], rank)

    def reference(self, *xs, axis):
        return np.concatenate([x for x in xs if x is not None], axis=axis)

    def infer(self, node, inputs, consts):
        axis = node.attrs["axis"]
        first = inputs[0].shape
        for t in inputs[1:]:
            if len(t.shape) != len(first) or any(a != b for d, (a, b) in
                                                 enumerate(zip(t.shape, first)) if d != axis):
                raise ShapeError(f"Concat inputs {[list(t.shape) for t in inputs]} differ "
                                 f"outside axis {axis}")
        out = list(first)
        out[axis] = sum(t.shape[axis] for t in inputs)
        return [(tuple(out), inputs[0].dtype)]

    def emit(self, k, *, axis):
        out = k.out
        outer = prod(out.shape[:axis])
        inner = prod(out.shape[axis + 1:])
        row = out.shape[axis] * inner
        o, out0 = Var("o"), Var("out0", Type(out.dtype, pointer=True))
        lines, offset = [], 0
        for b in k.ins:
            chunk = b.shape[axis] * inner
            if chunk == 0:
                continue
            nbytes = RawExpr(f"{chunk} * sizeof({b.ctype})")
            src = Var(b.c, Type(b.dtype, pointer=True, const=True))
            if outer == 1:
                dst = out0 + offset if offset else out0
                lines.append(ExprStmt(call("memcpy", dst, src, nbytes)))
            else:
                dst = out0 + o * row + offset if offset else out0 + o * row
                lines.append(ExprStmt(call("memcpy", dst, src + o * chunk, nbytes)))
            offset += chunk
        if outer != 1 and lines:
            lines = [For(o, outer, lines)]
        return render_c(lines) if lines else render_c(ExprStmt(Cast(Type(VOID), out0)))


# -- Pad ----------------------------------------------------------------------------

def _full_pads(pads, axes, rank) -> list[int]:
    """pads for every axis: [begin_0 .. begin_r-1, end_0 .. end_r-1]."""
    pads = [int(p) for p in pads]
    if axes is None:
        axes = list(range(rank))
    axes = [norm_axis(int(a), rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise ShapeError(f"pads has {len(pads)} values; {2 * len(axes)} expected "
                         f"(begin and end for each of {len(axes)} axes)")
    full = [0] * (2 * rank)
    for i, a in enumerate(axes):
        full[a], full[rank + a] = pads[i], pads[len(axes) + i]
    return full


def _axis_plan(n: int, begin: int, end: int) -> tuple[int, int, int, int]:
    """(pad before, pad after, crop before, kept extent) of one axis; negative
    pads crop, and padding then applies to the cropped extent."""
    crop_b, crop_e = max(-begin, 0), max(-end, 0)
    return max(begin, 0), max(end, 0), crop_b, n - crop_b - crop_e


@register("Pad")
class Pad(Op):
    """Canonical form: `pads` (2 * rank values, begin then end), `mode`
    (constant, reflect, edge, wrap) and `value`; opset >= 11 passes pads,
    the constant value and (opset >= 18) axes as inputs, which must be constant."""
    anchor = True

    def canonicalize(self, node, graph, opset):
        rank = len(graph.tensors[node.inputs[0]].shape)
        if opset >= 11:
            axes = need_const(graph, node, 3, "axes")
            pads = need_const(graph, node, 1, "pads")
            if pads is None:
                raise UnsupportedError("Pad needs a pads input")
            node.attrs["pads"] = _full_pads(pads.tolist(), None if axes is None
                                            else axes.tolist(), rank)
            # A constant constant_value becomes the `value` attribute; one computed
            # at run time stays an input (read once by the kernel).
            value_in = node.inputs[2] if len(node.inputs) > 2 else ""
            value = graph.const(value_in) if value_in else None
            if value is not None:
                node.attrs["value"] = np.asarray(value).ravel()[0].item() \
                    if np.size(value) else 0.0
            node.inputs[1:] = [value_in] if value_in and value is None else []
        else:
            node.attrs["pads"] = _full_pads(node.attrs["pads"], None, rank)

    def check(self, node, inputs):
        mode = node.attrs.get("mode", "constant")
        if mode not in ("constant", "reflect", "edge", "wrap"):
            raise UnsupportedError(f"mode {mode!r} is not supported")
        shape, pads = inputs[0].shape, node.attrs["pads"]
        rank = len(shape)
        for d, n in enumerate(shape):
            pb, pe, _, kept = _axis_plan(n, pads[d], pads[rank + d])
            if kept < 0:
                raise ShapeError(f"negative pads crop more than axis {d} holds")
            if mode == "constant" or not (pb or pe):
                continue
            limit = {"reflect": kept - 1, "edge": None, "wrap": kept}[mode]
            if kept == 0 or (limit is not None and max(pb, pe) > limit):
                raise UnsupportedError(
                    f"mode {mode!r}: padding axis {d} of size {kept} by ({pb}, {pe}) is not "
                    f"supported; at most {limit} on each side")

    def reference(self, x, value_in=None, *, pads, mode="constant", value=0.0):
        if value_in is not None:
            value = np.asarray(value_in).ravel()[0]
        rank = x.ndim
        crop = tuple(slice(max(-pads[d], 0), x.shape[d] - max(-pads[rank + d], 0))
                     for d in range(rank))
        width = [(max(pads[d], 0), max(pads[rank + d], 0)) for d in range(rank)]
        x = x[crop]
        if mode == "constant":
            return np.pad(x, width, mode="constant", constant_values=value).astype(x.dtype)
        return np.pad(x, width, mode=mode).astype(x.dtype)

    def infer(self, node, inputs, consts):
        shape, pads = inputs[0].shape, node.attrs["pads"]
        rank = len(shape)
        out = tuple(n + pads[d] + pads[rank + d] for d, n in enumerate(shape))
        return [(out, inputs[0].dtype)]

    def emit(self, k, *, pads, mode="constant", value=0.0):
        x = k.ins[0]
        rank = len(x.shape)
        out_shape = k.out.shape
        in_st = _strides(x.shape)
        names = [f"o{d}" for d in range(rank)]
        # Constant mode splits the last dim into fill / copy / fill loops; the
        # other modes map every output coordinate to a source coordinate.
        loops = rank - 1 if mode == "constant" else rank
        body, terms, conds = [], [], []
        for d, n in enumerate(x.shape[:loops]):
            pb, pe, crop, kept = _axis_plan(n, pads[d], pads[rank + d])
            if not (pb or pe or crop):
                terms.append((names[d], in_st[d]))
                continue
            s = f"s{d}"
            lines = [f"ptrdiff_t {s} = (ptrdiff_t){names[d]}" + (f" - {pb};" if pb else ";")]
            if pb or pe:
                if mode == "constant":
                    conds.append(f"{s} >= 0 && {s} < {kept}")
                elif mode == "edge":
                    lines += [f"if ({s} < 0) {s} = 0;",
                              f"else if ({s} >= {kept}) {s} = {kept - 1};"]
                elif mode == "reflect":
                    lines += [f"if ({s} < 0) {s} = -{s};",
                              f"else if ({s} >= {kept}) {s} = {2 * kept - 2} - {s};"]
                else:  # wrap
                    lines += [f"if ({s} < 0) {s} += {kept};",
                              f"else if ({s} >= {kept}) {s} -= {kept};"]
            if len(lines) == 1:
                lines[0] = "const " + lines[0]
            body.append((d, lines))
            terms.append((f"({s} + {crop})" if crop else s, in_st[d]))
        fill = k.lit(value) if len(k.ins) < 2 else f"{k.ins[1].c}[0]"
        out_idx = _index(list(zip(names, _strides(out_shape))))
        if loops == rank:
            inner = _store(k, f"{x.c}[{_index(terms)}]", out_idx)
        else:
            inner = self._constant_row(k, x, pads, names[-1], terms, conds, fill, out_idx)
        # Statements of dim d go right inside loop d.
        per_dim = dict(body)
        for d in reversed(range(loops)):
            inner = [f"for (size_t {names[d]} = 0; {names[d]} < {out_shape[d]}; "
                     f"++{names[d]}) {{"] + indent(per_dim.get(d, []) + inner) + ["}"]
        return "\n".join(inner)

    @staticmethod
    def _constant_row(k, x, pads, v, terms, conds, fill, out_idx) -> list[str]:
        """The last dim in constant mode: fill, copy, fill (or all fill when an
        outer coordinate is in the padding)."""
        rank = len(x.shape)
        pb, pe, crop, kept = _axis_plan(x.shape[-1], pads[rank - 1], pads[-1])
        width = pb + kept + pe
        src = v + (f" - {pb}" if pb else "") + (f" + {crop}" if crop else "")
        read = f"{x.c}[{_index(terms + [(f'({src})' if ' ' in src else src, 1)])}]"

        def loop(lo, hi, value):
            if hi <= lo:
                return []
            return [f"for (size_t {v} = {lo}; {v} < {hi}; ++{v}) {{"] + \
                indent(_store(k, value, out_idx)) + ["}"]

        row = loop(0, pb, fill) + loop(pb, pb + kept, read) + loop(pb + kept, width, fill)
        if not conds:
            return row
        return ([f"if ({' && '.join(conds)}) {{"] + indent(row) + ["} else {"]
                + indent(loop(0, width, fill)) + ["}"])


@register("CenterCropPad")
class CenterCropPad(Op):
    def canonicalize(self, node, graph, opset):
        move_input_to_attr(graph, node, 1, "shape")

    def _plan(self, in_shape, shape, axes):
        rank = len(in_shape)
        axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
        out_shape, src_start, dst_start, count = list(in_shape), [0] * rank, [0] * rank, \
            list(in_shape)
        for a, sh in zip(axes, shape):
            dim = in_shape[a]
            out_shape[a] = sh
            if sh < dim:
                src_start[a] = (dim - sh) // 2
                count[a] = sh
            elif sh > dim:
                dst_start[a] = (sh - dim) // 2
        return out_shape, src_start, dst_start, count

    def reference(self, x, *, shape, axes=None):
        out_shape, ss, ds, cnt = self._plan(x.shape, shape, axes)
        res = np.zeros(out_shape, x.dtype)
        res[tuple(slice(d, d + c) for d, c in zip(ds, cnt))] = \
            x[tuple(slice(s, s + c) for s, c in zip(ss, cnt))]
        return res

    def emit(self, k, *, shape, axes=None):
        x = k.ins[0]
        out_shape, ss, ds, cnt = self._plan(x.shape, shape, axes)
        ost, ist = strides_of(out_shape), x.strides
        out0 = param(k.out, output=True)
        lines = [_memset(out0, k.out.size)]
        if prod(cnt):
            iv = [Var(f"i{d}") for d in range(len(cnt))]
            src = sum_of([sum(s * st for s, st in zip(ss, ist))]
                         + [v * st for v, st in zip(iv, ist)])
            dst = sum_of([sum(d * st for d, st in zip(ds, ost))]
                         + [v * st for v, st in zip(iv, ost)])
            inner = [Assign(out0[dst], param(x)[src])]
            for d in reversed(range(len(cnt))):
                inner = [For(iv[d], cnt[d], inner)]
            lines += inner
        return render_c(lines)


@register("Col2Im")
class Col2Im(Op):
    """Sums the columns of an im2col matrix back into an image (N-D)."""

    def canonicalize(self, node, graph, opset):
        move_input_to_attr(graph, node, 2, "block_shape")
        move_input_to_attr(graph, node, 1, "image_shape")

    def _geom(self, image_shape, block_shape, dilations, pads, strides):
        D = len(image_shape)
        dil = dilations or [1] * D
        st = strides or [1] * D
        pd = pads or [0] * (2 * D)
        nb = [(image_shape[i] + pd[i] + pd[i + D] - dil[i] * (block_shape[i] - 1) - 1) // st[i]
              + 1 for i in range(D)]
        return D, dil, st, pd, nb

    def reference(self, x, *, image_shape, block_shape, dilations=None, pads=None,
                  strides=None):
        D, dil, st, pd, nb = self._geom(image_shape, block_shape, dilations, pads, strides)
        N, CK, L = x.shape
        K = prod(block_shape)
        C = CK // K
        out = np.zeros((N, C) + tuple(image_shape), x.dtype)
        for kidx in np.ndindex(*block_shape):
            kf = int(np.ravel_multi_index(kidx, block_shape))
            for lidx in np.ndindex(*nb):
                lf = int(np.ravel_multi_index(lidx, nb))
                pos = [lidx[i] * st[i] - pd[i] + kidx[i] * dil[i] for i in range(D)]
                if all(0 <= p < s for p, s in zip(pos, image_shape)):
                    out[(slice(None), slice(None)) + tuple(pos)] += x[:, kf::K][:, :C, lf]
        return out

    def emit(self, k, *, image_shape, block_shape, dilations=None, pads=None, strides=None):
        D, dil, st, pd, nb = self._geom(image_shape, block_shape, dilations, pads, strides)
        x = k.ins[0]
        N, CK, L = x.shape
        K = prod(block_shape)
        C = CK // K
        P = prod(image_shape)
        loops = [N, C] + list(block_shape) + nb
        iv = [Var(f"i{d}") for d in range(len(loops))]
        kv, lv = iv[2:2 + D], iv[2 + D:]
        pv = [Var(f"p{i}", Type("int64", const=True)) for i in range(D)]
        kf = sum_of([v * prod(block_shape[i + 1:]) for i, v in enumerate(kv)])
        lf = sum_of([v * prod(nb[i + 1:]) for i, v in enumerate(lv)])
        inner = [Decl(p, Cast(Type("int64"), lv[i] * st[i] + kv[i] * dil[i]) - pd[i])
                 for i, p in enumerate(pv)]
        cond = None
        for i, p in enumerate(pv):
            c = and_(ge(p, 0), lt(p, image_shape[i]))
            cond = c if cond is None else and_(cond, c)
        pf = sum_of([Cast(index_type(), p) * prod(image_shape[i + 1:]) for i, p in enumerate(pv)])
        out0 = param(k.out, output=True)
        inner.append(If(cond, [Assign(out0[(iv[0] * C + iv[1]) * P + pf],
                                      param(x)[(iv[0] * CK + iv[1] * K + kf) * L + lf], "+=")]))
        for d in reversed(range(len(loops))):
            inner = [For(iv[d], loops[d], inner)]
        return render_c([_memset(out0, k.out.size)] + inner)
