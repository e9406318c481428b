"""C unit tests of the dense kernels of the library: the int8/uint8 dot products
(mtvm_dot_8.h), the odd-channel im2col kernel (mtvm_mmx1_s16.h), the float GEMV
(mtvm_gemv_f32.h), the recurrent gates' tanh/sigmoid (mtvm_activation_f32.h) and
Softmax's exponential (mtvm_exp_f32.h), each against NumPy on the host (ASan/UBSan;
portable and -march=native) and on the emulated Cortex-M4F (DSP) and Cortex-M3
(portable) boards."""
from __future__ import annotations

import numpy as np
import pytest

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
TARGETS = ["host", "host-native"] + BOARDS


def _run(program, name, target, library):
    if target == "host-native":
        return run_c_test(program, name=name, library=library, march="native")
    return run_c_test(program, name=name, target=target, library=library)


def _floats(name, values) -> str:
    def lit(v):
        return ("HUGE_VALF" if v > 0 else "-HUGE_VALF") if np.isinf(v) else f"{v:.9e}f"
    body = ", ".join(lit(float(v)) for v in np.asarray(values, np.float32).ravel())
    return f"static const float {name}[{np.size(values)}] = {{{body}}};"


DOT_TEST = r"""
#include <stdio.h>
#include "mtvm_dot_8.h"
@ARRAYS@
int main(void)
{
    for (int n = 0; n <= @N@; ++n) {
        int32_t acc[4] = {1, -2, 3, -4};
        mtvm_dot4_@A@_@B@(a, b, @N@, n, acc);
        printf("%ld %ld %ld %ld %ld\n", (long)mtvm_dot_@A@_@B@(a, b, n), (long)acc[0],
               (long)acc[1], (long)acc[2], (long)acc[3]);
    }
    return 0;
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("a_dt,b_dt", [("s8", "s8"), ("s8", "u8"), ("u8", "s8"), ("u8", "u8")])
def test_dot_products_of_any_signedness_are_exact(a_dt, b_dt, target):
    rng = np.random.default_rng(1)
    n = 37                  # blocks of 16 (AVX2), of four (DSP) and every tail length
    types = {"s8": ("int8_t", -128, 128), "u8": ("uint8_t", 0, 256)}
    a = rng.integers(types[a_dt][1], types[a_dt][2], n)
    b = rng.integers(types[b_dt][1], types[b_dt][2], 4 * n)
    a[:2] = types[a_dt][1]                  # the extremes
    b[:2] = types[b_dt][2] - 1
    program = (DOT_TEST.replace("@ARRAYS@", c_array("a", a, types[a_dt][0]) + "\n" +
                                c_array("b", b, types[b_dt][0]))
               .replace("@N@", str(n)).replace("@A@", a_dt).replace("@B@", b_dt))
    out = _run(program, f"dot_{a_dt}_{b_dt}", target, ["mtvm_dot_8.h"])
    got = np.array([[int(v) for v in line.split()] for line in out.splitlines()])
    rows = b.reshape(4, n)
    for m in range(n + 1):
        expect = [int(a[:m] @ rows[0, :m])] + \
            [int(base + a[:m] @ rows[r, :m]) for r, base in enumerate((1, -2, 3, -4))]
        np.testing.assert_array_equal(got[m], expect, err_msg=f"n={m}")


MMX1_TEST = r"""
#include <stdio.h>
#include "mtvm_mmx1_s16.h"
@ARRAYS@
int main(void)
{
    for (int npx = 1; npx <= 2; ++npx) {
        int32_t acc[2] = {5, -7};
        mtvm_mmx1_s16_@W@(c, w, @NB@, @TL@, npx, acc);
        printf("%ld %ld\n", (long)acc[0], (long)acc[1]);
    }
    return 0;
}
"""


def _mmx1_expected(c, w, nb, tl, npx):
    """The layout's meaning: per block, pixel p's four taps c[8b + 4p + j] meet the
    pair-permuted weights w[4b + q(j)]; the tail taps sit in slots tail_slot."""
    perm = (0, 2, 1, 3)
    s = [5, -7]
    for p in range(npx):
        for blk in range(nb):
            s[p] += sum(int(c[8 * blk + 4 * p + j]) * int(w[4 * blk + perm[j]]) for j in range(4))
        t = c[8 * nb:]
        for j in range(tl):
            q = 3 - j if tl == 3 and j else j
            s[p] += int(t[(0 if p == 0 else (2 if tl <= 2 else 4)) + q]) * int(w[4 * nb + j])
    return s


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("w_dt", ["s8", "u8"])
@pytest.mark.parametrize("nb,tl", [(0, 1), (3, 0), (2, 1), (1, 2), (4, 3)])
def test_odd_channel_kernel_follows_the_column_layout(nb, tl, w_dt, target):
    rng = np.random.default_rng(nb * 4 + tl)
    lo, hi, ctype = (-128, 128, "int8_t") if w_dt == "s8" else (0, 256, "uint8_t")
    c = rng.integers(-32768, 32768, 8 * nb + 8)
    w = rng.integers(lo, hi, 4 * nb + 4)
    program = (MMX1_TEST.replace("@ARRAYS@", c_array("c", c, "int16_t") + "\n" +
                                 c_array("w", w, ctype))
               .replace("@W@", w_dt).replace("@NB@", str(nb)).replace("@TL@", str(tl)))
    out = _run(program, f"mmx1_{w_dt}", target, ["mtvm_mmx1_s16.h"])
    got = [[int(v) for v in line.split()] for line in out.splitlines()]
    assert got[0][0] == _mmx1_expected(c, w, nb, tl, 1)[0]
    assert got[1] == _mmx1_expected(c, w, nb, tl, 2)


GEMV_TEST = r"""
#include <stdio.h>
#include "mtvm_gemv_f32.h"
@ARRAYS@
static float out[@N@ + 1];
int main(void)
{
    /* as in a model, the kernel sees b only as a pointer (the SIMD paths form
     * addresses of whole vectors past a partial block; masked, never read) */
    const float* volatile bp = b;
    out[@N@] = 12345.0f;   /* must survive: the blocked GEMV writes exactly n floats */
    mtvm_f32_gemv_blocked(@T@, x, bp, @N@, @N@, out);
    for (int q = 0; q <= @N@; ++q) printf("%.9g\n", (double)out[q]);
    return 0;
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("taps,n", [(1, 1), (2, 7), (5, 8), (3, 9), (8, 33), (4, 64), (7, 100)])
def test_blocked_gemv_computes_every_column_and_writes_no_further(taps, n, target):
    rng = np.random.default_rng(taps * 100 + n)
    x = rng.standard_normal(taps).astype(np.float32)
    b = rng.standard_normal((taps, n)).astype(np.float32)
    program = (GEMV_TEST.replace("@ARRAYS@", _floats("x", x) + "\n" + _floats("b", b))
               .replace("@T@", str(taps)).replace("@N@", str(n)))
    out = np.array([float(v) for v in _run(program, "gemv", target,
                                           ["mtvm_gemv_f32.h"]).split()])
    np.testing.assert_allclose(out[:n], x.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert out[n] == 12345.0


ACT_TEST = r"""
#include <stdio.h>
#include "mtvm_activation_f32.h"
@ARRAYS@
int main(void)
{
    volatile float zero = 0.0f;
    const float nan = zero / zero;
    for (int i = 0; i < @N@; ++i) {
        printf("%.9g %.9g\n", (double)mtvm_tanh_f32(v[i]), (double)mtvm_sigmoid_f32(v[i]));
    }
    printf("nan %d %d\n", mtvm_tanh_f32(nan) != mtvm_tanh_f32(nan),
           mtvm_sigmoid_f32(nan) != mtvm_sigmoid_f32(nan));
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_tanh_and_sigmoid_are_within_their_stated_error(target):
    v = np.concatenate([np.linspace(-12, 12, 961), [0.0, -0.0, 1e-6, -1e-6, 1e-30, 30, -30]])
    program = ACT_TEST.replace("@ARRAYS@", _floats("v", v)).replace("@N@", str(v.size))
    lines = _run(program, "act", target, ["mtvm_activation_f32.h"]).splitlines()
    assert lines[-1] == "nan 1 1"          # NaN in, NaN out
    got = np.array([[float(a) for a in line.split()] for line in lines[:-1]])
    v64 = v.astype(np.float32).astype(np.float64)
    t_ref = np.tanh(v64)
    assert np.max(np.abs(got[:, 0] - t_ref) / np.maximum(np.abs(t_ref), 1e-30)) < 4e-7
    assert np.max(np.abs(got[:, 1] - 1 / (1 + np.exp(-v64)))) < 2e-7
    assert np.all(np.abs(got[:, 0]) <= 1) and np.all((got[:, 1] >= 0) & (got[:, 1] <= 1))


SATURATION_TEST = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "mtvm_activation_f32.h"
/* every float of [lo, hi] (and its negation): the extremes of f */
static void sweep(float lo, float hi, int sig, float* mx, float* mn)
{
    uint32_t u, end;
    memcpy(&u, &lo, 4);
    memcpy(&end, &hi, 4);
    for (; u <= end; ++u) {
        float x;
        memcpy(&x, &u, 4);
        const float a = sig ? mtvm_sigmoid_f32(x) : mtvm_tanh_f32(x);
        const float b = sig ? mtvm_sigmoid_f32(-x) : mtvm_tanh_f32(-x);
        *mx = a > *mx ? a : *mx;
        *mn = b < *mn ? b : *mn;
    }
}
int main(void)
{
    float tmax = 0.0f, tmin = 0.0f, smax = 0.5f, smin = 0.5f;
    sweep(6.0f, 8.5f, 0, &tmax, &tmin);
    sweep(12.0f, 17.0f, 1, &smax, &smin);
    printf("%.9g %.9g %.9g %.9g\n", (double)tmax, (double)tmin, (double)smax, (double)smin);
    return 0;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_tanh_and_sigmoid_stay_in_their_range_where_they_saturate(target):
    """Neither function clamps the rational function's value: on [-8, 8] ([-16, 16] for
    the sigmoid) it stays in [-1, 1] ([0, 1]) by itself, and beyond the result is the bound
    exactly. Every float where the rational function comes within rounding of the bound
    (tanh above 6: 1 - tanh(6) = 12 ulps of 1) and a little past the switch is
    evaluated, with the two multiply-adds (host) and fused (-march=native, the M4F's
    VFMA); the M3 has no FPU and the software float of the first form."""
    lines = _run(SATURATION_TEST, "act_range", target, ["mtvm_activation_f32.h"])
    tmax, tmin, smax, smin = (float(v) for v in lines.split())
    assert tmax <= 1.0 and tmin >= -1.0 and smax <= 1.0 and smin >= 0.0
    assert tmax == 1.0 and tmin == -1.0 and smax == 1.0 and smin == 0.0   # saturated

INPLACE_TEST = r"""
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "mtvm_activation_f32_vfp.h"
@ARRAYS@
static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
int main(void)
{
    static float t[@N@ + 1], s[@N@ + 1];
    volatile float zero = 0.0f;
    long bad = 0;
    for (int n = 0; n <= @N@; n += (n < 5 ? 1 : @N@ - 5)) {   /* 0-5 values, and all */
        memcpy(t, v, sizeof v);
        memcpy(s, v, sizeof v);
        t[n] = s[n] = 12345.0f;    /* past the end: untouched */
        mtvm_tanh_f32_inplace(t, n);
        mtvm_sigmoid_f32_inplace(s, n);
        for (int i = 0; i < n; ++i) {
            bad += bits(t[i]) != bits(mtvm_tanh_f32(v[i]));
            bad += bits(s[i]) != bits(mtvm_sigmoid_f32(v[i]));
        }
        bad += t[n] != 12345.0f || s[n] != 12345.0f;
    }
    t[0] = t[1] = s[0] = s[1] = zero / zero;
    mtvm_tanh_f32_inplace(t, 2);
    mtvm_sigmoid_f32_inplace(s, 2);
    printf("%ld %d %d\n", bad, t[1] != t[1], s[0] != s[0]);
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)   # an arm_dsp header: not x86's
def test_tanh_and_sigmoid_in_place_are_the_scalar_functions_bit_for_bit(target):
    """The array forms of the recurrent gates (on the M4F two values a step in VFP
    assembly, the bound tested on x * x) give the scalar functions' bits on every value:
    both sides of each bound by one unit in the last place, the bounds themselves, zeros of
    both signs, infinities, and any length (the odd last value in C); NaN propagates."""
    edges = []
    for b in (8.0, 16.0):
        for e in (b, np.nextafter(np.float32(b), np.float32(0)),
                  np.nextafter(np.float32(b), np.float32(100))):
            edges += [e, -e]
    v = np.concatenate([np.linspace(-20, 20, 401), edges,
                        [0.0, -0.0, 1e-30, -1e-30, np.inf, -np.inf, 3e38, -3e38]])
    program = (INPLACE_TEST.replace("@ARRAYS@", _floats("v", v))
               .replace("@N@", str(v.size)))
    out = _run(program, "act_inplace", target, ["mtvm_activation_f32_vfp.h"]).split()
    assert out == ["0", "1", "1"]


EXP_TEST = r"""
#define MTVM_EXP_F32_PORTABLE   /* the polynomial on a glibc host too */
#include <math.h>
#include <stdio.h>
#include "mtvm_exp_f32.h"
@ARRAYS@
int main(void)
{
    for (int i = 0; i < @N@; ++i) printf("%.9e\n", (double)mtvm_exp_f32(v[i]));
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_exp_is_within_1e7_and_flushes_below_flt_min(target):
    v = np.concatenate([np.linspace(-87.3, 88.7, 1777), np.linspace(-1, 1, 201),
                        [0.0, -0.0, -87.4, -100.0, 88.8, 1e30, -1e30, np.inf, -np.inf]])
    program = EXP_TEST.replace("@ARRAYS@", _floats("v", v)).replace("@N@", str(v.size))
    got = np.array([float(a) for a in _run(program, "exp", target,
                                           ["mtvm_exp_f32.h"]).split()])
    v64 = v.astype(np.float32).astype(np.float64)
    inside = (v64 > -87.33654) & (v64 < 88.72283)
    ref = np.exp(v64[inside])
    assert np.max(np.abs(got[inside] - ref) / ref) < 1e-7
    assert np.all(got[v64 <= -87.4] == 0) and np.all(np.isposinf(got[v64 >= 88.8]))


GEMM_VFP_TEST = r"""
#include <stdio.h>
#include "mtvm_gemm_f32_vfp.h"
@ARRAYS@
int main(void)
{
    float tile[16];
    const float* volatile ap = a;   /* seen as pointers only, as in a model */
    const float* volatile bp = b;
#if defined(MTVM_GEMM_F32_VFP)
    printf("asm\n");
    mtvm_f32_gemm_4x4_vfp(@T@, ap, 8, bp, @LDB@, tile);
#else
    printf("c\n");   /* no single-precision FMA here: the header offers nothing */
    for (int i = 0; i < 16; ++i) {
        float s = 0.0f;
        for (int t = 0; t < @T@; ++t) s += ap[t * 8 + i / 4] * bp[t * @LDB@ + i % 4];
        tile[i] = s;
    }
#endif
    for (int i = 0; i < 16; ++i) printf("%.9e\n", (double)tile[i]);
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
@pytest.mark.parametrize("taps,ldb", [(0, 37), (1, 37), (5, 37), (33, 37), (16, 4)])
def test_vfp_gemm_block_matches_numpy(taps, ldb, target):
    """The M4F's 4 x 4 block in assembly (mps2-an386 runs it; the host and the
    FPU-less M3 check that the header compiles to nothing there). taps 16 with
    ldb 4: the step of b in bytes equals the tap count, constants gcc once put in
    one register for both (the loop's operands are early clobbers since)."""
    rng = np.random.default_rng(taps)
    a = rng.standard_normal((max(taps, 1), 8)).astype(np.float32)
    b = rng.standard_normal((max(taps, 1), ldb)).astype(np.float32)
    program = (GEMM_VFP_TEST.replace("@ARRAYS@", _floats("a", a) + "\n" + _floats("b", b))
               .replace("@T@", str(taps)).replace("@LDB@", str(ldb)))
    lines = _run(program, "gemm_vfp", target, ["mtvm_gemm_f32_vfp.h"]).split()
    assert lines[0] == ("asm" if target == "mps2-an386" else "c")
    got = np.array([float(v) for v in lines[1:]]).reshape(4, 4)
    expect = a[:taps, :4].astype(np.float64).T @ b[:taps, :4]
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)


GEMM_OFF_VFP_TEST = r"""
#include <stdio.h>
#include "mtvm_gemm_f32_vfp.h"
@ARRAYS@
int main(void)
{
#if defined(MTVM_GEMM_F32_VFP)
    float tile[16];
    const float* volatile ap = a;
    const float* volatile bp = b;
    mtvm_f32_gemm_4x4_off_vfp(@T@, ap, 8, bp, off, tile);
    for (int i = 0; i < 16; ++i) printf("%.9e\n", (double)tile[i]);
#endif
    return 0;
}
"""


@pytest.mark.parametrize("taps", [1, 9, 25])
@pytest.mark.parametrize("target", BOARDS[:1])
def test_vfp_gemm_block_with_tap_offsets_matches_numpy(taps, target):
    rng = np.random.default_rng(taps + 100)
    a = rng.standard_normal((taps, 8)).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    off = rng.integers(0, 296, taps)
    program = (GEMM_OFF_VFP_TEST.replace("@ARRAYS@", "\n".join(
        [_floats("a", a), _floats("b", b), c_array("off", off, "int32_t")]))
        .replace("@T@", str(taps)))
    got = np.array([float(v) for v in _run(program, "gemm_off_vfp", target,
                                           ["mtvm_gemm_f32_vfp.h"]).split()]).reshape(4, 4)
    rows = np.stack([b[o:o + 4] for o in off]).astype(np.float64)   # [taps][4]
    np.testing.assert_allclose(got, a[:, :4].astype(np.float64).T @ rows, rtol=1e-5, atol=1e-5)
