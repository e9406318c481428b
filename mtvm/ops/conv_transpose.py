"""ConvTranspose (1-D..3-D, groups, dilations, output_padding, output_shape,
auto_pad), LpPool / GlobalLpPool and DeformConv (2-D).

ConvTranspose is computed in gather form: each output element sums the input
elements whose strided, dilated footprint covers it, so the fused
elementwise tail (bias, activation) runs once per output value.
"""
from __future__ import annotations

import numpy as np

from ..codegen.cwriter import (Assign, Cast, Comment, Const, Decl, ExprStmt, For, If, Index,
                               LocalArray, Raw, RawExpr, Type, Var, and_, call, eq, ge,
                               index_type, lt, param, render_c, select, sum_of, tail)
from ..errors import ShapeError
from .base import Op, register
from .indexing import prod

F, CF = Type("float32"), Type("float32", const=True)
I64, CI64 = Type("int64"), Type("int64", const=True)


def _f(value) -> Const:
    """A float constant."""
    return Const(float(value), "float32")
from .recurrent import reference_via_onnx


def _geometry(x_shape, w_shape, attrs):
    """(output spatial sizes, pads_begin, strides, dilations)."""
    D = len(x_shape) - 2
    ks = attrs.get("kernel_shape") or list(w_shape[2:])
    st = attrs.get("strides") or [1] * D
    dil = attrs.get("dilations") or [1] * D
    op = attrs.get("output_padding") or [0] * D
    pads = list(attrs.get("pads") or [0] * (2 * D))
    auto = attrs.get("auto_pad", "NOTSET")
    ins = x_shape[2:]
    full = [st[i] * (ins[i] - 1) + op[i] + (ks[i] - 1) * dil[i] + 1 for i in range(D)]
    out_shape = attrs.get("output_shape")
    if out_shape is not None:
        out = list(out_shape)[-D:]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        out = [ins[i] * st[i] for i in range(D)]
    else:
        out = [full[i] - pads[i] - pads[i + D] for i in range(D)]
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        for i in range(D):
            total = max(full[i] - out[i], 0)
            # the odd unit of padding at the end for SAME_UPPER, else (SAME_LOWER, and
            # NOTSET with output_shape) at the start, as the spec and onnxruntime have it
            if auto == "SAME_UPPER":
                pads[i], pads[i + D] = total // 2, total - total // 2
            else:
                pads[i], pads[i + D] = total - total // 2, total // 2
    return out, pads[:D], st, dil, ks


