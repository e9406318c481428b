/* mtvm_activation_f32_vfp.h: tanh and the logistic sigmoid over an array in place, in
 * Thumb-2 VFP on Cortex-M cores with a fused-multiply-add FPU (M4F, M7, M33): the gates of
 * the float recurrent ops (mtvm/ops/recurrent.py, act_arrays), bit for bit
 * mtvm_tanh_f32 / mtvm_sigmoid_f32 of generic/mtvm_activation_f32.h.
 *
 * Why: VFMA accumulates into its destination, so each Horner step of the scalar function
 * costs a copy of its coefficient as well (gcc: 31 instructions a sigmoid). Here one VLDM
 * reloads the sixteen coefficients that two values' Horner chains consume, the leading
 * coefficients and bounds stay in registers, and the bound test is one compare of x * x
 * (already needed) against the bound squared: 35 instructions per two values.
 *
 * |x| > t  <=>  x * x > t * t for the bounds used (t = 8, 16: powers of two): just above t,
 * x * x is at least two units of t * t's last place above it, just below it rounds under;
 * an overflow to infinity compares above; NaN compares false both ways and propagates, as
 * in the scalar functions. Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_ACTIVATION_F32_VFP_H_
#define MTVM_ACTIVATION_F32_VFP_H_

#include <stdint.h>
#include "mtvm_activation_f32.h"

#if defined(__GNUC__) && defined(__thumb2__) && defined(__ARM_FP) && (__ARM_FP & 4) && \
    defined(__ARM_FEATURE_FMA) && defined(__FP_FAST_FMAF) && !defined(MTVM_NO_SIMD)
#define MTVM_ACT_HAVE_VFP 1
#else
#define MTVM_ACT_HAVE_VFP 0
#endif

/* The table of one function (from its MTVM_..._COEFFS): the sixteen coefficients the two
 * chains of a step consume, in the order of s0-s15 (value a's P chain p3..p0 in s0-s3, b's
 * in s7-s4, a's Q chain in s8-s11, b's in s15-s12: the two results end in s3 and s4, the
 * two denominators in s11 and s12), then p4 and q4, which stay in s16 and s17. */
#define MTVM_ACT_VFP_TABLE(p4, p3, p2, p1, p0, q4, q3, q2, q1, q0) \
    { p3, p2, p1, p0, p0, p1, p2, p3, q3, q2, q1, q0, q0, q1, q2, q3, p4, q4 }

/* Values a and b in s22, s23 (y = x * x in s24, s25); s18 the constant added (the
 * sigmoid's 1/2), s19 the bound squared, s20 and s21 the results above and below the
 * bounds. ADD is the sigmoid's two VADDs or nothing. */
