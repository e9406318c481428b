"""C unit tests of QConv's im2col micro-kernels (c_runtime/kernels/generic/mtvm_mm_s16.h:
mtvm_mm2x2_s16_*, mtvm_mm1x2_s16_*, and on x86 mtvm_mm2x4_x86_*) against NumPy: the
weights packed by conv.conv_pack_index, the column laid out as emit_im2col writes it
(tail_slot), the sums exact integer dot products. One or two pixels, int8 and uint8
weights, every tail length, block counts that take each part of the assembly (one block,
two, loops of four), word-aligned weights (LDRD), unaligned ones (two LDRs) and wal = 1
with weights that turn out unaligned (the C fallback). On the host (ASan/UBSan; portable
and -march=native: AVX2 / AVX-512) and on the emulated Cortex-M4F (Thumb-2 assembly) and
Cortex-M3 (portable) boards."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from mtvm.ops.quantized.conv import conv_pack_index, tail_slot, tail_stride

from .kernel_harness import c_array, has_avx2, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
TARGETS = ["host", "host-native"] + BOARDS
DTYPES = {"s8": ("int8_t", -128, 128), "u8": ("uint8_t", 0, 256)}
BLOCKS = (0, 1, 2, 3, 4, 7)             # one, two, a loop of four, and all three
# (wal, byte offset of the weights): LDRD; two LDRs, unaligned and aligned; the C
# fallback where wal = 1 meets unaligned weights
ALIGNMENTS = ((1, 0), (0, 1), (0, 0), (1, 2))


def column(taps: np.ndarray) -> np.ndarray:
    """The int16 im2col column of two pixels' taps [2, kk], as emit_im2col lays it out:
    per block of four taps p0's then p1's, then each pixel's tail slots (zero-padded)."""
    kk = taps.shape[1]
    nb, tl = kk // 4, kk % 4
    ts = tail_stride(tl)
    col = np.zeros(8 * nb + 2 * ts, np.int64)
    for b in range(nb):
        for p in range(2):
            col[8 * b + 4 * p:8 * b + 4 * p + 4] = taps[p, 4 * b:4 * b + 4]
    for p in range(2):
        for j in range(tl):
            col[8 * nb + ts * p + tail_slot(j, tl)] = taps[p, 4 * nb + j]
    return col


def case(rng, w_dt: str, channels: int, nb: int, tl: int):
    """Random taps [2, kk] (int8 or uint8 activations, extremes included), weight rows
    [channels, kk], their packed bytes, the column and an initial accumulator."""
    kk = 4 * nb + tl
    taps = rng.integers(-128, 256, (2, kk))
    _, wlo, whi = DTYPES[w_dt]
    rows = rng.integers(wlo, whi, (channels, kk))
    if kk:
        taps[0, 0], rows[0, -1] = 255, whi - 1           # the largest products
        taps[1, -1], rows[-1, 0] = -128, wlo
    packed = rows.ravel()[conv_pack_index(channels, kk)]
    acc = rng.integers(-(1 << 20), 1 << 20, 2 * channels)
    return taps, rows, packed, column(taps), acc


MM_TEST = r"""
#include <stdio.h>
#include <string.h>
#include "mtvm_mm_s16.h"
/* the column 8-byte aligned (the arena's scratch); the weights at an offset from a word */
static union { int64_t align; int16_t v[@COLN@]; } col;
static union { uint32_t align; uint8_t b[@WN@ + 4]; } wbuf;
@ARRAYS@
static void put(const int16_t* c, int32_t nc, const @WT@* w, int32_t nw, int32_t off)
{
    memcpy(col.v, c, sizeof(int16_t) * (size_t)nc);
    memcpy(wbuf.b + off, w, (size_t)nw);
}
static void show(const int32_t* a, int n)
{
    for (int i = 0; i < n; ++i) printf("%ld ", (long)a[i]);
    printf("\n");
}
int main(void)
{
@CALLS@
    return 0;
}
"""


def _mm_cases():
    """(pixels, nb, tl, wal, weight offset) of every case; wal only where the weight rows
    are whole words (kk % 4 == 0), as emit_im2col passes it."""
    return [(pixels, nb, tl, wal, off)
            for pixels, nb, tl, (wal, off) in itertools.product((2, 1), BLOCKS, range(4),
                                                                ALIGNMENTS)
            if not (wal and tl)]


