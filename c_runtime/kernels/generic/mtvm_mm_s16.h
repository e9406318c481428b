/* mtvm_mm_s16.h: The micro-kernels of QConv's im2col path: one or two output pixels (an
 * int16 column) x two output channels (packed int8 or uint8 weights), and on x86 four.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MM_S16_H_
#define MTVM_MM_S16_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_im2col_slots.h"
#include "mtvm_int8_x86.h"
#include "mtvm_mm_s16_thumb2.h"
#include "mtvm_mm_s16_x86.h"

/* Layouts (mtvm.ops.quantized.conv: emit_im2col, conv_pack_index, tail_slot).
 * The column c: per block of four taps, p0's four int16 then p1's (8-byte aligned: the
 * arena's scratch); then the tail words of p0, then p1's (tail_stride(tl) = 2 or 4
 * slots each). The weights w: per block, channel o's four bytes stored w0 w2 w1 w3
 * (SXTB16 and SXTB16 ROR #8 give the int16 lanes (w0, w1), (w2, w3) that meet the
 * column's words) then channel o + 1's; then o's and o + 1's tail bytes interleaved.
 * acc[0] += p0.w_o, acc[1] += p0.w_o1, acc[2] += p1.w_o, acc[3] += p1.w_o1 (pixels 1:
 * acc[0..1] only; the pixel-1 slots of the column blocks are not read). */

/* acc[0..2 * pixels) = the sums (s10, s11: pixel 1's, when pixels is 2). */
static MTVM_ALWAYS_INLINE void mtvm_mm_s16_store(int32_t* acc, int32_t pixels, int32_t s00,
                                                 int32_t s01, int32_t s10, int32_t s11)
{
    acc[0] = s00;
    acc[1] = s01;
    if (pixels == 2) {
        acc[2] = s10;
        acc[3] = s11;
    }
}

/* Byte i of p, int8 or (is_u) uint8 data, loaded through its own type: as the generated
 * C did (a converted uint8 load changes gcc's Cortex-M3 scheduling of the loops). */
static MTVM_ALWAYS_INLINE int32_t mtvm_mm_s16_byte(const uint8_t* p, size_t i, int is_u)
{
    return is_u ? (int32_t)p[i] : (int32_t)((const int8_t*)(const void*)p)[i];
}

#if defined(__ARM_FEATURE_DSP)
/* The nb blocks in C, with SMLAD: where the assembly does not apply (weights not
 * word-aligned, compilers other than gcc/clang). */
static MTVM_ALWAYS_INLINE void mtvm_mm_s16_dsp_c(const int16_t* c, const uint8_t* w, int w_u,
                                                 int32_t pixels, int32_t nb, int32_t* acc)
{
    int32_t s00 = acc[0], s01 = acc[1];
    int32_t s10 = pixels == 2 ? acc[2] : 0, s11 = pixels == 2 ? acc[3] : 0;
    for (; nb > 0; --nb, c += 8, w += 8) {
        uint32_t x0, x1, x2 = 0, x3 = 0, wa, wb;
        memcpy(&x0, c, 4);          /* p0: taps (0, 1) */
        memcpy(&x1, c + 2, 4);      /* p0: taps (2, 3) */
        if (pixels == 2) {
            memcpy(&x2, c + 4, 4);  /* p1 */
            memcpy(&x3, c + 6, 4);
        }
        memcpy(&wa, w, 4);
        s00 = __smlad((int32_t)x0, mtvm_widen_02(wa, w_u), s00);
        s00 = __smlad((int32_t)x1, mtvm_widen_13(wa, w_u), s00);
        if (pixels == 2) {
            s10 = __smlad((int32_t)x2, mtvm_widen_02(wa, w_u), s10);
            s10 = __smlad((int32_t)x3, mtvm_widen_13(wa, w_u), s10);
        }
        memcpy(&wb, w + 4, 4);
        s01 = __smlad((int32_t)x0, mtvm_widen_02(wb, w_u), s01);
        s01 = __smlad((int32_t)x1, mtvm_widen_13(wb, w_u), s01);
        if (pixels == 2) {
            s11 = __smlad((int32_t)x2, mtvm_widen_02(wb, w_u), s11);
            s11 = __smlad((int32_t)x3, mtvm_widen_13(wb, w_u), s11);
        }
    }
    mtvm_mm_s16_store(acc, pixels, s00, s01, s10, s11);
}

