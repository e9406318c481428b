/* mtvm_qgemm_s8_vnni_x86.h: QConv (folded, int8 weights, int8 or uint8 data) on x86 hosts
 * with AVX-512 VNNI: tiles of 16 output positions, one per int32 lane, gathered into a
 * column of four taps per lane as unsigned bytes (int8 data xor 0x80), met by VPDPBUSD
 * (u8 x s8, four MACs per lane) against each output channel's weights broadcast four
 * taps at a time; `tiles` tiles x `nc` output channels of int32 sums in registers, then
 * requantized on vectors (conv._Store's fast path) and stored 16 bytes per channel plane.
 * Elsewhere (MTVM_NO_SIMD, no VNNI) a portable C form of the same computation.
 * The schedule: mtvm/schedules/x86/qconv_s8.py (qconv_s8.im2col_vnni).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_QGEMM_S8_VNNI_X86_H_
#define MTVM_QGEMM_S8_VNNI_X86_H_

#include <stddef.h>
#include <stdint.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_mulhi_s32_x86.h"

/* Operands, as the schedule lays them out:
 *   wq     [group * mg][kp4] int32: channel o's taps t = (c, ky, kx) of its window in four
 *          byte groups, tap 4j + u in bits 8u..8u + 7 of wq[o][j] (int8; past kk zero)
 *   bias   [group * mg] int32: the folded bias, minus 128 * sum(w[o]) for int8 data (the
 *          xor 0x80 adds 128 to every tap; exact in int32 arithmetic, modulo 2^32)
 *   mult, shift: per channel (mstep, sstep 1) or one value (0); the output is
 *          ((((acc * mult) >> 32) >> (-2 - shift)) + add) >> 1 clamped to [lo, hi],
 *          add = 2 y_zp + 1 (conv.fast_requant: the generic schedule's integers)
 *   scratch: (64 * tiles + 32) * kp4 bytes (the column of `tiles` tiles, then the taps'
 *          offsets and window places; the portable form uses kp4 * 4 of them), or NULL:
 *          then the same on the stack (target "c", see the schedule).
 * x and y may be the same buffer for a pointwise conv: a block's positions are gathered
 * before any of them is written. */

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512F__) && !defined(MTVM_NO_SIMD)
#include <immintrin.h>
#define MTVM_QCONV_VNNI_X86 1
/* 1 where the VNNI kernel compiles (a C constant: the generic target's kernels choose with
 * an `if`, the other branch compiled and dropped), else 0 */
#define MTVM_QCONV_VNNI_ON 1

/* The blocks of more channels than a layer has are unreachable for it, but gcc may still
 * see their loads past a constant table's end after constant propagation; and at -O3 it
 * cannot always tell that the masks and offsets of a tile's segments are set before use. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

/* The register block's loops unrolled at -O2 too (the sums must stay in registers). */
#if defined(__GNUC__)
#define MTVM_QVNNI_UNROLL _Pragma("GCC unroll 8")
#else
#define MTVM_QVNNI_UNROLL
#endif

#define MTVM_QVNNI_MAX_TILES 3
#define MTVM_QVNNI_MAX_NC 8

/* The requantization of 16 sums of one output channel (see above). */
static MTVM_ALWAYS_INLINE __m512i mtvm_qvnni_requantize_x86(__m512i a, int32_t mult,
                                                            int32_t shift, int32_t add,
                                                            int32_t lo, int32_t hi)
{
    __m512i v = mtvm_mulhi16_x86(a, _mm512_set1_epi32(mult));
    v = _mm512_sra_epi32(v, _mm_cvtsi32_si128(-2 - shift));
    v = _mm512_srai_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(add)), 1);
    return _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi));
}

/* Bit l of m moved to bit 2l (l < 16). */
static MTVM_ALWAYS_INLINE uint32_t mtvm_qvnni_spread2(uint32_t m)
{
    m = (m | (m << 8)) & 0x00FF00FFu;
    m = (m | (m << 4)) & 0x0F0F0F0Fu;
    m = (m | (m << 2)) & 0x33333333u;
    return (m | (m << 1)) & 0x55555555u;
}

