/* mtvm_gemm_f32_vfp.h: The float GEMM micro-kernel's 4 x 4 register block in Thumb-2
 * assembly for a single-precision FPU with fused multiply-add (Cortex-M4F, M7, M33).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_GEMM_F32_VFP_H_
#define MTVM_GEMM_F32_VFP_H_

#include <stdint.h>

#if defined(__GNUC__) && defined(__thumb2__) && defined(__ARM_FP) && (__ARM_FP & 4) && \
    defined(__ARM_FEATURE_FMA) && !defined(MTVM_NO_SIMD)
#define MTVM_GEMM_F32_VFP 1

/* tile[r][q] += a[r] * b[q] for the 4 weights in s4-s7 and the 4 activations in
 * s0-s3, accumulators s8 + 4 r + q. */
#define MTVM_VFP_FMA_4X4 \
    "vfma.f32 s8, s4, s0\n\t" \
    "vfma.f32 s9, s4, s1\n\t" \
    "vfma.f32 s10, s4, s2\n\t" \
    "vfma.f32 s11, s4, s3\n\t" \
    "vfma.f32 s12, s5, s0\n\t" \
    "vfma.f32 s13, s5, s1\n\t" \
    "vfma.f32 s14, s5, s2\n\t" \
    "vfma.f32 s15, s5, s3\n\t" \
    "vfma.f32 s16, s6, s0\n\t" \
    "vfma.f32 s17, s6, s1\n\t" \
    "vfma.f32 s18, s6, s2\n\t" \
    "vfma.f32 s19, s6, s3\n\t" \
    "vfma.f32 s20, s7, s0\n\t" \
    "vfma.f32 s21, s7, s1\n\t" \
    "vfma.f32 s22, s7, s2\n\t" \
    "vfma.f32 s23, s7, s3\n\t"
#define MTVM_VFP_CLOBBERS \
    "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13", \
    "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "cc", "memory"

/* tile[r * 4 + q] = sum_t a[t * lda + r] * b[t * ldb + q] for r, q < 4:
 * per tap one VLDM of the 4 weights, one of the 4 activations and 16 VFMAs into
 * s8-s23 (22 instructions per 16 MACs with the loop; gcc's code for the same C
 * loads each value with its own VLDR). The same fused multiply-adds in the same
 * order as the C block of the micro-kernel, so the same results. */
static inline void mtvm_f32_gemm_4x4_vfp(int32_t taps, const float* a, int32_t lda,
                                         const float* b, int32_t ldb, float* tile)
{
    static const float zeros[16];
    const int32_t a_step = lda * 4, b_step = ldb * 4;
    if (taps <= 0) {
        for (int32_t i = 0; i < 16; ++i) tile[i] = 0.0f;
        return;
    }
    __asm__ volatile(
        "vldmia  %[z], {s8-s23}\n\t"
        "1:\n\t"
        "vldmia  %[a], {s4-s7}\n\t"
        "add     %[a], %[a], %[as]\n\t"
        "vldmia  %[b], {s0-s3}\n\t"
        "add     %[b], %[b], %[bs]\n\t"
        MTVM_VFP_FMA_4X4
        "subs    %[t], %[t], #1\n\t"
        "bne     1b\n\t"
        "vstmia  %[o], {s8-s23}\n\t"
        /* early clobbers: the loop writes them while the inputs are still read
         * (gcc may otherwise give an input with the same value their register) */
        : [a] "+&r"(a), [b] "+&r"(b), [t] "+&r"(taps)
        : [z] "r"(zeros), [o] "r"(tile), [as] "r"(a_step), [bs] "r"(b_step)
        : MTVM_VFP_CLOBBERS);
}
/* The same block with tap t reading b + off[t] (a compile-time table: the taps of a
 * convolution window over rows held in scratch): 24 instructions per 16 MACs. */
static inline void mtvm_f32_gemm_4x4_off_vfp(int32_t taps, const float* a, int32_t lda,
                                             const float* b, const int32_t* off, float* tile)
{
    static const float zeros[16];
    const int32_t a_step = lda * 4;
    int32_t o;
    const float* bt;
    if (taps <= 0) {
        for (int32_t i = 0; i < 16; ++i) tile[i] = 0.0f;
        return;
    }
    __asm__ volatile(
        "vldmia  %[z], {s8-s23}\n\t"
        "1:\n\t"
        "ldr     %[o], [%[off]], #4\n\t"
        "vldmia  %[a], {s4-s7}\n\t"
        "add     %[a], %[a], %[as]\n\t"
        "add     %[bt], %[b], %[o], lsl #2\n\t"
        "vldmia  %[bt], {s0-s3}\n\t"
        MTVM_VFP_FMA_4X4
        "subs    %[t], %[t], #1\n\t"
        "bne     1b\n\t"
        "vstmia  %[tile], {s8-s23}\n\t"
        /* early clobbers, as above */
        : [a] "+&r"(a), [off] "+&r"(off), [t] "+&r"(taps), [o] "=&r"(o), [bt] "=&r"(bt)
        : [z] "r"(zeros), [tile] "r"(tile), [as] "r"(a_step), [b] "r"(b)
        : MTVM_VFP_CLOBBERS);
}
#endif

#endif  /* MTVM_GEMM_F32_VFP_H_ */
