/* mtvm_qadd_s8_dsp.h: QAdd's (and QAffine's) loops for 32-bit cores with a 64-bit multiply-accumulate
 * (the Arm DSP cores: SMLAL), bit-exact with the portable kernel
 * (mtvm_round_shift((a - za) ia + (b - zb) ib, n) + zy, clamped).
 *
 * The zero points and half of 2^n are folded into one 64-bit constant c, so the
 * accumulator is c + a ia + b ib (two SMLALs); then (v + 2^(n-1)) >> n rounds half up,
 * and a tie -- the low n bits of v + 2^(n-1) all zero -- is taken to the even neighbour
 * by clearing bit 0: round half to even, as mtvm_round_shift (a negative n, -n in [1, 31],
 * says that no input pair makes a tie: the test is left out). n in [1, 31]; the result is
 * truncated to int32 before the zero point and the clamp, as the portable kernel does.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_QADD_S8_DSP_H_
#define MTVM_QADD_S8_DSP_H_

#include <stdint.h>
#include "mtvm_int8_bytes.h"

/* acc + x * y, one SMLAL (GCC multiplies by a constant with UMULL, MLA and fix-ups). */
static MTVM_ALWAYS_INLINE int64_t mtvm_smlal(int64_t acc, int32_t x, int32_t y)
{
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__)
    uint32_t lo = (uint32_t)acc;
    int32_t hi = (int32_t)(acc >> 32);
    __asm__("smlal  %0, %1, %2, %3" : "+r"(lo), "+r"(hi) : "r"(x), "r"(y));
    return (int64_t)(((uint64_t)(uint32_t)hi << 32) | lo);
#else
    return acc + (int64_t)x * y;
#endif
}

/* q clamped to [lo, hi]: one SSAT or USAT for the whole 8-bit ranges. */
static MTVM_ALWAYS_INLINE int32_t mtvm_qadd_clamp(int32_t q, int32_t lo, int32_t hi)
{
#if defined(__ARM_FEATURE_DSP)
    if (lo == -128 && hi == 127) {
        return __ssat(q, 8);
    }
    if (lo == 0 && hi == 255) {
        return (int32_t)__usat(q, 8);
    }
#endif
    return q < lo ? lo : (q > hi ? hi : q);
}

/* round_half_even((v - 2^(n-1)) / 2^n) truncated to int32, plus zy, clamped to [lo, hi]; n
 * < 0: -n, where the caller proved that no tie can occur (the rounding is then half up). */
static MTVM_ALWAYS_INLINE int32_t mtvm_qadd_round(int64_t v, int32_t n, int32_t zy, int32_t lo,
                                                  int32_t hi)
{
    const int ties = n > 0;
    n = ties ? n : -n;
    int32_t q = (int32_t)(v >> n);
    if (ties && ((uint32_t)v << (32 - n)) == 0) {   /* a tie: to the even neighbour */
        q &= ~1;
    }
    return mtvm_qadd_clamp(q + zy, lo, hi);
}

/* y[i] = clamp(round_half_even(((a[i] - za) ia + (b[i] - zb) ib) / 2^n) + zy, lo, hi),
 * i < count, given c = -za ia - zb ib + 2^(n-1); a, b, y: int8 (u 0) or uint8 (u 1); y may
 * be a or b (in place). */
static MTVM_ALWAYS_INLINE void mtvm_qadd_8_dsp(const uint8_t* a, const uint8_t* b, uint8_t* y,
                                               int u, int32_t count, int64_t c, int32_t ia,
                                               int32_t ib, int32_t n, int32_t zy, int32_t lo,
                                               int32_t hi)
{
    for (int32_t i = 0; i < count; ++i) {
        const int64_t v = mtvm_smlal(mtvm_smlal(c, mtvm_byte_at(a, i, u), ia),
                                     mtvm_byte_at(b, i, u), ib);
        y[i] = (uint8_t)mtvm_qadd_round(v, n, zy, lo, hi);
    }
}

/* The same with a constant scalar operand, whose term (a - za) ia the caller folds into c:
 * y[i] = clamp(round_half_even((c - 2^(n-1) + b[i] ib) / 2^n) + zy, lo, hi). */