@register("ConvTranspose")
class ConvTranspose(Op):
    anchor = True

    def reference(self, x, w, b=None, **attrs):
        return reference_via_onnx("ConvTranspose", [x, w, b], attrs, 1)[0]

    def infer(self, node, inputs, consts):
        x, w = inputs[0], inputs[1]
        out, _, _, _, _ = _geometry(x.shape, w.shape, node.attrs)
        g = node.attrs.get("group", 1)
        return [((x.shape[0], w.shape[1] * g, *out), np.dtype(x.dtype))]

    def check(self, node, inputs):
        x, w = inputs[0], inputs[1]
        g = node.attrs.get("group", 1)
        b = inputs[2] if len(inputs) > 2 else None
        if x.shape[1] != w.shape[0] or x.shape[1] % g:
            raise ShapeError(f"W of shape {list(w.shape)} does not take X's {x.shape[1]} "
                             f"channels in {g} group(s)")
        if b is not None and tuple(b.shape) != (w.shape[1] * g,):
            raise ShapeError(f"B of shape {list(b.shape)}: it needs one value per output "
                             f"channel ({w.shape[1] * g})")

    def macs(self, node, inputs, outputs):
        x, w = inputs[0], inputs[1]
        return prod(x.shape) * prod(w.shape[1:])

    def emit(self, k, **attrs):
        x, w = k.ins[0], k.ins[1]
        b = k.ins[2] if len(k.ins) > 2 else None
        out, pb, st, dil, ks = _geometry(x.shape, w.shape, attrs)
        D = len(out)
        G = attrs.get("group", 1)
        N, Ci = x.shape[:2]
        Cog = w.shape[1]
        Cig = Ci // G
        Co = Cog * G
        ins = x.shape[2:]
        T = Type(k.outs[0].dtype)
        X, Wt = param(x), param(w)
        iv = [Var(f"i{d}") for d in range(D + 2)]
        ov, kv = iv[2:], [Var(f"k{d}") for d in range(D)]
        qv = [Var(f"q{d}", CI64) for d in range(D)]
        g, oc, ic = Var("g", index_type(const=True)), Var("oc", index_type(const=True)), Var("ic")
        acc, p = Var("acc", T), Var("p", index_type(const=True))
        tap = [Decl(q, Cast(I64, o) + pb[d] - Cast(I64, kk) * dil[d])
               for d, (q, o, kk) in enumerate(zip(qv, ov, kv))]
        cond = None
        for d, q in enumerate(qv):
            c = and_(and_(ge(q, 0), eq(q % st[d], 0)), lt(q / st[d], ins[d]))
            cond = c if cond is None else and_(cond, c)
        xi = sum_of([Cast(index_type(), q / st[d]) * prod(ins[d + 1:]) for d, q in enumerate(qv)])
        wi = sum_of([kk * prod(ks[d + 1:]) for d, kk in enumerate(kv)])
        tap.append(If(cond, [Assign(acc, X[(iv[0] * Ci + g * Cig + ic) * prod(ins) + xi]
                                    * Wt[((g * Cig + ic) * Cog + oc) * prod(ks) + wi], "+=")]))
        for d in reversed(range(D)):
            tap = [For(kv[d], ks[d], tap)]
        o_flat = sum_of([o * prod(out[d + 1:]) for d, o in enumerate(ov)])
        inner = [Decl(g, iv[1] / Cog), Decl(oc, iv[1] % Cog),
                 Decl(acc, param(b)[iv[1]] if b is not None else Const(0, T.dtype)),
                 For(ic, Cig, tap),
                 Decl(p, iv[1] * prod(out) + iv[0] * (Co * prod(out)) + o_flat),
                 *tail(k, acc, p, iv[1]),
                 Assign(param(k.outs[0], output=True)[p], acc)]
        for d in reversed(range(D + 2)):
            inner = [For(iv[d], ([N, Co] + list(out))[d], inner)]
        return render_c(inner)


def stride_sized(x_shape, w_shape, attrs) -> bool:
    """Kernel == stride, no dilation, padding or output padding, one group (a
    U-Net's 2x2 stride-2 up-convolution): every output pixel has exactly one tap,
    the one of its phase (output index mod stride)."""
    out, pb, st, dil, ks = _geometry(x_shape, w_shape, attrs)
    return (attrs.get("group", 1) == 1 and list(ks) == list(st) and all(d == 1 for d in dil)
            and not any(pb) and list(out) == [i * s for i, s in zip(x_shape[2:], st)])


def pack_phases(w: np.ndarray, mr: int) -> np.ndarray:
    """W [Ci][Co][k...] -> per phase (tap), per block of mr output channels,
    [ci][mr]: the packed operand of the float GEMM micro-kernel. Phase p's block
    at output channel m0 starts at element (p * Co + m0) * Ci."""
    ci, co = w.shape[:2]
    taps = w.reshape(ci, co, -1)
    blocks = [taps[:, m0:m0 + mr, p].ravel() for p in range(taps.shape[2])
              for m0 in range(0, co, mr)]
    return np.ascontiguousarray(np.concatenate(blocks).astype(np.float32))


