/* mtvm_pwcv_f32_x86.h: The float pointwise (1x1) convolution of small planes on AVX-512,
 * vectorized over output channels instead of positions ("cv": channels in the vector).
 *
 * The position-vectorized GEMM tiles (mtvm_gemm_f32.h, the band of mtvm_conv_f32_x86.h) fill
 * 16 or 32 lanes with positions; a late MobileNet layer has 9 or 36 of them, so most lanes
 * of its FMAs compute nothing (176 -> 360 channels on a 3 x 3 plane: 9 of 16). Here each
 * vector holds 16 output channels and each accumulator one position:
 *
 *   tile[q * 32 + r] = sum_c sum_j a[block(r)][c ntaps + j][r % 8] * x[c cs + off[j] + q]
 *                                                                   r < nm, q < R
 *
 * (a pointwise conv: ntaps 1, off {0}, cs the plane; a KxK one over the band's gathered
 * rows, mtvm_conv_f32_x86.h, its tap offsets) with the weights in the layout the GEMM
 * schedules already pack (per block of 8 output channels, [tap][8]; `as` floats from one
 * block to the next): two blocks make a vector,
 * their halves loaded under masks (no shuffle, and a masked-off half reads no memory).
 * R positions x 32 channels are 2 R accumulators (24 at R = 12), each input value one
 * broadcast feeding two FMAs. nm (8, 16, 24 or 32) output channels: a pass of one vector
 * where nm <= 16.
 *
 * MTVM_DEFINE_F32_PWCV(name, R) defines
 *   void name(int chans, int ntaps, int cs, const int32_t* off, const float* a, int as,
 *             int nm, const float* x, float* tile)      the tile above, for any fused tail
 * MTVM_DEFINE_F32_PWCV_EPI(name, R) defines
 *   void name(int chans, int ntaps, int cs, const int32_t* off, const float* a, int as,
 *             int nm, const float* x, const float* bias, float lo, float hi, float* y,
 *             int ldy)
 *   y[r * ldy + q] = clamp(tile[q * 32 + r] + bias[r], lo, hi)  (bias NULL: none)
 * each vector of channels transposed in registers into rows of y (16 x 16 blocks).
 * On other targets both are empty: the schedule calls them under MTVM_F32_AVX512 only.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_PWCV_F32_X86_H_
#define MTVM_PWCV_F32_X86_H_

#include <stddef.h>
#include "mtvm_f32_prelude.h"
#include "mtvm_repeat.h"

#if MTVM_F32_AVX512

/* Sixteen output channels of input channel c: block b's eight (lanes 0-7) and, under
 * mask h (0xff00, or 0 where the vector has only eight channels), block b + 1's. */
static inline __m512 mtvm_pwcv_weights(const float* b0, const float* b1, __mmask16 h)
{
    const __m512 lo = _mm512_maskz_loadu_ps((__mmask16)0x00ff, b0);
    return _mm512_mask_loadu_ps(lo, h, b1 - 8);
}

/* Lanes below n (n <= 16). */
static inline __mmask16 mtvm_pwcv_lanes(int n)
{
    return (__mmask16)(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1u);
}

