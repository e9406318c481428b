/* mtvm_pw_s8_dsp.h: The Arm DSP int8 pointwise (1x1, stride 1, unpadded) convolution of
 * QConv over 8 n input channels (n = 1..4: the expansion and projection layers of
 * inverted-residual blocks, where the im2col path spends more on the column and the
 * requantization than on the few MACs of each output): a block of pixels packed once into
 * int16 pairs, eight channels a group (per pixel four words: channels (0, 2), (1, 3),
 * (4, 6), (5, 7)), then per output channel and group its eight weights as four int16-pair
 * words in registers and per pixel two LDRDs and four SMLADs, four pixels a step in
 * Thumb-2. One group (n = 1): the sum starts from the bias and is requantized at once --
 * SMMLA (the rounding and the output zero point in rnd), ASR, SSAT, STRB: 10 instructions
 * per 8 MACs. More groups: the first pass stores the sums (bias + its group) in the
 * packed pixels of the last group, the middle ones add theirs, the last adds its own and
 * requantizes (18 instructions per 16 MACs for n = 2).
 * The requantization (high word of acc * mult + rnd) >> sh is exact where the schedule
 * proved no tie and no overflow (mtvm/schedules/arm_dsp/pointwise_s8.py). Where one shift
 * S serves the whole layer (its common_shift), each channel's weights and bias come times
 * 2^k (k = S - its shift; the same integers after the shift) and sh is the constant S:
 * SSAT then shifts (one instruction fewer an output). Without the DSP extension (host
 * tests, M3) the same integers in portable C.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_PW_S8_DSP_H_
#define MTVM_PW_S8_DSP_H_

#include <stdint.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_dsp.h"
#include "mtvm_depthwise_s8.h"
#include "mtvm_st16x2.h"

/* Packs pixels [0, np) of eight int8 channel planes (x: the first pixel of channel 0, hw:
 * bytes between channels) into dst, four words a pixel. */
static MTVM_ALWAYS_INLINE void mtvm_pw8_pack_s8_dsp(const int8_t* x, int32_t hw, int32_t np,
                                                    uint32_t* dst)
{
    for (int32_t p = 0; p < np; ++p, dst += 4) {
        const int8_t* s = x + p;
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__)
        /* PKHBT each word (gcc builds it with UXTH + ORR) */
        int16_t* t = (int16_t*)(void*)dst;
        mtvm_st16x2(t, s[0], s[2 * hw]);
        mtvm_st16x2(t + 2, s[hw], s[3 * hw]);
        mtvm_st16x2(t + 4, s[4 * hw], s[6 * hw]);
        mtvm_st16x2(t + 6, s[5 * hw], s[7 * hw]);
#else
        dst[0] = (uint16_t)s[0] | ((uint32_t)(uint16_t)s[2 * hw] << 16);
        dst[1] = (uint16_t)s[hw] | ((uint32_t)(uint16_t)s[3 * hw] << 16);
        dst[2] = (uint16_t)s[4 * hw] | ((uint32_t)(uint16_t)s[6 * hw] << 16);
        dst[3] = (uint16_t)s[5 * hw] | ((uint32_t)(uint16_t)s[7 * hw] << 16);
#endif
    }
}

/* Two int8 weights times 2^k as the int16 lanes (a 2^k, b 2^k) (k <= 7 and |w| 2^k < 2^15:
 * the schedule's common_shift; k = 0 without it). */
static MTVM_ALWAYS_INLINE int32_t mtvm_pw_pair_k(int8_t a, int8_t b, int32_t k)
{
    return (int32_t)(((uint32_t)(uint16_t)(int16_t)(a * (1 << k))) |
                     ((uint32_t)(uint16_t)(int16_t)(b * (1 << k)) << 16));
}

/* Lane l (0, 1) of an int16-pair word. */
static MTVM_ALWAYS_INLINE int32_t mtvm_pw_lane(uint32_t v, int l)
{
    return (int32_t)(int16_t)(uint16_t)(l ? v >> 16 : v);
}

/* s + packed pixel xp's eight channels times the weight words w0..w3. */
static MTVM_ALWAYS_INLINE int32_t mtvm_pw8_dot(const uint32_t* xp, int32_t w0, int32_t w1,
                                               int32_t w2, int32_t w3, int32_t s)
{
#if defined(__ARM_FEATURE_DSP)
    s = __smlad((int32_t)xp[0], w0, s);
    s = __smlad((int32_t)xp[1], w1, s);
    s = __smlad((int32_t)xp[2], w2, s);
    return __smlad((int32_t)xp[3], w3, s);
#else
    for (int l = 0; l < 2; ++l) {
        s += mtvm_pw_lane(xp[0], l) * mtvm_pw_lane((uint32_t)w0, l) +
             mtvm_pw_lane(xp[1], l) * mtvm_pw_lane((uint32_t)w1, l) +
             mtvm_pw_lane(xp[2], l) * mtvm_pw_lane((uint32_t)w2, l) +
             mtvm_pw_lane(xp[3], l) * mtvm_pw_lane((uint32_t)w3, l);
    }
    return s;
#endif
}

