/* mtvm_qmatmul_s8_vnni_x86.h: QMatMul (x [m][k] int8 or uint8 times constant int8 weights
 * [n][k], requantized to 8 bits) on x86 hosts with AVX-512 VNNI, reading the weights as the
 * portable kernel does (one row of k bytes per output channel: target c's one layout for
 * every branch of its C).
 *
 * Per output channel a vector of 16 int32 partial sums along k: each 64 bytes of a row of x
 * and of the channel's weights one VPDPBUSD (u8 x s8, four products a lane, exact), then the
 * 16 channels' vectors summed across their lanes together (a transposing add tree, 45
 * instructions for 16 sums). VPDPBUSD wants x unsigned: int8 x is read as x + 128 (its sign
 * bit flipped) and 128 sum_k w[j][k] taken off once per call. The generic kernel
 * (mtvm_dot_8.h) widened to int16 and summed each output across lanes alone; kwt_tiny_int8's
 * projections ran at 26 MACs/ns there on the Zen 5 host. The same integers: the
 * requantization is mtvm_requantize_nt's on vectors (the schedule takes only multipliers
 * without ties), then the output zero point, the clamp and a folded bias Add (post).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_QMATMUL_S8_VNNI_X86_H_
#define MTVM_QMATMUL_S8_VNNI_X86_H_

#include <stddef.h>
#include <stdint.h>
#include "mtvm_int8_x86.h"
#include "mtvm_mulhi_s32_x86.h"

#if defined(MTVM_INT8_X86) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VNNI__)
#define MTVM_QMM_VNNI 1

/* Lane i of the result: the sum of the 16 lanes of v[i]. */
static inline __attribute__((always_inline)) __m512i mtvm_qmm_sum16_x86(const __m512i* v)
{
    __m512i t[8], u[4], w[2];
    for (int i = 0; i < 8; ++i) {
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    }
    for (int i = 0; i < 4; ++i) {
        u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                                _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    }
    for (int i = 0; i < 2; ++i) {
        w[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2 * i], u[2 * i + 1], 0x88),
                                _mm512_shuffle_i32x4(u[2 * i], u[2 * i + 1], 0xdd));
    }
    return _mm512_add_epi32(_mm512_shuffle_i32x4(w[0], w[1], 0x88),
                            _mm512_shuffle_i32x4(w[0], w[1], 0xdd));
}

/* The sums of 16 channels (rows of w from w0, k bytes apart; the first `cols` real, the
 * rest zero) with one row xr of x (64-byte chunks, the last under mask tail; flip: its
 * bytes' sign bits flipped; xr NULL: every byte 128): lane j the dot product of xr with
 * channel j's row. */
static inline __attribute__((always_inline)) __m512i mtvm_qmm_dot16_vnni(
    const uint8_t* xr, int flip, const int8_t* w0, int32_t k, int32_t cols, __mmask64 tail)
{
    __m512i acc[16];
    const int32_t chunks = (k + 63) / 64;
    const __m512i f = _mm512_set1_epi8(flip ? (char)0x80 : 0);
    for (int c = 0; c < 16; ++c) acc[c] = _mm512_setzero_si512();
    for (int32_t j = 0; j < chunks; ++j) {
        const __mmask64 mk = j + 1 == chunks ? tail : ~(__mmask64)0;
        const __m512i xv = xr == NULL ? _mm512_set1_epi8((char)0x80) :
            _mm512_xor_si512(_mm512_maskz_loadu_epi8(mk, xr + 64 * j), f);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 16
#endif
        for (int c = 0; c < 16; ++c) {
            /* a channel past the last one reads nothing (mask 0, its pointer kept valid) */
            const int8_t* wr = w0 + (ptrdiff_t)(c < cols ? c : 0) * k + 64 * j;
            const __m512i wv = _mm512_maskz_loadu_epi8(c < cols ? mk : 0, wr);
            acc[c] = _mm512_dpbusd_epi32(acc[c], xv, wv);
        }
    }
    return mtvm_qmm_sum16_x86(acc);
}

/* The lanes below n (n <= 16; none where n <= 0). */
static inline __mmask16 mtvm_qmm_lanes_x86(int32_t n)
{
    return (__mmask16)(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1u);
}

