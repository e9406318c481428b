/* mtvm_mm_s16_rv32.h: QConv's im2col micro-kernel for RV32 cores without SIMD: two output
 * pixels x four output channels (two channel pairs) over the int16 column, eight sums in
 * registers, each column value loaded once per block and used four times, each weight
 * byte loaded once and used twice (mul + add per MAC). Also four pixels x four channels
 * (MTVM_MM4X4_RV32; MTVM_MM4X4Q_RV32 with the bias, tail and requantization in the same
 * assembly) and a plane's odd last pixel x four channels (MTVM_MM1X4Q_RV32).
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
                             : [ca] "+&r"(ca_), [cb] "+&r"(cb_), [w] "+&r"(w_) \
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

/* MTVM_MM4X4Q_RV32: MTVM_MM4X4_RV32 with the bias loaded and the requantization done in the
 * same assembly, the sixteen sums never leaving their registers (NB >= 1 blocks, then the
 * TL tail taps).
 * ARGS: four words, the bias of channel o (int32_t*, channels o..o + 3), y (the output of
 * channel o, pixel q; channel planes OHW bytes apart), the multipliers (MSTEP bytes between
 * channels: 4, or 0 for one for all) and the shifts (SHSTEP likewise). MODE ONE: one shift
 * for all channels, out = (mulh(acc, mult) + ADDV) >> SH; MODE PER: out = ((mulh(acc, mult)
 * >> (~shift - 1)) + ADDV) >> 1 (QConv's _Store, the same integers). Then the clamp to
 * [LO, HI], a full 8-bit range (-128..127 or 0..255): one compare in range, else
 * (out >> 31) ^ HI. Registers after the loop: s3 y, s4 mult, s5 add or shift, s6 temp,
 * s7 256, s8 OHW, ca the multipliers, cb the shifts. The pointers are early-clobbered
 * ("+&r"): CB often equals the loop's end CA + 8 NB, and gcc would give both one register. */
#define MTVM_MM4X4Q_RV32_BIAS \
    "lw   s3, 0(%[args])\n\t" \
    "lw   t0, 0(s3)\n\t" "lw   t1, 4(s3)\n\t" "lw   t2, 0(s3)\n\t" "lw   t3, 4(s3)\n\t" \
    "lw   t4, 8(s3)\n\t" "lw   t5, 12(s3)\n\t" "lw   t6, 8(s3)\n\t" "lw   a0, 12(s3)\n\t" \
    "lw   a1, 0(s3)\n\t" "lw   a2, 4(s3)\n\t" "lw   a3, 0(s3)\n\t" "lw   a4, 4(s3)\n\t" \
    "lw   a5, 8(s3)\n\t" "lw   a6, 12(s3)\n\t" "lw   a7, 8(s3)\n\t" "lw   s2, 12(s3)\n\t"
#define MTVM_MM4X4Q_RV32_SH_ONE(S, SH, ADDV) \
    "add  " #S ", " #S ", s5\n\t" \
    "srai " #S ", " #S ", " #SH "\n\t"
#define MTVM_MM4X4Q_RV32_SH_PER(S, SH, ADDV) \
    "sra  " #S ", " #S ", s5\n\t" \
    "addi " #S ", " #S ", " #ADDV "\n\t" \
    "srai " #S ", " #S ", 1\n\t"
#define MTVM_MM4X4Q_RV32_OUT(MODE, S, OFF, SH, ADDV, LO, HI) \
    "mulh " #S ", " #S ", s4\n\t" \
    MTVM_MM4X4Q_RV32_SH_##MODE(S, SH, ADDV) \
    "addi s6, " #S ", -(" #LO ")\n\t" \
    "bltu s6, s7, 2f\n\t" \
    "srai " #S ", " #S ", 31\n\t" \
    "xori " #S ", " #S ", " #HI "\n" \
    "2:\n\t" \
    "sb   " #S ", " #OFF "(s3)\n\t"
#define MTVM_MM4X4Q_RV32_CH_ONE(C, MSTEP, SHSTEP) \
    "lw   s4, " #C "*" #MSTEP "(%[ca])\n\t"
#define MTVM_MM4X4Q_RV32_CH_PER(C, MSTEP, SHSTEP) \
    "lw   s4, " #C "*" #MSTEP "(%[ca])\n\t" \
    "lw   s5, " #C "*" #SHSTEP "(%[cb])\n\t" \
    "not  s5, s5\n\t" \
    "addi s5, s5, -1\n\t"