/* The group's weights w[0..8) times 2^k as the words the packed pixels meet. (Built from
 * word loads with SXTB16, they left gcc without the registers of the assembly.) */
#define MTVM_PW8_WEIGHTS(w, k) \
    const int32_t w0 = mtvm_pw_pair_k((w)[0], (w)[2], k), w1 = mtvm_pw_pair_k((w)[1], (w)[3], k); \
    const int32_t w2 = mtvm_pw_pair_k((w)[4], (w)[6], k), w3 = mtvm_pw_pair_k((w)[5], (w)[7], k)

/* The assembly: Armv7E-M (13 registers: at -O0 and -Os GCC cannot give them all, nor in
 * an Armv8-M build (the M33's, which reserves more); the C loops then). */
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__) && \
    defined(__OPTIMIZE__) && !defined(__OPTIMIZE_SIZE__) && defined(__ARM_ARCH_7EM__)
#define MTVM_PW8_ASM 1
/* one pixel's eight channels into acc, from S (a register: the bias or acc) */
#define MTVM_PW8_DOT_ASM(S) \
    "ldrd   %[x0], %[x1], [%[xp]], #8\n\t" \
    "smlad  %[acc], %[x0], %[w0], " S "\n\t" \
    "smlad  %[acc], %[x1], %[w1], %[acc]\n\t" \
    "ldrd   %[x0], %[x1], [%[xp]], #8\n\t" \
    "smlad  %[acc], %[x0], %[w2], %[acc]\n\t" \
    "smlad  %[acc], %[x1], %[w3], %[acc]\n\t"
/* the requantization and store: sh in a register (ASR, SSAT) or a constant (SSAT's own
 * shift). (yend stays in memory: with it in the register sh left, gcc found no registers
 * for the assembly in some callers.) */
#define MTVM_PW8_STORE_ASM(SHIFT) \
    "smmla  %[acc], %[acc], %[mult], %[rnd]\n\t" SHIFT "strb   %[acc], [%[y]], #1\n\t"
#define MTVM_PW8_SH_REG "asr    %[acc], %[acc], %[sh]\n\tssat   %[acc], #8, %[acc]\n\t"
#define MTVM_PW8_SH_IMM "ssat   %[acc], #8, %[acc], asr %[sh]\n\t"
#define MTVM_PW8_X4(P) P P P P
/* four pixels a step (the loop's PIXEL), the operands but sh common (eight a step saved
 * 1.3 % more instructions on mbv2_v11_int8 for 1.3 KB more code: not worth the flash) */
