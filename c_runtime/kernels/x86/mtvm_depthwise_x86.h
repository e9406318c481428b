/* mtvm_depthwise_x86.h: One channel plane of QConv's int8 depthwise kernel on x86 hosts
 * (AVX2, AVX-512 where the build has it): int32 sums of int16 tap pairs, from the input
 * widened once (mtvm_dw_w16_x86) or from its bytes a tap pair at a time.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DEPTHWISE_X86_H_
#define MTVM_DEPTHWISE_X86_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_int8_x86.h"
#include "mtvm_mulhi_s32_x86.h"
#include "mtvm_requantize.h"

#if defined(MTVM_INT8_X86)
/* How a plane's sums become outputs. exact: mtvm_requantize(acc, mult, shift) + y_zp
 * (ties to even; QConv's general path); else the fast path where ties cannot occur and
 * nothing overflows, (high word of acc * mult + rnd) >> shr with the rounding and the
 * output zero point in rnd (mtvm_dw_requantize). Then clamped to [lo, hi]. */
typedef struct {
    int32_t exact, mult, shift, y_zp, rnd, shr, lo, hi;
} mtvm_dw_requant_x86_t;

/* mtvm_requantize(acc, mult, shift) per lane for shift < 0 (m = -1 - shift >= 0): the
 * high word of the 64-bit product, rounded by the low word as the C does. */
static MTVM_ALWAYS_INLINE __m256i mtvm_requantize_x86(__m256i acc, __m256i mult, int32_t m)
{
    const __m256i zero = _mm256_setzero_si256();
    const __m256i even = _mm256_mul_epi32(acc, mult);                        /* lanes 0, 2, .. */
    const __m256i odd = _mm256_mul_epi32(_mm256_srli_epi64(acc, 32), _mm256_srli_epi64(mult, 32));
    const __m256i hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    const __m256i lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    if (m == 0) {
        /* + 1 where lo > 2^31 (unsigned), or lo == 2^31 and hi is odd */
        const __m256i lo_c = _mm256_xor_si256(lo, _mm256_set1_epi32(INT32_MIN));
        const __m256i above = _mm256_cmpgt_epi32(lo_c, zero);
        const __m256i tie_odd = _mm256_and_si256(_mm256_cmpeq_epi32(lo_c, zero),
                                                 _mm256_srai_epi32(_mm256_slli_epi32(hi, 31), 31));
        return _mm256_sub_epi32(hi, _mm256_or_si256(above, tie_odd));
    } else {
        /* (hi + 2^(m-1) - 1) >> m where hi >> m is even and lo is 0 (a tie rounds down to
         * even), else (hi + 2^(m-1)) >> m */
        const __m128i n = _mm_cvtsi32_si128(m);
        const __m256i even_q = _mm256_cmpeq_epi32(
            _mm256_and_si256(_mm256_sra_epi32(hi, n), _mm256_set1_epi32(1)), zero);
        const __m256i down = _mm256_and_si256(even_q, _mm256_cmpeq_epi32(lo, zero));
        return _mm256_sra_epi32(
            _mm256_add_epi32(_mm256_add_epi32(hi, _mm256_set1_epi32(1 << (m - 1))), down), n);
    }
}

/* Eight sums requantized as rq says and clamped, as int32 lanes. */
static MTVM_ALWAYS_INLINE __m256i mtvm_dw_requant8_x86(__m256i acc,
                                                       const mtvm_dw_requant_x86_t* rq)
{
    const __m256i mult = _mm256_set1_epi32(rq->mult);
    __m256i v;
    if (rq->exact) {
        v = _mm256_add_epi32(mtvm_requantize_x86(acc, mult, -1 - rq->shift),
                             _mm256_set1_epi32(rq->y_zp));
    } else {
        v = _mm256_sra_epi32(_mm256_add_epi32(mtvm_mulhi_x86(acc, mult),
                                              _mm256_set1_epi32(rq->rnd)),
                             _mm_cvtsi32_si128(rq->shr));
    }
    return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(rq->lo)),
                            _mm256_set1_epi32(rq->hi));
}

/* Requantizes eight sums as rq says and stores their low bytes at y. */
static MTVM_ALWAYS_INLINE void mtvm_dw_store8_x86(uint8_t* y, __m256i acc,
                                                  const mtvm_dw_requant_x86_t* rq)
{
    mtvm_store_low_bytes8_x86(y, mtvm_dw_requant8_x86(acc, rq));
}