def emit_phase_gemm(k, attrs: dict, mr: int) -> str:
    """A stride-sized ConvTranspose as one pointwise GEMM per phase: for phase
    (ph, pw), y[oc][ih * s + ph][iw * s + pw] = b[oc] + sum_ci W[ci][oc][ph][pw]
    x[ci][ih][iw], through the float GEMM micro-kernel over flat input positions
    (x read in place, weights packed by pack_phases into in1)."""
    from dataclasses import replace

    from .microkernels import column_tiles, row_blocks
    x, w = k.ins[0], k.ins[1]
    b = k.ins[2] if len(k.ins) > 2 else None
    out, _, st, _, ks = _geometry(x.shape, w.shape, attrs)
    n_batch, ci = x.shape[:2]
    co = w.shape[1]
    ins, phases, hw, ohw = x.shape[2:], prod(ks), prod(x.shape[2:]), prod(out)
    packed = pack_phases(np.asarray(w.const), mr)
    name = k.graph.add_const(f"{w.name}_phases{mr}", packed)
    k.ins[1] = replace(w, name=name, shape=packed.shape, const=packed)
    D = len(ins)
    n, ph, r, q, q0 = (Var(v) for v in ("n", "ph", "r", "q", "q0"))
    oc, x_at = Var("oc", index_type(const=True)), Var("x_at", index_type(const=True))
    p, acc = Var("p", index_type(const=True)), Var("acc", Type(k.outs[0].dtype))
    # Output offset of input position x_at (flat) in phase ph.
    if D == 1:
        pos = x_at * st[0] + ph
    else:
        pos = ((x_at / ins[1] * st[0] + ph / st[1]) * out[1] + x_at % ins[1] * st[1]
               + ph % st[1])
    wb = Var("wb", Type("float32", pointer=True, const=True))

    def block(m0: str, rows: int) -> list[str]:
        value = Index(Var("tile", Type("float32", pointer=True)), r * RawExpr("MTVM_F32_NR") + q)
        store = [Decl(oc, RawExpr(m0) + r), Decl(x_at, q0 + q),
                 Decl(p, n * (co * ohw) + oc * ohw + pos),
                 Decl(acc, value + param(b)[oc] if b else value),
                 *tail(k, acc, p, oc),
                 Assign(param(k.outs[0], output=True)[p], acc)]
        first = Decl(wb, param(k.ins[1]) + (ph * co + RawExpr(m0)) * ci)
        return [render_c(first)] + column_tiles(
            k, rows=rows, taps=ci, a="wb", b=f"in0 + n * {ci * hw} + q0", ldb=hw, cols=hw,
            store=render_c(store).splitlines())
    loops = [Comment(f"Schedule: ConvTranspose as {phases} pointwise GEMMs, one per phase"),
             Comment("(kernel == stride: each output pixel has one tap); weights packed per"),
             Comment(f"phase in blocks of {mr} output channels.")]
    if D == 2 and (k.target.is_generic or k.target.is_x86):
        return render_c(loops + _phase_rows(k, x, b, ins, out, st, co, ci, mr))
    loops.append(For(n, n_batch, [For(ph, phases, [Raw("\n".join(row_blocks(co, mr, block)))])]))
    return render_c(loops)


def _phase_rows(k, x, b, ins, out, st, co: int, ci: int, mr: int) -> list:
    """Hosts, 2-D: per row phase ph, block of output channels and input row, tiles of
    the row's positions, one per column phase pw, then stored interleaved --
    y[oc][i s0 + ph][(j0 + q) s1 + pw], consecutive addresses for consecutive (q, pw),
    which gcc vectorizes -- where the flat-position tiles' stores divided each position
    by the row width (a U-Net's 64 -> 32 up-convolution on a 10 x 14 input: the stores
    took about 2.5x its FMAs)."""
    from .microkernels import gemm_ukernel, row_blocks
    hw, ohw, s0, s1 = ins[0] * ins[1], out[0] * out[1], st[0], st[1]
    i32, ci32, idx = Type("int32"), Type("int32", const=True), index_type(const=True)
    n, ph, i, j0, pw, r, q = (Var(v, i32) for v in ("n", "ph", "i", "j0", "pw", "r", "q"))
    nq, oc, y_row = Var("nq", ci32), Var("oc", idx), Var("y_row", idx)
    pos, acc = Var("p", idx), Var("acc", Type(k.outs[0].dtype))
    nr = Var("MTVM_F32_NR", i32)   # (the kernel library's macro)
    tile = Var("tile", Type("float32"))
    x_row = Var(x.c) + n * (ci * hw) + i * ins[1] + j0

    def block(m0, rows: int) -> list[str]:
        wb = param(k.ins[1]) + ((ph * s1 + pw) * co + m0) * ci
        value = Index(tile, (pw * rows + r) * nr + q)
        if b is not None:
            value = value + param(b)[oc]
        tiles = [Decl(nq, select(lt(Const(ins[1]) - j0, nr), Const(ins[1]) - j0, nr)),
                 LocalArray(tile, s1 * rows * 16),   # (MTVM_F32_NR is 16 at most)
                 For(pw, s1, [ExprStmt(call(gemm_ukernel(k, rows), ci, wb, x_row, hw, nq,
                                            tile + pw * rows * nr))]),
                 For(r, rows, [
                     Decl(oc, m0 + r),
                     Decl(y_row, n * (co * ohw) + oc * ohw + (i * s0 + ph) * out[1] + j0 * s1),
                     For(q, nq, [For(pw, s1, [
                         Decl(pos, y_row + q * s1 + pw), Decl(acc, value), *tail(k, acc, pos, oc),
                         Assign(param(k.outs[0], output=True)[pos], acc)])])])]
        return render_c(For(i, ins[0], [For(j0, ins[1], tiles, step=nr)])).splitlines()
    blocks = row_blocks(co, mr, lambda m0, rows: block(RawExpr(m0), rows))
    return [For(n, x.shape[0], [For(ph, s0, [Raw("\n".join(blocks))])])]


