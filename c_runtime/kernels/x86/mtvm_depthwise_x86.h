/* mtvm_depthwise_x86.h: One channel plane of QConv's int8 depthwise kernel on x86 hosts
 * (AVX2): eight output pixels of a row per vector, int32 sums of int16 tap pairs.
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

/* Requantizes eight sums as rq says and stores their low bytes at y. */
static MTVM_ALWAYS_INLINE void mtvm_dw_store8_x86(uint8_t* y, __m256i acc,
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
    v = _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(rq->lo)), _mm256_set1_epi32(rq->hi));
    mtvm_store_low_bytes8_x86(y, v);
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
