/* mtvm_gemv_f32_vfp16.h: The float GEMV of the recurrent ops on Cortex-M cores with a
 * fused-multiply-add FPU (M4F, M7, M33): sixteen columns a block in Thumb-2 VFP, the
 * weights packed (mtvm/schedules/arm_dsp/recurrent_f32.py, packed16: a [taps][n] matrix as
 * its whole blocks of sixteen columns, each [taps][16] -- a tap's sixteen weights
 * contiguous, the block's taps in a row -- then the columns past them [taps][n % 16]; the
 * same floats, so the same flash). Per tap two VLDMs of its sixteen weights and sixteen
 * VFMAs into s16-s31, one VLDM of x[t..t+7] into s8-s15 and the loop's two instructions per
 * eight taps, then a step of four taps and single ones for the rest: 147 instructions per
 * eight taps, 18.4 per 16 MACs (with rows a stride apart, one ADD more per tap: 19.4; a
 * loop of four taps took 19.75, one VLDM of x per tap 22; mtvm_f32_gemv's block of eight
 * takes 13 per 8). On crnn_v12_int8's GRU (32 taps, 96 columns) the kernel went from
 * 307,040 instructions to 293,720 on QEMU's Cortex-M4, and packed 4-5 % fewer again.
 * Each column is the same chain of fused multiply-adds from its start in the order of t as
 * in mtvm_f32_gemv, so the results are the same bits; the columns past the last whole
 * block of sixteen go through mtvm_f32_gemv_blocked (or a C loop from given starts).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_GEMV_F32_VFP16_H_
#define MTVM_GEMV_F32_VFP16_H_

#include <stddef.h>
#include <stdint.h>
#include "mtvm_gemv_f32.h"

/* x (register X) times s0-s7, into the eight sums from s<D>: VFMAs in the order of the
 * columns. */
#define MTVM_GEMV16_FMA8(X, D0, D1, D2, D3, D4, D5, D6, D7) \
    "vfma.f32 " D0 ", " X ", s0\n\t" \
    "vfma.f32 " D1 ", " X ", s1\n\t" \
    "vfma.f32 " D2 ", " X ", s2\n\t" \
    "vfma.f32 " D3 ", " X ", s3\n\t" \
    "vfma.f32 " D4 ", " X ", s4\n\t" \
    "vfma.f32 " D5 ", " X ", s5\n\t" \
    "vfma.f32 " D6 ", " X ", s6\n\t" \
    "vfma.f32 " D7 ", " X ", s7\n\t"
#define MTVM_GEMV16_LOW(X) \
    MTVM_GEMV16_FMA8(X, "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23")
#define MTVM_GEMV16_HIGH(X) \
    MTVM_GEMV16_FMA8(X, "s24", "s25", "s26", "s27", "s28", "s29", "s30", "s31")

/* One tap of a block: x[t] (in register X) times its sixteen weights (contiguous: both
 * VLDMs step b), into s16-s31. */
#define MTVM_GEMV16_TAP(X) \
    "vldmia  %[b]!, {s0-s7}\n\t" \
    MTVM_GEMV16_LOW(X) \
    "vldmia  %[b]!, {s0-s7}\n\t" \
    MTVM_GEMV16_HIGH(X)

/* One block of sixteen columns: the sums from start (%[z]) into s16-s31, the taps eight
 * at a time (one VLDM of x[t..t+7] into s8-s15), then one step of four if taps & 4, then
 * single taps; stored to %[o]. Every column is one chain
 * of fused multiply-adds in the order of t whatever the path. */
#define MTVM_GEMV16_BLOCK_ASM \
    "vldmia  %[z], {s16-s31}\n\t" \
    "cmp     %[t8], #0\n\t" \
    "beq     2f\n\t" \
    "1:\n\t" \
    "vldmia  %[x]!, {s8-s15}\n\t" \
    MTVM_GEMV16_TAP("s8") MTVM_GEMV16_TAP("s9") MTVM_GEMV16_TAP("s10") MTVM_GEMV16_TAP("s11") \
    MTVM_GEMV16_TAP("s12") MTVM_GEMV16_TAP("s13") MTVM_GEMV16_TAP("s14") MTVM_GEMV16_TAP("s15") \
    "subs    %[t8], %[t8], #1\n\t" \
    "bne     1b\n\t" \
    "2:\n\t" \
    "tst     %[t1], #4\n\t" \
    "beq     3f\n\t" \
    "vldmia  %[x]!, {s8-s11}\n\t" \
    MTVM_GEMV16_TAP("s8") MTVM_GEMV16_TAP("s9") MTVM_GEMV16_TAP("s10") MTVM_GEMV16_TAP("s11") \
    "3:\n\t" \
    "ands    %[t1], %[t1], #3\n\t" \
    "beq     5f\n\t" \
    "4:\n\t" \
    "vldmia  %[x]!, {s8}\n\t" \
    MTVM_GEMV16_TAP("s8") \
    "subs    %[t1], %[t1], #1\n\t" \
    "bne     4b\n\t" \
    "5:\n\t" \
    "vstmia  %[o], {s16-s31}\n\t"

