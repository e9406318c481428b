/* mtvm_mm_s16_w16.h: QConv's im2col micro-kernel on Arm DSP cores with its weights
 * widened to int16 once per inference (in scratch), so that the block loop loads them
 * with LDRD instead of widening every word with two SXTB16s: 12 instructions per 16 MACs
 * (two pixels x two channels x four taps) instead of 15. The widening costs about one
 * instruction a weight and pays for itself from three pixel pairs on; the schedule takes
 * it where the widened weights are small (mtvm/schedules/generic/qconv_s8.py).
 *
 * Layouts: the column is mtvm_mm_s16.h's. The widened weights follow the packed int8
 * ones (conv_pack_index) a channel pair's row at a time: each four bytes g of a row
 * become the int16 words (g0, g2), (g1, g3) -- SXTB16 and SXTB16 ROR #8 of g, the lanes
 * the int8 kernel computes -- and a row's last two bytes, where its length is 2 mod 4,
 * the words (g0, 0), (g1, 0). A row of rb bytes becomes mtvm_mm_w16_row(rb) int16: per
 * block channel o's (w0, w1) (w2, w3) then o + 1's, then the tail words of o and o + 1
 * alternating, one pair per column tail word -- but for a tail of three taps, whose column
 * is a block's (p0's four slots (t0, t2), (t1, 0), then p1's), the words in a block's
 * order ((t0, t2), (t1, 0) of o, then of o + 1): the kernel takes it as one more block.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MM_S16_W16_H_
#define MTVM_MM_S16_W16_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_dsp.h"
#include "mtvm_depthwise_s8.h"
#include "mtvm_st16x2.h"

/* int16 of a widened row of rb (even) packed bytes: four per started four bytes. */
#define MTVM_MM_W16_ROW(RB) (4 * (((RB) + 3) / 4))

/* dst[0..4) = the four bytes of g (int8, or uint8 where w_u) as the words (g0, g2),
 * (g1, g3). */
static MTVM_ALWAYS_INLINE void mtvm_mm_w16_group(int16_t* dst, uint32_t g, int w_u)
{
#if defined(__ARM_FEATURE_DSP)
    const int32_t lo = mtvm_widen_02(g, w_u), hi = mtvm_widen_13(g, w_u);
    memcpy(dst, &lo, 4);
    memcpy(dst + 2, &hi, 4);
#else
    for (int l = 0; l < 4; ++l) {
        const uint32_t b = (g >> (8 * ((l & 1) * 2 + (l >> 1)))) & 0xffu;
        dst[l] = (int16_t)(w_u ? (int32_t)b : (int32_t)(int8_t)(uint8_t)b);
    }
#endif
}

/* The rows (rows of rb bytes each at w, int8 or (w_u) uint8) widened as above, row r at
 * dst + r * stride (int16; MTVM_MM_W16_ROW(rb) or more). */
static inline void mtvm_mm_s16_widen(int16_t* dst, int32_t stride, const uint8_t* w, int w_u,
                                     int32_t rows, int32_t rb)
{
    for (int32_t r = 0; r < rows; ++r, w += rb, dst += stride - MTVM_MM_W16_ROW(rb)) {
        int32_t i = 0;
        uint32_t g;
        for (; i + 4 <= rb; i += 4, dst += 4) {
            memcpy(&g, w + i, 4);
            mtvm_mm_w16_group(dst, g, w_u);
        }
        if (i < rb) {   /* the last two bytes */
            uint16_t h;
            memcpy(&h, w + i, 2);
            mtvm_mm_w16_group(dst, h, w_u);
            if (rb % 8 == 6) {   /* a three-tap tail: its words in a block's order */
                int16_t t[4];
                memcpy(t, dst - 2, 4);       /* o + 1's (t0, t2) */
                memcpy(dst - 2, dst, 4);     /* <- o's (t1, 0) */
                memcpy(dst, t, 4);
            }
            dst += 4;
        }
    }
}

/* s += the dot product of two int16 lanes each. */
static MTVM_ALWAYS_INLINE int32_t mtvm_mm_w16_dot2(uint32_t x, uint32_t w, int32_t s)
{
#if defined(__ARM_FEATURE_DSP)
    return __smlad((int32_t)x, (int32_t)w, s);
#else
    return s + (int32_t)(int16_t)(uint16_t)x * (int32_t)(int16_t)(uint16_t)w +
           (int32_t)(int16_t)(uint16_t)(x >> 16) * (int32_t)(int16_t)(uint16_t)(w >> 16);
#endif
}

