/* mtvm_depthwise_rv32.h: the int8 3x3 depthwise conv (QConv folded=0) for RV32 cores
 * without SIMD, strides 1 and 2: one channel's weights, bias and requantization in
 * registers; the outputs in strips of two lines (two output rows, or two output columns
 * when the plane is taller than wide) swept along the strip, one input line segment
 * across the strip ("a column": 4 values at stride 1, 5 at stride 2) loaded once and
 * multiplied into the pending sums of the (up to three) outputs it feeds, the sums
 * rotated by unrolling instead of moved. mul + add per MAC, ~4 loads per 18 MACs at
 * stride 1; the requantization is (mulh + rnd) >> sh and a clamp.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DEPTHWISE_RV32_H_
#define MTVM_DEPTHWISE_RV32_H_

#include <stdint.h>
#include "mtvm_int8_bytes.h"

/* (high word of acc * mult + rnd) >> sh, clamped to [lo, hi]: mtvm_dw_requantize's
 * integers (mtvm_depthwise_s8.h). */
static MTVM_ALWAYS_INLINE int32_t mtvm_dw_rq_rv32(int32_t acc, int32_t mult, int32_t rnd,
                                                  int32_t sh, int32_t lo, int32_t hi)
{
    acc = ((int32_t)(((int64_t)acc * mult) >> 32) + rnd) >> sh;
    if ((uint32_t)(acc - lo) > (uint32_t)(hi - lo)) {   /* one compare in range */
        acc = acc < lo ? lo : hi;
    }
    return acc;
}

/* One input value at P (X_U: uint8, else int8). */
#define MTVM_DW_RV32_LD(X_U, P) \
    ((X_U) ? (int32_t)*(const uint8_t*)(P) : (int32_t)*(const int8_t*)(P))

/* The channel's constants, as locals of the strip functions (by value: nothing aliases
 * them, so they stay in registers across the byte stores). */
#define MTVM_DW_RV32_PARAMS \
    int32_t w0, int32_t w1, int32_t w2, int32_t w3, int32_t w4, int32_t w5, int32_t w6, \
    int32_t w7, int32_t w8, int32_t bias, int32_t mult, int32_t rnd, int32_t sh, int32_t lo, \
    int32_t hi

/* The two-line strips' main loops in RV32IM assembly (gcc/clang, optimizing builds: the
 * offsets are "i" operands, constants once inlined), where the offsets fit a load's 12 bits
 * and the clamp is a full 8-bit range: C keeps a few sums in memory and reloads weights;
 * here the 9 weights, 6 (4) sums, the requantization and the pointers hold 25 registers
 * (the pointers and the started sums enter through memory, blk: gcc allows 30 operands
 * and counts an in-out one twice).
 * Per two outputs at stride 1: 4 loads, 18 mul + 18 add, 2 x (mulh, add, sra, range
 * check, sb), 3 for the loop. */
#if defined(__GNUC__) && defined(__OPTIMIZE__)
#define MTVM_DW_RV32_ASM 1
/* D += V * W; D = V * W + bias */
#define MTVM_DW_RV32_MAC(D, W) \
    "mul  %[t], %[v], %[" #W "]\n\t" "add  %[" #D "], %[" #D "], %[t]\n\t"
#define MTVM_DW_RV32_START(D, W) \
    "mul  %[" #D "], %[v], %[" #W "]\n\t" "add  %[" #D "], %[" #D "], %[bias]\n\t"
/* requantize sum S, clamp, store at OFF(q); CHK: the range check of the full int8 (S8)
 * or uint8 (U8) clamp, out of range (S >> 31) ^ HI */
#define MTVM_DW_RV32_RQ(S, OFF, CHK, HI) \
    "mulh %[" #S "], %[" #S "], %[mult]\n\t" \
    "add  %[" #S "], %[" #S "], %[rnd]\n\t" \
    "sra  %[" #S "], %[" #S "], %[sh]\n\t" \
    CHK(S) \
    "srai %[" #S "], %[" #S "], 31\n\t" \
    "xori %[" #S "], %[" #S "], " #HI "\n" \
    "3:\n\t" \
    "sb   %[" #S "], " OFF "(%[q])\n\t"
