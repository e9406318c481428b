/* mtvm_pw_conv_x86.h: The parts of QConv's direct pointwise path on x86 hosts: AVX-512 VNNI
 * (16 positions per vector) and AVX2 (8), read straight from the input planes, no column.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_PW_CONV_X86_H_
#define MTVM_PW_CONV_X86_H_

#include <stddef.h>
#include <stdint.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_int8_x86.h"
#include "mtvm_mulhi_s32_x86.h"
#include "mtvm_pk_index_x86.h"

#if defined(MTVM_INT8_X86)
/* Weight byte i of p (int8, or uint8 when w_u) as the 16 bits of an int16 lane. */
static MTVM_ALWAYS_INLINE uint32_t mtvm_pw_lane_x86(const uint8_t* p, int32_t i, int w_u)
{
    return (uint16_t)mtvm_byte_at(p, i, w_u);
}

/* wq[j * cp + t / 2] = (w[j][t], w[j][t + 1]) as the int16 lanes of one int32 (cp =
 * (cg + 1) / 2, zero past cg): VPDPWSSD's weight pairs for the mg channels of a group,
 * rebuilt from its packed rows wg (conv_pack_index: blocks stored w0 w2 w1 w3, channel
 * pairs interleaved per block, an odd last channel on its own row). All but wq and wg
 * are constants at each call. */
static MTVM_ALWAYS_INLINE void mtvm_pw_weight_pairs_x86(int32_t* wq, const uint8_t* wg, int w_u,
                                                        int32_t mg, int32_t cg)
{
    const int32_t cp = (cg + 1) / 2, nb = cg / 4;
    for (int32_t j = 0; j < mg; ++j) {
        const int32_t own = (j & 1) == 0 && j + 1 == mg;   /* its own row */
        const uint8_t* r = wg + (own ? j : (j & ~1)) * cg + (own ? 0 : 4 * (j & 1));
        int32_t* d = wq + j * cp;
        for (int32_t i = 0; i < nb; ++i, r += own ? 4 : 8) {   /* w0 w2 w1 w3 */
            d[2 * i] = (int32_t)(mtvm_pw_lane_x86(r, 0, w_u) | mtvm_pw_lane_x86(r, 2, w_u) << 16);
            d[2 * i + 1] = (int32_t)(mtvm_pw_lane_x86(r, 1, w_u) |
                                     mtvm_pw_lane_x86(r, 3, w_u) << 16);
        }
        for (int32_t t = 4 * nb; t < cg; t += 2) {   /* the tail taps */
            const uint32_t lo = mtvm_pw_lane_x86(wg, mtvm_pk_index(j, t, cg, mg), w_u);
            const uint32_t hi = t + 1 < cg ?
                mtvm_pw_lane_x86(wg, mtvm_pk_index(j, t + 1, cg, mg), w_u) : 0u;
            d[t / 2] = (int32_t)(lo | hi << 16);
        }
    }
}

/* AVX2 (eight positions per vector, VPMADDWD): the parts below for 256-bit vectors. */

/* xp[t] = (x[2t][p], x[2t + 1][p]) as int16 pairs for the 8 positions p at x of the cg
 * channel planes (hw apart; int8, or uint8 when x_u). */
static MTVM_ALWAYS_INLINE void mtvm_pw_tile8_x86(__m256i* xp, const uint8_t* x, int x_u,
                                                 int32_t cg, size_t hw)
{
    for (size_t t = 0; t < (size_t)(cg + 1) / 2; ++t) {
        const __m128i a = _mm_loadl_epi64((const __m128i*)(const void*)(x + 2 * t * hw));
        const __m128i e = 2 * t + 1 < (size_t)cg ?
            _mm_loadl_epi64((const __m128i*)(const void*)(x + (2 * t + 1) * hw)) :
            _mm_setzero_si128();
        const __m128i v = _mm_unpacklo_epi8(a, e);
        xp[t] = x_u ? _mm256_cvtepu8_epi16(v) : _mm256_cvtepi8_epi16(v);
    }
}

/* acc[i] += the tile xp . channel i's weight pairs (wj + i * cp), i < nc <= 4. */
static MTVM_ALWAYS_INLINE void mtvm_pw_dot8_x86(__m256i acc[4], const __m256i* xp,
                                                const int32_t* wj, int32_t cp, int32_t nc)
{
    if (nc == 4) {
        for (int32_t t = 0; t < cp; ++t) {
            for (int32_t i = 0; i < 4; ++i) {
                acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(
                    xp[t], _mm256_set1_epi32(wj[i * cp + t])));
            }
        }
    } else {
        for (int32_t t = 0; t < cp; ++t) {
            for (int32_t i = 0; i < nc; ++i) {
                acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(
                    xp[t], _mm256_set1_epi32(wj[i * cp + t])));
            }
        }
    }
}

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
    __m512i v = _mm512_mul_epi32(a, _mm512_set1_epi32(mult));
    const __m512i odd = _mm512_mul_epi32(_mm512_srli_epi64(a, 32), _mm512_set1_epi32(mult));
    v = _mm512_mask_blend_epi32((__mmask16)0xAAAA, _mm512_srli_epi64(v, 32), odd);
    if (m > 0) {
        v = _mm512_srai_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(add)), m);
    } else {
        v = _mm512_srav_epi32(v, _mm512_set1_epi32(-2 - shift));
        v = _mm512_srai_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(add)), 1);
    }
    return _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi_));
}
#endif

#endif  /* MTVM_PW_CONV_X86_H_ */
