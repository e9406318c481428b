/* mtvm_gemm_f32_vfp.h: The float GEMM micro-kernel's 4 x 4 register block in Thumb-2
 * assembly for a single-precision FPU with fused multiply-add (Cortex-M4F, M7, M33).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_GEMM_F32_VFP_H_
#define MTVM_GEMM_F32_VFP_H_

#include <stdint.h>
#include <string.h>

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

/* The taps' loop of a 4 x 4 block from 0 (%[z]: sixteen zeros): per tap the 4 weights
 * (%[a], stepped by %[as]), LOAD_B the 4 activations into s0-s3, 16 VFMAs into s8-s23. */
#define MTVM_VFP_TAPS_LOOP_(LOAD_B) \
    "vldmia  %[z], {s8-s23}\n\t" \
    "1:\n\t" \
    "vldmia  %[a], {s4-s7}\n\t" \
    "add     %[a], %[a], %[as]\n\t" \
    LOAD_B \
    MTVM_VFP_FMA_4X4 \
    "subs    %[t], %[t], #1\n\t" \
    "bne     1b\n\t"
/* the activations of tap t at b + t ldb (%[b] stepped by %[bs]) */
#define MTVM_VFP_LOAD_B_ROWS "vldmia  %[b], {s0-s3}\n\t" "add     %[b], %[b], %[bs]\n\t"
#define MTVM_VFP_PLAIN_TAPS_4X4 MTVM_VFP_TAPS_LOOP_(MTVM_VFP_LOAD_B_ROWS)
/* the activations of tap t at b + off[t] (%[off] stepped; %[o], %[bt] borrowed) */
#define MTVM_VFP_LOAD_B_OFF \
    "ldr     %[o], [%[off]], #4\n\t" \
    "add     %[bt], %[b], %[o], lsl #2\n\t" \
    "vldmia  %[bt], {s0-s3}\n\t"

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
        MTVM_VFP_PLAIN_TAPS_4X4
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
        MTVM_VFP_TAPS_LOOP_(MTVM_VFP_LOAD_B_OFF)
        "vstmia  %[tile], {s8-s23}\n\t"
        /* early clobbers, as above */
        : [a] "+&r"(a), [off] "+&r"(off), [t] "+&r"(taps), [o] "=&r"(o), [bt] "=&r"(bt)
        : [z] "r"(zeros), [tile] "r"(tile), [as] "r"(a_step), [b] "r"(b)
        : MTVM_VFP_CLOBBERS);
}

/* The 4 x 4 block's epilogue in the same assembly: mode MTVM_F32_EPI_NONE stores
 * y[r * ldy + q] = tile[r][q] + bias[r]; MTVM_F32_EPI_RELU stores the same clamped
 * below at 0, MTVM_F32_EPI_RELU_HI also above at hi (> 0), r, q < 4. The sums are the
 * same fused multiply-adds from 0 as mtvm_f32_gemm_4x4_vfp's, then one add of the
 * bias, so the same values as its tile and the C epilogue. The clamp works on the
 * floats' bits (a non-negative float orders as its bits do as an integer): BIC with
 * the sign spread clears the negatives, CMP and MOVGT take hi -- where the tile holds
 * no NaN: the sixteen values' sum is checked first, and a NaN there (or +inf beside
 * -inf) takes VCMPE/VMRS compares as the C's `x < 0 ? 0 : x`, `x > hi ? hi : x`, NaN
 * kept. (The one difference: -0.0 becomes +0.0 on the integer path.) Per output
 * about 1.5 instructions unclamped, 4.4 with the lower clamp and 7.4 with both, where
 * the tile's round trip through memory and the C epilogue took 5 to 12. */
#define MTVM_F32_EPI_NONE 0
#define MTVM_F32_EPI_RELU 1
#define MTVM_F32_EPI_RELU_HI 2

