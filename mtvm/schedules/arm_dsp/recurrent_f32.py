"""Float RNN, GRU and LSTM on Cortex-M cores with a fused-multiply-add FPU and the DSP
extension (M4F, M7, M33; not Helium cores): the generic GEMV schedules
(mtvm/schedules/generic/recurrent_f32.py) with the sixteen-column VFP block
(c_runtime/kernels/arm_dsp/mtvm_gemv_f32_vfp16.h) for W x and R h: 22 instructions per 16
MACs instead of 13 per 8, the same fused multiply-adds in the same order (the same bits).
"""
from __future__ import annotations

from ...ops import get_op
from .. import register
from ..generic.recurrent_f32 import GruGemvF32, LstmGemvF32, RnnGemvF32, _transposed


class _Vfp16:
    family = "arm_dsp"
    priority = 20
    # W x stays a GEMV per step here: the sixteen-column VFP block (22 instructions per 16
    # MACs) costs fewer than the 4 x 4 GEMM block (24)
    knobs = ()

    def applies(self, k, /, **attrs) -> bool:
        t = k.target
        return t.is_arm_dsp and bool(t.fpu) and super().applies(k, **attrs)

    def emit(self, k, /, **attrs) -> str:
        k.library("mtvm_gemv_f32_vfp16.h")
        _transposed(k, 1)
        _transposed(k, 2)
        return get_op(self.op).emit(k, gemv="mtvm_f32_gemv16_vfp", **attrs)


@register
class RnnGemvF32Vfp(_Vfp16, RnnGemvF32):
    name = "rnn_f32.gemv_vfp16"


@register
class GruGemvF32Vfp(_Vfp16, GruGemvF32):
    name = "gru_f32.gemv_vfp16"


@register
class LstmGemvF32Vfp(_Vfp16, LstmGemvF32):
    name = "lstm_f32.gemv_vfp16"
