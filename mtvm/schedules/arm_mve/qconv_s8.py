"""Integer convolution on Helium (MVE) cores: int8 column rows of four output
pixels met by VMLADAVA.S8, 16 MACs per instruction, requantized on vectors
(emit_im2col_mve; c_runtime/kernels/arm_mve/mtvm_mm_s8_mve.h). Where it does
not apply (uint8, weight zero points, requantization off the fast path), the
generic im2col runs, with the DSP pair kernels. And the depthwise conv, four
output pixels per vector."""
from __future__ import annotations

from ...ops.quantized.conv import mve_applies
from ...ops.quantized.depthwise import mve_depthwise_applies
from ..generic.qconv_s8 import QConvDepthwiseBase, QConvIm2colBase
from .. import register


@register
class QConvIm2colMve(QConvIm2colBase):
    name = "qconv_s8.im2col_mve"
    family = "arm_mve"
    priority = 20
    variant = {"mve": True}

    def applies(self, k, /, **attrs) -> bool:
        group, kk = self.group_taps(k, attrs)
        return super().applies(k, **attrs) and \
            mve_applies(k, group, kk, attrs.get("y_zp", 0))


@register
class QConvDepthwiseMve(QConvDepthwiseBase):
    """Four output pixels per vector (c_runtime/kernels/arm_mve/mtvm_depthwise_s8_mve.h)."""
    name = "qconv_s8.depthwise_mve"
    family = "arm_mve"
    priority = 20
    variant = {"mve": True}

    def applies(self, k, /, **attrs) -> bool:
        return super().applies(k, **attrs) and mve_depthwise_applies(k)