/* channel C's four outputs (pixels q..q + 3), sums S0..S3 */
#define MTVM_MM4X4Q_RV32_CHAN(MODE, C, S0, S1, S2, S3, MSTEP, SHSTEP, SH, ADDV, LO, HI) \
    MTVM_MM4X4Q_RV32_CH_##MODE(C, MSTEP, SHSTEP) \
    MTVM_MM4X4Q_RV32_OUT(MODE, S0, 0, SH, ADDV, LO, HI) \
    MTVM_MM4X4Q_RV32_OUT(MODE, S1, 1, SH, ADDV, LO, HI) \
    MTVM_MM4X4Q_RV32_OUT(MODE, S2, 2, SH, ADDV, LO, HI) \
    MTVM_MM4X4Q_RV32_OUT(MODE, S3, 3, SH, ADDV, LO, HI)
/* the TL = kk % 4 tail taps after the blocks (mtvm_mm_s16.h's tail slots: pixel 1's TS
 * int16 after pixel 0's, a channel pair's bytes interleaved) */
#define MTVM_MM4X4Q_RV32_TAIL_0(LB, WOFF)
#define MTVM_MM4X4Q_RV32_TAIL_1(LB, WOFF) MTVM_MM4X4_RV32_TAP(LB, 0, 4, 0, 1, WOFF)
#define MTVM_MM4X4Q_RV32_TAIL_2(LB, WOFF) \
    MTVM_MM4X4_RV32_TAP(LB, 0, 4, 0, 1, WOFF) MTVM_MM4X4_RV32_TAP(LB, 2, 6, 2, 3, WOFF)
#define MTVM_MM4X4Q_RV32_TAIL_3(LB, WOFF) \
    MTVM_MM4X4_RV32_TAP(LB, 0, 8, 0, 1, WOFF) MTVM_MM4X4_RV32_TAP(LB, 4, 12, 4, 5, WOFF) \
    MTVM_MM4X4_RV32_TAP(LB, 2, 10, 2, 3, WOFF)
#define MTVM_MM4X4Q_RV32_ADDV_ONE(ADDV) "li   s5, " #ADDV "\n\t"
#define MTVM_MM4X4Q_RV32_ADDV_PER(ADDV) ""
#define MTVM_MM4X4Q_RV32_EPILOGUE(MODE, OHW, MSTEP, SHSTEP, SH, ADDV, LO, HI) \
    "lw   s3, 4(%[args])\n\t" \
    "lw   %[ca], 8(%[args])\n\t" \
    "lw   %[cb], 12(%[args])\n\t" \
    "li   s7, 256\n\t" \
    "li   s8, " #OHW "\n\t" \
    MTVM_MM4X4Q_RV32_ADDV_##MODE(ADDV) \
    MTVM_MM4X4Q_RV32_CHAN(MODE, 0, t0, t2, a1, a3, MSTEP, SHSTEP, SH, ADDV, LO, HI) \
    "add  s3, s3, s8\n\t" \
    MTVM_MM4X4Q_RV32_CHAN(MODE, 1, t1, t3, a2, a4, MSTEP, SHSTEP, SH, ADDV, LO, HI) \
    "add  s3, s3, s8\n\t" \
    MTVM_MM4X4Q_RV32_CHAN(MODE, 2, t4, t6, a5, a7, MSTEP, SHSTEP, SH, ADDV, LO, HI) \
    "add  s3, s3, s8\n\t" \
    MTVM_MM4X4Q_RV32_CHAN(MODE, 3, t5, a0, a6, s2, MSTEP, SHSTEP, SH, ADDV, LO, HI)
/* a block of four taps at column byte offset C and weight byte offset W8 */
#define MTVM_MM4X4Q_RV32_BLK(LB, WOFF, C, W8) \
    MTVM_MM4X4_RV32_TAP(LB, C+0, C+8, W8+0, W8+4, WOFF) \
    MTVM_MM4X4_RV32_TAP(LB, C+2, C+10, W8+2, W8+6, WOFF) \
    MTVM_MM4X4_RV32_TAP(LB, C+4, C+12, W8+1, W8+5, WOFF) \
    MTVM_MM4X4_RV32_TAP(LB, C+6, C+14, W8+3, W8+7, WOFF)
/* one block, the pointers past it */
#define MTVM_MM4X4Q_RV32_ONE_BLK(LB, WOFF) \
    MTVM_MM4X4Q_RV32_BLK(LB, WOFF, 0, 0) \
    "addi %[ca], %[ca], 16\n\t" "addi %[cb], %[cb], 16\n\t" "addi %[w], %[w], 8\n\t"