/* A form's copy of them, not inlined (unused ones are not emitted). */
#if defined(__GNUC__)
#define MTVM_MM_S16_UNUSED __attribute__((unused))
#else
#define MTVM_MM_S16_UNUSED
#endif
#define MTVM_MM_S16_C_COPY(NAME, W_U, PIXELS) \
    static MTVM_MM_S16_UNUSED void NAME##_c(const int16_t* c, const uint8_t* w, int32_t nb, \
                                            int32_t* acc) \
    { \
        mtvm_mm_s16_dsp_c(c, w, W_U, PIXELS, nb, acc); \
    }
#else
#define MTVM_MM_S16_C_COPY(NAME, W_U, PIXELS)   /* (no copy: the blocks are always inline) */

/* The nb blocks in portable C. */
static MTVM_ALWAYS_INLINE void mtvm_mm_s16_portable(const int16_t* c, const uint8_t* w,
                                                    int w_u, int32_t pixels, int32_t nb,
                                                    int32_t* acc)
{
    int32_t s00 = acc[0], s01 = acc[1];
    int32_t s10 = pixels == 2 ? acc[2] : 0, s11 = pixels == 2 ? acc[3] : 0;
    for (; nb > 0; --nb, c += 8, w += 8) {
        for (int32_t j = 0; j < 4; ++j) {
            const int32_t q = j == 1 ? 2 : (j == 2 ? 1 : j);   /* tap j's weight */
            s00 += (int32_t)c[j] * mtvm_mm_s16_byte(w, q, w_u);
            s01 += (int32_t)c[j] * mtvm_mm_s16_byte(w, 4 + q, w_u);
            if (pixels == 2) {
                s10 += (int32_t)c[4 + j] * mtvm_mm_s16_byte(w, q, w_u);
                s11 += (int32_t)c[4 + j] * mtvm_mm_s16_byte(w, 4 + q, w_u);
            }
        }
    }
    mtvm_mm_s16_store(acc, pixels, s00, s01, s10, s11);
}
#endif

#if defined(__ARM_FEATURE_DSP)
/* One tail word per pixel (p0's at ct, p1's ts slots further) times the two channels'
 * bytes at wt (wbytes: 2 or 4): SXTB16 gives o's lanes, SXTB16 ROR #8 o + 1's. */
static MTVM_ALWAYS_INLINE void mtvm_mm_s16_tail_word(const int16_t* ct, int32_t ts,
                                                     const uint8_t* wt, size_t wbytes, int w_u,
                                                     int32_t pixels, int32_t s[4])
{
    uint32_t wv = 0, c0, c1 = 0;
    int32_t wl, wh;
    memcpy(&wv, wt, wbytes);
    memcpy(&c0, ct, 4);
    if (pixels == 2) memcpy(&c1, ct + ts, 4);
    wl = mtvm_widen_02(wv, w_u);
    wh = mtvm_widen_13(wv, w_u);
    s[0] = __smlad((int32_t)c0, wl, s[0]);
    s[1] = __smlad((int32_t)c0, wh, s[1]);
    if (pixels == 2) {
        s[2] = __smlad((int32_t)c1, wl, s[2]);
        s[3] = __smlad((int32_t)c1, wh, s[3]);
    }
}
#endif

/* acc += the tl tail taps (tail_slot): column words at ct (p1's ts slots further), the
 * two channels' interleaved bytes at wt. */
