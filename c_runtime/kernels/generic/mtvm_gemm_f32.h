/* mtvm_gemm_f32.h: The float GEMM micro-kernel: one MR x MTVM_F32_NR tile of a matrix
 * product in registers (AVX-512, AVX2 + FMA, or scalar with the Thumb-2 VFP 4 x 4 block).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_GEMM_F32_H_
#define MTVM_GEMM_F32_H_

#include <stdint.h>
#include "mtvm_f32_prelude.h"
#include "mtvm_repeat.h"

/* A micro-kernel of MR rows (1 to MTVM_REPEAT_MAX), defined at file scope by the
 * generated source for the heights its layers use (mtvm/ops/microkernels.py):
 *
 *   MTVM_DEFINE_F32_GEMM(name, MR):
 *     void name(int taps, const float* a, const float* b, int ldb, int n, float* tile)
 *     tile[r * MTVM_F32_NR + q] = sum_t a[t * MR + r] * b[t * ldb + q]
 *   MTVM_DEFINE_F32_GEMM_OFF(name, MR):
 *     void name(int taps, const float* a, const float* b, const int32_t* off, int n,
 *               float* tile)
 *     tile[r * MTVM_F32_NR + q] = sum_t a[t * MR + r] * b[off[t] + q]
 *
 * for r < MR, q < n <= MTVM_F32_NR. `a` holds the weights packed at compile time in the
 * order the loop reads them (MR consecutive rows per tap), so each step loads MR weights
 * and NR activations for MR * NR multiply-accumulates, the MR x NR sums in registers:
 *
 *   AVX-512 (NR 16): one vector accumulator per row; a partial tile uses masked loads
 *     (lanes q >= n are not read).
 *   AVX2 + FMA (NR 16): two vector accumulators per row (each broadcast weight feeds two
 *     FMAs), rows in passes of up to 6 (MTVM_F32_Y_PASSES_ there); masked loads as above.
 *   else (NR 4): rows in passes of up to 4 (4 x 4 accumulators + 4 activations + 1 weight
 *     fit the FPU's 32 registers), each pass over all taps, fused multiply-add (vfma)
 *     where the FPU has it; the full 4 x 4 block in Thumb-2 assembly where the FPU fuses
 *     and the module includes mtvm_gemm_f32_vfp.h (the same operations in the same
 *     order; chosen where the kernel is defined, see MTVM_F32_BLOCK_4).
 *
 * The rows are written out (c0, c1, ...) by MTVM_REPEAT: gcc keeps them in registers at
 * -O2, where it would not unroll a loop over an accumulator array. The band and direct
 * kernels of the x86 convolution schedules are in x86/mtvm_conv_f32_x86.h. */

/* How `b` is read, per form: ldb, the rows of a matrix; off, a table of tap offsets. */
#define MTVM_F32_B_PARAM_ldb int ldb
#define MTVM_F32_B_PARAM_off const int32_t* restrict off
#define MTVM_F32_B_STEP_ldb(MR_) a += MR_, b += ldb
#define MTVM_F32_B_STEP_off(MR_) a += MR_
#define MTVM_F32_B_ROW_ldb b
#define MTVM_F32_B_ROW_off (b + off[t])
#define MTVM_F32_B_AT_ldb(Q_) b[t * ldb + Q_]
#define MTVM_F32_B_AT_off(Q_) b[off[t] + Q_]

