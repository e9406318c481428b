"""Transpose of bytes (int8, uint8) on Armv7E-M/v8-M cores with the DSP extension, where
the permutation is a 2-D transpose once the axes of size 1 are dropped and adjacent axes
merged (ops.layout.transpose_dims), with a batch axis or without: an attention's K^T
([1, 1, T, D] -> [1, 1, D, T]). Blocks of four rows and four columns through registers
(c_runtime/kernels/arm_dsp/mtvm_transpose8_dsp.h): about 1.8 instructions a byte where
the op's byte loop takes 4 (transformer_v11_int8's 49 x 32 K^T on the M4: 6.5 K -> 3.2 K
instructions). Without a fused tail only (the tail is per element)."""
from __future__ import annotations

from ...codegen.cwriter import Cast, ExprStmt, For, Type, Var, call, render_c
from ...ops.layout import transpose_dims
from .. import Schedule, register


def matrix_form(k, perm) -> tuple[int, int, int] | None:
    """(batch, rows, cols) where the Transpose is out[b][c][r] = in[b][r][c], else None."""
    dims = transpose_dims(k.ins[0].shape, perm)
    if len(dims) == 3:
        (nb, sb), dims = dims[0], dims[1:]
    else:
        nb, sb = 1, None
    if len(dims) != 2:
        return None
    (cols, s1), (rows, s2) = dims
    if s1 != 1 or s2 != cols or (sb is not None and sb != rows * cols):
        return None
    return nb, rows, cols


@register
class TransposeBytesDsp(Schedule):
    op = "Transpose"
    name = "transpose_8.dsp_blocks"
    family = "arm_dsp"
    priority = 10
    knobs = ()

    def applies(self, k, /, **attrs) -> bool:
        x = k.ins[0]
        if not k.target.is_arm_dsp or k.inplace is not None or x.dtype.itemsize != 1 or \
                k.node.tail or k.out is None or k.out.dtype != x.dtype:
            return False
        form = matrix_form(k, attrs.get("perm"))
        return form is not None and form[1] >= 4 and form[2] >= 4

    def emit(self, k, /, **attrs) -> str:
        nb, rows, cols = matrix_form(k, attrs.get("perm"))
        k.library("mtvm_transpose8_dsp.h")
        u8 = Type("uint8", pointer=True, const=True)
        b = Var("b")
        src = Cast(u8, Var(k.ins[0].c)) + b * (rows * cols)
        dst = Cast(Type("uint8", pointer=True), Var(k.out.c)) + b * (rows * cols)
        return render_c([For(b, nb, [ExprStmt(call("mtvm_transpose8_dsp", src, rows, cols,
                                                   dst))])])
