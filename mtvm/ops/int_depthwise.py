"""The int8 depthwise convolution kernel of QConv (folded=0): one input channel
per output channel, the zero-point terms folded into the channel's bias once
(see mtvm/ops/int_kernels.py for the arithmetic and the requantization)."""
from __future__ import annotations

import numpy as np

from .int_kernels import (_EXT, _EXT_ROR8, DSP_INCLUDE_C, ROR8_C, _indent, per_channel)


def dot3x2_helper(k, x_dtype) -> str:
    """Three taps of one input row for two neighbouring output pixels (3x3 depthwise)."""
    tx, nx, xx = _EXT[np.dtype(x_dtype).name]
    k.helper("mtvm_dsp_include", DSP_INCLUDE_C)
    k.helper("mtvm_ror8", ROR8_C)
    name = f"mtvm_dw3x2_{nx}"
    return k.helper(name, f"""/* *acc0 += p[0] w0 + p[1] w1 + p[2] w2 and *acc1 += p[1] w0 + p[2] w1 + p[3] w2:
 * one row of a 3x3 window for two neighbouring output pixels. w02 holds w0 and
 * w2 as two int16 lanes. The DSP path loads the four bytes once: SXTB16 gives
 * (p0, p2), SXTB16 ROR #8 (p1, p3); SMLAD and SMLABB/SMLATB do the rest. */
static inline void {name}(const {tx}* p, int32_t w0, int32_t w1, int32_t w2, int32_t w02,
                              int32_t* acc0, int32_t* acc1)
{{
#if defined(__ARM_FEATURE_DSP)
    uint32_t x4;
    int32_t lo, hi;
    memcpy(&x4, p, 4);
    lo = {xx}((int32_t)x4);                  /* (p0, p2) */
    hi = {_EXT_ROR8[xx]}((int32_t)x4);       /* (p1, p3) */
    *acc0 = __smlabb(hi, w1, __smlad(lo, w02, *acc0));
    *acc1 = __smlatb(lo, w1, __smlad(hi, w02, *acc1));
    (void)w0;
    (void)w2;
#else
    (void)w02;
    *acc0 += (int32_t)p[0] * w0 + (int32_t)p[1] * w1 + (int32_t)p[2] * w2;
    *acc1 += (int32_t)p[1] * w0 + (int32_t)p[2] * w1 + (int32_t)p[3] * w2;
#endif
}}""")


