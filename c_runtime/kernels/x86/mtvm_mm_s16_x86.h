/* mtvm_mm_s16_x86.h: The int8 im2col micro-kernel's column blocks on x86 (AVX2 VPMADDWD,
 * AVX-512 VNNI VPDPWSSD): two pixels x two or four output channels.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MM_S16_X86_H_
#define MTVM_MM_S16_X86_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_int8_x86.h"
#include "mtvm_mulhi_s32_x86.h"

#if defined(MTVM_INT8_X86)
/* A column block (p0's four int16 taps, p1's) lines up with the block's weights (o's
 * four, o1's) once PSHUFB has undone the pair permutation (w0 w2 w1 w3, self-inverse)
 * and the bytes are widened to int16 (w_u: uint8 weights, else int8): VPMADDWD gives
 * (o.p0, o1.p1), and with the column's halves swapped (PSHUFD 0x4E) (o.p1, o1.p0).
 * Exact int32 sums: |tap * weight| <= 255 * 255, two per lane. */
static MTVM_ALWAYS_INLINE __m128i mtvm_mm_unperm_x86(void)
{
    return _mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15);
}

/* The weights of one block (8 bytes at w) as int16 lanes in tap order. */
static MTVM_ALWAYS_INLINE __m128i mtvm_mm_w8_x86(const uint8_t* w, int w_u)
{
    const __m128i v = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i*)(const void*)w),
                                       mtvm_mm_unperm_x86());
    return w_u ? _mm_cvtepu8_epi16(v) : _mm_cvtepi8_epi16(v);
}

/* Two blocks (16 bytes). */
static MTVM_ALWAYS_INLINE __m256i mtvm_mm_w16_x86(const uint8_t* w, int w_u)
{
    const __m128i v = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i*)(const void*)w),
                                       mtvm_mm_unperm_x86());
    return w_u ? _mm256_cvtepu8_epi16(v) : _mm256_cvtepi8_epi16(v);
}

/* v's two 128-bit halves added. */
static MTVM_ALWAYS_INLINE __m128i mtvm_mm_fold256_x86(__m256i v)
{
    return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define MTVM_MM_S16_VNNI 1
/* Four blocks (32 bytes). */
static MTVM_ALWAYS_INLINE __m512i mtvm_mm_w32_x86(const uint8_t* w, int w_u)
{
    const __m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i*)(const void*)w),
                                          _mm256_broadcastsi128_si256(mtvm_mm_unperm_x86()));
    return w_u ? _mm512_cvtepu8_epi16(v) : _mm512_cvtepi8_epi16(v);
}

static MTVM_ALWAYS_INLINE __m256i mtvm_mm_fold512_x86(__m512i v)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}
#endif

/* acc[0..3] += (p0.w_o, p0.w_o1, p1.w_o, p1.w_o1) over nb blocks (pixels 1: the p1
 * sums are not added); w_u and pixels are constants at each call. */
static MTVM_ALWAYS_INLINE void mtvm_mm2x2_x86(const int16_t* c, const uint8_t* w, int w_u,
                                              int32_t nb, int32_t pixels, int32_t* acc)
{
    __m128i d4, x4, s;
#if defined(MTVM_MM_S16_VNNI)
    /* four blocks per step, alternating between two pairs of accumulators (the
     * dependency chains, not the throughput, limit a single pair) */
    __m512i d16 = _mm512_setzero_si512(), x16 = _mm512_setzero_si512();
    __m512i e16 = _mm512_setzero_si512(), y16 = _mm512_setzero_si512();
    __m256i d8, x8;
    for (int32_t i = 0; nb >= 4; nb -= 4, c += 32, w += 32, ++i) {
        const __m512i wv = mtvm_mm_w32_x86(w, w_u);
        const __m512i cv = _mm512_loadu_si512((const void*)c);
        const __m512i cs = _mm512_shuffle_epi32(cv, (_MM_PERM_ENUM)0x4E);
        if (i & 1) {
            e16 = _mm512_dpwssd_epi32(e16, wv, cv);
            y16 = _mm512_dpwssd_epi32(y16, wv, cs);
        } else {
            d16 = _mm512_dpwssd_epi32(d16, wv, cv);
            x16 = _mm512_dpwssd_epi32(x16, wv, cs);
        }
    }
    d8 = mtvm_mm_fold512_x86(_mm512_add_epi32(d16, e16));
    x8 = mtvm_mm_fold512_x86(_mm512_add_epi32(x16, y16));
#else
    __m256i d8 = _mm256_setzero_si256(), x8 = _mm256_setzero_si256();
#endif
    for (; nb >= 2; nb -= 2, c += 16, w += 16) {          /* two blocks per step */
        const __m256i wv = mtvm_mm_w16_x86(w, w_u);
        const __m256i cv = _mm256_loadu_si256((const __m256i*)(const void*)c);
        d8 = _mm256_add_epi32(d8, _mm256_madd_epi16(wv, cv));
        x8 = _mm256_add_epi32(x8, _mm256_madd_epi16(wv, _mm256_shuffle_epi32(cv, 0x4E)));
    }
    d4 = mtvm_mm_fold256_x86(d8);
    x4 = mtvm_mm_fold256_x86(x8);
    if (nb) {                                               /* the last odd block */
        const __m128i wv = mtvm_mm_w8_x86(w, w_u);
        const __m128i cv = _mm_loadu_si128((const __m128i*)(const void*)c);
        d4 = _mm_add_epi32(d4, _mm_madd_epi16(wv, cv));
        x4 = _mm_add_epi32(x4, _mm_madd_epi16(wv, _mm_shuffle_epi32(cv, 0x4E)));
    }
    s = _mm_hadd_epi32(d4, x4);                  /* p0.o, p1.o1, p1.o, p0.o1 */
    acc[0] += _mm_cvtsi128_si32(s);
    acc[1] += _mm_extract_epi32(s, 3);
    if (pixels == 2) {
        acc[2] += _mm_extract_epi32(s, 2);
        acc[3] += _mm_extract_epi32(s, 1);
    }
}

