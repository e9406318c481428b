/* mtvm_dot_8_rv32.h: The four-row int8/uint8 dot product of QMatMul/QGemm (mtvm_dot_8.h's
 * mtvm_dot4_8) for RV32 cores without SIMD: eight taps per loop step in RV32IM assembly,
 * each activation byte loaded once for the four weight rows, mul + add per MAC.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DOT_8_RV32_H_
#define MTVM_DOT_8_RV32_H_

#include <stdint.h>
#include "mtvm_dot_8.h"

/* Tap J: a[J] times the four rows' byte J (LA, LB: "lb " or "lbu" for a and the rows). */
#define MTVM_DOT4_RV32_TAP(LA, LB, J) \
    LA "   %[x], " #J "(%[a])\n\t" \
    LB "   %[k], " #J "(%[b0])\n\t" \
    "mul  %[k], %[x], %[k]\n\t" \
    "add  %[s0], %[s0], %[k]\n\t" \
    LB "   %[k], " #J "(%[b1])\n\t" \
    "mul  %[k], %[x], %[k]\n\t" \
    "add  %[s1], %[s1], %[k]\n\t" \
    LB "   %[k], " #J "(%[b2])\n\t" \
    "mul  %[k], %[x], %[k]\n\t" \
    "add  %[s2], %[s2], %[k]\n\t" \
    LB "   %[k], " #J "(%[b3])\n\t" \
    "mul  %[k], %[x], %[k]\n\t" \
    "add  %[s3], %[s3], %[k]\n\t"
#define MTVM_DOT4_RV32_LOOP(LA, LB) \
    __asm__("1:\n\t" \
            MTVM_DOT4_RV32_TAP(LA, LB, 0) MTVM_DOT4_RV32_TAP(LA, LB, 1) \
            MTVM_DOT4_RV32_TAP(LA, LB, 2) MTVM_DOT4_RV32_TAP(LA, LB, 3) \
            MTVM_DOT4_RV32_TAP(LA, LB, 4) MTVM_DOT4_RV32_TAP(LA, LB, 5) \
            MTVM_DOT4_RV32_TAP(LA, LB, 6) MTVM_DOT4_RV32_TAP(LA, LB, 7) \
            "addi %[a], %[a], 8\n\t" \
            "addi %[b0], %[b0], 8\n\t" \
            "addi %[b1], %[b1], 8\n\t" \
            "addi %[b2], %[b2], 8\n\t" \
            "addi %[b3], %[b3], 8\n\t" \
            "bne  %[a], %[ae], 1b" \
            : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [a] "+r"(a), \
              [b0] "+r"(b0), [b1] "+r"(b1), [b2] "+r"(b2), [b3] "+r"(b3), [x] "=&r"(x), \
              [k] "=&r"(k) \
            : [ae] "r"(ae) \
            : "memory")

/* acc[r] += a . b[r * stride ...][0..n), r = 0..3; a_u / b_u: uint8, else int8 data. */
static MTVM_ALWAYS_INLINE void mtvm_dot4_rv32_8(const uint8_t* a, int a_u, const uint8_t* b,
                                                int b_u, int32_t stride, int32_t n,
                                                int32_t acc[4])
{
    const uint8_t* b0 = b;
    const uint8_t* b1 = b + stride;
    const uint8_t* b2 = b + 2 * stride;
    const uint8_t* b3 = b + 3 * stride;
    int32_t s0 = acc[0], s1 = acc[1], s2 = acc[2], s3 = acc[3];
    if (n >= 8) {
        const uint8_t* ae = a + (n & ~7);
        int32_t x, k;
        if (a_u && b_u) {
            MTVM_DOT4_RV32_LOOP("lbu", "lbu");
        } else if (a_u) {
            MTVM_DOT4_RV32_LOOP("lbu", "lb ");
        } else if (b_u) {
            MTVM_DOT4_RV32_LOOP("lb ", "lbu");
        } else {
            MTVM_DOT4_RV32_LOOP("lb ", "lb ");
        }
        n &= 7;
    }
    acc[0] = s0; acc[1] = s1; acc[2] = s2; acc[3] = s3;
    if (n > 0) mtvm_dot4_8(a, a_u, b0, b_u, stride, n, acc);   /* the last n % 8 taps */
}

/* The named forms: mtvm_dot4_rv32_<a>_<b>, as mtvm_dot4_<a>_<b>. */
#define MTVM_DOT_8_RV32_PAIR(NA, AU, TA, NB, BU, TB) \
    static inline void mtvm_dot4_rv32_##NA##_##NB(const TA* a, const TB* b, int32_t stride, \
                                                  int32_t n, int32_t acc[4]) \
    { \
        mtvm_dot4_rv32_8((const uint8_t*)a, AU, (const uint8_t*)b, BU, stride, n, acc); \
    }
MTVM_DOT_8_RV32_PAIR(s8, 0, int8_t, s8, 0, int8_t)
MTVM_DOT_8_RV32_PAIR(s8, 0, int8_t, u8, 1, uint8_t)
MTVM_DOT_8_RV32_PAIR(u8, 1, uint8_t, s8, 0, int8_t)
MTVM_DOT_8_RV32_PAIR(u8, 1, uint8_t, u8, 1, uint8_t)
#undef MTVM_DOT_8_RV32_PAIR

#endif  /* MTVM_DOT_8_RV32_H_ */