#define MTVM_PWCV2_ACC_(Q_, x) __m512 c##Q_##_0 = _mm512_setzero_ps(), c##Q_##_1 = c##Q_##_0;
#define MTVM_PWCV1_ACC_(Q_, x) __m512 c##Q_##_0 = _mm512_setzero_ps();
#define MTVM_PWCV2_FMA_(Q_, x) \
    { const __m512 v = _mm512_set1_ps(x[Q_]); \
      c##Q_##_0 = _mm512_fmadd_ps(w0, v, c##Q_##_0); \
      c##Q_##_1 = _mm512_fmadd_ps(w1, v, c##Q_##_1); }
#define MTVM_PWCV1_FMA_(Q_, x) \
    { const __m512 v = _mm512_set1_ps(x[Q_]); c##Q_##_0 = _mm512_fmadd_ps(w0, v, c##Q_##_0); }
/* The loop over input channels c and their ntaps taps j (a pointwise conv: one, at 0): a,
 * a1 (a2, a3) step through the blocks' rows of tap c ntaps + j, whose positions start at
 * x + c cs + off[j]. */
#define MTVM_PWCV2_LOOP_(R_) \
    MTVM_REPEAT(R_, MTVM_PWCV2_ACC_, 0) \
    for (int c = 0; c < chans; ++c, x += cs) { \
        for (int j = 0; j < ntaps; ++j, a += 8, a1 += 8, a2 += 8, a3 += 8) { \
            const float* xj = x + off[j]; \
            const __m512 w0 = mtvm_pwcv_weights(a, a1, h0); \
            const __m512 w1 = mtvm_pwcv_weights(a2, a3, h1); \
            MTVM_REPEAT(R_, MTVM_PWCV2_FMA_, xj) \
        } \
    }
#define MTVM_PWCV1_LOOP_(R_) \
    MTVM_REPEAT(R_, MTVM_PWCV1_ACC_, 0) \
    for (int c = 0; c < chans; ++c, x += cs) { \
        for (int j = 0; j < ntaps; ++j, a += 8, a1 += 8) { \
            const float* xj = x + off[j]; \
            const __m512 w0 = mtvm_pwcv_weights(a, a1, h0); \
            MTVM_REPEAT(R_, MTVM_PWCV1_FMA_, xj) \
        } \
    }
/* The blocks of the nm channels (a block past the last one is never read: its pointer
 * stays a, under a zero mask). */
#define MTVM_PWCV_BLOCKS_ \
    const __mmask16 h0 = (__mmask16)(nm > 8 ? 0xff00u : 0u); \
    const __mmask16 h1 = (__mmask16)(nm > 24 ? 0xff00u : 0u); \
    const float* a1 = nm > 8 ? a + as : a; \
    const float* a2 = nm > 16 ? a + 2 * (ptrdiff_t)as : a; \
    const float* a3 = nm > 24 ? a + 3 * (ptrdiff_t)as : a; \
    (void)a2; (void)a3; (void)h1;

#define MTVM_PWCV2_STORE_(Q_, x) \
    _mm512_storeu_ps(tile + Q_ * 32, c##Q_##_0); _mm512_storeu_ps(tile + Q_ * 32 + 16, c##Q_##_1);
#define MTVM_PWCV1_STORE_(Q_, x) _mm512_storeu_ps(tile + Q_ * 32, c##Q_##_0);
#define MTVM_DEFINE_F32_PWCV(NAME_, R_) \
    static inline void NAME_(int chans, int ntaps, int cs, const int32_t* restrict off, \
        const float* a, int as, int nm, const float* restrict x, float* restrict tile) \
    { \
        MTVM_PWCV_BLOCKS_ \
        if (nm > 16) { \
            MTVM_PWCV2_LOOP_(R_) \
            MTVM_REPEAT(R_, MTVM_PWCV2_STORE_, 0) \
        } else { \
            MTVM_PWCV1_LOOP_(R_) \
            MTVM_REPEAT(R_, MTVM_PWCV1_STORE_, 0) \
        } \
    }

/* v[0..16): a 16 x 16 block transposed (v[i] lane j <- v[j] lane i), in four stages of
 * 16 shuffles. */
static inline __attribute__((always_inline)) void mtvm_pwcv_transpose16(__m512* v)
{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        v[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]),
                                                   _mm512_castps_pd(t[i + 2])));
        v[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]),
                                                       _mm512_castps_pd(t[i + 2])));
        v[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]),
                                                       _mm512_castps_pd(t[i + 3])));
        v[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]),
                                                       _mm512_castps_pd(t[i + 3])));
    }
    for (int h = 0; h < 16; h += 8) {
        for (int i = 0; i < 4; ++i) {
            t[h + i] = _mm512_shuffle_f32x4(v[h + i], v[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(v[h + i], v[h + i + 4], 0xdd);
        }
    }
    for (int i = 0; i < 8; ++i) {
        v[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        v[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

/* y[r * ldy + q] = v[q] lane r for the block's n (8 or 16) channels r and positions q
 * under mask kq: v transposed, then one masked store per channel (a channel's positions
 * are contiguous in y). Bias and clamp are applied before, once per vector. */
static inline __attribute__((always_inline)) void mtvm_pwcv_store16(__m512* v, int n,
                                                                    __mmask16 kq, float* y,
                                                                    int ldy)
{
    mtvm_pwcv_transpose16(v);
    for (int r = 0; r < 8; ++r) _mm512_mask_storeu_ps(y + (ptrdiff_t)r * ldy, kq, v[r]);
    if (n > 8) {
        for (int r = 8; r < 16; ++r) _mm512_mask_storeu_ps(y + (ptrdiff_t)r * ldy, kq, v[r]);
    }
}

/* The epilogue: bias, clamp (as Relu and Clip: maxps(lo, x), minps(hi, x)), then each
 * vector of 16 channels transposed into rows of y. */
#define MTVM_PWCV_EPI_(C_, B_) _mm512_min_ps(hi_, _mm512_max_ps(lo_, _mm512_add_ps(C_, B_)))
#define MTVM_PWCV_V0_(Q_, x) v[Q_] = MTVM_PWCV_EPI_(c##Q_##_0, b0);
#define MTVM_PWCV_V1_(Q_, x) v[Q_] = MTVM_PWCV_EPI_(c##Q_##_1, b1);
#define MTVM_PWCV_STORE_V_(R_, V_, Y_, N_) \
    { \
        __m512 v[16]; \
        MTVM_REPEAT(R_, MTVM_PWCV_##V_##_, 0) \
        for (int q = R_; q < 16; ++q) v[q] = _mm512_setzero_ps(); \
        mtvm_pwcv_store16(v, N_, kq, Y_, ldy); \
    }
#define MTVM_DEFINE_F32_PWCV_EPI(NAME_, R_) \
    static inline void NAME_(int chans, int ntaps, int cs, const int32_t* restrict off, \
        const float* a, int as, int nm, const float* restrict x, const float* restrict bias, \
        float lo, float hi, float* restrict y, int ldy) \
    { \
        MTVM_PWCV_BLOCKS_ \
        const __m512 lo_ = _mm512_set1_ps(lo), hi_ = _mm512_set1_ps(hi); \
        const __mmask16 kq = mtvm_pwcv_lanes(R_); \
        const __m512 b0 = bias ? _mm512_maskz_loadu_ps(mtvm_pwcv_lanes(nm), bias) : \
                                 _mm512_setzero_ps(); \
        if (nm > 16) { \
            const __m512 b1 = bias ? _mm512_maskz_loadu_ps(mtvm_pwcv_lanes(nm - 16), \
                                                           bias + 16) : _mm512_setzero_ps(); \
            MTVM_PWCV2_LOOP_(R_) \
            MTVM_PWCV_STORE_V_(R_, V0, y, 16) \
            MTVM_PWCV_STORE_V_(R_, V1, y + 16 * (ptrdiff_t)ldy, nm - 16) \
        } else { \
            MTVM_PWCV1_LOOP_(R_) \
            MTVM_PWCV_STORE_V_(R_, V0, y, nm) \
        } \
    }

#else
#define MTVM_DEFINE_F32_PWCV(NAME_, R_)
#define MTVM_DEFINE_F32_PWCV_EPI(NAME_, R_)
#endif  /* MTVM_F32_AVX512 */

/* AVX2 + FMA (without AVX-512): the same over 8-float vectors, one block of 8 channels a
 * vector: R (at most 6) positions x 16 channels are 2 R of the 16 ymm registers, nm 8
 * or 16 (one vector where 8), tile[q * 16 + r]; the epilogue's 8 x 8 transposes
 * (mtvm_dw_f32_cv8_avx2.h) then stores of the R positions of each channel.
 * MTVM_DEFINE_F32_PWCV8(name, R), MTVM_DEFINE_F32_PWCV8_EPI(name, R): as above. */
#if MTVM_F32_AVX2
#include "mtvm_dw_f32_cv8_avx2.h"

#define MTVM_PWCV8_2ACC_(Q_, x) __m256 c##Q_##_0 = _mm256_setzero_ps(), c##Q_##_1 = c##Q_##_0;
#define MTVM_PWCV8_1ACC_(Q_, x) __m256 c##Q_##_0 = _mm256_setzero_ps();
#define MTVM_PWCV8_2FMA_(Q_, x) \
    { const __m256 v = _mm256_broadcast_ss(x + Q_); \
      c##Q_##_0 = _mm256_fmadd_ps(w0, v, c##Q_##_0); \
      c##Q_##_1 = _mm256_fmadd_ps(w1, v, c##Q_##_1); }
#define MTVM_PWCV8_1FMA_(Q_, x) \
    { const __m256 v = _mm256_broadcast_ss(x + Q_); c##Q_##_0 = _mm256_fmadd_ps(w0, v, c##Q_##_0); }
#define MTVM_PWCV8_LOOP_(R_, N_) \
    MTVM_REPEAT(R_, MTVM_PWCV8_##N_##ACC_, 0) \
    for (int c = 0; c < chans; ++c, x += ldx) { \
        const __m256 w0 = _mm256_loadu_ps(a + 8 * c); \
        const __m256 w1 = _mm256_loadu_ps(a1 + 8 * c); \
        (void)w1; \
        MTVM_REPEAT(R_, MTVM_PWCV8_##N_##FMA_, x) \
    }
/* (the second block read only where nm is 16: else a1 is a, whose row is as good) */
#define MTVM_PWCV8_BLOCKS_ const float* a1 = nm > 8 ? a + as : a;
#define MTVM_PWCV8_2STORE_(Q_, x) \
    _mm256_storeu_ps(tile + Q_ * 16, c##Q_##_0); _mm256_storeu_ps(tile + Q_ * 16 + 8, c##Q_##_1);
#define MTVM_PWCV8_1STORE_(Q_, x) _mm256_storeu_ps(tile + Q_ * 16, c##Q_##_0);
#define MTVM_DEFINE_F32_PWCV8(NAME_, R_) \
    static inline void NAME_(int chans, const float* restrict a, int as, int nm, \
        const float* restrict x, int ldx, float* restrict tile) \
    { \
        MTVM_PWCV8_BLOCKS_ \
        if (nm > 8) { \
            MTVM_PWCV8_LOOP_(R_, 2) \
            MTVM_REPEAT(R_, MTVM_PWCV8_2STORE_, 0) \
        } else { \
            MTVM_PWCV8_LOOP_(R_, 1) \
            MTVM_REPEAT(R_, MTVM_PWCV8_1STORE_, 0) \
        } \
    }

/* The first n (1 to 8, a constant after inlining) floats of v at y. */
static inline __attribute__((always_inline)) void mtvm_pwcv8_store_n(float* y, __m256 v, int n)
{
    const __m128 lo = _mm256_castps256_ps128(v);
    if (n == 8) {
        _mm256_storeu_ps(y, v);
        return;
    }
    if (n >= 4) {
        _mm_storeu_ps(y, lo);
        y += 4;
        n -= 4;
        v = _mm256_permute2f128_ps(v, v, 0x01);
    }
    {
        const __m128 h = _mm256_castps256_ps128(v);
        if (n >= 2) {
            _mm_storel_epi64((__m128i*)(void*)y, _mm_castps_si128(h));
            if (n == 3) _mm_store_ss(y + 2, _mm_movehl_ps(h, h));
        } else if (n == 1) {
            _mm_store_ss(y, h);
        }
    }
}

/* Bias and clamp per vector, then each vector of 8 channels transposed into rows of y. */
#define MTVM_PWCV8_EPI_(C_, B_) _mm256_min_ps(hi_, _mm256_max_ps(lo_, _mm256_add_ps(C_, B_)))
#define MTVM_PWCV8_V0_(Q_, x) v[Q_] = MTVM_PWCV8_EPI_(c##Q_##_0, b0);
#define MTVM_PWCV8_V1_(Q_, x) v[Q_] = MTVM_PWCV8_EPI_(c##Q_##_1, b1);
#define MTVM_PWCV8_STORE_V_(R_, V_, Y_) \
    { \
        __m256 v[8]; \
        MTVM_REPEAT(R_, MTVM_PWCV8_##V_##_, 0) \
        for (int q = R_; q < 8; ++q) v[q] = _mm256_setzero_ps(); \
        mtvm_transpose8_f32_avx2(v); \
        for (int r = 0; r < 8; ++r) mtvm_pwcv8_store_n(Y_ + (ptrdiff_t)r * ldy, v[r], R_); \
    }
#define MTVM_DEFINE_F32_PWCV8_EPI(NAME_, R_) \
    static inline void NAME_(int chans, const float* restrict a, int as, int nm, \
        const float* restrict x, int ldx, const float* restrict bias, float lo, float hi, \
        float* restrict y, int ldy) \
    { \
        MTVM_PWCV8_BLOCKS_ \
        const __m256 lo_ = _mm256_set1_ps(lo), hi_ = _mm256_set1_ps(hi); \
        const __m256 b0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps(); \
        if (nm > 8) { \
            const __m256 b1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps(); \
            MTVM_PWCV8_LOOP_(R_, 2) \
            MTVM_PWCV8_STORE_V_(R_, V0, y) \
            MTVM_PWCV8_STORE_V_(R_, V1, y + 8 * (ptrdiff_t)ldy) \
        } else { \
            MTVM_PWCV8_LOOP_(R_, 1) \
            MTVM_PWCV8_STORE_V_(R_, V0, y) \
        } \
    }

#else
#define MTVM_DEFINE_F32_PWCV8(NAME_, R_)
#define MTVM_DEFINE_F32_PWCV8_EPI(NAME_, R_)
#endif  /* MTVM_F32_AVX2 */

#endif  /* MTVM_PWCV_F32_X86_H_ */
