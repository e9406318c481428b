"""GridSample (2-D and 3-D; nearest, linear, cubic; zeros, border and
reflection padding) and AffineGrid. The grid is a run-time input, so the
sampling coordinates are computed in C per output point; the references are
onnx.reference's.
"""
from __future__ import annotations

import numpy as np

from ..codegen.cwriter import (ArrayDecl, Assign, Block, Cast, Const, Decl, Expr, For, If, Type,
                               Var, call, eq, ge, gt, index_type, lt, not_, or_, param, render_c,
                               select, sum_of)
from ..errors import UnsupportedError
from .base import Op, move_input_to_attr, register
from .indexing import prod

F, CF = Type("float32"), Type("float32", const=True)
INT, CINT = Type("int32"), Type("int32", const=True)


def _f(value) -> Const:
    """A float constant."""
    return Const(float(value), "float32")


def _bilinear(img: Var, h: int, w: int, v: Var, mode: str) -> list:
    """RoiAlign's sample at (y, xx) of the h x w plane img into v, (y, xx) inside
    [-1, h] x [-1, w]: clamped to the plane, then the four taps' bilinear sum
    (mode "avg") or the largest weighted tap (mode "max")."""
    y, xx = Var("y", F), Var("xx", F)
    yl, xl, yh, xh = (Var(n) for n in ("yl", "xl", "yh", "xh"))
    ly, lx, hy, hx = (Var(n, CF) for n in ("ly", "lx", "hy", "hx"))
    taps = [Var(f"v{i}", CF) for i in range(1, 5)]
    out = [Decl(yl), Decl(xl), Decl(yh), Decl(xh),
           If(lt(y, _f(0)), [Assign(y, _f(0))]),
           If(lt(xx, _f(0)), [Assign(xx, _f(0))]),
           Assign(yl, Cast(index_type(), y)), Assign(xl, Cast(index_type(), xx))]
    for lo, hi, pos, n in ((yl, yh, y, h), (xl, xh, xx, w)):
        out.append(If(ge(lo, n - 1), [Assign(lo, Const(n - 1)), Assign(hi, lo),
                                      Assign(pos, Cast(F, lo))],
                      [Assign(hi, lo + 1)]))
    weights = [hy * hx, hy * lx, ly * hx, ly * lx]
    at = [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh]
    inner = [Decl(ly, y - Cast(F, yl)), Decl(lx, xx - Cast(F, xl)),
             Decl(hy, _f(1) - ly), Decl(hx, _f(1) - lx)]
    inner += [Decl(t, wt * Cast(F, img[i])) for t, wt, i in zip(taps, weights, at)]
    if mode == "avg":
        inner.append(Assign(v, taps[0] + taps[1] + taps[2] + taps[3]))
    else:
        inner.append(Assign(v, select(gt(taps[0], taps[1]), taps[0], taps[1])))
        inner += [Assign(v, select(gt(v, t), v, t)) for t in taps[2:]]
    return out + [Block(inner)]


def _cubic(x: Expr, A: float = -0.75) -> list[Expr]:
    """The four Keys cubic coefficients for fraction x."""
    a, one, two = _f(A), _f(1), _f(2)
    x1, x2, x3 = x + one, one - x, two - x
    return [((a * x1 - _f(5) * a) * x1 + _f(8) * a) * x1 - _f(4) * a,
            ((a + two) * x - (a + _f(3))) * x * x + one,
            ((a + two) * x2 - (a + _f(3))) * x2 * x2 + one,
            ((a * x3 - _f(5) * a) * x3 + _f(8) * a) * x3 - _f(4) * a]


