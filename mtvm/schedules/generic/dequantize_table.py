"""DequantizeLinear of a large 8-bit tensor on a microcontroller: each output a load from a
256-entry float table made at compile time with the kernel's own float32 arithmetic
((float)(x - zero point) * scale, one IEEE product: the same bits), instead of a
conversion and a multiply an element (the M4: 8 instructions an element -> 4; without an
FPU, a software multiply an element -> none). Per-tensor scale and zero point only; the
table's 1 KiB of flash is spent where the tensor has at least MIN_ELEMENTS elements (an
autoencoder's or a decoder's float output; a classifier's dozen logits keep the loop).
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import (Assign, Cast, Comment, Const, ExprStmt, For, Table, Type, Var, call,
                                param, render_c)
from ...ops.quantize import qrange
from ...ops.quantized.common import INT8_EXT
from ...ops.quantized.resize import dq_table
from .. import Schedule, register

MIN_ELEMENTS = 512


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
                all(b.const is not None and b.size == 1 for b in params))

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