/* One sum, as mtvm_dw_store8_x86 requantizes and clamps it. */
static MTVM_ALWAYS_INLINE int32_t mtvm_dw_requant1_x86(int32_t acc, const mtvm_dw_requant_x86_t* rq)
{
    if (rq->exact) {
        acc = mtvm_requantize(acc, rq->mult, rq->shift) + rq->y_zp;
    } else {
        acc = ((int32_t)(((int64_t)acc * rq->mult) >> 32) + rq->rnd) >> rq->shr;
    }
    return acc < rq->lo ? rq->lo : (acc > rq->hi ? rq->hi : acc);
}

/* The bytes p[0], p[s], ..., p[7 s] (s: 1 or 2) in the low eight bytes. Reads no byte
 * past p[7 s]. */
static MTVM_ALWAYS_INLINE __m128i mtvm_dw_bytes8_x86(const uint8_t* p, int32_t s)
{
    __m128i v = _mm_loadl_epi64((const __m128i*)(const void*)p);
    if (s == 2) {   /* p[0..7] and p[7..14], then the even bytes of p */
        v = _mm_shuffle_epi8(_mm_unpacklo_epi64(v, _mm_loadl_epi64((const __m128i*)(const void*)(p + 7))),
                             _mm_setr_epi8(0, 2, 4, 6, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1,
                                           -1));
    }
    return v;
}

/* acc of the eight pixels at r (stride sw) over the kh x kw window, taps dh rows and dw
 * columns apart, weights w (centered: zero point subtracted, so within +-255), starting
 * from acc. Two taps a step: their bytes interleaved and widened to int16 lanes, one
 * VPMADDWD with the two weights as an int16 pair gives each pixel both products (a
 * 32-bit multiply a tap, VPMULLD, costs twice the micro-ops); an odd last tap pairs with
 * itself and a zero weight. The same integer sums. */
static MTVM_ALWAYS_INLINE __m256i mtvm_dw_window8_x86(__m256i acc, const uint8_t* r, int x_u,
                                                      int32_t row_w, int32_t kh, int32_t kw,
                                                      int32_t sw, int32_t dh, int32_t dw,
                                                      const int32_t* w)
{
    const int32_t taps = kh * kw;
    for (int32_t t = 0; t < taps; t += 2) {
        const int32_t u = t + 1 < taps ? t + 1 : t;
        const __m128i a = mtvm_dw_bytes8_x86(r + (t / kw) * dh * row_w + (t % kw) * dw, sw);
        const __m128i b = mtvm_dw_bytes8_x86(r + (u / kw) * dh * row_w + (u % kw) * dw, sw);
        const __m128i ab = _mm_unpacklo_epi8(a, b);
        const __m256i x = x_u ? _mm256_cvtepu8_epi16(ab) : _mm256_cvtepi8_epi16(ab);
        const uint32_t wu = u > t ? (uint32_t)w[u] : 0u;
        const __m256i wp = _mm256_set1_epi32((int32_t)((wu << 16) | ((uint32_t)w[t] & 0xFFFFu)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x, wp));
    }
    return acc;
}

/* The widened-pair form of a plane (mtvm_dw_plane_x86's first choice where it applies:
 * column dilation 1, both strides 1 or 2). The input, widened to int16 once, read as
 * int32 lanes holds tap pairs: at stride 1 lane j of the int16 row from x + q + kx is
 * (x[q + 2j + kx], x[q + 2j + kx + 1]), taps kx and kx + 1 of pixel q + 2j, so one
 * VPMADDWD with the weight pair gives eight pixels two taps each, the odd pixels from
 * x + q + 1 + kx; at stride 2 the row from x + 2q + kx gives pixels q .. q + 7. No byte
 * interleave a tap pair: the shuffles, on one port, bounded the form above (two for
 * eight pixels and two taps). An odd kw's last tap pairs with the next input, weight 0.
 * The input goes in chunks whose widened form fits MTVM_DW_W16_ELEMS int16 on the stack,
 * and the outputs sixteen (stride 2: eight) a block. Either the plane goes as one flat row
 * (as the narrow planes below): a chunk's blocks, the last overlapping, land in a staging
 * row and their rows' first ow columns are copied out (12 KB of stack in all); or, rows of
 * a block or more, row by row: a chunk is whole output rows, each row's blocks stored in
 * place. With AVX-512 (BW) a block is sixteen sums a vector, with VNNI VPDPWSSD (the add
 * in it). Returns 0 where it does not apply. */
