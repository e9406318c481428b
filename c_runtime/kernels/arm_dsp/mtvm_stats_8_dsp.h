/* mtvm_stats_8_dsp.h: the integer statistics of a row of 8-bit values (QLayerNorm's),
 * four bytes a step on cores with the DSP extension: USADA8 sums the bytes (int8 biased
 * to uint8), SXTB16/UXTB16 and two SMLADs sum their squares -- about 2.5 instructions a
 * byte where the byte loop takes 6. The zero point comes off at the end, in modular
 * uint32 arithmetic: the results are the exact integers of the byte loop.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_STATS_8_DSP_H_
#define MTVM_STATS_8_DSP_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"

/* *s = sum (x[i] - zp), *sq = sum (x[i] - zp)^2, i < n: x int8 (u 0) or uint8 (u 1); the
 * caller keeps n so small that sq fits int32 (n <= 32767). */
static MTVM_ALWAYS_INLINE void mtvm_sum_sq_8_dsp(const uint8_t* x, int u, int32_t n, int32_t zp,
                                                 int32_t* s, int32_t* sq)
{
    int32_t i = 0;
    uint32_t sx = 0, sxx = 0;
#if defined(__ARM_FEATURE_DSP)
    uint32_t biased = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, x + i, 4);
        biased = __usada8(u ? w : w ^ 0x80808080u, 0, biased);
        const int32_t lo = mtvm_widen_02(w, u), hi = mtvm_widen_13(w, u);
        sxx = (uint32_t)__smlad(hi, hi, __smlad(lo, lo, (int32_t)sxx));
    }
    sx = biased - (u ? 0u : 128u * (uint32_t)i);
#endif
    for (; i < n; ++i) {
        const int32_t v = mtvm_byte_at(x, i, u);
        sx += (uint32_t)v;
        sxx += (uint32_t)(v * v);
    }
    /* sum (x - zp) = sum x - n zp; sum (x - zp)^2 = sum x^2 - 2 zp sum x + n zp^2 */
    const uint32_t z = (uint32_t)zp, nn = (uint32_t)n;
    *s = (int32_t)(sx - nn * z);
    *sq = (int32_t)(sxx - 2u * z * sx + nn * z * z);
}

/* The named forms: int8 (s8) or uint8 (u8) rows. */
static MTVM_ALWAYS_INLINE void mtvm_sum_sq_s8_dsp(const int8_t* x, int32_t n, int32_t zp,
                                                  int32_t* s, int32_t* sq)
{
    mtvm_sum_sq_8_dsp((const uint8_t*)x, 0, n, zp, s, sq);
}
static MTVM_ALWAYS_INLINE void mtvm_sum_sq_u8_dsp(const uint8_t* x, int32_t n, int32_t zp,
                                                  int32_t* s, int32_t* sq)
{
    mtvm_sum_sq_8_dsp(x, 1, n, zp, s, sq);
}

#endif  /* MTVM_STATS_8_DSP_H_ */
