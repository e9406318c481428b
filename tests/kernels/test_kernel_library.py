"""C unit tests of the kernel library: each micro-kernel against its NumPy
bit-exact model, on the host (ASan/UBSan; the x86 SIMD path with
-march=native) and on the emulated Cortex-M4F (DSP + inline assembly) and
Cortex-M3 (portable path) boards."""
from __future__ import annotations

import numpy as np
import pytest

from mtvm.ops.quantized.common import quantize_multiplier, requantize

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]


def requantize_vectors(n=400, seed=0):
    rng = np.random.default_rng(seed)
    acc = rng.integers(-(1 << 31), (1 << 31) - 1, n, dtype=np.int64)
    acc[:40] = rng.integers(-3000, 3000, 40)
    acc[40:44] = [-(1 << 31), (1 << 31) - 1, 0, -1]
    real = np.exp(rng.uniform(np.log(1e-6), np.log(2.0), n))
    mult, shift = quantize_multiplier(real)
    # exact ties (acc * mult / 2^(31 - shift) ends in .5), both code paths:
    mult[44:60] = 1 << 30
    shift[44:52], acc[44:52] = -4, np.arange(8) * 32 + 16 - 128      # 32-bit path
    shift[52:60], acc[52:60] = 0, np.arange(8) * 2 + 1 - 8           # 64-bit path
    mult[60:68] = 1 << 30
    shift[60:68], acc[60:68] = -1, np.arange(8) * 4 + 2 - 16          # n = 32 exactly
    return acc, mult.astype(np.int64), shift.astype(np.int64)


REQUANTIZE_TEST = r"""
#include <stdio.h>
#include "mtvm_requantize.h"
#include "mtvm_requantize_nt.h"
@ARRAYS@
int main(void)
{
    for (int i = 0; i < @N@; ++i) {
        printf("%ld", (long)mtvm_requantize(acc[i], mult[i], shift[i]));
        printf(" %ld\n", (long)(shift[i] <= -2 ? mtvm_requantize_nt(acc[i], mult[i], shift[i]) : 0));
    }
    return 0;
}
"""


def _requantize_program():
    acc, mult, shift = requantize_vectors()
    arrays = "\n".join([c_array("acc", acc, "int32_t"), c_array("mult", mult, "int32_t"),
                        c_array("shift", shift, "int32_t")])
    return (REQUANTIZE_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(len(acc))),
            acc, mult, shift)


def _check_requantize(out, acc, mult, shift):
    got = np.array([[int(v) for v in line.split()] for line in out.split("\n") if line])
    np.testing.assert_array_equal(got[:, 0], requantize(acc, mult, shift))
    # mtvm_requantize_nt: half up on the high word, the same wherever there is no tie
    nt = shift <= -2
    hi = (acc * mult) >> 32
    m = -1 - shift
    expect_nt = (hi + (np.int64(1) << np.maximum(m - 1, 0))) >> np.maximum(m, 0)
    np.testing.assert_array_equal(got[nt, 1], expect_nt[nt])


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_requantize_is_bit_exact(target):
    program, acc, mult, shift = _requantize_program()
    out = run_c_test(program, name="requantize", target=target,
                     library=["mtvm_requantize.h", "mtvm_requantize_nt.h"])
    _check_requantize(out, acc, mult, shift)


DSP_TEST = r"""
#include <stdio.h>
#include "mtvm_ror8.h"
#include "mtvm_depthwise_s8.h"
@ARRAYS@
int main(void)
{
    for (int i = 0; i < @N@; ++i) {
        int32_t s = 0, u = 0;
#if defined(__ARM_FEATURE_DSP)
        s = mtvm_sxtb16_ror8(x[i]);
        u = mtvm_uxtb16_ror8(x[i]);
#endif
        printf("%lu %ld %ld %ld\n", (unsigned long)mtvm_ror8((uint32_t)x[i]), (long)s, (long)u,
               (long)mtvm_dw_requantize(acc[i], mult[i], rnd[i], sh[i]));
    }
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_byte_unpacking_and_depthwise_requantization(target):
    rng = np.random.default_rng(1)
    n = 200
    x = rng.integers(-(1 << 31), (1 << 31) - 1, n, dtype=np.int64)
    acc = rng.integers(-(1 << 24), 1 << 24, n)
    mult = rng.integers(1 << 30, (1 << 31) - 1, n)
    sh = rng.integers(0, 8, n)
    rnd = rng.integers(-1000, 1000, n)
    arrays = "\n".join([c_array("x", x, "int32_t"), c_array("acc", acc, "int32_t"),
                        c_array("mult", mult, "int32_t"), c_array("rnd", rnd, "int32_t"),
                        c_array("sh", sh, "int32_t")])
    out = run_c_test(DSP_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(n)),
                     name="dsp_unpack", target=target,
                     library=["mtvm_ror8.h", "mtvm_depthwise_s8.h"])
    got = np.array([[int(v) for v in line.split()] for line in out.split("\n") if line])
    ux = x.astype(np.uint64) & 0xFFFFFFFF
    ror = ((ux >> 8) | (ux << 24)) & 0xFFFFFFFF
    np.testing.assert_array_equal(got[:, 0], ror.astype(np.int64))
    np.testing.assert_array_equal(got[:, 3], (((acc * mult) >> 32) + rnd) >> sh)
    if target == "mps2-an386":   # SXTB16/UXTB16 of bytes 1 and 3 (after ROR #8)
        b1 = (ror & 0xFF).astype(np.int64)
        b3 = ((ror >> 16) & 0xFF).astype(np.int64)
        sb = lambda b: np.where(b > 127, b - 256, b)  # noqa: E731
        s = (sb(b1) & 0xFFFF) | ((sb(b3) & 0xFFFF) << 16)
        s = np.where(s >= 1 << 31, s - (1 << 32), s)
        np.testing.assert_array_equal(got[:, 1], s)
        np.testing.assert_array_equal(got[:, 2], b1 | (b3 << 16))


def test_a_failing_program_fails_the_test():
    with pytest.raises(pytest.fail.Exception, match="exited 3"):
        run_c_test("int main(void) { return 3; }", name="fails")
    with pytest.raises(pytest.fail.Exception, match="AddressSanitizer|exited"):
        run_c_test("#include <stdlib.h>\nint main(int argc, char** argv) { (void)argv; "
                   "int* p = malloc(4); p[0] = 1; int v = p[argc + 3]; free(p); "
                   "return v == 12345; }", name="oob")
