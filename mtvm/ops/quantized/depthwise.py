"""The int8 depthwise convolution kernel of QConv (folded=0): one input channel
per output channel, the zero-point terms folded into the channel's bias once
(see common.py for the arithmetic and the requantization).

Per channel: the weights in registers, each window row's (w0, w2) packed as two
int16 lanes and the middle-column weights two per register; the channel is
copied into a zero-point-bordered scratch plane only when the conv pads or runs
in place (the border is written once per call, the interior per channel).

3-wide windows (stride 1 or 2, no dilation along x) on a DSP core:
  * Thumb-2 loops (inline assembly, 12 registers, nothing spilled) when the
    requantization is the cheap one and the clamp is the full 8-bit range:
    3x3 stride 1 in 2x2 output blocks (loop2x2_helper), kx3 stride 2 in runs
    of 4 pixels (loop_s2x4_helper). SXTB16/UXTB16 split a loaded word into its
    even and odd bytes, PKHBT pairs a byte of the next word with one of them,
    SMLAD/SMLADX plus SMLAxy do the taps; SMMLA + SSAT requantize, SSAT also
    shifting when the layer has one shift for all channels (common_shift).
  * otherwise C blocks with ACLE intrinsics: 2x2 (stride 1), 4 and 2 pixels (their
    row micro-kernels: c_runtime/kernels/generic/mtvm_dw_row_s8.h).
Everything else, and every core without the DSP extension: the plain sums.
All paths compute the same integers (QConv.reference)."""
from __future__ import annotations

import numpy as np

from ..base import c_literal
from .common import INT8_EXT, indent_c, operands, per_channel, ties_impossible


def row_helper(k, x_dtype, stride: int, npix: int, wsel: str) -> str:
    """One row of a 3-wide window for `npix` (2 or 4) neighbouring output pixels at
    x stride `stride` (1 or 2): acc[i] += p[s*i] w0 + p[s*i+1] w1 + p[s*i+2] w2.
    w02 holds (w0, w2) as two int16 lanes; wm holds w1 in its bottom (wsel 'b') or
    top (wsel 't') half (c_runtime/kernels/generic/mtvm_dw_row_s8.h)."""
    if (stride, npix) not in ((1, 2), (1, 4), (2, 2), (2, 4)):
        raise ValueError((stride, npix))
    k.library("mtvm_dw_row_s8.h")
    return f"mtvm_dw3x{npix}s{stride}{wsel}_{INT8_EXT[np.dtype(x_dtype).name][1]}"


def unpack_helper(k, x_dtype) -> str:
    """DSP only: the even and odd bytes of p[0..3] as two pairs of int16 lanes
    (mtvm_dw_row_s8.h)."""
    k.library("mtvm_dw_row_s8.h")
    return f"mtvm_dw_unpack_{INT8_EXT[np.dtype(x_dtype).name][1]}"


def mac_helper(k, wsel: str, npix: int = 2) -> str:
    """DSP only: one unpacked row x one weight row, two neighbouring output pixels, or
    (npix 1) the second of them alone (mtvm_dw_row_s8.h)."""
    k.library("mtvm_dw_row_s8.h")
    return f"mtvm_dw_mac{npix}{wsel}"


ASM_GUARD = "#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__)"


def _asm_fn(k, name: str, doc: str, proto: str, decl: str, ops: list[str], outs: list[str],
            ins: list[str]) -> str:
    """A static inline function whose body is one Thumb-2 asm loop, declared on a DSP
    core only (callers test ASM_GUARD)."""
    text = "\n".join(f'        "{op}\\n\\t"' for op in ops)
    return k.helper(name, f"""{ASM_GUARD}
/* {doc} */
static inline void {name}({proto})
{{
    {decl}
    __asm__ volatile(
{text}
        : {", ".join(outs)}
        : {", ".join(ins)}
        : "cc", "memory");
}}
#endif""")


def _requant_ops(accs: list[str], w: str, m: str, t: str, prm_at: int, sat: str,
                 common: int | None) -> list[str]:
    """acc = sat((high word of acc * mult + rnd) >> sh) with mult, rnd (and sh) from prm;
    with a layer-wide shift `common` the shift is SSAT's own ASR #common."""
    ins = sat.lstrip("_")
    ops = [f"ldrd {w}, {m}, [%[prm], #{prm_at}]"]
    ops += [f"smmla {a}, {a}, {w}, {m}" for a in accs]
    if common is not None:
        return ops + [f"{ins} {a}, #8, {a}, asr #{common}" for a in accs]
    ops.insert(1, f"ldr {t}, [%[prm], #{prm_at + 8}]")
    ops += [f"asr {a}, {a}, {t}" for a in accs]
    return ops + [f"{ins} {a}, #8, {a}" for a in accs]


def common_shift(bias, w, w_zp, shift, y_zp, x) -> int | None:
    """One right shift S for the whole layer, if every channel's accumulator can be
    scaled by 2^(S - sh) exactly: weights and bias multiplied by that power of two
    (still int16 lanes, sums far from overflow), the requantization then reads
    floor((acc 2^k mult + (2^(S-1) + zp 2^S) 2^32) / 2^(32+S)), the same integer.
    (Multipliers are normalized, so a layer's shifts differ by one or two.)"""
    wv = _centered_weights(w, w_zp)
    if shift.const is None or bias.const is None or wv is None:
        return None
    sh = np.broadcast_to(-1 - np.asarray(shift.const, np.int64).ravel(), (wv.shape[0],))
    S = int(sh.max())
    kk = S - sh
    if S < 1 or S > 31 or kk.max() > 7:
        return None
    if (np.abs(wv).max(axis=1) << kk).max() > 32767:
        return None
    xmax = 255 if x.dtype.itemsize == 1 else (1 << 16)
    bound = (np.abs(bias.const.astype(np.int64).ravel()) + 2 * xmax * np.abs(wv).sum(axis=1)) << kk
    rnd = (1 << (S - 1)) + abs(int(y_zp)) * (1 << S)
    return S if bound.max() < (1 << 30) and bound.max() // 2 + 1 + rnd < (1 << 31) - 1 else None


