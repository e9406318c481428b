/* mtvm_pw_s8_dsp.h: The Arm DSP int8 pointwise (1x1, stride 1, unpadded) convolution of
 * QConv over eight input channels (the expansion layers of inverted-residual blocks,
 * where the im2col path spends more on the column and the requantization than on its
 * eight MACs per output): a block of pixels packed once into int16 pairs (per pixel four
 * words: channels (0, 2), (1, 3), (4, 6), (5, 7)), then per output channel its eight
 * weights as four int16-pair words in registers and per pixel two LDRDs, four SMLADs (the
 * first starting from the bias), SMMLA (the rounding and the output zero point in rnd),
 * ASR, SSAT and STRB, two pixels a step in Thumb-2 -- 23 instructions per 16 MACs,
 * requantization included.
 * The requantization (high word of acc * mult + rnd) >> sh is exact where the schedule
 * proved no tie and no overflow (mtvm/schedules/arm_dsp/pointwise_s8.py). Without the DSP
 * extension (host tests, M3) the same integers in portable C.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_PW_S8_DSP_H_
#define MTVM_PW_S8_DSP_H_

#include <stdint.h>
#include "mtvm_int8_bytes.h"

/* Packs pixels [0, np) of eight int8 channel planes (x: the first pixel of channel 0, hw:
 * bytes between channels) into dst, four words a pixel. */
static MTVM_ALWAYS_INLINE void mtvm_pw8_pack_s8_dsp(const int8_t* x, int32_t hw, int32_t np,
                                                    uint32_t* dst)
{
    for (int32_t p = 0; p < np; ++p, dst += 4) {
        const int8_t* s = x + p;
        dst[0] = (uint16_t)s[0] | ((uint32_t)(uint16_t)s[2 * hw] << 16);
        dst[1] = (uint16_t)s[hw] | ((uint32_t)(uint16_t)s[3 * hw] << 16);
        dst[2] = (uint16_t)s[4 * hw] | ((uint32_t)(uint16_t)s[6 * hw] << 16);
        dst[3] = (uint16_t)s[5 * hw] | ((uint32_t)(uint16_t)s[7 * hw] << 16);
    }
}

/* Two int8 weights as the int16 lanes (a, b). */
static MTVM_ALWAYS_INLINE int32_t mtvm_pw_pair(int8_t a, int8_t b)
{
    return (int32_t)(((uint32_t)(uint16_t)(int16_t)a) | ((uint32_t)(uint16_t)(int16_t)b << 16));
}

/* Lane l (0, 1) of an int16-pair word. */
static MTVM_ALWAYS_INLINE int32_t mtvm_pw_lane(uint32_t v, int l)
{
    return (int32_t)(int16_t)(uint16_t)(l ? v >> 16 : v);
}

/* y[p] = clamp(sat8((hi(acc * mult) + rnd) >> sh)), p < np, acc = bias + sum of the eight
 * channels of packed pixel p times w[0..8); lo, hi: the clamp (constants after inlining). */
static MTVM_ALWAYS_INLINE void mtvm_pw8_s8_dsp(const uint32_t* xp, int8_t* y, int32_t np,
                                               const int8_t* w, int32_t bias, int32_t mult,
                                               int32_t rnd, int32_t sh, int32_t lo, int32_t hi)
{
    const int32_t w0 = mtvm_pw_pair(w[0], w[2]), w1 = mtvm_pw_pair(w[1], w[3]);
    const int32_t w2 = mtvm_pw_pair(w[4], w[6]), w3 = mtvm_pw_pair(w[5], w[7]);
    int32_t p = 0;
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__) && \
    defined(__OPTIMIZE__) && !defined(__OPTIMIZE_SIZE__) && defined(__ARM_ARCH_7EM__)
    /* (13 registers: at -O0 and -Os GCC cannot give them all, nor in an Armv8-M build
     * (the M33's, which reserves more); the C loop below then) */
    if (np >= 2 && lo == -128 && hi == 127) {   /* two pixels a step in Thumb-2 */
        int8_t* yend = y + (np & ~1);
        int32_t acc, x0, x1;
#define MTVM_PW8_PIXEL_ASM \
    "ldrd   %[x0], %[x1], [%[xp]], #8\n\t" \
    "smlad  %[acc], %[x0], %[w0], %[bias]\n\t" \
    "smlad  %[acc], %[x1], %[w1], %[acc]\n\t" \
    "ldrd   %[x0], %[x1], [%[xp]], #8\n\t" \
    "smlad  %[acc], %[x0], %[w2], %[acc]\n\t" \
    "smlad  %[acc], %[x1], %[w3], %[acc]\n\t" \
    "smmla  %[acc], %[acc], %[mult], %[rnd]\n\t" \
    "asr    %[acc], %[acc], %[sh]\n\t" \
    "ssat   %[acc], #8, %[acc]\n\t" \
    "strb   %[acc], [%[y]], #1\n\t"
        __asm__ volatile("1:\n\t" MTVM_PW8_PIXEL_ASM MTVM_PW8_PIXEL_ASM
                "ldr    %[x0], %[yend]\n\t"
                "cmp    %[y], %[x0]\n\t"
                "bne    1b"
                : [xp] "+r"(xp), [y] "+r"(y), [acc] "=&r"(acc), [x0] "=&r"(x0),
                  [x1] "=&r"(x1)
                : [w0] "r"(w0), [w1] "r"(w1), [w2] "r"(w2), [w3] "r"(w3), [bias] "r"(bias),
                  [mult] "r"(mult), [rnd] "r"(rnd), [sh] "r"(sh), [yend] "m"(yend)
                : "cc", "memory");
#undef MTVM_PW8_PIXEL_ASM
        p = np & ~1;
        y -= p;   /* y[p] below: the same addresses */
    }
#endif
    for (; p < np; ++p, xp += 4) {
        int32_t acc;
#if defined(__ARM_FEATURE_DSP)
        acc = __smlad((int32_t)xp[0], w0, bias);
        acc = __smlad((int32_t)xp[1], w1, acc);
        acc = __smlad((int32_t)xp[2], w2, acc);
        acc = __smlad((int32_t)xp[3], w3, acc);
#if defined(__GNUC__)
        __asm__("smmla %0, %1, %2, %3" : "=r"(acc) : "r"(acc), "r"(mult), "r"(rnd));
        acc >>= sh;
#else
        acc = (int32_t)(((int64_t)acc * mult) >> 32);
        acc = (acc + rnd) >> sh;
#endif
        acc = __ssat(acc, 8);
#else
        acc = bias;
        for (int l = 0; l < 2; ++l) {
            acc += mtvm_pw_lane(xp[0], l) * mtvm_pw_lane((uint32_t)w0, l) +
                   mtvm_pw_lane(xp[1], l) * mtvm_pw_lane((uint32_t)w1, l) +
                   mtvm_pw_lane(xp[2], l) * mtvm_pw_lane((uint32_t)w2, l) +
                   mtvm_pw_lane(xp[3], l) * mtvm_pw_lane((uint32_t)w3, l);
        }
        acc = (int32_t)(((int64_t)acc * mult) >> 32);
        acc = (acc + rnd) >> sh;
        acc = acc < -128 ? -128 : (acc > 127 ? 127 : acc);
#endif
        if (lo > -128 && acc < lo) acc = lo;   /* (a narrower clamp: ReLU-like) */
        if (hi < 127 && acc > hi) acc = hi;
        y[p] = (int8_t)acc;
    }
}

#endif  /* MTVM_PW_S8_DSP_H_ */