#define MTVM_DW_RV32_CHK_S8(S) \
    "addi %[t], %[" #S "], 128\n\t" "bltu %[t], %[r256], 3f\n\t"
#define MTVM_DW_RV32_CHK_U8(S) "bltu %[" #S "], %[r256], 3f\n\t"
#define MTVM_DW3S1X2_RV32_ASTEP(LB, CHK, HI, A0, A1, B0, B1, C0, C1) \
    LB "   %[v], 2*%[ps](%[p])\n\t" \
    MTVM_DW_RV32_MAC(A0, w2) MTVM_DW_RV32_MAC(B0, w1) MTVM_DW_RV32_START(C0, w0) \
    LB "   %[v], 2*%[ps]+%[ls](%[p])\n\t" \
    MTVM_DW_RV32_MAC(A0, w5) MTVM_DW_RV32_MAC(A1, w2) MTVM_DW_RV32_MAC(B0, w4) \
    MTVM_DW_RV32_MAC(B1, w1) MTVM_DW_RV32_MAC(C0, w3) MTVM_DW_RV32_START(C1, w0) \
    LB "   %[v], 2*%[ps]+2*%[ls](%[p])\n\t" \
    MTVM_DW_RV32_MAC(A0, w8) MTVM_DW_RV32_MAC(A1, w5) MTVM_DW_RV32_MAC(B0, w7) \
    MTVM_DW_RV32_MAC(B1, w4) MTVM_DW_RV32_MAC(C0, w6) MTVM_DW_RV32_MAC(C1, w3) \
    LB "   %[v], 2*%[ps]+3*%[ls](%[p])\n\t" \
    MTVM_DW_RV32_MAC(A1, w8) MTVM_DW_RV32_MAC(B1, w7) MTVM_DW_RV32_MAC(C1, w6) \
    MTVM_DW_RV32_RQ(A0, "0", CHK, HI) MTVM_DW_RV32_RQ(A1, "%[ols]", CHK, HI) \
    "beq  %[p], %[pe], 9f\n\t" \
    "addi %[p], %[p], %[ps]\n\t" \
    "addi %[q], %[q], %[ops]\n\t"
#define MTVM_DW_RV32_LOAD_STATE(A0, A1, B0, B1) \
    "lw   %[p], 0(%[blk])\n\t" "lw   %[q], 4(%[blk])\n\t" \
    "lw   %[" #A0 "], 8(%[blk])\n\t" "lw   %[" #A1 "], 12(%[blk])\n\t" \
    "lw   %[" #B0 "], 16(%[blk])\n\t" "lw   %[" #B1 "], 20(%[blk])\n\t" \
    "li   %[r256], 256\n"
/* (gcc allows 30 operands: p, q and the started sums come in through blk: p, q, a0, a1,
 * b0, b1) */
#define MTVM_DW3S1X2_RV32_ALOOP(LB, CHK, HI) \
    __asm__ volatile( \
        MTVM_DW_RV32_LOAD_STATE(a0, a1, b0, b1) \
        "1:\n\t" \
        MTVM_DW3S1X2_RV32_ASTEP(LB, CHK, HI, a0, a1, b0, b1, c0, c1) \
        MTVM_DW3S1X2_RV32_ASTEP(LB, CHK, HI, b0, b1, c0, c1, a0, a1) \
        MTVM_DW3S1X2_RV32_ASTEP(LB, CHK, HI, c0, c1, a0, a1, b0, b1) \
        "j    1b\n" \
        "9:" \
        : [a0] "=&r"(r_[0]), [a1] "=&r"(r_[1]), [b0] "=&r"(r_[2]), [b1] "=&r"(r_[3]), \
          [c0] "=&r"(r_[4]), [c1] "=&r"(r_[5]), [p] "=&r"(r_[6]), [q] "=&r"(r_[7]), \
          [v] "=&r"(r_[8]), [t] "=&r"(r_[9]), [r256] "=&r"(r_[10]) \
        : [blk] "r"(blk), [pe] "r"(pe), [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), \
          [w3] "r"(w3), [w4] "r"(w4), [w5] "r"(w5), [w6] "r"(w6), [w7] "r"(w7), \
          [w8] "r"(w8), [bias] "r"(bias), [mult] "r"(mult), [rnd] "r"(rnd), [sh] "r"(sh), \
          [ps] "i"(PS), [ls] "i"(LS), [ols] "i"(OLS), [ops] "i"(OPS) \
        : "memory")
