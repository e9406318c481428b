"""C unit tests of the 2-wide stride-2 max pool (c_runtime/kernels/arm_dsp/
mtvm_maxpool_8_dsp.h) against its definition: int8 and uint8, one row (1-D, 1x2) and two
(2x2), every output count from 0 to 9 (the four-a-step words and the byte tail) and 37,
inputs holding both extremes and every byte value. On the host (ASan/UBSan: the portable
loop), the emulated Cortex-M4F (SSUB8/USUB8 and SEL) and the Cortex-M3 (portable)."""
from __future__ import annotations

import numpy as np
import pytest

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
COUNTS = list(range(10)) + [37]
W = 2 * 37 + 1            # an odd row: the last byte is never read

MAXPOOL_TEST = r"""
#include <stdio.h>
#include <stddef.h>
#include "mtvm_maxpool_8_dsp.h"
@ARRAYS@
static uint8_t y[40];
int main(void)
{
    const int32_t counts[@NC@] = { @COUNTS@ };
    for (int c = 0; c < @NC@; ++c) {
        for (int u = 0; u < 2; ++u) {
            for (int two = 0; two < 2; ++two) {
                const uint8_t* x = u ? xu : (const uint8_t*)xs;
                mtvm_maxpool2_8_dsp(x, two ? x + @W@ : NULL, y, counts[c], u);
                for (int i = 0; i < counts[c]; ++i) {
                    printf(" %d", u ? (int)y[i] : (int)(int8_t)y[i]);
                }
                printf("\n");
            }
        }
    }
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_maxpool2_matches_its_definition(target):
    rng = np.random.default_rng(8)
    xu = rng.integers(0, 256, 2 * W)
    xu[:4] = [0, 255, 255, 0]            # the extremes on either side of a pair
    xu[W:W + 4] = [255, 0, 0, 255]
    xu[10:10 + 2 * 30] = np.repeat(np.arange(0, 256, 256 // 30)[:30], 2)   # ties
    xs = xu - 128
    arrays = c_array("xu", xu, "uint8_t") + "\n" + c_array("xs", xs, "int8_t")
    src = (MAXPOOL_TEST.replace("@ARRAYS@", arrays).replace("@NC@", str(len(COUNTS)))
           .replace("@COUNTS@", ", ".join(map(str, COUNTS))).replace("@W@", str(W)))
    out = run_c_test(src, name="maxpool_8_dsp", target=target,
                     library=("mtvm_maxpool_8_dsp.h",))
    lines = out.split("\n")
    k = 0
    for n in COUNTS:
        for x in (xs, xu):
            for two in (False, True):
                rows = x.reshape(2, W)[:, :2 * n]
                pairs = rows.reshape(2, n, 2).max(axis=2)
                want = pairs.max(axis=0) if two else pairs[0]
                got = [int(t) for t in lines[k].split()]
                assert got == want.tolist(), (n, two, x is xu)
                k += 1
