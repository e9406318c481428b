"""C unit test of c_runtime/kernels/arm_dsp/mtvm_gemv_f32_vfp16.h (the recurrent ops'
sixteen-column VFP GEMV on the M4F): bit for bit the results of mtvm_f32_gemv_blocked (the
same fused multiply-adds in the same order), for column counts that are whole blocks of
sixteen, blocks and a tail, and a tail only, and for 1, 3, 4, 5, 64 and 70 steps (the four-tap loop and its remainder); on the host (the
portable path: the same function), the emulated Cortex-M4F (the assembly) and Cortex-M3
(soft float: the portable path). And mtvm_f32_gemv16_init_vfp, the same sums started from
given values (in place too), against the sums in double."""
from __future__ import annotations

import numpy as np
import pytest

from .kernel_harness import run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]

TEST = r"""
#include <stdio.h>
#include <string.h>
#include "mtvm_gemv_f32_vfp16.h"
@ARRAYS@
static float got[200], want[200];
int main(void)
{
    static const int taps[] = { 1, 3, 4, 5, 64, 70 };
    static const int cols[] = { 16, 24, 40, 192, 7 };
    int bad = 0, runs = 0;
    for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 5; ++j) {
            const int n = cols[j], ldb = n + 3;   /* rows longer than n: the stride */
            mtvm_f32_gemv16_vfp(taps[i], x, w, ldb, n, got);
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
def test_gemv16_is_bit_exact_with_the_blocked_gemv(target):
    rng = np.random.default_rng(16)
    x = rng.standard_normal(70).astype(np.float32)
    w = rng.standard_normal(70 * 195).astype(np.float32)
    arrays = "\n".join([
        f"static const float x[70] = {{{', '.join(repr(float(v)) + 'f' for v in x)}}};",
        f"static const float w[{w.size}] = {{{', '.join(repr(float(v)) + 'f' for v in w)}}};"])
    out = run_c_test(TEST.replace("@ARRAYS@", arrays), name="gemv16", target=target,
                     library=("mtvm_gemv_f32_vfp16.h",))
    runs, bad, _ = (int(t) for t in out.split())
    assert runs == 30 and bad == 0


INIT_TEST = r"""
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "mtvm_gemv_f32_vfp16.h"
@ARRAYS@
static float got[200];
int main(void)
{
    static const int taps[] = { 1, 3, 4, 5, 64, 70 };
    static const int cols[] = { 16, 24, 40, 192, 7 };
    double worst = 0.0;
    int runs = 0;
    for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 5; ++j) {
            for (int in_place = 0; in_place < 2; ++in_place) {
                const int n = cols[j], ldb = n + 3;
                if (in_place) {
                    memcpy(got, init, sizeof(float) * (size_t)n);
                    mtvm_f32_gemv16_init_vfp(taps[i], x, w, ldb, n, got, got);
                } else {
                    mtvm_f32_gemv16_init_vfp(taps[i], x, w, ldb, n, init, got);
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
def test_gemv16_from_init_adds_to_its_start_values_also_in_place(target):
    """mtvm_f32_gemv16_init_vfp (an LSTM's gates: bias + W x, then + R h into the same
    row): init plus the products, within float rounding of the sum in double, with init
    a separate array and init the output itself."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal(70).astype(np.float32)
    w = rng.standard_normal(70 * 195).astype(np.float32)
    init = rng.standard_normal(200).astype(np.float32)
    arrays = "\n".join([
        f"static const float x[70] = {{{', '.join(repr(float(v)) + 'f' for v in x)}}};",
        f"static const float w[{w.size}] = {{{', '.join(repr(float(v)) + 'f' for v in w)}}};",
        f"static const float init[200] = {{{', '.join(repr(float(v)) + 'f' for v in init)}}};"])
    out = run_c_test(INIT_TEST.replace("@ARRAYS@", arrays), name="gemv16_init", target=target,
                     library=("mtvm_gemv_f32_vfp16.h",))
    runs, worst = (int(t) for t in out.split())
    assert runs == 60 and worst <= 200   # 2e-7 of the terms' magnitude: a few ulps
