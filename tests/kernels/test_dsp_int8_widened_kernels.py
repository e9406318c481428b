"""C unit tests of QConv's im2col micro-kernel with weights widened to int16
(c_runtime/kernels/arm_dsp/mtvm_mm_s16_w16.h: mtvm_mm_s16_widen + mtvm_mm2x2_s16_w16)
against the dot products they stand for: the column laid out as emit_im2col lays it
(blocks of four taps per pixel, the tail slots of tail_slot, zero-padded), the weights
packed by conv_pack_index, then widened in C -- every tap count from 1 to 21 and a few
larger (every block count mod 4 with every tail of 0-3 taps), int8 and uint8 weights at
their extremes, rows whose length is 2 mod 4 (the half word group). On the host
(ASan/UBSan: portable C), the emulated Cortex-M4F (LDRD/SMLAD assembly) and Cortex-M3
(portable)."""
from __future__ import annotations

import numpy as np
import pytest

from mtvm.ops.quantized.conv import conv_pack_index, tail_slot, tail_stride, widened_row

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
TAPS = list(range(1, 22)) + [27, 36, 48, 75]

W16_TEST = r"""
#include <stdio.h>
#include "mtvm_mm_s16_w16.h"
@ARRAYS@
static int16_t wide[4 * 76];
static union { uint64_t align; int16_t v[8 * 19 + 8]; } col;   /* the scratch's alignment */
int main(void)
{
    for (int c = 0; c < @N@; ++c) {
        const int32_t kk = kks[c];
        int32_t a[4] = { 1000 * c, -7, 3, 1 << 20 };
        /* the packed rows and columns of the cases one after another */
        mtvm_mm_s16_widen(wide, MTVM_MM_W16_ROW(2 * kk), (const uint8_t*)(wu[c] ? (const void*)(wb_u + woff[c])
                                                      : (const void*)(wb_s + woff[c])),
                          wu[c], 1, 2 * kk);   /* one channel pair */
        memcpy(col.v, cols + coff[c], sizeof col.v);
        mtvm_mm2x2_s16_w16(col.v, wide, kk / 4, kk % 4, a);
        printf("%ld %ld %ld %ld\n", (long)a[0], (long)a[1], (long)a[2], (long)a[3]);
    }
    return 0;
}
"""


def column(x: np.ndarray, kk: int) -> np.ndarray:
    """The int16 column of two pixels' taps x[2][kk], as emit_im2col writes it."""
    nb, tl = kk // 4, kk % 4
    ts = tail_stride(tl)
    col = np.zeros(8 * nb + 2 * ts, np.int64)
    for p in range(2):
        for i in range(4 * nb):
            col[8 * (i // 4) + 4 * p + i % 4] = x[p, i]
        for j in range(tl):
            col[8 * nb + ts * p + tail_slot(j, tl)] = x[p, 4 * nb + j]
    return col


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_widened_pair_kernel_gives_the_dot_products(target):
    rng = np.random.default_rng(23)
    cases = [(kk, wu) for kk in TAPS for wu in (0, 1)]
    cols, ws_s, ws_u, coff, woff, expect = [], [], [], [], [], []
    nc = nw = 0
    for c, (kk, wu) in enumerate(cases):
        x = rng.integers(-128, 128, (2, kk))
        w = rng.integers(0, 256, (2, kk)) if wu else rng.integers(-128, 128, (2, kk))
        if c % 7 == 0:                       # the extremes
            x[:] = -128
            w[:] = 255 if wu else -128
        packed = w.ravel()[conv_pack_index(2, kk)]
        col = column(x, kk)
        coff.append(nc)
        woff.append(nw)
        cols.append(col)
        nc += len(col)
        (ws_u if wu else ws_s).append(packed)
        (ws_s if wu else ws_u).append(np.zeros_like(packed))
        nw += len(packed)
        acc0 = np.array([1000 * c, -7, 3, 1 << 20], np.int64)
        dots = np.array([x[0] @ w[0], x[0] @ w[1], x[1] @ w[0], x[1] @ w[1]])
        expect.append((acc0 + dots).tolist())
    assert widened_row(max(TAPS)) <= 4 * 76 and nc and len(cols[-1]) <= 8 * 19 + 8
    cols.append(np.zeros(8 * 19 + 8, np.int64))   # (the last case's copy reads a whole buffer)
    arrays = "\n".join([
        c_array("cols", np.concatenate(cols), "int16_t"),
        c_array("wb_s", np.concatenate(ws_s), "int8_t"),
        c_array("wb_u", np.concatenate(ws_u), "uint8_t"),
        c_array("kks", [kk for kk, _ in cases], "int32_t"),
        c_array("wu", [wu for _, wu in cases], "int32_t"),
        c_array("coff", coff, "int32_t"), c_array("woff", woff, "int32_t")])
    src = W16_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(len(cases)))
    out = run_c_test(src, name="mm_s16_w16", target=target, library=("mtvm_mm_s16_w16.h",))
    lines = out.strip().splitlines()
    assert len(lines) == len(cases)
    for c, line in enumerate(lines):
        assert [int(t) for t in line.split()] == expect[c], f"case {c}: kk {cases[c]}"