#define MTVM_DW_W16_ELEMS 4096

/* n bytes from src to dst (buffers that do not overlap) by 16-, 8- or 4-byte moves, the
 * last overlapping the one before: a row of a small plane, where a call of memcpy cost
 * more than the row's sums. n <= cap, a constant at each call (the row's width): the
 * moves wider than a row fold away, which under UBSan gcc could not see
 * (-Warray-bounds, -Wstringop-overflow on a plane of one-pixel rows). */
static MTVM_ALWAYS_INLINE void mtvm_dw_copy_short_x86(uint8_t* dst, const uint8_t* src, int32_t n,
                                                      int32_t cap)
{
    if (cap >= 16 && n >= 16) {
        for (int32_t i = 0;; i += 16) {
            if (i + 16 > n) i = n - 16;
            _mm_storeu_si128((__m128i*)(void*)(dst + i),
                             _mm_loadu_si128((const __m128i*)(const void*)(src + i)));
            if (i + 16 >= n) break;
        }
    } else if (cap >= 8 && n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (cap >= 4 && n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else {
        for (int32_t i = 0; i < n; ++i) dst[i] = src[i];
    }
}

#if defined(__AVX512BW__)
#define MTVM_DW_W16_LANES 16   /* int32 sums a vector */
#define MTVM_DW_W16_RQ_EXACT 16   /* instructions of a vector's exact requantization */

/* mtvm_requantize_x86 on sixteen lanes (the conditions as masks). */
static MTVM_ALWAYS_INLINE __m512i mtvm_requantize16_x86(__m512i acc, __m512i mult, int32_t m)
{
    const __m512i one = _mm512_set1_epi32(1), zero = _mm512_setzero_si512();
    const __m512i even = _mm512_mul_epi32(acc, mult);                        /* lanes 0, 2, .. */
    const __m512i odd = _mm512_mul_epi32(_mm512_srli_epi64(acc, 32), _mm512_srli_epi64(mult, 32));
    const __m512i hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
    const __m512i lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    if (m == 0) {
        /* + 1 where lo > 2^31 (unsigned), or lo == 2^31 and hi is odd */
        const __m512i lo_c = _mm512_xor_si512(lo, _mm512_set1_epi32(INT32_MIN));
        const __mmask16 up = _mm512_cmpgt_epi32_mask(lo_c, zero) |
                             (_mm512_cmpeq_epi32_mask(lo_c, zero) & _mm512_test_epi32_mask(hi, one));
        return _mm512_mask_add_epi32(hi, up, hi, one);
    }
    /* (hi + 2^(m-1) - 1) >> m where hi >> m is even and lo is 0, else (hi + 2^(m-1)) >> m */
    const __m128i n = _mm_cvtsi32_si128(m);
    const __mmask16 down = _mm512_testn_epi32_mask(_mm512_sra_epi32(hi, n), one) &
                           _mm512_cmpeq_epi32_mask(lo, zero);
    const __m512i t = _mm512_add_epi32(hi, _mm512_set1_epi32(1 << (m - 1)));
    return _mm512_sra_epi32(_mm512_mask_sub_epi32(t, down, t, one), n);
}

/* Sixteen sums requantized and clamped as mtvm_dw_requant8_x86 does. */
static MTVM_ALWAYS_INLINE __m512i mtvm_dw_requant16_x86(__m512i acc,
                                                        const mtvm_dw_requant_x86_t* rq)
{
    const __m512i mult = _mm512_set1_epi32(rq->mult);
    __m512i v;
    if (rq->exact) {
        v = _mm512_add_epi32(mtvm_requantize16_x86(acc, mult, -1 - rq->shift),
                             _mm512_set1_epi32(rq->y_zp));
    } else {
        v = _mm512_sra_epi32(_mm512_add_epi32(mtvm_mulhi16_x86(acc, mult),
                                              _mm512_set1_epi32(rq->rnd)),
                             _mm_cvtsi32_si128(rq->shr));
    }
    return _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(rq->lo)),
                            _mm512_set1_epi32(rq->hi));
}

