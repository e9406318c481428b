"""Float RNN, GRU and LSTM with constant weights: per time step, the gate rows
as two GEMVs (W x and R h) through the float GEMV micro-kernel, instead of one
dot-product loop per gate row.

W [dirs][gates * H][I] and R [dirs][gates * H][H] are stored transposed at
compile time ([dirs][I or H][gates * H]) so the micro-kernel reads each
weight once, in order, into a block of register accumulators (8 on a
Cortex-M4F, 32 with AVX2, 64 with AVX-512: mtvm_gemv_f32_prelude.h). The gate
non-linearities and the state update are the op's own (mtvm/ops/recurrent.py),
with tanh and sigmoid from mtvm_activation_f32.h.

The input projection W x does not depend on the state: with batch 1 it is computed
for `input_steps` time steps at a time as one matrix product (the float GEMM
micro-kernel, the steps' inputs as its packed side), each step then copying its row,
so that W is read once per block of steps instead of once per step. It costs
input_steps * (gates * H + I) floats of scratch; 0 turns it off (the tuner's choice
under a memory budget).

Left for later (docs/performance.md): integer recurrent kernels for int8 QDQ models.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...ops import get_op
from ...ops.microkernels import gemm_ukernel, gemv_blocked
from .. import Knob, Schedule, register

def _transposed(k, index: int):
    """Replace constant input `index` ([dirs][rows][cols]) by its transpose
    [dirs][cols][rows], a new constant of the graph."""
    buf = k.ins[index]
    value = np.ascontiguousarray(np.swapaxes(np.asarray(buf.const, np.float32), 1, 2))
    name = k.graph.add_const(f"{buf.name}_transposed", value)
    k.ins[index] = replace(buf, name=name, shape=value.shape, const=value)


class RecurrentGemvF32(Schedule):
    family = "generic"
    priority = 10
    # 8: the GEMM micro-kernel's default height (MR); AVX2 runs it as two passes of four
    knobs = (Knob("input_steps", 8, (0, 4, 8, 12)),)

    def applies(self, k, /, **attrs) -> bool:
        x, w, r = k.ins[:3]
        return (np.dtype(x.dtype) == np.float32 and w.const is not None
                and r.const is not None)

    def _steps(self, k) -> int:
        return int((getattr(k, "knobs", None) or {}).get("input_steps", 0)) if self.knobs else 0

    def scratch_bytes(self, k, /, **attrs) -> int:
        steps = self._steps(k)
        return get_op(self.op).scratch_bytes(k, gemv=True, project=(None, steps) if steps
                                             else None, **attrs)

    def emit(self, k, /, **attrs) -> str:
        name = gemv_blocked(k)
        _transposed(k, 1)
        _transposed(k, 2)
        steps = self._steps(k)
        project = (gemm_ukernel(k, steps), steps) if steps else None
        return get_op(self.op).emit(k, gemv=name, project=project, **attrs)


@register
class RnnGemvF32(RecurrentGemvF32):
    op = "RNN"
    name = "rnn_f32.gemv"


@register
class GruGemvF32(RecurrentGemvF32):
    op = "GRU"
    name = "gru_f32.gemv"


@register
class LstmGemvF32(RecurrentGemvF32):
    op = "LSTM"
    name = "lstm_f32.gemv"
