"""Float Conv (1-D and 2-D, any group) in portable C: depthwise (row and flat),
pointwise GEMM (in place too), window, im2col and the direct loop nest, as
chosen by mtvm.ops.conv.schedule_of from the kernel's knobs.

The AVX-512 micro-kernels that some window/im2col layers also get live in
mtvm/schedules/x86/conv_f32.py; this schedule is what every other target
(and every layer they do not cover) runs.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...ops import conv
from .. import Knob, Schedule, register

# What a tuner may try for each knob (the default is always among them).
_CHOICES = {
    # 12: two passes of six rows on AVX2 (mtvm_gemm_f32.h); helps where the channels are a
    # multiple of 12 or many (ic_resnet8's 16-channel 3x3 layers -5..10 %), hurts the band
    # layers and a 3-channel stem (+30..60 %): a per-layer choice, for the tuner
    "gemm_mr": (8, 12),
    "gemm_min_channels": (1, 4, 8, 16),
    "im2col_cols": (16, 32, 64),
    "im2col_max_bytes": (4096, 8192, 16384, 32768),
    "kxk": ("window", "im2col"),
    "window_min_cols": (4, 8, 16),
    "pointwise_inplace_cols": (16, 32),
    "pwcv_max_plane": (0, 144),
    "depthwise_max_taps": (9, 25, 49),
    "depthwise_max_border": (2, 4, 8),
    "depthwise_direct_max_plane": (1024, 4096, 16384),
    "depthwise_avx2_min_cols": (24, 32, 48),
    "depthwise_cv8_max_plane": (0, 64, 128, 256),
}


def float_conv(k) -> bool:
    """Float32 data and constant weights: what the conv schedules compute (the
    rest goes to the op's own direct loop nest)."""
    x, wt = k.ins[0], k.ins[1]
    return np.dtype(x.dtype) == np.float32 and wt.const is not None and len(x.shape) in (3, 4)


def geometry(k, attrs: dict):
    x, wt = k.ins[0], k.plain(1)
    return conv.conv_geometry(x.shape, wt.shape, **attrs)


def lifted(k, axes):
    """(x, wt, y, axes) of kernel k as a 2-D Conv, k unchanged: a 1-D Conv is the
    2-D Conv of height 1 it is, X [N, C, L] -> [N, C, 1, L], W [M, C/g, K] ->
    [M, C/g, 1, K], Y likewise, one more (trivial) axis in front. Only the view
    changes (same bytes, same flat indices), so every 2-D schedule, and the fused
    tail, apply as they are. wt: the plain weights (k.ins[1] may be laid out)."""
    x, wt, y = k.ins[0], k.plain(1), k.outs[0]
    if len(axes) != 1:
        return x, wt, y, axes
    w4 = np.asarray(wt.const).reshape(wt.shape[:2] + (1,) + wt.shape[2:])
    (a,) = axes
    return (replace(x, shape=x.shape[:2] + (1,) + x.shape[2:]),
            replace(wt, shape=w4.shape, const=w4),
            replace(y, shape=y.shape[:2] + (1,) + y.shape[2:]),
            [conv.Axis("h", 1, 1, 1, 1, 1, 0, 0), replace(a, name="w")])


def lift_1d(k, axes):
    """Kernel k seen as a 2-D Conv from here on (lifted); returns the 2-D axes and the
    plain weights' 2-D view (a laid-out k.ins[1] stays: the layout is the same)."""
    k.ins[0], wt, k.outs[0], axes = lifted(k, axes)
    if 1 in k.plain_ins:
        k.plain_ins[1] = wt
    else:
        k.ins[1] = wt
    return axes, wt


def _avx2_target(k) -> bool:
    """An x86 target with AVX2 + FMA and without AVX-512 (x86-64-v3)."""
    return k.target.has("avx2", "fma") and not k.target.has("avx512f") and \
        not k.target.is_generic


def _pointwise_or_1d(k) -> bool:
    """A 1x1 conv (any stride or padding) or a 1-D one."""
    wt = k.ins[1]
    return len(wt.shape) == 3 or all(d == 1 for d in wt.shape[2:])


def _pwcv_avx2(k) -> bool:
    """A pointwise conv whose AVX2 code is the channel-vector kernel when its weights are
    packed in blocks of 8 (conv.pwcv_applies): it keeps gemm_mr 8 on AVX2 targets."""
    a, wt = k.node.attrs, k.ins[1]
    pointwise = all(d == 1 for d in wt.shape[2:]) and \
        all(v == 1 for v in a.get("strides", [1])) and not any(a.get("pads", [0]))
    return pointwise and conv.pwcv_applies(k, k.ins[0], wt, a.get("group", 1), "avx2", mr=8)


@register
class ConvF32(Schedule):
    op = "Conv"
    name = "conv2d_f32"
    family = "generic"
    priority = 0
    simd = False                 # the x86 variants are ConvF32X86's (schedules/x86)
    knobs = tuple(Knob(n, v, _CHOICES.get(n, (v,))) for n, v in conv.DEFAULT_KNOBS.items()
                  if n not in conv.X86_KNOBS)

    def default_knobs(self, k=None) -> dict:
        """Where the C may run AVX-512 (an AVX-512 target, or the portable one,
        whose #if picks it by the compiler's flags) the in-place pointwise GEMM
        takes tiles of 32 positions (two vectors a row): with one, each FMA
        needs a broadcast load, 9 loads per 8 FMAs, which a core with two
        512-bit FMA ports (Intel Xeon) cannot feed -- kws_dscnn's 64 -> 64
        layer 1.8x slower there, fomo_mbv2 0.84 and kws_dscnn 0.89 of before
        as whole models; a core that splits 512-bit FMAs (AMD Zen 4) runs both
        at its FMA rate. The cost: that layer's scratch doubles (kws_dscnn's
        arena +512 B, fomo_mbv2's +944 B). Other targets have no 32-wide form."""
        values = super().default_knobs(k)
        if k is not None and (k.target.is_generic or k.target.has("avx512f")):
            values["pointwise_inplace_cols"] = 32
        if k is not None and _avx2_target(k) and _pointwise_or_1d(k) and not _pwcv_avx2(k):
            # AVX2 (x86-64-v3 targets): register blocks of 12 output channels, two passes
            # of six rows (12 accumulators) instead of 8 as one pass of 4 + 4. The tuner
            # chose 12 for every pointwise layer of vww_mobilenetv1 and kws_dscnn and for
            # har_cnn1d's 1-D layers; as the default (builds alternated): vww -7 %,
            # kws_dscnn -8 %, har_cnn1d -10 %. Not for the 2-D KxK layers, where it went
            # both ways (denoise_unet's 16 -> 32 stride-2 layer +23 %, its 32 -> 64 -10 %)
            values["gemm_mr"] = 12
        if k is not None and k.target.is_arm:
            # Cortex-M: the GEMM schedules for every channel count. With fewer than 8
            # output channels (a decoder's or detector's head) the direct loop nest
            # loads a weight and an input per MAC: on the M4 24 -> 4 1x1 7.3 -> 1.7
            # instructions/MAC, 12 -> 1 7.6 -> 3.8, 16 -> 1 3x3 9.3 -> 4.3 (a short
            # last block of rows, no padded weights)
            values["gemm_min_channels"] = 1
        return values

    def applies(self, k, /, **attrs) -> bool:
        return float_conv(k)

    def emit(self, k, /, **attrs) -> str:
        axes, group = geometry(k, attrs)
        axes, wt = lift_1d(k, axes)
        bias = k.ins[2] if len(k.ins) > 2 else None
        return conv.emit_conv_scheduled(k, k.ins[0], wt, bias, axes, group, simd=self.simd)

    def weight_layout(self, k, /, **attrs):
        """The GEMM-like plans (pointwise, im2col, window, and the AVX-512 kernels
        over them) read the weights per block of gemm_mr output channels, [tap][mr]
        (conv.packed_weights); depthwise and direct read them as they are."""
        axes, group = geometry(k, attrs)
        x, wt, _, axes = lifted(k, axes)
        kind, _ = conv.conv_plan(k, x, wt, axes, group, self.simd)
        if kind not in conv.PACKED_PLANS:
            return {}
        return {1: conv.packed_weights(wt.const, group, conv.knobs_of(k)["gemm_mr"])}

    def scratch_bytes(self, k, /, **attrs) -> int:
        """What emit() will ask for, from the same plan and layouts without emitting
        (conv.conv_scratch_bytes); the 1-D Conv as its lifted 2-D view, k unchanged."""
        axes, group = geometry(k, attrs)
        x, wt, _, axes = lifted(k, axes)
        return conv.conv_scratch_bytes(k, x, wt, axes, group, simd=self.simd)
