/* mtvm_exp_f32.h: e^x in float without libm, for Softmax's exponentials (one per
 * element; newlib's expf costs about a hundred instructions on a Cortex-M4F). On a
 * glibc host, the C library's expf.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_EXP_F32_H_
#define MTVM_EXP_F32_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GLIBC__) && !defined(MTVM_EXP_F32_PORTABLE)
/* A glibc host: its expf is table-driven and faster than the polynomial below. */
static inline float mtvm_exp_f32(float x)
{
    return expf(x);
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
