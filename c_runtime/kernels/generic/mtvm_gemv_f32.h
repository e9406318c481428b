/* mtvm_gemv_f32.h: The float GEMV micro-kernel: one row of activations times a row-major
 * matrix, in blocks of MTVM_F32_GEMV_COLS output columns held in registers.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_GEMV_F32_H_
#define MTVM_GEMV_F32_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_gemv_f32_prelude.h"

/* out[q] = sum_t x[t] * b[t * ldb + q], q < n <= MTVM_F32_GEMV_COLS (b row-major: each
 * step reads consecutive columns, every weight once). out has MTVM_F32_GEMV_COLS
 * floats: the SIMD paths store whole vectors. */
static inline void mtvm_f32_gemv(int taps, const float* restrict x, const float* restrict b,
                                 int ldb, int n, float* restrict out)
{
#if MTVM_F32_AVX512
    /* 4 vectors of 16 columns, two steps of t at a time: 8 independent
     * accumulators (masked loads: lanes past n are not read) */
    __m512 c0 = _mm512_setzero_ps(), d0 = _mm512_setzero_ps();
    __m512 c1 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
    __m512 c2 = _mm512_setzero_ps(), d2 = _mm512_setzero_ps();
    __m512 c3 = _mm512_setzero_ps(), d3 = _mm512_setzero_ps();
    const int n0 = n - 0 * 16;  /* columns of vector 0 */
    const __mmask16 k0 = (__mmask16)(n0 >= 16 ? 0xffffu : n0 <= 0 ? 0u : (1u << n0) - 1u);
    const int n1 = n - 1 * 16;  /* columns of vector 1 */
    const __mmask16 k1 = (__mmask16)(n1 >= 16 ? 0xffffu : n1 <= 0 ? 0u : (1u << n1) - 1u);
    const int n2 = n - 2 * 16;  /* columns of vector 2 */
    const __mmask16 k2 = (__mmask16)(n2 >= 16 ? 0xffffu : n2 <= 0 ? 0u : (1u << n2) - 1u);
    const int n3 = n - 3 * 16;  /* columns of vector 3 */
    const __mmask16 k3 = (__mmask16)(n3 >= 16 ? 0xffffu : n3 <= 0 ? 0u : (1u << n3) - 1u);
    int t = 0;
    for (; t + 1 < taps; t += 2) {
        const __m512 x0 = _mm512_set1_ps(*(x + t)), x1 = _mm512_set1_ps(*(x + t + 1));
        const float* b0 = b + t * ldb;
        const float* b1 = b0 + ldb;
        c0 = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(k0, b0 + 0), c0);
        d0 = _mm512_fmadd_ps(x1, _mm512_maskz_loadu_ps(k0, b1 + 0), d0);
        c1 = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(k1, b0 + 16), c1);
        d1 = _mm512_fmadd_ps(x1, _mm512_maskz_loadu_ps(k1, b1 + 16), d1);
        c2 = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(k2, b0 + 32), c2);
        d2 = _mm512_fmadd_ps(x1, _mm512_maskz_loadu_ps(k2, b1 + 32), d2);
        c3 = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(k3, b0 + 48), c3);
        d3 = _mm512_fmadd_ps(x1, _mm512_maskz_loadu_ps(k3, b1 + 48), d3);
    }
    if (t < taps) {
        const __m512 x0 = _mm512_set1_ps(*(x + t));
        const float* b0 = b + t * ldb;
        c0 = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(k0, b0 + 0), c0);
        c1 = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(k1, b0 + 16), c1);
        c2 = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(k2, b0 + 32), c2);
        c3 = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(k3, b0 + 48), c3);
    }
    _mm512_storeu_ps(out + 0, _mm512_add_ps(c0, d0));
    _mm512_storeu_ps(out + 16, _mm512_add_ps(c1, d1));
    _mm512_storeu_ps(out + 32, _mm512_add_ps(c2, d2));
    _mm512_storeu_ps(out + 48, _mm512_add_ps(c3, d3));
#elif MTVM_F32_AVX2
    /* 4 vectors of 8 columns, two steps of t at a time: 8 independent
     * accumulators (masked loads: lanes past n are not read) */
    __m256 c0 = _mm256_setzero_ps(), d0 = _mm256_setzero_ps();
    __m256 c1 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps();
    __m256 c2 = _mm256_setzero_ps(), d2 = _mm256_setzero_ps();
    __m256 c3 = _mm256_setzero_ps(), d3 = _mm256_setzero_ps();
    const __m256i k0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 0 * 8),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i k1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 1 * 8),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i k2 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 2 * 8),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i k3 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 3 * 8),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    int t = 0;
    for (; t + 1 < taps; t += 2) {
        const __m256 x0 = _mm256_broadcast_ss(x + t), x1 = _mm256_broadcast_ss(x + t + 1);
        const float* b0 = b + t * ldb;
        const float* b1 = b0 + ldb;
        c0 = _mm256_fmadd_ps(x0, _mm256_maskload_ps(b0 + 0, k0), c0);
        d0 = _mm256_fmadd_ps(x1, _mm256_maskload_ps(b1 + 0, k0), d0);
        c1 = _mm256_fmadd_ps(x0, _mm256_maskload_ps(b0 + 8, k1), c1);
        d1 = _mm256_fmadd_ps(x1, _mm256_maskload_ps(b1 + 8, k1), d1);
        c2 = _mm256_fmadd_ps(x0, _mm256_maskload_ps(b0 + 16, k2), c2);
        d2 = _mm256_fmadd_ps(x1, _mm256_maskload_ps(b1 + 16, k2), d2);
        c3 = _mm256_fmadd_ps(x0, _mm256_maskload_ps(b0 + 24, k3), c3);
        d3 = _mm256_fmadd_ps(x1, _mm256_maskload_ps(b1 + 24, k3), d3);
    }
    if (t < taps) {
        const __m256 x0 = _mm256_broadcast_ss(x + t);
        const float* b0 = b + t * ldb;
        c0 = _mm256_fmadd_ps(x0, _mm256_maskload_ps(b0 + 0, k0), c0);
        c1 = _mm256_fmadd_ps(x0, _mm256_maskload_ps(b0 + 8, k1), c1);
        c2 = _mm256_fmadd_ps(x0, _mm256_maskload_ps(b0 + 16, k2), c2);
        c3 = _mm256_fmadd_ps(x0, _mm256_maskload_ps(b0 + 24, k3), c3);
    }
    _mm256_storeu_ps(out + 0, _mm256_add_ps(c0, d0));
    _mm256_storeu_ps(out + 8, _mm256_add_ps(c1, d1));
    _mm256_storeu_ps(out + 16, _mm256_add_ps(c2, d2));
    _mm256_storeu_ps(out + 24, _mm256_add_ps(c3, d3));
