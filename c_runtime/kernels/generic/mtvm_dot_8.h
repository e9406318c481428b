/* mtvm_dot_8.h: int32 dot products of int8/uint8 vectors, one row or four (the dense
 * kernels' inner loops: QMatMul, and QConv where it does not take the im2col path).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DOT_8_H_
#define MTVM_DOT_8_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"

#if defined(__AVX2__) && !defined(MTVM_NO_SIMD)
#include <immintrin.h>
#define MTVM_DOT_8_AVX2 1

/* 16 bytes at p as 16 int16 lanes (sign- or zero-extended). */
static MTVM_ALWAYS_INLINE __m256i mtvm_widen16_x86(const uint8_t* p, int is_unsigned)
{
    const __m128i v = _mm_loadu_si128((const __m128i*)(const void*)p);
    return is_unsigned ? _mm256_cvtepu8_epi16(v) : _mm256_cvtepi8_epi16(v);
}

/* The sum of the eight int32 lanes of v. */
static inline int32_t mtvm_hsum_epi32_x86(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}
#endif

/* sum of a[i] * b[i], i < n, with int32 accumulation; a_u / b_u: whether a / b are
 * uint8 (else int8). The DSP path widens four bytes into two pairs of 16-bit lanes and
 * multiply-accumulates each pair with one SMLAD, the AVX2 path sixteen bytes into int16
 * lanes for VPMADDWD; the sum is the same exact integer. */
static MTVM_ALWAYS_INLINE int32_t mtvm_dot_8(const uint8_t* a, int a_u, const uint8_t* b,
                                             int b_u, int32_t n)
{
    int32_t acc = 0;
#if defined(MTVM_DOT_8_AVX2)
    if (n >= 16) {   /* VPMADDWD on int16 pairs: exact (|a b| <= 255 * 255, two per lane) */
        __m256i c = _mm256_setzero_si256();
        for (; n >= 16; n -= 16, a += 16, b += 16) {
            c = _mm256_add_epi32(c, _mm256_madd_epi16(mtvm_widen16_x86(a, a_u),
                                                      mtvm_widen16_x86(b, b_u)));
        }
        acc = mtvm_hsum_epi32_x86(c);
    }
#endif
#if defined(__ARM_FEATURE_DSP)
    for (; n >= 4; n -= 4, a += 4, b += 4) {
        uint32_t a4, b4;
        memcpy(&a4, a, 4);
        memcpy(&b4, b, 4);
        acc = __smlad(mtvm_widen_02(a4, a_u), mtvm_widen_02(b4, b_u), acc);   /* lanes 0, 2 */
        acc = __smlad(mtvm_widen_13(a4, a_u), mtvm_widen_13(b4, b_u), acc);   /* lanes 1, 3 */
    }
#endif
    for (; n > 0; --n, ++a, ++b) {
        acc += mtvm_byte_at(a, 0, a_u) * mtvm_byte_at(b, 0, b_u);
    }
    return acc;
}

/* acc[r] += sum of a[i] * b[r * stride + i], i < n, for the four rows r < 4: `a` is
 * loaded and widened once for four output channels. */
static MTVM_ALWAYS_INLINE void mtvm_dot4_8(const uint8_t* a, int a_u, const uint8_t* b,
                                           int b_u, int32_t stride, int32_t n, int32_t acc[4])
{
    const uint8_t* b0 = b;
    const uint8_t* b1 = b + stride;
    const uint8_t* b2 = b + 2 * stride;
    const uint8_t* b3 = b + 3 * stride;
    int32_t s0 = acc[0], s1 = acc[1], s2 = acc[2], s3 = acc[3];
#if defined(MTVM_DOT_8_AVX2)
    if (n >= 16) {   /* a widened once per 16 bytes for the four rows */
        __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0;
        for (; n >= 16; n -= 16, a += 16, b0 += 16, b1 += 16, b2 += 16, b3 += 16) {
            const __m256i av = mtvm_widen16_x86(a, a_u);
            c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(av, mtvm_widen16_x86(b0, b_u)));
            c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(av, mtvm_widen16_x86(b1, b_u)));
            c2 = _mm256_add_epi32(c2, _mm256_madd_epi16(av, mtvm_widen16_x86(b2, b_u)));
            c3 = _mm256_add_epi32(c3, _mm256_madd_epi16(av, mtvm_widen16_x86(b3, b_u)));
        }
        s0 += mtvm_hsum_epi32_x86(c0);
        s1 += mtvm_hsum_epi32_x86(c1);
        s2 += mtvm_hsum_epi32_x86(c2);
        s3 += mtvm_hsum_epi32_x86(c3);
    }
#endif
#if defined(__ARM_FEATURE_DSP)
    for (; n >= 4; n -= 4, a += 4, b0 += 4, b1 += 4, b2 += 4, b3 += 4) {
        uint32_t a4, w;
        int32_t lo, hi;
        memcpy(&a4, a, 4);
        lo = mtvm_widen_02(a4, a_u);
        hi = mtvm_widen_13(a4, a_u);
        memcpy(&w, b0, 4);
        s0 = __smlad(lo, mtvm_widen_02(w, b_u), __smlad(hi, mtvm_widen_13(w, b_u), s0));
        memcpy(&w, b1, 4);
        s1 = __smlad(lo, mtvm_widen_02(w, b_u), __smlad(hi, mtvm_widen_13(w, b_u), s1));
        memcpy(&w, b2, 4);
        s2 = __smlad(lo, mtvm_widen_02(w, b_u), __smlad(hi, mtvm_widen_13(w, b_u), s2));
        memcpy(&w, b3, 4);
        s3 = __smlad(lo, mtvm_widen_02(w, b_u), __smlad(hi, mtvm_widen_13(w, b_u), s3));
    }
#endif
    for (; n > 0; --n, ++a, ++b0, ++b1, ++b2, ++b3) {
        const int32_t x = mtvm_byte_at(a, 0, a_u);
        s0 += x * mtvm_byte_at(b0, 0, b_u);
        s1 += x * mtvm_byte_at(b1, 0, b_u);
        s2 += x * mtvm_byte_at(b2, 0, b_u);
        s3 += x * mtvm_byte_at(b3, 0, b_u);
    }
    acc[0] = s0; acc[1] = s1; acc[2] = s2; acc[3] = s3;
}

/* The named forms the generated kernels call: mtvm_dot_<a>_<b>, mtvm_dot4_<a>_<b>. */
#define MTVM_DOT_8_PAIR(NA, AU, TA, NB, BU, TB)                                              \
    static inline int32_t mtvm_dot_##NA##_##NB(const TA* a, const TB* b, int32_t n)          \
    {                                                                                        \
        return mtvm_dot_8((const uint8_t*)a, AU, (const uint8_t*)b, BU, n);                  \
    }                                                                                        \
    static inline void mtvm_dot4_##NA##_##NB(const TA* a, const TB* b, int32_t stride,       \
                                             int32_t n, int32_t acc[4])                      \
    {                                                                                        \
        mtvm_dot4_8((const uint8_t*)a, AU, (const uint8_t*)b, BU, stride, n, acc);           \
    }
MTVM_DOT_8_PAIR(s8, 0, int8_t, s8, 0, int8_t)
MTVM_DOT_8_PAIR(s8, 0, int8_t, u8, 1, uint8_t)
MTVM_DOT_8_PAIR(u8, 1, uint8_t, s8, 0, int8_t)
MTVM_DOT_8_PAIR(u8, 1, uint8_t, u8, 1, uint8_t)
#undef MTVM_DOT_8_PAIR

#endif  /* MTVM_DOT_8_H_ */
