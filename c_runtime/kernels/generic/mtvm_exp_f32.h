/* mtvm_exp_f32.h: e^x in float without libm, for the exponentials of Softmax, Sigmoid,
 * Swish and SwiGLU (one per element). mtvm_exp_f32_branchless has no branch and no call,
 * so gcc -O3 vectorizes the loops that call it (AVX2 and AVX-512): on a glibc host it is
 * mtvm_exp_f32, instead of libm's expf, which is scalar. Elsewhere (Cortex-M and the
 * other microcontrollers) mtvm_exp_f32 is the scalar polynomial below, whose early
 * returns cost less than the branch-free clamps where nothing vectorizes (newlib's
 * expf costs about a hundred instructions on a Cortex-M4F).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_EXP_F32_H_
#define MTVM_EXP_F32_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

/* e^x = 2^n e^r with n = round(x / ln 2), r = x - n ln 2 (ln 2 in two parts: n ln2_hi
 * is exact for |n| < 512, so r is exact to float precision), |r| <= ln(2) / 2; e^r =
 * 1 + r + r^2 P(r) with Cephes' degree-5 minimax P. Written for vectorization, with
 * no float select either (gcc threads a float select of a constant into branches, and
 * on AVX2 a branch stops vectorization): x is clamped to [-110, 100] on its bits, with
 * unsigned minimums (e^-110 rounds to 0, e^100 overflows; a NaN keeps its bits and
 * makes r NaN); n is rounded by adding 1.5 * 2^23 and read back from that sum's low
 * bits (no float-to-int conversion); 2^n is the product of two powers of two built in
 * exponent fields, both normal for n in [-159, 144], so results below FLT_MIN come out
 * as subnormals rounded once (or 0), results above FLT_MAX as +inf.
 * Relative error below 1e-7 for results >= FLT_MIN, at most one subnormal step below
 * (tests/kernels/test_exp_erf_f32.py sweeps the floats); e^0 = 1 exactly, e^-inf = 0,
 * e^inf = inf, NaN stays NaN. */
static inline float mtvm_exp_f32_branchless(float x)
{
    uint32_t x_bits;
    memcpy(&x_bits, &x, sizeof x_bits);
    const uint32_t sign = x_bits & 0x80000000u;
    const uint32_t magnitude = x_bits & 0x7FFFFFFFu;
    const uint32_t limit = sign ? 0x42DC0000u : 0x42C80000u;     /* 110.0f, 100.0f */
    const uint32_t clamped = magnitude > 0x7F800000u ? magnitude   /* NaN */
                             : (magnitude < limit ? magnitude : limit);
    const uint32_t xc_bits = sign | clamped;
    float xc;
    memcpy(&xc, &xc_bits, sizeof xc);
    const float round_shift = 12582912.0f;                       /* 1.5 * 2^23 */
    const float shifted = xc * 1.44269504f + round_shift;        /* n in the low bits */
    const float n = shifted - round_shift;
    const float r = (xc - n * 0.693145752f) - n * 1.42860677e-06f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e_r = (p * r) * r + r + 1.0f;
    /* The float's bits are 0x4B400000 + n (two's complement in the low 22 bits): biased
     * = n + 256, in [97, 400]; masked so that even a NaN's bits give in-range shifts.
     * 2^n = 2^(n1) 2^(n2) with n1 = floor(n / 2), n2 = n - n1 (exponent fields
     * n1 + 127 and n2 + 127, both in [47, 199]). */
    uint32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    const uint32_t biased = (bits - 0x4B400000u + 256u) & 511u;
    const uint32_t half = biased >> 1;
    const uint32_t field1 = (half - 1u) << 23;            /* n1 + 127 = biased / 2 - 1 */
    const uint32_t field2 = (biased - half - 1u) << 23;   /* n2 + 127 */
    float scale1, scale2;
    memcpy(&scale1, &field1, sizeof scale1);
    memcpy(&scale2, &field2, sizeof scale2);
    return (e_r * scale1) * scale2;
}

#if defined(__GLIBC__) && !defined(MTVM_EXP_F32_PORTABLE)
/* A glibc host: libm's expf is faster than the scalar polynomial below, but a call
 * stops vectorization; the branch-free form is faster still in a vectorized loop. */
static inline float mtvm_exp_f32(float x)
{
    return mtvm_exp_f32_branchless(x);
}
#else
/* e^x = 2^n e^r with n = round(x / ln 2) and r = x - n ln 2 (ln 2 in two parts, so r
 * is exact to float precision), |r| <= ln(2) / 2; e^r by its Taylor polynomial of
 * degree 7 (truncation error below 2e-9 relative), 2^n built in the exponent bits.
 * Relative error below 1e-7 (measured over the whole range, float arithmetic as
 * here: tests/kernels/test_dense_kernels.py). Results below FLT_MIN are flushed to 0
 * (a Softmax term that small changes no output), above FLT_MAX they are +inf, and NaN
 * stays NaN. */
static inline float mtvm_exp_f32(float x)
{
    if (!(x > -87.33654f)) {             /* x below ln(FLT_MIN), or NaN */
        return x != x ? x : 0.0f;
    }
    if (x > 88.72283f) {                 /* above ln(FLT_MAX) */
        return HUGE_VALF;
    }
    const float t = x * 1.44269504f;
    const int32_t n = (int32_t)(t + (t >= 0.0f ? 0.5f : -0.5f));
    const float r = (x - (float)n * 0.693145752f) - (float)n * 1.42860677e-06f;
    float p = 1.98412698e-04f;           /* 1/7! */
    p = p * r + 1.38888889e-03f;         /* 1/6! */
    p = p * r + 8.33333333e-03f;
    p = p * r + 4.16666667e-02f;
    p = p * r + 1.66666667e-01f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n for n in [-126, 128): the exponent field; n = 128 (x just below
     * ln(FLT_MAX)) as 2^127 * 2. */
    const int32_t e = n > 127 ? 127 : n;
    const uint32_t bits = (uint32_t)(e + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return n > 127 ? p * scale * 2.0f : p * scale;
}

#endif

#endif  /* MTVM_EXP_F32_H_ */