#else
#if defined(__GNUC__) && defined(__thumb2__) && defined(__ARM_FP) && (__ARM_FP & 4) && \
    defined(__ARM_FEATURE_FMA) && !defined(MTVM_NO_SIMD)
    if (n == 8 && taps > 0) {
        /* Cortex-M4F/M7/M33: per step one VLDR of x[t], one VLDM of the row's 8
         * weights and 8 VFMAs into s8-s15 (13 instructions per 8 MACs, where gcc
         * emits 8 separate VLDRs); the same fused multiply-adds in the same order
         * as the C below, so the same results. */
        static const float zeros[8];
        const int32_t stride = ldb * 4;
        const float* xp = x;
        const float* bp = b;
        int32_t t = taps;
        __asm__ volatile(
            "vldmia  %[z], {s8-s15}\n\t"
            "1:\n\t"
            "vldmia  %[x]!, {s16}\n\t"
            "vldmia  %[b], {s0-s7}\n\t"
            "add     %[b], %[b], %[st]\n\t"
            "vfma.f32 s8, s16, s0\n\t"
            "vfma.f32 s9, s16, s1\n\t"
            "vfma.f32 s10, s16, s2\n\t"
            "vfma.f32 s11, s16, s3\n\t"
            "vfma.f32 s12, s16, s4\n\t"
            "vfma.f32 s13, s16, s5\n\t"
            "vfma.f32 s14, s16, s6\n\t"
            "vfma.f32 s15, s16, s7\n\t"
            "subs    %[t], %[t], #1\n\t"
            "bne     1b\n\t"
            "vstmia  %[o], {s8-s15}\n\t"
            /* early clobbers: the loop writes them while the inputs are still read
             * (gcc may otherwise give an input with the same value their register) */
            : [x] "+&r"(xp), [b] "+&r"(bp), [t] "+&r"(t)
            : [z] "r"(zeros), [o] "r"(out), [st] "r"(stride)
            : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11",
              "s12", "s13", "s14", "s15", "s16", "cc", "memory");
        return;
    }
#endif
    if (n == 8) {  /* 8 scalar accumulators */
        float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
        float c4 = 0.0f, c5 = 0.0f, c6 = 0.0f, c7 = 0.0f;
        for (int t = 0; t < taps; ++t, b += ldb) {
            const float xt = x[t];
            c0 = MTVM_FMAF(xt, b[0], c0); c1 = MTVM_FMAF(xt, b[1], c1);
            c2 = MTVM_FMAF(xt, b[2], c2); c3 = MTVM_FMAF(xt, b[3], c3);
            c4 = MTVM_FMAF(xt, b[4], c4); c5 = MTVM_FMAF(xt, b[5], c5);
            c6 = MTVM_FMAF(xt, b[6], c6); c7 = MTVM_FMAF(xt, b[7], c7);
        }
        out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
        out[4] = c4; out[5] = c5; out[6] = c6; out[7] = c7;
    } else {  /* partial block */
        for (int q = 0; q < n; ++q) {
            float s = 0.0f;
            for (int t = 0; t < taps; ++t) s = MTVM_FMAF(x[t], b[t * ldb + q], s);
            out[q] = s;
        }
    }
#endif
}


/* out[q] = sum_t x[t] * b[t * ldb + q] for every q < n, in blocks of
 * MTVM_F32_GEMV_COLS columns (out has exactly n floats). */
static inline void mtvm_f32_gemv_blocked(int taps, const float* restrict x,
                                         const float* restrict b, int ldb, int n,
                                         float* restrict out)
{
    for (int j0 = 0; j0 < n; j0 += MTVM_F32_GEMV_COLS) {
        const int nj = n - j0 < MTVM_F32_GEMV_COLS ? n - j0 : MTVM_F32_GEMV_COLS;
        if (nj == MTVM_F32_GEMV_COLS) {
            mtvm_f32_gemv(taps, x, b + j0, ldb, nj, out + j0);
        } else {   /* the last, partial block: through a whole block's buffer */
            float tile[MTVM_F32_GEMV_COLS];
            mtvm_f32_gemv(taps, x, b + j0, ldb, nj, tile);
            memcpy(out + j0, tile, (size_t)nj * sizeof(float));
        }
    }
}

#endif  /* MTVM_GEMV_F32_H_ */
