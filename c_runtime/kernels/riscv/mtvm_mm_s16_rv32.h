/* mtvm_mm_s16_rv32.h: QConv's im2col micro-kernel for RV32 cores without SIMD: two output
 * pixels x four output channels (two channel pairs) over the int16 column, eight sums in
 * registers, each column value loaded once per block and used four times, each weight
 * byte loaded once and used twice (mul + add per MAC).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MM_S16_RV32_H_
#define MTVM_MM_S16_RV32_H_

#include <stdint.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_mm_s16.h"

/* The layouts are mtvm_mm_s16.h's (one per channel pair: w0 for channels o, o + 1; w1 for
 * o + 2, o + 3). acc, as mtvm_mm2x4_x86's: p0.o, p0.o1, p1.o, p1.o1, p0.o2, p0.o3, p1.o2,
 * p1.o3; w_u: uint8 weights, else int8. nb and tl are constants at each call. */
/* One tap J of a block in RV32IM assembly (gcc/clang): pixel 0's and 1's column values
 * times the four channels' weight bytes (a channel's weights of taps 0, 1, 2, 3 are its
 * bytes 0, 2, 1, 3: Q), mul + add per MAC. In C, gcc -O2 hoists all the block's loads
 * first and spills the sums; written out, the eight sums stay in registers. */
#define MTVM_MM2X4_RV32_MAC(LB, OFF, BASE, S0, S1) \
    LB "   %[k], " #OFF "(%[" #BASE "])\n\t" \
    "mul  %[t], %[x], %[k]\n\t" \
    "add  %[" #S0 "], %[" #S0 "], %[t]\n\t" \
    "mul  %[t], %[y], %[k]\n\t" \
    "add  %[" #S1 "], %[" #S1 "], %[t]\n\t"
#define MTVM_MM2X4_RV32_TAP(LB, J2, J8, Q, Q4) \
    "lh   %[x], " #J2 "(%[c])\n\t" \
    "lh   %[y], " #J8 "(%[c])\n\t" \
    MTVM_MM2X4_RV32_MAC(LB, Q, w0, s0, s2) \
    MTVM_MM2X4_RV32_MAC(LB, Q4, w0, s1, s3) \
    MTVM_MM2X4_RV32_MAC(LB, Q, w1, s4, s6) \
    MTVM_MM2X4_RV32_MAC(LB, Q4, w1, s5, s7)
#define MTVM_MM2X4_RV32_BLOCK(LB) \
    MTVM_MM2X4_RV32_TAP(LB, 0, 8, 0, 4) \
    MTVM_MM2X4_RV32_TAP(LB, 2, 10, 2, 6) \
    MTVM_MM2X4_RV32_TAP(LB, 4, 12, 1, 5) \
    MTVM_MM2X4_RV32_TAP(LB, 6, 14, 3, 7)
#define MTVM_MM2X4_RV32_NEXT \
    "addi %[c], %[c], 16\n\t" \
    "addi %[w0], %[w0], 8\n\t" \
    "addi %[w1], %[w1], 8\n\t" \
    "bne  %[c], %[ce], 1b"