/* The block's sums (e: its even pixels, or all at stride 2; o: its odd ones) requantized
 * into out (32 / s bytes). */
static MTVM_ALWAYS_INLINE void mtvm_dw_w16_store_x86(uint8_t* out, __m512i e, __m512i o,
                                                     int32_t s, const mtvm_dw_requant_x86_t* rq)
{
    if (s == 1) {   /* int16 lane j: even pixel j's output, then odd pixel j's */
        const __m512i v = _mm512_or_si512(
            _mm512_and_si512(mtvm_dw_requant16_x86(e, rq), _mm512_set1_epi32(0xFF)),
            _mm512_slli_epi32(mtvm_dw_requant16_x86(o, rq), 8));
        _mm256_storeu_si256((__m256i*)(void*)out, _mm512_cvtepi32_epi16(v));
    } else {
        _mm_storeu_si128((__m128i*)(void*)out, _mm512_cvtepi32_epi8(mtvm_dw_requant16_x86(e, rq)));
    }
}

typedef __m512i mtvm_dw_vec_x86;
#define MTVM_DW_SET1(v) _mm512_set1_epi32(v)
#define MTVM_DW_LOAD(p) _mm512_loadu_si512((const void*)(p))
#if defined(__AVX512VNNI__)
#define MTVM_DW_MAC(acc, x, pair) _mm512_dpwssd_epi32(acc, x, pair)
#else
#define MTVM_DW_MAC(acc, x, pair) _mm512_add_epi32(acc, _mm512_madd_epi16(x, pair))
#endif
#else
#define MTVM_DW_W16_LANES 8
#define MTVM_DW_W16_RQ_EXACT 20

/* The block's sums (e: its even pixels, or all at stride 2; o: its odd ones) requantized
 * into out (16 / s bytes). */
static MTVM_ALWAYS_INLINE void mtvm_dw_w16_store_x86(uint8_t* out, __m256i e, __m256i o,
                                                     int32_t s, const mtvm_dw_requant_x86_t* rq)
{
    if (s == 1) {   /* byte 2j: even pixel j's output, 2j + 1: odd pixel j's */
        const __m256i v = _mm256_or_si256(
            _mm256_and_si256(mtvm_dw_requant8_x86(e, rq), _mm256_set1_epi32(0xFF)),
            _mm256_slli_epi32(mtvm_dw_requant8_x86(o, rq), 8));
        const __m256i lo16 = _mm256_shuffle_epi8(v, _mm256_setr_epi8(
            0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
            0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1));
        _mm_storeu_si128((__m128i*)(void*)out,
                         _mm_unpacklo_epi64(_mm256_castsi256_si128(lo16),
                                            _mm256_extracti128_si256(lo16, 1)));
    } else {
        mtvm_dw_store8_x86(out, e, rq);
    }
}

typedef __m256i mtvm_dw_vec_x86;
#define MTVM_DW_SET1(v) _mm256_set1_epi32(v)
#define MTVM_DW_LOAD(p) _mm256_loadu_si256((const __m256i*)(const void*)(p))
#define MTVM_DW_MAC(acc, x, pair) _mm256_add_epi32(acc, _mm256_madd_epi16(x, pair))
#endif

/* One block: the 2 MTVM_DW_W16_LANES / s pixels whose widened input starts at b,
 * requantized into out. */
static MTVM_ALWAYS_INLINE void mtvm_dw_w16_block_x86(uint8_t* out, const int16_t* b, int32_t s,
                                                     int32_t row_w, int32_t kh, int32_t kp,
                                                     int32_t dh, const int32_t* wp,
                                                     int32_t bias_in,
                                                     const mtvm_dw_requant_x86_t* rq)
{
    mtvm_dw_vec_x86 e = MTVM_DW_SET1(bias_in), o = e;
    for (int32_t ky = 0; ky < kh; ++ky) {
        const int16_t* r = b + ky * dh * row_w;
        for (int32_t j = 0; j < kp; ++j) {
            const mtvm_dw_vec_x86 pair = MTVM_DW_SET1(wp[ky * kp + j]);
            e = MTVM_DW_MAC(e, MTVM_DW_LOAD(r + 2 * j), pair);
            if (s == 1) o = MTVM_DW_MAC(o, MTVM_DW_LOAD(r + 2 * j + 1), pair);
        }
    }
    mtvm_dw_w16_store_x86(out, e, o, s, rq);
}

