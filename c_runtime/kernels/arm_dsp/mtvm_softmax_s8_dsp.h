/* mtvm_softmax_s8_dsp.h: QSoftmax's row of int8 values on the Arm DSP cores, bit-exact with
 * the portable kernel (mtvm.ops.quantized.softmax.QSoftmax, its 32-bit-division form):
 * the row's maximum four bytes at a time (SSUB8 sets the lanes' GE flags, SEL keeps the
 * larger), the exp table read through a pointer already offset by 255 - max, and
 * y = zy + floor(((e inv + sum 2^15) >> 16) / sum), clamped.
 * Without the DSP extension (host tests, M3) the maximum is found byte by byte.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_SOFTMAX_S8_DSP_H_
#define MTVM_SOFTMAX_S8_DSP_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"

/* The largest of x[0..d), d >= 1. */
static inline int32_t mtvm_max_s8(const int8_t* x, int32_t d)
{
    int32_t i = 0, m = -128;
#if defined(__ARM_FEATURE_DSP)
    if (d >= 4) {
        uint32_t m4 = 0x80808080u;
        for (; i + 4 <= d; i += 4) {
            uint32_t v;
            memcpy(&v, x + i, 4);
            (void)__ssub8((int32_t)v, (int32_t)m4);     /* GE lane flags: v >= m4 */
            m4 = (uint32_t)__sel((int32_t)v, (int32_t)m4);
        }
        for (int32_t l = 0; l < 4; ++l) {
            const int32_t b = (int8_t)(uint8_t)(m4 >> (8 * l));
            m = b > m ? b : m;
        }
    }
#endif
    for (; i < d; ++i) {
        m = x[i] > m ? x[i] : m;
    }
    return m;
}

/* One output: clamp(zy + floor(((e inv + half) >> 16) / sum), lo, hi) as a byte. */
static MTVM_ALWAYS_INLINE uint8_t mtvm_softmax_out_s8_dsp(uint32_t e, uint32_t inv, uint64_t half,
                                                         uint32_t sum, int32_t zy, int32_t lo,
                                                         int32_t hi)
{
    int32_t v = (int32_t)((uint32_t)(((uint64_t)e * inv + half) >> 16) / sum) + zy;
#if defined(__ARM_FEATURE_DSP)
    if (lo == -128 && hi == 127) {
        return (uint8_t)__ssat(v, 8);
    }
    if (lo == 0 && hi == 255) {
        return (uint8_t)__usat(v, 8);
    }
#endif
    return (uint8_t)(v < lo ? lo : (v > hi ? hi : v));
}

/* One row: y[i] = clamp(zy + floor(((table[x[i] - max + 255] inv + sum 2^15) >> 16) / sum),
 * lo, hi), sum the row's table entries; y may be x (in place). */
static MTVM_ALWAYS_INLINE void mtvm_softmax_row_s8_dsp(const int8_t* x, uint8_t* y, int32_t d,
                                                       const uint32_t* table, uint32_t inv,
                                                       int32_t zy, int32_t lo, int32_t hi)
{
    const uint32_t* e = table + 255 - mtvm_max_s8(x, d);
    uint32_t sum = 0, sum2 = 0;
    int32_t i = 0;
    for (; i + 2 <= d; i += 2) {   /* two a step: half the loop overhead */
        sum += e[x[i]];
        sum2 += e[x[i + 1]];
    }
    if (i < d) {
        sum += e[x[i]];
    }
    sum += sum2;
    const uint64_t half = (uint64_t)sum << 15;
    for (i = 0; i + 2 <= d; i += 2) {   /* two a step: both read before y (may be x) */
        const uint32_t e0 = e[x[i]], e1 = e[x[i + 1]];
        y[i] = mtvm_softmax_out_s8_dsp(e0, inv, half, sum, zy, lo, hi);
        y[i + 1] = mtvm_softmax_out_s8_dsp(e1, inv, half, sum, zy, lo, hi);
    }
    if (i < d) {
        y[i] = mtvm_softmax_out_s8_dsp(e[x[i]], inv, half, sum, zy, lo, hi);
    }
}

#endif  /* MTVM_SOFTMAX_S8_DSP_H_ */
