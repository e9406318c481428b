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

Its AVX2 sibling qconv_s8.im2col_avx2 (x86 targets with avx2 and fma, without AVX-512:
x86-64-v3): tiles of 8 output positions, two taps per int32 lane as int16 (the bytes
sign- or zero-extended: exact, no correction of the bias), VPMADDWD against each
channel's two weights broadcast as an int16 pair (exact: VPMADDUBSW would saturate) and
VPADDD; the same register blocking, requantization and stores on 8-lane vectors. Weight
layout [OC][ceil(kk / 2)] int32 (taps 2j, 2j + 1 in the low, high int16 of word j), the
plain bias. The C: c_runtime/kernels/x86/mtvm_qgemm_s8_avx2_x86.h. Not for the layers
the generic schedule's direct AVX2 KxK kernel takes (faster there: see takes()). On
target "c" it is the branch of `if (MTVM_QCONV_AVX2_ON)` (AVX2 without AVX-512) in the
VNNI schedule's `else`, on tables, its column on the stack, the generic C in its `else`.
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import VOID, Call, Cast, Comment, Const, ExprStmt, If, Raw, Table, \
    Type, Var, render_c
from ...ops.quantized.common import conv_geometry, operands
from ...ops.quantized.conv import direct_x86_fits, emit_qconv, fast_requant, \
    qconv_scratch_bytes
from .. import Knob, Schedule, ScheduleConfig, get_schedule, register

GUARD = "MTVM_QCONV_VNNI_ON"       # the header's 1 where the VNNI kernel compiles, else 0
AVX2_GUARD = "MTVM_QCONV_AVX2_ON"  # the AVX2 header's 1 with AVX2 but no AVX-512, else 0


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