#if defined(__ARM_FEATURE_DSP)
static MTVM_ALWAYS_INLINE void mtvm_mm_s16_tail(const int16_t* ct, const uint8_t* wt, int w_u,
                                                int32_t pixels, int32_t tl, int32_t* acc)
{
    int32_t s[4];
    const int32_t ts = tl <= 2 ? 2 : 4;
    s[0] = acc[0];
    s[1] = acc[1];
    s[2] = pixels == 2 ? acc[2] : 0;
    s[3] = pixels == 2 ? acc[3] : 0;
    /* the words (t0, 0) / (t0, t1) / (t0, t2); tl 3 adds the halfword pair (t1, 0) */
    mtvm_mm_s16_tail_word(ct, ts, wt, tl == 1 ? 2 : 4, w_u, pixels, s);
    if (tl == 3) mtvm_mm_s16_tail_word(ct + 2, ts, wt + 4, 2, w_u, pixels, s);
    acc[0] = s[0];
    acc[1] = s[1];
    if (pixels == 2) {
        acc[2] = s[2];
        acc[3] = s[3];
    }
}
#else
static MTVM_ALWAYS_INLINE void mtvm_mm_s16_tail(const int16_t* ct, const uint8_t* wt, int w_u,
                                                int32_t pixels, int32_t tl, int32_t* acc)
{
    int32_t s00 = acc[0], s01 = acc[1];
    int32_t s10 = pixels == 2 ? acc[2] : 0, s11 = pixels == 2 ? acc[3] : 0;
    const int32_t ts = tl <= 2 ? 2 : 4;
    for (int32_t j = 0; j < tl; ++j) {
        const int32_t q = mtvm_col_tail_slot(j, tl);
        s00 += (int32_t)ct[q] * mtvm_byte_at(wt, 2 * q, w_u);
        s01 += (int32_t)ct[q] * mtvm_byte_at(wt, 2 * q + 1, w_u);
        if (pixels == 2) {
            s10 += (int32_t)ct[ts + q] * mtvm_byte_at(wt, 2 * q, w_u);
            s11 += (int32_t)ct[ts + q] * mtvm_byte_at(wt, 2 * q + 1, w_u);
        }
    }
    mtvm_mm_s16_store(acc, pixels, s00, s01, s10, s11);
}
#endif

/* MTVM_MM_S16_BLOCKS(C_COPY, W_U, PIXELS), inside a named form below: acc += its nb
 * blocks, inline, or on a DSP core through the form's out-of-line C copy C_COPY where the
 * assembly does not apply (wal, but the weights turn out not word-aligned; no gcc). The
 * copy is called directly: chosen by a branch or a function pointer, even folded ones,
 * it changes gcc's register allocation of the callers, some for the worse. */
#if defined(__ARM_FEATURE_DSP) && defined(MTVM_MM_S16_THUMB2)
#define MTVM_MM_S16_BLOCKS(C_COPY, W_U, PIXELS) \
    if (!wal || ((uintptr_t)w & 3u) == 0) { \
        mtvm_mm_s16_thumb2(c, (const uint8_t*)w, W_U, PIXELS, nb, wal, acc); \
    } else { \
        C_COPY(c, (const uint8_t*)w, nb, acc); \
    }
#elif defined(__ARM_FEATURE_DSP)
#define MTVM_MM_S16_BLOCKS(C_COPY, W_U, PIXELS) C_COPY(c, (const uint8_t*)w, nb, acc)
#elif defined(MTVM_INT8_X86)
#define MTVM_MM_S16_BLOCKS(C_COPY, W_U, PIXELS) \
    mtvm_mm2x2_x86(c, (const uint8_t*)w, W_U, nb, PIXELS, acc)
#else
#define MTVM_MM_S16_BLOCKS(C_COPY, W_U, PIXELS) \
    mtvm_mm_s16_portable(c, (const uint8_t*)w, W_U, PIXELS, nb, acc)
#endif

/* MTVM_MM_S16_FORM defines a named form the generated kernels call, NAME(c, w, nb, tl,
 * wal, acc): acc[0..2 * PIXELS) += the nb blocks and the tl tail taps of PIXELS (2 or 1)
 * pixels x two channels, weights of type WT (W_U: uint8, else int8), and on a DSP core
 * its out-of-line copy NAME_c. nb, tl and wal (the weight rows are a multiple of four
 * bytes: w is word-aligned when the array is, which gcc gives it at -O2) are constants
 * at each call: after inlining only their instructions remain. */