@register("LpPool", "GlobalLpPool")
class LpPool(Op):
    def reference(self, x, **attrs):
        return reference_via_onnx(self.name, [x], attrs, 1)[0]

    def _geom(self, shape, attrs):
        D = len(shape) - 2
        if self.name == "GlobalLpPool":
            return list(shape[2:]), [1] * D, [1] * D, [0] * D, [1] * D
        ks = attrs["kernel_shape"]
        st = attrs.get("strides") or [1] * D
        dil = attrs.get("dilations") or [1] * D
        pads = list(attrs.get("pads") or [0] * (2 * D))
        auto = attrs.get("auto_pad", "NOTSET")
        ceil = attrs.get("ceil_mode", 0)
        out = []
        for i in range(D):
            eff = (ks[i] - 1) * dil[i] + 1
            if auto in ("SAME_UPPER", "SAME_LOWER"):
                o = -(-shape[2 + i] // st[i])
                total = max((o - 1) * st[i] + eff - shape[2 + i], 0)
                lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
                pads[i], pads[i + D] = lo, total - lo
            elif auto == "VALID":
                pads[i] = pads[i + D] = 0
            span = shape[2 + i] + pads[i] + pads[i + D] - eff
            o = (-(-span // st[i]) if ceil else span // st[i]) + 1
            out.append(o)
        return ks, st, dil, pads[:D], out

    def infer(self, node, inputs, consts):
        x = inputs[0]
        ks, st, dil, pb, out = self._geom(x.shape, node.attrs)
        if self.name == "GlobalLpPool":
            out = [1] * (len(x.shape) - 2)
        return [((x.shape[0], x.shape[1], *out), np.dtype(x.dtype))]

    def emit(self, k, **attrs):
        x = k.ins[0]
        p = attrs.get("p", 2)
        ks, st, dil, pb, out = self._geom(x.shape, attrs)
        if self.name == "GlobalLpPool":
            out = [1] * (len(x.shape) - 2)
        D = len(out)
        ins = x.shape[2:]
        dt = k.outs[0].dtype
        f = "f" if k.ctype == "float" else ""
        iv = [Var(f"i{d}") for d in range(D + 2)]
        ov, kv = iv[2:], [Var(f"k{d}") for d in range(D)]
        qv = [Var(f"q{d}", CI64) for d in range(D)]
        acc = Var("acc", Type(dt))
        inner_k = [Decl(q, Cast(I64, o * st[d] + kk * dil[d]) - pb[d])
                   for d, (q, o, kk) in enumerate(zip(qv, ov, kv))]
        cond = None
        for d, q in enumerate(qv):
            c = and_(ge(q, 0), lt(q, ins[d]))
            cond = c if cond is None else and_(cond, c)
        xi = sum_of([Cast(index_type(), q) * prod(ins[d + 1:]) for d, q in enumerate(qv)])
        v = param(x)[(iv[0] * x.shape[1] + iv[1]) * prod(ins) + xi]
        term = (call(f"fabs{f}", v) if p == 1 else v * v if p == 2 else
                call(f"pow{f}", call(f"fabs{f}", v), Const(p, dt)))
        inner_k.append(If(cond, [Assign(acc, term, "+=")]))
        for d in reversed(range(D)):
            inner_k = [For(kv[d], ks[d], inner_k)]
        res = (acc if p == 1 else call(f"sqrt{f}", acc) if p == 2 else
               call(f"pow{f}", acc, Const(1.0 / p, dt)))
        o_flat = sum_of([o * prod(out[d + 1:]) for d, o in enumerate(ov)])
        inner = [Decl(acc, Const(0, dt)), *inner_k,
                 Assign(param(k.outs[0], output=True)[(iv[0] * x.shape[1] + iv[1]) * prod(out)
                                                      + o_flat], res)]
        for d in reversed(range(D + 2)):
            inner = [For(iv[d], ([x.shape[0], x.shape[1]] + list(out))[d], inner)]
        return render_c(inner)


@register("DeformConv")
class DeformConv(Op):
    """2-D deformable convolution: each kernel tap samples the input bilinearly
    (zeros outside) at its offset position, scaled by the optional mask."""

    def reference(self, x, w, offset, b=None, mask=None, **attrs):
        return reference_via_onnx("DeformConv", [x, w, offset, b, mask], attrs, 1)[0]

    def check(self, node, inputs):
        from ..errors import UnsupportedError
        if len(inputs[0].shape) != 4:
            raise UnsupportedError("DeformConv: only 2-D is supported")

    def infer(self, node, inputs, consts):
        x, w, off = inputs[:3]
        return [((x.shape[0], w.shape[0], *off.shape[2:]), np.dtype(x.dtype))]

    def emit(self, k, *, dilations=None, group=1, kernel_shape=None, offset_group=1,
             pads=None, strides=None):
        x, w, off = k.ins[:3]
        b = k.ins[3] if len(k.ins) > 3 else None
        m = k.ins[4] if len(k.ins) > 4 else None
        N, Ci, IH, IW = x.shape
        Co, Cig, KH, KW = w.shape
        OH, OW = off.shape[2:]
        dh, dw = dilations or [1, 1]
        sh, sw = strides or [1, 1]
        ph, pw = (pads or [0, 0, 0, 0])[:2]
        Cog = Co // group
        cpo = Ci // offset_group
        T = Type(k.outs[0].dtype)
        plane = OH * OW
        X, Wt, Off = param(x), param(w), param(off)
        n, oc, i, j, c, a, e = (Var(v) for v in ("n", "oc", "i", "j", "c", "a", "e"))
        g, ic, og, oci = (Var(v, index_type(const=True)) for v in ("g", "ic", "og", "oci"))
        y, xx, y0, x0, fy, fx, wy, wx = (Var(v, CF) for v in
                                         ("y", "xx", "y0", "x0", "fy", "fx", "wy", "wx"))
        dy, dx = Var("dy", Type("int32")), Var("dx", Type("int32"))
        yy, xc = Var("yy", CI64), Var("xc", CI64)
        acc, v = Var("acc", T), Var("v", F)
        at = (i * OW) + j

        def shifted(pos, kern, stride, dil, pad, ch):   # the tap's sample coordinate
            return (Cast(F, Cast(I64, pos * stride + kern * dil) - pad)
                    + Cast(F, Off[(n * off.shape[1] + ch) * plane + at]))

        tap = [Decl(yy, Cast(I64, y0) + dy), Decl(xc, Cast(I64, x0) + dx),
               If(and_(and_(and_(ge(yy, 0), lt(yy, IH)), ge(xc, 0)), lt(xc, IW)), [
                   Decl(wy, select(dy, fy, _f(1) - fy)), Decl(wx, select(dx, fx, _f(1) - fx)),
                   Assign(v, wy * wx * Cast(F, X[((n * Ci + ic) * IH + Cast(index_type(), yy))
                                                  * IW + Cast(index_type(), xc)]), "+=")])]
        per_tap = [Decl(oci, ((og * KH + a) * KW + e) * 2),
                   Decl(y, shifted(i, a, sh, dh, ph, oci)),
                   Decl(xx, shifted(j, e, sw, dw, pw, oci + 1)),
                   Decl(y0, call("floorf", y)), Decl(x0, call("floorf", xx)),
                   Decl(fy, y - y0), Decl(fx, xx - x0),
                   Decl(v, _f(0)),
                   For(dy, 2, [For(dx, 2, tap)])]
        if m is not None:
            per_tap.append(Assign(v, Cast(F, param(m)[(n * m.shape[1] + (og * KH + a) * KW + e)
                                                      * plane + at]), "*="))
        per_tap.append(Assign(acc, Cast(T, v) * Wt[((oc * Cig + c) * KH + a) * KW + e], "+="))
        cell = [Decl(g, oc / Cog),
                Decl(acc, param(b)[oc] if b is not None else Const(0, T.dtype)),
                For(c, Cig, [Decl(ic, g * Cig + c), Decl(og, ic / cpo),
                             For(a, KH, [For(e, KW, per_tap)])]),
                Assign(param(k.outs[0], output=True)[((n * Co + oc) * OH + i) * OW + j], acc)]
        return render_c(For(n, N, [For(oc, Co, [For(i, OH, [For(j, OW, cell)])])]))