/* stride 2: column 2k + 1 (position 1 of output k), column 2k + 2 (position 2 of k,
 * 0 of k + 1); lines 0-2 feed line 0 of the strip, lines 2-4 line 1 */
#define MTVM_DW3S2X2_RV32_ASTEP(LB, CHK, HI, A0, A1, B0, B1) \
    LB "   %[v], %[ps](%[p])\n\t" MTVM_DW_RV32_MAC(A0, w1) \
    LB "   %[v], %[ps]+%[ls](%[p])\n\t" MTVM_DW_RV32_MAC(A0, w4) \
    LB "   %[v], %[ps]+2*%[ls](%[p])\n\t" MTVM_DW_RV32_MAC(A0, w7) MTVM_DW_RV32_MAC(A1, w1) \
    LB "   %[v], %[ps]+3*%[ls](%[p])\n\t" MTVM_DW_RV32_MAC(A1, w4) \
    LB "   %[v], %[ps]+4*%[ls](%[p])\n\t" MTVM_DW_RV32_MAC(A1, w7) \
    LB "   %[v], 2*%[ps](%[p])\n\t" MTVM_DW_RV32_MAC(A0, w2) MTVM_DW_RV32_START(B0, w0) \
    LB "   %[v], 2*%[ps]+%[ls](%[p])\n\t" MTVM_DW_RV32_MAC(A0, w5) MTVM_DW_RV32_MAC(B0, w3) \
    LB "   %[v], 2*%[ps]+2*%[ls](%[p])\n\t" MTVM_DW_RV32_MAC(A0, w8) MTVM_DW_RV32_MAC(A1, w2) \
    MTVM_DW_RV32_MAC(B0, w6) MTVM_DW_RV32_START(B1, w0) \
    LB "   %[v], 2*%[ps]+3*%[ls](%[p])\n\t" MTVM_DW_RV32_MAC(A1, w5) MTVM_DW_RV32_MAC(B1, w3) \
    LB "   %[v], 2*%[ps]+4*%[ls](%[p])\n\t" MTVM_DW_RV32_MAC(A1, w8) MTVM_DW_RV32_MAC(B1, w6) \
    MTVM_DW_RV32_RQ(A0, "0", CHK, HI) MTVM_DW_RV32_RQ(A1, "%[ols]", CHK, HI) \
    "beq  %[p], %[pe], 9f\n\t" \
    "addi %[p], %[p], 2*%[ps]\n\t" \
    "addi %[q], %[q], %[ops]\n\t"
#define MTVM_DW3S2X2_RV32_ALOOP(LB, CHK, HI) \
    __asm__ volatile( \
        MTVM_DW_RV32_LOAD_STATE(a0, a1, b0, b1) \
        "1:\n\t" \
        MTVM_DW3S2X2_RV32_ASTEP(LB, CHK, HI, a0, a1, b0, b1) \
        MTVM_DW3S2X2_RV32_ASTEP(LB, CHK, HI, b0, b1, a0, a1) \
        "j    1b\n" \
        "9:" \
        : [a0] "=&r"(r_[0]), [a1] "=&r"(r_[1]), [b0] "=&r"(r_[2]), [b1] "=&r"(r_[3]), \
          [p] "=&r"(r_[6]), [q] "=&r"(r_[7]), [v] "=&r"(r_[8]), [t] "=&r"(r_[9]), \
          [r256] "=&r"(r_[10]) \
        : [blk] "r"(blk), [pe] "r"(pe), [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), \
          [w3] "r"(w3), [w4] "r"(w4), [w5] "r"(w5), [w6] "r"(w6), [w7] "r"(w7), \
          [w8] "r"(w8), [bias] "r"(bias), [mult] "r"(mult), [rnd] "r"(rnd), [sh] "r"(sh), \
          [ps] "i"(PS), [ls] "i"(LS), [ols] "i"(OLS), [ops] "i"(OPS) \
        : "memory")
