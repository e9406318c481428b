"""int8 pointwise QConv over eight input channels on Armv7E-M/v8-M cores with the DSP
extension and without Helium (M4, M7, M33): the expansion layers of inverted-residual
blocks (8 -> 48 channels in MobileNetV2 at width 0.35), where the im2col path's column and
per-output requantization outweigh the eight MACs of each output. Blocks of 64 pixels packed
once into int16 pairs (scratch), then per output channel the weights in registers and per
pixel four SMLADs and SMMLA + ASR + SSAT (c_runtime/kernels/arm_dsp/mtvm_pw_s8_dsp.h).

It applies where (high word of acc * mult + rnd) >> sh is the exact requantization: no tie
within the accumulator's bound and no overflow (depthwise.fast_requant_bounded); the
outputs are then the im2col kernel's bit for bit.
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import (Cast, Comment, Decl, ExprStmt, For, RawExpr, Type, Var, call,
                                render_c)
from ...ops.quantized.common import narrow_shifts, operands, per_channel
from ...ops.quantized.depthwise import fast_requant_bounded
from .. import Schedule, register
from .matmul_s8 import _I32

BLOCK = 64   # pixels packed a pass (scratch: 16 bytes each)


@register
class QConvPointwise8Dsp(Schedule):
    op = "QConv"
    domain = "mtvm"
    name = "qconv_s8.dsp_pointwise8"
    family = "arm_dsp"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        x, w, bias, mult, shift, w_zp = operands(k)
        if not k.target.is_arm_dsp or k.inplace is not None or not attrs.get("folded", 1):
            return False
        if attrs.get("group", 1) != 1 or len(x.shape) != 4 or w.const is None or \
                w_zp is not None or bias is None or bias.const is None:
            return False
        if not (x.dtype == w.dtype == k.out.dtype == np.int8):
            return False
        if tuple(w.shape[1:]) != (8, 1, 1) or any(attrs.get("pads", [0])) or \
                any(s != 1 for s in attrs.get("strides", [1, 1])):
            return False
        if int(attrs.get("act_min", -128)) < -128 or int(attrs.get("act_max", 127)) > 127:
            return False
        return fast_requant_bounded(k, bias, w, None, mult, shift,
                                     int(attrs.get("y_zp", 0)), x)

    def weight_layout(self, k, /, **attrs):
        return narrow_shifts(k)

    def scratch_bytes(self, k, /, **attrs) -> int:
        hw = k.ins[0].shape[2] * k.ins[0].shape[3]
        return 16 * min(BLOCK, hw)

    def emit(self, k, /, **attrs) -> str:
        x, w, bias, mult, shift, _ = operands(k)
        n, c, h, wd = x.shape
        oc, hw = w.shape[0], h * wd
        y_zp = int(attrs.get("y_zp", 0))
        lo, hi = int(attrs.get("act_min", -128)), int(attrs.get("act_max", 127))
        k.library("mtvm_pw_s8_dsp.h")
        blk = min(BLOCK, hw)
        xp = Var("xp", Type("uint32", pointer=True))
        b, p, o = Var("b"), Var("p"), Var("o")
        npx, sh = Var("np", _I32), Var("sh", _I32)
        mult_o, sh_o = per_channel(mult, "o"), per_channel(shift, "o")
        rnd = "(1 << (sh - 1))" + (f" + {y_zp} * (1 << sh)" if y_zp else "")
        per_o = [Decl(sh, RawExpr(f"-1 - {sh_o}")),
                 ExprStmt(call("mtvm_pw8_s8_dsp", xp,
                               RawExpr(f"{k.out.c} + (b * {oc} + o) * {hw} + p"), npx,
                               Var(w.c) + o * 8, Var(bias.c)[o], RawExpr(mult_o), RawExpr(rnd),
                               sh, lo, hi))]
        per_p = [Decl(npx, RawExpr(f"{hw} - (int32_t)p < {blk} ? {hw} - (int32_t)p : {blk}")),
                 ExprStmt(call("mtvm_pw8_pack_s8_dsp", RawExpr(f"{x.c} + b * {c * hw} + p"),
                               hw, npx, xp)),
                 For(o, oc, per_o)]
        body = [Comment(f"pointwise: {x.c} [{n}][8][{hw}] packed {blk} pixels a pass (int16 "
                        f"pairs in scratch), {w.c} [{oc}][8] eight weights a channel in "
                        "registers; requantized as (high word of acc * mult + rnd) >> sh "
                        "(no ties, no overflow)"),
                Decl(xp, Cast(xp.type, Var("scratch"))),
                For(b, n, [For(p, hw, per_p, step=blk)])]
        return render_c(body)