@register("GridSample")
class GridSample(Op):
    def reference(self, x, grid, *, mode="linear", padding_mode="zeros", align_corners=0):
        from onnx.reference.ops.op_grid_sample import GridSample as R
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
        inst = R.__new__(R)
        inst.mode, inst.padding_mode, inst.align_corners = mode, padding_mode, align_corners
        return inst._run(x, grid, mode=mode, padding_mode=padding_mode,
                         align_corners=align_corners)[0]

    def check(self, node, inputs):
        if len(inputs[0].shape) not in (4, 5):
            raise UnsupportedError("GridSample: only 2-D and 3-D inputs are supported")

    def emit(self, k, *, mode="linear", padding_mode="zeros", align_corners=0):
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
        x, grid = k.ins
        N, C = x.shape[:2]
        dims = list(x.shape[2:])
        D = len(dims)
        out_sp = list(grid.shape[1:-1])
        if padding_mode == "reflection":
            k.library("mtvm_reflect_f32.h")
        lo = [0.0 if align_corners else -0.5 for _ in dims]
        hi = [d - 1.0 if align_corners else d - 0.5 for d in dims]
        P = prod(out_sp)
        i0, i1, o = Var("i0"), Var("i1"), Var("o")
        x_in, g_in = param(x), param(grid)
        g = Var("g", Type(grid.dtype, pointer=True, const=True))
        xs = [Var(f"xs{i}", F) for i in range(D)]
        lines = [Decl(g, g_in + (i0 * P + o) * D)]
        for i, d in enumerate(dims):
            gv = Cast(F, g[D - 1 - i])
            if align_corners:
                lines.append(Decl(xs[i], (gv + _f(1)) / _f(2) * _f(d - 1)))
            else:
                lines.append(Decl(xs[i], ((gv + _f(1)) * _f(d) - _f(1)) / _f(2)))
            if mode == "nearest":
                lines.append(Assign(xs[i], call("rintf", xs[i])))
            if padding_mode == "border":
                lines.append(If(or_(lt(xs[i], _f(lo[i])), gt(xs[i], _f(hi[i]))), [
                    Assign(xs[i], select(lt(xs[i], _f(0)), _f(0),
                                         select(gt(xs[i], _f(d - 1)), _f(d - 1), xs[i])))]))
            elif padding_mode == "reflection":
                lines.append(Assign(xs[i], call("mtvm_reflect", xs[i], _f(lo[i]), _f(hi[i]))))
        plane = prod(dims)
        cbase = (i0 * C + i1) * plane
        stride = [prod(dims[i + 1:]) for i in range(D)]
        pv = Var("pv", F)
        I64 = Type("int64")

        def pixel(idx: list[Expr]) -> list:
            """Statements setting `pv` to the padded pixel at integer indices idx."""
            out, conds = [], []
            js = [Var(f"j{i}", I64) for i in range(D)]
            for i, (j, v, d) in enumerate(zip(js, idx, dims)):
                out.append(Decl(j, v))
                if padding_mode == "zeros":
                    conds.append(or_(lt(j, Const(0)), ge(j, Const(d))))
                elif padding_mode == "border":
                    out.append(Assign(j, select(lt(j, Const(0)), Const(0),
                                                select(ge(j, Const(d)), Const(d - 1), j))))
                else:
                    out.append(Assign(j, Cast(I64, call("mtvm_reflect", Cast(F, j),
                                                        _f(lo[i]), _f(hi[i])))))
            addr = sum_of([Cast(index_type(), j) * s for j, s in zip(js, stride)])
            value = Cast(F, x_in[cbase + addr])
            if conds:
                cond = conds[0]
                for c in conds[1:]:
                    cond = or_(cond, c)
                value = select(cond, _f(0), value)
            return out + [Assign(pv, value)]

        v = Var("v", F)
        if mode == "nearest":
            lines += [Decl(pv), Block(pixel([Cast(I64, xs[i]) for i in range(D)])),
                      Decl(Var("v", CF), pv)]
        else:
            T = 2 if mode == "linear" else 4
            off = 0 if T == 2 else 1
            lines += [Decl(v, _f(0)), Decl(pv)]
            ts = [Var(f"t{i}") for i in range(D)]
            weights = []
            for i in range(D):
                b, f = Var(f"b{i}", CF), Var(f"f{i}", CF)
                lines += [Decl(b, call("floorf", xs[i])), Decl(f, xs[i] - b)]
                coef = [_f(1) - f, f] if T == 2 else _cubic(f)
                ws = [Var(f"w{i}_{t}", CF) for t in range(T)]
                lines += [Decl(w, c) for w, c in zip(ws, coef)]
                wt = ws[-1]   # the weight of tap t_i
                for t in reversed(range(T - 1)):
                    wt = select(eq(ts[i], t), ws[t], wt)
                weights.append(wt)
            inner = pixel([Cast(I64, Var(f"b{i}", CF)) - off + Cast(I64, ts[i])
                           for i in range(D)])
            prod_w = weights[0]
            for w in weights[1:]:
                prod_w = prod_w * w
            inner.append(Assign(v, prod_w * pv, "+="))
            for i in reversed(range(D)):
                inner = [For(ts[i], T, inner)]
            lines += inner
        lines.append(Assign(param(k.outs[0], output=True)[(i0 * C + i1) * P + o],
                            Cast(Type(k.outs[0].dtype), v)))
        return render_c(For(i0, N, [For(i1, C, [For(o, P, lines)])]))


