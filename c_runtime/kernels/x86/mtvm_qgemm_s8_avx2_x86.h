/* mtvm_qgemm_s8_avx2_x86.h: QConv (folded, int8 weights, int8 or uint8 data) on x86 hosts
 * with AVX2 (no VNNI): tiles of 8 output positions, one per int32 lane, gathered into a
 * column of two taps per lane as int16 (sign- or zero-extended bytes, exact), met by
 * VPMADDWD (s16 x s16 pairs, exact: no saturation) against each output channel's two
 * weights broadcast as an int16 pair, VPADDD into int32 sums; `tiles` tiles x `nc` output
 * channels of sums in registers, then requantized on vectors (conv._Store's fast path)
 * and stored 8 bytes per channel plane. Elsewhere (MTVM_NO_SIMD, no AVX2) a portable C
 * form of the same computation.
 * The schedule: mtvm/schedules/x86/qconv_s8.py (qconv_s8.im2col_avx2).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_QGEMM_S8_AVX2_X86_H_
#define MTVM_QGEMM_S8_AVX2_X86_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"

/* Operands, as the schedule lays them out:
 *   wq     [group * mg][kp2] int32: channel o's taps t = (c, ky, kx) of its window in
 *          pairs, tap 2j in the low and 2j + 1 in the high int16 of wq[o][j] (past kk 0)
 *   bias   [group * mg] int32: the folded bias
 *   mult, shift: per channel (mstep, sstep 1) or one value (0); the output is
 *          ((((acc * mult) >> 32) >> (-2 - shift)) + add) >> 1 clamped to [lo, hi],
 *          add = 2 y_zp + 1 (conv.fast_requant: the generic schedule's integers)
 *   scratch: (32 * tiles + 16) * kp2 bytes (the column of `tiles` tiles, then the taps'
 *          offsets and window places; the portable form uses kp2 * 4 of them).
 * x and y may be the same buffer for a pointwise conv: a block's positions are gathered
 * before any of them is written (bytes read around them are discarded). */

#if defined(__AVX2__) && !defined(MTVM_NO_SIMD)
#include <immintrin.h>
#define MTVM_QCONV_AVX2_X86 1
/* 1 where target "c" takes this kernel (a C constant: the kernels choose with an `if`, the
 * other branch compiled and dropped): AVX2 without AVX-512 (with it the generic schedule's
 * AVX-512 kernels, with VNNI the VNNI kernel), else 0 */
#if defined(__AVX512F__)
#define MTVM_QCONV_AVX2_ON 0
#else
#define MTVM_QCONV_AVX2_ON 1
#endif

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

/* The register block's loops unrolled at -O2 too (the sums must stay in registers). */
#if defined(__GNUC__)
#define MTVM_QAVX2_UNROLL _Pragma("GCC unroll 8")
#else
#define MTVM_QAVX2_UNROLL
#endif

#define MTVM_QAVX2_MAX_TILES 3
#define MTVM_QAVX2_MAX_NC 8

/* The requantization of 8 sums of one output channel (see above). */
static MTVM_ALWAYS_INLINE __m256i mtvm_qavx2_requantize_x86(__m256i a, int32_t mult,
                                                            int32_t shift, int32_t add,
                                                            int32_t lo, int32_t hi)
{
    const __m256i m = _mm256_set1_epi32(mult);
    const __m256i even = _mm256_srli_epi64(_mm256_mul_epi32(a, m), 32);
    const __m256i odd = _mm256_mul_epi32(_mm256_srli_epi64(a, 32), m);
    __m256i v = _mm256_blend_epi32(even, odd, 0xAA);
    v = _mm256_sra_epi32(v, _mm_cvtsi32_si128(-2 - shift));
    v = _mm256_srai_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(add)), 1);
    return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(lo)), _mm256_set1_epi32(hi));
}

/* 32 bytes of the column from the 8 lanes of taps 2j, 2j + 1 (a, b: lane l in byte l):
 * lane l's two taps as int16 (sign-extended for int8 data, else zero-extended). */
static MTVM_ALWAYS_INLINE void mtvm_qavx2_put2_x86(uint8_t* d, __m128i a, __m128i b,
                                                   int32_t x_s8)
{
    const __m128i ab = _mm_unpacklo_epi8(a, b);
    const __m256i v = x_s8 ? _mm256_cvtepi8_epi16(ab) : _mm256_cvtepu8_epi16(ab);
    _mm256_storeu_si256((__m256i*)(void*)d, v);
}

