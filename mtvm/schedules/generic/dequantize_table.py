"""DequantizeLinear of a large 8-bit tensor on a microcontroller: each output a load from a
256-entry float table made at compile time with the kernel's own float32 arithmetic
((float)(x - zero point) * scale, one IEEE product: the same bits), instead of a
conversion and a multiply an element (the M4: 8 instructions an element -> 4; without an
FPU, a software multiply an element -> none). Per-tensor scale and zero point only; the
table's 1 KiB of flash is spent where the tensor has at least MIN_ELEMENTS elements (an
autoencoder's or a decoder's float output; a classifier's dozen logits keep the loop) and,
with an FPU, where it saves a larger share of the model's instructions than it adds to its
flash (`pays_for_its_flash`: ad_autoencoder_int8's 640 outputs, 0.6 % of its instructions
for 0.3 % more flash, keep it; a U-Net's 1,024 outputs beside 18 M MACs, 0.02 % for 2 %,
do not).
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import (Assign, Cast, Comment, Const, ExprStmt, For, Table, Type, Var, call,
                                param, render_c)
from ...ops import node_macs
from ...ops.quantize import qrange
from ...ops.quantized.common import INT8_EXT
from ...ops.quantized.resize import dq_table
from .. import Schedule, register

MIN_ELEMENTS = 512
TABLE_BYTES = 1024
SAVED_PER_ELEMENT = 4     # instructions, the Cortex-M4 with its FPU
INSTR_PER_MAC = 1.3       # about what an int8 model takes on a DSP core


def pays_for_its_flash(k) -> bool:
    """Whether the instructions the table saves are a larger share of the model's
    (estimated from its MACs) than the table's bytes are of the model's constants.
    Without an FPU (a software multiply an element saved) it always pays."""
    if not k.target.fpu:
        return True
    g = k.graph
    macs = sum(node_macs(g, n) for n in g.nodes)
    weights = sum(t.nbytes for t in g.tensors.values() if t.is_const)
    return SAVED_PER_ELEMENT * k.ins[0].size * weights >= \
        TABLE_BYTES * INSTR_PER_MAC * max(macs, 1)


@register
class DequantizeTable(Schedule):
    op = "DequantizeLinear"
    name = "dequantize_s8.table"
    family = "generic"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        x, out = k.ins[0], k.out
        params = [b for b in k.ins[1:3] if b is not None]
        return ((k.target.is_arm or k.target.is_riscv) and
                np.dtype(x.dtype) in (np.dtype(np.int8), np.dtype(np.uint8)) and
                np.dtype(out.dtype) == np.float32 and x.size >= MIN_ELEMENTS and
                not attrs.get("block_size", 0) and
                all(b.const is not None and b.size == 1 for b in params) and
                pays_for_its_flash(k))

    def emit(self, k, /, **attrs) -> str:
        x = k.ins[0]
        scale = np.asarray(k.ins[1].const).ravel()[0]
        zp = int(np.asarray(k.ins[2].const).ravel()[0]) if len(k.ins) > 2 and \
            k.ins[2] is not None else 0
        lo = qrange(x.dtype)[0]
        table, i = Var("dq", Type("float32")), Var("i")
        src = Cast(Type("int32"), param(x)[i])
        head = [Comment("the 256 values' (float)(x - zero point) * scale, computed at compile "
                        "time in float32 as the loop would"),
                Table(table, dq_table(x.dtype, scale, zp))]
        if k.target.is_arm_dsp:
            # four bytes a word load, each index one extend-with-rotate: 6 -> 4 instructions
            # an element on the Cortex-M4 (ad_autoencoder_int8's 640 outputs)
            k.library("mtvm_lut_8_dsp.h")
            ext = INT8_EXT[np.dtype(x.dtype).name][1]
            return render_c(head + [ExprStmt(call(f"mtvm_lut32_{ext}_dsp", param(x),
                                                  param(k.out, output=True), x.size, table))])
        return render_c(head + [For(i, x.size, [Assign(param(k.out, output=True)[i],
                                                       table[src + Const(-lo, "int32")
                                                             if lo else src])])])