@register("AffineGrid")
class AffineGrid(Op):
    def canonicalize(self, node, graph, opset):
        move_input_to_attr(graph, node, 1, "size")

    def _base(self, size, align_corners):
        sp = [int(s) for s in size[2:]]
        axes = []
        for n in sp:
            if align_corners:
                axes.append(np.linspace(-1, 1, n) if n > 1 else np.zeros(1))
            else:
                axes.append((2 * np.arange(n) + 1) / n - 1)
        return sp, axes

    def reference(self, theta, *, size, align_corners=0):
        sp, axes = self._base(size, align_corners)
        mesh = np.meshgrid(*axes, indexing="ij")            # each: spatial shape
        coords = [m for m in reversed(mesh)] + [np.ones(sp)]  # x, y(, z), 1
        base = np.stack(coords, axis=-1).reshape(-1, len(sp) + 1)
        out = np.einsum("nij,pj->npi", theta.astype(np.float64), base)
        return out.reshape([theta.shape[0]] + sp + [len(sp)]).astype(theta.dtype)

    def emit(self, k, *, size, align_corners=0):
        sp, axes = self._base(size, align_corners)
        D = len(sp)
        N = int(size[0])
        dt = k.outs[0].dtype
        theta, out = param(k.ins[0]), param(k.outs[0], output=True)
        iv = [Var(f"i{d}") for d in range(D + 1)]
        ax = [Var(f"ax{i}", Type(dt, const=True)) for i in range(D)]
        lines = [ArrayDecl(a, [Const(v, dt) for v in vals]) for a, vals in zip(ax, axes)]
        xyz = list(reversed([a[iv[i + 1]] for i, a in enumerate(ax)]))   # x = w, y = h, z = d
        p = Var("p", index_type(const=True))
        inner = [Decl(p, sum_of([iv[i + 1] * prod(sp[i + 1:]) for i in range(D)]))]
        for r in range(D):
            row = (iv[0] * D + r) * (D + 1)
            value = theta[row] * xyz[0]
            for j in range(1, D):
                value = value + theta[row + j] * xyz[j]
            inner.append(Assign(out[(iv[0] * prod(sp) + p) * D + r], value + theta[row + D]))
        for d in reversed(range(D + 1)):
            inner = [For(iv[d], ([N] + sp)[d], inner)]
        return render_c(lines + inner)