/* The n int16 at buf: the input bytes from xc, those before `left` (what is left of the
 * input from xc), then zeros. */
static MTVM_ALWAYS_INLINE void mtvm_dw_widen_x86(int16_t* buf, const uint8_t* xc, int x_u,
                                                 int32_t n, int32_t left)
{
    const int32_t valid = left < n ? left : n;
    int32_t i = 0;
    for (; i + 16 <= valid; i += 16) {
        const __m128i b = _mm_loadu_si128((const __m128i*)(const void*)(xc + i));
        _mm256_storeu_si256((__m256i*)(void*)(buf + i),
                            x_u ? _mm256_cvtepu8_epi16(b) : _mm256_cvtepi8_epi16(b));
    }
    for (; i < n; ++i) buf[i] = i < valid ? (int16_t)mtvm_byte_at(xc, i, x_u) : 0;
}

static MTVM_ALWAYS_INLINE int mtvm_dw_w16_x86(const uint8_t* xc, int x_u, int32_t row_w,
                                                   uint8_t* yc, int32_t oh, int32_t ow,
                                                   int32_t kh, int32_t kw, int32_t s,
                                                   int32_t dh, const int32_t* w,
                                                   int32_t bias_in, const mtvm_dw_requant_x86_t* rq)
{
    const int32_t flat = (oh - 1) * row_w + ow, blk = 2 * MTVM_DW_W16_LANES / s;
    const int32_t kp = (kw + 1) / 2;
    /* input elements past s q a pixel's pairs read (the last one of an odd kw: one more) */
    const int32_t halo = (kh - 1) * dh * row_w + 2 * kp;
    const int32_t per = (MTVM_DW_W16_ELEMS - halo) / s / blk * blk;   /* pixels a chunk */
    /* Or row by row (rows of at least a block): the blocks of a row, the last one
     * overlapping, stored in place, and no pixel past a row's end computed -- at stride 2
     * the flat row is half such pixels. Output rows a chunk: */
    const int32_t row_room = MTVM_DW_W16_ELEMS - halo - s * (ow - 1);
    const int32_t rows_per = ow >= blk && row_room >= 0 ? row_room / (s * row_w) + 1 : 0;
    const int flat_ok = flat >= blk && per >= blk;
    if ((!flat_ok && !rows_per) || kh * kp > 32) return 0;
    int by_rows;
    /* Whether it pays: vector instructions counted per block, with its per-plane work
     * (the widening, a copy a row in the flat form, some 120 more: measured on 8 x 8
     * planes), against the byte form's below. A plane of few pixels (MobileNetV2's 8 x 8)
     * keeps the byte form; the exact requantization (about 20 instructions a vector)
     * weighs on both. Constants at each call: the choice folds. MTVM_DW_FORM, for tests
     * and measurements, takes one form where it applies: 0 bytes, 1 flat, 2 rows. */
    {
        const int32_t rq8 = rq->exact ? 20 : 8, taps = kh * kw;
        /* a tap pair: its bytes loaded, interleaved, widened, one VPMADDWD and an add; at
         * stride 2 each tap's eight bytes gathered from two loads too (three shuffles a
         * tap pair where stride 1 has one) */
        const int32_t byte_block = (taps + 1) / 2 * (s == 1 ? 6 : 12) + rq8 + 2;
        const int32_t byte_cost = ow >= 8 ? oh * ((ow + 7) / 8) * byte_block
                                          : (flat + 7) / 8 * (byte_block + 16);
        const int32_t w16_block = kh * kp * (s == 1 ? 2 : 1) * 3 +
                                  (s == 1 ? 2 : 1) * (rq->exact ? MTVM_DW_W16_RQ_EXACT : 8) + 4;
        const int32_t widen = (s * flat + halo) / 16 * 3 + 2 * kh * kp + 120;
        const int32_t flat_cost = flat_ok ? (flat + blk - 1) / blk * w16_block + 12 * oh + widen
                                          : INT32_MAX;
        const int32_t rows_cost = rows_per ? oh * ((ow + blk - 1) / blk) * w16_block + widen
                                           : INT32_MAX;
        by_rows = rows_cost < flat_cost;
#if defined(MTVM_DW_FORM)
        (void)byte_cost;
        if (MTVM_DW_FORM == 0 || (MTVM_DW_FORM == 1 && !flat_ok) ||
            (MTVM_DW_FORM == 2 && !rows_per)) {
            return 0;
        }
        by_rows = MTVM_DW_FORM == 2;
#else
        if ((by_rows ? rows_cost : flat_cost) >= byte_cost) return 0;
#endif
    }
    /* the input elements the windows read: the rest of the last pair reads 0 */
    const int32_t extent = s * (flat - 1) + (kh - 1) * dh * row_w + kw;
    int32_t wp[32];
    for (int32_t ky = 0; ky < kh; ++ky) {
        for (int32_t i = 0; i < kp; ++i) {
            const int32_t t = ky * kw + 2 * i;
            const uint32_t hi = 2 * i + 1 < kw ? (uint32_t)w[t + 1] : 0u;
            wp[ky * kp + i] = (int32_t)((hi << 16) | ((uint32_t)w[t] & 0xFFFFu));
        }
    }
    int16_t buf[MTVM_DW_W16_ELEMS];
    if (by_rows) {
        for (int32_t r0 = 0; r0 < oh; r0 += rows_per) {
            const int32_t r1 = r0 + rows_per < oh ? r0 + rows_per : oh;
            const int32_t base = r0 * row_w, last = (r1 - 1) * row_w + ow - 1;
            const int32_t n = s * (last - base) + halo, from = s * base;   /* <= ELEMS */
            mtvm_dw_widen_x86(buf, xc + from, x_u, n, extent - from);
            for (int32_t r = r0; r < r1; ++r) {
                for (int32_t c = 0;; c += blk) {
                    if (c + blk > ow) c = ow - blk;   /* the last, overlapping block */
                    mtvm_dw_w16_block_x86(yc + (size_t)r * (size_t)ow + (size_t)c,
                                          buf + s * (r * row_w + c - base), s, row_w, kh, kp,
                                          dh, wp, bias_in, rq);
                    if (c + blk >= ow) break;
                }
            }
        }
        return 1;
    }
    uint8_t stage[MTVM_DW_W16_ELEMS + 32];
    for (int32_t q0 = 0; q0 < flat; q0 += per) {
        const int32_t q1 = q0 + per < flat ? q0 + per : flat;
        /* a last chunk shorter than a block starts a block before its end */
        const int32_t base = q1 - q0 < blk ? q1 - blk : q0;
        const int32_t n = s * (q1 - 1 - base) + halo, from = s * base;   /* <= s per + halo */
        mtvm_dw_widen_x86(buf, xc + from, x_u, n, extent - from);
        for (int32_t q = base; q < q1; q += blk) {
            if (q + blk > q1) q = q1 - blk;   /* the last, overlapping block */
            mtvm_dw_w16_block_x86(stage + (q - base), buf + s * (q - base), s, row_w, kh, kp,
                                  dh, wp, bias_in, rq);
        }
        /* the rows' columns below ow of flat pixels [q0, q1) */
        for (int32_t r = q0 / row_w; r * row_w < q1; ++r) {
            const int32_t lo = q0 > r * row_w ? q0 - r * row_w : 0;
            const int32_t hi = q1 - r * row_w < ow ? q1 - r * row_w : ow;
            if (hi > lo) {
                mtvm_dw_copy_short_x86(yc + (size_t)r * (size_t)ow + (size_t)lo,
                                       stage + (r * row_w + lo - base), hi - lo, ow);
            }
        }
    }
    return 1;
}