def loop2x2_helper(k, x_dtype, row_w: int, ow: int, sat: str, common: int | None) -> str | None:
    """Thumb-2 loop over the 2x2 blocks of two output rows (3x3 window, stride 1):
    per block the 4 input rows are loaded and split once (LDR + 2 SXTB16), 24 SMLAD /
    SMLAxy, the weights reloaded from the channel's parameter block as they are
    needed (LDRD) so that 12 registers hold everything: no spill, 61 instructions
    for 36 MACs. prm = {bias, w02, w1|w4, w35, w68, w7, mult, rnd, sh}."""
    if 3 * row_w > 4095 or ow + 1 > 4095:
        return None
    nx = INT8_EXT[np.dtype(x_dtype).name][1]
    tx = INT8_EXT[np.dtype(x_dtype).name][0]
    sx = "sxtb16" if nx == "s8" else "uxtb16"
    name = f"mtvm_dw3x3s1_2x2_{nx}_{sat[2:]}_r{row_w}_w{ow}" + (f"_s{common}" if common else "")

    def split(off):
        return [f"ldr %[t0], [%[p], #{off}]" if off else "ldr %[t0], [%[p]]",
                f"{sx} %[t1], %[t0]", f"{sx} %[t0], %[t0], ror #8"]

    def mac(a0, a1, w, m, h, b0=None, b1=None):
        return [f"smlad {a0}, %[t1], {w}, {b0 or a0}", f"smlab{h} {a0}, %[t0], {m}, {a0}",
                f"smlad {a1}, %[t0], {w}, {b1 or a1}", f"smlat{h} {a1}, %[t1], {m}, {a1}"]
    A = ["%[a0]", "%[a1]", "%[a2]", "%[a3]"]
    X, Y, Z = "%[x]", "%[y]", "%[z]"
    ops = ["1:", "ldr %[a2], [%[prm]]",                     # bias
           f"ldrd {X}, {Y}, [%[prm], #4]"]                  # w02, w1|w4
    ops += split(0) + mac(A[0], A[1], X, Y, "b", "%[a2]", "%[a2]")
    ops += [f"ldr {Z}, [%[prm], #12]"] + split(row_w)   # w35
    ops += [f"smlad %[a3], %[t0], {X}, %[a2]", f"smlatb %[a3], %[t1], {Y}, %[a3]",
            f"smlad %[a2], %[t1], {X}, %[a2]", f"smlabb %[a2], %[t0], {Y}, %[a2]"]
    ops += mac(A[0], A[1], Z, Y, "t")
    ops += split(2 * row_w) + mac(A[2], A[3], Z, Y, "t")
    ops += [f"ldrd {X}, {Y}, [%[prm], #16]"] + mac(A[0], A[1], X, Y, "b")   # w68, w7
    ops += split(3 * row_w) + mac(A[2], A[3], X, Y, "b")
    ops += _requant_ops(A, X, Y, Z, 24, sat, common)
    ops += ["strb %[a1], [%[q], #1]", f"strb %[a2], [%[q], #{ow}]",
            f"strb %[a3], [%[q], #{ow + 1}]", "strb %[a0], [%[q]], #2",
            "adds %[p], %[p], #2", "ldr %[t0], %[qend]", "cmp %[q], %[t0]", "bne 1b"]
    outs = ['[p] "+r"(p)', '[q] "+r"(q)'] + [f'[a{i}] "=&r"(a{i})' for i in range(4)] + \
        [f'[{r}] "=&r"({r})' for r in ("t0", "t1", "x", "y", "z")]
    ins = ['[prm] "r"(prm)', '[qend] "m"(qend)']
    return _asm_fn(k, name, "2x2 output blocks of two rows, 3x3 window, stride 1, until q "
                   "reaches qend.", f"const {tx}* p, {tx}* q, {tx}* qend, const int32_t* prm",
                   "int32_t a0, a1, a2, a3, t0, t1, x, y, z;", ops, outs, ins)