@register("RoiAlign")
class RoiAlign(Op):
    """Average or max of bilinear samples on a per-ROI grid (the grid size may
    depend on the run-time ROI size when sampling_ratio is 0)."""

    def reference(self, x, rois, batch_indices, **attrs):
        from .recurrent import reference_via_onnx
        return reference_via_onnx("RoiAlign", [x, rois, batch_indices], attrs, 1)[0]

    def infer(self, node, inputs, consts):
        x, rois = inputs[0], inputs[1]
        a = node.attrs
        return [((rois.shape[0], x.shape[1], a.get("output_height", 1),
                  a.get("output_width", 1)), np.dtype(x.dtype))]

    def emit(self, k, *, coordinate_transformation_mode="half_pixel", mode="avg",
             output_height=1, output_width=1, sampling_ratio=0, spatial_scale=1.0):
        x = k.ins[0]
        R = k.ins[1].shape[0]
        C, H, W = x.shape[1:]
        PH, PW = output_height, output_width
        off = 0.5 if coordinate_transformation_mode == "half_pixel" else 0.0
        sr = int(sampling_ratio)
        img_t, box, bidx = param(k.ins[0]), param(k.ins[1]), param(k.ins[2])
        out = param(k.outs[0], output=True)
        n, c, ph, pw = Var("n"), Var("c"), Var("ph"), Var("pw")
        iy, ix = Var("iy", INT), Var("ix", INT)
        bi = Var("bi", index_type(const=True))
        sw, sh, bh, bw = (Var(v, CF) for v in ("sw", "sh", "bh", "bw"))
        rw, rh, acc, v = (Var(v, F) for v in ("rw", "rh", "acc", "v"))
        gh, gw = Var("gh", CINT), Var("gw", CINT)
        count, first = Var("count", CF), Var("first", INT)
        img = Var("img", Type(x.dtype, pointer=True, const=True))

        def corner(i):   # ROI corner i (x1, y1, x2, y2) in input coordinates
            return Cast(F, box[n * 4 + i]) * _f(spatial_scale) - _f(off)

        def grid(extent, bins):
            return Const(sr) if sr > 0 else Cast(INT, call("ceilf", extent / _f(bins)))

        roi = [Decl(bi, Cast(index_type(), bidx[n])),
               Decl(sw, corner(0)), Decl(sh, corner(1)),
               Decl(rw, corner(2) - sw), Decl(rh, corner(3) - sh)]
        if not off:   # output_half_pixel: ROIs at least one pixel
            roi += [If(lt(rw, _f(1)), [Assign(rw, _f(1))]), If(lt(rh, _f(1)), [Assign(rh, _f(1))])]
        roi += [Decl(bh, rh / _f(PH)), Decl(bw, rw / _f(PW)),
                Decl(gh, grid(rh, PH)), Decl(gw, grid(rw, PW))]
        if mode == "avg":
            roi.append(Decl(count, Cast(F, select(gt(gh * gw, 1), gh * gw, 1))))
        sample = [Decl(Var("y", F), sh + Cast(F, ph) * bh + (Cast(F, iy) + _f(0.5)) * bh
                       / Cast(F, gh)),
                  Decl(Var("xx", F), sw + Cast(F, pw) * bw + (Cast(F, ix) + _f(0.5)) * bw
                       / Cast(F, gw)),
                  Decl(v, _f(0)),
                  If(not_(or_(or_(or_(lt(Var("y", F), _f(-1)), gt(Var("y", F), _f(H))),
                                  lt(Var("xx", F), _f(-1))), gt(Var("xx", F), _f(W)))),
                     _bilinear(img, H, W, v, mode))]
        if mode == "avg":
            sample.append(Assign(acc, v, "+="))
        else:
            sample += [If(or_(first, gt(v, acc)), [Assign(acc, v)]), Assign(first, Const(0))]
        cell = [Decl(acc, _f(0))] + ([Decl(first, Const(1))] if mode != "avg" else [])
        cell += [For(iy, gh, [For(ix, gw, sample)]),
                 Assign(out[((n * C + c) * PH + ph) * PW + pw],
                        Cast(Type(k.outs[0].dtype), acc / count if mode == "avg" else acc))]
        roi.append(For(c, C, [Decl(img, img_t + (bi * C + c) * (H * W)),
                               For(ph, PH, [For(pw, PW, cell)])]))
        return render_c(For(n, R, roi))