/* 16 bytes at xg + a, or the avail - a of them there are (the rest zero). */
static MTVM_ALWAYS_INLINE __m128i mtvm_qavx2_load16_x86(const uint8_t* xg, ptrdiff_t a,
                                                        size_t avail)
{
    if ((size_t)a + 16 <= avail) {
        return _mm_loadu_si128((const __m128i*)(const void*)(xg + a));
    }
    {
        uint8_t t[16] = { 0 };
        memcpy(t, xg + a, avail - (size_t)a);
        return _mm_loadu_si128((const __m128i*)(const void*)t);
    }
}

/* The column of the tile of n (1..8) output positions from q0: for each pair j of taps,
 * 32 bytes at col + j * cstride, lane l's two taps (int16) in bytes 4l..4l + 3.
 * tc[t], tr[t]: tap t's offset from its window's first input (channel plane, row, column)
 * and its place in the window (ky * kw + kx); past kk tap 0's. avail: the bytes of x
 * from xg on. A tile of one output row whose windows lie inside the input (stride 1 or
 * 2): one load per tap. Else (stride 1 or 2) per row segment of the tile (lanes on one
 * output row) and window place, the 16 bytes from the first lane inside the input
 * shuffled into the lanes inside it (ctl: room for kh * kw * 8 controls), the others pad;
 * larger strides: byte by byte. */