def loop_s2x4_helper(k, x_dtype, kh: int, dh: int, row_w: int, sat: str,
                     common: int | None) -> str | None:
    """Thumb-2 loop over blocks of 4 output pixels of one row at x stride 2 (window
    kh x 3): per window row two words and a byte (p0..p8), 2 SXTB16 + 2 for the odd
    bytes, 2 PKHBT, 8 SMLAD/SMLADX/SMLAxB and one LDRD of the row's weights; 12
    registers. prm = {bias, (w02, w1) per row, mult, rnd, sh}."""
    if (kh - 1) * dh * row_w + 8 > 4095 or 4 + 8 * kh + 8 > 1020:
        return None
    nx = INT8_EXT[np.dtype(x_dtype).name][1]
    tx = INT8_EXT[np.dtype(x_dtype).name][0]
    sx, lb = ("sxtb16", "ldrsb") if nx == "s8" else ("uxtb16", "ldrb")
    name = f"mtvm_dw{kh}x3s2_4_{nx}_{sat[2:]}_r{row_w}_d{dh}" + (f"_s{common}" if common else "")
    W, M = "%[x]", "%[y]"
    ops = ["1:", "ldr %[a3], [%[prm]]"]                     # bias
    for ky in range(kh):
        off = ky * dh * row_w
        first = ky == 0
        b = "%[a3]"
        ops += [f"ldrd {W}, {M}, [%[prm], #{4 + 8 * ky}]",
                f"ldr %[t0], [%[p], #{off}]" if off else "ldr %[t0], [%[p]]",
                f"{sx} %[t1], %[t0]",                                    # (p0, p2)
                f"{sx} %[t0], %[t0], ror #8",                            # (p1, p3)
                f"smlad %[a0], %[t1], {W}, {b if first else '%[a0]'}",
                f"smlabb %[a0], %[t0], {M}, %[a0]",                     # p1 w1
                f"smlatb %[a1], %[t0], {M}, {b if first else '%[a1]'}",  # p3 w1
                f"ldr %[t0], [%[p], #{off + 4}]",
                f"{sx} %[t2], %[t0]",                                    # (p4, p6)
                "pkhbt %[t1], %[t2], %[t1]",                             # (p4, p2)
                f"smladx %[a1], %[t1], {W}, %[a1]",
                f"smlad %[a2], %[t2], {W}, {b if first else '%[a2]'}",
                f"{lb} %[t1], [%[p], #{off + 8}]",
                "pkhbt %[t1], %[t1], %[t2]",                             # (p8, p6)
                f"smladx %[a3], %[t1], {W}, %[a3]",
                f"{sx} %[t0], %[t0], ror #8",                            # (p5, p7)
                f"smlabb %[a2], %[t0], {M}, %[a2]",
                f"smlatb %[a3], %[t0], {M}, %[a3]"]
    A = ["%[a0]", "%[a1]", "%[a2]", "%[a3]"]
    ops += _requant_ops(A, W, M, "%[t0]", 4 + 8 * kh, sat, common)
    ops += ["strb %[a1], [%[q], #1]", "strb %[a2], [%[q], #2]", "strb %[a3], [%[q], #3]",
            "strb %[a0], [%[q]], #4", "adds %[p], %[p], #8", "ldr %[t0], %[qend]",
            "cmp %[q], %[t0]", "bne 1b"]
    outs = ['[p] "+r"(p)', '[q] "+r"(q)'] + [f'[a{i}] "=&r"(a{i})' for i in range(4)] + \
        [f'[{r}] "=&r"({r})' for r in ("t0", "t1", "t2", "x", "y")]
    ins = ['[prm] "r"(prm)', '[qend] "m"(qend)']
    return _asm_fn(k, name, f"blocks of 4 output pixels of a row, {kh}x3 window, x stride 2, "
                   "until q reaches qend.", f"const {tx}* p, {tx}* q, {tx}* qend, "
                   "const int32_t* prm", "int32_t a0, a1, a2, a3, t0, t1, t2, x, y;", ops, outs,
                   ins)


def _centered_weights(w, w_zp) -> np.ndarray | None:
    """The constant weights minus their zero points, one int64 row per output
    channel (None when either is computed at run time)."""
    if w.const is None or (w_zp is not None and w_zp.const is None):
        return None
    wv = w.const.reshape(w.shape[0], -1).astype(np.int64)
    return wv if w_zp is None else wv - np.asarray(w_zp.const, np.int64).reshape(-1, 1)


def _acc_bound(bias, w, w_zp, x_itemsize) -> np.ndarray | None:
    """Per output channel, a bound on |acc| (bias + sum (x - zx)(w - zw)), or None."""
    wv = _centered_weights(w, w_zp)
    if bias.const is None or wv is None:
        return None
    xmax = 255 if x_itemsize == 1 else (1 << 16)
    return np.abs(bias.const.astype(np.int64).ravel()) + xmax * np.abs(wv).sum(axis=1)


def _fast_requant(k, bias, w, w_zp, mult, shift, y_zp, x) -> bool:
    """True when (hi + 2^(m-1) + y_zp 2^m) >> m is exact and cannot overflow: the
    multipliers make ties impossible (mtvm_requantize_nt's condition) and the
    largest |acc| keeps the sum inside int32."""
    if mult is None or shift is None or mult.const is None or shift.const is None:
        return False
    if not ties_impossible(mult.const, shift.const):
        return False
    bound = _acc_bound(bias, w, w_zp, x.dtype.itemsize)
    return bound is not None and _fits_int32(bound, shift, y_zp)


def _fits_int32(bound, shift, y_zp) -> bool:
    """Whether hi + 2^(m-1) + |y_zp| 2^m stays inside int32 for every channel (hi: the
    high word of the largest |acc| times the multiplier, m = -1 - shift)."""
    m = -1 - np.broadcast_to(np.asarray(shift.const, np.int64).ravel(), bound.shape)
    hi = bound // 2 + 1
    total = hi + (np.int64(1) << (m - 1)) + abs(int(y_zp)) * (np.int64(1) << m)
    return bool(np.all(total < (1 << 31) - 1))


def fast_requant_bounded(k, bias, w, w_zp, mult, shift, y_zp, x) -> bool:
    """_fast_requant with the ties ruled out by the accumulator's bound instead of
    v2(acc) <= 30: a tie needs v2(acc) + v2(mult) = 30 - shift for some acc != 0 with
    |acc| <= bound, so none when v2(mult) + floor(log2 bound) < 30 - shift (the
    float-derived multipliers of most layers have 7 trailing zero bits, which the
    general test rejects at shifts above -8). DSP cores only (the other targets'
    choices stay as they were; the depthwise kernel's own: ties_ruled_out_by_bound)."""
    if not k.target.is_arm_dsp:
        return False
    return ties_ruled_out_by_bound(bias, w, w_zp, mult, shift, y_zp, x)