/* The tail words of the column (tail_slot) and of the two channels at w (tl <= 3 bytes
 * each, interleaved o, o1) as one 128-bit block: [p0's slots][p1's]. */
static MTVM_ALWAYS_INLINE __m128i mtvm_mm_tail_w_x86(const uint8_t* w, int w_u, int32_t tl)
{
    const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 8, 8, 8, 8, 8, 8, 8);
    uint64_t t = 0;   /* slot q: o's byte 2q, o1's 2q + 1 (zero past tl) */
    __m128i v;
    memcpy(&t, w, 2 * (size_t)tl);
    v = _mm_shuffle_epi8(_mm_cvtsi64_si128((long long)t), split);
    return w_u ? _mm_cvtepu8_epi16(v) : _mm_cvtepi8_epi16(v);
}

/* One 128-bit column block cv (or the tail's) times two channel pairs' weights wa, wb:
 * s[0], s[1] += the (cv, swapped cv) products of wa, s[2], s[3] those of wb. */
static MTVM_ALWAYS_INLINE void mtvm_mm_madd4_x86(__m128i s[4], __m128i cv, __m128i wa,
                                                 __m128i wb)
{
    const __m128i cs = _mm_shuffle_epi32(cv, 0x4E);
    s[0] = _mm_add_epi32(s[0], _mm_madd_epi16(wa, cv));
    s[1] = _mm_add_epi32(s[1], _mm_madd_epi16(wa, cs));
    s[2] = _mm_add_epi32(s[2], _mm_madd_epi16(wb, cv));
    s[3] = _mm_add_epi32(s[3], _mm_madd_epi16(wb, cs));
}

/* acc += the (p0.o, p1.o1, p1.o, p0.o1) lanes of hadd(d4, x4), in acc's order (p0.o,
 * p0.o1, p1.o, p1.o1). */
static MTVM_ALWAYS_INLINE void mtvm_mm_add4_x86(int32_t* acc, __m128i d4, __m128i x4)
{
    const __m128i s = _mm_shuffle_epi32(_mm_hadd_epi32(d4, x4), 0x6C);
    _mm_storeu_si128((__m128i*)(void*)acc,
                     _mm_add_epi32(_mm_loadu_si128((const __m128i*)(const void*)acc), s));
}

/* Two channel pairs (four channels) x two pixels: acc[0..3] += the sums of
 * mtvm_mm2x2_x86 for the channel pair at w0, acc[4..7] for the pair at w1, over nb
 * blocks and the tl tail taps (one column block meets both pairs' weights: the column
 * loads shared, twice the independent sums). */