/* the assembly applies: offsets within 12 bits, a full 8-bit clamp (and, at the call, strips
 * of 4 or more outputs: on shorter ones its setup costs more than it saves) */
#define MTVM_DW_RV32_ASM_OK(S, LS, PS, OLS, OPS, LO, HI) \
    ((S) * (PS) + ((S) == 1 ? 3 : 4) * (LS) + (PS) <= 2047 && (OLS) <= 2047 && \
     (OPS) <= 2047 && (((LO) == -128 && (HI) == 127) || ((LO) == 0 && (HI) == 255)))
/* the loop for the load and clamp variant */
#define MTVM_DW_RV32_ALOOP(NAME, X_U, LO) \
    do { \
        if ((X_U) && (LO) == 0) { \
            NAME("lbu", MTVM_DW_RV32_CHK_U8, 255); \
        } else if (X_U) { \
            NAME("lbu", MTVM_DW_RV32_CHK_S8, 127); \
        } else if ((LO) == 0) { \
            NAME("lb ", MTVM_DW_RV32_CHK_U8, 255); \
        } else { \
            NAME("lb ", MTVM_DW_RV32_CHK_S8, 127); \
        } \
    } while (0)
#else
#define MTVM_DW_RV32_ASM 0
#endif

/* Weights wI: line I / 3, position I % 3 of the window (line: across the strip, position:
 * along it). p: the first window's origin; LS, PS: input offsets between lines and between
 * positions; q: the first output; OLS, OPS: output offsets between the strip's two lines
 * and between its positions; n >= 1 outputs along the strip. */

/* Stride 1, two output lines: the column at p + 2 PS (4 values; p: the window of output k)
 * completes output k, adds to k + 1, starts k + 2. */
#define MTVM_DW3S1X2_RV32_COL(X_U, LS, PS, A0, A1, B0, B1, C0, C1) \
    do { \
        const int32_t v0 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS)); \
        const int32_t v1 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + (LS)); \
        const int32_t v2 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + 2 * (LS)); \
        const int32_t v3 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + 3 * (LS)); \
        A0 += w2 * v0 + w5 * v1 + w8 * v2; \
        A1 += w2 * v1 + w5 * v2 + w8 * v3; \
        B0 += w1 * v0 + w4 * v1 + w7 * v2; \
        B1 += w1 * v1 + w4 * v2 + w7 * v3; \
        C0 = bias + w0 * v0 + w3 * v1 + w6 * v2; \
        C1 = bias + w0 * v1 + w3 * v2 + w6 * v3; \
    } while (0)
#define MTVM_DW3S1X2_RV32_STEP(X_U, LS, PS, OLS, OPS, A0, A1, B0, B1, C0, C1) \
    do { \
        MTVM_DW3S1X2_RV32_COL(X_U, LS, PS, A0, A1, B0, B1, C0, C1); \
        q[0] = (uint8_t)mtvm_dw_rq_rv32(A0, mult, rnd, sh, lo, hi); \
        q[OLS] = (uint8_t)mtvm_dw_rq_rv32(A1, mult, rnd, sh, lo, hi); \
    } while (0)