#define MTVM_MM2X4_RV32_OPERANDS \
    [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [s4] "+r"(s4), \
    [s5] "+r"(s5), [s6] "+r"(s6), [s7] "+r"(s7), [c] "+r"(c), [w0] "+r"(w0), [w1] "+r"(w1), \
    [x] "=&r"(x), [y] "=&r"(y), [k] "=&r"(k), [t] "=&r"(t)

static MTVM_ALWAYS_INLINE void mtvm_mm2x4_rv32(const int16_t* c, const uint8_t* w0,
                                               const uint8_t* w1, int w_u, int32_t nb,
                                               int32_t tl, int32_t* acc)
{
    int32_t s0 = acc[0], s1 = acc[1], s2 = acc[2], s3 = acc[3];
    int32_t s4 = acc[4], s5 = acc[5], s6 = acc[6], s7 = acc[7];
    const int16_t* ce = c + 8 * nb;
    int32_t x, y, k, t;
    /* the nb blocks, the loop in assembly too (as C, gcc copies the eight sums between
     * registers around each block) */
    if (nb > 0 && w_u) {
        __asm__("1:\n\t"
                MTVM_MM2X4_RV32_BLOCK("lbu")
                MTVM_MM2X4_RV32_NEXT
                : MTVM_MM2X4_RV32_OPERANDS
                : [ce] "r"(ce)
                : "memory");
    } else if (nb > 0) {
        __asm__("1:\n\t"
                MTVM_MM2X4_RV32_BLOCK("lb ")
                MTVM_MM2X4_RV32_NEXT
                : MTVM_MM2X4_RV32_OPERANDS
                : [ce] "r"(ce)
                : "memory");
    }
    acc[0] = s0; acc[1] = s1; acc[2] = s2; acc[3] = s3;
    acc[4] = s4; acc[5] = s5; acc[6] = s6; acc[7] = s7;
    if (tl > 0) {   /* the tail taps, per channel pair (portable, as the 2x2 forms) */
        mtvm_mm_s16_tail(c, w0, w_u, 2, tl, acc);
        mtvm_mm_s16_tail(c, w1, w_u, 2, tl, acc + 4);
    }
}

static MTVM_ALWAYS_INLINE void mtvm_mm2x4_rv32_s8(const int16_t* c, const int8_t* w0,
                                                  const int8_t* w1, int32_t nb, int32_t tl,
                                                  int32_t acc[8])
{
    mtvm_mm2x4_rv32(c, (const uint8_t*)w0, (const uint8_t*)w1, 0, nb, tl, acc);
}

static MTVM_ALWAYS_INLINE void mtvm_mm2x4_rv32_u8(const int16_t* c, const uint8_t* w0,
                                                  const uint8_t* w1, int32_t nb, int32_t tl,
                                                  int32_t acc[8])
{
    mtvm_mm2x4_rv32(c, w0, w1, 1, nb, tl, acc);
}

/* Four pixels x four channels: two columns of pixel pairs (CA: pixels q, q + 1; CB: q + 2,
 * q + 3, each in mtvm_mm_s16.h's layout) against two channel pairs (W: channels o, o + 1;
 * W + WOFF: o + 2, o + 3), sixteen sums in registers: per tap four column values and four
 * weight bytes loaded for sixteen MACs. ACC[0..7] as mtvm_mm2x4_rv32's for CA, ACC[8..15]
 * for CB. A macro: WOFF, a decimal literal (<= 2040), is written into the assembly as the
 * load offset of the second pair. gcc allows 30 asm operands, fewer than the sixteen sums
 * in and out need: the sums and temporaries are named registers (clobbered), loaded from
 * and stored to ACC by the assembly itself. Registers: sums t0-t6, a0-a7, s2; column
 * values s3-s6; weight s7; product s8. */
#define MTVM_MM4X4_RV32_MAC(LB, OFF, S0, S1, S2, S3) \
    LB "   s7, " OFF "(%[w])\n\t" \
    "mul  s8, s3, s7\n\t" \
    "add  " #S0 ", " #S0 ", s8\n\t" \
    "mul  s8, s4, s7\n\t" \
    "add  " #S1 ", " #S1 ", s8\n\t" \
    "mul  s8, s5, s7\n\t" \
    "add  " #S2 ", " #S2 ", s8\n\t" \
    "mul  s7, s6, s7\n\t" \
    "add  " #S3 ", " #S3 ", s7\n\t"
/* sums: 0 t0, 1 t1, 2 t2, 3 t3, 4 t4, 5 t5, 6 t6, 7 a0, 8 a1, 9 a2, 10 a3, 11 a4, 12 a5,
 * 13 a6, 14 a7, 15 s2 */
#define MTVM_MM4X4_RV32_TAP(LB, J2, J8, Q, Q4, WOFF) \
    "lh   s3, " #J2 "(%[ca])\n\t" \
    "lh   s4, " #J8 "(%[ca])\n\t" \
    "lh   s5, " #J2 "(%[cb])\n\t" \
    "lh   s6, " #J8 "(%[cb])\n\t" \
    MTVM_MM4X4_RV32_MAC(LB, #Q, t0, t2, a1, a3) \
    MTVM_MM4X4_RV32_MAC(LB, #Q4, t1, t3, a2, a4) \
    MTVM_MM4X4_RV32_MAC(LB, #WOFF "+" #Q, t4, t6, a5, a7) \
    MTVM_MM4X4_RV32_MAC(LB, #WOFF "+" #Q4, t5, a0, a6, s2)
#define MTVM_MM4X4_RV32_ACC(OP) \
    OP "   t0, 0(%[acc])\n\t" OP "   t1, 4(%[acc])\n\t" OP "   t2, 8(%[acc])\n\t" \
    OP "   t3, 12(%[acc])\n\t" OP "   t4, 16(%[acc])\n\t" OP "   t5, 20(%[acc])\n\t" \
    OP "   t6, 24(%[acc])\n\t" OP "   a0, 28(%[acc])\n\t" OP "   a1, 32(%[acc])\n\t" \
    OP "   a2, 36(%[acc])\n\t" OP "   a3, 40(%[acc])\n\t" OP "   a4, 44(%[acc])\n\t" \
    OP "   a5, 48(%[acc])\n\t" OP "   a6, 52(%[acc])\n\t" OP "   a7, 56(%[acc])\n\t" \
    OP "   s2, 60(%[acc])\n\t"
#define MTVM_MM4X4_RV32_LOOP(LB, WOFF) \
    MTVM_MM4X4_RV32_ACC("lw") \
    "1:\n\t" \
    MTVM_MM4X4_RV32_TAP(LB, 0, 8, 0, 4, WOFF) \
    MTVM_MM4X4_RV32_TAP(LB, 2, 10, 2, 6, WOFF) \
    MTVM_MM4X4_RV32_TAP(LB, 4, 12, 1, 5, WOFF) \
    MTVM_MM4X4_RV32_TAP(LB, 6, 14, 3, 7, WOFF) \
    "addi %[ca], %[ca], 16\n\t" \
    "addi %[cb], %[cb], 16\n\t" \
    "addi %[w], %[w], 8\n\t" \
    "bne  %[ca], %[ce], 1b\n\t" \
    MTVM_MM4X4_RV32_ACC("sw")
#define MTVM_MM4X4_RV32(LB, W_U, CA, CB, W, WOFF, NB, TL, ACC) \
    do { \
        const int16_t* ca_ = (CA); \
        const int16_t* cb_ = (CB); \
        const uint8_t* w_ = (const uint8_t*)(W); \
        int32_t* a_ = (ACC); \
        if ((NB) > 0) { \
            __asm__ volatile(MTVM_MM4X4_RV32_LOOP(LB, WOFF) \
                             : [ca] "+r"(ca_), [cb] "+r"(cb_), [w] "+r"(w_) \
                             : [ce] "r"(ca_ + 8 * (NB)), [acc] "r"(a_) \
                             : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "a0", "a1", "a2", \
                               "a3", "a4", "a5", "a6", "a7", "s2", "s3", "s4", "s5", "s6", \
                               "s7", "s8", "memory"); \
        } \
        if ((TL) > 0) { \
            mtvm_mm_s16_tail(ca_, w_, W_U, 2, TL, a_); \
            mtvm_mm_s16_tail(ca_, w_ + (WOFF), W_U, 2, TL, a_ + 4); \
            mtvm_mm_s16_tail(cb_, w_, W_U, 2, TL, a_ + 8); \
            mtvm_mm_s16_tail(cb_, w_ + (WOFF), W_U, 2, TL, a_ + 12); \
        } \
    } while (0)
#define MTVM_MM4X4_RV32_S8(CA, CB, W, WOFF, NB, TL, ACC) \
    MTVM_MM4X4_RV32("lb ", 0, CA, CB, W, WOFF, NB, TL, ACC)
#define MTVM_MM4X4_RV32_U8(CA, CB, W, WOFF, NB, TL, ACC) \
    MTVM_MM4X4_RV32("lbu", 1, CA, CB, W, WOFF, NB, TL, ACC)

#endif  /* MTVM_MM_S16_RV32_H_ */