#define MTVM_MM_S16_FORM(NAME, WT, W_U, PIXELS) \
    MTVM_MM_S16_C_COPY(NAME, W_U, PIXELS) \
    static MTVM_ALWAYS_INLINE void NAME(const int16_t* c, const WT* w, int32_t nb, int32_t tl, \
                                        int32_t wal, int32_t acc[2 * (PIXELS)]) \
    { \
        const int16_t* ct = c + 8 * nb;   /* the tail taps */ \
        const uint8_t* wt = (const uint8_t*)w + 8 * nb; \
        (void)wal; \
        MTVM_MM_S16_BLOCKS(NAME##_c, W_U, PIXELS); \
        if (tl > 0) mtvm_mm_s16_tail(ct, wt, W_U, PIXELS, tl, acc); \
    }

MTVM_MM_S16_FORM(mtvm_mm2x2_s16_s8, int8_t, 0, 2)
MTVM_MM_S16_FORM(mtvm_mm2x2_s16_u8, uint8_t, 1, 2)
MTVM_MM_S16_FORM(mtvm_mm1x2_s16_s8, int8_t, 0, 1)
MTVM_MM_S16_FORM(mtvm_mm1x2_s16_u8, uint8_t, 1, 1)

/* The column block of four channels (planes hw elements apart) x two neighbouring pixels
 * at p, as a pointwise conv gathers it: t[0..3] = pixel 0's four taps, t[4..7] = pixel
 * 1's; x_u: uint8 activations, else int8. On a DSP core one halfword load per channel,
 * then SXTB16 / UXTB16 (with ROR #8 for pixel 1) widen two channels at a time. */
static MTVM_ALWAYS_INLINE void mtvm_im2col_pair4_s16(int16_t* t, const uint8_t* p, int x_u,
                                                     size_t hw)
{
#if defined(__ARM_FEATURE_DSP)
    uint16_t h0, h1, h2, h3;
    memcpy(&h0, p, 2);
    memcpy(&h1, p + hw, 2);
    memcpy(&h2, p + 2 * hw, 2);
    memcpy(&h3, p + 3 * hw, 2);
    {
        const int32_t v01 = (int32_t)((uint32_t)h0 | ((uint32_t)h1 << 16));
        const int32_t v23 = (int32_t)((uint32_t)h2 | ((uint32_t)h3 << 16));
        const int32_t a01 = x_u ? (int32_t)__uxtb16(v01) : __sxtb16(v01);
        const int32_t a23 = x_u ? (int32_t)__uxtb16(v23) : __sxtb16(v23);
        const int32_t b01 = x_u ? mtvm_uxtb16_ror8(v01) : mtvm_sxtb16_ror8(v01);
        const int32_t b23 = x_u ? mtvm_uxtb16_ror8(v23) : mtvm_sxtb16_ror8(v23);
        memcpy(t, &a01, 4);
        memcpy(t + 2, &a23, 4);
        memcpy(t + 4, &b01, 4);
        memcpy(t + 6, &b23, 4);
    }
#else
    /* written out: gcc -O2 keeps a loop of four here */
    t[0] = (int16_t)mtvm_mm_s16_byte(p, 0, x_u);
    t[4] = (int16_t)mtvm_mm_s16_byte(p, 1, x_u);
    t[1] = (int16_t)mtvm_mm_s16_byte(p, hw, x_u);
    t[5] = (int16_t)mtvm_mm_s16_byte(p, hw + 1, x_u);
    t[2] = (int16_t)mtvm_mm_s16_byte(p, 2 * hw, x_u);
    t[6] = (int16_t)mtvm_mm_s16_byte(p, 2 * hw + 1, x_u);
    t[3] = (int16_t)mtvm_mm_s16_byte(p, 3 * hw, x_u);
    t[7] = (int16_t)mtvm_mm_s16_byte(p, 3 * hw + 1, x_u);
#endif
}

static MTVM_ALWAYS_INLINE void mtvm_im2col_pair4_s16_s8(int16_t* t, const int8_t* p, size_t hw)
{
    mtvm_im2col_pair4_s16(t, (const uint8_t*)p, 0, hw);
}

static MTVM_ALWAYS_INLINE void mtvm_im2col_pair4_s16_u8(int16_t* t, const uint8_t* p, size_t hw)
{
    mtvm_im2col_pair4_s16(t, p, 1, hw);
}

#if defined(MTVM_INT8_X86)
/* Four channels (two pairs: weights at w0 and w1) x two pixels, blocks and tail. */
static MTVM_ALWAYS_INLINE void mtvm_mm2x4_x86_s8(const int16_t* c, const int8_t* w0,
                                                 const int8_t* w1, int32_t nb, int32_t tl,
                                                 int32_t acc[8])
{
    mtvm_mm2x4_x86(c, (const uint8_t*)w0, (const uint8_t*)w1, 0, nb, tl, acc);
}

static MTVM_ALWAYS_INLINE void mtvm_mm2x4_x86_u8(const int16_t* c, const uint8_t* w0,
                                                 const uint8_t* w1, int32_t nb, int32_t tl,
                                                 int32_t acc[8])
{
    mtvm_mm2x4_x86(c, w0, w1, 1, nb, tl, acc);
}
#endif

#endif  /* MTVM_MM_S16_H_ */