def _mm_call(i: int, w_dt: str, pixels: int, nb: int, tl: int, wal: int, off: int, col, packed,
             acc) -> list[str]:
    """C lines of case i: the column and weights into place, the call, the sums printed."""
    wt = DTYPES[w_dt][0]
    init = ", ".join(str(v) for v in acc)
    w_at = f"(const {wt}*)(const void*)(wbuf.b + {off})"
    return [f"    {{ int32_t a[4] = {{ {init} }};",
            f"      put(c{i}, {len(col)}, w{i}, {len(packed)}, {off});",
            f"      mtvm_mm{pixels}x2_s16_{w_dt}(col.v, {w_at}, {nb}, {tl}, {wal}, a);",
            f"      show(a, {2 * pixels}); }}"]


def _mm_program(w_dt: str):
    """One call per case, with constant nb, tl and wal as the generated kernels make
    them; returns the program and the expected lines."""
    rng = np.random.default_rng(12)
    wt = DTYPES[w_dt][0]
    arrays, calls, expected = [], [], []
    coln, wn = 8, 8
    for i, (pixels, nb, tl, wal, off) in enumerate(_mm_cases()):
        taps, rows, packed, col, acc = case(rng, w_dt, 2, nb, tl)
        if pixels == 1:    # the pixel-1 taps of the blocks are not read
            col[[8 * b + 4 + j for b in range(nb) for j in range(4)]] = 12345
        acc = acc[:2 * pixels]
        arrays += [c_array(f"c{i}", col, "int16_t"), c_array(f"w{i}", packed, wt)]
        calls += _mm_call(i, w_dt, pixels, nb, tl, wal, off, col, packed, acc)
        expected.append(acc + (taps @ rows.T)[:pixels].ravel())   # [pixel, channel]
        coln, wn = max(coln, len(col)), max(wn, len(packed))
    program = (MM_TEST.replace("@ARRAYS@", "\n".join(arrays)).replace("@CALLS@", "\n".join(calls))
               .replace("@COLN@", str(coln)).replace("@WN@", str(wn)).replace("@WT@", wt))
    return program, expected


def _run(program, name, target, library):
    if target == "host-native":
        return run_c_test(program, name=name, library=library, march="native")
    return run_c_test(program, name=name, target=target, library=library)


def _lines(out):
    return [np.array([int(v) for v in line.split()]) for line in out.split("\n") if line.strip()]


def _check(got, expected):
    """One printed line per case, equal to its expected values."""
    assert len(got) == len(expected)
    for n, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_array_equal(g, e, err_msg=f"case {n}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("w_dt", ["s8", "u8"])
def test_im2col_micro_kernel_sums_are_exact(w_dt, target):
    program, expected = _mm_program(w_dt)
    got = _lines(_run(program, f"mm_s16_{w_dt}", target, ["mtvm_mm_s16.h"]))
    _check(got, expected)


X86_TEST = r"""
#include <stdio.h>
#include <string.h>
#include "mtvm_mm_s16.h"
@ARRAYS@
int main(void)
{
#if !defined(MTVM_INT8_X86)
    return 2;   /* this test is built for the x86 path */
#else
@BODY@
    return 0;
#endif
}
"""


def _x86_program(arrays: list[str], body: list[str]) -> str:
    return X86_TEST.replace("@ARRAYS@", "\n".join(arrays)).replace("@BODY@", "\n".join(body))


@pytest.mark.skipif(not has_avx2(), reason="the x86 int8 path needs an AVX2 host")
@pytest.mark.parametrize("w_dt", ["s8", "u8"])
def test_four_channel_x86_kernel_sums_are_exact(w_dt):
    """mtvm_mm2x4_x86: two channel pairs (the second 2 * kk bytes after the first), two
    pixels, the tail included; acc is (p0.o, p0.o1, p1.o, p1.o1) for each pair."""
    rng = np.random.default_rng(13)
    wt = DTYPES[w_dt][0]
    arrays, calls, expected = [], [], []
    for i, (nb, tl) in enumerate((nb, tl) for nb in range(10) for tl in range(4)):
        taps, rows, packed, col, acc = case(rng, w_dt, 4, nb, tl)
        kk = 4 * nb + tl
        arrays += [c_array(f"c{i}", col, "int16_t"), c_array(f"w{i}", packed, wt)]
        calls += [f"    {{ int32_t a[8] = {{ {', '.join(str(v) for v in acc)} }};",
                  f"      mtvm_mm2x4_x86_{w_dt}(c{i}, w{i}, w{i} + {2 * kk}, {nb}, {tl}, a);",
                  "      for (int j = 0; j < 8; ++j) printf(\"%ld \", (long)a[j]);",
                  "      printf(\"\\n\"); }"]
        sums = taps @ rows.T                               # [pixel, channel]
        order = [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3), (1, 2), (1, 3)]
        expected.append(acc + np.array([sums[p, o] for p, o in order]))
    got = _lines(run_c_test(_x86_program(arrays, calls), name=f"mm2x4_x86_{w_dt}",
                            library=["mtvm_mm_s16.h"], march="native"))
    _check(got, expected)


