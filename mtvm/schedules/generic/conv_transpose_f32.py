"""Float ConvTranspose whose kernel equals its stride (a U-Net's 2x2 stride-2
up-convolution; 1-D or 2-D, one group, no padding or dilation): one pointwise
GEMM per phase through the float GEMM micro-kernel (mtvm.ops.conv_transpose.
emit_phase_gemm), instead of the gather form that visits every tap of every
output pixel and keeps the few that land.

Strided ConvTransposes with a larger kernel, padding or output_padding become
convolutions over their phases before scheduling (mtvm/passes/conv_transpose.py);
dilated and grouped ones keep the gather form.
"""
from __future__ import annotations

import numpy as np

from ...ops import conv_transpose
from .. import Knob, Schedule, register


@register
class ConvTransposePhaseGemmF32(Schedule):
    op = "ConvTranspose"
    name = "conv_transpose_f32.phase_gemm"
    family = "generic"
    priority = 10
    knobs = (Knob("mr", 8, (4, 8), "output channels per micro-kernel tile"),)

    def applies(self, k, /, **attrs) -> bool:
        x, w = k.ins[0], k.ins[1]
        return (np.dtype(x.dtype) == np.float32 and w.const is not None
                and len(x.shape) in (3, 4)
                and conv_transpose.stride_sized(x.shape, w.shape, attrs))

    def emit(self, k, /, **attrs) -> str:
        return conv_transpose.emit_phase_gemm(k, attrs, min(k.knobs["mr"], k.ins[1].shape[1]))
