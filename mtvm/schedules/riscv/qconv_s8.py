"""Integer convolution on RV32 cores (no SIMD): the im2col column of
schedules/generic/qconv_s8.py built for four output pixels at a time (two
columns), met four output channels at a time with the sixteen sums in
registers and the requantization in the same assembly
(c_runtime/kernels/riscv/mtvm_mm_s16_rv32.h); and the 3x3 depthwise
in strips of two lines.
"""
from __future__ import annotations

from ...ops.quantized.conv import rv32_quad_applies
from ...ops.quantized.depthwise import rv32_depthwise_applies
from ..generic.qconv_s8 import QConvDepthwiseBase, QConvIm2colBase
from .. import register


@register
class QConvIm2colQuadRv32(QConvIm2colBase):
    name = "qconv_s8.im2col_rv32x4"
    family = "riscv"
    priority = 10
    variant = {"quad": True}

    def applies(self, k, /, **attrs) -> bool:
        group, kk = self.group_taps(k, attrs)
        return super().applies(k, **attrs) and rv32_quad_applies(k, group, kk)


@register
class QConvDepthwiseRv32(QConvDepthwiseBase):
    """3x3 depthwise in strips of two lines (c_runtime/kernels/riscv/mtvm_depthwise_rv32.h)."""
    name = "qconv_s8.depthwise_rv32"
    family = "riscv"
    priority = 10
    variant = {"rv32": True}

    def applies(self, k, /, **attrs) -> bool:
        return super().applies(k, **attrs) and \
            rv32_depthwise_applies(k, attrs["strides"], attrs["dilations"])