PAIR4_TEST = r"""
#include <stdio.h>
#include "mtvm_mm_s16.h"
@ARRAYS@
int main(void)
{
    int16_t t[8];
@CALLS@
    return 0;
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("x_dt", ["s8", "u8"])
def test_pointwise_pair_gather(x_dt, target):
    """mtvm_im2col_pair4_s16: four channel planes hw apart, two neighbouring pixels ->
    one column block (pixel 0's four taps, then pixel 1's)."""
    rng = np.random.default_rng(14)
    xt, lo, hi = DTYPES[x_dt]
    arrays, calls, expected = [], [], []
    for i, hw in enumerate((2, 3, 16, 49)):
        x = rng.integers(lo, hi, 4 * hw)
        x[:2] = lo, hi - 1
        arrays.append(c_array(f"x{i}", x, xt))
        for q in range(0, hw - 1, max(1, hw // 4)):
            calls += [f"    mtvm_im2col_pair4_s16_{x_dt}(t, x{i} + {q}, {hw});",
                      "    for (int j = 0; j < 8; ++j) printf(\"%d \", (int)t[j]);",
                      "    printf(\"\\n\");"]
            planes = x.reshape(4, hw)
            expected.append(np.concatenate([planes[:, q], planes[:, q + 1]]))
    program = PAIR4_TEST.replace("@ARRAYS@", "\n".join(arrays)).replace("@CALLS@",
                                                                       "\n".join(calls))
    got = _lines(_run(program, f"pair4_{x_dt}", target, ["mtvm_mm_s16.h"]))
    _check(got, expected)


REQUANT_X86_BODY = r"""
    int32_t r[8];
    for (int i = 0; i < @N@; ++i) {
        mtvm_mm2x4_requantize_x86(r, acc + 8 * i, mtvm_mm2x4_lanes_x86(mult + 4 * i),
                                  _mm256_setzero_si256(), @M@, @ADD1@, -128, 127);
        for (int j = 0; j < 8; ++j) printf("%ld ", (long)r[j]);
        mtvm_mm2x4_requantize_x86(r, acc + 8 * i, mtvm_mm2x4_lanes_x86(mult + 4 * i),
                                  mtvm_mm2x4_lanes_x86(shift + 4 * i), 0, @ADD2@, 0, 255);
        for (int j = 0; j < 8; ++j) printf("%ld ", (long)r[j]);
        printf("\n");
    }
"""


@pytest.mark.skipif(not has_avx2(), reason="the x86 int8 path needs an AVX2 host")
def test_four_channel_x86_requantization():
    """mtvm_mm2x4_requantize_x86 against the integer formula of QConv's fast path
    (conv.fast_requant): one shift for all channels, and one per channel."""
    rng = np.random.default_rng(15)
    n, m, y_zp = 50, 9, -7
    acc = rng.integers(-(1 << 31), (1 << 31) - 1, 8 * n)
    acc[:80] = rng.integers(-100000, 100000, 80)
    mult = rng.integers(1 << 30, (1 << 31) - 1, 4 * n)
    shift = rng.integers(-26, -1, 4 * n)                  # m - 1 = -2 - shift in [0, 24]
    add1 = (1 << (m - 1)) + y_zp * (1 << m)
    add2 = 2 * y_zp + 1
    arrays = [c_array("acc", acc, "int32_t"), c_array("mult", mult, "int32_t"),
              c_array("shift", shift, "int32_t")]
    body = (REQUANT_X86_BODY.replace("@N@", str(n)).replace("@M@", str(m))
            .replace("@ADD1@", str(add1)).replace("@ADD2@", str(add2)))
    program = _x86_program(arrays, [body])
    got = np.array(_lines(run_c_test(program, name="requant_x86", library=["mtvm_mm_s16.h"],
                                     march="native")))
    lane = np.array([0, 1, 0, 1, 2, 3, 2, 3])
    ch = (np.arange(n)[:, None] * 4 + lane[None, :]).ravel()   # each sum's channel
    hi = (acc * mult[ch]) >> 32
    one = np.clip((hi + add1) >> m, -128, 127)
    per = np.clip(((hi >> (-2 - shift[ch])) + add2) >> 1, 0, 255)
    np.testing.assert_array_equal(got[:, :8].ravel(), one)
    np.testing.assert_array_equal(got[:, 8:].ravel(), per)