/* One tap's 16 lanes: lane l (bit l of m) reads p[off + l * sw], the others keep v. */
static MTVM_ALWAYS_INLINE __m128i mtvm_qvnni_lanes_x86(__m128i v, const uint8_t* p,
                                                       ptrdiff_t off, uint32_t m, int32_t sw)
{
    const void* base = (const void*)((uintptr_t)p + (uintptr_t)off);
    if (sw == 1) {
        return _mm_mask_loadu_epi8(v, (__mmask16)m, base);
    }
    if (sw == 2) {
        const __m256i b = _mm256_maskz_loadu_epi8((__mmask32)mtvm_qvnni_spread2(m), base);
        return _mm_mask_mov_epi8(v, (__mmask16)m, _mm256_cvtepi16_epi8(b));
    }
    {
        uint8_t t[16];
        _mm_storeu_si128((__m128i*)(void*)t, v);
        for (int32_t l = 0; l < 16; ++l) {
            if (m >> l & 1u) {
                t[l] = *(const uint8_t*)((uintptr_t)p + (uintptr_t)(off + (ptrdiff_t)l * sw));
            }
        }
        return _mm_loadu_si128((const __m128i*)(const void*)t);
    }
}

/* 64 bytes of the column from the 16 lanes of taps 4j..4j + 3 (v[u]: tap u, lane l in byte l):
 * lane l's four taps in bytes 4l..4l + 3 (VPERMD takes dword L of each tap into 128-bit lane
 * L, VPSHUFB transposes each lane's 4 x 4 bytes), flipped to u8 (flip: 0x80 or 0). */
static MTVM_ALWAYS_INLINE void mtvm_qvnni_put4_x86(uint8_t* d, __m128i v0, __m128i v1,
                                                   __m128i v2, __m128i v3, __m512i flip)
{
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14,
                                           3, 7, 11, 15);
    const __m512i shuf = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13,
                                                              2, 6, 10, 14, 3, 7, 11, 15));
    __m512i z = _mm512_castsi128_si512(v0);
    z = _mm512_inserti32x4(z, v1, 1);
    z = _mm512_inserti32x4(z, v2, 2);
    z = _mm512_inserti32x4(z, v3, 3);
    z = _mm512_shuffle_epi8(_mm512_permutexvar_epi32(perm, z), shuf);
    _mm512_storeu_si512((void*)d, _mm512_xor_si512(z, flip));
}

/* 16 lanes at p + l * sw (sw 1 or 2), all inside the input. */
static MTVM_ALWAYS_INLINE __m128i mtvm_qvnni_load16_x86(const uint8_t* p, int32_t sw)
{
    if (sw == 1) {
        return _mm_loadu_si128((const __m128i*)(const void*)p);
    }
    return _mm256_cvtepi16_epi8(_mm256_maskz_loadu_epi8((__mmask32)0x55555555u,
                                                        (const void*)p));
}

/* The column of the tile of n (1..16) output positions from q0: for each group j of four
 * taps, 64 bytes at col + j * cstride, lane l's four taps (u8) in bytes 4l..4l + 3.
 * tc[t], tr[t]: tap t's offset from its window's first input (channel plane, row, column)
 * and its place in the window (ky * kw + kx); past kk tap 0's. A tile whose windows all lie
 * inside one input row band: one load per tap. Else per row segment of the tile (lanes on
 * one output row) and window place, the lanes inside the input (gm, room for kh * kw * 32
 * masks: [r][s] and, for stride 2, [r][16 + s] the byte masks): masked loads, the others
 * read as pad. */
