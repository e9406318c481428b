"""QConv: the integer convolution (any group, 1-D/2-D, strides, dilations, pads).

Schedules, chosen per layer: the im2col path (blocks of two output pixels
gathered into an int16 column, met by packed weights two output channels at a
time: Thumb-2 SMLAD assembly on a DSP core, AVX2 / AVX-512 VNNI on x86, portable
C elsewhere), the depthwise one (depthwise.py), and the dense loop nest
(mtvm_dot_8.h). Requantization and its NumPy model: common.py.
"""
from __future__ import annotations

import math

import numpy as np

from ...codegen.cwriter import (ArrayDecl, Assign, Binary, Cast, Comment, Const, Decl, ExprStmt,
                                For, If, RawExpr, Type, Var, and_, call, ge, index_type, lt,
                                render_c, select)
from ..base import c_literal, register
from .common import (
    DOMAIN,
    INT8_EXT,
    IntOp,
    conv_acc,
    conv_geometry,
    coord,
    finish,
    indent_c,
    operands,
    per_channel,
    plus,
    right_shift,
    shift_table_m1,
    store_lines,
    ties_impossible,
)

I32, CI32 = Type("int32"), Type("int32", const=True)

# -- fixed-point requantization ----------------------------------------------------


# -- C helpers ----------------------------------------------------------------------


def tail_slot(j: int, tl: int) -> int:
    """Column slot of tail tap j (of tl = kk % 4): the tail is one or two int16 words
    per pixel, (t0, 0) / (t0, t1) / (t0, t2), (t1, 0), so that the weight tail words
    widened by SXTB16 (see conv_pack_index) meet it with SMLADs."""
    return (3 - j if j else 0) if tl == 3 else j


def tail_stride(tl: int) -> int:
    """int16 slots of a pixel's tail in the column (zero-padded)."""
    return 0 if tl == 0 else (2 if tl <= 2 else 4)


def conv_pack_index(oc: int, kk: int, group: int = 1) -> np.ndarray:
    """Flat indices into the [OC][kk] weight rows, in the order the im2col kernel
    reads them (packed = rows.ravel()[index]; a permutation, so the packed tensor
    keeps the model's shape and size). Per group, per pair of output channels
    (o, o + 1) at offset o * kk: for each full block of four taps, channel o's four
    bytes then channel o + 1's, each block pair-permuted (w0 w2 w1 w3, see
    permute_pairs); then the kk % 4 tail taps of both, interleaved o, o + 1 in
    the order of their column slots (tail_slot): o0 p0 | o0 p0 o1 p1 |
    o0 p0 o2 p2 o1 p1 for tails of 1, 2, 3 (SXTB16 / SXTB16 ROR #8 of a word, or of
    a halfword for the last tap pair, give o's and o + 1's lanes).
    The last channel of a group with an odd count keeps its own row (blocks
    pair-permuted, tail in order)."""
    nb, tl = kk // 4, kk % 4
    mg = oc // group
    perm = np.array([0, 2, 1, 3])
    idx = np.empty(oc * kk, np.int64)
    for g in range(group):
        for j in range(0, mg, 2):
            o = g * mg + j
            base = o * kk
            if j + 1 < mg:
                blk = (np.arange(nb)[:, None, None] * 4 + perm[None, None, :]
                       + np.array([0, kk])[None, :, None] + base)   # (block, channel, tap)
                idx[base:base + 8 * nb] = blk.ravel()
                for j in range(tl):
                    q = base + 8 * nb + 2 * tail_slot(j, tl)
                    idx[q], idx[q + 1] = base + 4 * nb + j, base + kk + 4 * nb + j
            else:
                row = (np.arange(nb)[:, None] * 4 + perm[None, :]).ravel()
                idx[base:base + kk] = base + np.concatenate([row, np.arange(4 * nb, kk)])
    return idx


def pack_conv_weights(w: np.ndarray, group: int = 1) -> np.ndarray:
    """Weights [OC, C/group, (KH,) KW] -> the same shape, stored in the order the
    int8 im2col kernel (QConv, folded=1) reads them (conv_pack_index)."""
    w = np.ascontiguousarray(w)
    oc = w.shape[0]
    kk = w.size // max(oc, 1)
    return w.ravel()[conv_pack_index(oc, kk, group)].reshape(w.shape)


def unpack_conv_weights(w: np.ndarray, group: int = 1) -> np.ndarray:
    """The inverse of pack_conv_weights."""
    w = np.ascontiguousarray(w)
    oc = w.shape[0]
    kk = w.size // max(oc, 1)
    out = np.empty(w.size, w.dtype)
    out[conv_pack_index(oc, kk, group)] = w.ravel()
    return out.reshape(w.shape)


def permute_pairs(w: np.ndarray) -> np.ndarray:
    """Weights [OC, ...] -> rows whose full groups of four are stored w0 w2 w1 w3
    (self-inverse): SXTB16 and SXTB16 ROR #8 of such a word give the int16 lanes
    (w0, w1) and (w2, w3) that meet two words of int16 column taps."""
    rows = np.ascontiguousarray(w).reshape(w.shape[0], -1).copy()
    full = rows.shape[1] // 4 * 4
    g = rows[:, :full].reshape(rows.shape[0], -1, 4)
    rows[:, :full] = g[:, :, [0, 2, 1, 3]].reshape(rows.shape[0], full)
    return rows.reshape(w.shape)


def mm_helper(k, w_dtype, pixels: int) -> str:
    """The micro-kernel of QConv's im2col path: `pixels` (2 or 1) output pixels x two
    output channels over an int16 column block (c_runtime/kernels/generic/mtvm_mm_s16.h:
    Thumb-2 SMLAD assembly, AVX2 / AVX-512 VNNI, portable C)."""
    k.library("mtvm_mm_s16.h")
    return f"mtvm_mm{pixels}x2_s16_{INT8_EXT[np.dtype(w_dtype).name][1]}"


def mm4_x86_helper(k, w_dtype) -> str:
    """Two channel pairs (four channels) x two pixels on x86 hosts (mtvm_mm_s16.h)."""
    k.library("mtvm_mm_s16.h")
    return f"mtvm_mm2x4_x86_{INT8_EXT[np.dtype(w_dtype).name][1]}"


def mm4_rv32_helper(k, w_dtype) -> str:
    """Two channel pairs (four channels) x two pixels on RV32 cores
    (c_runtime/kernels/riscv/mtvm_mm_s16_rv32.h)."""
    k.library("mtvm_mm_s16_rv32.h")
    return f"mtvm_mm2x4_rv32_{INT8_EXT[np.dtype(w_dtype).name][1]}"


def st16x2_helper(k) -> str:
    """Store two sign-extended values as one word of two int16 lanes (PKHBT)."""
    k.library("mtvm_st16x2.h")
    return "mtvm_st16x2"


def mm1_helper(k, w_dtype) -> str:
    """The last output channel of a group with an odd channel count (1 or 2 pixels):
    c_runtime/kernels/generic/mtvm_mmx1_s16.h."""
    k.library("mtvm_mmx1_s16.h")
    return f"mtvm_mmx1_s16_{INT8_EXT[np.dtype(w_dtype).name][1]}"


def pair4_helper(k, x_dtype) -> str:
    """The column block of four channels x two neighbouring pixels of a pointwise conv
    (c_runtime/kernels/generic/mtvm_mm_s16.h)."""
    k.library("mtvm_mm_s16.h")
    return f"mtvm_im2col_pair4_s16_{INT8_EXT[np.dtype(x_dtype).name][1]}"


# -- convolution ------------------------------------------------------------------------