/* Per pass of ROWS_ rows from G0_ (AVX2, scalar), `at` the pass's first weight. */
#define MTVM_F32_S_DECL_ldb const float* bb = b;
#define MTVM_F32_S_DECL_off
#define MTVM_F32_S_STEP_ldb(MR_) at += MR_, bb += ldb
#define MTVM_F32_S_STEP_off(MR_) at += MR_
#define MTVM_F32_S_ROW_ldb bb
#define MTVM_F32_S_ROW_off b + off[t]
/* MTVM_F32_PASSES_<MR>: the passes of MR rows, four rows each but the last. */
#define MTVM_F32_PASSES_1(P, MR_, V_) P(0, 1, MR_, V_)
#define MTVM_F32_PASSES_2(P, MR_, V_) P(0, 2, MR_, V_)
#define MTVM_F32_PASSES_3(P, MR_, V_) P(0, 3, MR_, V_)
#define MTVM_F32_PASSES_4(P, MR_, V_) P(0, 4, MR_, V_)
#define MTVM_F32_PASSES_5(P, MR_, V_) MTVM_F32_PASSES_4(P, MR_, V_) P(4, 1, MR_, V_)
#define MTVM_F32_PASSES_6(P, MR_, V_) MTVM_F32_PASSES_4(P, MR_, V_) P(4, 2, MR_, V_)
#define MTVM_F32_PASSES_7(P, MR_, V_) MTVM_F32_PASSES_4(P, MR_, V_) P(4, 3, MR_, V_)
#define MTVM_F32_PASSES_8(P, MR_, V_) MTVM_F32_PASSES_4(P, MR_, V_) P(4, 4, MR_, V_)
#define MTVM_F32_PASSES_9(P, MR_, V_) MTVM_F32_PASSES_8(P, MR_, V_) P(8, 1, MR_, V_)
#define MTVM_F32_PASSES_10(P, MR_, V_) MTVM_F32_PASSES_8(P, MR_, V_) P(8, 2, MR_, V_)
#define MTVM_F32_PASSES_11(P, MR_, V_) MTVM_F32_PASSES_8(P, MR_, V_) P(8, 3, MR_, V_)
#define MTVM_F32_PASSES_12(P, MR_, V_) MTVM_F32_PASSES_8(P, MR_, V_) P(8, 4, MR_, V_)
#define MTVM_F32_PASSES_13(P, MR_, V_) MTVM_F32_PASSES_12(P, MR_, V_) P(12, 1, MR_, V_)
#define MTVM_F32_PASSES_14(P, MR_, V_) MTVM_F32_PASSES_12(P, MR_, V_) P(12, 2, MR_, V_)
#define MTVM_F32_PASSES_15(P, MR_, V_) MTVM_F32_PASSES_12(P, MR_, V_) P(12, 3, MR_, V_)
#define MTVM_F32_PASSES_16(P, MR_, V_) MTVM_F32_PASSES_12(P, MR_, V_) P(12, 4, MR_, V_)

#if MTVM_F32_AVX512

