"""Float RNN, GRU and LSTM on Cortex-M cores with a fused-multiply-add FPU and the DSP
extension (M4F, M7, M33; not Helium cores): the generic GEMV schedules
(mtvm/schedules/generic/recurrent_f32.py) with the sixteen-column VFP block
(c_runtime/kernels/arm_dsp/mtvm_gemv_f32_vfp16.h) for W x and R h: about 18.4 instructions
per 16 MACs instead of 13 per 8, the same fused multiply-adds in the same order (the same
bits). W and R are packed at compile time (packed16: each block of sixteen columns with its
taps in a row, the same floats) so that the block needs no step between rows.

RNN, LSTM and GRU with linear_before_reset go one step further: W x starts from the bias
(Wb + Rb, summed at compile time) and R h is added to it in place, so the gate rows need no
pass of their own (about eight instructions a row and step: a tenth of a 16-unit LSTM's
time). GRU's h gate keeps Wb_h and Rb_h apart: R_h h starts from Rb_h in a row of its own,
as r multiplies it. The sums are then taken in another order than onnxruntime's, within
float rounding. GRU without linear_before_reset keeps the pass (R_h multiplies r * h).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...ops import get_op
from .. import register
from ..generic.recurrent_f32 import GruGemvF32, LstmGemvF32, RnnGemvF32


GEMV = "mtvm_f32_gemv16_packed_vfp"
GEMV_INIT = "mtvm_f32_gemv16_packed_init_vfp"
# The gates' activations a row range at a time (c_runtime/kernels/arm_dsp/
# mtvm_activation_f32_vfp.h: two values a step, 17.5 instructions a sigmoid against 31)
ACT_ARRAYS = {"sigmoid": "mtvm_sigmoid_f32_inplace", "tanh": "mtvm_tanh_f32_inplace"}


def starts_from_bias(op: str, k, linear_before_reset: int = 0) -> bool:
    """Whether the gates can start from the bias: RNN, LSTM and GRU with
    linear_before_reset, with a constant bias or none (one given at run time keeps the
    pass over the rows)."""
    bias = k.ins[3] if len(k.ins) > 3 else None
    return (op != "GRU" or bool(linear_before_reset)) and (bias is None or bias.const is not None)


def summed_bias(k, apart: int = 0) -> None:
    """Replace a constant bias input [dirs][2 * gates * H] (Wb, then Rb) by Wb + Rb
    [dirs][gates * H], a new constant of the graph; the last `apart` gate rows (GRU's h
    gate: H) keep Rb apart, after them: [dirs][gates * H + apart]."""
    buf = k.ins[3] if len(k.ins) > 3 else None
    if buf is None:
        return
    b = np.asarray(buf.const, np.float32)
    gh = b.shape[-1] // 2
    summed = b[..., :gh - apart] + b[..., gh:2 * gh - apart]
    value = np.ascontiguousarray(np.concatenate(
        [summed, b[..., gh - apart:gh], b[..., 2 * gh - apart:]], axis=-1))
    name = k.graph.add_const(f"{buf.name}_summed", value)
    k.ins[3] = replace(buf, name=name, shape=value.shape, const=value)


def packed16(k, index: int, segments) -> None:
    """Replace constant input `index` ([dirs][gates * H][taps], W or R as the model gives
    them) by the packed layout of mtvm_f32_gemv16_packed_vfp, a new constant of the same size:
    per direction the transpose [taps][gates * H] (the GEMV's columns) cut into the column
    ranges `segments` (the GEMV calls' ranges, in order), each range at taps * its first
    column as its whole blocks of sixteen columns [taps][16], then the columns past them
    [taps][width % 16]."""
    buf = k.ins[index]
    value = np.asarray(buf.const, np.float32)
    dirs, cols, taps = value.shape
    assert segments[0][0] == 0 and segments[-1][1] == cols and \
        all(a[1] == b[0] for a, b in zip(segments, segments[1:])), segments
    packed = []
    for d in range(dirs):
        wt = value[d].T                                      # [taps][cols]
        for c0, c1 in segments:
            whole = c0 + (c1 - c0) // 16 * 16
            packed += [wt[:, j:j + 16].ravel() for j in range(c0, whole, 16)]
            packed.append(wt[:, whole:c1].ravel())
    flat = np.concatenate(packed).astype(np.float32)
    name = k.graph.add_const(f"{buf.name}_packed16", flat.reshape(dirs, taps, cols))
    k.ins[index] = replace(buf, name=name, shape=(dirs, taps, cols),
                           const=flat.reshape(dirs, taps, cols))


def gemv_segments(op: str, cols: int, hidden_size: int, linear_before_reset: int,
                  from_bias: bool = False):
    """R's column ranges that the op's GEMVs read apart: GRU takes R_h on its own (times
    r * h without linear_before_reset; from Rb_h where the gates start from the bias)
    (mtvm/ops/recurrent.py)."""
    if op == "GRU" and (from_bias or not linear_before_reset):
        return [(0, 2 * hidden_size), (2 * hidden_size, cols)]
    return [(0, cols)]


class _Vfp16:
    family = "arm_dsp"
    priority = 20
    # W x stays a GEMV per step here: the sixteen-column VFP block (about 18.4 instructions
    # per 16 MACs) costs fewer than the 4 x 4 GEMM block (24)
    knobs = ()

    def applies(self, k, /, **attrs) -> bool:
        t = k.target
        return t.is_arm_dsp and bool(t.fpu) and super().applies(k, **attrs)

    def scratch_bytes(self, k, /, **attrs) -> int:
        """Without R h's row where the gates start from the bias (it adds in place)."""
        lbr = attrs.get("linear_before_reset", 0)
        init = GEMV_INIT if starts_from_bias(self.op, k, lbr) else None
        return get_op(self.op).scratch_bytes(k, gemv=True, gemv_init=init, **attrs)

    def emit(self, k, /, **attrs) -> str:
        k.library("mtvm_gemv_f32_vfp16.h")
        cols = k.ins[1].shape[1]
        H, lbr = attrs["hidden_size"], attrs.get("linear_before_reset", 0)
        from_bias = starts_from_bias(self.op, k, lbr)
        packed16(k, 1, [(0, cols)])
        packed16(k, 2, gemv_segments(self.op, cols, H, lbr, from_bias))
        init = None
        if from_bias:
            summed_bias(k, H if self.op == "GRU" else 0)
            init = GEMV_INIT
        k.library("mtvm_activation_f32_vfp.h")
        return get_op(self.op).emit(k, gemv=GEMV, gemv_init=init, gemv_packed=True,
                                    act_arrays=ACT_ARRAYS, **attrs)


@register
class RnnGemvF32Vfp(_Vfp16, RnnGemvF32):
    name = "rnn_f32.gemv_vfp16"


@register
class GruGemvF32Vfp(_Vfp16, GruGemvF32):
    name = "gru_f32.gemv_vfp16"


@register
class LstmGemvF32Vfp(_Vfp16, LstmGemvF32):
    name = "lstm_f32.gemv_vfp16"
