/* mtvm_im2col_border_s8.h: The im2col column of one output pixel whose window crosses the
 * padding, for the int8/uint8 QConv of mtvm/ops/quantized/conv.py (emit_im2col's compact
 * border). One function for every layer of a model, called once per border pixel: on a
 * microcontroller a layer's border gather unrolled over its taps is several hundred bytes of
 * code, repeated in every padded layer, for a few percent of the pixels.
 *
 * The column layout is emit_im2col's: tap i of a pixel (i = channel * kh * kw + ky * kw + kx)
 * at int16 slot i + (i & ~3) from the pixel's start (col + 4 px: blocks of four taps of
 * pixel 0, then four of pixel 1), the kk % 4 tail taps at the pixel's tail slots
 * (col + 8 nb + ts px, slot tail_slot(j): j, or 3 - j (j > 0) for a tail of three). Every
 * slot first takes the padding's value (the input zero point), then only the taps inside
 * the input are read: the window's rows and columns inside it are two ranges, so the loops
 * skip the rest (a corner pixel reads 4 of 9 taps). About six instructions a tap read on a
 * Cortex-M4, one a tap for the rest.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_IM2COL_BORDER_S8_H_
#define MTVM_IM2COL_BORDER_S8_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_im2col_slots.h"

/* A layer's window and column, constant for the layer (a static const int32_t table in its
 * kernel, in this order). */
enum {
    MTVM_BORDER_H, MTVM_BORDER_W,          /* the input planes (of a group's channels) */
    MTVM_BORDER_KH, MTVM_BORDER_KW,        /* the window */
    MTVM_BORDER_DH, MTVM_BORDER_DW,        /* its dilations */
    MTVM_BORDER_CHANNELS,                  /* input channels of a group */
    MTVM_BORDER_NB, MTVM_BORDER_TL,        /* a pixel's column: blocks of four taps, tail taps, */
    MTVM_BORDER_TS,                        /* and the tail's slots */
    MTVM_BORDER_ZX,                        /* the input zero point: what the padding reads */
    MTVM_BORDER_FIELDS
};

/* First k in [0, n) with o + k d >= lo (n if none; d > 0). */
static MTVM_ALWAYS_INLINE int32_t mtvm_im2col_first_at_least(int32_t o, int32_t d, int32_t n,
                                                            int32_t lo)
{
    const int32_t k = o >= lo ? 0 : (lo - o + d - 1) / d;
    return k < n ? k : n;
}

/* Pixel px's column (col: the pair's) for the window whose first input is (iy0, ix0) in
 * the group's planes x; g: the layer's table (MTVM_BORDER_FIELDS words). x_u is a constant
 * at each call. */
static MTVM_ALWAYS_INLINE void mtvm_im2col_border_8(int16_t* col, int32_t px, const uint8_t* x,
                                                    int x_u, int32_t iy0, int32_t ix0,
                                                    const int32_t* g)
{
    const int32_t h = g[MTVM_BORDER_H], w = g[MTVM_BORDER_W], kh = g[MTVM_BORDER_KH];
    const int32_t kw = g[MTVM_BORDER_KW], dh = g[MTVM_BORDER_DH], dw = g[MTVM_BORDER_DW];
    const int32_t channels = g[MTVM_BORDER_CHANNELS], nb = g[MTVM_BORDER_NB];
    const int32_t tl = g[MTVM_BORDER_TL], zx = g[MTVM_BORDER_ZX];
    const int32_t khw = kh * kw, hw = h * w, lim = 4 * nb;
    int16_t* t = col + 4 * px;
    int16_t* tt = col + 8 * nb + g[MTVM_BORDER_TS] * px;
    /* the window's rows [ky0, ky1) and columns [kx0, kx1) inside the input */
    const int32_t ky0 = mtvm_im2col_first_at_least(iy0, dh, kh, 0);
    const int32_t ky1 = mtvm_im2col_first_at_least(iy0, dh, kh, h);
    const int32_t kx0 = mtvm_im2col_first_at_least(ix0, dw, kw, 0);
    const int32_t kx1 = mtvm_im2col_first_at_least(ix0, dw, kw, w);
    /* every slot the padding's value, then the taps inside over it */
    const uint32_t z2 = (uint32_t)(uint16_t)zx * 0x10001u;
    for (int32_t b = 0; b < nb; ++b) {
        memcpy(t + 8 * b, &z2, 4);
        memcpy(t + 8 * b + 2, &z2, 4);
    }
    for (int32_t j = 0; j < tl; ++j) tt[mtvm_col_tail_slot(j, tl)] = (int16_t)zx;
    /* the taps inside, over the channels innermost (few rows and columns inside, many
     * channels): four channels a step while all their taps lie in the blocks (their 4 khw
     * taps fill khw blocks: each of the four slots moves on by 8 khw), then one, in the
     * blocks (i < lim) or the tail */
    const int32_t whole = lim / khw < channels ? lim / khw : channels;
    for (int32_t ky = ky0; ky < ky1; ++ky) {
        for (int32_t kx = kx0; kx < kx1; ++kx) {
            /* tap i of channel c's window at p (inside the input) */
            const uint8_t* p = x + ((iy0 + ky * dh) * w + ix0 + kx * dw);
            const int32_t i0 = ky * kw + kx, i1 = i0 + khw, i2 = i1 + khw, i3 = i2 + khw;
            const int32_t q0 = i0 + (i0 & ~3), q1 = i1 + (i1 & ~3), q2 = i2 + (i2 & ~3);
            const int32_t q3 = i3 + (i3 & ~3);
            int32_t c = 0;
            int16_t* tq = t;
            for (; c + 4 <= whole; c += 4, tq += 8 * khw, p += 4 * hw) {
                tq[q0] = (int16_t)mtvm_byte_at(p, 0, x_u);
                tq[q1] = (int16_t)mtvm_byte_at(p, hw, x_u);
                tq[q2] = (int16_t)mtvm_byte_at(p, 2 * hw, x_u);
                tq[q3] = (int16_t)mtvm_byte_at(p, 3 * hw, x_u);
            }
            /* (i unsigned: its steps cannot overflow as far as the compiler knows, which
             * otherwise warned of an iteration past int32 where it did not see the
             * channel count) */
            for (uint32_t i = (uint32_t)(i0 + c * khw); c < channels;
                 ++c, i += (uint32_t)khw, p += hw) {
                const int16_t v = (int16_t)mtvm_byte_at(p, 0, x_u);
                const uint32_t j = i - (uint32_t)lim;   /* the tail's tap, where i >= lim */
                if (i < (uint32_t)lim) t[i + (i & ~3u)] = v;
                else tt[mtvm_col_tail_slot((int32_t)j, tl)] = v;
            }
        }
    }
}

/* mtvm_im2col_border_8 of int8 and of uint8 planes (a model calls one or both). */
static __attribute__((noinline, unused)) void mtvm_im2col_border_s8(
    int16_t* col, int32_t px, const int8_t* x, int32_t iy0, int32_t ix0, const int32_t* g)
{
    mtvm_im2col_border_8(col, px, (const uint8_t*)x, 0, iy0, ix0, g);
}

static __attribute__((noinline, unused)) void mtvm_im2col_border_u8(
    int16_t* col, int32_t px, const uint8_t* x, int32_t iy0, int32_t ix0, const int32_t* g)
{
    mtvm_im2col_border_8(col, px, x, 1, iy0, ix0, g);
}

#endif  /* MTVM_IM2COL_BORDER_S8_H_ */