#define MTVM_VFP_BIAS_4X4 \
    "vldmia  %[bias], {s0-s3}\n\t" \
    "vadd.f32 s8, s8, s0\n\t" "vadd.f32 s9, s9, s0\n\t" \
    "vadd.f32 s10, s10, s0\n\t" "vadd.f32 s11, s11, s0\n\t" \
    "vadd.f32 s12, s12, s1\n\t" "vadd.f32 s13, s13, s1\n\t" \
    "vadd.f32 s14, s14, s1\n\t" "vadd.f32 s15, s15, s1\n\t" \
    "vadd.f32 s16, s16, s2\n\t" "vadd.f32 s17, s17, s2\n\t" \
    "vadd.f32 s18, s18, s2\n\t" "vadd.f32 s19, s19, s2\n\t" \
    "vadd.f32 s20, s20, s3\n\t" "vadd.f32 s21, s21, s3\n\t" \
    "vadd.f32 s22, s22, s3\n\t" "vadd.f32 s23, s23, s3\n\t"
/* the tile's rows stored from s8-s23 (y stepped by ys after each) */
#define MTVM_VFP_STORE_4X4 \
    "vstmia  %[y], {s8-s11}\n\t" "add     %[y], %[y], %[ys]\n\t" \
    "vstmia  %[y], {s12-s15}\n\t" "add     %[y], %[y], %[ys]\n\t" \
    "vstmia  %[y], {s16-s19}\n\t" "add     %[y], %[y], %[ys]\n\t" \
    "vstmia  %[y], {s20-s23}\n\t"
/* V set when one of s8-s23 is NaN (their sum is) */
#define MTVM_VFP_NAN_TEST_4X4 \
    "vadd.f32 s0, s8, s9\n\t" "vadd.f32 s1, s10, s11\n\t" \
    "vadd.f32 s2, s12, s13\n\t" "vadd.f32 s3, s14, s15\n\t" \
    "vadd.f32 s4, s16, s17\n\t" "vadd.f32 s5, s18, s19\n\t" \
    "vadd.f32 s6, s20, s21\n\t" "vadd.f32 s7, s22, s23\n\t" \
    "vadd.f32 s0, s0, s1\n\t" "vadd.f32 s2, s2, s3\n\t" \
    "vadd.f32 s4, s4, s5\n\t" "vadd.f32 s6, s6, s7\n\t" \
    "vadd.f32 s0, s0, s2\n\t" "vadd.f32 s4, s4, s6\n\t" \
    "vadd.f32 s0, s0, s4\n\t" \
    "vcmp.f32 s0, s0\n\t" \
    "vmrs    APSR_nzcv, fpscr\n\t"
/* one value's bits in register T: the negatives cleared, then (HI) at most hi, which the
 * taps' counter holds by then */
#define MTVM_VFP_LO_(T) "bic     %[" T "], %[" T "], %[" T "], asr #31\n\t"
#define MTVM_VFP_HI_(T) "cmp     %[" T "], %[t]\n\t" "it      gt\n\t" \
    "movgt   %[" T "], %[t]\n\t"
/* one row (four sums from SA..) on the bits, in four registers the taps' loop no longer
 * needs (T0..T3): CL(T) clamps one value */
#define MTVM_VFP_ROW_BITS_(SA, SB, SC, SD, CL, T0, T1, T2, T3) \
    "vmov    %[" T0 "], %[" T1 "], " SA ", " SB "\n\t" \
    "vmov    %[" T2 "], %[" T3 "], " SC ", " SD "\n\t" \
    CL(T0) CL(T1) CL(T2) CL(T3) \
    "strd    %[" T0 "], %[" T1 "], [%[y]]\n\t" \
    "strd    %[" T2 "], %[" T3 "], [%[y], #8]\n\t" \
    "add     %[y], %[y], %[ys]\n\t"
#define MTVM_VFP_LO(T) MTVM_VFP_LO_(T)
#define MTVM_VFP_LOHI(T) MTVM_VFP_LO_(T) MTVM_VFP_HI_(T)
#define MTVM_VFP_BITS_4X4(CL, T0, T1, T2, T3) \
    "ldr     %[t], %[hi]\n\t" \
    MTVM_VFP_ROW_BITS_("s8", "s9", "s10", "s11", CL, T0, T1, T2, T3) \
    MTVM_VFP_ROW_BITS_("s12", "s13", "s14", "s15", CL, T0, T1, T2, T3) \
    MTVM_VFP_ROW_BITS_("s16", "s17", "s18", "s19", CL, T0, T1, T2, T3) \
    MTVM_VFP_ROW_BITS_("s20", "s21", "s22", "s23", CL, T0, T1, T2, T3)
