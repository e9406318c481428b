/* mtvm_depthwise_s8.h: PKHBT (DSP) and the requantization (SMMLA on DSP, else C) of the int8
 * depthwise kernels, also read by the Arm DSP pointwise and widened im2col kernels.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DEPTHWISE_S8_H_
#define MTVM_DEPTHWISE_S8_H_

#include <stdint.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_dsp.h"

#if defined(__ARM_FEATURE_DSP)
/* PKHBT: the bottom half of a, the top half of b (gcc 12 does not form it from C). */
static inline int32_t mtvm_pkhbt(int32_t a, int32_t b)
{
#if defined(__GNUC__)
    int32_t r;
    __asm__("pkhbt %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
#else
    return (int32_t)(((uint32_t)a & 0xFFFFu) | ((uint32_t)b & 0xFFFF0000u));
#endif
}
#endif

/* (high word of acc * mult + rnd) >> sh: requantization with the rounding and the
 * output zero point folded into rnd (SMMLA + ASR on a DSP core; exactly the same
 * integers in C, as rnd * 2^32 has no low bits). */
static inline int32_t mtvm_dw_requantize(int32_t acc, int32_t mult, int32_t rnd, int32_t sh)
{
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__)
    int32_t r;
    __asm__("smmla %0, %1, %2, %3" : "=r"(r) : "r"(acc), "r"(mult), "r"(rnd));
    return r >> sh;
#else
    return ((int32_t)(((int64_t)acc * mult) >> 32) + rnd) >> sh;
#endif
}

/* mtvm_dw_requantize saturated to int8 (SSAT on a DSP core) and clamped to [lo, hi]
 * (constants after inlining: a narrower clamp is ReLU-like). */
static MTVM_ALWAYS_INLINE int8_t mtvm_requantize_s8(int32_t acc, int32_t mult, int32_t rnd,
                                                    int32_t sh, int32_t lo, int32_t hi)
{
    acc = mtvm_dw_requantize(acc, mult, rnd, sh);
#if defined(__ARM_FEATURE_DSP)
    acc = __ssat(acc, 8);
#else
    acc = acc < -128 ? -128 : (acc > 127 ? 127 : acc);
#endif
    if (lo > -128 && acc < lo) acc = lo;
    if (hi < 127 && acc > hi) acc = hi;
    return (int8_t)acc;
}

#endif  /* MTVM_DEPTHWISE_S8_H_ */