/* two blocks per loop step up to ce */
#define MTVM_MM4X4Q_RV32_LOOP2(LB, WOFF) \
    "1:\n\t" \
    MTVM_MM4X4Q_RV32_BLK(LB, WOFF, 0, 0) \
    MTVM_MM4X4Q_RV32_BLK(LB, WOFF, 16, 8) \
    "addi %[ca], %[ca], 32\n\t" "addi %[cb], %[cb], 32\n\t" "addi %[w], %[w], 16\n\t" \
    "bne  %[ca], %[ce], 1b\n\t"
#define MTVM_MM4X4Q_RV32_ASM(BLOCKS, LB, MODE, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, \
                             ADDV, LO, HI) \
    __asm__ volatile(MTVM_MM4X4Q_RV32_BIAS \
                     BLOCKS \
                     MTVM_MM4X4Q_RV32_TAIL_##TL(LB, WOFF) \
                     MTVM_MM4X4Q_RV32_EPILOGUE(MODE, OHW, MSTEP, SHSTEP, SH, ADDV, LO, HI) \
                     : [ca] "+&r"(ca_), [cb] "+&r"(cb_), [w] "+&r"(w_) \
                     : [ce] "r"(ca_ + 8 * (NB)), [args] "r"(ARGS) \
                     : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "a0", "a1", "a2", \
                       "a3", "a4", "a5", "a6", "a7", "s2", "s3", "s4", "s5", "s6", \
                       "s7", "s8", "memory")
/* the blocks two per loop step (an odd one first, alone) */
#define MTVM_MM4X4Q_RV32(LB, MODE, CA, CB, W, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, \
                         ADDV, LO, HI) \
    do { \
        const int16_t* ca_ = (CA); \
        const int16_t* cb_ = (CB); \
        const uint8_t* w_ = (const uint8_t*)(W); \
        if ((NB) == 1) { \
            MTVM_MM4X4Q_RV32_ASM(MTVM_MM4X4Q_RV32_ONE_BLK(LB, WOFF), LB, MODE, WOFF, NB, TL, \
                                 ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, LO, HI); \
        } else if ((NB) % 2) { \
            MTVM_MM4X4Q_RV32_ASM(MTVM_MM4X4Q_RV32_ONE_BLK(LB, WOFF) \
                                 MTVM_MM4X4Q_RV32_LOOP2(LB, WOFF), LB, MODE, WOFF, NB, TL, \
                                 ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, LO, HI); \
        } else { \
            MTVM_MM4X4Q_RV32_ASM(MTVM_MM4X4Q_RV32_LOOP2(LB, WOFF), LB, MODE, WOFF, NB, TL, \
                                 ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, LO, HI); \
        } \
    } while (0)
#define MTVM_MM4X4Q_RV32_S8(MODE, CA, CB, W, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, \
                            LO, HI) \
    MTVM_MM4X4Q_RV32("lb ", MODE, CA, CB, W, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, \
                     LO, HI)
#define MTVM_MM4X4Q_RV32_U8(MODE, CA, CB, W, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, \
                            LO, HI) \
    MTVM_MM4X4Q_RV32("lbu", MODE, CA, CB, W, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, \
                     LO, HI)

/* MTVM_MM1X4Q_RV32: the odd last output pixel of a plane (pixel 0 of a pair column) x four
 * channels (two channel pairs, WOFF apart), with MTVM_MM4X4Q_RV32's bias, requantization
 * and stores (ARGS, OHW, MSTEP, SHSTEP, MODE, SH, ADDV, LO, HI as there): per tap one
 * column value and four weight bytes for four MACs. Sums t0-t3, column value t4, weight
 * t5, product t6; the epilogue's registers as MTVM_MM4X4Q_RV32's (ca: the multipliers,
 * cb: the shifts, after the loop). */
#define MTVM_MM1X4Q_RV32_TAP(LB, J2, Q, Q4, WOFF) \
    "lh   t4, " #J2 "(%[ca])\n\t" \
    LB "   t5, " #Q "(%[cb])\n\t" "mul  t6, t4, t5\n\t" "add  t0, t0, t6\n\t" \
    LB "   t5, " #Q4 "(%[cb])\n\t" "mul  t6, t4, t5\n\t" "add  t1, t1, t6\n\t" \
    LB "   t5, " #WOFF "+" #Q "(%[cb])\n\t" "mul  t6, t4, t5\n\t" "add  t2, t2, t6\n\t" \
    LB "   t5, " #WOFF "+" #Q4 "(%[cb])\n\t" "mul  t6, t4, t5\n\t" "add  t3, t3, t6\n\t"
