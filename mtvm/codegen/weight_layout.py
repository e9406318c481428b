"""The weight-layout step of lowering: a kernel's constant inputs re-laid out
for the schedule that computes it on its target.

The IR keeps every op's plain meaning (a QConv's weights are [OC, C/group,
KH, KW], as the model has them), so the NumPy references, the interpreter and
the LLVM backend read plain weights. A schedule whose micro-kernel loads the
weights in another order (the int8 im2col kernels read channel pairs
interleaved per block of four taps) declares it in Schedule.weight_layout, and
this step adds the re-laid-out constant to the graph and points the kernel's
input at it, once, before the kernel is emitted. The model's own constant is
then unused by the kernel (the C writer emits only the constants kernels
read).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np


def lay_out_weights(k, schedule, attrs: dict) -> None:
    """Apply schedule.weight_layout to kernel k (after schedules.choose set its knobs)."""
    if schedule is None:
        return
    for i, value in schedule.weight_layout(k, **attrs).items():
        buf = k.ins[i]
        if buf is None or buf.const is None:
            raise AssertionError(f"{schedule.name}: weight_layout of input {i}, "
                                 "which is not a constant")
        value = np.ascontiguousarray(value)
        # named after the kernel's node: the layout is this kernel's own copy
        suffix = "w" if i == 1 else f"in{i}"
        name = k.graph.add_const(f"{k.node.name}_{suffix}", value)
        k.plain_ins[i] = buf
        k.ins[i] = replace(buf, name=name, shape=tuple(value.shape), dtype=value.dtype,
                           const=value)


__all__ = ["lay_out_weights"]
