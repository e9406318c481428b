"""Float MatMul, and Gemm with a constant B: tiles of the float GEMM
micro-kernel, mr rows of A x MTVM_F32_NR columns of B, A's rows copied
transposed into scratch per block (mtvm.ops.gemm.emit_matmul_tiles). This
covers fully connected layers, a transformer's projections and its attention
products (both operands computed), and a recurrent block's input projection.
MatMul's leading batch dims fold into the rows when B has none. One row (a
batch-1 Linear) takes the GEMV micro-kernel instead.
"""
from __future__ import annotations

import numpy as np

from ...ops import gemm
from .. import Knob, Schedule, register


def _float_const_b(k) -> bool:
    """Gemm's condition: float32 with B a constant matrix."""
    a, b = k.ins[0], k.ins[1]
    return (np.dtype(a.dtype) == np.float32 and np.dtype(b.dtype) == np.float32
            and b.const is not None and len(b.shape) == 2)


class _Tiled(Schedule):
    family = "generic"
    priority = 10
    knobs = (Knob("mr", 8, (4, 8), "rows of A per micro-kernel tile"),)

    def _geometry(self, k, attrs) -> tuple[int, int, int, tuple[int, int]]:
        """(rows, k, n, A's (row, col) element strides)."""
        raise NotImplementedError

    def scratch_bytes(self, k, /, **attrs) -> int:
        """mr rows of A transposed (none for one row: the GEMV reads A in place)."""
        rows, kk, _, _ = self._geometry(k, attrs)
        return 0 if rows == 1 else kk * min(k.knobs["mr"], rows) * 4


@register
class MatMulTiledF32(_Tiled):
    """Any float MatMul: B constant or computed (attention's Q K^T and P V).
    Without batch dims in B, A's batch dims fold into the rows; with them, one
    tiled product per batch entry."""
    op = "MatMul"
    name = "matmul_f32.tiled"

    def applies(self, k, /, **attrs) -> bool:
        a, b = k.ins[0], k.ins[1]
        return np.dtype(a.dtype) == np.float32 and np.dtype(b.dtype) == np.float32

    def _geometry(self, k, attrs):
        a, b = k.ins[0], k.ins[1]
        _, _, _, m, kk, n, _ = gemm._matmul_dims(a.shape, b.shape)
        rows = int(np.prod(a.shape[:-1], dtype=np.int64)) if len(b.shape) <= 2 else m
        return rows, kk, n, (kk, 1)

    def scratch_bytes(self, k, /, **attrs) -> int:
        rows, kk, _, _ = self._geometry(k, attrs)
        if len(k.ins[1].shape) > 2:
            return kk * min(k.knobs["mr"], rows) * 4
        return super().scratch_bytes(k, **attrs)

    def emit(self, k, /, **attrs) -> str:
        rows, kk, n, strides = self._geometry(k, attrs)
        mr = min(k.knobs["mr"], rows)
        if len(k.ins[1].shape) > 2:   # per batch entry
            return gemm.emit_batched(k, lambda m, kk, n, a_base, b_base, o_base, ch:
                                     gemm.emit_matmul_tiles(
                                         k, rows=m, kk=kk, n=n, a_strides=(kk, 1), mr=mr,
                                         ch=ch, a_base=a_base, b_base=b_base, o_base=o_base,
                                         plain=True))
        if rows == 1:
            return gemm.emit_gemv(k, kk=kk, n=n, value=lambda acc, i, j: acc)
        ch = (lambda i, j: j) if len(k.out.shape) == 2 else None
        return gemm.emit_matmul_tiles(k, rows=rows, kk=kk, n=n, a_strides=strides, mr=mr,
                                      ch=ch, plain=True)


@register
class GemmTiledF32(_Tiled):
    op = "Gemm"
    name = "gemm_f32.tiled"

    def applies(self, k, /, **attrs) -> bool:
        # A constant transposed B is stored transposed by Gemm.canonicalize.
        return _float_const_b(k) and not attrs.get("transB", 0)

    def _geometry(self, k, attrs):
        a, b = k.ins[0], k.ins[1]
        kk, n = b.shape
        rows = k.out.shape[0]
        return rows, kk, n, ((1, rows) if attrs.get("transA", 0) else (kk, 1))

    def emit(self, k, /, **attrs) -> str:
        rows, kk, n, strides = self._geometry(k, attrs)
        value = gemm.gemm_value(k, **attrs)
        if rows == 1:   # A^T of one column is the same row
            return gemm.emit_gemv(k, kk=kk, n=n, value=value)
        return gemm.emit_matmul_tiles(k, rows=rows, kk=kk, n=n, a_strides=strides,
                                      mr=min(k.knobs["mr"], rows), value=value,
                                      ch=lambda i, j: j)