def ties_ruled_out_by_bound(bias, w, w_zp, mult, shift, y_zp, x) -> bool:
    """fast_requant_bounded's test on any target."""
    if mult is None or shift is None or mult.const is None or shift.const is None:
        return False
    bound = _acc_bound(bias, w, w_zp, x.dtype.itemsize)
    if bound is None:
        return False
    mv = np.broadcast_to(np.asarray(mult.const, np.int64).ravel(), bound.shape)
    sv = np.broadcast_to(np.asarray(shift.const, np.int64).ravel(), bound.shape)
    for m_, s_, b_ in zip(mv.tolist(), sv.tolist(), bound.tolist()):
        if s_ > -2 or m_ <= 0:
            return False
        if b_ > 0 and ((m_ & -m_).bit_length() - 1) + (int(b_).bit_length() - 1) >= 30 - s_:
            return False
    return _fits_int32(bound, shift, y_zp)


def padded_plane_bytes(k, x, strides, pads, dilations) -> int:
    """Scratch of emit_depthwise: one input plane with its zero-point border, when
    there is padding or the output is written over the input (else none)."""
    h, wd = (x.shape[2], x.shape[3]) if len(x.shape) == 4 else (1, x.shape[2])
    p4 = pads if len(x.shape) == 4 else [0, pads[0], 0, pads[1]]
    if not any(p4) and getattr(k, "inplace", None) is None:
        return 0
    plane = aligned_plane(k, x, wd, p4[1], p4[3], strides, dilations)
    return (h + p4[0] + p4[2]) * max(wd + p4[1] + p4[3], plane[1] if plane else 0) * \
        x.dtype.itemsize


