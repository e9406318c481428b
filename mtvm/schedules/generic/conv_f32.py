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
    "gemm_min_channels": (4, 8, 16),
    "im2col_cols": (16, 32, 64),
    "im2col_max_bytes": (4096, 8192, 16384, 32768),
    "kxk": ("window", "im2col"),
    "window_min_cols": (4, 8, 16),
    "pointwise_inplace_cols": (16, 32),
    "depthwise_max_taps": (9, 25, 49),
    "depthwise_max_border": (2, 4, 8),
    "depthwise_direct_max_plane": (1024, 4096, 16384),
}


def float_conv(k) -> bool:
    """Float32 data and constant weights: what the conv schedules compute (the
    rest goes to the op's own direct loop nest)."""
    x, wt = k.ins[0], k.ins[1]
    return np.dtype(x.dtype) == np.float32 and wt.const is not None and len(x.shape) in (3, 4)


def geometry(k, attrs: dict):
    x, wt = k.ins[0], k.ins[1]
    return conv.conv_geometry(x.shape, wt.shape, **attrs)


def lift_1d(k, axes):
    """A 1-D Conv as the 2-D Conv of height 1 it is: X [N, C, L] -> [N, C, 1, L],
    W [M, C/g, K] -> [M, C/g, 1, K], Y likewise, one more (trivial) axis in front.
    Only the kernel's view changes (same bytes, same flat indices), so every 2-D
    schedule, and the fused tail, apply as they are. Returns the 2-D axes."""
    if len(axes) != 1:
        return axes
    x, wt, y = k.ins[0], k.ins[1], k.outs[0]
    k.ins[0] = replace(x, shape=x.shape[:2] + (1,) + x.shape[2:])
    w4 = np.asarray(wt.const).reshape(wt.shape[:2] + (1,) + wt.shape[2:])
    k.ins[1] = replace(wt, shape=w4.shape, const=w4)
    k.outs[0] = replace(y, shape=y.shape[:2] + (1,) + y.shape[2:])
    (a,) = axes
    return [conv.Axis("h", 1, 1, 1, 1, 1, 0, 0), replace(a, name="w")]


@register
class ConvF32(Schedule):
    op = "Conv"
    name = "conv2d_f32"
    family = "generic"
    priority = 0
    simd = False                 # the AVX-512 variant is ConvF32Avx512's (schedules/x86)
    knobs = tuple(Knob(n, v, _CHOICES.get(n, (v,))) for n, v in conv.DEFAULT_KNOBS.items()
                  if n not in conv.AVX512_KNOBS)

    def applies(self, k, /, **attrs) -> bool:
        return float_conv(k)

    def emit(self, k, /, **attrs) -> str:
        axes, group = geometry(k, attrs)
        axes = lift_1d(k, axes)
        x, wt = k.ins[0], k.ins[1]
        bias = k.ins[2] if len(k.ins) > 2 else None
        return conv.emit_conv_scheduled(k, x, wt, bias, axes, group, simd=self.simd)

    # scratch_bytes: not declared yet (the float conv emitters size their
    # scratch while emitting); mtvm.codegen.c_codegen._scratch emits to learn it.
    def scratch_bytes(self, k, /, **attrs):
        return None