static MTVM_ALWAYS_INLINE void mtvm_dw3s1x2_rv32(const uint8_t* p, uint8_t* q, int32_t n,
                                                 MTVM_DW_RV32_PARAMS, int X_U, int32_t LS,
                                                 int32_t PS, int32_t OLS, int32_t OPS)
{
    int32_t a0, a1, b0, b1, c0, c1;
    const uint8_t* pe;
    {   /* columns 0 and 1: a (output 0) gets positions 0 and 1, b (output 1) position 0 */
        const int32_t v0 = MTVM_DW_RV32_LD(X_U, p), v1 = MTVM_DW_RV32_LD(X_U, p + (LS));
        const int32_t v2 = MTVM_DW_RV32_LD(X_U, p + 2 * (LS));
        const int32_t v3 = MTVM_DW_RV32_LD(X_U, p + 3 * (LS));
        const int32_t u0 = MTVM_DW_RV32_LD(X_U, p + PS);
        const int32_t u1 = MTVM_DW_RV32_LD(X_U, p + PS + (LS));
        const int32_t u2 = MTVM_DW_RV32_LD(X_U, p + PS + 2 * (LS));
        const int32_t u3 = MTVM_DW_RV32_LD(X_U, p + PS + 3 * (LS));
        a0 = bias + w0 * v0 + w3 * v1 + w6 * v2 + w1 * u0 + w4 * u1 + w7 * u2;
        a1 = bias + w0 * v1 + w3 * v2 + w6 * v3 + w1 * u1 + w4 * u2 + w7 * u3;
        b0 = bias + w0 * u0 + w3 * u1 + w6 * u2;
        b1 = bias + w0 * u1 + w3 * u2 + w6 * u3;
    }
    pe = p + (n - 1) * PS;   /* the last window */
#if MTVM_DW_RV32_ASM
    if (n >= 4 && MTVM_DW_RV32_ASM_OK(1, LS, PS, OLS, OPS, lo, hi)) {
        const uintptr_t blk[6] = { (uintptr_t)p, (uintptr_t)q, (uintptr_t)a0, (uintptr_t)a1,
                                   (uintptr_t)b0, (uintptr_t)b1 };
        uintptr_t r_[11];
        (void)c0;
        (void)c1;
        MTVM_DW_RV32_ALOOP(MTVM_DW3S1X2_RV32_ALOOP, X_U, lo);
        return;
    }
#endif
    for (;;) {
        MTVM_DW3S1X2_RV32_STEP(X_U, LS, PS, OLS, OPS, a0, a1, b0, b1, c0, c1);
        if (p == pe) break;
        p += PS;
        q += OPS;
        MTVM_DW3S1X2_RV32_STEP(X_U, LS, PS, OLS, OPS, b0, b1, c0, c1, a0, a1);
        if (p == pe) break;
        p += PS;
        q += OPS;
        MTVM_DW3S1X2_RV32_STEP(X_U, LS, PS, OLS, OPS, c0, c1, a0, a1, b0, b1);
        if (p == pe) break;
        p += PS;
        q += OPS;
    }
}

/* Stride 1, one output line (3 values per column). */
#define MTVM_DW3S1X1_RV32_STEP(X_U, LS, PS, OPS, A, B, C) \
    do { \
        const int32_t v0 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS)); \
        const int32_t v1 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + (LS)); \
        const int32_t v2 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + 2 * (LS)); \
        A += w2 * v0 + w5 * v1 + w8 * v2; \
        B += w1 * v0 + w4 * v1 + w7 * v2; \
        C = bias + w0 * v0 + w3 * v1 + w6 * v2; \
        q[0] = (uint8_t)mtvm_dw_rq_rv32(A, mult, rnd, sh, lo, hi); \
    } while (0)