/* acc[0..4) (pixel 0 x channels o, o + 1, then pixel 1's) += one column word of each
 * pixel (p0's at c, p1's at c + ts) times one weight word of each channel (o's at w,
 * o + 1's at w + wo). */
static MTVM_ALWAYS_INLINE void mtvm_mm_w16_words(const int16_t* c, int32_t ts, const int16_t* w,
                                                 int32_t wo, int32_t* acc)
{
    uint32_t x0, x1, wa, wb;
    memcpy(&x0, c, 4);
    memcpy(&x1, c + ts, 4);
    memcpy(&wa, w, 4);
    memcpy(&wb, w + wo, 4);
    acc[0] = mtvm_mm_w16_dot2(x0, wa, acc[0]);
    acc[1] = mtvm_mm_w16_dot2(x0, wb, acc[1]);
    acc[2] = mtvm_mm_w16_dot2(x1, wa, acc[2]);
    acc[3] = mtvm_mm_w16_dot2(x1, wb, acc[3]);
}

#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__)
/* One block: the pixels' column words and both channels' weights by LDRD. */
#define MTVM_MM_W16_SMLAD4(P) \
    "smlad  %[s" P "0], %[x0], %[wa], %[s" P "0]\n\t" \
    "smlad  %[s" P "0], %[x1], %[wah], %[s" P "0]\n\t" \
    "smlad  %[s" P "1], %[x0], %[wb], %[s" P "1]\n\t" \
    "smlad  %[s" P "1], %[x1], %[wbh], %[s" P "1]\n\t"
#define MTVM_MM_W16_BLOCK \
    "ldrd   %[x0], %[x1], [%[c]], #8\n\t" \
    "ldrd   %[wa], %[wah], [%[w]], #8\n\t" \
    "ldrd   %[wb], %[wbh], [%[w]], #8\n\t" \
    MTVM_MM_W16_SMLAD4("0") \
    "ldrd   %[x0], %[x1], [%[c]], #8\n\t" \
    MTVM_MM_W16_SMLAD4("1")
#define MTVM_MM_W16_OPS \
    [s00] "+r"(s00), [s01] "+r"(s01), [s10] "+r"(s10), [s11] "+r"(s11), [c] "+r"(c), \
    [w] "+r"(w), [x0] "=&r"(x0), [x1] "=&r"(x1), [wa] "=&r"(wa), [wah] "=&r"(wah), \
    [wb] "=&r"(wb), [wbh] "=&r"(wbh)
#endif

/* acc[0..4) += the nb blocks and tl tail taps of two pixels (the column c) x two
 * channels (their widened row w). nb and tl are constants at each call. */
static MTVM_ALWAYS_INLINE void mtvm_mm2x2_s16_w16(const int16_t* c, const int16_t* w,
                                                  int32_t nb, int32_t tl, int32_t acc[4])
{
    const int16_t* ct;
    const int16_t* wt;
    const int32_t ts = 2;   /* (mtvm.ops.quantized.conv.tail_stride of 1 or 2 taps) */
    if (tl == 3) {   /* one more block (the widening's layout) */
        ++nb;
        tl = 0;
    }
    ct = c + 8 * nb;
    wt = w + 8 * nb;
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__)
    /* gcc 12 spills in the C below and does not use LDRD with post-increment */
    {
        int32_t s00 = acc[0], s01 = acc[1], s10 = acc[2], s11 = acc[3];
        uint32_t x0, x1, wa, wah, wb, wbh;
        if (nb & 1) __asm__(MTVM_MM_W16_BLOCK : MTVM_MM_W16_OPS : : "memory");
        if (nb & 2) __asm__(MTVM_MM_W16_BLOCK MTVM_MM_W16_BLOCK : MTVM_MM_W16_OPS : : "memory");
        if (nb >= 4) {
            const int16_t* end = c + 8 * (nb & ~3);
            __asm__("1:\n\t" MTVM_MM_W16_BLOCK MTVM_MM_W16_BLOCK MTVM_MM_W16_BLOCK
                    MTVM_MM_W16_BLOCK "cmp %[c], %[end]\n\tbne 1b\n\t"
                    : MTVM_MM_W16_OPS : [end] "r"(end) : "cc", "memory");
        }
        acc[0] = s00;
        acc[1] = s01;
        acc[2] = s10;
        acc[3] = s11;
    }
