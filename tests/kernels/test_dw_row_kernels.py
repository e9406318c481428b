"""C unit test of c_runtime/kernels/generic/mtvm_dw_row_s8.h, the row micro-kernels of
the int8 3-wide depthwise windows (mtvm_dw3x<npix>s<stride><b|t>_<s8|u8>, and on DSP
cores mtvm_dw_unpack_*, mtvm_dw_mac2* and mtvm_dw_mac1*), against their NumPy definition
a[i] += p[s i] w0 + p[s i + 1] w1 + p[s i + 2] w2: on the host (ASan/UBSan, the plain
sums), the emulated Cortex-M4F (SMLAD / SMLAxy) and Cortex-M3 (plain)."""
from __future__ import annotations

import numpy as np
import pytest

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
FORMS = [(s, n, w) for s in (1, 2) for n in (4, 2) for w in "bt"]
CASES = 40

ROW_TEST = r"""
#include <stdio.h>
#include "mtvm_dw_row_s8.h"
@ARRAYS@
#define PAIR(lo, hi) ((int32_t)(((uint32_t)(lo) & 0xFFFFu) | ((uint32_t)(hi) << 16)))
#define ROW(S, N, W, D, T) do { \
        int32_t a[4] = { acc[c], acc[c] + 1, acc[c] + 2, acc[c] + 3 }; \
        const int32_t wm = #W[0] == 'b' ? PAIR(w1, junk[c]) : PAIR(junk[c], w1); \
        const T* p = (const T*)(D##_x + 12 * c); \
        if (N == 4) { \
            mtvm_dw3x4s##S##W##_##D(p, w0, w1, w2, w02, wm, a, a + 1, a + 2, a + 3); \
        } else { \
            mtvm_dw3x2s##S##W##_##D(p, w0, w1, w2, w02, wm, a, a + 1); \
        } \
        printf(" %ld %ld %ld %ld", (long)a[0], (long)a[1], (long)a[2], (long)a[3]); \
    } while (0)
#define FORMS(D, T) ROW(1, 4, b, D, T); ROW(1, 4, t, D, T); ROW(1, 2, b, D, T); \
    ROW(1, 2, t, D, T); ROW(2, 4, b, D, T); ROW(2, 4, t, D, T); ROW(2, 2, b, D, T); \
    ROW(2, 2, t, D, T)
int main(void)
{
    for (int c = 0; c < @N@; ++c) {
        const int32_t w0 = w[3 * c], w1 = w[3 * c + 1], w2 = w[3 * c + 2];
        const int32_t w02 = PAIR(w0, w2);
        FORMS(s8, int8_t);
        FORMS(u8, uint8_t);
#if defined(__ARM_FEATURE_DSP)
        {   /* unpack + mac2 = the stride-1 two-pixel row */
            int32_t lo, hi, a[2] = { acc[c], acc[c] + 1 }, b[2] = { acc[c], acc[c] + 1 };
            mtvm_dw_unpack_s8((const int8_t*)(s8_x + 12 * c), &lo, &hi);
            mtvm_dw_mac2b(lo, hi, w02, PAIR(w1, junk[c]), a, a + 1);
            mtvm_dw_mac2t(lo, hi, w02, PAIR(junk[c], w1), b, b + 1);
            printf(" %ld %ld %ld %ld", (long)a[0], (long)a[1], (long)b[0], (long)b[1]);
            mtvm_dw_unpack_u8((const uint8_t*)(u8_x + 12 * c), &lo, &hi);
            mtvm_dw_mac2b(lo, hi, w02, PAIR(w1, junk[c]), a, a + 1);
            printf(" %ld %ld", (long)a[0], (long)a[1]);
            /* mac1: the pair's second pixel alone (p1 w0 + p2 w1 + p3 w2) */
            int32_t e = acc[c], f = acc[c];
            mtvm_dw_unpack_s8((const int8_t*)(s8_x + 12 * c), &lo, &hi);
            mtvm_dw_mac1b(lo, hi, w02, PAIR(w1, junk[c]), &e);
            mtvm_dw_mac1t(lo, hi, w02, PAIR(junk[c], w1), &f);
            printf(" %ld %ld", (long)e, (long)f);
        }
#endif
        printf("\n");
    }
    return 0;
}
"""


def _row(p, w, acc, s, n):
    out = acc + np.arange(4, dtype=np.int64)
    for i in range(n):
        out[i] += sum(int(p[s * i + j]) * int(w[j]) for j in range(3))
    return list(out)


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_depthwise_rows_are_bit_exact(target):
    rng = np.random.default_rng(12)
    xs8 = rng.integers(-128, 128, (CASES, 12))
    xu8 = rng.integers(0, 256, (CASES, 12))
    w = rng.integers(-128, 128, (CASES, 3))
    acc = rng.integers(-(1 << 20), 1 << 20, CASES)
    junk = rng.integers(-(1 << 15), 1 << 15, CASES)
    arrays = "\n".join([c_array("s8_x", xs8.ravel(), "int8_t"),
                        c_array("u8_x", xu8.ravel(), "uint8_t"),
                        c_array("w", w.ravel(), "int32_t"), c_array("acc", acc, "int32_t"),
                        c_array("junk", junk, "int32_t")])
    program = ROW_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(CASES))
    out = run_c_test(program, name="dw_rows", target=target, library=["mtvm_dw_row_s8.h"])
    lines = [line.split() for line in out.split("\n") if line.strip()]
    assert len(lines) == CASES
    for c, got in enumerate(lines):
        want = []
        for x in (xs8[c], xu8[c]):
            for s, n, _ in FORMS:
                want += _row(x, w[c], acc[c], s, n)
        if len(got) > len(want):   # the DSP unpack + mac2 forms
            two = _row(xs8[c], w[c], acc[c], 1, 2)[:2]
            u = _row(xu8[c], w[c], 0, 1, 2)          # [c0, 1 + c1]
            want += two + two + [two[0] + u[0], two[1] + u[1] - 1]
            want += [two[1] - 1] * 2   # mac1 from the same unpack: the second pixel
        assert [int(v) for v in got] == want, c
