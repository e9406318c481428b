"""int8 pointwise QConv over 8 or 16 input channels on Armv7E-M/v8-M cores with the
DSP extension and without Helium (M4, M7, M33): the expansion and projection layers of
inverted-residual blocks (8 -> 48 and 16 -> 8 channels in MobileNetV2 at width 0.35), where
the im2col path's column and per-output requantization outweigh the few MACs of each
output. Blocks of pixels (knob `block`) packed once into int16 pairs, eight channels a group
(scratch), then per output channel and group the weights in registers and per pixel four
SMLADs; one group requantizes at once (SMMLA + ASR + SSAT), more keep the sums between the
groups in 16-byte slots after the packed pixels (c_runtime/kernels/arm_dsp/mtvm_pw_s8_dsp.h).

It applies where (high word of acc * mult + rnd) >> sh is the exact requantization: no tie
within the accumulator's bound and no overflow (depthwise.fast_requant_bounded); the
outputs are then the im2col kernel's bit for bit.
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import (Cast, Comment, Decl, ExprStmt, For, RawExpr, Type, Var, call,
                                render_c)
from ...ops.quantized.common import (narrow_shifts, operands, per_channel, right_shift,
                                      shift_table_m1)
from ...ops.quantized.depthwise import common_shift, fast_requant_bounded
from .. import Knob, Schedule, register
from .matmul_s8 import _I32

# Groups of eight input channels at most. With 24 or 32 the im2col kernel is faster
# since its widened weights are scaled a word at a time: over the 69 int8 models of the
# shared set and seeds 11-16 on mps2-an386, 2 instead of 4 takes 0.3-3.4 % off the
# instructions of 11 (mbv1_v15_int8 4.47 -> 4.31 M, dscnn_v16_int8's 32 -> 32 layers on 39
# pixels 53.9 -> 50.3 K each) and adds none; 1 adds 0.2-1.1 % to 10 (fomo_mbv2_int8,
# mbv2_v14_int8's 16 -> 96 layers).
MAX_GROUPS = 2


def _block(k) -> int:
    """Pixels a block (scratch: 16 bytes each a group, + 16 for the sums): the knob
    `block`, or fewer where the sums' slots (16 * groups * block bytes past the first
    group's pixels) would be past an LDR's immediate offset (4095)."""
    x = k.ins[0]
    hw, groups = x.shape[2] * x.shape[3], x.shape[1] // 8
    blk = min(int(k.knobs.get("block", 64)), hw)
    return min(blk, 255 // groups // 4 * 4) if groups > 1 else blk


def _sh1_table(k) -> np.ndarray | None:
    """The int8 table of sh - 1 = -2 - shift for per-channel shifts (constants), or None."""
    return shift_table_m1(k.plain(4) if len(k.ins) > 4 else None)


def _common_shift(k, attrs) -> int | None:
    """The layer's one right shift S (depthwise.common_shift: weights and biases scaled by
    2^(S - sh) per channel), or None. (The model's shifts: weight_layout's table holds
    sh - 1.)"""
    x, w, bias, _, _, w_zp = operands(k)
    return common_shift(bias, w, w_zp, k.plain(4), int(attrs.get("y_zp", 0)), x)


@register
class QConvPointwise8Dsp(Schedule):
    op = "QConv"
    domain = "mtvm"
    name = "qconv_s8.dsp_pointwise8"
    family = "arm_dsp"
    priority = 10
    knobs = (Knob("block", 64, (32, 64, 128), "pixels packed a pass (16 bytes each a group)"),)

    def default_knobs(self, k=None) -> dict:
        """One group: 128 pixels a pass (the channels' weights and requantization are made
        once a block: 8 -> 48 at 48 x 48, 4 % fewer instructions than 64 for 1 KB more
        scratch); several groups: 64 (their scratch is 48-80 bytes a pixel)."""
        values = super().default_knobs(k)
        if k is not None and k.ins[0].shape[1] == 8:
            values["block"] = 128
        return values

    def applies(self, k, /, **attrs) -> bool:
        x, w, bias, mult, shift, w_zp = operands(k)
        # (written over its input, inplace_input: a block's pixels are packed, every
        # channel, before any of their outputs is written, and later blocks' are untouched)
        if not k.target.is_arm_dsp or k.inplace not in (None, 0) or not attrs.get("folded", 1):
            return False
        if attrs.get("group", 1) != 1 or len(x.shape) != 4 or w.const is None or \
                w_zp is not None or bias is None or bias.const is None:
            return False
        if not (x.dtype == w.dtype == k.out.dtype == np.int8):
            return False
        if len(w.shape) != 4 or w.shape[1] % 8 or not 1 <= w.shape[1] // 8 <= MAX_GROUPS or \
                tuple(w.shape[2:]) != (1, 1) or any(attrs.get("pads", [0])) or \
                any(s != 1 for s in attrs.get("strides", [1, 1])):
            return False
        if int(attrs.get("act_min", -128)) < -128 or int(attrs.get("act_max", 127)) > 127:
            return False
        return fast_requant_bounded(k, bias, w, None, mult, shift,
                                     int(attrs.get("y_zp", 0)), x)

    def weight_layout(self, k, /, **attrs):
        """The per-channel shifts as int8 sh - 1 = -2 - shift (_sh1_table): sh is one ADD
        from the table's value, where -1 - shift took gcc three instructions a channel and
        block."""
        return {4: _sh1_table(k)} if _sh1_table(k) is not None else narrow_shifts(k)

    def scratch_bytes(self, k, /, **attrs) -> int:
        groups = k.ins[0].shape[1] // 8
        return 16 * (groups + (groups > 1)) * _block(k)

    def emit(self, k, /, **attrs) -> str:
        x, w, bias, mult, shift, _ = operands(k)
        n, c, h, wd = x.shape
        oc, hw = w.shape[0], h * wd
        y_zp = int(attrs.get("y_zp", 0))
        lo, hi = int(attrs.get("act_min", -128)), int(attrs.get("act_max", 127))
        k.library("mtvm_pw_s8_dsp.h")
        blk = _block(k)
        xp = Var("xp", Type("uint32", pointer=True))
        b, p, o = Var("b"), Var("p"), Var("o")
        npx, sh = Var("np", _I32), Var("sh", _I32)
        groups = c // 8
        mult_o = per_channel(mult, "o")
        sh1 = _sh1_table(k) is not None   # the table holds sh - 1 (weight_layout)
        sh_c, S = right_shift(shift, "o", sh1), _common_shift(k, attrs)
        if S is None:
            # (written from sh: (uint32_t)(2 y_zp + 1) << (sh - 1), the same value from the
            # table, left gcc without the registers of the assembly in a 16 -> 96 layer)
            rnd = "(1 << (sh - 1))" + (f" + {y_zp} * (1 << sh)" if y_zp else "")
            kk, sh_arg, channel_shift = 0, sh, Decl(sh, RawExpr(sh_c))
        else:   # weights and bias times 2^kk, kk = S - sh: SSAT shifts by the constant S
            rnd = str((1 << (S - 1)) + y_zp * (1 << S))
            kk = Var("kk", _I32)
            sh_arg, channel_shift = S, Decl(kk, RawExpr(f"{S} - ({sh_c})"))
        y = RawExpr(f"{k.out.c} + (b * {oc} + o) * {hw} + p")

        def xg(g):       # group g's packed pixels
            return xp + g * 4 * blk if g else xp

        def sums(g):     # words from group g's pixel to its sum's slot
            return 4 * blk * (groups - g)

        def wg(g):       # channel o's weights of group g
            return Var(w.c) + (o * c + 8 * g if g else o * c)
        requant = [RawExpr(mult_o), RawExpr(rnd), sh_arg, lo, hi]
        if groups == 1:
            passes = [call("mtvm_pw8_s8_dsp", xp, y, npx, wg(0), kk, Var(bias.c)[o], *requant)]
        else:   # the sums in a row of 16-byte slots after the groups
            passes = [call("mtvm_pw8_sum_s8_dsp", xg(g), npx, wg(g), kk, sums(g),
                           Var(bias.c)[o] if g == 0 else 0, int(g == 0))
                      for g in range(groups - 1)] + \
                [call("mtvm_pw8_last_s8_dsp", xg(groups - 1), y, npx, wg(groups - 1), kk,
                      sums(groups - 1), *requant)]
        per_o = [channel_shift] + [ExprStmt(e) for e in passes]
        per_p = [Decl(npx, RawExpr(f"{hw} - (int32_t)p < {blk} ? {hw} - (int32_t)p : {blk}"))] + \
            [ExprStmt(call("mtvm_pw8_pack_s8_dsp",
                           RawExpr(f"{x.c} + b * {c * hw} + {g * 8 * hw} + p" if g else
                                   f"{x.c} + b * {c * hw} + p"), hw, npx, xg(g)))
             for g in range(groups)] + [For(o, oc, per_o)]
        body = [Comment(f"pointwise: {x.c} [{n}][{c}][{hw}] packed {blk} pixels a pass, eight "
                        f"channels a group (int16 pairs in scratch), {w.c} [{oc}][{c}] eight "
                        "weights a group in registers; requantized as (high word of acc * "
                        "mult + rnd) >> sh (no ties, no overflow)" +
                        (f", sh = {S} for every channel" if S is not None else "")),
                Decl(xp, Cast(xp.type, Var("scratch")))]
        body.append(For(b, n, [For(p, hw, per_p, step=blk)]))
        return render_c(body)