static MTVM_ALWAYS_INLINE void mtvm_qavx2_gather_x86(
    uint8_t* col, size_t cstride, const uint8_t* xg, size_t avail, int32_t q0, int32_t n,
    int32_t h, int32_t w, int32_t kh, int32_t kw, int32_t ow, int32_t sh, int32_t sw,
    int32_t ph, int32_t pw, int32_t dh, int32_t dw, int32_t kp2, uint8_t pad, int32_t x_s8,
    const int32_t* tc, const int32_t* tr, __m128i* ctl)
{
    const int32_t khw = kh * kw;
    const int32_t oy = q0 / ow, ox = q0 % ow;
    const int32_t iy = oy * sh - ph, ix = ox * sw - pw;
    if (n == 8 && ox + 8 <= ow && sw <= 2 && iy >= 0 && iy + (kh - 1) * dh < h &&
            ix >= 0 && ix + 8 * sw + (kw - 1) * dw <= w) {
        const uint8_t* base = xg + (size_t)iy * w + ix;
        if (sw == 1) {
            for (int32_t j = 0; j < kp2; ++j) {
                const int32_t* o = tc + 2 * j;
                mtvm_qavx2_put2_x86(col + (size_t)j * cstride,
                                    _mm_loadl_epi64((const __m128i*)(const void*)(base + o[0])),
                                    _mm_loadl_epi64((const __m128i*)(const void*)(base + o[1])),
                                    x_s8);
            }
        } else {
            const __m128i even = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1,
                                               -1, -1, -1);
            for (int32_t j = 0; j < kp2; ++j) {
                const int32_t* o = tc + 2 * j;
                const __m128i a = _mm_loadu_si128((const __m128i*)(const void*)(base + o[0]));
                const __m128i b = _mm_loadu_si128((const __m128i*)(const void*)(base + o[1]));
                mtvm_qavx2_put2_x86(col + (size_t)j * cstride, _mm_shuffle_epi8(a, even),
                                    _mm_shuffle_epi8(b, even), x_s8);
            }
        }
        return;
    }
    if (sw <= 2) {
        /* per window place r: ctl[r * 9] the pad in the lanes no segment reads, ctl[r * 9 +
         * 1 + s] segment s's shuffle (-1 where it reads nothing); sof[r * 8 + s]: the offset
         * of its first lane inside the input less the place's (add tc), PTRDIFF_MIN: none */
        /* the controls on vectors: a tile of a narrow plane (fewer than 8 outputs a row)
         * takes this path every time, and byte loops here cost more than its MACs (a 1 ->
         * 48 channel 10 x 4 stem on 5 columns: 40 places x 2-3 segments a tile) */
        ptrdiff_t* sof = (ptrdiff_t*)(void*)(ctl + (size_t)khw * 9);
        const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        const __m128i pads = _mm_set_epi64x(0, (long long)(0x0101010101010101ULL * pad));
        int32_t nseg = 0;
        for (int32_t r = 0; r < khw; ++r) {
            _mm_storeu_si128(ctl + (size_t)r * 9, pads);
        }
        for (int32_t lane = 0; lane < n; ++nseg) {
            const int32_t q = q0 + lane, qy = q / ow, qx = q % ow;
            const int32_t len = ow - qx < n - lane ? ow - qx : n - lane;
            const int32_t jy = qy * sh - ph, jx = qx * sw - pw;
            const __m128i rel = _mm_sub_epi8(iota, _mm_set1_epi8((char)lane));  /* l */
            for (int32_t r = 0; r < khw; ++r) {
                const int32_t ky = r / kw, kx = r % kw;
                const int32_t ry = jy + ky * dh, ix0 = jx + kx * dw;
                int32_t jlo = ix0 >= 0 ? 0 : (-ix0 + sw - 1) / sw;
                int32_t jhi = ix0 > w - 1 ? 0 : (w - 1 - ix0) / sw + 1;
                jhi = jhi < len ? jhi : len;
                sof[r * 8 + nseg] = PTRDIFF_MIN;
                if (ry >= 0 && ry < h && jlo < jhi) {
                    /* lanes lane + l, jlo <= l < jhi, read byte (l - jlo) * sw of the
                     * segment's load and no longer the pad; the others -1 (nothing) */
                    const __m128i in = _mm_and_si128(
                        _mm_cmpgt_epi8(rel, _mm_set1_epi8((char)(jlo - 1))),
                        _mm_cmpgt_epi8(_mm_set1_epi8((char)jhi), rel));
                    __m128i src = _mm_sub_epi8(rel, _mm_set1_epi8((char)jlo));
                    if (sw == 2) {
                        src = _mm_add_epi8(src, src);
                    }
                    _mm_storeu_si128(ctl + (size_t)r * 9,
                                     _mm_andnot_si128(in, _mm_loadu_si128(ctl + (size_t)r * 9)));
                    _mm_storeu_si128(ctl + (size_t)r * 9 + 1 + nseg,
                                     _mm_blendv_epi8(_mm_set1_epi8(-1), src, in));
                    sof[r * 8 + nseg] = (ptrdiff_t)ry * w + ix0 + (ptrdiff_t)jlo * sw -
                                        ((ptrdiff_t)ky * dh * w + (ptrdiff_t)kx * dw);
                }
            }
            lane += len;
        }
        for (int32_t j = 0; j < kp2; ++j) {
            __m128i v[2];
            for (int32_t u = 0; u < 2; ++u) {
                const int32_t t = 2 * j + u, r = tr[t];
                v[u] = _mm_loadu_si128(ctl + (size_t)r * 9);
                for (int32_t s = 0; s < nseg; ++s) {
                    const ptrdiff_t a = sof[r * 8 + s];
                    if (a != PTRDIFF_MIN) {
                        v[u] = _mm_or_si128(v[u], _mm_shuffle_epi8(
                            mtvm_qavx2_load16_x86(xg, (ptrdiff_t)tc[t] + a, avail),
                            _mm_loadu_si128(ctl + (size_t)r * 9 + 1 + s)));
                    }
                }
            }
            mtvm_qavx2_put2_x86(col + (size_t)j * cstride, v[0], v[1], x_s8);
        }
        return;
    }
    {
        const size_t hw = (size_t)h * (size_t)w;
        for (int32_t j = 0; j < kp2; ++j) {
            uint8_t v[2][16];
            for (int32_t u = 0; u < 2; ++u) {
                const int32_t t = 2 * j + u, r = tr[t];
                const size_t cpl = (size_t)tc[t] / hw;
                for (int32_t l = 0; l < 16; ++l) {
                    const int32_t q = q0 + l, qy = q / ow, qx = q % ow;
                    const int32_t ry = qy * sh - ph + r / kw * dh;
                    const int32_t rx = qx * sw - pw + r % kw * dw;
                    v[u][l] = l < n && ry >= 0 && ry < h && rx >= 0 && rx < w ?
                        xg[cpl * hw + (size_t)ry * w + rx] : pad;
                }
            }
            mtvm_qavx2_put2_x86(col + (size_t)j * cstride,
                                _mm_loadu_si128((const __m128i*)(const void*)v[0]),
                                _mm_loadu_si128((const __m128i*)(const void*)v[1]), x_s8);
        }
    }
}