#else
    for (int32_t b = 0; b < nb; ++b, c += 8, w += 8) {
        /* taps (0, 1), then (2, 3): p1's words 4 after p0's, o + 1's 4 after o's */
        mtvm_mm_w16_words(c, 4, w, 4, acc);
        mtvm_mm_w16_words(c + 2, 4, w + 2, 4, acc);
    }
#endif
    /* the tail of one or two taps: one column word per pixel */
    if (tl > 0) mtvm_mm_w16_words(ct, ts, wt, 2, acc);
}

/* The requantization of the tile in C from parameters made once a call: a pair's row
 * then starts with MTVM_MM_W16_PARAMS int16 -- the words bias, mult, rnd and sh of
 * channel o, o + 1 in turn -- and its widened weights follow. (high word of acc * mult +
 * rnd) >> sh is exact where the schedule proved no tie and no overflow (SMMLA on a DSP
 * core). */
#define MTVM_MM_W16_PARAMS 16

/* Writes channel o's and o + 1's parameters at row. */
static inline void mtvm_mm_w16_params(int16_t* row, int32_t bias0, int32_t bias1, int32_t mult0,
                                      int32_t mult1, int32_t sh0, int32_t sh1, int32_t y_zp)
{
    const int32_t q[8] = { bias0, bias1, mult0, mult1,
                           (int32_t)((1u << (sh0 - 1)) + (uint32_t)y_zp * (1u << sh0)),
                           (int32_t)((1u << (sh1 - 1)) + (uint32_t)y_zp * (1u << sh1)), sh0, sh1 };
    memcpy(row, q, sizeof q);
}

/* Word i of a row's parameters. */
static MTVM_ALWAYS_INLINE int32_t mtvm_mm_w16_param(const int16_t* row, int32_t i)
{
    int32_t v;
    memcpy(&v, row + 2 * i, 4);
    return v;
}

/* acc[0..4) = the tile's sums: the pair's biases (its row's first two words) plus its
 * blocks and tail (row: the pair's parameters, then its widened weights). */
static MTVM_ALWAYS_INLINE void mtvm_mm2x2_w16_sums(const int16_t* c, const int16_t* row,
                                                   int32_t nb, int32_t tl, int32_t acc[4])
{
    acc[0] = acc[2] = mtvm_mm_w16_param(row, 0);
    acc[1] = acc[3] = mtvm_mm_w16_param(row, 1);
    mtvm_mm2x2_s16_w16(c, row + MTVM_MM_W16_PARAMS, nb, tl, acc);
}

/* The tile's sums requantized to int8: y[0], y[1] channel o's outputs of the two pixels
 * (mult, rnd, sh: m0, r0, s0), y[ohw], y[ohw + 1] channel o + 1's (m1, r1, s1). */
static MTVM_ALWAYS_INLINE void mtvm_mm2x2_w16_store(const int32_t acc[4], int8_t* y, int32_t ohw,
                                                    int32_t m0, int32_t r0, int32_t s0,
                                                    int32_t m1, int32_t r1, int32_t s1,
                                                    int32_t lo, int32_t hi)
{
    y[0] = mtvm_requantize_s8(acc[0], m0, r0, s0, lo, hi);
    y[1] = mtvm_requantize_s8(acc[2], m0, r0, s0, lo, hi);
    y[ohw] = mtvm_requantize_s8(acc[1], m1, r1, s1, lo, hi);
    y[ohw + 1] = mtvm_requantize_s8(acc[3], m1, r1, s1, lo, hi);
}

/* The 2x2 tile requantized per channel from its row's parameters. The multipliers,
 * roundings and shifts are loaded after the sums (the assembly's memory clobber keeps
 * them there): before, gcc had no register left for them and spilled each. */