#define MTVM_F32_ACC_(R_, x) __m512 c##R_ = _mm512_setzero_ps();
#define MTVM_F32_FMA_(R_, x) c##R_ = _mm512_fmadd_ps(_mm512_set1_ps(a[R_]), bv, c##R_);
#define MTVM_F32_STORE_(R_, x) _mm512_storeu_ps(tile + R_ * 16, c##R_);
#define MTVM_F32_GEMM_BODY_(MR_, V_) \
    MTVM_REPEAT(MR_, MTVM_F32_ACC_, 0) \
    if (n == 16) { \
        for (int t = 0; t < taps; ++t, MTVM_F32_B_STEP_##V_(MR_)) { \
            const __m512 bv = _mm512_loadu_ps(MTVM_F32_B_ROW_##V_); \
            MTVM_REPEAT(MR_, MTVM_F32_FMA_, 0) \
        } \
    } else {  /* partial tile: lanes q >= n are not read */ \
        const __mmask16 k = (__mmask16)((1u << n) - 1u); \
        for (int t = 0; t < taps; ++t, MTVM_F32_B_STEP_##V_(MR_)) { \
            const __m512 bv = _mm512_maskz_loadu_ps(k, MTVM_F32_B_ROW_##V_); \
            MTVM_REPEAT(MR_, MTVM_F32_FMA_, 0) \
        } \
    } \
    MTVM_REPEAT(MR_, MTVM_F32_STORE_, 0)

#elif MTVM_F32_AVX2

/* AVX2 + FMA: two 8-float vectors per row (n > 8), rows in passes of up to six, each
 * over all taps: 12 accumulators, 2 activation vectors and the broadcast weight of the 16
 * ymm registers (a partial tile masks its second vector's loads: lanes q >= n are not
 * read). A tile of at most 8 columns runs one vector per row, all rows in one pass (its
 * second half written as zeros). */
#define MTVM_F32_Y_ACC_(J_, x) \
    __m256 c##J_##_0 = _mm256_setzero_ps(), c##J_##_1 = _mm256_setzero_ps();
#define MTVM_F32_Y_FMA_(J_, x) \
    { const __m256 a##J_ = _mm256_broadcast_ss(at + J_); \
      c##J_##_0 = _mm256_fmadd_ps(a##J_, u, c##J_##_0); \
      c##J_##_1 = _mm256_fmadd_ps(a##J_, v, c##J_##_1); }
#define MTVM_F32_Y_STORE_(J_, G0_) \
    _mm256_storeu_ps(tile + (G0_ + J_) * 16, c##J_##_0); \
    _mm256_storeu_ps(tile + (G0_ + J_) * 16 + 8, c##J_##_1);
#define MTVM_F32_Y_LOOP_(ROWS_, MR_, V_, LOAD_V_) \
    for (int t = 0; t < taps; ++t, MTVM_F32_S_STEP_##V_(MR_)) { \
        const float* bt = MTVM_F32_S_ROW_##V_; \
        const __m256 u = _mm256_loadu_ps(bt); \
        const __m256 v = LOAD_V_; \
        MTVM_REPEAT(ROWS_, MTVM_F32_Y_FMA_, 0) \
    }
#define MTVM_F32_PASS_STORE_(G0_, ROWS_, MR_, V_, STORE_, N_) \
    {  /* rows G0_ .. G0_ + ROWS_ - 1, N_ columns */ \
        const float* at = a + G0_; \
        MTVM_F32_S_DECL_##V_ \
        MTVM_REPEAT(ROWS_, MTVM_F32_Y_ACC_, 0) \
        if ((N_) == 16) { \
            MTVM_F32_Y_LOOP_(ROWS_, MR_, V_, _mm256_loadu_ps(bt + 8)) \
        } else { \
            MTVM_F32_Y_LOOP_(ROWS_, MR_, V_, _mm256_maskload_ps(bt + 8, k1)) \
        } \
        MTVM_REPEAT(ROWS_, STORE_, G0_) \
    }
#define MTVM_F32_PASS_(G0_, ROWS_, MR_, V_) \
    MTVM_F32_PASS_STORE_(G0_, ROWS_, MR_, V_, MTVM_F32_Y_STORE_, n)
#define MTVM_F32_Y1_ACC_(R_, x) __m256 c##R_ = _mm256_setzero_ps();
#define MTVM_F32_Y1_FMA_(R_, x) c##R_ = _mm256_fmadd_ps(_mm256_broadcast_ss(a + R_), bv, c##R_);
#define MTVM_F32_Y1_STORE_(R_, x) \
    _mm256_storeu_ps(tile + R_ * 16, c##R_); \
    _mm256_storeu_ps(tile + R_ * 16 + 8, _mm256_setzero_ps());
/* MTVM_F32_Y_PASSES_<MR>: up to six rows a pass (12 accumulators + 2 activations + 1
 * weight: 15 of the 16 registers), the rows split evenly. Six rows a pass run the 144-tap
 * 12 x 16 tile at 118-131 GFLOPS on a Zen 4 core (AVX2 build) against 86-102 for 8 rows as
 * 4 + 4; 8 stays 4 + 4 (6 + 2 was slower: 76-85). */
#define MTVM_F32_Y_PASSES_1(P, MR_, V_) P(0, 1, MR_, V_)
#define MTVM_F32_Y_PASSES_2(P, MR_, V_) P(0, 2, MR_, V_)
#define MTVM_F32_Y_PASSES_3(P, MR_, V_) P(0, 3, MR_, V_)
#define MTVM_F32_Y_PASSES_4(P, MR_, V_) P(0, 4, MR_, V_)
#define MTVM_F32_Y_PASSES_5(P, MR_, V_) P(0, 5, MR_, V_)
#define MTVM_F32_Y_PASSES_6(P, MR_, V_) P(0, 6, MR_, V_)
#define MTVM_F32_Y_PASSES_7(P, MR_, V_) P(0, 4, MR_, V_) P(4, 3, MR_, V_)
#define MTVM_F32_Y_PASSES_8(P, MR_, V_) P(0, 4, MR_, V_) P(4, 4, MR_, V_)
#define MTVM_F32_Y_PASSES_9(P, MR_, V_) P(0, 5, MR_, V_) P(5, 4, MR_, V_)
#define MTVM_F32_Y_PASSES_10(P, MR_, V_) P(0, 5, MR_, V_) P(5, 5, MR_, V_)
#define MTVM_F32_Y_PASSES_11(P, MR_, V_) P(0, 6, MR_, V_) P(6, 5, MR_, V_)
#define MTVM_F32_Y_PASSES_12(P, MR_, V_) P(0, 6, MR_, V_) P(6, 6, MR_, V_)
#define MTVM_F32_Y_PASSES_13(P, MR_, V_) MTVM_F32_Y_PASSES_9(P, MR_, V_) P(9, 4, MR_, V_)
#define MTVM_F32_Y_PASSES_14(P, MR_, V_) MTVM_F32_Y_PASSES_10(P, MR_, V_) P(10, 4, MR_, V_)
#define MTVM_F32_Y_PASSES_15(P, MR_, V_) MTVM_F32_Y_PASSES_10(P, MR_, V_) P(10, 5, MR_, V_)
#define MTVM_F32_Y_PASSES_16(P, MR_, V_) MTVM_F32_Y_PASSES_12(P, MR_, V_) P(12, 4, MR_, V_)
/* The tile of N_ columns (lane_ declared): over 8, the rows in passes PASS_ (two vectors
 * a row, MTVM_F32_Y_PASSES_); else one vector a row, all rows at once, each row stored by
 * Y1_STORE_. The plain tile and the epilogue form (below) differ in their stores only. */
#define MTVM_F32_Y_TILE_(MR_, V_, N_, PASS_, Y1_STORE_) \
    if ((N_) > 8) { \
        const __m256i k1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((N_) - 8), lane_); \
        MTVM_F32_Y_PASSES_##MR_(PASS_, MR_, V_) \
    } else { \
        const __m256i k0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(N_), lane_); \
        MTVM_REPEAT(MR_, MTVM_F32_Y1_ACC_, 0) \
        for (int t = 0; t < taps; ++t, MTVM_F32_B_STEP_##V_(MR_)) { \
            const __m256 bv = _mm256_maskload_ps(MTVM_F32_B_ROW_##V_, k0); \
            MTVM_REPEAT(MR_, MTVM_F32_Y1_FMA_, 0) \
        } \
        MTVM_REPEAT(MR_, Y1_STORE_, 0) \
    }
#define MTVM_F32_GEMM_BODY_(MR_, V_) \
    const __m256i lane_ = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); \
    MTVM_F32_Y_TILE_(MR_, V_, n, MTVM_F32_PASS_, MTVM_F32_Y1_STORE_)

/* The same tile with the conv's epilogue in registers (MTVM_DEFINE_F32_GEMM_EPI): row r
 * of the sums plus bias[r] (no bias: bias NULL), clamped to [lo, hi] as Relu and Clip do
 * (x < lo ? lo : x, then x > hi ? hi : x: maxps(lo, x) and minps(hi, x) return x when it is
 * NaN or equal), stored to y + r * ldy, columns q < n only. Full tiles (n = 16) have their
 * own copy of the code, n a constant there: with n known only at run time the stores'
 * tests and masks cost as much as the epilogue saves. vww's 8 -> 16 channel layer at
 * 48 x 48 (8 taps), alone: tile and epilogue loop 9.0 us, epilogue kernel 9.9 us, with the
 * full-tile copy 7.4 us. */
#define MTVM_F32_Y_EPI_(C_, R_) \
    _mm256_min_ps(hi_, _mm256_max_ps(lo_, bias ? _mm256_add_ps(C_, _mm256_set1_ps(bias[R_])) : C_))
#define MTVM_F32_Y_EPI_STORE_(J_, G0_) \
    { float* yr_ = y + (size_t)(G0_ + J_) * ldy; \
      _mm256_storeu_ps(yr_, MTVM_F32_Y_EPI_(c##J_##_0, G0_ + J_)); \
      if (n_ == 16) { \
          _mm256_storeu_ps(yr_ + 8, MTVM_F32_Y_EPI_(c##J_##_1, G0_ + J_)); \
      } else { \
          _mm256_maskstore_ps(yr_ + 8, k1, MTVM_F32_Y_EPI_(c##J_##_1, G0_ + J_)); \
      } }
#define MTVM_F32_Y_EPI_PASS_(G0_, ROWS_, MR_, V_) \
    MTVM_F32_PASS_STORE_(G0_, ROWS_, MR_, V_, MTVM_F32_Y_EPI_STORE_, n_)
#define MTVM_F32_Y1_EPI_STORE_(R_, x) \
    _mm256_maskstore_ps(y + (size_t)R_ * ldy, k0, MTVM_F32_Y_EPI_(c##R_, R_));
/* The tile of n_ = N_ columns. */
#define MTVM_F32_GEMM_EPI_CASE_(MR_, V_, N_) \
    { \
        const int n_ = (N_); \
        MTVM_F32_Y_TILE_(MR_, V_, n_, MTVM_F32_Y_EPI_PASS_, MTVM_F32_Y1_EPI_STORE_) \
    }
#define MTVM_F32_GEMM_EPI_BODY_(MR_, V_) \
    const __m256i lane_ = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); \
    const __m256 lo_ = _mm256_set1_ps(lo), hi_ = _mm256_set1_ps(hi); \
    if (n == 16) MTVM_F32_GEMM_EPI_CASE_(MR_, V_, 16) \
    else MTVM_F32_GEMM_EPI_CASE_(MR_, V_, n)
#define MTVM_F32_GEMM_EPI_FUNCTION_(NAME_, MR_, V_) \
    static inline void NAME_(int taps, const float* restrict a, const float* restrict b, \
                             MTVM_F32_B_PARAM_##V_, int n, const float* restrict bias, \
                             float lo, float hi, float* restrict y, int ldy) \
    { \
        MTVM_F32_GEMM_EPI_BODY_(MR_, V_) \
    }
#define MTVM_DEFINE_F32_GEMM_EPI(NAME_, MR_) MTVM_F32_GEMM_EPI_FUNCTION_(NAME_, MR_, ldb)
#define MTVM_DEFINE_F32_GEMM_EPI_OFF(NAME_, MR_) MTVM_F32_GEMM_EPI_FUNCTION_(NAME_, MR_, off)

#else

/* Scalar: passes of ROWS_ <= 4 rows. */
#define MTVM_F32_VFP_ldb(G0_, MR_) mtvm_f32_gemm_4x4_vfp(taps, at, MR_, bb, ldb, tile + G0_ * 4);
#define MTVM_F32_VFP_off(G0_, MR_) \
    mtvm_f32_gemm_4x4_off_vfp(taps, at, MR_, b, off, tile + G0_ * 4);

#define MTVM_F32_ACC_(J_, x) \
    float c##J_##_0 = 0.0f, c##J_##_1 = 0.0f, c##J_##_2 = 0.0f, c##J_##_3 = 0.0f;
#define MTVM_F32_FMA_(J_, x) \
    { const float a##J_ = at[J_]; \
      c##J_##_0 = MTVM_FMAF(a##J_, b0, c##J_##_0); c##J_##_1 = MTVM_FMAF(a##J_, b1, c##J_##_1); \
      c##J_##_2 = MTVM_FMAF(a##J_, b2, c##J_##_2); c##J_##_3 = MTVM_FMAF(a##J_, b3, c##J_##_3); }
#define MTVM_F32_STORE_(J_, G0_) \
    tile[(G0_ + J_) * 4 + 0] = c##J_##_0; tile[(G0_ + J_) * 4 + 1] = c##J_##_1; \
    tile[(G0_ + J_) * 4 + 2] = c##J_##_2; tile[(G0_ + J_) * 4 + 3] = c##J_##_3;
/* The full ROWS_ x 4 block of a pass in C. */
#define MTVM_F32_BLOCK_(G0_, ROWS_, MR_, V_) \
    MTVM_REPEAT(ROWS_, MTVM_F32_ACC_, 0) \
    for (int t = 0; t < taps; ++t, MTVM_F32_S_STEP_##V_(MR_)) { \
        const float* bt = MTVM_F32_S_ROW_##V_; \
        const float b0 = bt[0], b1 = bt[1], b2 = bt[2], b3 = bt[3]; \
        MTVM_REPEAT(ROWS_, MTVM_F32_FMA_, 0) \
    } \
    MTVM_REPEAT(ROWS_, MTVM_F32_STORE_, G0_)
#define MTVM_F32_BLOCK_1(G0_, MR_, V_) MTVM_F32_BLOCK_(G0_, 1, MR_, V_)
#define MTVM_F32_BLOCK_2(G0_, MR_, V_) MTVM_F32_BLOCK_(G0_, 2, MR_, V_)
#define MTVM_F32_BLOCK_3(G0_, MR_, V_) MTVM_F32_BLOCK_(G0_, 3, MR_, V_)
/* The full 4 x 4 block: Thumb-2 assembly where mtvm_gemm_f32_vfp.h is included and
 * defines MTVM_GEMM_F32_VFP as 1, else C. Decided where MTVM_DEFINE_F32_GEMM* expands (as
 * an #if there would), not where this header is included: MTVM_GEMM_F32_VFP pastes to
 * MTVM_F32_BLOCK4_1 when it is defined, and stays a name when it is not. */
#define MTVM_F32_CAT_(a, b) a##b
#define MTVM_F32_CAT(a, b) MTVM_F32_CAT_(a, b)
#define MTVM_F32_BLOCK_4(G0_, MR_, V_) \
    MTVM_F32_CAT(MTVM_F32_BLOCK4_, MTVM_GEMM_F32_VFP)(G0_, MR_, V_)
#define MTVM_F32_BLOCK4_1(G0_, MR_, V_) MTVM_F32_VFP_##V_(G0_, MR_)
#define MTVM_F32_BLOCK4_MTVM_GEMM_F32_VFP(G0_, MR_, V_) MTVM_F32_BLOCK_(G0_, 4, MR_, V_)
#define MTVM_F32_PASS_(G0_, ROWS_, MR_, V_) \
    {  /* rows G0_ .. G0_ + ROWS_ - 1: ROWS_ * 4 scalar accumulators */ \
        const float* at = a + G0_; \
        MTVM_F32_S_DECL_##V_ \
        if (n == 4) { \
            MTVM_F32_BLOCK_##ROWS_(G0_, MR_, V_) \
        } else {  /* partial tile */ \
            for (int r = G0_; r < G0_ + ROWS_; ++r) { \
                for (int q = 0; q < n; ++q) { \
                    float s = 0.0f; \
                    for (int t = 0; t < taps; ++t) { \
                        s = MTVM_FMAF(a[t * MR_ + r], MTVM_F32_B_AT_##V_(q), s); \
                    } \
                    tile[r * 4 + q] = s; \
                } \
            } \
        } \
    }
#define MTVM_F32_GEMM_BODY_(MR_, V_) MTVM_F32_PASSES_##MR_(MTVM_F32_PASS_, MR_, V_)

#endif  /* MTVM_F32_AVX512, MTVM_F32_AVX2 */

/* The epilogue kernel is AVX2's only (the schedules call it under #elif MTVM_F32_AVX2). */
#if !MTVM_F32_AVX2
#define MTVM_DEFINE_F32_GEMM_EPI(NAME_, MR_)
#define MTVM_DEFINE_F32_GEMM_EPI_OFF(NAME_, MR_)
#endif

#define MTVM_F32_GEMM_FUNCTION_(NAME_, MR_, V_) \
    static inline void NAME_(int taps, const float* restrict a, const float* restrict b, \
                             MTVM_F32_B_PARAM_##V_, int n, float* restrict tile) \
    { \
        MTVM_F32_GEMM_BODY_(MR_, V_) \
    }
#define MTVM_DEFINE_F32_GEMM(NAME_, MR_) MTVM_F32_GEMM_FUNCTION_(NAME_, MR_, ldb)
#define MTVM_DEFINE_F32_GEMM_OFF(NAME_, MR_) MTVM_F32_GEMM_FUNCTION_(NAME_, MR_, off)

/* The x86 band and direct kernels (x86/mtvm_conv_f32_x86.h: band on AVX-512 and AVX2,
 * direct on AVX-512); on other targets their definitions are empty (the schedules that
 * call them are compiled only where those kernels exist). */
#if MTVM_F32_AVX512 || MTVM_F32_AVX2
#include "mtvm_conv_f32_x86.h"
#else
#define MTVM_DEFINE_F32_BAND(NAME_, MR_)
#define MTVM_DEFINE_F32_BAND_EPI(NAME_, MR_)
#define MTVM_DEFINE_F32_DIRECT(NAME_, MR_)
#endif

#endif  /* MTVM_GEMM_F32_H_ */
