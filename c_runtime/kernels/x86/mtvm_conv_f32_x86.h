/* mtvm_conv_f32_x86.h: The x86 micro-kernels of the float convolution schedules:
 * band (a tile of 2 x 16 flat positions over a table of tap offsets; AVX-512 and
 * AVX2 + FMA) and direct (a same-size stride-1 convolution read straight from the
 * plane, padding masked off; AVX-512 only). Included by mtvm_gemm_f32.h.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_CONV_F32_X86_H_
#define MTVM_CONV_F32_X86_H_

#include <stdint.h>
#include "mtvm_f32_prelude.h"
#include "mtvm_repeat.h"
#include "mtvm_direct_f32_masks_x86.h"

#if MTVM_F32_AVX512

/* Row R_ of a tile of two 16-float vectors per row: accumulators c<R_>_0, c<R_>_1. */
#define MTVM_F32_X2_ACC_(R_, x) \
    __m512 c##R_##_0 = _mm512_setzero_ps(), c##R_##_1 = _mm512_setzero_ps();
#define MTVM_F32_X2_FMA_(R_, x) \
    { const __m512 a##R_ = _mm512_set1_ps(a[R_]); \
      c##R_##_0 = _mm512_fmadd_ps(a##R_, v0, c##R_##_0); \
      c##R_##_1 = _mm512_fmadd_ps(a##R_, v1, c##R_##_1); }
#define MTVM_F32_X2_STORE_(R_, x) \
    _mm512_storeu_ps(tile + R_ * 32, c##R_##_0); _mm512_storeu_ps(tile + R_ * 32 + 16, c##R_##_1);
/* ... and of one vector per row (the second half of the tile's row written as zeros, so
 * that gcc -O3 cannot see a read of it as uninitialized: -Werror=uninitialized fired on
 * light_resnet50's 14-wide bands). */
#define MTVM_F32_X1_ACC_(R_, x) __m512 c##R_##_0 = _mm512_setzero_ps();
#define MTVM_F32_X1_FMA_(R_, x) \
    { const __m512 a##R_ = _mm512_set1_ps(a[R_]); \
      c##R_##_0 = _mm512_fmadd_ps(a##R_, v0, c##R_##_0); }
#define MTVM_F32_X1_STORE_(R_, x) _mm512_storeu_ps(tile + R_ * 32, c##R_##_0);
#define MTVM_F32_X1_ZERO_(R_, x) _mm512_storeu_ps(tile + R_ * 32 + 16, _mm512_setzero_ps());
#define MTVM_F32_X2_LOAD1_ const __m512 v1 = _mm512_maskz_loadu_ps(k1, bt + 16);
#define MTVM_F32_X1_LOAD1_
#define MTVM_F32_X2_STORES_(MR_) MTVM_REPEAT(MR_, MTVM_F32_X2_STORE_, 0)
#define MTVM_F32_X1_STORES_(MR_) \
    MTVM_REPEAT(MR_, MTVM_F32_X1_STORE_, 0) MTVM_REPEAT(MR_, MTVM_F32_X1_ZERO_, 0)

/* MTVM_DEFINE_F32_BAND(name, MR):
 *   void name(int chans, int cs, int ntaps, const int32_t* off, const float* a,
 *             const float* b, int n, float* tile)
 *   tile[r * 32 + q] = sum_c sum_j a[(c * ntaps + j) * MR + r] * b[c * cs + off[j] + q]
 * r < MR, q < n <= 32: two 16-float vectors per row, 2 * MR accumulators, so each
 * broadcast weight feeds two FMAs (a one-vector kernel is bound by its loads: MR
 * broadcasts + one activation load per MR FMAs); n <= 16 runs one vector. Masked loads:
 * lanes q >= n are not read. */
#define MTVM_F32_BAND_LOOP_(MR_, X_) \
    MTVM_REPEAT(MR_, MTVM_F32_##X_##_ACC_, 0) \
    for (int c = 0; c < chans; ++c, b += cs) { \
        for (int j = 0; j < ntaps; ++j, a += MR_) { \
            const float* bt = b + off[j]; \
            const __m512 v0 = _mm512_maskz_loadu_ps(k0, bt); \
            MTVM_F32_##X_##_LOAD1_ \
            MTVM_REPEAT(MR_, MTVM_F32_##X_##_FMA_, 0) \
        } \
    }
#define MTVM_F32_BAND_BODY_(MR_, X_) MTVM_F32_BAND_LOOP_(MR_, X_) MTVM_F32_##X_##_STORES_(MR_)
#define MTVM_DEFINE_F32_BAND(NAME_, MR_) \
    static inline void NAME_(int chans, int cs, int ntaps, const int32_t* restrict off, \
        const float* restrict a, const float* restrict b, int n, float* restrict tile) \
    { \
        const __mmask16 k0 = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u); \
        if (n > 16) {  /* two vectors */ \
            const __mmask16 k1 = (__mmask16)(n >= 32 ? 0xffffu : (1u << (n - 16)) - 1u); \
            MTVM_F32_BAND_BODY_(MR_, X2) \
        } else {  /* one vector */ \
            MTVM_F32_BAND_BODY_(MR_, X1) \
        } \
    }

/* MTVM_DEFINE_F32_BAND_EPI(name, MR): the band with the conv's epilogue in registers
 *   void name(int chans, int cs, int ntaps, const int32_t* off, const float* a,
 *             const float* b, int n, const float* bias, float lo, float hi, float* y,
 *             int ldy)
 *   y[r * ldy + q] = clamp(tile[r * 32 + q] + bias[r], lo, hi), q < n (masked stores)
 * with the tile above (bias NULL: none); the clamp as Relu and Clip do it (maxps(lo, x),
 * minps(hi, x): x when it is NaN or equal). */
#define MTVM_F32_X_EPI_(C_, R_) \
    _mm512_min_ps(hi_, _mm512_max_ps(lo_, bias ? _mm512_add_ps(C_, _mm512_set1_ps(bias[R_])) : C_))
#define MTVM_F32_X2_EPI_STORE_(R_, x) \
    _mm512_mask_storeu_ps(y + (size_t)R_ * ldy, k0, MTVM_F32_X_EPI_(c##R_##_0, R_)); \
    _mm512_mask_storeu_ps(y + (size_t)R_ * ldy + 16, k1, MTVM_F32_X_EPI_(c##R_##_1, R_));
#define MTVM_F32_X1_EPI_STORE_(R_, x) \
    _mm512_mask_storeu_ps(y + (size_t)R_ * ldy, k0, MTVM_F32_X_EPI_(c##R_##_0, R_));
#define MTVM_DEFINE_F32_BAND_EPI(NAME_, MR_) \
    static inline void NAME_(int chans, int cs, int ntaps, const int32_t* restrict off, \
        const float* restrict a, const float* restrict b, int n, const float* restrict bias, \
        float lo, float hi, float* restrict y, int ldy) \
    { \
        const __m512 lo_ = _mm512_set1_ps(lo), hi_ = _mm512_set1_ps(hi); \
        const __mmask16 k0 = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u); \
        if (n > 16) {  /* two vectors */ \
            const __mmask16 k1 = (__mmask16)(n >= 32 ? 0xffffu : (1u << (n - 16)) - 1u); \
            MTVM_F32_BAND_LOOP_(MR_, X2) \
            MTVM_REPEAT(MR_, MTVM_F32_X2_EPI_STORE_, 0) \
        } else {  /* one vector */ \
            MTVM_F32_BAND_LOOP_(MR_, X1) \
            MTVM_REPEAT(MR_, MTVM_F32_X1_EPI_STORE_, 0) \
        } \
    }

/* MTVM_DEFINE_F32_DIRECT(name, MR):
 *   void name(int chans, int plane, int w, int kh_n, int kw_n, int dh, int dw, int ph,
 *             int pw, const float* a, const float* x, int p0, int n, float* tile)
 * A stride-1 convolution whose output plane has the input's size (w columns, `plane`
 * positions): output position p = oh * w + ow and tap (kh, kw) read input p + dy * w + dx
 * (dy = kh * dh - ph, dx = kw * dw - pw), so a tile of 32 consecutive positions (two
 * vectors, MR rows) reads 32 consecutive inputs per tap, without copying:
 *   tile[r * 32 + q] = sum over c, kh, kw of a[((c * kh_n + kh) * kw_n + kw) * MR + r]
 *                      * x[c * plane + p0 + q + dy * w + dx]
 * r < MR, q < n <= 32; taps in the padding (row or column outside the plane) and lanes
 * q >= n masked off (AVX-512 masked loads do not fault there). kh_n * kw_n <= 64. */
#define MTVM_DEFINE_F32_DIRECT(NAME_, MR_) \
    static inline void NAME_(int chans, int plane, int w, int kh_n, int kw_n, int dh, \
        int dw, int ph, int pw, const float* restrict a, const float* restrict x, int p0, \
        int n, float* restrict tile) \
    { \
        MTVM_REPEAT(MR_, MTVM_F32_X2_ACC_, 0) \
        /* per tap j = kh * kw_n + kw: its offset and lanes inside */ \
        int off[64]; \
        __mmask16 m0[64], m1[64]; \
        const int taps = kh_n * kw_n; \
        for (int kh = 0, j = 0; kh < kh_n; ++kh) { \
            const int dy = kh * dh - ph; \
            /* rows inside the plane: 0 <= p + dy * w < plane, p < p0 + n */ \
            const int lo = -dy * w, hi = plane - dy * w < p0 + n ? plane - dy * w : p0 + n; \
            const __mmask16 r0 = mtvm_lanes16(lo, hi, p0), r1 = mtvm_lanes16(lo, hi, p0 + 16); \
            for (int kw = 0; kw < kw_n; ++kw, ++j) { \
                const int dx = kw * dw - pw; \
                off[j] = dy * w + dx; \
                m0[j] = r0 & mtvm_cols16(p0, w, dx); \
                m1[j] = r1 & mtvm_cols16(p0 + 16, w, dx); \
            } \
        } \
        x += p0; \
        for (int c = 0; c < chans; ++c, x += plane) { \
            for (int j = 0; j < taps; ++j, a += MR_) { \
                const __m512 v0 = _mm512_maskz_loadu_ps(m0[j], x + off[j]); \
                const __m512 v1 = _mm512_maskz_loadu_ps(m1[j], x + off[j] + 16); \
                MTVM_REPEAT(MR_, MTVM_F32_X2_FMA_, 0) \
            } \
        } \
        MTVM_REPEAT(MR_, MTVM_F32_X2_STORE_, 0) \
    }

#elif MTVM_F32_AVX2

/* The band kernel for AVX2 + FMA, same contract as above (tile rows of 32 floats,
 * q < n <= 32): each half of 16 positions is the GEMM kernel's AVX2 tile (two 8-float
 * vectors per row, rows in passes of up to six, MTVM_F32_Y_PASSES_) run over the c, j taps.
 * Halves past n are written as zeros (as the AVX-512 one-vector form does). */
#define MTVM_F32_BAND_U_full _mm256_loadu_ps(bt)
#define MTVM_F32_BAND_V_full _mm256_loadu_ps(bt + 8)
#define MTVM_F32_BAND_U_masked _mm256_maskload_ps(bt, k0)
#define MTVM_F32_BAND_V_masked _mm256_maskload_ps(bt + 8, k1)
#define MTVM_F32_BAND_Y_STORE_(J_, G0_) \
    _mm256_storeu_ps(tile + (G0_ + J_) * 32 + h0, c##J_##_0); \
    _mm256_storeu_ps(tile + (G0_ + J_) * 32 + h0 + 8, c##J_##_1);
#define MTVM_F32_BAND_Y_ZERO_(R_, x) \
    _mm256_storeu_ps(tile + R_ * 32 + h0, _mm256_setzero_ps()); \
    _mm256_storeu_ps(tile + R_ * 32 + h0 + 8, _mm256_setzero_ps());
#define MTVM_F32_BAND_Y_PASS_(G0_, ROWS_, MR_, LOADS_) \
    MTVM_F32_BAND_Y_PASS_STORE_(G0_, ROWS_, MR_, LOADS_, MTVM_F32_BAND_Y_STORE_)
#define MTVM_F32_BAND_Y_PASS_STORE_(G0_, ROWS_, MR_, LOADS_, STORE_) \
    {  /* rows G0_ .. G0_ + ROWS_ - 1 of positions h0 .. h0 + 15 */ \
        const float* at = a + G0_; \
        const float* bc = b + h0; \
        MTVM_REPEAT(ROWS_, MTVM_F32_Y_ACC_, 0) \
        for (int c = 0; c < chans; ++c, bc += cs) { \
            for (int j = 0; j < ntaps; ++j, at += MR_) { \
                const float* bt = bc + off[j]; \
                const __m256 u = MTVM_F32_BAND_U_##LOADS_; \
                const __m256 v = MTVM_F32_BAND_V_##LOADS_; \
                MTVM_REPEAT(ROWS_, MTVM_F32_Y_FMA_, 0) \
            } \
        } \
        MTVM_REPEAT(ROWS_, STORE_, G0_) \
    }
/* The epilogue form (MTVM_DEFINE_F32_BAND_EPI, see the AVX-512 one): row J_'s two vectors
 * of the half at h0, biased, clamped and stored to y; masked stores past n. */
#define MTVM_F32_BAND_Y_EPI_full(J_, G0_) \
    { float* yr_ = y + (size_t)(G0_ + J_) * ldy + h0; \
      _mm256_storeu_ps(yr_, MTVM_F32_Y_EPI_(c##J_##_0, G0_ + J_)); \
      _mm256_storeu_ps(yr_ + 8, MTVM_F32_Y_EPI_(c##J_##_1, G0_ + J_)); }
#define MTVM_F32_BAND_Y_EPI_masked(J_, G0_) \
    { float* yr_ = y + (size_t)(G0_ + J_) * ldy + h0; \
      _mm256_maskstore_ps(yr_, k0, MTVM_F32_Y_EPI_(c##J_##_0, G0_ + J_)); \
      _mm256_maskstore_ps(yr_ + 8, k1, MTVM_F32_Y_EPI_(c##J_##_1, G0_ + J_)); }
#define MTVM_F32_BAND_Y_EPI_PASS_(G0_, ROWS_, MR_, LOADS_) \
    MTVM_F32_BAND_Y_PASS_STORE_(G0_, ROWS_, MR_, LOADS_, MTVM_F32_BAND_Y_EPI_##LOADS_)
#define MTVM_DEFINE_F32_BAND_EPI(NAME_, MR_) \
    static inline void NAME_(int chans, int cs, int ntaps, const int32_t* restrict off, \
        const float* restrict a, const float* restrict b, int n, const float* restrict bias, \
        float lo, float hi, float* restrict y, int ldy) \
    { \
        const __m256i lane_ = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); \
        const __m256 lo_ = _mm256_set1_ps(lo), hi_ = _mm256_set1_ps(hi); \
        for (int h0 = 0; h0 < 32 && h0 < n; h0 += 16) { \
            const int nh = n - h0; \
            if (nh >= 16) { \
                MTVM_F32_Y_PASSES_##MR_(MTVM_F32_BAND_Y_EPI_PASS_, MR_, full) \
            } else {  /* lanes past n are neither read nor written */ \
                const __m256i k0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nh), lane_); \
                const __m256i k1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nh - 8), lane_); \
                MTVM_F32_Y_PASSES_##MR_(MTVM_F32_BAND_Y_EPI_PASS_, MR_, masked) \
            } \
        } \
    }
#define MTVM_DEFINE_F32_BAND(NAME_, MR_) \
    static inline void NAME_(int chans, int cs, int ntaps, const int32_t* restrict off, \
        const float* restrict a, const float* restrict b, int n, float* restrict tile) \
    { \
        const __m256i lane_ = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); \
        for (int h0 = 0; h0 < 32; h0 += 16) { \
            const int nh = n - h0; \
            if (nh >= 16) { \
                MTVM_F32_Y_PASSES_##MR_(MTVM_F32_BAND_Y_PASS_, MR_, full) \
            } else if (nh > 0) {  /* lanes past n are not read */ \
                const __m256i k0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nh), lane_); \
                const __m256i k1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nh - 8), lane_); \
                MTVM_F32_Y_PASSES_##MR_(MTVM_F32_BAND_Y_PASS_, MR_, masked) \
            } else { \
                MTVM_REPEAT(MR_, MTVM_F32_BAND_Y_ZERO_, 0) \
            } \
        } \
    }
#define MTVM_DEFINE_F32_DIRECT(NAME_, MR_)

#endif  /* MTVM_F32_AVX512, MTVM_F32_AVX2 */

#endif  /* MTVM_CONV_F32_X86_H_ */