def avx2_weights(w: np.ndarray) -> np.ndarray:
    """Plain weights [OC, C/group, (KH,) KW] int8 -> [OC, ceil(kk / 2)] int32: channel o's
    taps 2j, 2j + 1 as int16 in bits 0..15, 16..31 of word j, zero past kk."""
    oc = w.shape[0]
    rows = np.asarray(w, np.int8).reshape(oc, -1)
    kk = rows.shape[1]
    padded = np.zeros((oc, -(-kk // 2) * 2), np.int16)
    padded[:, :kk] = rows
    return padded.view(np.int32)


def _kp(k, attrs, lanes: int) -> int:
    """The tap groups of `lanes` taps (4: VNNI, 2: AVX2) of a window, kk rounded up."""
    x, w = k.ins[0], k.plain(1)
    kk = x.shape[1] // attrs.get("group", 1) * int(np.prod(w.shape[2:]))
    return -(-kk // lanes)


def _kp4(k, attrs) -> int:
    return _kp(k, attrs, 4)


class _QConvIm2colX86(Schedule):
    """What the x86 register-blocked int8 schedules share: the layers they take, the
    operands and the call; subclasses say the target, the layout and the kernel."""
    op = "QConv"
    domain = "mtvm"
    family = "x86"
    header = ""                 # the kernel's header, its C function, its lanes per tile
    function = ""
    tile = 16
    describe = ""               # the comment above the call (with the shapes filled in)

    def target_ok(self, t) -> bool:
        raise NotImplementedError

    def _generic_ok(self, k) -> bool:
        return False

    def applies(self, k, /, **attrs) -> bool:
        t = k.target
        if not attrs.get("folded", 1) or getattr(k.node, "tail", None):
            return False
        if not self.target_ok(t):
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

    def _call(self, k, attrs, wv, bv, generic: bool, knobs=None):
        """The comment and the call of the kernel on weights wv, bias bv (knobs: k's)."""
        knobs = k.knobs if knobs is None else knobs
        x, _, _, mult, shift, _ = operands(k)
        w = k.plain(1)
        group = attrs.get("group", 1)
        n, c = x.shape[:2]
        oc = w.shape[0]
        h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = conv_geometry(
            x.shape, w.shape, attrs["strides"], attrs["pads"], attrs["dilations"])
        if kh == kw == 1 and sh == sw == 1 and ph == pw == 0 and (oh, ow) == (h, wd):
            h, wd, oh, ow = 1, h * wd, 1, h * wd      # pointwise: the plane as one row
        u8p, cu8p = Type("uint8", pointer=True), Type("uint8", pointer=True, const=True)
        shape = (n, group, c // group, h, wd, oc // group, kh, kw, oh, ow, sh, sw, ph, pw, dh,
                 dw, int(x.dtype == np.int8), int(np.asarray(attrs.get("x_zp", 0)).item()) & 0xFF,
                 2 * int(attrs.get("y_zp", 0)) + 1, int(attrs.get("act_min", -128)),
                 int(attrs.get("act_max", 127)), int(knobs.get("tiles", 1)),
                 int(knobs.get("channel_block", 8)))
        args = (Cast(u8p, Var("out0")), Cast(cu8p, Var(x.c)), wv, bv, Var(mult.c),
                Const(int(mult.size > 1)), Var(shift.c), Const(int(shift.size > 1)),
                Cast(Type(VOID, pointer=True), Const(0)) if generic else Var("scratch")) + \
            tuple(Const(int(v)) for v in shape)
        return [Comment(self.describe.format(tile=self.tile, m=oc // group, c=c // group,
                                             kh=kh, kw=kw, name=self.name)),
                ExprStmt(Call(self.function, args))]


@register
class QConvIm2colVnni(_QConvIm2colX86):
    name = "qconv_s8.im2col_vnni"
    priority = 15
    header = "mtvm_qgemm_s8_vnni_x86.h"
    function = "mtvm_qconv_vnni_x86"
    tile = 16
    describe = ("AVX-512 VNNI: tiles of {tile} output positions x {m} channels per group, "
                "{c} x {kh} x {kw} taps as u8 x s8 ({name})")
    # defaults: the fastest measured on an AMD EPYC (Zen 4) host, within noise of 2 x 6 and
    # 2 x 4 on the denoise_unet / ic_resnet8 layers, with the smallest column
    knobs = (Knob("tiles", 1, (1, 2, 3), "16-position tiles per register block"),
             Knob("channel_block", 8, (4, 6, 8), "output channels per register block"))

    def target_ok(self, t) -> bool:
        return t.is_generic or (t.is_x86 and t.has("avx512vnni", "avx512bw", "avx512vl"))

    def _generic_ok(self, k) -> bool:
        """On target c: the generic schedule's x86_direct knob for this layer (False asks
        for the int16 column, not the x86 kernels)."""
        generic = get_schedule("qconv_s8.im2col")
        cfg = ScheduleConfig.resolve(k.config) or ScheduleConfig()
        return bool(cfg.for_kernel(k, generic).get("x86_direct", True))

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
        k.library(self.header)
        generic = k.target.is_generic
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
        body += self._call(k, attrs, wv, bv, generic)
        k_scratch = self.scratch_bytes(k, **attrs)
        if not generic:
            k.scratch_bytes = k_scratch
            return render_c(body)
        other = [Raw(emit_qconv(k, **attrs, x86_direct=True))]
        avx2 = get_schedule("qconv_s8.im2col_avx2")
        if avx2.takes(k, attrs):    # AVX2 without AVX-512: the AVX2 kernel
            other = [If(Var(AVX2_GUARD), avx2.generic_branch(k, attrs), other)]
        k.scratch_bytes = k_scratch
        # a C `if` on the headers' constants: all branches compile, the compiler keeps one
        return render_c([ExprStmt(Cast(Type(VOID), Var(mult.c))),   # not read by every branch
                         ExprStmt(Cast(Type(VOID), Var(shift.c))),
                         If(Var(GUARD), body, other)])


@register
class QConvIm2colAvx2(_QConvIm2colX86):
    name = "qconv_s8.im2col_avx2"
    priority = 14
    header = "mtvm_qgemm_s8_avx2_x86.h"
    function = "mtvm_qconv_avx2_x86"
    tile = 8
    describe = ("AVX2: tiles of {tile} output positions x {m} channels per group, "
                "{c} x {kh} x {kw} taps as s16 pairs, VPMADDWD ({name})")
    # defaults: the fastest measured here (AVX-512 host building -march=x86-64-v3) on the
    # denoise_unet, fomo, vww, kws layers against 1 x 8, 3 x 4, 2 x 6, 1 x 4, 1 x 6
    knobs = (Knob("tiles", 2, (1, 2, 3), "8-position tiles per register block"),
             Knob("channel_block", 4, (4, 6, 8),
                  "output channels per register block (the kernel takes at most 12 / tiles)"))

    def target_ok(self, t) -> bool:
        # x86-64-v3; with AVX-512 the generic schedule's AVX-512 kernels stay
        return t.is_x86 and t.has("avx2", "fma") and not t.has("avx512f") and \
            not t.has("avx512vnni")

    @staticmethod
    def takes(k, attrs) -> bool:
        """Not where the generic schedule takes its direct AVX2 KxK kernel (no column; the
        conditions of conv.direct_x86, under its x86_direct knob): measured as fast there
        or faster (denoise_unet's 48 -> 16 3 x 3 at 64 x 64: 0.57 ms against 0.63;
        ic_resnet8's 16 -> 16 at 32 x 32: 0.056 against 0.078), and slower where it
        does not apply (64 -> 32 at 32 x 32: 0.51 against 0.37 ms; pointwise, in place,
        stride 3, rows under 8, large layers)."""
        x, w = k.ins[0], k.plain(1)
        group = attrs.get("group", 1)
        h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = conv_geometry(
            x.shape, w.shape, attrs["strides"], attrs["pads"], attrs["dilations"])
        if kh == kw == 1 and sh == sw == 1 and ph == pw == 0:
            return True                                  # pointwise: no KxK kernel
        cfg = ScheduleConfig.resolve(k.config) or ScheduleConfig()
        if not cfg.for_kernel(k, get_schedule("qconv_s8.im2col")).get("x86_direct", True):
            return True
        return not (k.inplace is None and
                    direct_x86_fits(x.shape[1] // group, w.shape[0] // group, kh * kw, sw, ow))

    def applies(self, k, /, **attrs) -> bool:
        return super().applies(k, **attrs) and self.takes(k, attrs)

    def weight_layout(self, k, /, **attrs):
        w, bias = k.ins[1].const, k.ins[2].const
        return {1: avx2_weights(w), 2: vnni_bias(bias, w, False)}

    def scratch_bytes(self, k, /, **attrs) -> int:
        return (32 * int(k.knobs.get("tiles", 1)) + 16) * _kp(k, attrs, 2)  # column, taps

    def generic_branch(self, k, attrs) -> list:
        """On target c, the branch of `if (MTVM_QCONV_AVX2_ON)` inside the VNNI schedule's
        `else`: this kernel on tables of its layout, its column on the stack, its knobs."""
        x, w, bias = operands(k)[0], k.plain(1), k.plain(2)
        k.library(self.header)
        cfg = ScheduleConfig.resolve(k.config) or ScheduleConfig()
        wt, bt = Var("wq_avx2", Type("int32")), Var("bias_avx2", Type("int32"))
        return [Table(wt, avx2_weights(w.const)), Table(bt, vnni_bias(bias.const, w.const, False)),
                ExprStmt(Cast(Type(VOID), Var(k.ins[1].c))),
                ExprStmt(Cast(Type(VOID), Var(k.ins[2].c)))] + \
            self._call(k, attrs, wt, bt, True, cfg.for_kernel(k, self))

    def emit(self, k, /, **attrs) -> str:
        k.library(self.header)
        body = self._call(k, attrs, Var(k.ins[1].c), Var(k.ins[2].c), False)
        k.scratch_bytes = self.scratch_bytes(k, **attrs)
        return render_c(body)


__all__ = ["QConvIm2colVnni", "QConvIm2colAvx2", "vnni_weights", "vnni_bias", "avx2_weights"]
