/* mtvm_conv_x86.h: QConv's direct KxK path on x86 hosts (AVX2): eight output pixels of a
 * row per vector, their taps read from the input rows with vector loads, no column.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_CONV_X86_H_
#define MTVM_CONV_X86_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_int8_x86.h"
#include "mtvm_pw_conv_x86.h"

#if defined(MTVM_INT8_X86)
/* Why not the im2col column on x86: building it reads every channel plane at the same
 * offset for each output pixel; with planes a multiple of 4 KiB apart all those lines
 * fall into one L1 set and the column build, not the dot products, took 3/4 of the
 * time (denoise_unet_int8). Here each input row segment is loaded once per eight
 * pixels. */

/* acc += a . b as int16 pairs into int32 lanes (VPDPWSSD where AVX-512 VL/VNNI have it). */
static MTVM_ALWAYS_INLINE __m256i mtvm_dot_pairs8_x86(__m256i acc, __m256i a, __m256i b)
{
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

/* The eight input bytes of one channel row for output pixels ox0..ox0 + 7 at tap column
 * ix0 = ox0 * sw - pw + kx * dw: x[ix0 + i * sw] (sw 1 or 2), zx where outside [0, wd).
 * Vector loads where the eight are inside the row, else a gather through a buffer. */
static MTVM_ALWAYS_INLINE __m128i mtvm_conv_row8_x86(const uint8_t* row, int32_t ix0, int32_t sw,
                                                     int32_t wd, uint8_t zx)
{
    if (ix0 >= 0 && ix0 + 7 * sw < wd) {
        __m128i v = _mm_loadl_epi64((const __m128i*)(const void*)(row + ix0));
        if (sw == 2) {   /* bytes ix0..ix0 + 14: the even ones */
            v = _mm_shuffle_epi8(
                _mm_unpacklo_epi64(v, _mm_loadl_epi64((const __m128i*)(const void*)(row + ix0 + 7))),
                _mm_setr_epi8(0, 2, 4, 6, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1));
        }
        return v;
    } else {
        uint8_t b[8];
        for (int32_t i = 0; i < 8; ++i) {
            const int32_t ix = ix0 + i * sw;
            b[i] = ix >= 0 && ix < wd ? row[ix] : zx;
        }
        return _mm_loadl_epi64((const __m128i*)(const void*)b);
    }
}

/* xp[k * cp + t] = (x[2t][.], x[2t + 1][.]) as int16 pairs of tap k = (ky, kx) for the
 * eight output pixels (oy, ox0..ox0 + 7) of the cg channel planes at xg (h x wd, hw
 * apart; int8, or uint8 when x_u); positions in the padding read as the zero point zx. */
static MTVM_ALWAYS_INLINE void mtvm_conv_tile8_x86(__m256i* xp, const uint8_t* xg, int x_u,
                                                   int32_t cg, int32_t h, int32_t wd,
                                                   int32_t kh, int32_t kw, int32_t sh,
                                                   int32_t sw, int32_t ph, int32_t pw,
                                                   int32_t dh, int32_t dw, int32_t oy,
                                                   int32_t ox0, uint8_t zx)
{
    const int32_t cp = (cg + 1) / 2;
    const size_t hw = (size_t)h * (size_t)wd;
    const __m128i zv = _mm_set1_epi8((char)zx);
    /* channel pairs outermost: a pair's rows (its lines) serve all kh x kw taps before
     * the next pair's are read, instead of every plane's row per tap */
    for (int32_t t = 0; t < cp; ++t) {
        const uint8_t* xt = xg + 2 * (size_t)t * hw;
        const int32_t odd = 2 * t + 1 < cg;
        for (int32_t ky = 0; ky < kh; ++ky) {
            const int32_t iy = oy * sh - ph + ky * dh;
            const int32_t in_rows = iy >= 0 && iy < h;
            const uint8_t* r = xt + (size_t)(in_rows ? iy : 0) * (size_t)wd;
            for (int32_t kx = 0; kx < kw; ++kx) {
                const int32_t ix0 = ox0 * sw - pw + kx * dw;
                __m128i a = zv, e = zv, v;
                if (in_rows) {
                    a = mtvm_conv_row8_x86(r, ix0, sw, wd, zx);
                    if (odd) e = mtvm_conv_row8_x86(r + hw, ix0, sw, wd, zx);
                }
                v = _mm_unpacklo_epi8(a, e);
                xp[(ky * kw + kx) * cp + t] = x_u ? _mm256_cvtepu8_epi16(v) : _mm256_cvtepi8_epi16(v);
            }
        }
    }
}

/* xp[t] = (tap 2t, tap 2t + 1) as int16 pairs, taps in (ky, kx) order, of the one channel
 * plane at xg, for the eight output pixels (oy, ox0..ox0 + 7); the second of an odd last
 * pair is the zero point (its weight is 0). With one input channel, pairs of channels
 * would be half zeros: this halves the dot products (a keyword-spotting stem's 10 x 4). */
static MTVM_ALWAYS_INLINE void mtvm_conv_tile8_taps_x86(__m256i* xp, const uint8_t* xg, int x_u,
                                                        int32_t h, int32_t wd, int32_t kh,
                                                        int32_t kw, int32_t sh, int32_t sw,
                                                        int32_t ph, int32_t pw, int32_t dh,
                                                        int32_t dw, int32_t oy, int32_t ox0,
                                                        uint8_t zx)
{
    const __m128i zv = _mm_set1_epi8((char)zx);
    __m128i half = zv;
    for (int32_t k = 0; k < kh * kw; ++k) {
        const int32_t ky = k / kw, kx = k % kw;
        const int32_t iy = oy * sh - ph + ky * dh;
        __m128i v = zv;
        if (iy >= 0 && iy < h) {
            v = mtvm_conv_row8_x86(xg + (size_t)iy * (size_t)wd, ox0 * sw - pw + kx * dw, sw,
                                   wd, zx);
        }
        if (k % 2 == 0) {
            half = v;
        } else {
            const __m128i p = _mm_unpacklo_epi8(half, v);
            xp[k / 2] = x_u ? _mm256_cvtepu8_epi16(p) : _mm256_cvtepi8_epi16(p);
        }
    }
    if (kh * kw % 2) {
        const __m128i p = _mm_unpacklo_epi8(half, zv);
        xp[kh * kw / 2] = x_u ? _mm256_cvtepu8_epi16(p) : _mm256_cvtepi8_epi16(p);
    }
}

/* acc[i] += the tile xp (n pairs) . channel i's weight pairs (wj + i * n), i < nc <= 4;
 * with xq (a second tile of the same taps) also acc[4 + i] += xq . the same weights.
 * Four (eight) accumulators in registers whatever nc (a missing channel repeats channel
 * 0: its sums are computed and not stored), so that no sum goes through memory. Two
 * tiles share each broadcast weight: 2 loads + 4 broadcasts + 8 VPMADDWD + 8 VPADDD per
 * pair of taps, against 1 + 4 + 4 + 4 for one tile (AVX2 issues about four of these a
 * cycle: the loads and broadcasts were a third of the work). Channel 2t + 1 of an odd cg:
 * zero weights meet the zero point there. */
#define MTVM_CONV_DOT8_STEP_(X_, A0_, A1_, A2_, A3_) \
    A0_ = mtvm_dot_pairs8_x86(A0_, X_, v0); A1_ = mtvm_dot_pairs8_x86(A1_, X_, v1); \
    A2_ = mtvm_dot_pairs8_x86(A2_, X_, v2); A3_ = mtvm_dot_pairs8_x86(A3_, X_, v3);
static MTVM_ALWAYS_INLINE void mtvm_conv_dot8_x86(__m256i acc[8], const __m256i* xp,
                                                  const __m256i* xq, const int32_t* wj,
                                                  int32_t n, int32_t nc)
{
    const int32_t* w0 = wj;
    const int32_t* w1 = wj + (nc > 1 ? n : 0);
    const int32_t* w2 = wj + (nc > 2 ? 2 * n : 0);
    const int32_t* w3 = wj + (nc > 3 ? 3 * n : 0);
    __m256i a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    if (xq) {
        __m256i b0 = acc[4], b1 = acc[5], b2 = acc[6], b3 = acc[7];
        for (int32_t t = 0; t < n; ++t) {
            const __m256i x = xp[t], z = xq[t];
            const __m256i v0 = _mm256_set1_epi32(w0[t]), v1 = _mm256_set1_epi32(w1[t]);
            const __m256i v2 = _mm256_set1_epi32(w2[t]), v3 = _mm256_set1_epi32(w3[t]);
            MTVM_CONV_DOT8_STEP_(x, a0, a1, a2, a3)
            MTVM_CONV_DOT8_STEP_(z, b0, b1, b2, b3)
        }
        acc[4] = b0;
        acc[5] = b1;
        acc[6] = b2;
        acc[7] = b3;
    } else {
        for (int32_t t = 0; t < n; ++t) {
            const __m256i x = xp[t];
            const __m256i v0 = _mm256_set1_epi32(w0[t]), v1 = _mm256_set1_epi32(w1[t]);
            const __m256i v2 = _mm256_set1_epi32(w2[t]), v3 = _mm256_set1_epi32(w3[t]);
            MTVM_CONV_DOT8_STEP_(x, a0, a1, a2, a3)
        }
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}
#undef MTVM_CONV_DOT8_STEP_

/* The shape of one group of a QConv: cg input channels of h x wd, kh x kw taps, strides,
 * leading pads, dilations, the oh x ow output. */
typedef struct {
    int32_t cg, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
} mtvm_conv_shape_x86_t;

/* One group of a KxK QConv not written in place: the mg output channel planes at y (y_ch
 * apart) from the cg input planes at xg (x_u: uint8, else int8; the padding reads as
 * zx), weight pairs wq (x86_weight_pairs' row of the group), bias and rq indexed from the
 * group's first channel. Per output row, tiles of eight pixels two at a time (the last
 * single tile overlapping the one before: ow >= 8), four output channels at a time. */
static MTVM_ALWAYS_INLINE void mtvm_conv_group_x86(uint8_t* y, size_t y_ch, const uint8_t* xg,
                                                   int x_u, uint8_t zx, mtvm_conv_shape_x86_t s,
                                                   const int32_t* wq, int32_t mg,
                                                   const int32_t* bias, mtvm_conv_requant_x86_t rq)
{
    /* one input channel: pairs of taps (x86_pair_table), else pairs of channels */
    const int32_t n = s.cg == 1 ? (s.kh * s.kw + 1) / 2 : s.kh * s.kw * ((s.cg + 1) / 2);
    for (int32_t oy = 0; oy < s.oh; ++oy) {
        for (int32_t ox1 = 0; ox1 < s.ow;) {
            const int32_t two = ox1 + 16 <= s.ow;
            const int32_t ox0 = ox1 + 8 <= s.ow ? ox1 : s.ow - 8;   /* a last single tile
                                                                      overlaps */
            __m256i xp[2 * n];   /* [tile][tap][t / 2]: the pairs of the eight pixels */
            /* two calls, not a loop over the tiles: the loop cost ic_resnet8_int8 16 % on
             * AVX2 (gcc 12 kept the tile builder out of line) */
            if (s.cg == 1) {
                mtvm_conv_tile8_taps_x86(xp, xg, x_u, s.h, s.wd, s.kh, s.kw, s.sh, s.sw, s.ph,
                                         s.pw, s.dh, s.dw, oy, ox0, zx);
                if (two) {
                    mtvm_conv_tile8_taps_x86(xp + n, xg, x_u, s.h, s.wd, s.kh, s.kw, s.sh, s.sw,
                                             s.ph, s.pw, s.dh, s.dw, oy, ox0 + 8, zx);
                }
            } else {
                mtvm_conv_tile8_x86(xp, xg, x_u, s.cg, s.h, s.wd, s.kh, s.kw, s.sh, s.sw, s.ph,
                                    s.pw, s.dh, s.dw, oy, ox0, zx);
                if (two) {
                    mtvm_conv_tile8_x86(xp + n, xg, x_u, s.cg, s.h, s.wd, s.kh, s.kw, s.sh, s.sw,
                                        s.ph, s.pw, s.dh, s.dw, oy, ox0 + 8, zx);
                }
            }
            for (int32_t o0 = 0; o0 < mg; o0 += 4) {
                const int32_t nc = mg - o0 < 4 ? mg - o0 : 4;
                uint8_t* yq = y + (size_t)o0 * y_ch + (size_t)oy * (size_t)s.ow + (size_t)ox0;
                __m256i acc[8];
                for (int32_t i = 0; i < 8; ++i) {
                    acc[i] = _mm256_set1_epi32(i % 4 < nc ? bias[o0 + i % 4] : 0);
                }
                mtvm_conv_dot8_x86(acc, xp, two ? xp + n : NULL, wq + o0 * n, n, nc);
                for (int32_t i = 0; i < nc; ++i) {
                    const int32_t o = (o0 + i) * rq.step;
                    for (int32_t u = 0; u <= two; ++u) {
                        mtvm_store_low_bytes8_x86(yq + (size_t)i * y_ch + 8 * u,
                            mtvm_pw_requantize8_x86(acc[4 * u + i], rq.mult[o],
                                                    rq.m ? 0 : rq.shift[o], rq.m, rq.add,
                                                    rq.lo, rq.hi));
                    }
                }
            }
            ox1 = two ? ox1 + 16 : ox1 + 8;
        }
    }
}
#endif

#endif  /* MTVM_CONV_X86_H_ */
