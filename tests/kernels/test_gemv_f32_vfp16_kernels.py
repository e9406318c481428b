"""C unit test of c_runtime/kernels/arm_dsp/mtvm_gemv_f32_vfp16.h (the recurrent ops'
sixteen-column VFP GEMV on the M4F, the weights packed: each block's taps in a row):
mtvm_f32_gemv16_packed_vfp bit for bit the results of mtvm_f32_gemv_blocked on the same
matrix unpacked (the same fused multiply-adds in the same order), for column counts that
are whole blocks of sixteen, blocks and a tail, and a tail only, and for the tap counts in
TAPS (the eight-tap loop, the step of four and the single taps after it, alone and
together); and mtvm_f32_gemv16_packed_init_vfp, the same sums started from given values
(in place too), against the sums in double. On the host (the portable path), the emulated
Cortex-M4F (the assembly) and Cortex-M3 (soft float: the portable path)."""
from __future__ import annotations

import numpy as np
import pytest

from .kernel_harness import run_c_test

# every path of the assembly: taps & 7 (single taps 1-3, the step of four, both) with no,
# one and several passes of the eight-tap loop
TAPS = (1, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 33, 64, 70)
COLS = (16, 24, 40, 192, 7)   # whole blocks, blocks and a tail, a tail only


def _c_setup(source: str, arrays: str) -> str:
    """The test source with the arrays and the tap and column lists filled in."""
    return (source.replace("@ARRAYS@", arrays)
            .replace("@TAPS@", ", ".join(map(str, TAPS))).replace("@NTAPS@", str(len(TAPS)))
            .replace("@COLS@", ", ".join(map(str, COLS))).replace("@NCOLS@", str(len(COLS))))


def _float_arrays(seed: int, init: bool = False) -> str:
    """C arrays x[70] and w[70 * 195] (and init[200]) of standard normal floats."""
    rng = np.random.default_rng(seed)
    names = [("x", 70), ("w", 70 * 195)] + ([("init", 200)] if init else [])
    return "\n".join(
        f"static const float {name}[{n}] = "
        f"{{{', '.join(repr(float(v)) + 'f' for v in rng.standard_normal(n).astype(np.float32))}}};"
        for name, n in names)


BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]

# w's [taps][n] (rows ldb long) in the packed layout: the whole blocks of sixteen columns
# [taps][16] each, then the columns past them [taps][n % 16]
PACK = r"""
static float packed[70 * 195];
static void pack(int taps, int n, int ldb)
{
    const int whole = n - n % 16;
    float* p = packed;
    for (int j0 = 0; j0 < whole; j0 += 16) {
        for (int t = 0; t < taps; ++t) {
            for (int q = j0; q < j0 + 16; ++q) {
                *p++ = w[t * ldb + q];
            }
        }
    }
    for (int t = 0; t < taps; ++t) {
        for (int q = whole; q < n; ++q) {
            *p++ = w[t * ldb + q];
        }
    }
}
"""

TEST = r"""
#include <stdio.h>
#include <string.h>
#include "mtvm_gemv_f32_vfp16.h"
@ARRAYS@
@PACK@
static float got[200], want[200];
int main(void)
{
    static const int taps[] = { @TAPS@ };
    static const int cols[] = { @COLS@ };
    int bad = 0, runs = 0;
    for (int i = 0; i < @NTAPS@; ++i) {
        for (int j = 0; j < @NCOLS@; ++j) {
            const int n = cols[j], ldb = n + 3;   /* rows longer than n: the stride */
            pack(taps[i], n, ldb);
            mtvm_f32_gemv16_packed_vfp(taps[i], x, packed, n, got);
            mtvm_f32_gemv_blocked(taps[i], x, w, ldb, n, want);
            bad += memcmp(got, want, sizeof(float) * (size_t)n) != 0;
            ++runs;
        }
    }
    printf("%d %d %ld\n", runs, bad, (long)(got[0] * 1000.0f));
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_packed_gemv16_is_bit_exact_with_the_blocked_gemv(target):
    arrays = _float_arrays(16)
    out = run_c_test(_c_setup(TEST, arrays).replace("@PACK@", PACK), name="gemv16",
                     target=target, library=("mtvm_gemv_f32_vfp16.h",))
    runs, bad, _ = (int(t) for t in out.split())
    assert runs == len(TAPS) * len(COLS) and bad == 0


INIT_TEST = r"""
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "mtvm_gemv_f32_vfp16.h"
@ARRAYS@
@PACK@
static float got[200];
int main(void)
{
    static const int taps[] = { @TAPS@ };
    static const int cols[] = { @COLS@ };
    double worst = 0.0;
    int runs = 0;
    for (int i = 0; i < @NTAPS@; ++i) {
        for (int j = 0; j < @NCOLS@; ++j) {
            const int n = cols[j], ldb = n + 3;
            pack(taps[i], n, ldb);
            for (int in_place = 0; in_place < 2; ++in_place) {
                if (in_place) {
                    memcpy(got, init, sizeof(float) * (size_t)n);
                    mtvm_f32_gemv16_packed_init_vfp(taps[i], x, packed, n, got, got);
                } else {
                    mtvm_f32_gemv16_packed_init_vfp(taps[i], x, packed, n, init, got);
                }
                for (int q = 0; q < n; ++q) {   /* against the sum in double */
                    double ref = init[q], mag = fabs(init[q]);
                    for (int t = 0; t < taps[i]; ++t) {
                        ref += (double)x[t] * w[t * ldb + q];
                        mag += fabs((double)x[t] * w[t * ldb + q]);
                    }
                    const double e = fabs(got[q] - ref) / mag;
                    worst = e > worst ? e : worst;
                }
                ++runs;
            }
        }
    }
    printf("%d %ld\n", runs, (long)(worst * 1e9));
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_packed_gemv16_from_init_adds_to_its_start_values_also_in_place(target):
    """mtvm_f32_gemv16_packed_init_vfp (an LSTM's gates: bias + W x, then + R h into the
    same row): init plus the products, within float rounding of the sum in double, with
    init a separate array and init the output itself."""
    arrays = _float_arrays(17, init=True)
    out = run_c_test(_c_setup(INIT_TEST, arrays).replace("@PACK@", PACK), name="gemv16_init",
                     target=target, library=("mtvm_gemv_f32_vfp16.h",))
    runs, worst = (int(t) for t in out.split())
    # 2e-7 of the terms' magnitude: a few ulps
    assert runs == 2 * len(TAPS) * len(COLS) and worst <= 200
