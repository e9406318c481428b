"""Float Conv layers that x86 runs with its own micro-kernels: the "band"
(2 x 16 flat positions per tile, for outputs narrower than band_below_cols;
AVX-512 and AVX2 + FMA), the "direct" one (stride 1, same-size outputs of
17..31 columns, masked loads instead of a gathered copy; AVX-512, the band on
AVX2) and Winograd's F(4x4, 3x3) (3x3 stride-1 layers at least
winograd_min_cols wide; AVX2 only, ops/conv_winograd.py).

Each is emitted under `#if MTVM_F32_AVX512` / `#elif MTVM_F32_AVX2` with the
portable schedule as the #else (conv.x86_bodies), so the generic target ("c")
keeps one source that is fast on an x86 host and correct everywhere; on an
x86-64-v3/v4 target only its own branch is left, and on every other target
this schedule does not apply at all.
"""
from __future__ import annotations

from ...ops import conv
from .. import Knob, register
from ..generic.conv_f32 import ConvF32, float_conv, geometry

_CHOICES = {
    "direct_min_cols": (8, 16, 17),
    "direct_below_cols": (24, 32, 48),
    "direct_min_taps": (0, 400, 1000),
    "band_below_cols": (16, 32, 64),
    "band_cols": (0, 16, 32, 64),
    "band_max_bytes": (16384, 65536, 262144),
    "winograd": (0, 1),
    "winograd_min_cols": (8, 16, 32),
    "winograd_tiles": (16, 32, 64),
}


@register
class ConvF32X86(ConvF32):
    op = "Conv"
    name = "conv2d_f32.x86"
    family = "x86"
    priority = 10
    simd = True                  # ConvF32.emit: the x86 kernels under their #if
    knobs = ConvF32.knobs + tuple(Knob(n, conv.DEFAULT_KNOBS[n], _CHOICES[n])
                                  for n in conv.X86_KNOBS)

    def applies(self, k, /, **attrs) -> bool:
        if not (k.target.is_generic or k.target.has("avx512f") or k.target.has("avx2", "fma")) \
                or not float_conv(k):
            return False
        x, wt = k.ins[0], k.ins[1]
        if len(x.shape) != 4:
            return False
        axes, group = geometry(k, attrs)
        if k.inplace is not None:   # only the depthwise and pointwise schedules run in place
            return False
        return conv.conv_plan(k, x, wt, axes, group)[1] is not None
