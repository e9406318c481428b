"""C unit test of c_runtime/kernels/arm_dsp/mtvm_gemv_f32_vfp16.h (the recurrent ops'
sixteen-column VFP GEMV on the M4F): bit for bit the results of mtvm_f32_gemv_blocked (the
same fused multiply-adds in the same order), for column counts that are whole blocks of
sixteen, blocks and a tail, and a tail only, and for 1, 3, 4, 5, 64 and 70 steps (the four-tap loop and its remainder); on the host (the
portable path: the same function), the emulated Cortex-M4F (the assembly) and Cortex-M3
(soft float: the portable path)."""
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