/* T tiles (T * 8 positions; cnt[t]: the valid lanes of tile t) x N output channels from
 * the column: sums from bias, VPMADDWD + VPADDD over the kp2 tap pairs, requantized,
 * stored at y + i * ohw + 8 t. wq, bias, mult, shift: at the block's first channel. */
static MTVM_ALWAYS_INLINE void mtvm_qavx2_block_x86(
    const uint8_t* col, int32_t kp2, const int32_t* wq, const int32_t* bias,
    const int32_t* mult, int32_t mstep, const int32_t* shift, int32_t sstep, int32_t add,
    int32_t lo, int32_t hi, uint8_t* y, size_t ohw, const int32_t* cnt, const int T,
    const int N)
{
    const __m128i bytes = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1,
                                        -1, -1);
    __m256i acc[MTVM_QAVX2_MAX_TILES][MTVM_QAVX2_MAX_NC];
    MTVM_QAVX2_UNROLL
    for (int t = 0; t < T; ++t) {
        MTVM_QAVX2_UNROLL
        for (int i = 0; i < N; ++i) {
            acc[t][i] = _mm256_set1_epi32(bias[i]);
        }
    }
    for (int32_t j = 0; j < kp2; ++j) {
        __m256i cv[MTVM_QAVX2_MAX_TILES];
        MTVM_QAVX2_UNROLL
        for (int t = 0; t < T; ++t) {
            const uint8_t* c = col + ((size_t)j * T + t) * 32;
            cv[t] = _mm256_loadu_si256((const __m256i*)(const void*)c);
        }
        MTVM_QAVX2_UNROLL
        for (int i = 0; i < N; ++i) {
            const __m256i wv = _mm256_set1_epi32(wq[(size_t)i * kp2 + j]);
            MTVM_QAVX2_UNROLL
            for (int t = 0; t < T; ++t) {
                acc[t][i] = _mm256_add_epi32(acc[t][i], _mm256_madd_epi16(cv[t], wv));
            }
        }
    }
    MTVM_QAVX2_UNROLL
    for (int i = 0; i < N; ++i) {
        const int32_t mu = mult[i * mstep], sf = shift[i * sstep];
        MTVM_QAVX2_UNROLL
        for (int t = 0; t < T; ++t) {
            const __m256i v = mtvm_qavx2_requantize_x86(acc[t][i], mu, sf, add, lo, hi);
            const __m128i p = _mm_shuffle_epi8(_mm_packs_epi32(_mm256_castsi256_si128(v),
                                                               _mm256_extracti128_si256(v, 1)),
                                               bytes);
            uint8_t* d = y + (size_t)i * ohw + (size_t)t * 8;
            if (cnt[t] == 8) {
                _mm_storel_epi64((__m128i*)(void*)d, p);
            } else {
                uint8_t b[16];
                _mm_storeu_si128((__m128i*)(void*)b, p);
                memcpy(d, b, (size_t)cnt[t]);
            }
        }
    }
}

#define MTVM_QAVX2_CASE(T, N) \
    case (T) * 16 + (N): \
        mtvm_qavx2_block_x86(col, kp2, wo, bo, mo, mstep, so, sstep, add, lo, hi, yo, ohw, cnt, \
                             T, N); \
        break;

/* The whole conv (see mtvm_qconv_avx2_x86) with its column and tap tables at col
 * ((32 * tiles + 16) * kp2 bytes). */