static MTVM_ALWAYS_INLINE void mtvm_qvnni_gather_x86(
    uint8_t* col, size_t cstride, const uint8_t* xg, int32_t q0, int32_t n, int32_t h,
    int32_t w, int32_t kh, int32_t kw, int32_t ow, int32_t sh, int32_t sw, int32_t ph,
    int32_t pw, int32_t dh, int32_t dw, int32_t kp4, uint8_t pad, int32_t x_s8,
    const int32_t* tc, const int32_t* tr, uint32_t* gm)
{
    const int32_t khw = kh * kw;
    const __m512i flip = _mm512_set1_epi8((char)(x_s8 ? 0x80 : 0));
    const int32_t oy = q0 / ow, ox = q0 % ow;
    const int32_t iy = oy * sh - ph, ix = ox * sw - pw;
    if (n == 16 && ox + 16 <= ow && sw <= 2 && iy >= 0 && iy + (kh - 1) * dh < h &&
            ix >= 0 && ix + 15 * sw + (kw - 1) * dw < w) {
        const uint8_t* base = xg + (size_t)iy * w + ix;
        for (int32_t j = 0; j < kp4; ++j) {
            const int32_t* o = tc + 4 * j;
            mtvm_qvnni_put4_x86(col + (size_t)j * cstride, mtvm_qvnni_load16_x86(base + o[0], sw),
                                mtvm_qvnni_load16_x86(base + o[1], sw),
                                mtvm_qvnni_load16_x86(base + o[2], sw),
                                mtvm_qvnni_load16_x86(base + o[3], sw), flip);
        }
        return;
    }
    {
        ptrdiff_t segoff[16] = { 0 };
        int32_t nseg = 0;
        const __m128i padv = _mm_set1_epi8((char)pad);
        /* the row segments of the tile: lanes [lane, lane + len) on output row qy from qx */
        for (int32_t lane = 0; lane < n; ++nseg) {
            const int32_t q = q0 + lane, qy = q / ow, qx = q % ow;
            const int32_t len = ow - qx < n - lane ? ow - qx : n - lane;
            const int32_t jy = qy * sh - ph, jx = qx * sw - pw;
            for (int32_t r = 0; r < khw; ++r) {
                const int32_t ky = r / kw, kx = r % kw;
                const int32_t ry = jy + ky * dh, ix0 = jx + kx * dw;
                int32_t jlo = ix0 >= 0 ? 0 : (-ix0 + sw - 1) / sw;
                int32_t jhi = ix0 > w - 1 ? 0 : (w - 1 - ix0) / sw + 1;
                uint32_t m = 0;
                jhi = jhi < len ? jhi : len;
                if (ry >= 0 && ry < h && jlo < jhi) {
                    m = ((1u << (jhi - jlo)) - 1u) << (lane + jlo);
                }
                gm[r * 32 + nseg] = m;
                gm[r * 32 + 16 + nseg] = mtvm_qvnni_spread2(m);   /* the bytes at stride 2 */
            }
            segoff[nseg] = (ptrdiff_t)jy * w + jx - (ptrdiff_t)lane * sw;
            lane += len;
        }
        if (nseg == 1 && sw == 1) {
            const ptrdiff_t so = segoff[0];
            for (int32_t j = 0; j < kp4; ++j) {
                __m128i v[4];
                for (int32_t u = 0; u < 4; ++u) {
                    const int32_t t = 4 * j + u;
                    v[u] = _mm_mask_loadu_epi8(padv, (__mmask16)gm[tr[t] * 32],
                                               (const void*)((uintptr_t)xg + (uintptr_t)(so + tc[t])));
                }
                mtvm_qvnni_put4_x86(col + (size_t)j * cstride, v[0], v[1], v[2], v[3], flip);
            }
            return;
        }
        if (nseg == 1 && sw == 2) {
            const ptrdiff_t so = segoff[0];
            for (int32_t j = 0; j < kp4; ++j) {
                __m128i v[4];
                for (int32_t u = 0; u < 4; ++u) {
                    const int32_t t = 4 * j + u;
                    const uint32_t* m = gm + tr[t] * 32;
                    const __m256i b = _mm256_maskz_loadu_epi8(
                        (__mmask32)m[16], (const void*)((uintptr_t)xg + (uintptr_t)(so + tc[t])));
                    v[u] = _mm_mask_mov_epi8(padv, (__mmask16)m[0], _mm256_cvtepi16_epi8(b));
                }
                mtvm_qvnni_put4_x86(col + (size_t)j * cstride, v[0], v[1], v[2], v[3], flip);
            }
            return;
        }
        for (int32_t j = 0; j < kp4; ++j) {
            __m128i v[4];
            for (int32_t u = 0; u < 4; ++u) {
                const int32_t t = 4 * j + u;
                const uint32_t* m = gm + tr[t] * 32;
                v[u] = padv;
                for (int32_t s = 0; s < nseg; ++s) {
                    if (m[s]) {
                        v[u] = mtvm_qvnni_lanes_x86(v[u], xg, segoff[s] + tc[t], m[s], sw);
                    }
                }
            }
            mtvm_qvnni_put4_x86(col + (size_t)j * cstride, v[0], v[1], v[2], v[3], flip);
        }
    }
}

