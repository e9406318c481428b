"""C unit tests of c_runtime/kernels/generic/mtvm_im2col_border_s8.h (the im2col column of
an output pixel whose window crosses the padding, shared by a model's int8 convolutions):
against a NumPy model of emit_im2col's column layout (blocks of four taps per pixel, the
kk % 4 tail taps in their tail slots) for windows of 1 x k to 7 x 5 with dilations, channel
counts with and without a tail, both pixels of a pair, and windows at every position
around and across the plane (corners, edges, windows wider than the plane); int8 and uint8.
The column is its own heap array filled with a sentinel: a write outside the pixel's slots
(the other pixel's, the tail's zero slots) or past the column fails the test, on the host
under ASan/UBSan and on the Cortex-M4 (mps2-an386 under QEMU)."""
from __future__ import annotations

import numpy as np
import pytest

from mtvm.ops.quantized.conv import col_bytes, tail_slot, tail_stride

from .kernel_harness import c_array, run_c_test

SENTINEL = 0x7777

# (h, w, kh, kw, dh, dw, channels)
GEOMETRIES = [
    (6, 7, 3, 3, 1, 1, 8),     # kk % 4 == 0: the four-channel steps only
    (6, 7, 3, 3, 1, 1, 6),     # a tail of two
    (5, 4, 3, 3, 1, 1, 3),     # a first layer: a tail of three
    (9, 7, 5, 5, 1, 1, 6),     # a window too large to unroll
    (7, 6, 3, 3, 2, 2, 5),     # dilated, a tail of one
    (1, 12, 1, 5, 1, 1, 7),    # a 1-D layer
    (1, 9, 1, 3, 1, 3, 4),     # 1-D, dilated
    (8, 3, 7, 5, 1, 1, 2),     # a window wider than the plane
    (4, 4, 3, 3, 1, 1, 13),    # four-channel steps then single channels
]


def _positions(h, w, kh, kw, dh, dw):
    """Window origins (iy0, ix0) that cross the padding, from every side."""
    out = []
    for iy0 in sorted({-(kh - 1) * dh, -1, 0, h - (kh - 1) * dh - 1, h - 1}):
        for ix0 in sorted({-(kw - 1) * dw, -1, 0, w - (kw - 1) * dw - 1, w - 1}):
            inside = iy0 >= 0 and ix0 >= 0 and iy0 + (kh - 1) * dh < h and \
                ix0 + (kw - 1) * dw < w
            if not inside:
                out.append((iy0, ix0))
    return out


def _expected(x, geom, zx, px, iy0, ix0):
    """The column (int16 slots) after writing pixel px's window into a sentinel column."""
    h, w, kh, kw, dh, dw, ch = geom
    kk = ch * kh * kw
    nb, tl = kk // 4, kk % 4
    col = np.full(col_bytes(kk) // 2, SENTINEL, np.int64)
    for i in range(kk):
        c, r = divmod(i, kh * kw)
        iy, ix = iy0 + r // kw * dh, ix0 + r % kw * dw
        v = x[c, iy, ix] if 0 <= iy < h and 0 <= ix < w else zx
        if i < 4 * nb:
            col[4 * px + i + (i & ~3)] = v
        else:
            col[8 * nb + tail_stride(tl) * px + tail_slot(i - 4 * nb, tl)] = v
    return col


def _program(dtype, cases):
    ctype = "int8_t" if dtype == np.int8 else "uint8_t"
    fn = "mtvm_im2col_border_s8" if dtype == np.int8 else "mtvm_im2col_border_u8"
    lines = ["#include <stdio.h>", "#include <stdlib.h>", '#include "mtvm_im2col_border_s8.h"',
             "static void run(const int32_t* g, const void* x, int32_t slots, int32_t px,",
             "                int32_t iy0, int32_t ix0)", "{",
             "    int16_t* col = (int16_t*)malloc((size_t)slots * sizeof(int16_t));",
             f"    for (int32_t i = 0; i < slots; ++i) col[i] = {SENTINEL};",
             f"    {fn}(col, px, (const {ctype}*)x, iy0, ix0, g);",
             "    for (int32_t i = 0; i < slots; ++i) printf(\"%d \", col[i]);",
             "    printf(\"\\n\");", "    free(col);", "}", "int main(void)", "{"]
    for n, (geom, x, zx, runs) in enumerate(cases):
        h, w, kh, kw, dh, dw, ch = geom
        kk = ch * kh * kw
        table = [h, w, kh, kw, dh, dw, ch, kk // 4, kk % 4, tail_stride(kk % 4), zx]
        lines += ["    {", "    " + c_array(f"g{n}", table, "int32_t"),
                  # the planes as a heap array of their own size: a read outside fails
                  f"    {ctype}* x{n} = ({ctype}*)malloc({x.size});",
                  "    " + c_array(f"xv{n}", x.ravel().tolist(), ctype),
                  f"    for (int i = 0; i < {x.size}; ++i) x{n}[i] = xv{n}[i];"]
        lines += [f"    run(g{n}, x{n}, {col_bytes(kk) // 2}, {px}, {iy0}, {ix0});"
                  for px, iy0, ix0 in runs]
        lines += [f"    free(x{n});", "    }"]
    return "\n".join(lines + ["    return 0;", "}"])


def _cases(dtype, rng):
    info = np.iinfo(dtype)
    zx = 3 if dtype == np.int8 else 131
    cases = []
    for geom in GEOMETRIES:
        h, w, kh, kw, dh, dw, ch = geom
        x = rng.integers(info.min, info.max + 1, (ch, h, w)).astype(dtype)
        runs = [(px, iy0, ix0) for iy0, ix0 in _positions(h, w, kh, kw, dh, dw)
                for px in (0, 1)]
        cases.append((geom, x, zx, runs))
    return cases


def _check(out, cases):
    rows = [[int(v) for v in line.split()] for line in out.splitlines() if line.strip()]
    want = [_expected(x.astype(np.int64), geom, zx, px, iy0, ix0).tolist()
            for geom, x, zx, runs in cases for px, iy0, ix0 in runs]
    assert len(rows) == len(want)
    for n, (got, exp) in enumerate(zip(rows, want)):
        assert got == exp, f"run {n}"


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
def test_border_column_on_host(dtype):
    cases = _cases(dtype, np.random.default_rng(5))
    out = run_c_test(_program(dtype, cases), name="im2col_border",
                     library=["mtvm_im2col_border_s8.h"])
    _check(out, cases)


def test_border_column_on_mps2_an386():
    cases = _cases(np.int8, np.random.default_rng(6))
    out = run_c_test(_program(np.int8, cases), name="im2col_border", target="mps2-an386",
                     library=["mtvm_im2col_border_s8.h"])
    _check(out, cases)