static inline void mtvm_qavx2_run_x86(
    uint8_t* y, const uint8_t* x, const int32_t* wq, const int32_t* bias, const int32_t* mult,
    int32_t mstep, const int32_t* shift, int32_t sstep, uint8_t* col, int32_t n,
    int32_t group, int32_t cg, int32_t h, int32_t w, int32_t mg, int32_t kh, int32_t kw,
    int32_t oh, int32_t ow, int32_t sh, int32_t sw, int32_t ph, int32_t pw, int32_t dh,
    int32_t dw, int32_t x_s8, int32_t x_zp, int32_t add, int32_t lo, int32_t hi,
    int32_t tiles, int32_t nc)
{
    const int32_t khw = kh * kw, kp2 = (cg * khw + 1) / 2;
    const size_t hw = (size_t)h * (size_t)w, ohw = (size_t)oh * (size_t)ow;
    const size_t xlen = (size_t)n * group * cg * hw;
    int32_t *tc, *tr;
    /* the gather's shuffles (9 per window place) and segment offsets (8 per place) */
    __m128i ctl[khw * 9 + (khw * 8 * (int32_t)sizeof(ptrdiff_t) + 15) / 16];
    if (nc > mg) nc = mg;
    tc = (int32_t*)(void*)(col + (size_t)32 * tiles * kp2);
    tr = tc + 2 * kp2;
    for (int32_t t = 0; t < 2 * kp2; ++t) {
        const int32_t u = t < cg * khw ? t : 0, r = u % khw;
        tc[t] = (int32_t)((size_t)(u / khw) * hw) + r / kw * dh * w + r % kw * dw;
        tr[t] = r;
    }
    for (int32_t b = 0; b < n; ++b) {
        for (int32_t g = 0; g < group; ++g) {
            const size_t xo = ((size_t)b * group + g) * cg * hw;
            const uint8_t* xg = x + xo;
            uint8_t* yg = y + ((size_t)b * group + g) * mg * ohw;
            for (size_t q0 = 0; q0 < ohw; q0 += (size_t)tiles * 8) {
                int32_t cnt[MTVM_QAVX2_MAX_TILES] = { 0, 0, 0 };
                const size_t left = ohw - q0;
                const int32_t nt = left >= (size_t)tiles * 8 ? tiles : (int32_t)((left + 7) / 8);
                for (int32_t t = 0; t < nt; ++t) {
                    const size_t rest = left - (size_t)t * 8;
                    cnt[t] = rest < 8 ? (int32_t)rest : 8;
                    mtvm_qavx2_gather_x86(col + (size_t)t * 32, (size_t)nt * 32, xg, xlen - xo,
                                          (int32_t)q0 + 8 * t, cnt[t], h, w, kh, kw, ow, sh, sw,
                                          ph, pw, dh, dw, kp2, (uint8_t)x_zp, x_s8, tc, tr, ctl);
                }
                for (int32_t o0 = 0; o0 < mg; o0 += nc) {
                    const int32_t nb = mg - o0 < nc ? mg - o0 : nc;
                    const int32_t o = g * mg + o0;
                    const int32_t* wo = wq + (size_t)o * kp2;
                    const int32_t* bo = bias + o;
                    const int32_t* mo = mult + (size_t)o * mstep;
                    const int32_t* so = shift + (size_t)o * sstep;
                    uint8_t* yo = yg + (size_t)o0 * ohw + q0;
                    switch (nt * 16 + nb) {
                    MTVM_QAVX2_CASE(1, 1) MTVM_QAVX2_CASE(1, 2) MTVM_QAVX2_CASE(1, 3)
                    MTVM_QAVX2_CASE(1, 4) MTVM_QAVX2_CASE(1, 5) MTVM_QAVX2_CASE(1, 6)
                    MTVM_QAVX2_CASE(1, 7) MTVM_QAVX2_CASE(1, 8)
                    MTVM_QAVX2_CASE(2, 1) MTVM_QAVX2_CASE(2, 2) MTVM_QAVX2_CASE(2, 3)
                    MTVM_QAVX2_CASE(2, 4) MTVM_QAVX2_CASE(2, 5) MTVM_QAVX2_CASE(2, 6)
                    MTVM_QAVX2_CASE(3, 1) MTVM_QAVX2_CASE(3, 2) MTVM_QAVX2_CASE(3, 3)
                    MTVM_QAVX2_CASE(3, 4)
                    default:
                        break;
                    }
                }
            }
        }
    }
}

/* The whole conv: batch n, group groups of cg input / mg output channels, input planes
 * h x w, window kh x kw, output oh x ow, strides, pads (top, left), dilations; x_s8: int8
 * data (else uint8); x_zp the padding byte; tiles (1..3) and nc (1..8): the register
 * block (nc at most 12 / tiles: the other blocks would spill). scratch NULL (target
 * "c", whose arena holds the other branch's scratch): the column on the stack. */