/* T tiles (T * 16 positions; km[t]: the valid lanes of tile t) x N output channels from the
 * column: sums from bias, VPDPBUSD over the kp4 tap groups, requantized, stored at
 * y + i * ohw + 16 t. wq, bias, mult, shift: at the block's first channel. */
static MTVM_ALWAYS_INLINE void mtvm_qvnni_block_x86(
    const uint8_t* col, int32_t kp4, const int32_t* wq, const int32_t* bias,
    const int32_t* mult, int32_t mstep, const int32_t* shift, int32_t sstep, int32_t add,
    int32_t lo, int32_t hi, uint8_t* y, size_t ohw, const __mmask16* km, const int T,
    const int N)
{
    __m512i acc[MTVM_QVNNI_MAX_TILES][MTVM_QVNNI_MAX_NC];
    MTVM_QVNNI_UNROLL
    for (int t = 0; t < T; ++t) {
        MTVM_QVNNI_UNROLL
        for (int i = 0; i < N; ++i) {
            acc[t][i] = _mm512_set1_epi32(bias[i]);
        }
    }
    for (int32_t j = 0; j < kp4; ++j) {
        __m512i cv[MTVM_QVNNI_MAX_TILES];
        MTVM_QVNNI_UNROLL
        for (int t = 0; t < T; ++t) {
            cv[t] = _mm512_loadu_si512((const void*)(col + ((size_t)j * T + t) * 64));
        }
        MTVM_QVNNI_UNROLL
        for (int i = 0; i < N; ++i) {
            const __m512i wv = _mm512_set1_epi32(wq[(size_t)i * kp4 + j]);
            MTVM_QVNNI_UNROLL
            for (int t = 0; t < T; ++t) {
                acc[t][i] = _mm512_dpbusd_epi32(acc[t][i], cv[t], wv);
            }
        }
    }
    MTVM_QVNNI_UNROLL
    for (int i = 0; i < N; ++i) {
        const int32_t mu = mult[i * mstep], sf = shift[i * sstep];
        MTVM_QVNNI_UNROLL
        for (int t = 0; t < T; ++t) {
            const __m512i v = mtvm_qvnni_requantize_x86(acc[t][i], mu, sf, add, lo, hi);
            _mm_mask_storeu_epi8((void*)(y + (size_t)i * ohw + (size_t)t * 16), km[t],
                                 _mm512_cvtepi32_epi8(v));
        }
    }
}

#define MTVM_QVNNI_CASE(T, N) \
    case (T) * 16 + (N): \
        mtvm_qvnni_block_x86(col, kp4, wo, bo, mo, mstep, so, sstep, add, lo, hi, yo, ohw, km, \
                             T, N); \
        break;

/* The whole conv (see mtvm_qconv_vnni_x86) with its column and tap tables at col
 * ((64 * tiles + 32) * kp4 bytes). */