/* Operands as mtvm_qmatmul_avx2_x86's (mtvm_qmatmul_s8_avx2_x86.h) but w: the plain
 * weights [n][k] int8; post as the model has it: [n][2] pairs (post_pairs 1) or [n + 1]
 * (each column's c, then the one ia); no scratch. */
static inline void mtvm_qmatmul_vnni_x86(const uint8_t* x, int x_u, int32_t m, int32_t k,
                                         int32_t n, const int8_t* w, const int32_t* bias,
                                         const int32_t* mult, int ms, const int32_t* shift,
                                         int ss, int32_t y_zp, int32_t lo, int32_t hi,
                                         const int32_t* post, int post_pairs, int32_t post_n,
                                         int32_t plo, int32_t phi, uint8_t* y)
{
    const __mmask64 tail = k % 64 ? ((__mmask64)1 << (k % 64)) - 1 : ~(__mmask64)0;
    const __m512i vzp = _mm512_set1_epi32(y_zp), vlo = _mm512_set1_epi32(lo);
    const __m512i vhi = _mm512_set1_epi32(hi);
    const __m512i one = _mm512_set1_epi32(1);
    for (int32_t o = 0; o < n; o += 16) {
        const int32_t cols = n - o < 16 ? n - o : 16;
        const __mmask16 live = (__mmask16)((1u << cols) - 1u);
        const int8_t* w0 = w + (size_t)o * (size_t)k;
        /* bias minus, for int8 x, the 128 sum_k w[j][k] its flipped bytes add */
        __m512i b = _mm512_maskz_loadu_epi32(live, bias + o);
        if (!x_u) {
            b = _mm512_sub_epi32(b, mtvm_qmm_dot16_vnni(NULL, 0, w0, k, cols, tail));
        }
        const __m512i mv = ms ? _mm512_maskz_loadu_epi32(live, mult + o)
                              : _mm512_set1_epi32(mult[0]);
        const __m512i sv = ss ? _mm512_maskz_loadu_epi32(live, shift + o)
                              : _mm512_set1_epi32(shift[0]);
        const __m512i e = _mm512_sub_epi32(_mm512_set1_epi32(-1), sv);
        const __m512i rnd = _mm512_sllv_epi32(one, _mm512_sub_epi32(e, one));
        __m512i pc = _mm512_setzero_si512(), pia = pc;
        if (post != NULL && post_pairs) {   /* [n][2]: the pairs' halves apart */
            const __m512i p0 = _mm512_maskz_loadu_epi32(mtvm_qmm_lanes_x86(2 * cols), post + 2 * o);
            const __m512i p1 = _mm512_maskz_loadu_epi32(mtvm_qmm_lanes_x86(2 * cols - 16),
                                                        post + 2 * o + 16);
            const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22,
                                                   24, 26, 28, 30);
            pc = _mm512_permutex2var_epi32(p0, even, p1);
            pia = _mm512_permutex2var_epi32(p0, _mm512_add_epi32(even, one), p1);
        } else if (post != NULL) {          /* [n + 1]: the columns' c, then one ia */
            pc = _mm512_maskz_loadu_epi32(live, post + o);
            pia = _mm512_set1_epi32(post[n]);
        }
        for (int32_t i = 0; i < m; ++i) {
            const __m512i s = _mm512_add_epi32(
                b, mtvm_qmm_dot16_vnni(x + (size_t)i * (size_t)k, !x_u, w0, k, cols, tail));
            __m512i v = _mm512_srav_epi32(_mm512_add_epi32(mtvm_mulhi16_x86(s, mv), rnd), e);
            v = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(v, vzp), vlo), vhi);
            if (post != NULL) {
                v = _mm512_sra_epi32(_mm512_add_epi32(pc, _mm512_mullo_epi32(v, pia)),
                                     _mm_cvtsi32_si128(post_n));
                v = _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(plo)),
                                     _mm512_set1_epi32(phi));
            }
            _mm512_mask_cvtepi32_storeu_epi8(y + (size_t)i * (size_t)n + (size_t)o, live, v);
        }
    }
}
#endif

#endif  /* MTVM_QMATMUL_S8_VNNI_X86_H_ */