def emit_depthwise(k, x, w, bias, w_zp, store, n, c, oc, mg, h, wd, kh, kw, oh, ow, sh, sw, ph,
               pw, dh, dw, x_zp, pads) -> list[str]:
    """Depthwise (one input channel per output channel): the channel is copied into
    a scratch buffer with its zero-point padding (when the conv pads), so every
    output is an unrolled sum of x * w with the channel's weights in locals and
    the zero-point terms folded into the channel's bias once."""
    taps = kh * kw
    wv = [f"w{i}" for i in range(taps)]
    zw = per_channel(w_zp, "o") if w_zp is not None else None
    pe_h, pe_w = (pads[2], pads[3]) if len(pads) == 4 else (0, pads[-1])
    # Written in place (k.inplace): always read the channel from its scratch copy.
    padded = any((ph, pw, pe_h, pe_w)) or getattr(k, "inplace", None) is not None
    ph_, pw_ = h + ph + pe_h, wd + pw + pe_w
    src = "o" if mg == 1 else f"o / {mg}"
    lines = [f"/* depthwise: output channel o reads input channel {src} */"]
    if padded:
        k.scratch_bytes = ph_ * pw_ * x.dtype.itemsize
        lines.append(f"{x.ctype}* pad = ({x.ctype}*)scratch;  /* [{ph_}][{pw_}], border "
                     f"= zero point {x_zp} */")
    lines += [f"for (size_t b = 0; b < {n}; ++b) {{",
              f"    for (size_t o = 0; o < {oc}; ++o) {{",
              f"        const {x.ctype}* xc = {x.c} + (b * {c} + {src}) * {h * wd};",
              f"        const {w.ctype}* wo = {w.c} + o * {taps};"]
    for i in range(taps):
        wz = f" - {zw}" if zw is not None else ""
        lines.append(f"        const int32_t w{i} = (int32_t)wo[{i}]{wz};")
    if x_zp:
        lines += ["        /* the zero-point term, folded once per channel: bias - zx * sum(w) */",
                  f"        const int32_t bias_in = {bias.c}[o] {'-' if x_zp > 0 else '+'} "
                  f"{abs(x_zp)} * ({' + '.join(wv)});"]
    else:
        lines.append(f"        const int32_t bias_in = {bias.c}[o];")
    row_w = pw_ if padded else wd
    if padded:
        lines += [f"        memset(pad, (unsigned char)({x.ctype}){x_zp}, {ph_ * pw_});",
                  f"        for (size_t y = 0; y < {h}; ++y) {{",
                  f"            memcpy(pad + (y + {ph}) * {pw_} + {pw}, xc + y * {wd}, "
                  f"{wd});",
                  "        }",
                  "        xc = pad;"]
    # 3x3, stride 1 along x: two output pixels per pass share each row's bytes.
    pairs = kh == 3 and kw == 3 and sw == 1 and dw == 1 and ow >= 2
    lines += [f"        for (size_t oy = 0; oy < {oh}; ++oy) {{",
              "            size_t ox = 0;"]
    mult, shift = (k.ins + [None] * 5)[3:5]

    def stored(acc, xcoord):
        st = store(acc, "o", f"out0[(b * {oc} + o) * {oh * ow} + oy * {ow} + {xcoord}]")
        if mult is not None and mult.size > 1:
            st = [line.replace(f"{mult.c}[o]", "mult_o").replace(f"{shift.c}[o]", "shift_o")
                  for line in st]
        return st
    if pairs:
        row = dot3x2_helper(k, x.dtype)
        lines += [f"            for (; ox + 2 <= {ow}; ox += 2) {{",
                  f"                const {x.ctype}* p = xc + oy * {sh * row_w} + ox;",
                  "                int32_t acc = bias_in, acc1 = bias_in;"]
        for ky in range(3):
            lines.append(f"                {row}(p + {ky * dh * row_w}, w{3 * ky}, "
                         f"w{3 * ky + 1}, w{3 * ky + 2}, w{3 * ky}{3 * ky + 2}, &acc, &acc1);")
        lines += ["                {"] + _indent(stored("acc", "ox"), 5) + ["                }",
                  "                {"] + _indent(stored("acc1", "ox + 1"), 5) + \
            ["                }", "            }"]
        pos = next(i for i, line in enumerate(lines) if "bias_in" in line and "=" in line)
        lines.insert(pos + 1, "        /* row weight pairs (w0, w2) as two int16 lanes */")
        for r in range(3):
            lines.insert(pos + 2 + r, f"        const int32_t w{3 * r}{3 * r + 2} = (int32_t)"
                         f"(((uint32_t)w{3 * r} & 0xFFFFu) | ((uint32_t)w{3 * r + 2} << 16));")
    if mult is not None and mult.size > 1:
        # The channel's multiplier and shift in locals, not reloaded per pixel.
        pos = next(i for i, line in enumerate(lines) if "bias_in" in line and "=" in line)
        lines.insert(pos + 1, f"        const int32_t mult_o = {mult.c}[o], "
                              f"shift_o = {shift.c}[o];")
    if not (pairs and ow % 2 == 0):   # the pixels not done in pairs
        lines += [f"            for (; ox < {ow}; ++ox) {{",
                  f"                const {x.ctype}* p = xc + oy * {sh * row_w} + ox * {sw};"]
        terms = [f"p[{ky * dh * row_w + kx * dw}] * w{ky * kw + kx}"
                 for ky in range(kh) for kx in range(kw)]
        lines.append("                int32_t acc = bias_in")
        for i, t in enumerate(terms):
            lines.append(f"                    + {t}" + (";" if i == len(terms) - 1 else ""))
        lines += _indent(stored("acc", "ox"), 4)
        lines.append("            }")
    lines += ["        }", "    }", "}"]
    return lines