static MTVM_ALWAYS_INLINE void mtvm_dw3s1x1_rv32(const uint8_t* p, uint8_t* q, int32_t n,
                                                 MTVM_DW_RV32_PARAMS, int X_U, int32_t LS,
                                                 int32_t PS, int32_t OPS)
{
    int32_t a, b;
    int32_t c;
    const uint8_t* pe;
    {
        const int32_t v0 = MTVM_DW_RV32_LD(X_U, p), v1 = MTVM_DW_RV32_LD(X_U, p + (LS));
        const int32_t v2 = MTVM_DW_RV32_LD(X_U, p + 2 * (LS));
        const int32_t u0 = MTVM_DW_RV32_LD(X_U, p + PS);
        const int32_t u1 = MTVM_DW_RV32_LD(X_U, p + PS + (LS));
        const int32_t u2 = MTVM_DW_RV32_LD(X_U, p + PS + 2 * (LS));
        a = bias + w0 * v0 + w3 * v1 + w6 * v2 + w1 * u0 + w4 * u1 + w7 * u2;
        b = bias + w0 * u0 + w3 * u1 + w6 * u2;
    }
    pe = p + (n - 1) * PS;   /* the last window */
    for (;;) {
        MTVM_DW3S1X1_RV32_STEP(X_U, LS, PS, OPS, a, b, c);
        if (p == pe) break;
        p += PS;
        q += OPS;
        MTVM_DW3S1X1_RV32_STEP(X_U, LS, PS, OPS, b, c, a);
        if (p == pe) break;
        p += PS;
        q += OPS;
        MTVM_DW3S1X1_RV32_STEP(X_U, LS, PS, OPS, c, a, b);
        if (p == pe) break;
        p += PS;
        q += OPS;
    }
}

/* Stride 2, two output lines (input lines 0-2 and 2-4): per output, column 2k + 1
 * (position 1) and column 2k + 2 (position 2 of output k, position 0 of output k + 1). */
#define MTVM_DW3S2X2_RV32_STEP(X_U, LS, PS, OLS, OPS, A0, A1, B0, B1) \
    do { \
        int32_t v0 = MTVM_DW_RV32_LD(X_U, p + (PS)); \
        int32_t v1 = MTVM_DW_RV32_LD(X_U, p + (PS) + (LS)); \
        int32_t v2 = MTVM_DW_RV32_LD(X_U, p + (PS) + 2 * (LS)); \
        int32_t v3 = MTVM_DW_RV32_LD(X_U, p + (PS) + 3 * (LS)); \
        int32_t v4 = MTVM_DW_RV32_LD(X_U, p + (PS) + 4 * (LS)); \
        A0 += w1 * v0 + w4 * v1 + w7 * v2; \
        A1 += w1 * v2 + w4 * v3 + w7 * v4; \
        v0 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS)); \
        v1 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + (LS)); \
        v2 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + 2 * (LS)); \
        v3 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + 3 * (LS)); \
        v4 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + 4 * (LS)); \
        A0 += w2 * v0 + w5 * v1 + w8 * v2; \
        A1 += w2 * v2 + w5 * v3 + w8 * v4; \
        B0 = bias + w0 * v0 + w3 * v1 + w6 * v2; \
        B1 = bias + w0 * v2 + w3 * v3 + w6 * v4; \
        q[0] = (uint8_t)mtvm_dw_rq_rv32(A0, mult, rnd, sh, lo, hi); \
        q[OLS] = (uint8_t)mtvm_dw_rq_rv32(A1, mult, rnd, sh, lo, hi); \
    } while (0)

static MTVM_ALWAYS_INLINE void mtvm_dw3s2x2_rv32(const uint8_t* p, uint8_t* q, int32_t n,
                                                 MTVM_DW_RV32_PARAMS, int X_U, int32_t LS,
                                                 int32_t PS, int32_t OLS, int32_t OPS)
{
    int32_t a0, a1, b0, b1;
    const uint8_t* pe = p + 2 * (n - 1) * PS;   /* the last window */
    {
        const int32_t v0 = MTVM_DW_RV32_LD(X_U, p), v1 = MTVM_DW_RV32_LD(X_U, p + (LS));
        const int32_t v2 = MTVM_DW_RV32_LD(X_U, p + 2 * (LS));
        const int32_t v3 = MTVM_DW_RV32_LD(X_U, p + 3 * (LS));
        const int32_t v4 = MTVM_DW_RV32_LD(X_U, p + 4 * (LS));
        a0 = bias + w0 * v0 + w3 * v1 + w6 * v2;
        a1 = bias + w0 * v2 + w3 * v3 + w6 * v4;
    }
#if MTVM_DW_RV32_ASM
    if (n >= 4 && MTVM_DW_RV32_ASM_OK(2, LS, PS, OLS, OPS, lo, hi)) {
        const uintptr_t blk[6] = { (uintptr_t)p, (uintptr_t)q, (uintptr_t)a0, (uintptr_t)a1,
                                   0, 0 };
        uintptr_t r_[11];
        MTVM_DW_RV32_ALOOP(MTVM_DW3S2X2_RV32_ALOOP, X_U, lo);
        return;
    }
#endif
    for (;;) {
        MTVM_DW3S2X2_RV32_STEP(X_U, LS, PS, OLS, OPS, a0, a1, b0, b1);
        if (p == pe) break;
        p += 2 * PS;
        q += OPS;
        MTVM_DW3S2X2_RV32_STEP(X_U, LS, PS, OLS, OPS, b0, b1, a0, a1);
        if (p == pe) break;
        p += 2 * PS;
        q += OPS;
    }
}