static inline void mtvm_qvnni_run_x86(
    uint8_t* y, const uint8_t* x, const int32_t* wq, const int32_t* bias, const int32_t* mult,
    int32_t mstep, const int32_t* shift, int32_t sstep, uint8_t* col, int32_t n,
    int32_t group, int32_t cg, int32_t h, int32_t w, int32_t mg, int32_t kh, int32_t kw,
    int32_t oh, int32_t ow, int32_t sh, int32_t sw, int32_t ph, int32_t pw, int32_t dh,
    int32_t dw, int32_t x_s8, int32_t x_zp, int32_t add, int32_t lo, int32_t hi,
    int32_t tiles, int32_t nc)
{
    const int32_t khw = kh * kw, kp4 = (cg * khw + 3) / 4;
    const size_t hw = (size_t)h * (size_t)w, ohw = (size_t)oh * (size_t)ow;
    int32_t *tc, *tr;
    uint32_t gm[khw * 32];
    if (nc > mg) nc = mg;
    tc = (int32_t*)(void*)(col + (size_t)64 * tiles * kp4);
    tr = tc + 4 * kp4;
    for (int32_t t = 0; t < 4 * kp4; ++t) {
        const int32_t u = t < cg * khw ? t : 0, r = u % khw;
        tc[t] = (int32_t)((size_t)(u / khw) * hw) + r / kw * dh * w + r % kw * dw;
        tr[t] = r;
    }
    for (int32_t b = 0; b < n; ++b) {
        for (int32_t g = 0; g < group; ++g) {
            const uint8_t* xg = x + ((size_t)b * group + g) * cg * hw;
            uint8_t* yg = y + ((size_t)b * group + g) * mg * ohw;
            for (size_t q0 = 0; q0 < ohw; q0 += (size_t)tiles * 16) {
                __mmask16 km[MTVM_QVNNI_MAX_TILES] = { 0, 0, 0 };
                const size_t left = ohw - q0;
                const int32_t nt = left >= (size_t)tiles * 16 ? tiles : (int32_t)((left + 15) / 16);
                for (int32_t t = 0; t < nt; ++t) {
                    const size_t rest = left - (size_t)t * 16;
                    const int32_t cnt = rest < 16 ? (int32_t)rest : 16;
                    km[t] = (__mmask16)((1u << cnt) - 1u);
                    mtvm_qvnni_gather_x86(col + (size_t)t * 64, (size_t)nt * 64, xg,
                                          (int32_t)q0 + 16 * t, cnt, h, w, kh, kw, ow, sh, sw,
                                          ph, pw, dh, dw, kp4, (uint8_t)x_zp, x_s8, tc, tr, gm);
                }
                for (int32_t o0 = 0; o0 < mg; o0 += nc) {
                    const int32_t nb = mg - o0 < nc ? mg - o0 : nc;
                    const int32_t o = g * mg + o0;
                    const int32_t* wo = wq + (size_t)o * kp4;
                    const int32_t* bo = bias + o;
                    const int32_t* mo = mult + (size_t)o * mstep;
                    const int32_t* so = shift + (size_t)o * sstep;
                    uint8_t* yo = yg + (size_t)o0 * ohw + q0;
                    switch (nt * 16 + nb) {
                    MTVM_QVNNI_CASE(1, 1) MTVM_QVNNI_CASE(1, 2) MTVM_QVNNI_CASE(1, 3)
                    MTVM_QVNNI_CASE(1, 4) MTVM_QVNNI_CASE(1, 5) MTVM_QVNNI_CASE(1, 6)
                    MTVM_QVNNI_CASE(1, 7) MTVM_QVNNI_CASE(1, 8)
                    MTVM_QVNNI_CASE(2, 1) MTVM_QVNNI_CASE(2, 2) MTVM_QVNNI_CASE(2, 3)
                    MTVM_QVNNI_CASE(2, 4) MTVM_QVNNI_CASE(2, 5) MTVM_QVNNI_CASE(2, 6)
                    MTVM_QVNNI_CASE(2, 7) MTVM_QVNNI_CASE(2, 8)
                    MTVM_QVNNI_CASE(3, 1) MTVM_QVNNI_CASE(3, 2) MTVM_QVNNI_CASE(3, 3)
                    MTVM_QVNNI_CASE(3, 4) MTVM_QVNNI_CASE(3, 5) MTVM_QVNNI_CASE(3, 6)
                    MTVM_QVNNI_CASE(3, 7) MTVM_QVNNI_CASE(3, 8)
                    default:
                        break;
                    }
                }
            }
        }
    }
}

/* The whole conv (see above): batch n, group groups of cg input / mg output channels,
 * input planes h x w, window kh x kw, output oh x ow, strides, pads (top, left),
 * dilations; x_s8: int8 data (else uint8); x_zp the padding byte; tiles (1..3) and nc
 * (1..8): the register block. scratch NULL (target "c", whose arena holds the other
 * branch's scratch): the column on the stack. */