#define MTVM_ACT_VFP_PAIRS_ASM(ADD) \
    "1:\n\t" \
    "vldmia    %[v], {s22-s23}\n\t" \
    "vldmia    %[k], {s0-s15}\n\t" \
    "vmul.f32  s24, s22, s22\n\t" \
    "vmul.f32  s25, s23, s23\n\t" \
    "vfma.f32  s0, s24, s16\n\t" \
    "vfma.f32  s7, s25, s16\n\t" \
    "vfma.f32  s8, s24, s17\n\t" \
    "vfma.f32  s15, s25, s17\n\t" \
    "vfma.f32  s1, s24, s0\n\t" \
    "vfma.f32  s6, s25, s7\n\t" \
    "vfma.f32  s9, s24, s8\n\t" \
    "vfma.f32  s14, s25, s15\n\t" \
    "vfma.f32  s2, s24, s1\n\t" \
    "vfma.f32  s5, s25, s6\n\t" \
    "vfma.f32  s10, s24, s9\n\t" \
    "vfma.f32  s13, s25, s14\n\t" \
    "vfma.f32  s3, s24, s2\n\t" \
    "vfma.f32  s4, s25, s5\n\t" \
    "vfma.f32  s11, s24, s10\n\t" \
    "vfma.f32  s12, s25, s13\n\t" \
    "vmul.f32  s3, s22, s3\n\t" \
    "vmul.f32  s4, s23, s4\n\t" \
    "vdiv.f32  s3, s3, s11\n\t" \
    "vdiv.f32  s4, s4, s12\n\t" \
    ADD \
    "vcmpe.f32 s24, s19\n\t" \
    "vmrs      APSR_nzcv, fpscr\n\t" \
    "bgt       5f\n\t" \
    "4:\n\t" \
    "vcmpe.f32 s25, s19\n\t" \
    "vmrs      APSR_nzcv, fpscr\n\t" \
    "bgt       6f\n\t" \
    "7:\n\t" \
    "vstmia    %[v]!, {s3-s4}\n\t" \
    "subs      %[n], %[n], #1\n\t" \
    "bne       1b\n\t" \
    "b         9f\n\t" \
    "5:\n\t" \
    "vcmpe.f32 s22, #0\n\t" \
    "vmrs      APSR_nzcv, fpscr\n\t" \
    "ite       gt\n\t" \
    "vmovgt.f32 s3, s20\n\t" \
    "vmovle.f32 s3, s21\n\t" \
    "b         4b\n\t" \
    "6:\n\t" \
    "vcmpe.f32 s23, #0\n\t" \
    "vmrs      APSR_nzcv, fpscr\n\t" \
    "ite       gt\n\t" \
    "vmovgt.f32 s4, s20\n\t" \
    "vmovle.f32 s4, s21\n\t" \
    "b         7b\n\t" \
    "9:\n\t"

#define MTVM_ACT_VFP_CLOBBERS \
    "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", \
    "s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24", \
    "s25", "memory", "cc"

#if MTVM_ACT_HAVE_VFP
/* The pairs of v[0..2 pairs): table = MTVM_ACT_VFP_TABLE(...), fixed = {added constant,
 * bound squared, value above, value below}. */
#define MTVM_ACT_VFP_PAIRS(v, pairs, table, fixed, ADD) \
    do { \
        float* vp_ = (v); \
        int32_t n_ = (pairs); \
        __asm__ volatile( \
            "vldmia    %[k2], {s16-s17}\n\t" \
            "vldmia    %[f], {s18-s21}\n\t" \
            MTVM_ACT_VFP_PAIRS_ASM(ADD) \
            : [v] "+r"(vp_), [n] "+r"(n_) \
            : [k] "r"(table), [k2] "r"((table) + 16), [f] "r"(fixed) \
            : MTVM_ACT_VFP_CLOBBERS); \
    } while (0)
#endif

/* v[i] = mtvm_sigmoid_f32(v[i]), i < n. */
static inline void mtvm_sigmoid_f32_inplace(float* v, int n)
{
    int i = 0;
#if MTVM_ACT_HAVE_VFP
    static const float table[] = MTVM_SIGMOID_F32_COEFFS(MTVM_ACT_VFP_TABLE);
    static const float fixed[] = {0.5f, 256.0f, 1.0f, 0.0f};
    if (n >= 2) {
        MTVM_ACT_VFP_PAIRS(v, n >> 1, table, fixed,
                           "vadd.f32  s3, s18, s3\n\t" "vadd.f32  s4, s18, s4\n\t");
        i = n & ~1;
    }
#endif
    for (; i < n; ++i) {
        v[i] = mtvm_sigmoid_f32(v[i]);
    }
}

/* v[i] = mtvm_tanh_f32(v[i]), i < n. */
static inline void mtvm_tanh_f32_inplace(float* v, int n)
{
    int i = 0;
#if MTVM_ACT_HAVE_VFP
    static const float table[] = MTVM_TANH_F32_COEFFS(MTVM_ACT_VFP_TABLE);
    static const float fixed[] = {0.0f, 64.0f, 1.0f, -1.0f};
    if (n >= 2) {
        MTVM_ACT_VFP_PAIRS(v, n >> 1, table, fixed, "");
        i = n & ~1;
    }
#endif
    for (; i < n; ++i) {
        v[i] = mtvm_tanh_f32(v[i]);
    }
}

#endif  /* MTVM_ACTIVATION_F32_VFP_H_ */
