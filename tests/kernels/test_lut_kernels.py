"""C unit tests of the four-bytes-a-step table kernels (c_runtime/kernels/arm_dsp/
mtvm_lut_8_dsp.h) against their definition y[i] = table[x[i] - min], with 8-bit and 32-bit
entries: int8 and uint8 inputs, every byte value, lengths with and without a tail, in place. On the host (ASan/UBSan:
portable C), the emulated Cortex-M4F (the SXTB/UXTB-with-rotate indices) and Cortex-M3."""
from __future__ import annotations

import numpy as np
import pytest

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
N = 263                   # every byte value and a tail of 3

LUT_TEST = r"""
#include <stdio.h>
#include <string.h>
#include "mtvm_lut_8_dsp.h"
@ARRAYS@
static int8_t y[@N@];
static int32_t y32[@N@];
int main(void)
{
    const int32_t lens[4] = { @N@, 4, 1, 0 };
    for (int c = 0; c < 4; ++c) {
        mtvm_lut_s8_dsp(xs, y, lens[c], table);
        for (int i = 0; i < lens[c]; ++i) printf(" %d", (int)y[i]);
        printf("\n");
        mtvm_lut_u8_dsp(xu, y, lens[c], table);
        for (int i = 0; i < lens[c]; ++i) printf(" %d", (int)y[i]);
        printf("\n");
    }
    static int8_t xm[@N@];
    memcpy(xm, xs, sizeof xm);
    mtvm_lut_s8_dsp(xm, xm, @N@, table);     /* in place */
    for (int i = 0; i < @N@; ++i) printf(" %d", (int)xm[i]);
    printf("\n");
    for (int c = 0; c < 4; ++c) {            /* 32-bit entries */
        mtvm_lut32_s8_dsp(xs, y32, lens[c], table32);
        for (int i = 0; i < lens[c]; ++i) printf(" %ld", (long)y32[i]);
        printf("\n");
        mtvm_lut32_u8_dsp(xu, y32, lens[c], table32);
        for (int i = 0; i < lens[c]; ++i) printf(" %ld", (long)y32[i]);
        printf("\n");
    }
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_lut_matches_its_definition(target):
    rng = np.random.default_rng(21)
    table = rng.integers(-128, 128, 256)
    xu = np.concatenate([rng.permutation(256), rng.integers(0, 256, N - 256)])
    xs = xu - 128
    table32 = rng.integers(-(1 << 31), 1 << 31, 256)
    arrays = "\n".join([c_array("table", table, "int8_t"), c_array("xu", xu, "uint8_t"),
                        c_array("xs", xs, "int8_t"), c_array("table32", table32, "int32_t")])
    src = LUT_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(N))
    out = run_c_test(src, name="lut_8_dsp", target=target, library=("mtvm_lut_8_dsp.h",))
    lines = out.splitlines()
    assert len(lines) == 17
    for c, n in enumerate([N, 4, 1, 0]):
        assert [int(t) for t in lines[2 * c].split()] == table[xs[:n] + 128].tolist()
        assert [int(t) for t in lines[2 * c + 1].split()] == table[xu[:n]].tolist()
    assert [int(t) for t in lines[8].split()] == table[xs + 128].tolist()
    for c, n in enumerate([N, 4, 1, 0]):
        assert [int(t) for t in lines[9 + 2 * c].split()] == table32[xs[:n] + 128].tolist()
        assert [int(t) for t in lines[10 + 2 * c].split()] == table32[xu[:n]].tolist()
