"""Float RNN, GRU and LSTM on Cortex-M cores with a fused-multiply-add FPU and the DSP
extension (M4F, M7, M33; not Helium cores): the generic GEMV schedules
(mtvm/schedules/generic/recurrent_f32.py) with the sixteen-column VFP block
(c_runtime/kernels/arm_dsp/mtvm_gemv_f32_vfp16.h) for W x and R h: 22 instructions per 16
MACs instead of 13 per 8, the same fused multiply-adds in the same order (the same bits).

RNN and LSTM go one step further: W x starts from the bias (Wb + Rb, summed at compile
time) and R h is added to it in place, so the gate rows need no pass of their own (about
eight instructions a row and step: a tenth of a 16-unit LSTM's time). The sums are then
taken in another order than onnxruntime's, within float rounding. GRU keeps the pass (its
h gate needs R_h h apart).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...ops import get_op
from .. import register
from ..generic.recurrent_f32 import GruGemvF32, LstmGemvF32, RnnGemvF32, _transposed


GEMV_INIT = "mtvm_f32_gemv16_init_vfp"


def starts_from_bias(op: str, k) -> bool:
    """Whether the gates can start from the bias: RNN and LSTM, with a constant bias or
    none (one given at run time keeps the pass over the rows)."""
    bias = k.ins[3] if len(k.ins) > 3 else None
    return op != "GRU" and (bias is None or bias.const is not None)


def summed_bias(k) -> None:
    """Replace a constant bias input [dirs][2 * gates * H] (Wb, then Rb) by Wb + Rb
    [dirs][gates * H], a new constant of the graph."""
    buf = k.ins[3] if len(k.ins) > 3 else None
    if buf is None:
        return
    b = np.asarray(buf.const, np.float32)
    gh = b.shape[-1] // 2
    value = np.ascontiguousarray(b[..., :gh] + b[..., gh:])
    name = k.graph.add_const(f"{buf.name}_summed", value)
    k.ins[3] = replace(buf, name=name, shape=value.shape, const=value)


class _Vfp16:
    family = "arm_dsp"
    priority = 20
    # W x stays a GEMV per step here: the sixteen-column VFP block (22 instructions per 16
    # MACs) costs fewer than the 4 x 4 GEMM block (24)
    knobs = ()

    def applies(self, k, /, **attrs) -> bool:
        t = k.target
        return t.is_arm_dsp and bool(t.fpu) and super().applies(k, **attrs)

    def scratch_bytes(self, k, /, **attrs) -> int:
        """Without R h's row where the gates start from the bias (it adds in place)."""
        init = GEMV_INIT if starts_from_bias(self.op, k) else None
        return get_op(self.op).scratch_bytes(k, gemv=True, gemv_init=init, **attrs)

    def emit(self, k, /, **attrs) -> str:
        k.library("mtvm_gemv_f32_vfp16.h")
        _transposed(k, 1)
        _transposed(k, 2)
        init = None
        if starts_from_bias(self.op, k):
            summed_bias(k)
            init = GEMV_INIT
        return get_op(self.op).emit(k, gemv="mtvm_f32_gemv16_vfp", gemv_init=init, **attrs)


@register
class RnnGemvF32Vfp(_Vfp16, RnnGemvF32):
    name = "rnn_f32.gemv_vfp16"


@register
class GruGemvF32Vfp(_Vfp16, GruGemvF32):
    name = "gru_f32.gemv_vfp16"


@register
class LstmGemvF32Vfp(_Vfp16, LstmGemvF32):
    name = "lstm_f32.gemv_vfp16"