def aligned_plane(k, x, wd, pw, pe_w, strides, dilations) -> tuple[int, int] | None:
    """RV32 (mtvm_depthwise_rv32.h) and Arm DSP cores: the bordered plane's (left border,
    row width) that put each copied row on a word (on RV32 also halfword) boundary, rows of
    a multiple of four (two) bytes copied a word (halfword) at a time (on Arm by
    mtvm_copy's VLDM/VSTM, where an odd border left newlib's memcpy), for a 3x3 window at
    stride 1 or 2; None elsewhere (the border pw, rows of pw + wd + pe_w bytes)."""
    w = k.ins[1]
    a = 4 if wd % 4 == 0 else (2 if wd % 2 == 0 and k.target.is_riscv else 0)
    if not (k.target.is_riscv or k.target.is_arm_dsp) or x.dtype.itemsize != 1 or not a or \
            tuple(w.shape[2:]) != (3, 3) or any(d != 1 for d in dilations) or \
            len(set(strides)) != 1 or strides[0] not in (1, 2):
        return None
    left = -(-pw // a) * a
    return left, -(-(left + wd + pe_w) // a) * a


def _fast(k) -> bool:
    x, w, bias, mult, shift, w_zp = operands(k)
    return _fast_requant(k, bias, w, w_zp, mult, shift, int(k.node.attrs.get("y_zp", 0)), x)


def mve_depthwise_applies(k) -> bool:
    """Helium (MVE) cores: four output pixels per vector (mtvm_depthwise_s8_mve.h), where
    the requantization is the cheap one, the data int8, no weight zero points."""
    x, w, _, _, _, w_zp = operands(k)
    return k.target.has("mve") and x.dtype == w.dtype == np.int8 and \
        k.out.dtype.itemsize == 1 and w_zp is None and _fast(k)


def rv32_depthwise_applies(k, strides, dilations) -> bool:
    """RV32 cores: 3x3 windows at stride 1 or 2 in strips of two lines
    (mtvm_depthwise_rv32.h), where the requantization is the cheap one and the data 8-bit."""
    x, w = k.ins[0], k.ins[1]
    return k.target.is_riscv and tuple(w.shape[2:]) == (3, 3) and \
        all(d == 1 for d in dilations) and len(set(strides)) == 1 and \
        strides[0] in (1, 2) and k.out.dtype.itemsize == 1 and x.dtype.itemsize == 1 and \
        _fast(k)


def emit_depthwise(k, x, w, bias, w_zp, store, n, c, oc, mg, h, wd, kh, kw, oh, ow, sh, sw, ph,
                   pw, dh, dw, x_zp, pads, mve: bool = False, rv32: bool = False) -> list[str]:
    """Depthwise (one input channel per output channel): every output is a sum of
    x * w with the channel's weights in locals and the zero-point terms folded
    into the channel's bias once. When the conv pads (or writes in place) the
    channel is read from a scratch copy bordered by the zero point. The schedule
    chooses the variant: mve (mve_depthwise_applies), rv32 (rv32_depthwise_applies),
    else the rows (SMLAD on Arm DSP cores, portable C elsewhere)."""
    taps = kh * kw
    wv = [f"w{i}" for i in range(taps)]
    zw = per_channel(w_zp, "o") if w_zp is not None else None
    pe_h, pe_w = (pads[2], pads[3]) if len(pads) == 4 else (0, pads[-1])
    # Written in place (k.inplace): always read the channel from its scratch copy.
    padded = any((ph, pw, pe_h, pe_w)) or getattr(k, "inplace", None) is not None
    ph_, pw_ = h + ph + pe_h, wd + pw + pe_w
    row_w = pw_ if padded else wd
    src = "o" if mg == 1 else f"o / {mg}"
    attrs = k.node.attrs
    y_zp = int(attrs.get("y_zp", 0))
    act_min, act_max = int(attrs.get("act_min", -128)), int(attrs.get("act_max", 127))
    mult, shift = (k.ins + [None] * 5)[3:5]
    # Ties ruled out by the sums' bound too on DSP cores and x86 hosts: with AVX2 the
    # exact requantization took 20 instructions a vector of eight sums, the fast one 8.
    # (Not target c: its code would take the DSP cores' loops under #if too.)
    fast = (_fast_requant(k, bias, w, w_zp, mult, shift, y_zp, x)
            or fast_requant_bounded(k, bias, w, w_zp, mult, shift, y_zp, x)
            or (k.target.is_x86 and ties_ruled_out_by_bound(bias, w, w_zp, mult, shift, y_zp, x)))
    rows3 = kw == 3 and dw == 1 and sw in (1, 2) and ow >= 2 and not mve and not rv32
    lines = [f"/* depthwise: output channel o reads input channel {src} */"]
    plane = aligned_plane(k, x, wd, pw, pe_w, (sh, sw), (dh, dw)) if padded else None
    left = pw
    if plane and (rv32 or k.target.is_arm_dsp):   # the rows word (halfword) aligned: the
        # left border and rows rounded up
        left, pw_ = plane
        row_w = pw_
    if padded:
        k.scratch_bytes = ph_ * max(pw_, plane[1] if plane else 0) * x.dtype.itemsize
        lines += [f"{x.ctype}* pad = ({x.ctype}*)scratch;  /* [{ph_}][{pw_}], border "
                  f"= zero point {x_zp} */",
                  "/* the border, once: each channel's copy rewrites only the interior */",
                  f"memset(pad, (unsigned char)({x.ctype}){x_zp}, {ph_ * pw_});"]
    lines += [f"for (size_t b = 0; b < {n}; ++b) {{",
              f"    for (size_t o = 0; o < {oc}; ++o) {{",
              f"        const {x.ctype}* xc = {x.c} + (b * {c} + {src}) * {h * wd};",
              f"        {k.out.ctype}* yc = out0 + (b * {oc} + o) * {oh * ow};",
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
    if rows3:
        lines += ["#if defined(__ARM_FEATURE_DSP)",
                  "        /* per row (w0, w2) as two int16 lanes; the middle column two "
                  "per register */"]
        for r in range(kh):
            a, b_ = f"w{3 * r}", f"w{3 * r + 2}"
            lines.append(f"        const int32_t w{3 * r}{3 * r + 2} = (int32_t)"
                         f"(((uint32_t){a} & 0xFFFFu) | ((uint32_t){b_} << 16));")
        for r in range(0, kh, 2):
            lo = f"w{3 * r + 1}"
            if r + 1 < kh:
                hi = f"w{3 * r + 4}"
                lines.append(f"        const int32_t m{r} = (int32_t)(((uint32_t){lo} & 0xFFFFu)"
                             f" | ((uint32_t){hi} << 16));")
            else:
                lines.append(f"        const int32_t m{r} = {lo};")
        lines.append("#endif")
    if fast:
        lines += ["        /* requantization: (high word of acc * mult + rnd) >> sh, the "
                  "rounding and the output zero point in rnd */",
                  f"        const int32_t mult_o = {per_channel(mult, 'o')};",
                  f"        const int32_t sh_o = -1 - {per_channel(shift, 'o')};",
                  "        const int32_t rnd_o = (1 << (sh_o - 1))"
                  + (f" + {y_zp} * (1 << sh_o)" if y_zp else "") + ";"]
        k.library("mtvm_dsp.h")
        k.library("mtvm_depthwise_s8.h")
    elif mult is not None and mult.size > 1:
        lines.append(f"        const int32_t mult_o = {mult.c}[o], shift_o = {shift.c}[o];")
    # Thumb-2 loops (DSP cores): the channel's parameters in one block they index
    sat = {(-128, 127): "__ssat", (0, 255): "__usat"}.get((act_min, act_max))
    pairs2 = rows3 and sw == 1 and sh == 1 and oh >= 2
    S = common_shift(bias, w, w_zp, shift, y_zp, x) if fast and sat and rows3 else None
    loop2 = loop2x2_helper(k, x.dtype, row_w, ow, sat, S) \
        if fast and sat and pairs2 and kh == 3 and dh == 1 and ow >= 4 else None
    loop4 = loop_s2x4_helper(k, x.dtype, kh, dh, row_w, sat, S) \
        if fast and sat and rows3 and sw == 2 and ow >= 4 else None
    if loop2 or loop4:
        if S is None:
            ws = {i: f"w{i}" for i in range(taps)}
            pre, bias_s, rnd = [], "bias_in", "rnd_o"
        else:   # the channel scaled to the layer's shift S (see common_shift)
            ws = {i: f"w{i} * ks" for i in range(taps)}
            pre = [f"        const int32_t ks = 1 << ({S} - sh_o);   /* 2^(S - sh) */"]
            bias_s, rnd = "bias_in * ks", c_literal((1 << (S - 1)) + y_zp * (1 << S), np.int32)

        def pack(a, b):
            return f"(int32_t)(((uint32_t)({ws[a]}) & 0xFFFFu) | ((uint32_t)({ws[b]}) << 16))"
        if loop2:
            prm = [bias_s, pack(0, 2), pack(1, 4), pack(3, 5), pack(6, 8), ws[7], "mult_o", rnd,
                   "sh_o"]
        else:
            prm = [bias_s] + [f"{pack(3 * r, 3 * r + 2)}, {ws[3 * r + 1]}" for r in range(kh)] + \
                ["mult_o", rnd, "sh_o"]
        lines += [ASM_GUARD] + pre + ["        const int32_t prm[] = {",
                                      "            " + ",\n            ".join(prm), "        };"]
        lines += [f"        (void)w{3 * r}{3 * r + 2};" for r in range(kh)] + \
            [f"        (void)m{r};" for r in range(0, kh, 2)] + \
            (["        (void)rnd_o;"] if S is not None else []) + ["#endif"]
    if padded and rv32:   # rows copied a word or halfword (else four bytes) per step
        lines += [f"        mtvm_dw_copy_rv32((uint8_t*)pad + {ph * pw_ + left}, {pw_}, "
                  f"(const uint8_t*)xc, {h}, {wd});",
                  f"        xc = pad{f' + {left - pw}' if left != pw else ''};"]
    elif padded:
        from ...codegen.cwriter import Call, Const, ExprStmt, If, Raw, Var, eq, render_c
        if mve and (pw or pe_w):   # rows copied with vector loads and stores
            k.library("mtvm_depthwise_s8_mve.h")
            copy = [render_c(ExprStmt(Call("mtvm_copy_rows_s8_mve", (
                Var("pad"), Const(ph * pw_ + pw), Const(pw_), Var("xc"), Const(h),
                Const(wd)))))]
        elif pw == 0 and pe_w == 0:
            k.library("mtvm_copy.h")
            copy = [f"mtvm_copy(pad + {ph * pw_}, xc, {h * wd});"]
        else:
            k.library("mtvm_copy.h")
            copy = [f"for (size_t y = 0; y < {h}; ++y) {{",
                    f"    mtvm_copy(pad + (y + {ph}) * {pw_} + {left}, xc + y * {wd}, {wd});",
                    "}"]
            if wd * x.dtype.itemsize <= 8 and h >= 8:
                # short rows: their copies are a few loads and stores, which the loop's
                # pointer updates and branch (3 or 4 instructions a row) outweighed
                from ...codegen.cwriter import PreIf, Pragma, render_c
                copy = render_c(PreIf("defined(__GNUC__)", [Pragma("GCC unroll 4")])) \
                    .splitlines() + copy
        # Output channels that read one input channel (a multiplier mg > 1: a first
        # layer's 1 -> 32) share its padded copy: made for the first of them only
        # (kws_crnn_int8's 1 -> 32 5x3 layer: the copy was 32 times the plane)
        body = [Raw("\n".join(copy))]
        lines.append(render_c(If(eq(Var("o") % Const(mg), 0), body) if mg > 1 else body, 2))
        lines.append(f"        xc = pad{f' + {left - pw}' if left != pw else ''};")
    end = ["    }", "}"]
    if rv32:   # one call per channel (mtvm_dw3x3_channel_rv32), its shape constants inlined
        k.library("mtvm_depthwise_rv32.h")
        lines += [f"        mtvm_dw3x3_channel_rv32((const uint8_t*)xc, (uint8_t*)yc, "
                  f"(const int32_t[9]){{{', '.join(wv)}}}, bias_in,",
                  f"                                mult_o, rnd_o, sh_o, {act_min}, {act_max}, "
                  f"{int(x.dtype == np.uint8)}, {sh}, {row_w}, {oh}, {ow}, {int(oh > ow)});"]
        return lines + end
    if mve:   # one call per channel (mtvm_dw_channel_s8_mve)
        from ...codegen.cwriter import VOID, Call, Cast, Const, ExprStmt, Table, Type, Var, \
            render_c, sum_of
        k.library("mtvm_depthwise_s8_mve.h")
        offs = [ky * dh * row_w + kx * dw for ky in range(kh) for kx in range(kw)]
        taps_t = Cast(Type(VOID, pointer=True), Const(0))
        if taps <= 16 and max(offs) <= 255:   # a window per byte gather, a VMLADAV per pixel
            lines.insert(1, render_c(Table(Var("dw_taps", Type("uint8")),
                                           offs + [0] * (16 - taps))))
            taps_t = Var("dw_taps")
        args = [Var("xc"), Var("yc"), Var("wo"), Var("bias_in"), Var("mult_o"), Var("rnd_o"),
                Var("sh_o"), taps_t] + [Const(v) for v in (row_w, oh, ow, kh, kw, sh, sw, dh, dw,
                                                           act_min, act_max,
                                                           int(3 * sw <= sh * row_w))]
        body = [ExprStmt(Cast(Type(VOID), sum_of([Var(v) for v in wv]))),   # (the vector's)
                ExprStmt(Call("mtvm_dw_channel_s8_mve", tuple(args)))]
        return lines + [render_c(body, 2)] + end

    def stored(acc, xcoord, yrow="oy"):
        dst = f"yc[({yrow}) * {ow} + {xcoord}]" if " " in yrow else f"yc[{yrow} * {ow} + {xcoord}]"
        if not fast:
            st = store(acc, "o", dst)
            if mult is not None and mult.size > 1:
                st = [line.replace(f"{mult.c}[o]", "mult_o").replace(f"{shift.c}[o]", "shift_o")
                      for line in st]
            return st
        clamp = (f"{acc} = {acc} < {act_min} ? {act_min} : ({acc} > {act_max} ? {act_max} "
                 f": {acc});")
        st = [f"{acc} = mtvm_dw_requantize({acc}, mult_o, rnd_o, sh_o);"]
        if sat:
            st += ["#if defined(__ARM_FEATURE_DSP)", f"{acc} = {sat}({acc}, 8);", "#else",
                   clamp, "#endif"]
        else:
            st.append(clamp)
        return st + [f"{dst} = ({k.out.ctype}){acc};"]

    px = "ox" if sw == 1 else f"ox * {sw}"

    def block(npix):
        """A row of npix output pixels at (oy, ox): its window rows, then the stores."""
        body = [f"const {x.ctype}* p = r + {px};",
                "int32_t " + ", ".join(f"acc{i} = bias_in" for i in range(npix)) + ";"]
        accs = ", ".join(f"&acc{i}" for i in range(npix))
        for ky in range(kh):
            fn = row_helper(k, x.dtype, sw, npix, "b" if ky % 2 == 0 else "t")
            body.append(f"{fn}(p + {ky * dh * row_w}, w{3 * ky}, w{3 * ky + 1}, w{3 * ky + 2}, "
                        f"w{3 * ky}{3 * ky + 2}, m{ky - ky % 2}, {accs});")
        for i in range(npix):
            body += ["{"] + indent_c(stored(f"acc{i}", f"ox + {i}" if i else "ox")) + ["}"]
        return body

    def window_rows(rows: int) -> dict[int, list[tuple[int, int]]]:
        """Input row offset -> the (output row, kernel row) pairs it serves, for `rows`
        output rows at stride 1: each input row is unpacked once for all of them."""
        uses: dict[int, list[tuple[int, int]]] = {}
        for ry in range(rows):
            for ky in range(kh):
                uses.setdefault(ry + ky * dh, []).append((ry, ky))
        return dict(sorted(uses.items()))

    def block2x2():
        """Output pixels (oy, ox), (oy, ox+1), (oy+1, ox), (oy+1, ox+1), stride 1: each
        input row is unpacked once for the one or two output rows it feeds."""
        body = ["const " + x.ctype + "* p = r + ox;",
                "int32_t acc0 = bias_in, acc1 = bias_in, acc2 = bias_in, acc3 = bias_in;"]
        body.append("#if defined(__ARM_FEATURE_DSP)")
        unpack = unpack_helper(k, x.dtype)
        for off, uses in window_rows(2).items():
            body += ["{", "    int32_t lo, hi;", f"    {unpack}(p + {off * row_w}, &lo, &hi);"]
            for ry, ky in uses:
                fn = mac_helper(k, "b" if ky % 2 == 0 else "t")
                body.append(f"    {fn}(lo, hi, w{3 * ky}{3 * ky + 2}, m{ky - ky % 2}, "
                            f"&acc{2 * ry}, &acc{2 * ry + 1});")
            body.append("}")
        body.append("#else")
        for ry in range(2):
            for ky in range(kh):
                fn = row_helper(k, x.dtype, 1, 2, "b" if ky % 2 == 0 else "t")
                body.append(f"{fn}(p + {(ry + ky * dh) * row_w}, w{3 * ky}, w{3 * ky + 1}, "
                            f"w{3 * ky + 2}, w{3 * ky}{3 * ky + 2}, m{ky - ky % 2}, "
                            f"&acc{2 * ry}, &acc{2 * ry + 1});")
        body.append("#endif")
        for i in range(4):
            body += ["{"] + indent_c(stored(f"acc{i}", "ox + 1" if i % 2 else "ox",
                                           "oy + 1" if i >= 2 else "oy")) + ["}"]
        return body

    def column_dsp(rows: int) -> list[str]:
        """DSP cores: the pixel at ox of `rows` (1, or 2 at stride 1) output rows from
        oy, each input row unpacked once from the byte before the window (mac1: no byte
        read past the row), and fed to the output rows it serves: a row's odd last
        pixel in 6 instructions a window row where the plain sum took 9 or more."""
        from ...codegen.cwriter import Block, Decl, ExprStmt, Raw, RawExpr, Type, Var, call, \
            render_c
        i32 = Type("int32")
        p = Var("p", Type(x.dtype.name, const=True, pointer=True))
        lo, hi = Var("lo", i32), Var("hi", i32)
        accs = [Var(f"acc{i}", i32) for i in range(rows)]
        body = [Decl(p, RawExpr(f"r + {px} - 1"))] + [Decl(a, Var("bias_in", i32)) for a in accs]
        for off, uses in window_rows(rows).items():
            body.append(Block([Decl(lo), Decl(hi), ExprStmt(call(
                unpack_helper(k, x.dtype), p + off * row_w, RawExpr("&lo"), RawExpr("&hi")))] + [
                ExprStmt(call(mac_helper(k, "b" if ky % 2 == 0 else "t", 1), lo, hi,
                              Var(f"w{3 * ky}{3 * ky + 2}", i32), Var(f"m{ky - ky % 2}", i32),
                              RawExpr(f"&{accs[ry].name}")))
                for ry, ky in uses]))
        body += [Block([Raw("\n".join(stored(a.name, "ox", "oy + 1" if ry else "oy")))])
                 for ry, a in enumerate(accs)]
        return render_c(Block(body)).splitlines()

    def scalar(yrow="oy"):
        """One output pixel at (yrow, ox), the plain sum of its taps."""
        roff = "" if yrow == "oy" else f" + {row_w}"
        body = [f"const {x.ctype}* p = r + {px}{roff};"]
        terms = [f"p[{ky * dh * row_w + kx * dw}] * w{ky * kw + kx}"
                 for ky in range(kh) for kx in range(kw)]
        body.append("int32_t acc = bias_in")
        for i, t in enumerate(terms):
            body.append(f"    + {t}" + (";" if i == len(terms) - 1 else ""))
        return body + stored("acc", "ox", yrow)

    def row_lines(indent):
        """One output row oy: blocks of 4 and 2 pixels, then single pixels."""
        out, done = [], 0
        if rows3:
            if ow >= 4:
                c_loop = [f"for (; ox + 4 <= {ow}; ox += 4) {{"] + indent_c(block(4)) + ["}"]
                if loop4:
                    out += [ASM_GUARD, "{", f"    {k.out.ctype}* q = yc + oy * {ow};",
                            f"    {loop4}(r, q, q + {ow - ow % 4}, prm);",
                            f"    ox = {ow - ow % 4};", "    (void)ox;", "}", "#else"] + c_loop + \
                        ["#endif"]
                else:
                    out += c_loop
                done = ow - ow % 4
            if ow - done >= 2:
                out += ["{"] + indent_c(block(2)) + ["    ox += 2;", "}"]
                done += 2
        if rows3 and ow - done == 1:   # (ow >= 2: the byte before the window is in the row)
            out += column_dsp(1)
        elif done < ow:
            out += [f"for (; ox < {ow}; ++ox) {{"] + indent_c(scalar()) + ["}"]
        return indent_c(out, indent)

    # x86 hosts: eight pixels per vector (mtvm_depthwise_x86.h): along rows of eight or
    # more, or, at stride 1 or 2 both ways, along the plane taken as one flat row
    # (narrower rows)
    x86 = mult is not None and shift is not None and (
        (sw in (1, 2) and ow >= 8) or (sw == sh and sw in (1, 2) and (oh - 1) * row_w + ow >= 8))
    if x86:
        k.library("mtvm_depthwise_x86.h")
        if fast:
            rq = f"0, mult_o, 0, 0, rnd_o, sh_o, {act_min}, {act_max}"
        else:
            m_o, s_o = ("mult_o", "shift_o") if mult.size > 1 else \
                (per_channel(mult, "o"), per_channel(shift, "o"))
            rq = f"1, {m_o}, {s_o}, {y_zp}, 0, 0, {act_min}, {act_max}"
        lines += ["#if defined(MTVM_INT8_X86)",
                  f"        const int32_t wk[{taps}] = {{{', '.join(wv)}}};",
                  f"        mtvm_dw_plane_x86((const uint8_t*)xc, {int(x.dtype == np.uint8)}, "
                  f"{row_w}, (uint8_t*)yc, {oh}, {ow}, {kh}, {kw}, {sh}, {sw}, {dh}, {dw}, wk, "
                  f"bias_in, (mtvm_dw_requant_x86_t){{{rq}}});",
                  "#else"]
    if rows3:   # the blocks need the DSP extension; elsewhere the plain sums
        lines.append("#if defined(__ARM_FEATURE_DSP)")
    lines.append("        size_t oy = 0;")
    if pairs2:
        # two output rows at a time: rows oy and oy + 1 share kh - 1 input rows
        lines += [f"        for (; oy + 2 <= {oh}; oy += 2) {{",
                  f"            const {x.ctype}* r = xc + oy * {row_w};",
                  "            size_t ox = 0;"]
        c_loop = [f"            for (; ox + 2 <= {ow}; ox += 2) {{"] + \
            indent_c(block2x2(), 4) + ["            }"]
        if loop2:
            lines += [ASM_GUARD, "            {",
                      f"                {k.out.ctype}* q = yc + oy * {ow};",
                      f"                {loop2}(r, q, q + {ow - ow % 2}, prm);",
                      f"                ox = {ow - ow % 2};", "                (void)ox;",
                      "            }", "#else"] + \
                c_loop + ["#endif"]
        else:
            lines += c_loop
        if ow % 2:   # the last column, two rows at a time
            lines += indent_c(column_dsp(2), 3)
        lines.append("        }")
    if not pairs2 or oh % 2:
        lines += [f"        for (; oy < {oh}; ++oy) {{",
                  f"            const {x.ctype}* r = xc + oy * {sh * row_w};",
                  "            size_t ox = 0;"] + row_lines(3) + ["        }"]
    if rows3:   # one pixel at a time (compilers vectorize this loop on hosts)
        lines += ["#else",
                  f"        for (size_t oy = 0; oy < {oh}; ++oy) {{",
                  f"            const {x.ctype}* r = xc + oy * {sh * row_w};",
                  "            size_t ox = 0;"]
        if sw == 1 and ow >= 8:   # pairs on long rows (as fast on hosts, shorter elsewhere)
            fn = row_helper(k, x.dtype, 1, 2, "b")
            pb = [f"const {x.ctype}* p = r + ox;", "int32_t acc0 = bias_in, acc1 = bias_in;"]
            pb += [f"{fn}(p + {ky * dh * row_w}, w{3 * ky}, w{3 * ky + 1}, w{3 * ky + 2}, 0, 0, "
                   "&acc0, &acc1);" for ky in range(kh)]
            pb += ["{"] + indent_c(stored("acc0", "ox")) + ["}", "{"] + \
                indent_c(stored("acc1", "ox + 1")) + ["}"]
            lines += [f"            for (; ox + 2 <= {ow}; ox += 2) {{"] + indent_c(pb, 4) + \
                ["            }"]
        lines += [f"            for (; ox < {ow}; ++ox) {{"] + \
            indent_c(scalar(), 4) + ["            }", "        }", "#endif"]
    if x86:
        lines.append("#endif")
    return lines + end