/* the exact float clamps of one sum S (s24 = 0, s25 = hi): MI and GT are false for NaN */
#define MTVM_VFP_FLO_(S) "vcmpe.f32 " S ", s24\n\t" "vmrs    APSR_nzcv, fpscr\n\t" \
    "it      mi\n\t" "vmovmi.f32 " S ", s24\n\t"
#define MTVM_VFP_FHI_(S) "vcmpe.f32 " S ", s25\n\t" "vmrs    APSR_nzcv, fpscr\n\t" \
    "it      gt\n\t" "vmovgt.f32 " S ", s25\n\t"
#define MTVM_VFP_FLO(S) MTVM_VFP_FLO_(S)
#define MTVM_VFP_FLOHI(S) MTVM_VFP_FLO_(S) MTVM_VFP_FHI_(S)
#define MTVM_VFP_FLOAT_4X4(CL) \
    "vldr    s25, %[hi]\n\t" "vldr    s24, [%[z]]\n\t" \
    CL("s8") CL("s9") CL("s10") CL("s11") CL("s12") CL("s13") CL("s14") CL("s15") \
    CL("s16") CL("s17") CL("s18") CL("s19") CL("s20") CL("s21") CL("s22") CL("s23")
/* the taps' loop (LOAD_B: the activations of a tap into s0-s3), and the bias */
#define MTVM_VFP_TAPS_(LOAD_B) MTVM_VFP_TAPS_LOOP_(LOAD_B) MTVM_VFP_BIAS_4X4
#define MTVM_VFP_TAPS_4X4 MTVM_VFP_TAPS_(MTVM_VFP_LOAD_B_ROWS)
/* tap t at b + off[t] (mtvm_f32_gemm_4x4_off_vfp) */
#define MTVM_VFP_TAPS_OFF_4X4 MTVM_VFP_TAPS_(MTVM_VFP_LOAD_B_OFF)
/* 9 registers (z: the zeros, also the exact path's 0.0: it branches before z is
 * borrowed) */
#define MTVM_VFP_EPI_OPS \
    : [a] "+&r"(a), [b] "+&r"(b), [t] "+&r"(taps), [y] "+&r"(y), [z] "+&r"(zp), \
      [as] "+&r"(a_step), [bs] "+&r"(b_step), [bias] "+&r"(bias) \
    : [ys] "r"(y_step), [hi] "m"(hi_bits) \
    : MTVM_VFP_CLOBBERS, "s24", "s25"
/* with offsets: 11 */
#define MTVM_VFP_EPI_OFF_OPS \
    : [a] "+&r"(a), [off] "+&r"(off), [t] "+&r"(taps), [y] "+&r"(y), [z] "+&r"(zp), \
      [as] "+&r"(a_step), [o] "=&r"(o), [bt] "=&r"(bt), [bias] "+&r"(bias) \
    : [b] "r"(b), [ys] "r"(y_step), [hi] "m"(hi_bits) \
    : MTVM_VFP_CLOBBERS, "s24", "s25"
/* The asm statement of a mode (a constant): TAPS, then the epilogue; OPS its operands,
 * T0..T3 the registers the clamp borrows. */
#define MTVM_VFP_EPI_STMT(TAPS, OPS, T0, T1, T2, T3)                                        \
    do {                                                                                   \
        if (mode == MTVM_F32_EPI_NONE) {                                                   \
            __asm__ volatile(TAPS MTVM_VFP_STORE_4X4 OPS);                                 \
        } else if (mode == MTVM_F32_EPI_RELU) {                                            \
            __asm__ volatile(TAPS MTVM_VFP_NAN_TEST_4X4 "bvs     2f\n\t"                   \
                             MTVM_VFP_BITS_4X4(MTVM_VFP_LO, T0, T1, T2, T3) "b       3f\n\t"   \
                             "2:\n\t" MTVM_VFP_FLOAT_4X4(MTVM_VFP_FLO) MTVM_VFP_STORE_4X4     \
                             "3:\n\t" OPS);                                                \
        } else {                                                                           \
            __asm__ volatile(TAPS MTVM_VFP_NAN_TEST_4X4 "bvs     2f\n\t"                   \
                             MTVM_VFP_BITS_4X4(MTVM_VFP_LOHI, T0, T1, T2, T3) "b       3f\n\t" \
                             "2:\n\t" MTVM_VFP_FLOAT_4X4(MTVM_VFP_FLOHI) MTVM_VFP_STORE_4X4   \
                             "3:\n\t" OPS);                                                \
        }                                                                                  \
    } while (0)