/* One output channel: yc[oh][ow] from the plane xc (rows row_w bytes apart; padded
 * already, or the window fits). Output row oy reads input rows oy * sh + ky * dh, pixel
 * ox columns ox * sw + kx * dw. The sums start at bias_in (the zero-point terms folded
 * in), then requantize as rq says. A row goes eight pixels per vector (sixteen: two
 * independent sums); where ow is not a multiple of eight, the last block is the row's
 * last eight pixels, overlapping the one before (the window of the row's last pixel
 * lies inside the input row, so no block reads past it). Rows narrower than eight
 * pixels one by one. Called with constant shapes: always inlined. */
static MTVM_ALWAYS_INLINE void mtvm_dw_plane_x86(const uint8_t* xc, int x_u, int32_t row_w,
                                                 uint8_t* yc, int32_t oh, int32_t ow,
                                                 int32_t kh, int32_t kw, int32_t sh, int32_t sw,
                                                 int32_t dh, int32_t dw, const int32_t* w,
                                                 int32_t bias_in, mtvm_dw_requant_x86_t rq)
{
    const __m256i vbias = _mm256_set1_epi32(bias_in);
    /* multipliers >= 1 (shift >= 0): the C routine, one pixel at a time */
    const int32_t vector_ok = !(rq.exact && rq.shift >= 0);
    const int32_t vector = ow >= 8 && vector_ok;
    /* Rows narrower than eight pixels at stride 1 or 2 both ways (a keyword-spotting
     * DS-CNN's 25 x 5 planes, and its stride-2 layer onto 16 x 5): the plane as one flat
     * row of (oh - 1) row_w + ow pixels, eight a vector -- the row_w - ow pixels past each
     * row's end computed too and not stored. Flat pixel q reads from xc + s q, s the
     * stride: pixel (oy, ox) = q - oy row_w reads row s oy, column s ox, as it should. No
     * block reads past the last pixel's window: a tap's reads grow with q, and no block
     * goes past the last pixel (the last one overlaps the one before). Pixel by pixel
     * these planes ran at 3 MACs a nanosecond. */
    const int32_t flat = (oh - 1) * row_w + ow;
    if (vector_ok && dw == 1 && sh == sw && (sw == 1 || sw == 2) &&
        mtvm_dw_w16_x86(xc, x_u, row_w, yc, oh, ow, kh, kw, sw, dh, w, bias_in, &rq)) {
        return;
    }
    if (vector_ok && ow < 8 && sh == sw && (sw == 1 || sw == 2) && flat >= 8) {
        for (int32_t q0 = 0; q0 < flat; q0 += 8) {
            if (q0 + 8 > flat) q0 = flat - 8;
            uint8_t t[8];
            mtvm_dw_store8_x86(t, mtvm_dw_window8_x86(vbias, xc + (size_t)q0 * (size_t)sw, x_u,
                                                      row_w, kh, kw, sw, dh, dw, w), &rq);
            int32_t row = q0 / row_w, col = q0 - row * row_w;
            for (int32_t j = 0; j < 8; ++j) {
                if (col < ow) {
                    yc[(size_t)row * (size_t)ow + (size_t)col] = t[j];
                }
                if (++col == row_w) {
                    col = 0;
                    ++row;
                }
            }
        }
        return;
    }
    for (int32_t oy = 0; oy < oh; ++oy) {
        const uint8_t* r = xc + (size_t)oy * (size_t)(sh * row_w);
        uint8_t* y = yc + (size_t)oy * (size_t)ow;
        int32_t ox = 0;
        if (vector) {
            for (; ox + 16 <= ow; ox += 16) {
                const __m256i a = mtvm_dw_window8_x86(vbias, r + ox * sw, x_u, row_w, kh, kw, sw,
                                                      dh, dw, w);
                const __m256i b = mtvm_dw_window8_x86(vbias, r + (ox + 8) * sw, x_u, row_w, kh,
                                                      kw, sw, dh, dw, w);
                mtvm_dw_store8_x86(y + ox, a, &rq);
                mtvm_dw_store8_x86(y + ox + 8, b, &rq);
            }
            for (; ox < ow; ox += 8) {
                if (ox + 8 > ow) ox = ow - 8;   /* the last, overlapping block */
                mtvm_dw_store8_x86(y + ox, mtvm_dw_window8_x86(vbias, r + ox * sw, x_u, row_w, kh,
                                                               kw, sw, dh, dw, w), &rq);
            }
        }
        for (; ox < ow; ++ox) {
            int32_t acc = bias_in;
            for (int32_t ky = 0; ky < kh; ++ky) {
                for (int32_t kx = 0; kx < kw; ++kx) {
                    acc += mtvm_byte_at(r + ox * sw + ky * dh * row_w + kx * dw, 0, x_u) *
                           w[ky * kw + kx];
                }
            }
            y[ox] = (uint8_t)mtvm_dw_requant1_x86(acc, &rq);
        }
    }
}
#endif

#endif  /* MTVM_DEPTHWISE_X86_H_ */
