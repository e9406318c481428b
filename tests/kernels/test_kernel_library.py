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


# -- the float micro-kernels (mtvm_gemm_f32.h, x86/mtvm_conv_f32_x86.h) --------------------
# Small integer values: every sum is exact in float, whatever the order of the FMAs. Heights
# 3, 8, 13 (passes of 4 rows and a partial one), the tap-offset form, full and partial
# tiles; the AVX-512 band and direct kernels where the host has AVX-512 ("native"); the
# Thumb-2 VFP 4 x 4 blocks on the Cortex-M4F.

GEMM_TEST = r"""
#include <stdio.h>
#if defined(__arm__)
#include "mtvm_gemm_f32_vfp.h"   /* the 4 x 4 blocks in Thumb-2 VFP assembly */
#endif
#include "mtvm_gemm_f32.h"
MTVM_DEFINE_F32_GEMM(gemm3, 3)
MTVM_DEFINE_F32_GEMM(gemm8, 8)
MTVM_DEFINE_F32_GEMM(gemm13, 13)
MTVM_DEFINE_F32_GEMM_OFF(gemm5_off, 5)
MTVM_DEFINE_F32_BAND(band3, 3)
MTVM_DEFINE_F32_DIRECT(direct2, 2)
@ARRAYS@
static float tile[16 * 32];
static void show(const char* what, int rows, int n, int ld)
{
    printf("%s %d", what, n);
    for (int r = 0; r < rows; ++r)
        for (int q = 0; q < n; ++q) printf(" %.0f", (double)tile[r * ld + q]);
    printf("\n");
}
int main(void)
{
    const int ns[3] = { MTVM_F32_NR, MTVM_F32_NR - 1, 1 };
    printf("NR %d\n", MTVM_F32_NR);
    for (int i = 0; i < 3; ++i) {
        const int n = ns[i];
        gemm3(@TAPS@, a, b, @LDB@, n, tile); show("gemm3", 3, n, MTVM_F32_NR);
        gemm8(@TAPS@, a, b, @LDB@, n, tile); show("gemm8", 8, n, MTVM_F32_NR);
        gemm13(@TAPS@, a, b, @LDB@, n, tile); show("gemm13", 13, n, MTVM_F32_NR);
        gemm5_off(@TAPS@, a, b, off, n, tile); show("gemm5_off", 5, n, MTVM_F32_NR);
    }
#if MTVM_F32_NR == 16
    const int bn[3] = { 32, 20, 7 };
    for (int i = 0; i < 3; ++i) {
        band3(2, 40, 3, off, a, b, bn[i], tile); show("band3", 3, bn[i], 32);
    }
    /* a 6 x 7 plane, 3 x 3 taps, padding 1: positions 0..31, then 32..41 */
    direct2(2, 42, 7, 3, 3, 1, 1, 1, 1, a, b, 0, 32, tile); show("direct2_0", 2, 32, 32);
    direct2(2, 42, 7, 3, 3, 1, 1, 1, 1, a, b, 32, 10, tile); show("direct2_32", 2, 10, 32);
#endif
    return 0;
}
"""


def _float_kernels_expected(a, b, off, taps, ldb, nr):
    """{line head: values} of GEMM_TEST, from NumPy."""
    out = {}
    for n in (nr, nr - 1, 1):
        for name, mr, rows_of in (
                ("gemm3", 3, None), ("gemm8", 8, None), ("gemm13", 13, None),
                ("gemm5_off", 5, off)):
            at = a[:taps * mr].reshape(taps, mr)
            bt = np.stack([b[(t * ldb if rows_of is None else rows_of[t]):][:n]
                           for t in range(taps)])
            out[f"{name} {n}"] = (at.T @ bt).ravel()
    if nr == 16:
        for n in (32, 20, 7):
            tile = np.zeros((3, n))
            for c in range(2):
                for j in range(3):
                    tile += np.outer(a[(c * 3 + j) * 3:][:3], b[c * 40 + off[j]:][:n])
            out[f"band3 {n}"] = tile.ravel()
        h, w, mr = 6, 7, 2
        for p0, n in ((0, 32), (32, 10)):
            tile = np.zeros((mr, n))
            for q in range(n):
                oh, ow = divmod(p0 + q, w)
                for c in range(2):
                    for kh in range(3):
                        for kw in range(3):
                            iy, ix = oh + kh - 1, ow + kw - 1
                            if 0 <= iy < h and 0 <= ix < w:
                                tile[:, q] += (a[((c * 3 + kh) * 3 + kw) * mr:][:mr]
                                               * b[c * h * w + iy * w + ix])
            out[f"direct2_{p0} {n}"] = tile.ravel()
    return out


@pytest.mark.parametrize("target", ["host", "native"] + BOARDS)
def test_float_micro_kernels(target):
    rng = np.random.default_rng(2)
    taps, ldb = 7, 21
    a = rng.integers(-4, 5, 16 * 32).astype(np.float32)
    b = rng.integers(-4, 5, 160).astype(np.float32)
    off = np.array([0, 1, 5, 17, 30, 33, 40])
    arrays = "\n".join([c_array("a", a, "float"), c_array("b", b, "float"),
                        c_array("off", off, "int32_t")])
    program = (GEMM_TEST.replace("@ARRAYS@", arrays).replace("@TAPS@", str(taps))
               .replace("@LDB@", str(ldb)))
    out = run_c_test(program, name="gemm_f32", target="host" if target == "native" else target,
                     library=["mtvm_gemm_f32.h", "mtvm_gemm_f32_vfp.h"],
                     march="native" if target == "native" else None)
    lines = [line.split() for line in out.split("\n") if line]
    nr = int(lines[0][1])
    got = {f"{w[0]} {w[1]}": np.array([float(v) for v in w[2:]]) for w in lines[1:]}
    want = _float_kernels_expected(a, b, off, taps, ldb, nr)
    assert sorted(got) == sorted(want)
    for key, values in want.items():
        np.testing.assert_array_equal(got[key], values, err_msg=key)


COPY_TEST = r"""
#include <stdio.h>
#include "mtvm_copy.h"
static uint32_t src_w[80], dst_w[84];
int main(void)
{
    unsigned char* src = (unsigned char*)src_w;
    unsigned char* dst = (unsigned char*)dst_w;
    for (int i = 0; i < 320; ++i) src[i] = (unsigned char)(i * 37 + 11);
    /* every length 0..300 (the 16-, 8- and 4-word blocks, single words and a byte tail),
     * word-aligned and not (the memcpy path); the bytes around the copy stay untouched */
    for (int off = 0; off < 2; ++off) {
        for (int n = 0; n <= 300; ++n) {
            for (int i = 0; i < 336; ++i) dst[i] = 0xA5;
            mtvm_copy(dst + 4 + off, src + off, (size_t)n);
            int bad = 0;
            for (int i = 0; i < 336; ++i) {
                const int j = i - 4 - off;
                const unsigned char want = (j >= 0 && j < n) ? src[j + off] : 0xA5;
                bad |= dst[i] != want;
            }
            if (bad) printf("bad %d %d\n", off, n);
        }
    }
    printf("done\n");
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_copy_moves_every_length_exactly(target):
    """mtvm_copy.h: the VFP block copy on the M4F (VLDMIA/VSTMIA), memcpy on the M3, the
    host and unaligned pointers: each byte copied, none beyond."""
    out = run_c_test(COPY_TEST, name="copy", target=target, library=("mtvm_copy.h",))
    assert out.split() == ["done"]