/* Every VFP register: the weights s0-s7, x s8-s15, the sums s16-s31. */
#define MTVM_GEMV16_CLOBBERS \
    "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", \
    "s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24", \
    "s25", "s26", "s27", "s28", "s29", "s30", "s31", "memory", "cc"

#if defined(__GNUC__) && defined(__thumb2__) && defined(__ARM_FP) && (__ARM_FP & 4) && \
    defined(__ARM_FEATURE_FMA) && !defined(MTVM_NO_SIMD)
#define MTVM_GEMV16_HAVE_VFP 1
#else
#define MTVM_GEMV16_HAVE_VFP 0
#endif

/* The whole blocks of sixteen columns of a packed matrix: out[q] = start[q] + sum_t x[t] *
 * w[t][q] (start: sixteen zeros, or the sums to continue, which may be out itself); returns
 * the first column not computed (0 when the core has no such FPU). */
static inline int mtvm_f32_gemv16_packed_blocks_vfp(int taps, const float* restrict x,
                                                    const float* restrict packed, int n,
                                                    const float* start, int start_step,
                                                    float* out)
{
    int j0 = 0;
#if MTVM_GEMV16_HAVE_VFP
    const float* bp = packed;   /* each block ends where the next one starts */
    for (; taps > 0 && j0 + 16 <= n; j0 += 16) {
        const float* xp = x;
        int32_t t8 = taps >> 3;
        int32_t t1 = taps & 7;
        __asm__ volatile(
            MTVM_GEMV16_BLOCK_ASM
            : [x] "+r"(xp), [b] "+r"(bp), [t8] "+r"(t8), [t1] "+r"(t1)
            : [z] "r"(start + j0 * start_step), [o] "r"(out + j0)
            : MTVM_GEMV16_CLOBBERS);
    }
#else
    (void)x; (void)packed; (void)n; (void)start; (void)start_step; (void)out;
    (void)taps;
#endif
    return j0;
}

/* out[q] = sum_t x[t] * w[t][q], q < n, w packed (as mtvm_f32_gemv_blocked). */
static inline void mtvm_f32_gemv16_packed_vfp(int taps, const float* restrict x,
                                              const float* restrict packed, int n,
                                              float* restrict out)
{
    static const float zeros[16];
    const int whole = n - n % 16;
    int j0 = mtvm_f32_gemv16_packed_blocks_vfp(taps, x, packed, n, zeros, 0, out);
    for (; j0 < whole; j0 += 16) {   /* without the assembly: each block a [taps][16] */
        mtvm_f32_gemv_blocked(taps, x, packed + j0 * taps, 16, 16, out + j0);
    }
    if (j0 < n) {
        mtvm_f32_gemv_blocked(taps, x, packed + j0 * taps, n - j0, n - j0, out + j0);
    }
}

/* out[q] = init[q] + sum_t x[t] * w[t][q], q < n, w packed; init may be out (a second
 * product added to the first): an LSTM's gates as bias + W x + R h without a pass of their
 * own over the gate rows (each column one chain of fused multiply-adds from init). */
static inline void mtvm_f32_gemv16_packed_init_vfp(int taps, const float* restrict x,
                                                   const float* restrict packed, int n,
                                                   const float* init, float* out)
{
    const int whole = n - n % 16;
    for (int q = mtvm_f32_gemv16_packed_blocks_vfp(taps, x, packed, n, init, 1, out);
         q < n; ++q) {   /* the columns past the blocks (all without the assembly) */
        const int ld = q < whole ? 16 : n - whole;         /* the row length of q's part */
        const int first = q < whole ? q - q % 16 : whole;  /* its first column */
        const float* bq = packed + first * taps + (q - first);
        float acc = init[q];
        for (const float* xt = x; xt < x + taps; ++xt, bq += ld) {
            acc += *xt * *bq;
        }
        out[q] = acc;
    }
}

#endif  /* MTVM_GEMV_F32_VFP16_H_ */
