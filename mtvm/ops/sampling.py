"""GridSample (2-D and 3-D; nearest, linear, cubic; zeros, border and
reflection padding) and AffineGrid. The grid is a run-time input, so the
sampling coordinates are computed in C per output point; the references are
onnx.reference's.
"""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .base import Op, move_input_to_attr, register
from .indexing import body, nest, prod


def _cubic(x: str, A: float = -0.75) -> list[str]:
    """C expressions of the four Keys cubic coefficients for fraction x."""
    a = f"{A!r}f"
    return [f"((({a} * ({x} + 1.0f) - 5.0f * {a}) * ({x} + 1.0f) + 8.0f * {a}) * ({x} + 1.0f)"
            f" - 4.0f * {a})",
            f"((({a} + 2.0f) * {x} - ({a} + 3.0f)) * {x} * {x} + 1.0f)",
            f"((({a} + 2.0f) * (1.0f - {x}) - ({a} + 3.0f)) * (1.0f - {x}) * (1.0f - {x}) + 1.0f)",
            f"((({a} * (2.0f - {x}) - 5.0f * {a}) * (2.0f - {x}) + 8.0f * {a}) * (2.0f - {x})"
            f" - 4.0f * {a})"]


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
        t = k.ctype
        if padding_mode == "reflection":
            k.library("mtvm_reflect_f32.h")
        lo = [0.0 if align_corners else -0.5 for _ in dims]
        hi = [d - 1.0 if align_corners else d - 0.5 for d in dims]
        P = prod(out_sp)
        lines = [f"const size_t o = i2;  /* flat output position */",
                 f"const {t}* g = &in1[(i0 * {P} + o) * {D}];",
                 f"float xs[{D}];"]
        for i, d in enumerate(dims):
            gv = f"(float)g[{D - 1 - i}]"
            if align_corners:
                lines.append(f"xs[{i}] = ({gv} + 1.0f) / 2.0f * {float(d - 1)!r}f;")
            else:
                lines.append(f"xs[{i}] = (({gv} + 1.0f) * {float(d)!r}f - 1.0f) / 2.0f;")
            if mode == "nearest":
                lines.append(f"xs[{i}] = rintf(xs[{i}]);")
            if padding_mode == "border":
                lines.append(f"if (xs[{i}] < {lo[i]!r}f || xs[{i}] > {hi[i]!r}f) "
                             f"xs[{i}] = xs[{i}] < 0.0f ? 0.0f : (xs[{i}] > {float(d - 1)!r}f ? "
                             f"{float(d - 1)!r}f : xs[{i}]);")
            elif padding_mode == "reflection":
                lines.append(f"xs[{i}] = mtvm_reflect(xs[{i}], {lo[i]!r}f, {hi[i]!r}f);")
        plane = prod(dims)
        cbase = f"(i0 * {C} + i1) * {plane}"
        stride = [prod(dims[i + 1:]) for i in range(D)]

        def pixel(idx: list[str]) -> list[str]:
            """C lines setting `pv` to the padded pixel at integer indices idx."""
            out = []
            conds = []
            for i, (v, d) in enumerate(zip(idx, dims)):
                out.append(f"int64_t j{i} = {v};")
                if padding_mode == "zeros":
                    conds.append(f"j{i} < 0 || j{i} >= {d}")
                elif padding_mode == "border":
                    out.append(f"j{i} = j{i} < 0 ? 0 : (j{i} >= {d} ? {d - 1} : j{i});")
                else:
                    out.append(f"j{i} = (int64_t)mtvm_reflect((float)j{i}, {lo[i]!r}f, "
                               f"{hi[i]!r}f);")
            addr = " + ".join(f"(size_t)j{i} * {s}" for i, s in enumerate(stride))
            if conds:
                out.append(f"pv = ({' || '.join(conds)}) ? 0.0f : (float)in0[{cbase} + {addr}];")
            else:
                out.append(f"pv = (float)in0[{cbase} + {addr}];")
            return out

        if mode == "nearest":
            lines += ["float pv;", "{"] + ["    " + s for s in pixel(
                [f"(int64_t)xs[{i}]" for i in range(D)])] + ["}", "const float v = pv;"]
        else:
            T = 2 if mode == "linear" else 4
            off = 0 if T == 2 else 1
            lines.append("float v = 0.0f, pv;")
            for i in range(D):
                lines.append(f"const float b{i} = floorf(xs[{i}]), f{i} = xs[{i}] - b{i};")
                if T == 2:
                    lines.append(f"const float w{i}[2] = {{ 1.0f - f{i}, f{i} }};")
                else:
                    lines.append(f"const float w{i}[4] = {{ {', '.join(_cubic(f'f{i}'))} }};")
            inner = pixel([f"(int64_t)b{i} - {off} + (int64_t)t{i}" for i in range(D)])
            inner.append("v += " + " * ".join(f"w{i}[t{i}]" for i in range(D)) + " * pv;")
            for i in reversed(range(D)):
                inner = [f"for (size_t t{i} = 0; t{i} < {T}; ++t{i}) {{"] + \
                    ["    " + s for s in inner] + ["}"]
            lines += inner
        lines.append(f"out0[(i0 * {C} + i1) * {P} + o] = ({t})v;")
        return body(nest([N, C, P], lines))


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
        t = k.ctype
        lines = []
        for i, a in enumerate(axes):
            lines.append(f"static const {t} ax{i}[{len(a)}] = "
                         f"{{ {', '.join(k.lit(v) for v in a)} }};")
        coord = [f"ax{i}[i{i + 1}]" for i in range(D)]   # dims order: (d,) h, w
        xyz = list(reversed(coord))                        # x = w, y = h, z = d
        inner = [f"const size_t p = {' + '.join(f'i{i + 1} * {prod(sp[i + 1:])}' for i in range(D))};"]
        for r in range(D):
            terms = [f"in0[(i0 * {D} + {r}) * {D + 1} + {j}] * {xyz[j]}" for j in range(D)]
            terms.append(f"in0[(i0 * {D} + {r}) * {D + 1} + {D}]")
            inner.append(f"out0[(i0 * {prod(sp)} + p) * {D} + {r}] = {' + '.join(terms)};")
        lines += nest([N] + sp, inner)
        return body(lines)


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
        t = k.ctype
        sr = int(sampling_ratio)
        lines = nest([R], [
            "const size_t n = i0;",
            "const size_t bi = (size_t)in2[n];",
            f"const float sw = (float)in1[n * 4 + 0] * {float(spatial_scale)!r}f - {off!r}f;",
            f"const float sh = (float)in1[n * 4 + 1] * {float(spatial_scale)!r}f - {off!r}f;",
            f"float rw = (float)in1[n * 4 + 2] * {float(spatial_scale)!r}f - {off!r}f - sw;",
            f"float rh = (float)in1[n * 4 + 3] * {float(spatial_scale)!r}f - {off!r}f - sh;",
        ] + ([] if off else ["if (rw < 1.0f) rw = 1.0f;", "if (rh < 1.0f) rh = 1.0f;"]) + [
            f"const float bh = rh / {PH}.0f, bw = rw / {PW}.0f;",
            f"const int gh = {sr if sr > 0 else f'(int)ceilf(rh / {PH}.0f)'};",
            f"const int gw = {sr if sr > 0 else f'(int)ceilf(rw / {PW}.0f)'};",
            "const float count = (float)(gh * gw > 1 ? gh * gw : 1);",
            "(void)count;",
            f"for (size_t c = 0; c < {C}; ++c) {{",
            f"    const {t}* img = &in0[(bi * {C} + c) * {H * W}];",
            f"    for (size_t ph = 0; ph < {PH}; ++ph) {{",
            f"        for (size_t pw = 0; pw < {PW}; ++pw) {{",
            "            float acc = 0.0f;",
            "            int first = 1;",
            "            for (int iy = 0; iy < gh; ++iy) {",
            "                for (int ix = 0; ix < gw; ++ix) {",
            "                    float y = sh + (float)ph * bh + ((float)iy + 0.5f) * bh / (float)gh;",
            "                    float xx = sw + (float)pw * bw + ((float)ix + 0.5f) * bw / (float)gw;",
            "                    float v = 0.0f;",
            f"                    if (!(y < -1.0f || y > {H}.0f || xx < -1.0f || xx > {W}.0f)) {{",
            "                        size_t yl, xl, yh, xh;",
            "                        if (y < 0.0f) y = 0.0f;",
            "                        if (xx < 0.0f) xx = 0.0f;",
            "                        yl = (size_t)y; xl = (size_t)xx;",
            f"                        if (yl >= {H - 1}) {{ yh = yl = {H - 1}; y = (float)yl; }} "
            "else yh = yl + 1;",
            f"                        if (xl >= {W - 1}) {{ xh = xl = {W - 1}; xx = (float)xl; }} "
            "else xh = xl + 1;",
            "                        {",
            "                            const float ly = y - (float)yl, lx = xx - (float)xl;",
            "                            const float hy = 1.0f - ly, hx = 1.0f - lx;",
            f"                            const float v1 = hy * hx * (float)img[yl * {W} + xl];",
            f"                            const float v2 = hy * lx * (float)img[yl * {W} + xh];",
            f"                            const float v3 = ly * hx * (float)img[yh * {W} + xl];",
            f"                            const float v4 = ly * lx * (float)img[yh * {W} + xh];",
            ("                            v = v1 + v2 + v3 + v4;" if mode == "avg" else
             "                            v = v1 > v2 ? v1 : v2; v = v > v3 ? v : v3; "
             "v = v > v4 ? v : v4;"),
            "                        }",
            "                    }",
            ("                    acc += v;" if mode == "avg" else
             "                    if (first || v > acc) acc = v;"),
            "                    first = 0;",
            "                }",
            "            }",
            "            (void)first;",
            f"            out0[((n * {C} + c) * {PH} + ph) * {PW} + pw] = ({t})"
            + ("(acc / count);" if mode == "avg" else "acc;"),
            "        }",
            "    }",
            "}"])
        return body(lines)
