/* mtvm_pw_conv_x86.h: QConv's direct pointwise path on x86 hosts with AVX-512 VNNI (16
 * positions per vector, read straight from the input planes, no column), and the
 * requantization the direct paths share (AVX2: mtvm_conv_x86.h).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_PW_CONV_X86_H_
#define MTVM_PW_CONV_X86_H_

#include <stddef.h>
#include <stdint.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_int8_x86.h"
#include "mtvm_mulhi_s32_x86.h"

#if defined(MTVM_INT8_X86)
/* QConv's fast requantization of output channel o (conv._Store): mult[o * step] and,
 * with m = 0 (one shift per channel), shift[o * step]; step 0 for one multiplier for all
 * channels. See mtvm_pw_requantize_x86. */
typedef struct {
    const int32_t* mult;
    const int32_t* shift;
    int32_t step, m, add, lo, hi;
} mtvm_conv_requant_x86_t;

/* mtvm_pw_requantize_x86 for eight sums. */
static MTVM_ALWAYS_INLINE __m256i mtvm_pw_requantize8_x86(__m256i a, int32_t mult, int32_t shift,
                                                          int32_t m, int32_t add, int32_t lo,
                                                          int32_t hi_)
{
    __m256i v = mtvm_mulhi_x86(a, _mm256_set1_epi32(mult));
    if (m > 0) {
        v = _mm256_srai_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(add)), m);
    } else {
        v = _mm256_srav_epi32(v, _mm256_set1_epi32(-2 - shift));
        v = _mm256_srai_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(add)), 1);
    }
    return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(lo)), _mm256_set1_epi32(hi_));
}
#endif

#if defined(MTVM_INT8_X86) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
/* xp[t] = (x[2t][p], x[2t + 1][p]) as int16 pairs for the 16 positions p at x of the cg
 * channel planes (hw apart; int8, or uint8 when x_u), the positions past km zero. */
static MTVM_ALWAYS_INLINE void mtvm_pw_tile_x86(__m512i* xp, const uint8_t* x, int x_u,
                                                int32_t cg, size_t hw, __mmask16 km)
{
    for (size_t t = 0; t < (size_t)(cg + 1) / 2; ++t) {
        const __m128i a = _mm_maskz_loadu_epi8(km, (const void*)(x + 2 * t * hw));
        const __m128i e = 2 * t + 1 < (size_t)cg ?
            _mm_maskz_loadu_epi8(km, (const void*)(x + (2 * t + 1) * hw)) : _mm_setzero_si128();
        const __m256i v = _mm256_set_m128i(_mm_unpackhi_epi8(a, e), _mm_unpacklo_epi8(a, e));
        xp[t] = x_u ? _mm512_cvtepu8_epi16(v) : _mm512_cvtepi8_epi16(v);
    }
}

/* acc[i] += the tile xp . channel i's weight pairs (wj + i * cp), i < nc (nc <= 4; the
 * common nc = 4 with a constant trip count). */
static MTVM_ALWAYS_INLINE void mtvm_pw_dot_x86(__m512i acc[4], const __m512i* xp,
                                               const int32_t* wj, int32_t cp, int32_t nc)
{
    if (nc == 4) {
        for (int32_t t = 0; t < cp; ++t) {
            for (int32_t i = 0; i < 4; ++i) {
                acc[i] = _mm512_dpwssd_epi32(acc[i], xp[t], _mm512_set1_epi32(wj[i * cp + t]));
            }
        }
    } else {
        for (int32_t t = 0; t < cp; ++t) {
            for (int32_t i = 0; i < nc; ++i) {
                acc[i] = _mm512_dpwssd_epi32(acc[i], xp[t], _mm512_set1_epi32(wj[i * cp + t]));
            }
        }
    }
}

/* QConv's fast requantization (conv._Store) of 16 sums of one channel: hi = (a * mult)
 * >> 32, then with one shift m > 0: (hi + add) >> m; with m = 0: ((hi >> (-2 - shift))
 * + add) >> 1 (add = 2 y_zp + 1); clamped to [lo, hi_]. m and add are constants. */
static MTVM_ALWAYS_INLINE __m512i mtvm_pw_requantize_x86(__m512i a, int32_t mult, int32_t shift,
                                                         int32_t m, int32_t add, int32_t lo,
                                                         int32_t hi_)
{
    __m512i v = mtvm_mulhi16_x86(a, _mm512_set1_epi32(mult));
    if (m > 0) {
        v = _mm512_srai_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(add)), m);
    } else {
        v = _mm512_srav_epi32(v, _mm512_set1_epi32(-2 - shift));
        v = _mm512_srai_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(add)), 1);
    }
    return _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi_));
}

/* One group of a pointwise QConv not written in place: the mg output channel planes at y
 * (hw apart) from the cg input planes at xg (x_u: uint8, else int8), weight pairs wq
 * (x86_weight_pairs' row of the group), bias and rq indexed from the group's first
 * channel. Tiles of 16 positions (the last masked), four output channels at a time. */
static MTVM_ALWAYS_INLINE void mtvm_pw_group_x86(uint8_t* y, size_t hw, const uint8_t* xg,
                                                 int x_u, int32_t cg, const int32_t* wq,
                                                 int32_t mg, const int32_t* bias,
                                                 mtvm_conv_requant_x86_t rq)
{
    const int32_t cp = (cg + 1) / 2;
    for (size_t q = 0; q < hw; q += 16) {
        const __mmask16 km = q + 16 <= hw ? (__mmask16)0xFFFF : (__mmask16)((1u << (hw - q)) - 1u);
        __m512i xp[cp];   /* (x[2t][p], x[2t + 1][p]) int16, p < 16 */
        mtvm_pw_tile_x86(xp, xg + q, x_u, cg, hw, km);
        for (int32_t o0 = 0; o0 < mg; o0 += 4) {
            const int32_t nc = mg - o0 < 4 ? mg - o0 : 4;
            __m512i acc[4];
            for (int32_t i = 0; i < 4; ++i) acc[i] = _mm512_set1_epi32(i < nc ? bias[o0 + i] : 0);
            mtvm_pw_dot_x86(acc, xp, wq + o0 * cp, cp, nc);
            for (int32_t i = 0; i < nc; ++i) {
                const int32_t o = (o0 + i) * rq.step;
                const __m512i v = mtvm_pw_requantize_x86(acc[i], rq.mult[o], rq.m ? 0 : rq.shift[o],
                                                         rq.m, rq.add, rq.lo, rq.hi);
                _mm_mask_storeu_epi8((void*)(y + (size_t)(o0 + i) * hw + q), km,
                                     _mm512_cvtepi32_epi8(v));
            }
        }
    }
}
#endif

#endif  /* MTVM_PW_CONV_X86_H_ */