static MTVM_ALWAYS_INLINE void mtvm_qadd1_8_dsp(const uint8_t* b, uint8_t* y, int u,
                                                int32_t count, int64_t c, int32_t ib, int32_t n,
                                                int32_t zy, int32_t lo, int32_t hi)
{
    for (int32_t i = 0; i < count; ++i) {
        y[i] = (uint8_t)mtvm_qadd_round(mtvm_smlal(c, mtvm_byte_at(b, i, u), ib), n, zy, lo, hi);
    }
}

/* The same sums in 32 bits, where the compiler found narrower constants that give every
 * input pair the same output (mtvm.schedules.arm_dsp.elementwise_s8.narrow_qadd):
 * y[i] = clamp((c + a[i] ia + b[i] ib) >> n, lo, hi), no intermediate beyond int32. Two
 * MLAs and one shift an element instead of two SMLALs, the 64-bit shift and the zero
 * point; two elements a step. */
static MTVM_ALWAYS_INLINE void mtvm_qadd32_8_dsp(const uint8_t* a, const uint8_t* b, uint8_t* y,
                                                 int u, int32_t count, int32_t c, int32_t ia,
                                                 int32_t ib, int32_t n, int32_t lo, int32_t hi)
{
    int32_t i = 0;
#if defined(__GNUC__)
    /* c in a register: GCC otherwise rebuilds a large constant with two immediate
     * subtractions per element where one MLA can add it */
    __asm__("" : "+r"(c));
#endif
    for (; i + 2 <= count; i += 2) {
        const int32_t v0 = c + mtvm_byte_at(a, i, u) * ia + mtvm_byte_at(b, i, u) * ib;
        const int32_t v1 = c + mtvm_byte_at(a, i + 1, u) * ia + mtvm_byte_at(b, i + 1, u) * ib;
        y[i] = (uint8_t)mtvm_qadd_clamp(v0 >> n, lo, hi);
        y[i + 1] = (uint8_t)mtvm_qadd_clamp(v1 >> n, lo, hi);
    }
    if (i < count) {
        const int32_t v0 = c + mtvm_byte_at(a, i, u) * ia + mtvm_byte_at(b, i, u) * ib;
        y[i] = (uint8_t)mtvm_qadd_clamp(v0 >> n, lo, hi);
    }
}

/* QAffine's form (a per-channel function of one byte, mtvm.schedules.arm_dsp.elementwise_s8
 * .narrow_affine): y[i] = clamp((c + x[i] ia) >> n, lo, hi) over one channel's run of
 * count elements. y may be x. */
static MTVM_ALWAYS_INLINE void mtvm_qaffine32_8_dsp(const uint8_t* x, uint8_t* y, int u,
                                                    int32_t count, int32_t c, int32_t ia,
                                                    int32_t n, int32_t lo, int32_t hi)
{
    for (int32_t i = 0; i < count; ++i) {
        y[i] = (uint8_t)mtvm_qadd_clamp((c + mtvm_byte_at(x, i, u) * ia) >> n, lo, hi);
    }
}

/* The same where each element is its own channel (the channel axis innermost: a
 * BatchNormalization after a fully connected layer): (c, ia) of element i at ca[2 i]. */
static MTVM_ALWAYS_INLINE void mtvm_qaffine32c_8_dsp(const uint8_t* x, uint8_t* y, int u,
                                                     int32_t count, const int32_t* ca,
                                                     int32_t n, int32_t lo, int32_t hi)
{
    for (int32_t i = 0; i < count; ++i) {
        const int32_t v = ca[2 * i] + mtvm_byte_at(x, i, u) * ca[2 * i + 1];
        y[i] = (uint8_t)mtvm_qadd_clamp(v >> n, lo, hi);
    }
}