static MTVM_ALWAYS_INLINE void mtvm_mm2x2_w16_q8(const int16_t* c, const int16_t* row,
                                                 int32_t nb, int32_t tl, int8_t* y, int32_t ohw,
                                                 int32_t lo, int32_t hi)
{
    int32_t acc[4];
    mtvm_mm2x2_w16_sums(c, row, nb, tl, acc);
    mtvm_mm2x2_w16_store(acc, y, ohw, mtvm_mm_w16_param(row, 2), mtvm_mm_w16_param(row, 4),
                         mtvm_mm_w16_param(row, 6), mtvm_mm_w16_param(row, 3),
                         mtvm_mm_w16_param(row, 5), mtvm_mm_w16_param(row, 7), lo, hi);
}

/* d[0..n) (n even) times 2^k (no overflow: the schedule's bound). DSP cores: a word of
 * two at a time, SMLABB and SMLATB (onto 0) then PKHBT (2.5 instructions a weight where the
 * halfword loop took 5: the widening of a 32 -> 32 pointwise layer's weights, 2.6 K
 * instructions each inference, is as much as its 39 pixels' work saves). */
static MTVM_ALWAYS_INLINE void mtvm_mm_w16_scale(int16_t* d, int32_t n, int32_t k)
{
#if defined(__ARM_FEATURE_DSP)
    const int32_t m = 1 << k;
    for (int32_t i = 0; i < n; i += 2) {
        int32_t v;
        memcpy(&v, d + i, 4);
        mtvm_st16x2(d + i, __smlabb(v, m, 0), __smlatb(v, m, 0));
    }
#else
    for (int32_t i = 0; i < n; ++i) d[i] = (int16_t)(d[i] * (1 << k));
#endif
}

/* One shift S for the layer (the schedule's common_shift): a pair's row made once a call
 * with its channels' weights and biases times 2^k (k = S - the channel's shift, at most 7:
 * the weights still int16, the sums far from overflow), then the words bias o, bias o + 1,
 * mult o, mult o + 1 (rnd and S are the layer's constants): the tile's requantization is
 * then SMMLA and SSAT with the shift folded in, and no per-channel shift is loaded. w: the
 * pair's rb packed bytes. Out of line: it runs once a channel pair and call, and inlined
 * it was some 250 bytes of flash in every layer that widens. */
static __attribute__((noinline, unused)) void mtvm_mm_w16_pair_scaled(
    int16_t* row, const uint8_t* w, int w_u, int32_t rb, int32_t bias0, int32_t bias1,
    int32_t mult0, int32_t mult1, int32_t k0, int32_t k1)
{
    const int32_t q[4] = { (int32_t)((uint32_t)bias0 << k0), (int32_t)((uint32_t)bias1 << k1),
                           mult0, mult1 };
    const int32_t n = MTVM_MM_W16_ROW(rb);
    /* int16 of the blocks: eight each, four of o's then four of o + 1's (a tail of three
     * taps is one more); after them a tail word of o's then one of o + 1's */
    const int32_t kk = rb / 2, blocks = 8 * (kk / 4 + (kk % 4 == 3));
    int16_t* d = row + MTVM_MM_W16_PARAMS;
    memcpy(row, q, sizeof q);
    mtvm_mm_s16_widen(d, n, w, w_u, 1, rb);
    if (k0 | k1) {   /* (most channels have the layer's shift: nothing to scale) */
        int32_t i = 0;
        for (; i < blocks; i += 8) {
            mtvm_mm_w16_scale(d + i, 4, k0);
            mtvm_mm_w16_scale(d + i + 4, 4, k1);
        }
        if (i < n) {
            mtvm_mm_w16_scale(d + i, 2, k0);
            mtvm_mm_w16_scale(d + i + 2, 2, k1);
        }
    }
}

/* The 2x2 tile requantized with the layer's shift S and rounding rnd (constants at each
 * call); row: mtvm_mm_w16_pair_scaled's (the multipliers loaded after the sums, as above). */
static MTVM_ALWAYS_INLINE void mtvm_mm2x2_w16_q8s(const int16_t* c, const int16_t* row,
                                                  int32_t nb, int32_t tl, int8_t* y, int32_t ohw,
                                                  int32_t rnd, int32_t S, int32_t lo, int32_t hi)
{
    int32_t acc[4];
    mtvm_mm2x2_w16_sums(c, row, nb, tl, acc);
    mtvm_mm2x2_w16_store(acc, y, ohw, mtvm_mm_w16_param(row, 2), rnd, S,
                         mtvm_mm_w16_param(row, 3), rnd, S, lo, hi);
}

#endif  /* MTVM_MM_S16_W16_H_ */