static inline void mtvm_qconv_vnni_x86(
    uint8_t* y, const uint8_t* x, const int32_t* wq, const int32_t* bias, const int32_t* mult,
    int32_t mstep, const int32_t* shift, int32_t sstep, void* scratch, int32_t n,
    int32_t group, int32_t cg, int32_t h, int32_t w, int32_t mg, int32_t kh, int32_t kw,
    int32_t oh, int32_t ow, int32_t sh, int32_t sw, int32_t ph, int32_t pw, int32_t dh,
    int32_t dw, int32_t x_s8, int32_t x_zp, int32_t add, int32_t lo, int32_t hi,
    int32_t tiles, int32_t nc)
{
    const int32_t kp4 = (cg * kh * kw + 3) / 4;
    if (tiles < 1 || tiles > MTVM_QVNNI_MAX_TILES) tiles = 1;
    if (nc < 1 || nc > MTVM_QVNNI_MAX_NC) nc = 4;
    if (scratch) {
        mtvm_qvnni_run_x86(y, x, wq, bias, mult, mstep, shift, sstep, (uint8_t*)scratch, n,
                           group, cg, h, w, mg, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, x_s8,
                           x_zp, add, lo, hi, tiles, nc);
    } else {
        int32_t own[(16 * tiles + 8) * kp4];
        mtvm_qvnni_run_x86(y, x, wq, bias, mult, mstep, shift, sstep, (uint8_t*)(void*)own, n,
                           group, cg, h, w, mg, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, x_s8,
                           x_zp, add, lo, hi, tiles, nc);
    }
}

#undef MTVM_QVNNI_CASE

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#else

#define MTVM_QCONV_VNNI_ON 0

/* The portable form of mtvm_qconv_vnni_x86 (the same integers): one output position at a
 * time, its taps gathered into scratch (kp4 * 4 bytes) before its outputs are written. */
static inline void mtvm_qconv_vnni_x86(
    uint8_t* y, const uint8_t* x, const int32_t* wq, const int32_t* bias, const int32_t* mult,
    int32_t mstep, const int32_t* shift, int32_t sstep, void* scratch, int32_t n,
    int32_t group, int32_t cg, int32_t h, int32_t w, int32_t mg, int32_t kh, int32_t kw,
    int32_t oh, int32_t ow, int32_t sh, int32_t sw, int32_t ph, int32_t pw, int32_t dh,
    int32_t dw, int32_t x_s8, int32_t x_zp, int32_t add, int32_t lo, int32_t hi,
    int32_t tiles, int32_t nc)
{
    const int32_t khw = kh * kw, kk = cg * khw, kp4 = (kk + 3) / 4;
    const size_t hw = (size_t)h * (size_t)w, ohw = (size_t)oh * (size_t)ow;
    int32_t own[scratch ? 1 : kp4];    /* no scratch: the stack */
    uint8_t* col = scratch ? (uint8_t*)scratch : (uint8_t*)(void*)own;
    (void)tiles;
    (void)nc;
    for (int32_t b = 0; b < n; ++b) {
        for (int32_t g = 0; g < group; ++g) {
            const uint8_t* xg = x + ((size_t)b * group + g) * cg * hw;
            uint8_t* yg = y + ((size_t)b * group + g) * mg * ohw;
            for (int32_t oy = 0; oy < oh; ++oy) {
                for (int32_t ox = 0; ox < ow; ++ox) {
                    const size_t q = (size_t)oy * ow + ox;
                    for (int32_t t = 0; t < 4 * kp4; ++t) {
                        uint8_t v = 0;
                        if (t < kk) {
                            const int32_t c = t / khw, ky = t % khw / kw, kx = t % kw;
                            const int32_t iy = oy * sh - ph + ky * dh, ix = ox * sw - pw + kx * dw;
                            v = iy >= 0 && iy < h && ix >= 0 && ix < w ?
                                xg[(size_t)c * hw + (size_t)iy * w + ix] : (uint8_t)x_zp;
                            v = (uint8_t)(v ^ (x_s8 ? 0x80u : 0u));
                        }
                        col[t] = v;
                    }
                    for (int32_t i = 0; i < mg; ++i) {
                        const int32_t o = g * mg + i;
                        const int32_t* wo = wq + (size_t)o * kp4;
                        uint32_t acc = (uint32_t)bias[o];
                        int32_t hi32, r;
                        for (int32_t t = 0; t < kk; ++t) {
                            const int32_t wt = (int32_t)(int8_t)(uint8_t)(
                                (uint32_t)wo[t >> 2] >> (8 * (t & 3)));
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

#endif  /* MTVM_QGEMM_S8_VNNI_X86_H_ */
