/* mtvm_gemv_f32_vfp16.h: The float GEMV of the recurrent ops on Cortex-M cores with a
 * fused-multiply-add FPU (M4F, M7, M33): sixteen columns a block in Thumb-2 VFP -- per tap
 * two VLDMs of the row's sixteen weights, an ADD to the next row and sixteen VFMAs into
 * s16-s31, one VLDM of x[t..t+3] and the loop's two instructions per four taps (20.75
 * instructions per 16 MACs; 22 with a VLDM of x per tap; mtvm_f32_gemv's block of eight
 * takes 13 per 8).
 * Each column is the same chain of fused multiply-adds from zero in the order of t as in
 * mtvm_f32_gemv, so the results are the same bits; the columns past the last whole block
 * of sixteen go through mtvm_f32_gemv_blocked.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_GEMV_F32_VFP16_H_
#define MTVM_GEMV_F32_VFP16_H_

#include <stddef.h>
#include <stdint.h>
#include "mtvm_gemv_f32.h"

/* One tap t of a block: x[t] (in register X) times the row's sixteen weights, into
 * s16-s31; b advances to the next row. */
#define MTVM_GEMV16_TAP(X) \
    "vldmia  %[b]!, {s0-s7}\n\t" \
    "vfma.f32 s16, " X ", s0\n\t" \
    "vfma.f32 s17, " X ", s1\n\t" \
    "vfma.f32 s18, " X ", s2\n\t" \
    "vfma.f32 s19, " X ", s3\n\t" \
    "vfma.f32 s20, " X ", s4\n\t" \
    "vfma.f32 s21, " X ", s5\n\t" \
    "vfma.f32 s22, " X ", s6\n\t" \
    "vfma.f32 s23, " X ", s7\n\t" \
    "vldmia  %[b], {s0-s7}\n\t" \
    "add     %[b], %[b], %[st]\n\t" \
    "vfma.f32 s24, " X ", s0\n\t" \
    "vfma.f32 s25, " X ", s1\n\t" \
    "vfma.f32 s26, " X ", s2\n\t" \
    "vfma.f32 s27, " X ", s3\n\t" \
    "vfma.f32 s28, " X ", s4\n\t" \
    "vfma.f32 s29, " X ", s5\n\t" \
    "vfma.f32 s30, " X ", s6\n\t" \
    "vfma.f32 s31, " X ", s7\n\t"

/* The whole blocks of sixteen columns: out[q] = start[q] + sum_t x[t] * b[t * ldb + q]
 * (start: sixteen zeros, or the sums to continue, which may be out itself); returns the
 * first column not computed (n when the core has no such FPU: none). */
static inline int mtvm_f32_gemv16_blocks_vfp(int taps, const float* restrict x,
                                             const float* restrict b, int ldb, int n,
                                             const float* start, int start_step, float* out)
{
    int j0 = 0;
#if defined(__GNUC__) && defined(__thumb2__) && defined(__ARM_FP) && (__ARM_FP & 4) && \
    defined(__ARM_FEATURE_FMA) && !defined(MTVM_NO_SIMD)
    const int32_t stride = ldb * 4 - 32;
    for (; taps > 0 && j0 + 16 <= n; j0 += 16) {
        const float* xp = x;
        const float* bp = b + j0;
        int32_t t4 = taps >> 2;        /* steps of four taps: one VLDM of x[t..t+3] */
        int32_t t1 = taps & 3;
        __asm__ volatile(
            "vldmia  %[z], {s16-s31}\n\t"
            "cmp     %[t4], #0\n\t"
            "beq     2f\n\t"
            "1:\n\t"
            "vldmia  %[x]!, {s8-s11}\n\t"
            MTVM_GEMV16_TAP("s8")
            MTVM_GEMV16_TAP("s9")
            MTVM_GEMV16_TAP("s10")
            MTVM_GEMV16_TAP("s11")
            "subs    %[t4], %[t4], #1\n\t"
            "bne     1b\n\t"
            "2:\n\t"
            "cmp     %[t1], #0\n\t"
            "beq     4f\n\t"
            "3:\n\t"
            "vldmia  %[x]!, {s8}\n\t"
            MTVM_GEMV16_TAP("s8")
            "subs    %[t1], %[t1], #1\n\t"
            "bne     3b\n\t"
            "4:\n\t"
            "vstmia  %[o], {s16-s31}\n\t"
            : [x] "+r"(xp), [b] "+r"(bp), [t4] "+r"(t4), [t1] "+r"(t1)
            : [z] "r"(start + j0 * start_step), [o] "r"(out + j0), [st] "r"(stride)
            : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10",
              "s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21",
              "s22", "s23", "s24", "s25", "s26", "s27", "s28", "s29", "s30", "s31", "memory", "cc");
    }
#else
    (void)x; (void)b; (void)ldb; (void)n; (void)start; (void)start_step; (void)out;
    (void)taps;
#endif
    return j0;
}

/* out[q] = sum_t x[t] * b[t * ldb + q], q < n (as mtvm_f32_gemv_blocked). */
static inline void mtvm_f32_gemv16_vfp(int taps, const float* restrict x,
                                       const float* restrict b, int ldb, int n,
                                       float* restrict out)
{
    static const float zeros[16];
    const int j0 = mtvm_f32_gemv16_blocks_vfp(taps, x, b, ldb, n, zeros, 0, out);
    if (j0 < n) {
        mtvm_f32_gemv_blocked(taps, x, b + j0, ldb, n - j0, out + j0);
    }
}

/* out[q] = init[q] + sum_t x[t] * b[t * ldb + q], q < n; init may be out (a second
 * product added to the first): an LSTM's gates as bias + W x + R h without a pass of
 * their own over the gate rows (each column one chain of fused multiply-adds from init). */
static inline void mtvm_f32_gemv16_init_vfp(int taps, const float* restrict x,
                                            const float* restrict b, int ldb, int n,
                                            const float* init, float* out)
{
    const int j0 = mtvm_f32_gemv16_blocks_vfp(taps, x, b, ldb, n, init, 1, out);
    const float* start = init + j0;
    const float* column = b + j0;
    float* o = out + j0;
    for (int q = j0; q < n; ++q, ++start, ++column, ++o) {   /* the columns past the blocks */
        float acc = *start;
        const float* bq = column;
        for (const float* xt = x; xt < x + taps; ++xt, bq += ldb) {
            acc += *xt * *bq;
        }
        *o = acc;
    }
}

#endif  /* MTVM_GEMV_F32_VFP16_H_ */