/* Stride 2, one output line. */
#define MTVM_DW3S2X1_RV32_STEP(X_U, LS, PS, OPS, A, B) \
    do { \
        int32_t v0 = MTVM_DW_RV32_LD(X_U, p + (PS)); \
        int32_t v1 = MTVM_DW_RV32_LD(X_U, p + (PS) + (LS)); \
        int32_t v2 = MTVM_DW_RV32_LD(X_U, p + (PS) + 2 * (LS)); \
        A += w1 * v0 + w4 * v1 + w7 * v2; \
        v0 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS)); \
        v1 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + (LS)); \
        v2 = MTVM_DW_RV32_LD(X_U, p + 2 * (PS) + 2 * (LS)); \
        A += w2 * v0 + w5 * v1 + w8 * v2; \
        B = bias + w0 * v0 + w3 * v1 + w6 * v2; \
        q[0] = (uint8_t)mtvm_dw_rq_rv32(A, mult, rnd, sh, lo, hi); \
    } while (0)

static MTVM_ALWAYS_INLINE void mtvm_dw3s2x1_rv32(const uint8_t* p, uint8_t* q, int32_t n,
                                                 MTVM_DW_RV32_PARAMS, int X_U, int32_t LS,
                                                 int32_t PS, int32_t OPS)
{
    int32_t a, b;
    const uint8_t* pe = p + 2 * (n - 1) * PS;   /* the last window */
    {
        const int32_t v0 = MTVM_DW_RV32_LD(X_U, p), v1 = MTVM_DW_RV32_LD(X_U, p + (LS));
        const int32_t v2 = MTVM_DW_RV32_LD(X_U, p + 2 * (LS));
        a = bias + w0 * v0 + w3 * v1 + w6 * v2;
    }
    for (;;) {
        MTVM_DW3S2X1_RV32_STEP(X_U, LS, PS, OPS, a, b);
        if (p == pe) break;
        p += 2 * PS;
        q += OPS;
        MTVM_DW3S2X1_RV32_STEP(X_U, LS, PS, OPS, b, a);
        if (p == pe) break;
        p += 2 * PS;
        q += OPS;
    }
}

/* One channel of a 3x3 depthwise conv at stride S (1 or 2, both axes), no dilation: x
 * the (zero-point padded) input plane, ROW_W bytes per row; y the [OH][OW] output;
 * k the 9 weights [ky][kx] (zero points taken off). ALONG_Y: strips of two output
 * columns swept down the plane (a plane taller than wide), else of two output rows
 * swept across. All but x, y, the weights and the requantization are constants where it
 * is inlined. */
