"""ConvTranspose (1-D..3-D, groups, dilations, output_padding, output_shape,
auto_pad), LpPool / GlobalLpPool and DeformConv (2-D).

ConvTranspose is computed in gather form: each output element sums the input
elements whose strided, dilated footprint covers it, so the fused
elementwise tail (bias, activation) runs once per output value.
"""
from __future__ import annotations

import numpy as np

from .base import Op, register
from .indexing import body, nest, prod
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
            if auto == "SAME_LOWER":
                pads[i], pads[i + D] = total - total // 2, total // 2
            else:
                pads[i], pads[i + D] = total // 2, total - total // 2
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
        t = k.ctype
        ov = [f"i{2 + d}" for d in range(D)]
        o_flat = " + ".join(f"{v} * {prod(out[d + 1:])}" for d, v in enumerate(ov))
        inner = [f"const size_t g = i1 / {Cog}, oc = i1 % {Cog};",
                 f"{t} acc = {'in2[i1]' if b is not None else k.lit(0)};",
                 f"for (size_t ic = 0; ic < {Cig}; ++ic) {{"]
        body_k = []
        conds, xi, wi = [], [], []
        for d in range(D):
            body_k.append(f"const int64_t q{d} = (int64_t){ov[d]} + {pb[d]} - "
                          f"(int64_t)k{d} * {dil[d]};")
            conds.append(f"q{d} >= 0 && q{d} % {st[d]} == 0 && q{d} / {st[d]} < {ins[d]}")
            xi.append(f"(size_t)(q{d} / {st[d]}) * {prod(ins[d + 1:])}")
            wi.append(f"k{d} * {prod(ks[d + 1:])}")
        body_k.append(f"if ({' && '.join(f'({c})' for c in conds)}) {{")
        body_k.append(f"    acc += in0[(i0 * {Ci} + g * {Cig} + ic) * {prod(ins)} + "
                      f"{' + '.join(xi)}] * in1[((g * {Cig} + ic) * {Cog} + oc) * {prod(ks)} + "
                      f"{' + '.join(wi)}];")
        body_k.append("}")
        for d in reversed(range(D)):
            body_k = [f"for (size_t k{d} = 0; k{d} < {ks[d]}; ++k{d}) {{"] + \
                ["    " + s for s in body_k] + ["}"]
        inner += ["    " + s for s in body_k] + ["}"]
        inner.append(f"const size_t p = i1 * {prod(out)} + i0 * {Co * prod(out)} + {o_flat};")
        ep = k.epilogue("acc", "p", "i1")
        if ep:
            inner.append(ep)
        inner.append("out0[p] = acc;")
        return body(nest([N, Co] + out, inner))


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
    # Output offset of input position x_at (flat) in phase ph, a C expression.
    if D == 1:
        pos = f"x_at * {st[0]} + ph"
    else:
        pos = (f"(x_at / {ins[1]} * {st[0]} + ph / {st[1]}) * {out[1]} + "
               f"x_at % {ins[1]} * {st[1]} + ph % {st[1]}")

    def block(m0: str, rows: int) -> list[str]:
        store = [f"const size_t oc = {m0} + r, x_at = q0 + q;",
                 f"const size_t p = n * {co * ohw} + oc * {ohw} + {pos};",
                 f"{k.ctype} acc = tile[r * MTVM_F32_NR + q]{' + in2[oc]' if b else ''};"]
        ep = k.epilogue("acc", "p", "oc")
        if ep:
            store.append(ep)
        store.append("out0[p] = acc;")
        return [f"const float* wb = in1 + (ph * {co} + {m0}) * {ci};"] + column_tiles(
            k, rows=rows, taps=ci, a="wb", b=f"in0 + n * {ci * hw} + q0", ldb=hw, cols=hw,
            store=store)
    lines = [f"/* Schedule: ConvTranspose as {phases} pointwise GEMMs, one per phase (kernel",
             f" * == stride: each output pixel has one tap); weights packed per phase in",
             f" * blocks of {mr} output channels. */",
             f"for (size_t n = 0; n < {n_batch}; ++n) {{",
             f"    for (size_t ph = 0; ph < {phases}; ++ph) {{"]
    lines += ["        " + s for s in row_blocks(co, mr, block)]
    lines += ["    }", "}"]
    return "\n".join(lines)


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
        t = k.ctype
        f = "f" if t == "float" else ""
        ov = [f"i{2 + d}" for d in range(D)]
        inner_k, conds, xi = [], [], []
        for d in range(D):
            inner_k.append(f"const int64_t q{d} = (int64_t)({ov[d]} * {st[d]} + k{d} * {dil[d]})"
                           f" - {pb[d]};")
            conds.append(f"q{d} >= 0 && q{d} < {ins[d]}")
            xi.append(f"(size_t)q{d} * {prod(ins[d + 1:])}")
        v = f"in0[(i0 * {x.shape[1]} + i1) * {prod(ins)} + {' + '.join(xi)}]"
        term = (f"fabs{f}({v})" if p == 1 else f"{v} * {v}" if p == 2 else
                f"pow{f}(fabs{f}({v}), {k.lit(p)})")
        inner_k += [f"if ({' && '.join(conds)}) acc += {term};"]
        for d in reversed(range(D)):
            inner_k = [f"for (size_t k{d} = 0; k{d} < {ks[d]}; ++k{d}) {{"] + \
                ["    " + s for s in inner_k] + ["}"]
        res = ("acc" if p == 1 else f"sqrt{f}(acc)" if p == 2 else
               f"pow{f}(acc, {k.lit(1.0 / p)})")
        o_flat = " + ".join(f"{vv} * {prod(out[d + 1:])}" for d, vv in enumerate(ov))
        lines = nest([x.shape[0], x.shape[1]] + out,
                     [f"{t} acc = {k.lit(0)};"] + inner_k +
                     [f"out0[(i0 * {x.shape[1]} + i1) * {prod(out)} + {o_flat}] = {res};"])
        return body(lines)


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
        t = k.ctype
        plane = OH * OW
        lines = nest([N, Co, OH, OW], [
            "const size_t n = i0, oc = i1, i = i2, j = i3;",
            f"const size_t g = oc / {Cog};",
            f"{t} acc = {'in3[oc]' if b is not None else k.lit(0)};",
            f"for (size_t c = 0; c < {Cig}; ++c) {{",
            f"    const size_t ic = g * {Cig} + c, og = ic / {cpo};",
            f"    for (size_t a = 0; a < {KH}; ++a) {{",
            f"        for (size_t e = 0; e < {KW}; ++e) {{",
            f"            const size_t oci = ((og * {KH} + a) * {KW} + e) * 2;",
            f"            const float y = (float)((int64_t)(i * {sh} + a * {dh}) - {ph}) + "
            f"(float)in2[((n * {off.shape[1]} + oci) * {plane}) + i * {OW} + j];",
            f"            const float xx = (float)((int64_t)(j * {sw} + e * {dw}) - {pw}) + "
            f"(float)in2[((n * {off.shape[1]} + oci + 1) * {plane}) + i * {OW} + j];",
            "            const float y0 = floorf(y), x0 = floorf(xx);",
            "            const float fy = y - y0, fx = xx - x0;",
            "            float v = 0.0f;",
            "            for (int dy = 0; dy < 2; ++dy) {",
            "                for (int dx = 0; dx < 2; ++dx) {",
            "                    const int64_t yy = (int64_t)y0 + dy, xc = (int64_t)x0 + dx;",
            f"                    if (yy >= 0 && yy < {IH} && xc >= 0 && xc < {IW}) {{",
            "                        const float wy = dy ? fy : 1.0f - fy;",
            "                        const float wx = dx ? fx : 1.0f - fx;",
            f"                        v += wy * wx * (float)in0[((n * {Ci} + ic) * {IH} + "
            f"(size_t)yy) * {IW} + (size_t)xc];",
            "                    }",
            "                }",
            "            }",
            (f"            v *= (float)in4[((n * {m.shape[1]} + (og * {KH} + a) * {KW} + e) * "
             f"{plane}) + i * {OW} + j];" if m is not None else ""),
            f"            acc += ({t})v * in1[((oc * {Cig} + c) * {KH} + a) * {KW} + e];",
            "        }",
            "    }",
            "}",
            f"out0[((n * {Co} + oc) * {OH} + i) * {OW} + j] = acc;"])
        return body([s for s in lines if s.strip()])