#define MTVM_PW8_REQ_LOOP(PIXEL, SH, ...) \
    __asm__ volatile("1:\n\t" MTVM_PW8_X4(PIXEL MTVM_PW8_STORE_ASM(SH)) \
                     "ldr    %[x0], %[yend]\n\t" \
                     "cmp    %[y], %[x0]\n\t" \
                     "bne    1b" \
                     : [xp] "+r"(xp), [y] "+r"(y), [acc] "=&r"(acc), [x0] "=&r"(x0), \
                       [x1] "=&r"(x1) \
                     : [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [w3] "r"(w3), \
                       [mult] "r"(mult), [rnd] "r"(rnd), [yend] "m"(yend), __VA_ARGS__ \
                     : "cc", "memory")
/* the same with sh a register or (known at compile time after inlining) an immediate */
#define MTVM_PW8_REQ(PIXEL, ...) \
    do { \
        if (__builtin_constant_p(sh)) \
            MTVM_PW8_REQ_LOOP(PIXEL, MTVM_PW8_SH_IMM, [sh] "i"(sh), __VA_ARGS__); \
        else \
            MTVM_PW8_REQ_LOOP(PIXEL, MTVM_PW8_SH_REG, [sh] "r"(sh), __VA_ARGS__); \
    } while (0)
#endif

/* y[p] = requantized bias 2^k + the eight channels of packed pixel p times w[0..8) 2^k, p <
 * np (one group: the whole sum); lo, hi: the clamp (constants after inlining). */
static MTVM_ALWAYS_INLINE void mtvm_pw8_s8_dsp(const uint32_t* xp, int8_t* y, int32_t np,
                                               const int8_t* w, int32_t k, int32_t bias,
                                               int32_t mult, int32_t rnd, int32_t sh,
                                               int32_t lo, int32_t hi)
{
    MTVM_PW8_WEIGHTS(w, k);
    bias *= 1 << k;
    int32_t p = 0;
#if defined(MTVM_PW8_ASM)
    if (np >= 4 && lo == -128 && hi == 127) {   /* four pixels a step */
        int8_t* yend = y + (np & ~3);
        int32_t acc, x0, x1;
        MTVM_PW8_REQ(MTVM_PW8_DOT_ASM("%[bias]"), [bias] "r"(bias));
        p = np & ~3;
        y -= p;   /* y[p] below: the same addresses */
    }
#endif
    for (; p < np; ++p, xp += 4) {
        y[p] = mtvm_requantize_s8(mtvm_pw8_dot(xp, w0, w1, w2, w3, bias), mult, rnd, sh, lo, hi);
    }
}

/* Several groups: each pixel's sum is kept in the first word of a 16-byte slot of a row
 * after the packed groups (the same stride as the packed pixels: d words from a pixel of
 * the pass's group, a constant at each call, an immediate offset -- no pointer of its own,
 * so that the last pass needs 12 registers; 4 d < 4096). */

/* The first group (first, a constant at each call): sum[p] = bias 2^k + its eight channels
 * of pixel p (weights w[0..8) 2^k); a middle one: sum[p] += them. */
#define MTVM_PW8_SUM_OPS(...) \
    : [xp] "+r"(xp), [acc] "=&r"(acc), [x0] "=&r"(x0), [x1] "=&r"(x1) \
    : [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [w3] "r"(w3), [xend] "r"(xend), \
      [d16] "i"(4 * d - 16), __VA_ARGS__ \
    : "cc", "memory"
#define MTVM_PW8_SUM_LOOP(PIXEL) \
    "1:\n\t" MTVM_PW8_X4(PIXEL "str    %[acc], [%[xp], %[d16]]\n\t") \
    "cmp    %[xp], %[xend]\n\t" \
    "bne    1b"
static MTVM_ALWAYS_INLINE void mtvm_pw8_sum_s8_dsp(const uint32_t* xp, int32_t np,
                                                   const int8_t* w, int32_t k, int32_t d,
                                                   int32_t bias, int first)
{
    MTVM_PW8_WEIGHTS(w, k);
    uint32_t* sum = (uint32_t*)(uintptr_t)(xp + d);
    int32_t p = 0;
    bias *= 1 << k;
#if defined(MTVM_PW8_ASM)
    if (np >= 4) {
        const uint32_t* xend = xp + 4 * (np & ~3);
        int32_t acc, x0, x1;
        if (first) {
            __asm__ volatile(MTVM_PW8_SUM_LOOP(MTVM_PW8_DOT_ASM("%[bias]"))
                             MTVM_PW8_SUM_OPS([bias] "r"(bias)));
        } else {
            __asm__ volatile(MTVM_PW8_SUM_LOOP("ldr    %[acc], [%[xp], %[d]]\n\t"
                                               MTVM_PW8_DOT_ASM("%[acc]"))
                             MTVM_PW8_SUM_OPS([d] "i"(4 * d)));
        }
        p = np & ~3;
        xp -= 4 * p;
    }
#endif
    for (; p < np; ++p) {
        sum[4 * p] = (uint32_t)mtvm_pw8_dot(xp + 4 * p, w0, w1, w2, w3,
                                            first ? bias : (int32_t)sum[4 * p]);
    }
}

/* The last group: y[p] = requantized sum[p] + its eight channels of pixel p (weights
 * w[0..8) 2^k). */
static MTVM_ALWAYS_INLINE void mtvm_pw8_last_s8_dsp(const uint32_t* xp, int8_t* y, int32_t np,
                                                    const int8_t* w, int32_t k, int32_t d,
                                                    int32_t mult, int32_t rnd, int32_t sh,
                                                    int32_t lo, int32_t hi)
{
    MTVM_PW8_WEIGHTS(w, k);
    const uint32_t* sum = xp + d;
    int32_t p = 0;
#if defined(MTVM_PW8_ASM)
    if (np >= 4 && lo == -128 && hi == 127) {
        int8_t* yend = y + (np & ~3);
        int32_t acc, x0, x1;
        MTVM_PW8_REQ("ldr    %[acc], [%[xp], %[d]]\n\t" MTVM_PW8_DOT_ASM("%[acc]"),
                     [d] "i"(4 * d));
        p = np & ~3;
        xp -= 4 * p;
        y -= p;
    }
#endif
    for (; p < np; ++p) {
        y[p] = mtvm_requantize_s8(mtvm_pw8_dot(xp + 4 * p, w0, w1, w2, w3, (int32_t)sum[4 * p]),
                                   mult, rnd, sh, lo, hi);
    }
}

#endif  /* MTVM_PW_S8_DSP_H_ */