static inline void mtvm_qconv_avx2_x86(
    uint8_t* y, const uint8_t* x, const int32_t* wq, const int32_t* bias, const int32_t* mult,
    int32_t mstep, const int32_t* shift, int32_t sstep, void* scratch, int32_t n,
    int32_t group, int32_t cg, int32_t h, int32_t w, int32_t mg, int32_t kh, int32_t kw,
    int32_t oh, int32_t ow, int32_t sh, int32_t sw, int32_t ph, int32_t pw, int32_t dh,
    int32_t dw, int32_t x_s8, int32_t x_zp, int32_t add, int32_t lo, int32_t hi,
    int32_t tiles, int32_t nc)
{
    const int32_t kp2 = (cg * kh * kw + 1) / 2;
    if (tiles < 1 || tiles > MTVM_QAVX2_MAX_TILES) tiles = 1;
    if (nc < 1 || nc > MTVM_QAVX2_MAX_NC) nc = 4;
    if (nc * tiles > 12) nc = 12 / tiles;   /* the sums in 12 of the 16 registers */
    if (scratch) {
        mtvm_qavx2_run_x86(y, x, wq, bias, mult, mstep, shift, sstep, (uint8_t*)scratch, n,
                           group, cg, h, w, mg, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, x_s8,
                           x_zp, add, lo, hi, tiles, nc);
    } else {
        int32_t own[(8 * tiles + 4) * kp2];
        mtvm_qavx2_run_x86(y, x, wq, bias, mult, mstep, shift, sstep, (uint8_t*)(void*)own, n,
                           group, cg, h, w, mg, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, x_s8,
                           x_zp, add, lo, hi, tiles, nc);
    }
}

#undef MTVM_QAVX2_CASE

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#else

#define MTVM_QCONV_AVX2_ON 0

/* The portable form of mtvm_qconv_avx2_x86 (the same integers): one output position at a
 * time, its taps gathered into scratch (kp2 * 2 int16) before its outputs are written. */
static inline void mtvm_qconv_avx2_x86(
    uint8_t* y, const uint8_t* x, const int32_t* wq, const int32_t* bias, const int32_t* mult,
    int32_t mstep, const int32_t* shift, int32_t sstep, void* scratch, int32_t n,
    int32_t group, int32_t cg, int32_t h, int32_t w, int32_t mg, int32_t kh, int32_t kw,
    int32_t oh, int32_t ow, int32_t sh, int32_t sw, int32_t ph, int32_t pw, int32_t dh,
    int32_t dw, int32_t x_s8, int32_t x_zp, int32_t add, int32_t lo, int32_t hi,
    int32_t tiles, int32_t nc)
{
    const int32_t khw = kh * kw, kk = cg * khw;
    const size_t hw = (size_t)h * (size_t)w, ohw = (size_t)oh * (size_t)ow;
    int16_t own[scratch ? 1 : kk];    /* no scratch: the stack */
    int16_t* col = scratch ? (int16_t*)scratch : own;
    (void)tiles;
    (void)nc;
    for (int32_t b = 0; b < n; ++b) {
        for (int32_t g = 0; g < group; ++g) {
            const uint8_t* xg = x + ((size_t)b * group + g) * cg * hw;
            uint8_t* yg = y + ((size_t)b * group + g) * mg * ohw;
            for (int32_t oy = 0; oy < oh; ++oy) {
                for (int32_t ox = 0; ox < ow; ++ox) {
                    const size_t q = (size_t)oy * ow + ox;
                    for (int32_t t = 0; t < kk; ++t) {
                        const int32_t c = t / khw, ky = t % khw / kw, kx = t % kw;
                        const int32_t iy = oy * sh - ph + ky * dh, ix = ox * sw - pw + kx * dw;
                        const uint8_t v = iy >= 0 && iy < h && ix >= 0 && ix < w ?
                            xg[(size_t)c * hw + (size_t)iy * w + ix] : (uint8_t)x_zp;
                        col[t] = x_s8 ? (int16_t)(int8_t)v : (int16_t)v;
                    }
                    for (int32_t i = 0; i < mg; ++i) {
                        const int32_t o = g * mg + i;
                        const int32_t* wo = wq + (size_t)o * ((kk + 1) / 2);
                        uint32_t acc = (uint32_t)bias[o];
                        int32_t hi32, r;
                        for (int32_t t = 0; t < kk; ++t) {
                            const int32_t wt = (int32_t)(int16_t)(uint16_t)(
                                (uint32_t)wo[t >> 1] >> (16 * (t & 1)));
                            acc += (uint32_t)(wt * (int32_t)col[t]);
                        }
                        hi32 = (int32_t)(((int64_t)(int32_t)acc * mult[o * mstep]) >> 32);
                        r = ((hi32 >> (-2 - shift[o * sstep])) + add) >> 1;
                        r = r < lo ? lo : (r > hi ? hi : r);
                        yg[(size_t)i * ohw + q] = (uint8_t)r;
                    }
                }
            }
        }
    }
}

#endif

#endif  /* MTVM_QGEMM_S8_AVX2_X86_H_ */
