"""C unit tests of the Arm DSP int8 matrix-vector kernel of batch-1 QMatMul
(c_runtime/kernels/arm_dsp/mtvm_gemv_s8_dsp.h: mtvm_packv_*_dsp + mtvm_gemv4_<x>_<w>_dsp)
against the exact int32 sums: every length mod 8 (whole eights, one to four eights a step,
the tail's group of four and bytes), the block of four rows laid out by the schedule
(gemv_s8.interleaved_rows), int8 and uint8 on either side, extreme bytes. On the host (ASan/UBSan: the portable sums), the
emulated Cortex-M4F (SXTB16/SMLAD) and Cortex-M3 (portable)."""
from __future__ import annotations

import numpy as np
import pytest

from mtvm.schedules.arm_dsp.gemv_s8 import interleaved_rows

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
LENGTHS = (1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 32, 33, 40, 50, 64, 71, 77, 80)

GEMV_TEST = r"""
#include <stdio.h>
#include "mtvm_gemv_s8_dsp.h"
@ARRAYS@
static uint32_t xp[MTVM_PACKV_WORDS(1, 80)];
#define CASE(XT, WT, X, W) do { \
        int32_t s0 = acc[4 * c], s1 = acc[4 * c + 1], s2 = acc[4 * c + 2], s3 = acc[4 * c + 3]; \
        mtvm_packv_##XT##_dsp((const XT##_t_*)(X), n[c], 1, 1, 1, n[c], xp); \
        mtvm_gemv4_##XT##_##WT##_dsp((const WT##_t_*)(W), xp, (const XT##_t_*)(X), n[c], s0, \
                                     s1, s2, s3); \
        printf(" %ld %ld %ld %ld", (long)s0, (long)s1, (long)s2, (long)s3); \
    } while (0)
typedef int8_t s8_t_;
typedef uint8_t u8_t_;
int main(void)
{
    for (int c = 0; c < @N@; ++c) {
        CASE(s8, s8, xs8 + 80 * c, ws8 + 320 * c);
        CASE(s8, u8, xs8 + 80 * c, wu8 + 320 * c);
        CASE(u8, s8, xu8 + 80 * c, ws8 + 320 * c);
        CASE(u8, u8, xu8 + 80 * c, wu8 + 320 * c);
        printf("\n");
    }
    return 0;
}
"""


def laid_out(w: np.ndarray, n: int) -> np.ndarray:
    """Each case's four rows of n bytes (w[c, :4 n]) in the kernel's layout, the rest as is
    (the words past a block, which the kernel must not read, stay random)."""
    out = w.copy()
    for c in range(len(n)):
        out[c, :4 * n[c]] = interleaved_rows(w[c, :4 * n[c]].reshape(4, n[c])).ravel()
    return out


def test_interleaved_rows_layout():
    """Block of four rows: per eight columns, rows 0..3; then the tail row after row; the
    rows past the blocks unchanged."""
    w = np.arange(6 * 11).reshape(6, 11)
    got = interleaved_rows(w).ravel()
    want = [w[r, c] for r in range(4) for c in range(8)] + \
        [w[r, c] for r in range(4) for c in range(8, 11)] + list(w[4:].ravel())
    assert got.tolist() == want


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_gemv4_sums_are_exact(target):
    rng = np.random.default_rng(15)
    n = np.array(LENGTHS)
    nc = len(n)
    ws8 = rng.integers(-128, 128, (nc, 320))
    wu8 = rng.integers(0, 256, (nc, 320))
    xs8 = rng.integers(-128, 128, (nc, 80))
    xu8 = rng.integers(0, 256, (nc, 80))
    ws8[:, :4], wu8[:, :4], xs8[:, :4], xu8[:, :4] = -128, 255, -128, 255     # extremes
    acc = rng.integers(-(1 << 24), 1 << 24, (nc, 4))
    arrays = "\n".join([c_array("ws8", laid_out(ws8, n).ravel(), "int8_t"),
                        c_array("wu8", laid_out(wu8, n).ravel(), "uint8_t"),
                        c_array("xs8", xs8.ravel(), "int8_t"),
                        c_array("xu8", xu8.ravel(), "uint8_t"),
                        c_array("acc", acc.ravel(), "int32_t"),
                        c_array("n", n, "int32_t")])
    out = run_c_test(GEMV_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(nc)),
                     name="gemv_s8_dsp", target=target,
                     library=("mtvm_mm_s8_dsp.h", "mtvm_gemv_s8_dsp.h"))
    lines = out.strip().splitlines()
    assert len(lines) == nc
    for c, (line, kk) in enumerate(zip(lines, n)):
        got = [int(t) for t in line.split()]
        want = []
        for x in (xs8, xu8):
            for w in (ws8, wu8):
                for r in range(4):
                    row = w[c, r * kk:(r + 1) * kk].astype(np.int64)
                    want.append(int(acc[c, r]) + int((x[c, :kk].astype(np.int64) * row).sum()))
        assert got == want, f"case {c}: n={kk}"