#define MTVM_MM1X4Q_RV32_TAIL_0(LB, WOFF)
#define MTVM_MM1X4Q_RV32_TAIL_1(LB, WOFF) MTVM_MM1X4Q_RV32_TAP(LB, 0, 0, 1, WOFF)
#define MTVM_MM1X4Q_RV32_TAIL_2(LB, WOFF) \
    MTVM_MM1X4Q_RV32_TAP(LB, 0, 0, 1, WOFF) MTVM_MM1X4Q_RV32_TAP(LB, 2, 2, 3, WOFF)
#define MTVM_MM1X4Q_RV32_TAIL_3(LB, WOFF) \
    MTVM_MM1X4Q_RV32_TAP(LB, 0, 0, 1, WOFF) MTVM_MM1X4Q_RV32_TAP(LB, 4, 4, 5, WOFF) \
    MTVM_MM1X4Q_RV32_TAP(LB, 2, 2, 3, WOFF)
#define MTVM_MM1X4Q_RV32(LB, MODE, C, W, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, LO, \
                         HI) \
    do { \
        const int16_t* ca_ = (C); \
        const uint8_t* cb_ = (const uint8_t*)(W); \
        __asm__ volatile("lw   s3, 0(%[args])\n\t" \
                         "lw   t0, 0(s3)\n\t" "lw   t1, 4(s3)\n\t" \
                         "lw   t2, 8(s3)\n\t" "lw   t3, 12(s3)\n" \
                         "1:\n\t" \
                         MTVM_MM1X4Q_RV32_TAP(LB, 0, 0, 4, WOFF) \
                         MTVM_MM1X4Q_RV32_TAP(LB, 2, 2, 6, WOFF) \
                         MTVM_MM1X4Q_RV32_TAP(LB, 4, 1, 5, WOFF) \
                         MTVM_MM1X4Q_RV32_TAP(LB, 6, 3, 7, WOFF) \
                         "addi %[ca], %[ca], 16\n\t" \
                         "addi %[cb], %[cb], 8\n\t" \
                         "bne  %[ca], %[ce], 1b\n\t" \
                         MTVM_MM1X4Q_RV32_TAIL_##TL(LB, WOFF) \
                         "lw   s3, 4(%[args])\n\t" \
                         "lw   %[ca], 8(%[args])\n\t" \
                         "lw   %[cb], 12(%[args])\n\t" \
                         "li   s7, 256\n\t" \
                         "li   s8, " #OHW "\n\t" \
                         MTVM_MM4X4Q_RV32_ADDV_##MODE(ADDV) \
                         MTVM_MM4X4Q_RV32_CH_##MODE(0, MSTEP, SHSTEP) \
                         MTVM_MM4X4Q_RV32_OUT(MODE, t0, 0, SH, ADDV, LO, HI) \
                         "add  s3, s3, s8\n\t" \
                         MTVM_MM4X4Q_RV32_CH_##MODE(1, MSTEP, SHSTEP) \
                         MTVM_MM4X4Q_RV32_OUT(MODE, t1, 0, SH, ADDV, LO, HI) \
                         "add  s3, s3, s8\n\t" \
                         MTVM_MM4X4Q_RV32_CH_##MODE(2, MSTEP, SHSTEP) \
                         MTVM_MM4X4Q_RV32_OUT(MODE, t2, 0, SH, ADDV, LO, HI) \
                         "add  s3, s3, s8\n\t" \
                         MTVM_MM4X4Q_RV32_CH_##MODE(3, MSTEP, SHSTEP) \
                         MTVM_MM4X4Q_RV32_OUT(MODE, t3, 0, SH, ADDV, LO, HI) \
                         : [ca] "+&r"(ca_), [cb] "+&r"(cb_) \
                         : [ce] "r"(ca_ + 8 * (NB)), [args] "r"(ARGS) \
                         : "t0", "t1", "t2", "t3", "t4", "t5", "t6", "s3", "s4", "s5", "s6", \
                           "s7", "s8", "memory"); \
    } while (0)
#define MTVM_MM1X4Q_RV32_S8(MODE, C, W, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, LO, \
                            HI) \
    MTVM_MM1X4Q_RV32("lb ", MODE, C, W, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, LO, \
                     HI)
#define MTVM_MM1X4Q_RV32_U8(MODE, C, W, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, LO, \
                            HI) \
    MTVM_MM1X4Q_RV32("lbu", MODE, C, W, WOFF, NB, TL, ARGS, OHW, MSTEP, SHSTEP, SH, ADDV, LO, \
                     HI)

#endif  /* MTVM_MM_S16_RV32_H_ */
