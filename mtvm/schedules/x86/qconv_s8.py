"""Integer convolution (QConv, folded) on x86 hosts with AVX-512 VNNI: VPDPBUSD, four
u8 x s8 MACs per int32 lane.

Tiles of 16 output positions (flat order, so a tile may span rows), one per lane: each
tile's column holds, per group of four taps of the window (the plain order: input
channel, row, column), the four taps of every lane as unsigned bytes (int8 data xor
0x80: the 128 * sum(w[o]) this adds is taken off the bias at compile time, exactly),
gathered with masked byte loads per row segment (the padding read as the zero point).
`tiles` tiles x `channel_block` output channels of int32 sums stay in registers while
the tap groups stream past (each channel's four weight bytes broadcast), then they are
requantized on vectors with conv._Store's fast path (the same integers as the generic
schedule, so outputs are bit-exact) and stored as 16 bytes per output channel plane.
The C: c_runtime/kernels/x86/mtvm_qgemm_s8_vnni_x86.h (with a portable form of the same
computation where VNNI is absent).

Weight layout: [OC][ceil(kk / 4)] int32, channel o's taps 4j..4j + 3 in the bytes of
word j (zero past kk), and the bias with the xor correction (input 2).

Applies to folded QConvs with int8 weights (no weight zero points), int8/uint8 data and
output, constant weights and bias, and the fast requantization; on an x86 target with
avx512vnni (then only this code is emitted, its column in the arena's scratch), and on
the generic target "c" as the branch of `if (MTVM_QCONV_VNNI_ON)` (the header's
constant) with the generic schedule's C in the other (its weights laid out for the
generic kernels, this one's as tables in the kernel; the arena's scratch the generic
branch's, so builds without VNNI plan the same memory as before, this branch's column
on the stack), unless the generic schedule's x86_direct knob is turned off for the layer
(then the int16 column was asked for).
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import VOID, Call, Cast, Comment, Const, ExprStmt, If, Raw, Table, \
    Type, Var, render_c
from ...ops.quantized.common import conv_geometry, operands
from ...ops.quantized.conv import emit_qconv, fast_requant, qconv_scratch_bytes
from .. import Knob, Schedule, ScheduleConfig, get_schedule, register

GUARD = "MTVM_QCONV_VNNI_ON"       # the header's 1 where the VNNI kernel compiles, else 0


def vnni_weights(w: np.ndarray) -> np.ndarray:
    """Plain weights [OC, C/group, (KH,) KW] int8 -> [OC, ceil(kk / 4)] int32: channel o's
    taps 4j..4j + 3 in bits 0..7, .., 24..31 of word j, zeros past kk."""
    oc = w.shape[0]
    rows = np.asarray(w, np.int8).reshape(oc, -1)
    kk = rows.shape[1]
    kp = -(-kk // 4) * 4
    padded = np.zeros((oc, kp), np.uint8)
    padded[:, :kk] = rows.view(np.uint8)
    b = padded.reshape(oc, kp // 4, 4).astype(np.uint32)
    word = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)
    return word.view(np.int32)


def vnni_bias(bias: np.ndarray, w: np.ndarray, x_signed: bool) -> np.ndarray:
    """The folded bias minus 128 * sum(w[o]) for int8 data (whose taps the kernel reads
    xor 0x80, i.e. plus 128), modulo 2^32 as the int32 sums are."""
    b = np.asarray(bias, np.int64).ravel()
    if x_signed:
        b = b - 128 * np.asarray(w, np.int64).reshape(w.shape[0], -1).sum(axis=1)
    return ((b + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def _kp4(k, attrs) -> int:
    x, w = k.ins[0], k.plain(1)
    kk = x.shape[1] // attrs.get("group", 1) * int(np.prod(w.shape[2:]))
    return -(-kk // 4)


@register
class QConvIm2colVnni(Schedule):
    op = "QConv"
    domain = "mtvm"
    name = "qconv_s8.im2col_vnni"
    family = "x86"
    priority = 15
    # defaults: the fastest measured on an AMD EPYC (Zen 4) host, within noise of 2 x 6 and
    # 2 x 4 on the denoise_unet / ic_resnet8 layers, with the smallest column
    knobs = (Knob("tiles", 1, (1, 2, 3), "16-position tiles per register block"),
             Knob("channel_block", 8, (4, 6, 8), "output channels per register block"))

    @staticmethod
    def _generic_ok(k) -> bool:
        """On target c: the generic schedule's x86_direct knob for this layer (False asks
        for the int16 column, not the x86 kernels)."""
        generic = get_schedule("qconv_s8.im2col")
        cfg = ScheduleConfig.resolve(k.config) or ScheduleConfig()
        return bool(cfg.for_kernel(k, generic).get("x86_direct", True))

    def applies(self, k, /, **attrs) -> bool:
        t = k.target
        if not attrs.get("folded", 1) or getattr(k.node, "tail", None):
            return False
        if not (t.is_generic or (t.is_x86 and t.has("avx512vnni", "avx512bw", "avx512vl"))):
            return False
        if len(k.ins[0].shape) not in (3, 4):
            return False
        x, w, bias, mult, shift, w_zp = operands(k)
        w = k.plain(1)
        bias = k.plain(2)
        if w_zp is not None or mult is None or shift is None or w.const is None or \
                bias is None or bias.const is None or w.dtype != np.int8 or \
                x.dtype not in (np.int8, np.uint8) or k.out.dtype not in (np.int8, np.uint8):
            return False
        if fast_requant(mult, shift, attrs.get("y_zp", 0)) is None:
            return False
        return self._generic_ok(k) if t.is_generic else True

    def weight_layout(self, k, /, **attrs):
        if k.target.is_generic:      # the generic kernels read the weights; this one, tables
            return get_schedule("qconv_s8.im2col").weight_layout(k, **attrs)
        w, bias = k.ins[1].const, k.ins[2].const
        return {1: vnni_weights(w),
                2: vnni_bias(bias, w, k.ins[0].dtype == np.int8)}

    def scratch_bytes(self, k, /, **attrs) -> int:
        if k.target.is_generic:   # the generic branch's; this one's column is on the stack
            return qconv_scratch_bytes(k, **attrs)
        return (64 * int(k.knobs.get("tiles", 1)) + 32) * _kp4(k, attrs)   # column, tap tables

    def emit(self, k, /, **attrs) -> str:
        x, _, _, mult, shift, _ = operands(k)
        w, bias = k.plain(1), k.plain(2)
        group = attrs.get("group", 1)
        n, c = x.shape[:2]
        oc = w.shape[0]
        h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = conv_geometry(
            x.shape, w.shape, attrs["strides"], attrs["pads"], attrs["dilations"])
        if kh == kw == 1 and sh == sw == 1 and ph == pw == 0 and (oh, ow) == (h, wd):
            h, wd, oh, ow = 1, h * wd, 1, h * wd      # pointwise: the plane as one row
        k.library("mtvm_qgemm_s8_vnni_x86.h")
        generic = k.target.is_generic
        u8p, cu8p = Type("uint8", pointer=True), Type("uint8", pointer=True, const=True)
        body = []
        if generic:
            wt, bt = Var("wq_vnni", Type("int32")), Var("bias_vnni", Type("int32"))
            body += [Table(wt, vnni_weights(w.const)),
                     Table(bt, vnni_bias(bias.const, w.const, x.dtype == np.int8)),
                     ExprStmt(Cast(Type(VOID), Var(k.ins[1].c))),
                     ExprStmt(Cast(Type(VOID), Var(k.ins[2].c)))]
            wv, bv = wt, bt
        else:
            wv, bv = Var(k.ins[1].c), Var(k.ins[2].c)
        shape = (n, group, c // group, h, wd, oc // group, kh, kw, oh, ow, sh, sw, ph, pw, dh,
                 dw, int(x.dtype == np.int8), int(np.asarray(attrs.get("x_zp", 0)).item()) & 0xFF,
                 2 * int(attrs.get("y_zp", 0)) + 1, int(attrs.get("act_min", -128)),
                 int(attrs.get("act_max", 127)), int(k.knobs.get("tiles", 1)),
                 int(k.knobs.get("channel_block", 8)))
        args = (Cast(u8p, Var("out0")), Cast(cu8p, Var(x.c)), wv, bv, Var(mult.c),
                Const(int(mult.size > 1)), Var(shift.c), Const(int(shift.size > 1)),
                Cast(Type(VOID, pointer=True), Const(0)) if generic else Var("scratch")) + \
            tuple(Const(int(v)) for v in shape)
        body += [Comment(f"AVX-512 VNNI: tiles of 16 output positions x {oc // group} "
                         f"channels per group, {c // group} x {kh} x {kw} taps as u8 x s8 "
                         "(qconv_s8.im2col_vnni)"),
                 ExprStmt(Call("mtvm_qconv_vnni_x86", args))]
        k_scratch = self.scratch_bytes(k, **attrs)
        if not generic:
            k.scratch_bytes = k_scratch
            return render_c(body)
        other = emit_qconv(k, **attrs, x86_direct=True)
        k.scratch_bytes = k_scratch
        # a C `if` on the header's constant: both branches compile, the compiler keeps one
        return render_c([ExprStmt(Cast(Type(VOID), Var(mult.c))),   # not read by every branch
                         ExprStmt(Cast(Type(VOID), Var(shift.c))),
                         If(Var(GUARD), body, [Raw(other)])])


__all__ = ["QConvIm2colVnni", "vnni_weights", "vnni_bias"]