def _inside(out: int, stride: int, pad: int, k: int, dil: int, size: int) -> tuple[int, int]:
    """[lo, hi): the output positions whose whole window lies inside the input."""
    lo = min(out, -(-pad // stride))
    hi = max(lo, min(out, (size - 1 - (k - 1) * dil + pad) // stride + 1))
    return lo, hi


def fast_requant(mult, shift, y_zp: int):
    """For constant multipliers whose products are never exact ties (then rounding
    half up is exact, see mtvm_requantize_nt): the per-channel right shifts
    m = -1 - shift, or None when not applicable. With hi = (acc * mult) >> 32,
    requantize(acc) + y_zp == (hi + 2^(m-1) + y_zp * 2^m) >> m
                            == ((hi >> (m - 1)) + 2 * y_zp + 1) >> 1
    (the shifts are floors; adding an integer commutes with the outer one)."""
    if mult is None or shift is None or mult.const is None or shift.const is None or \
            not ties_impossible(mult.const, shift.const):
        return None
    m = -1 - np.asarray(shift.const, np.int64).ravel()
    if np.any(m < 1) or np.any(m > 30) or (1 << 30) + (abs(int(y_zp)) + 1) * (1 << int(m.max())) \
            >= 1 << 31:
        return None
    return m


def shifts_as_m1(k, y_zp) -> np.ndarray | None:
    """On Arm DSP cores, where the im2col path requantizes in the fast form with
    per-channel shifts: the int8 table that replaces QConv's shifts (input 4), each
    channel's m - 1 = -2 - shift, the right shift the C applies (computing it from
    the model's shift took three instructions a channel per pixel pair); else None.
    Schedule.weight_layout lays it out, _Store reads it (both ask this)."""
    mult, shift = k.plain(3) if len(k.ins) > 3 else None, k.plain(4) if len(k.ins) > 4 else None
    if not k.target.is_arm_dsp or shift is None or shift.size == 1 or mult is None:
        return None
    m = fast_requant(mult, shift, y_zp)
    if m is None or np.all(m == m[0]):
        return None
    return shift_table_m1(shift)


class _Store:
    """C lines requantizing an accumulator of channel `ch` and storing it."""

    def __init__(self, k, mult, shift, y_zp, act_min, act_max):
        self.k, self.mult, self.shift = k, mult, shift
        self.y_zp, self.lo, self.hi = y_zp, act_min, act_max
        # the table holds m - 1 (shifts_as_m1): m from the model's shifts
        self.m1_table = mult is not None and shifts_as_m1(k, y_zp) is not None
        self.m = fast_requant(mult, k.plain(4) if self.m1_table else shift, y_zp) \
            if mult is not None else None
        self.decls = []
        if self.m is not None and np.all(self.m == self.m[0]) and shift.size > 1:
            self.decls.append(f"(void){shift.c};   /* one shift for all channels */")

    def __call__(self, acc: str, ch: str, dst: str) -> list[str]:
        k = self.k
        if self.mult is None:
            return [f"{dst} = {acc};"]
        if self.m is None:
            return store_lines(k, acc, self.y_zp, self.lo, self.hi, self.mult, self.shift, ch,
                               dst)
        lines = [f"{acc} = (int32_t)(((int64_t){acc} * {per_channel(self.mult, ch)}) >> 32);"]
        m = self.m
        if np.all(m == m[0]):     # one shift: gcc folds the add and the shift into SSAT
            add = (1 << int(m[0] - 1)) + int(self.y_zp) * (1 << int(m[0]))
            lines.append(f"{acc} = ({acc}{plus(add)}) >> {int(m[0])};")
        elif self.m1_table:
            lines.append(f"{acc} = (({acc} >> {per_channel(self.shift, ch)})"
                         f"{plus(2 * int(self.y_zp) + 1)}) >> 1;   /* the table holds m - 1 */")
        else:
            lines.append(f"{acc} = (({acc} >> (~{per_channel(self.shift, ch)} - 1))"
                         f"{plus(2 * int(self.y_zp) + 1)}) >> 1;   /* m - 1 = -2 - shift */")
        clamp = f"{acc} = {acc} < {self.lo} ? {self.lo} : ({acc} > {self.hi} ? {self.hi} : {acc});"
        sat = {(-128, 127): "__ssat", (0, 255): "__usat"}.get((int(self.lo), int(self.hi)))
        if sat:
            k.library("mtvm_dsp.h")
            lines += ["#if defined(__ARM_FEATURE_DSP)", f"{acc} = {sat}({acc}, 8);", "#else",
                      clamp, "#endif"]
        else:
            lines.append(clamp)
        return lines + [f"{dst} = ({k.out.ctype}){acc};"]


    def x86_lines(self, a: str, o: str, dsts: list[str]) -> list[str] | None:
        """The fast requantization of a[0..7] (channels o, o + 1, o, o + 1, o + 2, o + 3,
        o + 2, o + 3, the order of mtvm_mm2x4_x86) in one AVX2 vector, stored to dsts:
        the same integer operations as __call__'s lines. None where it does not apply."""
        if self.mult is None or self.m is None:
            return None
        k, m = self.k, self.m
        k.library("mtvm_mm_s16.h")

        def lanes(buf):
            if buf.const is not None and buf.size == 1:
                return f"_mm256_set1_epi32({c_literal(buf.const.ravel()[0], np.int32)})"
            return f"mtvm_mm2x4_lanes_x86({buf.c} + {o})"
        if np.all(m == m[0]):     # one shift: m > 0
            args = f"_mm256_setzero_si256(), {int(m[0])}, " \
                f"{(1 << int(m[0] - 1)) + int(self.y_zp) * (1 << int(m[0]))}"
        else:                     # per channel: m = 0 selects it
            args = f"{lanes(self.shift)}, 0, {2 * int(self.y_zp) + 1}"
        st = [f"{d} = ({k.out.ctype})r[{i}];" for i, d in enumerate(dsts)]
        return ["{", "    int32_t r[8];",
                f"    mtvm_mm2x4_requantize_x86(r, {a}, {lanes(self.mult)}, {args}, "
                f"{int(self.lo)}, {int(self.hi)});",
                "    " + " ".join(st[:4]), "    " + " ".join(st[4:]), "}"]


def _col_pos(i: int, px, nb: int, tl: int) -> tuple[str, int]:
    """(base, offset) of tap i of pixel px in the column: 't' (blocks, pixel
    offset included) or 'tt' (the tail of pixel px, see tail_slot)."""
    if i < 4 * nb:
        return "t", 2 * (i & ~3) + (i & 3)
    return "tt", tail_slot(i - 4 * nb, tl)


def col_bytes(kk: int) -> int:
    """Scratch of emit_im2col's column for kk taps per pixel: 4 * kk bytes (two
    pixels of int16), + 4 when kk % 4 is odd (the tail words' zero slots)."""
    return (8 * (kk // 4) + 2 * tail_stride(kk % 4)) * 2


def widen_applies(k, mg: int, quad: bool = False, mve: bool = False) -> bool:
    """Whether the im2col path can read its weights widened to int16 in scratch
    (mtvm_mm_s16_w16.h): Arm DSP cores (SMLAD, no Helium), the Thumb-2 pair kernel,
    an even channel count per group (every row a channel pair's)."""
    return k.target.is_arm_dsp and not quad and not mve and mg % 2 == 0


def widened_row(kk: int) -> int:
    """int16 of a channel pair's widened weights (MTVM_MM_W16_ROW of its 2 kk bytes)."""
    return 4 * ((2 * kk + 3) // 4)


W16_PARAMS = 16   # int16 of a pair's requantization parameters (MTVM_MM_W16_PARAMS)


def widened_bytes(group: int, mg: int, kk: int, params: bool = False) -> int:
    """Scratch of the widened weights: every channel pair's row (after its parameters,
    where row_params), after the column."""
    return 2 * group * (mg // 2) * (widened_row(kk) + (W16_PARAMS if params else 0))


def row_params(k, y_zp: int) -> bool:
    """Whether the widened 2x2 tile requantizes in its kernel from parameters made once a
    call at the start of each pair's row (mtvm_mm2x2_w16_q8: bias, mult, rnd and sh per
    channel, where the generated C indexed three tables per channel and pixel pair):
    int8 outputs, no weight zero points, and (high word of acc * mult + rnd) >> sh exact
    (depthwise.fast_requant_bounded)."""
    from .depthwise import fast_requant_bounded
    x, _, bias, mult, shift, w_zp = operands(k)
    if mult is None or shift is None or bias is None or w_zp is not None or \
            k.out.dtype != np.int8:
        return False
    return fast_requant_bounded(k, bias, k.plain(1), None, k.plain(3), k.plain(4), y_zp, x)


def bordered_plane(h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw) -> tuple[int, int] | None:
    """(rows, columns) of the input planes with their zero-point border, as far as the
    windows reach (from the top and left padding on), where the layer has padding; None
    where it has none (every window inside the input)."""
    if _inside(oh, sh, ph, kh, dh, h) == (0, oh) and _inside(ow, sw, pw, kw, dw, wd) == (0, ow):
        return None
    return (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1


def emit_im2col(k, x, w, bias, w_zp, store, *, n, c, oc, group, h, wd, kh, kw, oh, ow, sh,
                sw, ph, pw, dh, dw, x_zp, mve: bool = False, quad: bool = False,
                x86_direct: bool = True, compact_border: bool = False,
                widen_weights: bool = False, border_plane: bool = False) -> list[str]:
    """QConv (folded=1): pairs of output pixels (in flat order, so a row's last pixel
    pairs with the next row's first) gathered into an int16 column in scratch, then
    two pixels x two output channels at a time (mtvm_mm2x2). Column layout, per
    block of four taps: pixel 0's four taps, then pixel 1's; then the kk % 4 tail
    taps of pixel 0, then those of pixel 1 (2 * kk int16 in all). The weights are
    packed to match (conv_pack_index). An odd last pixel: one pixel x two channels.
    The schedule chooses the variants: mve (emit_im2col_mve, where mve_applies), quad
    (RV32's four pixels, where rv32_quad_applies), x86_direct (the x86 kernels without
    the column, where they apply), compact_border (the pixels whose window crosses the
    padding gathered by the model's one shared function, mtvm_im2col_border_s8.h,
    rather than unrolled over a whole number of blocks in each layer: a 3x3 layer's
    code 1.4 -> 0.8 KB on the Cortex-M4, and those pixels read only their taps inside
    the input), widen_weights (on Arm DSP cores, where widen_applies: the weights
    widened to int16 in scratch after the column once per call, read by
    mtvm_mm2x2_s16_w16: 12 instructions per 16 MACs instead of 15), border_plane (the
    group's input planes copied once per call into scratch with their zero-point border,
    bordered_plane, so that every pixel takes the unrolled gather: a spectrogram's first
    layer, where one pixel in five touches the padding and its masked gather costs
    several times the others')."""
    cg, mg = c // group, oc // group
    khw = kh * kw
    kk = cg * khw
    pointwise = khw == 1 and sh == sw == 1 and (oh, ow) == (h, wd) and ph == pw == 0
    if mve:
        return emit_im2col_mve(k, x, w, bias, store, n=n, c=c, oc=oc, group=group, h=h, wd=wd,
                               kh=kh, kw=kw, oh=oh, ow=ow, sh=sh, sw=sw, ph=ph, pw=pw, dh=dh,
                               dw=dw, x_zp=x_zp, pointwise=pointwise)
    # the bordered copy: from here on the gather sees planes without padding
    plane = bordered_plane(h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw) \
        if border_plane and not pointwise and not quad else None
    src_h, src_wd, top, left = h, wd, ph, pw
    if plane:
        h, wd, ph, pw = plane[0], plane[1], 0, 0
    hw, ohw = h * wd, oh * ow
    nb, tl = kk // 4, kk % 4
    ts = tail_stride(tl)
    xt = x.ctype
    mm2 = mm_helper(k, w.dtype, 2)
    mm1 = mm_helper(k, w.dtype, 1) if ohw % 2 else None
    mmx1 = mm1_helper(k, w.dtype) if mg % 2 else None
    # quad (RV32): four pixels (a second column, cn int16 after the first) x four channels
    # in registers (mtvm_mm_s16_rv32.h)
    cn = col_bytes(kk) // 2
    k.scratch_bytes = col_bytes(kk) * (2 if quad else 1)
    widen = widen_weights and widen_applies(k, mg, quad, mve)
    params = widen and isinstance(store, _Store) and row_params(k, int(store.y_zp))
    rowp = widened_row(kk) + (W16_PARAMS if params else 0)   # int16 a pair's row
    if widen:
        k.library("mtvm_mm_s16_w16.h")
        k.scratch_bytes += widened_bytes(group, mg, kk, params)
    zx = c_literal(x_zp, np.int32)
    plane_at = k.scratch_bytes
    if plane:
        k.scratch_bytes += cg * hw * x.dtype.itemsize
    oy_lo, oy_hi = _inside(oh, sh, ph, kh, dh, h)
    ox_lo, ox_hi = _inside(ow, sw, pw, kw, dw, wd)
    padded = (oy_lo, oy_hi, ox_lo, ox_hi) != (0, oh, 0, ow)
    lines = [f"/* im2col: int16 columns of two output pixels in scratch, interleaved per block "
             f"of four of the {kk} = {cg} x {kh} x {kw} taps */",
             "int16_t* col = (int16_t*)scratch;"] + store.decls
    # one shift for the layer (its channels scaled to it, depthwise.common_shift)
    from .depthwise import common_shift
    common = common_shift(bias, k.plain(1), None, k.plain(4), int(store.y_zp), x) \
        if params else None
    if widen:
        w16, o = Var("w16", Type("int16", pointer=True)), Var("o")
        wbytes = Cast(Type("uint8", const=True, pointer=True), Var(w.c))
        w_u = int(np.dtype(w.dtype) == np.uint8)
        prep = [Decl(w16, Cast(w16.type, RawExpr(f"scratch + {col_bytes(kk)}")))]
        if not common:
            prep.append(ExprStmt(call("mtvm_mm_s16_widen", w16 + W16_PARAMS if params else w16,
                                      rowp, wbytes, w_u, group * (mg // 2), 2 * kk)))

        def m_of(ch):   # channel ch's right shift m
            return RawExpr(right_shift(store.shift, ch, store.m1_table))
        row_o = w16 + Binary(">>", o, Const(1)) * rowp
        mults = [RawExpr(per_channel(store.mult, "o")), RawExpr(per_channel(store.mult, "o + 1"))]
        if common:
            prep.append(For(o, oc, [ExprStmt(call(
                "mtvm_mm_w16_pair_scaled", row_o, wbytes + o * kk, w_u, 2 * kk,
                Var(bias.c)[o], Var(bias.c)[o + 1], *mults,
                RawExpr(f"{common} - ({render_c(m_of('o'))})"),
                RawExpr(f"{common} - ({render_c(m_of('o + 1'))})")))], step=2))
        elif params:
            prep.append(For(o, oc, [ExprStmt(call(
                "mtvm_mm_w16_params", row_o, Var(bias.c)[o], Var(bias.c)[o + 1], *mults,
                m_of("o"), m_of("o + 1"), int(store.y_zp)))], step=2))
        lines += render_c(prep).splitlines()
    pv = Var("plane", Type(x.dtype.name, pointer=True))
    if plane:   # the border, once: each group's copy rewrites only the interior
        k.library("mtvm_copy.h")
        lines += render_c([
            Decl(pv, Cast(pv.type, Var("scratch") + plane_at)),
            ExprStmt(call("memset", pv, Cast(Type("uint8"), Cast(Type(x.dtype.name), RawExpr(zx))),
                          cg * hw))]).splitlines()
    if tl % 2:   # the zero slot of each pixel's last tail word
        lines += [f"col[{8 * nb + ts - 1}] = 0;", f"col[{8 * nb + 2 * ts - 1}] = 0;"]
        if quad:
            lines += [f"col[{cn + 8 * nb + ts - 1}] = 0;",
                      f"col[{cn + 8 * nb + 2 * ts - 1}] = 0;"]
    body = []

    def tail_ptr(px: str) -> list[str]:
        return [f"int16_t* tt = col + {8 * nb}{f' + {ts} * {px}' if px != '0' else ''};"] \
            if tl else []

    def slow(px: str) -> list[str]:
        """Any pixel, padding included: one tap at a time."""
        pos = "((i >> 2) << 3) + (i & 3) + 4 * (size_t)" + px
        if tl:
            pos = f"i < {4 * nb} ? {pos} : {8 * nb} + {ts} * (size_t){px} + {slot_c(f'(i - {4 * nb})')}"
        i, ci, ky, kx = Var("i"), Var("ci"), Var("ky", I32), Var("kx", I32)
        ih, iw = Var("ih", CI32), Var("iw", CI32)
        inside = and_(and_(and_(ge(ih, 0), lt(ih, h)), ge(iw, 0)), lt(iw, wd))
        at = Var("xg")[(ci * h + Cast(index_type(), ih)) * wd + Cast(index_type(), iw)]
        tap = For(kx, kw, [Decl(iw, RawExpr(coord("ox", sw, pw, "kx", dw))),
                           Assign(Var("col")[RawExpr(pos)], select(inside, at, RawExpr(zx))),
                           Assign(i, 1, "+=")])
        return render_c([Decl(i, 0), For(ci, cg, [For(ky, kh, [
            Decl(ih, RawExpr(coord("oy", sh, ph, "ky", dh))), tap])])]).splitlines()

    mtype, msuf = ("uint32_t", "u") if khw <= 32 else ("uint64_t", "ull")

    def slot_c(r: str) -> str:
        """C expression of tail_slot for a tail tap index expression r."""
        return f"({r} ? 3 - {r} : 0)" if tl == 3 else r

    iy0, ix0, base = Var("iy0", CI32), Var("ix0", CI32), Var("base", CI32)

    def window_origin(mt: Type, *first) -> list:
        """iy0, ix0: the window's first input row and column; base their flat offset
        (may be negative); bit kx of `cm`: the window's column kx lies inside the
        input. `first`: declarations written before cm's."""
        cm, kx, iw = Var("cm", mt), Var("kx", I32), Var("iw", CI32)
        return [Decl(iy0, RawExpr(coord("oy", sh, ph, "0", 1)[:-4])),
                Decl(ix0, RawExpr(coord("ox", sw, pw, "0", 1)[:-4])),
                Decl(base, iy0 * wd + ix0), Comment("may be negative"),
                *first, Decl(cm, 0), Comment("cm: the columns kx inside the input"),
                For(kx, kw, [Decl(iw, ix0 + (kx * dw if dw != 1 else kx)),
                             Assign(cm, Binary("|", cm, Binary("<<", Cast(mt, and_(ge(iw, 0),
                                                                                lt(iw, wd))),
                                                               kx)))])]

    def mask_lines() -> list[str]:
        """Bit j of `m` (khw <= 64): tap j of a channel's window lies inside the input."""
        mt = Type(mtype[:-2])
        m, cm, ky, ih = Var("m", mt), Var("cm", mt), Var("ky", I32), Var("ih", CI32)
        return render_c(window_origin(mt, Decl(m, 0)) + [
            For(ky, kh, [Decl(ih, iy0 + (ky * dh if dh != 1 else ky)),
                         If(and_(ge(ih, 0), lt(ih, h)),
                            [Assign(m, Binary("|", m, Binary("<<", cm, ky * kw)))])])]).splitlines()

    border_table = Var("border", Type("int32", const=True))   # MTVM_BORDER_FIELDS words

    def shared_border(px: str) -> list[str]:
        """A pixel whose window crosses the padding, in the model's one border function
        (mtvm_im2col_border_s8.h; border_table: the layer's window and column): a few
        hundred bytes less code a layer than the taps unrolled, for the few pixels whose
        windows cross the padding, and it reads only the taps inside the input."""
        k.library("mtvm_im2col_border_s8.h")
        fn = "mtvm_im2col_border_u8" if x.dtype == np.uint8 else "mtvm_im2col_border_s8"
        return render_c([ExprStmt(call(fn, Var("col"), Var(px, I32),
                                       Var("xg"), RawExpr(coord("oy", sh, ph, "0", 1)[:-4]),
                                       RawExpr(coord("ox", sw, pw, "0", 1)[:-4]),
                                       border_table))]).splitlines()

    per = 4 // math.gcd(khw, 4)            # channels per whole number of blocks
    # fast() unrolls `per` channels a step, or the layer's cg where it has fewer (a
    # one-channel 5x5 stem: 25 taps, not 100); the one-tap-at-a-time gather costs
    # some 15 instructions a tap on the Cortex-M4, four or five times the unrolled one's
    unroll = min(per, cg) * khw <= 64

    def fast(px: str, masked: bool = False) -> list[str]:
        """The taps at constant offsets, `per` channels per step. masked: a pixel whose
        window crosses the padding; the taps not inside the input (bit clear in `m`)
        read as zx."""
        offs = [ky * dh * wd + kx * dw for ky in range(kh) for kx in range(kw)]
        if masked:
            out = mask_lines() + [f"const {xt}* p = xg;"]
        else:
            out = [f"const {xt}* p = xg + (size_t)({coord('oy', sh, ph, '0', 1)[:-4]}) * {wd}"
                   f" + (size_t)({coord('ox', sw, pw, '0', 1)[:-4]});"]
        out += [f"int16_t* t = col + 4 * {px};"] + tail_ptr(px)

        def src(off, j):
            if not masked:
                return f"p[{off}]"
            return f"((m & {1 << j}{msuf}) ? (int32_t)p[base + {off}] : {zx})"

        full = cg // per
        st2 = st16x2_helper(k)

        def stores(taps, i0):
            """C statements writing taps [(i, source offset)]: two at a time where they
            share a column word."""
            out_, j_ = [], 0
            while j_ < len(taps):
                i, sof, jt = taps[j_]
                base, off = _col_pos(i, px, nb, tl)
                if base == "t":
                    off -= 2 * i0
                if base == "t" and i % 2 == 0 and j_ + 1 < len(taps) and \
                        taps[j_ + 1][0] == i + 1:
                    out_.append(f"{st2}(t + {off}, {src(sof, jt)}, {src(*taps[j_ + 1][1:])});")
                    j_ += 2
                else:
                    out_.append(f"{base}[{off}] = {src(sof, jt)};")
                    j_ += 1
            return out_
        if full:
            stmts = stores([(u * khw + j, u * hw + offs[j], j) for u in range(per)
                            for j in range(khw)], 0)
            loop = f"for (size_t ci = 0; ci < {full * per}; ci += {per}, p += {per * hw}, " \
                   f"t += {2 * per * khw}) {{"
            if full == 1:
                loop = "{"
            out += [loop] + ["    " + " ".join(stmts[i:i + 3]) for i in range(0, len(stmts), 3)]
            out += ["}"]
            if full == 1 and cg % per:
                out += [f"p += {per * hw};", f"t += {2 * per * khw};"]
        i0 = full * per * khw
        stmts = stores([(i0 + u * khw + j, u * hw + offs[j], j) for u in range(cg % per)
                        for j in range(khw)], i0)
        out += [" ".join(stmts[i:i + 3]) for i in range(0, len(stmts), 3)]
        if not full and not any(s.startswith(("t[", st2)) for s in stmts):
            out += ["(void)t;"]
        if tl and not any(s.startswith("tt[") for s in stmts):
            out += ["(void)tt;"]
        return out

    if pointwise:
        # the two pixels of a pair are neighbours in every channel plane
        full = cg // 4
        pair = ["const " + xt + "* p = xg + q;"] + (["int16_t* t = col;"] if full else [])
        one = list(pair)
        if full:
            loop = f"for (size_t ci = 0; ci < {4 * full}; ci += 4, p += {4 * hw}, t += 8) {{"
            pair += [loop, f"    {pair4_helper(k, x.dtype)}(t, p, {hw});", "}"]
            one += [loop] + indent_c([" ".join(f"t[{r}] = p[{r * hw}];" for r in range(4))]) + ["}"]
        for r in range(cg % 4):
            q = 8 * nb + tail_slot(r, tl)
            pair.append(f"col[{q}] = p[{r * hw}]; col[{q + ts}] = p[{r * hw + 1}];")
            one.append(f"col[{q}] = p[{r * hw}];")
        if ohw % 2:
            body += ["if (npx == 2) {"] + indent_c(pair) + ["} else {"] + indent_c(one) + ["}"]
        else:
            body += ["{"] + indent_c(pair) + ["}"]
    else:
        gather = fast("px") if unroll else slow("px")
        if padded:
            # fast(masked) unrolls `per` channels when there are that many, then the
            # rest; compact_border calls the shared function instead where that is more
            # than 16 taps (for fewer it saves no code), and so does any window too large
            # to unroll
            unrolled = (per if cg >= per else 0) * khw + (cg % per) * khw
            if unroll and not (compact_border and unrolled > 16):
                border = fast("px", masked=True)
            else:
                border = shared_border("px")
                lines += render_c(ArrayDecl(border_table, (
                    h, wd, kh, kw, dh, dw, cg, nb, tl, ts, int(x_zp)))).splitlines()
            gather = [f"if (oy >= {oy_lo} && oy < {oy_hi} && ox >= {ox_lo} && ox < {ox_hi}) {{"] \
                + indent_c(gather) + ["} else {"] + indent_c(border) + ["}"]
        body += ["for (int32_t px = 0; px < npx; ++px) {"] + indent_c(gather) + \
            [f"    if (++ox == {ow}) {{", "        ox = 0;", "        ++oy;", "    }", "}"]
    if w_zp is not None:
        px, i, j = Var("px", I32), Var("i"), Var("j")
        xsum, col, at_px = Var("xsum", I32)[px], Var("col"), Cast(index_type(), px)
        sums = [For(i, nb, [For(j, 4, [Assign(xsum, col[8 * i + 4 * at_px + j], "+=")])])]
        if tl:
            sums += [For(j, ts, [Assign(xsum, col[8 * nb + ts * at_px + j], "+=")]),
                     Comment("the padding slots hold 0")]
        body += ["int32_t xsum[2] = { 0, 0 };"] + \
            render_c(For(px, Var("npx", I32), sums)).splitlines()

    ngather = len(body)

    def zw(ch, px):
        return f" - {per_channel(w_zp, ch)} * xsum[{px}]" if w_zp is not None else ""

    def st(idx, ch, dst, px):
        return ["{", f"    int32_t acc = a[{idx}]{zw(ch, px)};"] + \
            indent_c(store("acc", ch, dst)) + ["}"]
    row = Var("wr")   # the pair's widened row: a pointer stepped with o
    if common:   # the tile's requantization in its kernel, one shift for the layer
        rnd = (1 << (common - 1)) + int(store.y_zp) * (1 << common)
        two = [render_c(ExprStmt(call("mtvm_mm2x2_w16_q8s", Var("col"), row, nb, tl, Var("yp"),
                                      ohw, rnd, common, int(store.lo), int(store.hi))))]
    elif params:   # the tile's requantization in its kernel
        two = [render_c(ExprStmt(call("mtvm_mm2x2_w16_q8", Var("col"), row, nb, tl, Var("yp"),
                                      ohw, int(store.lo), int(store.hi))))]
    else:
        mm2_call = call("mtvm_mm2x2_s16_w16", Var("col"), row, nb, tl, Var("a")) if widen \
            else call(mm2, Var("col"), Var("wp"), nb, tl, int(kk % 4 == 0), Var("a"))
        two = [f"int32_t a[4] = {{ {bias.c}[o], {bias.c}[o + 1], {bias.c}[o], {bias.c}[o + 1] }};",
               render_c(ExprStmt(mm2_call))] + st(0, "o", "yp[0]", 0) + \
            st(1, "o + 1", f"yp[{ohw}]", 0) + st(2, "o", "yp[1]", 1) + \
            st(3, "o + 1", f"yp[{ohw + 1}]", 1)
    # the int8 rows (wp) where a kernel reads them: not the widened pairs (found from o),
    # only their odd last pixel
    int8_rows = not widen or bool(ohw % 2)
    step_wp = (f"wp += {2 * kk}, " if int8_rows else "") + (f"wr += {rowp}, " if widen else "")
    chan_loop = f"for (size_t o = g * {mg}; o + 1 < (g + 1) * {mg}; o += 2, {step_wp}" \
                f"yp += {2 * ohw}) {{"
    if mg >= 4 and k.target.is_riscv:
        # RV32 (no SIMD): four channels x two pixels in registers, then the last pair
        mm4 = mm4_rv32_helper(k, w.dtype)
        four = [f"int32_t a[8] = {{ {bias.c}[o], {bias.c}[o + 1], {bias.c}[o], {bias.c}[o + 1],",
                f"                 {bias.c}[o + 2], {bias.c}[o + 3], {bias.c}[o + 2], "
                f"{bias.c}[o + 3] }};",
                f"{mm4}(col, wp, wp + {2 * kk}, {nb}, {tl}, a);"]
        for h_ in (0, 4):
            o_ = "o" if not h_ else "o + 2"
            o1 = "o + 1" if not h_ else "o + 3"
            r = 2 * ohw if h_ else 0
            four += st(h_, o_, f"yp[{r}]", 0) + st(h_ + 1, o1, f"yp[{r + ohw}]", 0) + \
                st(h_ + 2, o_, f"yp[{r + 1}]", 1) + st(h_ + 3, o1, f"yp[{r + ohw + 1}]", 1)
        two_loop = ["{", f"    size_t o = g * {mg};",
                    f"    for (; o + 3 < (g + 1) * {mg}; o += 4, wp += {4 * kk}, "
                    f"yp += {4 * ohw}) {{"]
        two_loop += indent_c(four, 2) + ["    }"]
        two_loop += [f"    for (; o + 1 < (g + 1) * {mg}; o += 2, wp += {2 * kk}, "
                     f"yp += {2 * ohw}) {{"]
        two_loop += indent_c(two, 2) + ["    }", "}"]
    elif mg >= 4:
        # x86 hosts: four channels at a time (the column loads shared, more independent
        # sums), then the last pair
        mm4 = mm4_x86_helper(k, w.dtype)
        four = [f"int32_t a[8] = {{ {bias.c}[o], {bias.c}[o + 1], {bias.c}[o], {bias.c}[o + 1],",
                f"                 {bias.c}[o + 2], {bias.c}[o + 3], {bias.c}[o + 2], "
                f"{bias.c}[o + 3] }};",
                f"{mm4}(col, wp, wp + {2 * kk}, {nb}, {tl}, a);"]
        vec = store.x86_lines("a", "o", [f"yp[{r}]" for r in (0, ohw, 1, ohw + 1, 2 * ohw, 3 * ohw,
                                                             2 * ohw + 1, 3 * ohw + 1)]) \
            if w_zp is None and isinstance(store, _Store) else None
        if vec:    # the eight outputs requantized in one vector
            four += vec
        for h_ in (0, 4) if not vec else ():
            o_ = "o" if not h_ else "o + 2"
            o1 = "o + 1" if not h_ else "o + 3"
            r = 2 * ohw if h_ else 0
            four += st(h_, o_, f"yp[{r}]", 0) + st(h_ + 1, o1, f"yp[{r + ohw}]", 0) + \
                st(h_ + 2, o_, f"yp[{r + 1}]", 1) + st(h_ + 3, o1, f"yp[{r + ohw + 1}]", 1)
        two_loop = ["#if defined(MTVM_INT8_X86)", "{",
                    f"    size_t o = g * {mg};",
                    f"    for (; o + 3 < (g + 1) * {mg}; o += 4, wp += {4 * kk}, yp += {4 * ohw}) {{"]
        two_loop += indent_c(four, 2) + ["    }"]
        two_loop += [f"    for (; o + 1 < (g + 1) * {mg}; o += 2, wp += {2 * kk}, yp += {2 * ohw}) {{"]
        two_loop += indent_c(two, 2) + ["    }", "}", "#else", chan_loop] + indent_c(two) + \
            ["}", "#endif"]
    else:
        two_loop = [chan_loop] + indent_c(two) + ["}"]
    if ohw % 2:
        one = [f"int32_t a[2] = {{ {bias.c}[o], {bias.c}[o + 1] }};",
               f"{mm1}(col, wp, {nb}, {tl}, {int(kk % 4 == 0)}, a);"] + st(0, "o", "yp[0]", 0) + \
            st(1, "o + 1", f"yp[{ohw}]", 0)
        one_rv32 = rv32_one_requant(store, w, tl, ohw=ohw, kk=kk, nb=nb, mg=mg, bias=bias) \
            if quad else None
        if one_rv32:   # RV32: the last pixel four channels at a time, in assembly
            body += ["if (npx == 2) {"] + indent_c(two_loop) + ["} else {"] + \
                indent_c(one_rv32) + ["}"]
        else:
            body += ["if (npx == 2) {"] + indent_c(two_loop) + ["} else {", "    " + chan_loop] \
                + indent_c(one, 2) + ["    }", "}"]
    else:
        body += two_loop
    if mg % 2:
        o = f"(g + 1) * {mg} - 1"
        body += ["{", f"    const size_t o = {o};",
                 f"    int32_t a[2] = {{ {bias.c}[o], {bias.c}[o] }};",
                 f"    {mmx1}(col, wp, {nb}, {tl}, npx, a);"] + indent_c(st(0, "o", "yp[0]", 0))
        body += ["    if (npx == 2) {"] + indent_c(st(1, "o", "yp[1]", 1), 2) + ["    }", "}"]
    lines += [f"for (size_t b = 0; b < {n}; ++b) {{",
              f"    for (size_t g = 0; g < {group}; ++g) {{"]
    if plane:   # the group's planes into the bordered copy
        rows, cols = min(src_h, h - top), min(src_wd, wd - left)
        xs = Var("xs", Type(x.dtype.name, pointer=True, const=True))
        ci, yy = Var("ci"), Var("y")
        lines += render_c([
            Decl(xs, Var(x.c) + (Var("b") * c + Var("g") * cg) * (src_h * src_wd)),
            For(ci, cg, [For(yy, rows, [ExprStmt(call(
                "mtvm_copy", pv + ((ci * h + yy + top) * wd + left),
                xs + (ci * src_h + yy) * src_wd, cols))])]),
            Decl(Var("xg", xs.type), pv)], 2).splitlines()
    else:
        lines += [f"        const {xt}* xg = {x.c} + (b * {c} + g * {cg}) * {hw};"]
    if not pointwise:
        lines += ["        int32_t oy = 0, ox = 0;"]
    lines += [f"        for (int32_t q = 0; q < {ohw}; q += 2) {{",
              *([f"            const {w.ctype}* wp = {w.c} + g * {mg * kk};"]
                if int8_rows else []),
              f"            {k.out.ctype}* yp = out0 + (b * {oc} + g * {mg}) * {ohw} + (size_t)q;"]
    if ohw % 2:
        lines += [f"            const int32_t npx = q + 1 < {ohw} ? 2 : 1;"]
    elif not pointwise or mg % 2 or w_zp is not None:
        lines += ["            const int32_t npx = 2;"]
    if widen:
        lines.append(render_c(Decl(Var("wr", Type("int16", pointer=True, const=True)),
                                   Var("w16") + Var("g") * (mg // 2 * rowp)), 3))
    if quad:
        body = rv32_quad(k, body, body[:ngather], st, w, bias, mg=mg, kk=kk, ohw=ohw, nb=nb,
                         tl=tl, cn=cn, store=store)
    nest = indent_c(body, 3) + ["        }", "    }", "}"]
    # the x86 kernels only where an x86 build can take them (portable C keeps every #if):
    # elsewhere the knob would change dead code only, and the tuner measure it for nothing
    direct_ok = x86_direct and (k.target.is_x86 or k.target.is_generic) and w_zp is None \
        and k.inplace is None and not plane
    direct = pointwise_x86(k, x, w, bias, store, n=n, c=c, oc=oc, group=group, hw=hw) \
        if pointwise and direct_ok else None
    kxk = direct_x86(k, x, w, bias, store, n=n, c=c, oc=oc, group=group, h=h, wd=wd, kh=kh,
                     kw=kw, oh=oh, ow=ow, sh=sh, sw=sw, ph=ph, pw=pw, dh=dh, dw=dw,
                     x_zp=x_zp) if not pointwise and direct_ok else None
    if kxk:
        pre = lines.index("int16_t* col = (int16_t*)scratch;") + 1 + len(store.decls)
        return lines[:pre] + ["#if defined(MTVM_INT8_X86)"] + kxk + ["#else"] + lines[pre:] + \
            nest + ["#endif"]
    if direct:
        pre = lines.index("int16_t* col = (int16_t*)scratch;") + 1 + len(store.decls)
        loops = lines[pre:] + nest
        # AVX2: the plane as one row of a 1 x 1 conv
        avx2 = direct_x86(k, x, w, bias, store, n=n, c=c, oc=oc, group=group, h=1, wd=hw,
                          kh=1, kw=1, oh=1, ow=hw, sh=1, sw=1, ph=0, pw=0, dh=1, dw=1, x_zp=x_zp)
        return lines[:pre] + ["#if defined(MTVM_INT8_X86) && defined(__AVX512BW__) && "
                              "defined(__AVX512VNNI__)"] + direct + \
            (["#elif defined(MTVM_INT8_X86)"] + avx2 if avx2 else []) + \
            ["#else"] + loops + ["#endif"]
    return lines + nest


def rv32_quad_applies(k, group: int, kk: int) -> bool:
    """Whether emit_im2col takes four pixels at a time (rv32_quad): an RV32 target, no
    weight zero point, output channels per group a multiple of four, the second channel
    pair's weights (2 * kk bytes on) within a load's 12-bit offset, four output pixels."""
    w_zp = operands(k)[5]
    mg = k.ins[1].shape[0] // group
    ohw = int(np.prod(k.out.shape[2:]))
    return k.target.is_riscv and w_zp is None and mg % 4 == 0 and 2 * kk <= 2040 and ohw >= 4


def _rv32_requant_args(store, w, nb) -> tuple | None:
    """(macro suffix, mode, per-channel multiplier and shift pointers and their byte steps,
    shift, add) of the RV32 assembly requantization (MTVM_MM4X4Q_RV32, MTVM_MM1X4Q_RV32), where
    _Store's fast path applies, there is a block of four taps and the clamp is a full 8-bit
    range; else None."""
    if not isinstance(store, _Store) or store.mult is None or store.m is None or nb < 1 or \
            (int(store.lo), int(store.hi)) not in ((-128, 127), (0, 255)):
        return None
    m, zp = store.m, int(store.y_zp)
    mult, shift = store.mult, store.shift
    if np.all(m == m[0]):      # one shift: (hi + add) >> m
        mode, sh, addv = "ONE", int(m[0]), (1 << int(m[0] - 1)) + zp * (1 << int(m[0]))
    else:                      # per channel: ((hi >> (m - 1)) + 2 y_zp + 1) >> 1
        mode, sh, addv = "PER", 0, 2 * zp + 1
    mptr, mstep = (f"{mult.c} + o", 4) if mult.size > 1 else (mult.c, 0)
    sptr, sstep = (f"{shift.c} + o", 4) if shift.size > 1 else (shift.c, 0)
    return (INT8_EXT[np.dtype(w.dtype).name][1].upper(), mode, mptr, mstep, sptr, sstep, sh,
            addv)


def rv32_quad_requant(store, w, tl, *, ohw, cn, kk, nb, bias) -> list[str] | None:
    """The four-channel block of rv32_quad with the bias, the requantization and the stores
    in the same RV32 assembly as the sums (MTVM_MM4X4Q_RV32: the sixteen sums stay in
    registers), where _rv32_requant_args applies; else None (the C stores of rv32_quad)."""
    a = _rv32_requant_args(store, w, nb)
    if a is None:
        return None
    suf, mode, mptr, mstep, sptr, sstep, sh, addv = a
    return [f"const void* const rq[4] = {{ {bias.c} + o, yp, {mptr}, {sptr} }};",
            f"MTVM_MM4X4Q_RV32_{suf}({mode}, col, col + {cn}, wp, {2 * kk}, {nb}, {tl}, rq, "
            f"{ohw}, {mstep}, {sstep}, {sh}, {addv}, {int(store.lo)}, {int(store.hi)});"]


def rv32_one_requant(store, w, tl, *, ohw, kk, nb, mg, bias) -> list[str] | None:
    """RV32, where rv32_quad applies: a plane's odd last pixel, four channels at a time with
    the requantization in the same assembly (MTVM_MM1X4Q_RV32); else None."""
    a = _rv32_requant_args(store, w, nb)
    if a is None:
        return None
    suf, mode, mptr, mstep, sptr, sstep, sh, addv = a
    return [f"for (size_t o = g * {mg}; o < (g + 1) * {mg}; o += 4, wp += {4 * kk}, "
            f"yp += {4 * ohw}) {{",
            f"    const void* const rq[4] = {{ {bias.c} + o, yp, {mptr}, {sptr} }};",
            f"    MTVM_MM1X4Q_RV32_{suf}({mode}, col, wp, {2 * kk}, {nb}, {tl}, rq, {ohw}, "
            f"{mstep}, {sstep}, {sh}, {addv}, {int(store.lo)}, {int(store.hi)});", "}"]


def rv32_quad(k, body, gather, st, w, bias, *, mg, kk, ohw, nb, tl, cn, store=None) -> list[str]:
    """emit_im2col's loop body on RV32: four output pixels at a time while they last (the
    pair gather run twice, into col and col + cn; MTVM_MM4X4_RV32 over both columns, four
    channels at a time), else the pair body."""
    k.library("mtvm_mm_s16_rv32.h")
    mm4 = f"MTVM_MM4X4_RV32_{INT8_EXT[np.dtype(w.dtype).name][1].upper()}"
    b = bias.c
    four = [f"int32_t a[16] = {{ {b}[o], {b}[o + 1], {b}[o], {b}[o + 1], {b}[o + 2], {b}[o + 3], "
            f"{b}[o + 2], {b}[o + 3],",
            f"                  {b}[o], {b}[o + 1], {b}[o], {b}[o + 1], {b}[o + 2], {b}[o + 3], "
            f"{b}[o + 2], {b}[o + 3] }};",
            f"{mm4}(col, col + {cn}, wp, {2 * kk}, {nb}, {tl}, a);"]
    for h, pp in ((0, 0), (8, 2)):
        for i, (ch, r) in enumerate((("o", 0), ("o + 1", ohw), ("o", 1), ("o + 1", ohw + 1),
                                     ("o + 2", 2 * ohw), ("o + 3", 3 * ohw),
                                     ("o + 2", 2 * ohw + 1), ("o + 3", 3 * ohw + 1))):
            four += st(h + i, ch, f"yp[{r + pp}]", 0)
    fused = rv32_quad_requant(store, w, tl, ohw=ohw, cn=cn, kk=kk, nb=nb, bias=bias)
    if fused:
        four = fused
    out = [f"if (q + 3 < {ohw}) {{   /* four pixels: q, q + 1 into col, q + 2, q + 3 into "
           f"col + {cn} */", "    {"] + indent_c(gather, 2) + \
        ["    }", "    {", f"        int16_t* const col_b = col + {cn};",
         "        const int32_t q_b = q + 2;", "        {", "            int16_t* col = col_b;",
         "            const int32_t q = q_b;", "            (void)q;"] + indent_c(gather, 3) + \
        ["        }", "    }",
         f"    for (size_t o = g * {mg}; o < (g + 1) * {mg}; o += 4, wp += {4 * kk}, "
         f"yp += {4 * ohw}) {{"] + indent_c(four, 2) + ["    }", "    q += 2;", "} else {"]
    return out + indent_c(body) + ["}"]


def mve_applies(k, group: int, kk: int, y_zp: int) -> bool:
    """Whether emit_im2col takes the Helium (MVE) path (emit_im2col_mve): a core with MVE,
    int8 data and weights (VMLADAVA.S8) without weight zero points, the cheap
    requantization (fast_requant: _Store.m), and a group's channel planes within the 16-bit
    offsets of the column gathers (rows and columns within int16)."""
    if not k.target.has("mve"):
        return False
    x, w, _, mult, shift, w_zp = operands(k)
    if w_zp is not None or x.dtype != np.int8 or w.dtype != np.int8 or kk < 1 or \
            mult is None or fast_requant(mult, shift, y_zp) is None:
        return False
    hw = int(np.prod(x.shape[2:]))
    return x.shape[1] // group * hw <= 0xFFFF and max(x.shape[2:]) < 0x7FFF


def mve_kp(kk: int) -> int:
    """Bytes of a pixel's row in emit_im2col_mve's column: kk rounded up to 16."""
    return -(-kk // 16) * 16


def mve_column_tables(cg: int, h: int, wd: int, kh: int, kw: int, dh: int, dw: int):
    """(off, dy, dx) [kp] of emit_im2col_mve's column: for column byte j, the input offset
    of its tap from the window's first input (channel, row, column), and the tap's row and
    column in the window; past kk zeros. Byte j holds the tap that meets a channel's j-th
    packed weight byte (conv_pack_index): each block of four taps stored t0 t2 t1 t3, then
    the kk % 4 tail taps in order."""
    khw = kh * kw
    kk = cg * khw
    kp = mve_kp(kk)
    taps = np.arange(kk)
    ci, r = taps // khw, taps % khw
    ky, kx = r // kw, r % kw
    pos = np.where(taps < kk // 4 * 4, taps // 4 * 4 + np.array([0, 2, 1, 3])[taps % 4], taps)
    off, dy, dx = (np.zeros(kp, np.int64) for _ in range(3))
    off[pos] = ci * h * wd + ky * dh * wd + kx * dw
    dy[pos], dx[pos] = ky * dh, kx * dw
    return off, dy, dx


def emit_im2col_mve(k, x, w, bias, store, *, n, c, oc, group, h, wd, kh, kw, oh, ow, sh, sw,
                    ph, pw, dh, dw, x_zp, pointwise) -> list[str]:
    """QConv (folded=1) on Helium (MVE) cores (mve_applies): emit_im2col's order (blocks of
    output pixels in flat order gathered into a column, then two output channels at a time,
    the odd last channel alone) over an int8 column instead of the int16 one: per pixel a
    row of kp bytes whose taps are in the order of the packed weights (mve_column_tables),
    built by byte gathers, four pixels' rows interleaved by 16-byte chunks, met by
    VMLADAVA.S8 (16 MACs per instruction) against weights gathered from the layout every
    target shares (so the model's constants stay the same), requantized four at a time on
    vectors: the same int32 sums and integers as _Store. The loops are mtvm_conv_s8_mve
    (c_runtime/kernels/arm_mve/mtvm_mm_s8_mve.h); here only its constants: the column's
    gather tables, the geometry and the requantization."""
    from ...codegen.cwriter import VOID, Call, Cast, Comment, Const, ExprStmt, Table, Type, \
        Var, render_c
    cg, mg = c // group, oc // group
    kk = cg * kh * kw
    hw = h * wd
    kp = mve_kp(kk)
    k.library("mtvm_mm_s8_mve.h")
    k.scratch_bytes = 4 * kp
    # a pointwise conv reads its channel planes as one row: pixel q's window starts at q
    gh, gw = (1, hw) if pointwise else (h, wd)
    off, dy, dx = mve_column_tables(cg, gh, gw, kh, kw, dh, dw)
    assert off.max() <= 0xFFFF
    oy_lo, oy_hi = _inside(oh, sh, ph, kh, dh, h)
    ox_lo, ox_hi = _inside(ow, sw, pw, kw, dw, wd)
    border = not pointwise and (oy_lo, oy_hi, ox_lo, ox_hi) != (0, oh, 0, ow)
    m = store.m
    one = bool(np.all(m == m[0]))       # one shift: m > 0; else per channel (m = 0)
    add = (1 << int(m[0] - 1)) + int(store.y_zp) * (1 << int(m[0])) if one else \
        2 * int(store.y_zp) + 1
    null = Cast(Type(VOID, pointer=True), Const(0))
    tables = [Table(Var("col_off", Type("uint16")), off)]
    if border:
        tables += [Table(Var("col_dy", Type("int16")), dy), Table(Var("col_dx", Type("int16")), dx)]
    args = [Var("scratch"), Var(x.c), Var(w.c), Var(bias.c), Var("out0"), Var("col_off"),
            Var("col_dy") if border else null, Var("col_dx") if border else null] + \
        [Const(int(v)) for v in (n, group, c, hw, kp, gh, gw, (kh - 1) * dh, (kw - 1) * dw, x_zp,
                                 oh * ow, ow, sh, sw, ph, pw, pointwise,
                                 # mtvm_conv4x2_s8_mve's passes (measured on QEMU -icount)
                                 1 if pointwise else 2, mg, kk)] + \
        [Var(store.mult.c), Var(store.shift.c)] + \
        [Const(int(v)) for v in (store.mult.size > 1, m[0] if one else 0, add, store.lo,
                                 store.hi)]
    body = [Comment(f"Helium (MVE): int8 column rows of 4 output pixels ({kk} = {cg} x {kh} x "
                    f"{kw} taps, in the packed weights' order), met by VMLADAVA.S8"),
            *tables, ExprStmt(Call("mtvm_conv_s8_mve", tuple(args)))]
    return [render_c(body)] + store.decls


def x86_pair_table(rows: np.ndarray, group: int, khw: int) -> np.ndarray:
    """The weight pairs of the x86 direct paths from the plain weights [OC, C/group, KH,
    KW]: [group][ceil4(mg) * khw * cp] int32, entry (j, k, t) holding w[j][2t][k] in its
    low int16 lane and w[j][2t + 1][k] (0 past cg) in its high one, the channels padded
    with zeros to whole blocks of four (the dot's four-channel form reads them). One
    input channel a group: pairs of taps instead, [group][ceil4(mg) * ceil(khw / 2)],
    entry (j, t) holding w[j][0][2t] and w[j][0][2t + 1] (0 past khw) -- a pair of
    channels would be half zeros (mtvm_conv_tile8_taps_x86 builds the input side)."""
    oc = rows.shape[0]
    kk = int(np.prod(rows.shape[1:]))
    cg, mg = kk // khw, oc // group
    cp, mg4 = (cg + 1) // 2, -(-mg // 4) * 4
    rows = np.asarray(rows, np.int64).reshape(group, mg, cg, khw)
    if cg == 1:
        tp = (khw + 1) // 2
        pairs = np.zeros((group, mg4, 2 * tp), np.int64)         # [.., tap]
        pairs[:, :mg, :khw] = rows[:, :, 0, :]
        lanes = pairs.reshape(group, mg4, tp, 2) & 0xFFFF
    else:
        pairs = np.zeros((group, mg4, khw, 2 * cp), np.int64)    # [.., tap, channel]
        pairs[:, :mg, :, :cg] = rows.transpose(0, 1, 3, 2)
        lanes = pairs.reshape(group, mg4, khw, cp, 2) & 0xFFFF  # int16 lanes, two's complement
    word = (lanes[..., 0] | (lanes[..., 1] << 16)).astype(np.uint32).view(np.int32)
    return word.reshape(group, -1)


def _x86_weight_lines(k, w, group: int, khw: int) -> list[str] | None:
    """C lines declaring `wq`, group g's row of the weight pairs (x86_pair_table), a table
    in the kernel built at compile time; None for weights not known at compile time.
    Not a weight_layout of its own: the kernel keeps the int16 column under #else (for
    MTVM_NO_SIMD builds and target `c`), which reads the im2col layout."""
    if w.const is None:
        return None
    plain = unpack_conv_weights(np.asarray(w.const), group)
    table = x86_pair_table(plain, group, khw)
    rows = ["    { " + ", ".join(str(int(v)) for v in r) + " }," for r in table]
    one_channel = int(np.prod(plain.shape[1:])) == khw
    layout = "[o][tap / 2]: (w[o][0][tap], w[o][0][tap + 1])" if one_channel else \
        "[o][tap][t / 2]: (w[o][t][tap], w[o][t + 1][tap])"
    return [f"/* {layout} int16 pairs; whole blocks of four channels */",
            f"static const int32_t wq_all[{table.shape[0]}][{table.shape[1]}] = {{"] + rows + \
        ["};", "const int32_t* wq = wq_all[g];",
         f"(void){w.c};   /* the packed weights: the other paths' */"]


def _x86_requant(store, mg: int) -> str:
    """C initializer of mtvm_conv_requant_x86_t for group g (_Store's fast path)."""
    m = store.m
    one = bool(np.all(m == m[0]))       # one shift: m > 0; else per channel (m = 0)
    step = int(store.mult.size > 1)
    add = (1 << int(m[0] - 1)) + int(store.y_zp) * (1 << int(m[0])) if one else \
        2 * int(store.y_zp) + 1
    def array(buf) -> str:
        # one constant value: a literal (the other paths fold it too, and a parameter
        # read only here would be unused where this path is preprocessed away)
        if buf.const is not None and buf.size == 1:
            return f"(const int32_t[]){{{per_channel(buf, '0')}}}"
        return f"{buf.c} + g * {mg * step}"
    return (f"(mtvm_conv_requant_x86_t){{{array(store.mult)}, {array(store.shift)}, {step}, "
            f"{int(m[0]) if one else 0}, {add}, {int(store.lo)}, {int(store.hi)}}}")


def direct_x86_fits(cg: int, mg: int, khw: int, sw: int, ow: int) -> bool:
    """direct_x86's shape conditions: strides 1 or 2 along x, rows of eight pixels or
    more, and its stack tiles and weight table bounded (in int16 pairs: of taps for one
    input channel, else of channels)."""
    pairs = (khw + 1) // 2 if cg == 1 else khw * ((cg + 1) // 2)
    return sw in (1, 2) and ow >= 8 and mg * pairs <= 8192 and pairs <= 512


def direct_x86(k, x, w, bias, store, *, n, c, oc, group, h, wd, kh, kw, oh, ow, sh, sw, ph,
               pw, dh, dw, x_zp) -> list[str] | None:
    """A KxK conv not written in place, on x86 hosts (AVX2; VPDPWSSD with AVX-512 VNNI):
    eight output pixels of a row per vector, each tap's input row segment loaded once
    per eight pixels as int16 pairs of channels (x[2t], x[2t + 1]), or of taps where a
    group has one channel (the padding read as the zero point), four output channels
    at a time against the weight pairs rebuilt from the packed rows on the stack; the
    row's last tile overlaps the one before.
    The parts in c_runtime/kernels/x86/mtvm_conv_x86.h, and why not the im2col column.
    None where it does not apply: weight zero points, in place, strides other than 1
    and 2 along x, rows under eight pixels, requantization not the fast path, large
    stack tiles."""
    cg, mg = c // group, oc // group
    khw = kh * kw
    if not isinstance(store, _Store) or store.mult is None or store.m is None or \
            not direct_x86_fits(cg, mg, khw, sw, ow):
        return None
    table = _x86_weight_lines(k, w, group, khw)
    if table is None:
        return None
    k.library("mtvm_conv_x86.h")
    x_u = int(x.dtype == np.uint8)
    shape = ", ".join(str(v) for v in (cg, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow))
    return [
        "/* x86 (AVX2), a KxK conv not in place: see direct_x86 */",
        "(void)col;",
        f"for (size_t b = 0; b < {n}; ++b) {{",
        f"    for (size_t g = 0; g < {group}; ++g) {{",
    ] + indent_c(table, 2) + [
        f"        mtvm_conv_group_x86((uint8_t*)(out0 + (b * {oc} + g * {mg}) * {oh * ow}), "
        f"{oh * ow}, (const uint8_t*)({x.c} + (b * {c} + g * {cg}) * {h * wd}), {x_u}, "
        f"(uint8_t){int(x_zp)},",
        f"                            (mtvm_conv_shape_x86_t){{{shape}}}, wq, {mg}, "
        f"{bias.c} + g * {mg},",
        f"                            {_x86_requant(store, mg)});",
        "    }",
        "}"]


def pointwise_x86(k, x, w, bias, store, *, n, c, oc, group, hw) -> list[str] | None:
    """A pointwise conv not written in place, on x86 hosts with AVX-512 VNNI: 16
    positions per vector (the last tile masked), read straight from the input planes (no
    column), four output channels at a time against the weight pairs (x86_weight_pairs);
    mtvm_pw_group_x86 in c_runtime/kernels/x86/mtvm_pw_conv_x86.h. (AVX2: direct_x86
    over the plane as one row.) None where it does not apply (see the caller;
    requantization: _Store's fast path)."""
    cg, mg = c // group, oc // group
    cp = (cg + 1) // 2
    if not isinstance(store, _Store) or store.mult is None or store.m is None or \
            mg * cp > 4096 or cp > 128:
        return None
    table = _x86_weight_lines(k, w, group, 1)
    if table is None:
        return None
    k.library("mtvm_pw_conv_x86.h")
    return [
        "/* x86 (AVX-512 VNNI), a pointwise conv not in place: see pointwise_x86 */",
        "(void)col;",
        f"for (size_t b = 0; b < {n}; ++b) {{",
        f"    for (size_t g = 0; g < {group}; ++g) {{",
    ] + indent_c(table, 2) + [
        f"        mtvm_pw_group_x86((uint8_t*)(out0 + (b * {oc} + g * {mg}) * {hw}), {hw}, "
        f"(const uint8_t*)({x.c} + (b * {c} + g * {cg}) * {hw}), {int(x.dtype == np.uint8)}, "
        f"{cg}, wq, {mg},",
        f"                          {bias.c} + g * {mg}, {_x86_requant(store, mg)});",
        "    }",
        "}"]


@register("QConv", domain=DOMAIN)
class QConv(IntOp):
    """inputs: x, w [OC, C/group, (KH,) KW], bias int32 [OC], mult [OC|1], shift [OC|1],
    w_zp [OC] (optional, when weights are asymmetric). With folded=1 the bias
    holds the zero-point corrections (b - zx*sum(w) + K*zx*zw) and the kernel
    sums xpad*w over all taps (padding = zx) minus zw*sum(xpad); with folded=0
    (depthwise) it sums (x - zx)(w - zw) over the taps inside the input.
    Without mult/shift ("" inputs) the output is the int32 accumulator (ConvInteger).
    The weights are the model's, in their plain order: the schedules computing it
    (mtvm/schedules/*/qconv_s8.py) lay them out for their micro-kernels."""

    def reference(self, x, w, bias, mult=None, shift=None, w_zp=None, *, strides, pads,
                  dilations, group=1, x_zp=0, y_zp=0, act_min=-128, act_max=127, folded=1):
        if folded:
            acc, (oh, ow) = conv_acc(x, w, x_zp, strides, pads, dilations, group, w_zp)
        else:
            wz = 0 if w_zp is None else np.asarray(w_zp, np.int64).reshape(
                (-1,) + (1,) * (w.ndim - 1))
            acc, (oh, ow) = conv_acc(x.astype(np.int64) - x_zp, w.astype(np.int64) - wz, 0,
                                     strides, pads, dilations, group)
        acc = acc + np.asarray(bias, np.int64).reshape(1, -1, 1)
        shape = (x.shape[0], w.shape[0]) + ((oh, ow) if x.ndim == 4 else (ow,))
        if mult is None:
            return acc.astype(np.int32).reshape(shape)
        out_dtype = np.int8 if act_min < 0 else np.uint8
        m = np.asarray(mult).reshape(1, -1, 1)
        s = np.asarray(shift).reshape(1, -1, 1)
        return finish(acc, m, s, y_zp, act_min, act_max, out_dtype).reshape(shape)

    def macs(self, node, inputs, outputs):
        w = inputs[1]
        return outputs[0].size * int(np.prod(w.shape[1:]))

    def inplace_input(self, node, graph):
        """A depthwise conv with one output channel per input channel writes over its
        input: channel o is copied to scratch before output channel o is written (the
        same shape: a strided one would pin its larger buffer for the next layer)."""
        x, y = graph.tensors[node.inputs[0]], graph.tensors[node.outputs[0]]
        w = graph.tensors[node.inputs[1]]
        a = node.attrs
        if x.dtype != y.dtype or len(node.inputs) < 4 or not node.inputs[3]:
            return None
        if not a.get("folded", 1):
            if w.shape[0] != x.shape[1]:
                return None
            return 0 if tuple(y.shape) == tuple(x.shape) else None
        # A pointwise conv gathers a pixel's channels into its column before writing
        # that pixel's outputs: the output may overwrite the input.
        pointwise = all(d == 1 for d in w.shape[2:]) and a.get("group", 1) == 1 and \
            all(v == 1 for v in a["strides"]) and not any(a["pads"])
        # (only when the output is no larger: a larger merged buffer raises the peak)
        return 0 if pointwise and tuple(y.shape[2:]) == tuple(x.shape[2:]) and \
            y.shape[1] <= x.shape[1] else None


def border_plane_bytes(k, *, strides, pads, dilations, group=1, **_attrs) -> int:
    """Scratch of emit_im2col's bordered input planes (border_plane): 0 where the layer
    has no padding."""
    x, w = k.ins[0], k.ins[1]
    h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = conv_geometry(
        x.shape, w.shape, strides, pads, dilations)
    plane = bordered_plane(h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw)
    if plane is None:
        return 0
    return x.shape[1] // group * plane[0] * plane[1] * x.dtype.itemsize


def qconv_scratch_bytes(k, *, strides, pads, dilations, group=1, folded=1, mve=False,
                        quad=False, widen_weights=False, border_plane=False, y_zp=0,
                        **_attrs) -> int:
    """Scratch of emit_qconv: im2col (folded), one int16 column of two pixels
    (col_bytes; two columns for RV32's quad), or the Helium path's int8 column rows, and
    with border_plane the bordered input planes; depthwise, the zero-point-padded input
    plane, when there is padding or the output is written over the input
    (depthwise.padded_plane_bytes)."""
    x, w = k.ins[0], k.ins[1]
    if folded:
        kk = x.shape[1] // group * int(np.prod(w.shape[2:]))
        if mve:
            return 4 * mve_kp(kk)
        mg = w.shape[0] // group
        widened = widened_bytes(group, mg, kk, row_params(k, int(y_zp))) \
            if widen_weights and widen_applies(k, mg, quad, mve) else 0
        bordered = border_plane_bytes(k, strides=strides, pads=pads, dilations=dilations,
                                      group=group) if border_plane and not quad else 0
        return col_bytes(kk) * (2 if quad else 1) + widened + bordered
    from .depthwise import padded_plane_bytes
    return padded_plane_bytes(k, x, strides, pads, dilations)


def emit_qconv(k, *, strides, pads, dilations, group=1, x_zp=0, y_zp=0, act_min=-128,
               act_max=127, folded=1, mve=False, quad=False, x86_direct=True,
               rv32=False, compact_border=False, widen_weights=False,
               border_plane=False) -> str:
    """The C of a QConv kernel (the schedules in mtvm/schedules/*/qconv_s8.py choose
    the variants, see emit_im2col); the im2col path reads its weights laid out by
    pack_conv_weights."""
    x, w, bias, mult, shift, w_zp = operands(k)
    n, c = x.shape[:2]
    oc = w.shape[0]
    h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = conv_geometry(
        x.shape, w.shape, strides, pads, dilations)
    mg = oc // group
    if mult is None:
        def store(acc, ch, dst):
            return [f"{dst} = {acc};"]
    else:
        def store(acc, ch, dst):
            return store_lines(k, acc, y_zp, act_min, act_max, mult, shift, ch, dst)
    lines = [f"/* {x.c}: input, {w.c}: weights [{oc}][{c // group}][{kh}][{kw}], {bias.c}: "
             "int32 bias"
             + (" (zero-point terms folded in)" if folded else "")
             + (f",\n * {mult.c}/{shift.c}: requantization multiplier/shift"
                if mult is not None and mult.size > 1 else "")
             + (f", {w_zp.c}: weight zero points" if w_zp is not None and w_zp.size > 1
                else "") + " */"]
    if not folded:
        from .depthwise import emit_depthwise
        lines += emit_depthwise(k, x, w, bias, w_zp, store, n, c, oc, mg, h, wd, kh, kw,
                                 oh, ow, sh, sw, ph, pw, dh, dw, x_zp,
                                 pads if len(x.shape) == 4 else [0, pads[0], 0, pads[1]],
                                 mve=mve, rv32=rv32)
        return "\n".join(lines)

    store_fn = _Store(k, mult, shift, y_zp, act_min, act_max)
    lines += emit_im2col(k, x, w, bias, w_zp, store_fn, n=n, c=c, oc=oc, group=group, h=h,
                         wd=wd, kh=kh, kw=kw, oh=oh, ow=ow, sh=sh, sw=sw, ph=ph, pw=pw, dh=dh,
                         dw=dw, x_zp=x_zp, mve=mve, quad=quad, x86_direct=x86_direct,
                         compact_border=compact_border, widen_weights=widen_weights,
                         border_plane=border_plane)
    return "\n".join(lines)


# -- matrix product ---------------------------------------------------------------------


# -- elementwise --------------------------------------------------------------------------


# -- pooling ------------------------------------------------------------------------------


# -- softmax --------------------------------------------------------------------------------


# -- matrix product of two activations ----------------------------------------------------