/* The named forms: all operands int8 (s8) or uint8 (u8). */
static MTVM_ALWAYS_INLINE void mtvm_qadd_s8_dsp(const int8_t* a, const int8_t* b, int8_t* y,
                                                int32_t count, int64_t c, int32_t ia,
                                                int32_t ib, int32_t n, int32_t zy, int32_t lo,
                                                int32_t hi)
{
    mtvm_qadd_8_dsp((const uint8_t*)a, (const uint8_t*)b, (uint8_t*)y, 0, count, c, ia, ib, n,
                    zy, lo, hi);
}
static MTVM_ALWAYS_INLINE void mtvm_qadd_u8_dsp(const uint8_t* a, const uint8_t* b, uint8_t* y,
                                                int32_t count, int64_t c, int32_t ia,
                                                int32_t ib, int32_t n, int32_t zy, int32_t lo,
                                                int32_t hi)
{
    mtvm_qadd_8_dsp(a, b, y, 1, count, c, ia, ib, n, zy, lo, hi);
}
static MTVM_ALWAYS_INLINE void mtvm_qadd1_s8_dsp(const int8_t* b, int8_t* y, int32_t count,
                                                 int64_t c, int32_t ib, int32_t n, int32_t zy,
                                                 int32_t lo, int32_t hi)
{
    mtvm_qadd1_8_dsp((const uint8_t*)b, (uint8_t*)y, 0, count, c, ib, n, zy, lo, hi);
}
static MTVM_ALWAYS_INLINE void mtvm_qadd1_u8_dsp(const uint8_t* b, uint8_t* y, int32_t count,
                                                 int64_t c, int32_t ib, int32_t n, int32_t zy,
                                                 int32_t lo, int32_t hi)
{
    mtvm_qadd1_8_dsp(b, y, 1, count, c, ib, n, zy, lo, hi);
}

static MTVM_ALWAYS_INLINE void mtvm_qadd32_s8_dsp(const int8_t* a, const int8_t* b, int8_t* y,
                                                  int32_t count, int32_t c, int32_t ia,
                                                  int32_t ib, int32_t n, int32_t lo, int32_t hi)
{
    mtvm_qadd32_8_dsp((const uint8_t*)a, (const uint8_t*)b, (uint8_t*)y, 0, count, c, ia, ib, n,
                      lo, hi);
}
static MTVM_ALWAYS_INLINE void mtvm_qadd32_u8_dsp(const uint8_t* a, const uint8_t* b, uint8_t* y,
                                                  int32_t count, int32_t c, int32_t ia,
                                                  int32_t ib, int32_t n, int32_t lo, int32_t hi)
{
    mtvm_qadd32_8_dsp(a, b, y, 1, count, c, ia, ib, n, lo, hi);
}

static MTVM_ALWAYS_INLINE void mtvm_qaffine32_s8_dsp(const int8_t* x, int8_t* y, int32_t count,
                                                     int32_t c, int32_t ia, int32_t n,
                                                     int32_t lo, int32_t hi)
{
    mtvm_qaffine32_8_dsp((const uint8_t*)x, (uint8_t*)y, 0, count, c, ia, n, lo, hi);
}
static MTVM_ALWAYS_INLINE void mtvm_qaffine32_u8_dsp(const uint8_t* x, uint8_t* y, int32_t count,
                                                     int32_t c, int32_t ia, int32_t n,
                                                     int32_t lo, int32_t hi)
{
    mtvm_qaffine32_8_dsp(x, y, 1, count, c, ia, n, lo, hi);
}
static MTVM_ALWAYS_INLINE void mtvm_qaffine32c_s8_dsp(const int8_t* x, int8_t* y, int32_t count,
                                                      const int32_t* ca, int32_t n, int32_t lo,
                                                      int32_t hi)
{
    mtvm_qaffine32c_8_dsp((const uint8_t*)x, (uint8_t*)y, 0, count, ca, n, lo, hi);
}
static MTVM_ALWAYS_INLINE void mtvm_qaffine32c_u8_dsp(const uint8_t* x, uint8_t* y, int32_t count,
                                                      const int32_t* ca, int32_t n, int32_t lo,
                                                      int32_t hi)
{
    mtvm_qaffine32c_8_dsp(x, y, 1, count, ca, n, lo, hi);
}

#endif  /* MTVM_QADD_S8_DSP_H_ */