/* the portable form of both (-O0): the tile, then the C epilogue */
#define MTVM_VFP_EPI_C(GEMM)                                                                \
    do {                                                                                   \
        float tile[16], hi;                                                                \
        memcpy(&hi, &hi_bits, 4);                                                          \
        GEMM;                                                                              \
        for (int32_t r = 0; r < 4; ++r) {                                                  \
            for (int32_t q = 0; q < 4; ++q) {                                              \
                float v = tile[r * 4 + q] + bias[r];                                       \
                if (mode != MTVM_F32_EPI_NONE) v = v < 0.0f ? 0.0f : v;                    \
                if (mode == MTVM_F32_EPI_RELU_HI) v = v > hi ? hi : v;                     \
                y[r * ldy + q] = v;                                                        \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* Inlined where the schedules call a block directly (few taps: the constants fold), except
 * in builds for size (-Os: one copy, the mode a branch). */
#if defined(__OPTIMIZE_SIZE__)
#define MTVM_VFP_BLOCK_QUALIFIERS static __attribute__((noinline, unused))
#else
#define MTVM_VFP_BLOCK_QUALIFIERS static inline __attribute__((always_inline))
#endif

/* One 4 x 4 block: taps >= 1, bias: 4 floats, hi > 0 (MTVM_F32_EPI_RELU_HI; its bits as an
 * int32). At -O0 the registers are not found: the tile and C there. */
MTVM_VFP_BLOCK_QUALIFIERS void mtvm_f32_gemm_4x4_epi_vfp(
    int32_t taps, const float* a, int32_t lda, const float* b, int32_t ldb,
    const float* bias, int32_t mode, int32_t hi_bits, float* y, int32_t ldy)
{
#if defined(__OPTIMIZE__)
    static const float zeros[16];
    const float* zp = zeros;
    int32_t a_step = lda * 4, b_step = ldb * 4;
    const int32_t y_step = ldy * 4;
    MTVM_VFP_EPI_STMT(MTVM_VFP_TAPS_4X4, MTVM_VFP_EPI_OPS, "z", "as", "bs", "bias");
#else
    MTVM_VFP_EPI_C(mtvm_f32_gemm_4x4_vfp(taps, a, lda, b, ldb, tile));
#endif
}

/* The same with tap t reading b + off[t] (mtvm_f32_gemm_4x4_off_vfp). */
MTVM_VFP_BLOCK_QUALIFIERS void mtvm_f32_gemm_4x4_off_epi_vfp(
    int32_t taps, const float* a, int32_t lda, const float* b, const int32_t* off,
    const float* bias, int32_t mode, int32_t hi_bits, float* y, int32_t ldy)
{
#if defined(__OPTIMIZE__)
    static const float zeros[16];
    const float* zp = zeros;
    const float* bt;
    int32_t a_step = lda * 4, o;
    const int32_t y_step = ldy * 4;
    MTVM_VFP_EPI_STMT(MTVM_VFP_TAPS_OFF_4X4, MTVM_VFP_EPI_OFF_OPS, "z", "as", "o", "bt");
#else
    MTVM_VFP_EPI_C(mtvm_f32_gemm_4x4_off_vfp(taps, a, lda, b, off, tile));
#endif
}

/* MatMul's tiles (mtvm.ops.gemm.emit_matmul_tiles): y[r * ldy + q] = the sum of
 * mtvm_f32_gemm_4x4_vfp, plus cbias[q] where cbias is given (a bias along the columns: a
 * Linear layer's MatMul + Add), plus res[r * ldy + q] where res is given (a residual Add
 * after it; res may be y itself), stored from the registers, r < rows (a multiple of 4),
 * q < 4. The same fused multiply-adds from 0 and then the adds in the tail's order, as the
 * tile and its C epilogue (v = tile + bias; v = v + res): the same values, without the
 * tile's round trip through memory and the C loop over it (about 6 instructions an
 * output: at a depth of 32 a fifth of the product). Out of line: one copy per file. */
#define MTVM_VFP_CBIAS_4X4 \
    "vldmia  %[cb], {s0-s3}\n\t" \
    "vadd.f32 s8, s8, s0\n\t" "vadd.f32 s9, s9, s1\n\t" \
    "vadd.f32 s10, s10, s2\n\t" "vadd.f32 s11, s11, s3\n\t" \
    "vadd.f32 s12, s12, s0\n\t" "vadd.f32 s13, s13, s1\n\t" \
    "vadd.f32 s14, s14, s2\n\t" "vadd.f32 s15, s15, s3\n\t" \
    "vadd.f32 s16, s16, s0\n\t" "vadd.f32 s17, s17, s1\n\t" \
    "vadd.f32 s18, s18, s2\n\t" "vadd.f32 s19, s19, s3\n\t" \
    "vadd.f32 s20, s20, s0\n\t" "vadd.f32 s21, s21, s1\n\t" \
    "vadd.f32 s22, s22, s2\n\t" "vadd.f32 s23, s23, s3\n\t"
/* one row of the residual (%[rs] stepped by a row) added to the sums from S0 */
#define MTVM_VFP_RES_ROW_(S0, S1, S2, S3) \
    "vldmia  %[rs], {s0-s3}\n\t" "add     %[rs], %[rs], %[ys]\n\t" \
    "vadd.f32 " S0 ", " S0 ", s0\n\t" "vadd.f32 " S1 ", " S1 ", s1\n\t" \
    "vadd.f32 " S2 ", " S2 ", s2\n\t" "vadd.f32 " S3 ", " S3 ", s3\n\t"
#define MTVM_VFP_RES_4X4 \
    MTVM_VFP_RES_ROW_("s8", "s9", "s10", "s11") MTVM_VFP_RES_ROW_("s12", "s13", "s14", "s15") \
    MTVM_VFP_RES_ROW_("s16", "s17", "s18", "s19") MTVM_VFP_RES_ROW_("s20", "s21", "s22", "s23")
#define MTVM_VFP_PLAIN_OPS \
    : [a] "+&r"(ag), [b] "+&r"(bg), [t] "+&r"(t), [y] "+&r"(yg), [rs] "+&r"(rg) \
    : [z] "r"(zeros), [as] "r"(a_step), [bs] "r"(b_step), [ys] "r"(y_step), [cb] "r"(cbias) \
    : MTVM_VFP_CLOBBERS
/* The tile's C epilogue of mtvm_f32_gemm_rows_cbias_vfp: y = tile + cbias, then + res. */
static inline void mtvm_f32_cbias_res_4x4(const float* tile, const float* cbias,
                                          const float* res, float* y, int32_t ldy)
{
    for (int32_t i = 0; i < 16; ++i) {
        float v = tile[i];
        if (cbias) v = v + cbias[i % 4];
        if (res) v = v + res[i / 4 * ldy + i % 4];
        y[i / 4 * ldy + i % 4] = v;
    }
}

static __attribute__((noinline, unused)) void mtvm_f32_gemm_rows_cbias_vfp(
    int32_t taps, const float* a, int32_t lda, const float* b, int32_t ldb,
    const float* cbias, const float* res, float* y, int32_t ldy, int32_t rows)
{
    static const float zeros[16];
    const int32_t a_step = lda * 4, b_step = ldb * 4, y_step = ldy * 4;
    for (int32_t g = 0; g < rows; g += 4) {
        const float* ag = a + g;
        const float* bg = b;
        float* yg = y + g * ldy;
        const float* rg = res ? res + g * ldy : res;
        int32_t t = taps;
#if defined(__OPTIMIZE__)
        if (t <= 0) {   /* no taps: the tail's adds to 0 */
            mtvm_f32_cbias_res_4x4(zeros, cbias, rg, yg, ldy);
        } else if (cbias && res) {
            __asm__ volatile(MTVM_VFP_PLAIN_TAPS_4X4 MTVM_VFP_CBIAS_4X4 MTVM_VFP_RES_4X4
                             MTVM_VFP_STORE_4X4 MTVM_VFP_PLAIN_OPS);
        } else if (cbias) {
            __asm__ volatile(MTVM_VFP_PLAIN_TAPS_4X4 MTVM_VFP_CBIAS_4X4 MTVM_VFP_STORE_4X4
                             MTVM_VFP_PLAIN_OPS);
        } else if (res) {
            __asm__ volatile(MTVM_VFP_PLAIN_TAPS_4X4 MTVM_VFP_RES_4X4 MTVM_VFP_STORE_4X4
                             MTVM_VFP_PLAIN_OPS);
        } else {
            __asm__ volatile(MTVM_VFP_PLAIN_TAPS_4X4 MTVM_VFP_STORE_4X4 MTVM_VFP_PLAIN_OPS);
        }
#else
        /* -O0 finds no registers for the ten operands: the tile, then the same adds in C */
        float tile[16];
        mtvm_f32_gemm_4x4_vfp(t, ag, lda, bg, ldb, tile);
        mtvm_f32_cbias_res_4x4(tile, cbias, rg, yg, ldy);
        (void)zeros;
        (void)a_step;
        (void)b_step;
        (void)y_step;
#endif
    }
}

/* What the generated kernels call: all `rows` (a multiple of 4) of a tile, four a block,
 * row r at a + r (a[t * lda + r]), bias + r, y + r * ldy; BT is ldb's type (int32_t) or,
 * with offsets, the tap table's (const int32_t*). Out of line, one function per mode and
 * form (the unused ones dropped): inlined at every call, the blocks' assembly took 8.6 KB
 * of mbv2_v11's 57 KB of code on the M4 for 2.5 % fewer instructions. */
#define MTVM_VFP_ROWS_FN(NAME, BLOCK, BT, MODE)                                              \
    static __attribute__((noinline, unused)) void NAME(                                     \
        int32_t taps, const float* a, int32_t lda, const float* b, BT ldb,                 \
        const float* bias, int32_t hi_bits, float* y, int32_t ldy, int32_t rows)           \
    {                                                                                      \
        for (int32_t g = 0; g < rows; g += 4) {                                            \
            BLOCK(taps, a + g, lda, b, ldb, bias + g, MODE, hi_bits, y + g * ldy, ldy);    \
        }                                                                                  \
    }
MTVM_VFP_ROWS_FN(mtvm_f32_gemm_rows_none_vfp, mtvm_f32_gemm_4x4_epi_vfp, int32_t,
                 MTVM_F32_EPI_NONE)
MTVM_VFP_ROWS_FN(mtvm_f32_gemm_rows_relu_vfp, mtvm_f32_gemm_4x4_epi_vfp, int32_t,
                 MTVM_F32_EPI_RELU)
MTVM_VFP_ROWS_FN(mtvm_f32_gemm_rows_relu_hi_vfp, mtvm_f32_gemm_4x4_epi_vfp, int32_t,
                 MTVM_F32_EPI_RELU_HI)
MTVM_VFP_ROWS_FN(mtvm_f32_gemm_rows_none_off_vfp, mtvm_f32_gemm_4x4_off_epi_vfp,
                 const int32_t*, MTVM_F32_EPI_NONE)
MTVM_VFP_ROWS_FN(mtvm_f32_gemm_rows_relu_off_vfp, mtvm_f32_gemm_4x4_off_epi_vfp,
                 const int32_t*, MTVM_F32_EPI_RELU)
MTVM_VFP_ROWS_FN(mtvm_f32_gemm_rows_relu_hi_off_vfp, mtvm_f32_gemm_4x4_off_epi_vfp,
                 const int32_t*, MTVM_F32_EPI_RELU_HI)
#endif

#endif  /* MTVM_GEMM_F32_VFP_H_ */