static MTVM_ALWAYS_INLINE void mtvm_mm2x4_x86(const int16_t* c, const uint8_t* w0,
                                              const uint8_t* w1, int w_u, int32_t nb,
                                              int32_t tl, int32_t* acc)
{
    __m128i acc4[4];   /* the 128-bit sums of d8, x8, e8, y8 */
#if defined(MTVM_MM_S16_VNNI)
    __m512i d16 = _mm512_setzero_si512(), x16 = _mm512_setzero_si512();
    __m512i e16 = _mm512_setzero_si512(), y16 = _mm512_setzero_si512();
    __m256i d8, x8, e8, y8;
    for (; nb >= 4; nb -= 4, c += 32, w0 += 32, w1 += 32) {   /* four blocks per step */
        const __m512i cv = _mm512_loadu_si512((const void*)c);
        const __m512i cs = _mm512_shuffle_epi32(cv, (_MM_PERM_ENUM)0x4E);
        const __m512i wa = mtvm_mm_w32_x86(w0, w_u);
        const __m512i wb = mtvm_mm_w32_x86(w1, w_u);
        d16 = _mm512_dpwssd_epi32(d16, wa, cv);
        x16 = _mm512_dpwssd_epi32(x16, wa, cs);
        e16 = _mm512_dpwssd_epi32(e16, wb, cv);
        y16 = _mm512_dpwssd_epi32(y16, wb, cs);
    }
    d8 = mtvm_mm_fold512_x86(d16);
    x8 = mtvm_mm_fold512_x86(x16);
    e8 = mtvm_mm_fold512_x86(e16);
    y8 = mtvm_mm_fold512_x86(y16);
#else
    __m256i d8 = _mm256_setzero_si256(), x8 = _mm256_setzero_si256();
    __m256i e8 = _mm256_setzero_si256(), y8 = _mm256_setzero_si256();
#endif
    for (; nb >= 2; nb -= 2, c += 16, w0 += 16, w1 += 16) {   /* two blocks per step */
        const __m256i cv = _mm256_loadu_si256((const __m256i*)(const void*)c);
        const __m256i cs = _mm256_shuffle_epi32(cv, 0x4E);
        const __m256i wa = mtvm_mm_w16_x86(w0, w_u);
        const __m256i wb = mtvm_mm_w16_x86(w1, w_u);
        d8 = _mm256_add_epi32(d8, _mm256_madd_epi16(wa, cv));
        x8 = _mm256_add_epi32(x8, _mm256_madd_epi16(wa, cs));
        e8 = _mm256_add_epi32(e8, _mm256_madd_epi16(wb, cv));
        y8 = _mm256_add_epi32(y8, _mm256_madd_epi16(wb, cs));
    }
    acc4[0] = mtvm_mm_fold256_x86(d8);
    acc4[1] = mtvm_mm_fold256_x86(x8);
    acc4[2] = mtvm_mm_fold256_x86(e8);
    acc4[3] = mtvm_mm_fold256_x86(y8);
    if (nb) {                                               /* the last odd block */
        mtvm_mm_madd4_x86(acc4, _mm_loadu_si128((const __m128i*)(const void*)c),
                          mtvm_mm_w8_x86(w0, w_u), mtvm_mm_w8_x86(w1, w_u));
        c += 8, w0 += 8, w1 += 8;
    }
    if (tl) {   /* the tail words (tail_slot), made a block: [p0's slots][p1's] */
        const __m128i cv = tl <= 2 ?
            _mm_unpacklo_epi32(_mm_loadl_epi64((const __m128i*)(const void*)c),
                               _mm_setzero_si128())      /* two slots each */
            : _mm_loadu_si128((const __m128i*)(const void*)c);
        mtvm_mm_madd4_x86(acc4, cv, mtvm_mm_tail_w_x86(w0, w_u, tl),
                          mtvm_mm_tail_w_x86(w1, w_u, tl));
    }
    mtvm_mm_add4_x86(acc, acc4[0], acc4[1]);
    mtvm_mm_add4_x86(acc + 4, acc4[2], acc4[3]);
}

/* Per-channel values (multipliers, shifts) of channels o..o + 3 at p, in the lane order
 * of mtvm_mm2x4_x86's sums: o, o + 1, o, o + 1, o + 2, o + 3, o + 2, o + 3. */
static MTVM_ALWAYS_INLINE __m256i mtvm_mm2x4_lanes_x86(const int32_t* p)
{
    const __m128i v = _mm_loadu_si128((const __m128i*)(const void*)p);
    return _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(v),
                                       _mm256_setr_epi32(0, 1, 0, 1, 2, 3, 2, 3));
}

/* r = the eight sums at a requantized without ties (QConv's fast path, conv._Store):
 * hi = (a * mult) >> 32, then with one shift m > 0: (hi + add) >> m; with m = 0, per
 * channel: ((hi >> (-2 - shift)) + add) >> 1 (add = 2 y_zp + 1); clamped to [lo, hi_].
 * m and add are constants at each call. */
static MTVM_ALWAYS_INLINE void mtvm_mm2x4_requantize_x86(int32_t r[8], const int32_t* a,
                                                         __m256i mult, __m256i shift, int32_t m,
                                                         int32_t add, int32_t lo, int32_t hi_)
{
    __m256i v = mtvm_mulhi_x86(_mm256_loadu_si256((const __m256i*)(const void*)a), mult);
    if (m > 0) {
        v = _mm256_srai_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(add)), m);
    } else {
        v = _mm256_srav_epi32(v, _mm256_sub_epi32(_mm256_set1_epi32(-2), shift));
        v = _mm256_srai_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(add)), 1);
    }
    v = _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(lo)), _mm256_set1_epi32(hi_));
    _mm256_storeu_si256((__m256i*)(void*)r, v);
}
#endif

#endif  /* MTVM_MM_S16_X86_H_ */