static MTVM_ALWAYS_INLINE void mtvm_dw3x3_channel_rv32(const uint8_t* x, uint8_t* y,
                                                       const int32_t k[9], int32_t bias,
                                                       int32_t mult, int32_t rnd, int32_t sh,
                                                       int32_t lo, int32_t hi, int X_U,
                                                       int32_t S, int32_t ROW_W, int32_t OH,
                                                       int32_t OW, int ALONG_Y)
{
    /* lines across the strip, positions along it */
    const int32_t ls = ALONG_Y ? 1 : ROW_W, ps = ALONG_Y ? ROW_W : 1;
    const int32_t ols = ALONG_Y ? 1 : OW, ops = ALONG_Y ? OW : 1;
    const int32_t nl = ALONG_Y ? OW : OH, np = ALONG_Y ? OH : OW;
    const int32_t w0 = k[0], w4 = k[4], w8 = k[8];
    const int32_t w1 = ALONG_Y ? k[3] : k[1], w3 = ALONG_Y ? k[1] : k[3];
    const int32_t w2 = ALONG_Y ? k[6] : k[2], w6 = ALONG_Y ? k[2] : k[6];
    const int32_t w5 = ALONG_Y ? k[7] : k[5], w7 = ALONG_Y ? k[5] : k[7];
    int32_t l = 0;
    for (; l + 2 <= nl; l += 2) {
        const uint8_t* p = x + l * S * ls;
        uint8_t* q = y + l * ols;
        if (S == 1) {
            mtvm_dw3s1x2_rv32(p, q, np, w0, w1, w2, w3, w4, w5, w6, w7, w8, bias, mult, rnd,
                              sh, lo, hi, X_U, ls, ps, ols, ops);
        } else {
            mtvm_dw3s2x2_rv32(p, q, np, w0, w1, w2, w3, w4, w5, w6, w7, w8, bias, mult, rnd,
                              sh, lo, hi, X_U, ls, ps, ols, ops);
        }
    }
    if (l < nl) {
        const uint8_t* p = x + l * S * ls;
        uint8_t* q = y + l * ols;
        if (S == 1) {
            mtvm_dw3s1x1_rv32(p, q, np, w0, w1, w2, w3, w4, w5, w6, w7, w8, bias, mult, rnd,
                              sh, lo, hi, X_U, ls, ps, ops);
        } else {
            mtvm_dw3s2x1_rv32(p, q, np, w0, w1, w2, w3, w4, w5, w6, w7, w8, bias, mult, rnd,
                              sh, lo, hi, X_U, ls, ps, ops);
        }
    }
}

/* The channel's h x w plane s copied into rows DW bytes apart at d (the interior of the
 * zero-point-bordered plane; picolibc's memcpy moves a byte per 6 instructions): words
 * where w % 4 == 0 and both are word aligned, halfwords where w is even and both are
 * halfword aligned, else four bytes per loop step. */
static MTVM_ALWAYS_INLINE void mtvm_dw_copy_rv32(uint8_t* d, int32_t DW, const uint8_t* s,
                                                 int32_t h, int32_t w)
{
    int32_t y, i;
    if (w % 4 == 0 && (((uintptr_t)d | (uintptr_t)s) & 3u) == 0) {
        for (y = 0; y < h; ++y, d += DW, s += w) {
            uint32_t* dw_ = (uint32_t*)(void*)d;
            const uint32_t* sw_ = (const uint32_t*)(const void*)s;
            for (i = 0; i < w / 4; ++i) {
                dw_[i] = sw_[i];
            }
        }
        return;
    }
    if (w % 2 == 0 && (((uintptr_t)d | (uintptr_t)s) & 1u) == 0) {
        for (y = 0; y < h; ++y, d += DW, s += w) {
            uint16_t* dh_ = (uint16_t*)(void*)d;
            const uint16_t* sh_ = (const uint16_t*)(const void*)s;
            for (i = 0; i < w / 2; ++i) {
                dh_[i] = sh_[i];
            }
        }
        return;
    }
    for (y = 0; y < h; ++y, d += DW, s += w) {
        for (i = 0; i + 4 <= w; i += 4) {
            const uint8_t b0 = s[i], b1 = s[i + 1], b2 = s[i + 2], b3 = s[i + 3];
            d[i] = b0;
            d[i + 1] = b1;
            d[i + 2] = b2;
            d[i + 3] = b3;
        }
        for (; i < w; ++i) {
            d[i] = s[i];
        }
    }
}

#endif  /* MTVM_DEPTHWISE_RV32_H_ */
