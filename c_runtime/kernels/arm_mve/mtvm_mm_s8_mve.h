/* mtvm_mm_s8_mve.h: QConv's im2col path on Helium (MVE) cores (mtvm_conv_s8_mve): int8
 * columns gathered with VLDRB gathers, and the dot products of two output channels x one,
 * two or four pixels with VMLADAVA.S8 (16 int8 MACs into a scalar accumulator per
 * instruction), over the packed weights of the other targets
 * (mtvm.ops.quantized.conv.conv_pack_index), requantized four outputs per vector.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MM_S8_MVE_H_
#define MTVM_MM_S8_MVE_H_

#include <stddef.h>
#include <stdint.h>
#include "mtvm_int8_bytes.h"   /* MTVM_ALWAYS_INLINE */
#include "mtvm_im2col_slots.h"

#if defined(__ARM_FEATURE_MVE)
#include <arm_mve.h>

/* Layouts (mtvm.ops.quantized.conv: emit_im2col_mve, mve_column_tables).
 * The weights are those of every target, so a model's constants do not depend on the core:
 * per pair of output channels (o, o + 1), per block of four taps, o's four bytes stored
 * w0 w2 w1 w3, then o + 1's; then the kk % 4 tail taps of both, interleaved o, o + 1 in
 * the slots of tail_slot (o0 p0 | o0 p0 o1 p1 | o0 p0 o2 p2 o1 p1). A byte gather with
 * the offsets 0-3, 8-11, 16-19, 24-27 (+ 4 for o + 1) reads 16 taps of one channel.
 * The column: per pixel a row of kp int8 (kk rounded up to 16) whose byte j meets a
 * channel's j-th weight byte in that order: each block's taps t0 t2 t1 t3, then the tail
 * taps in order; the bytes past kk are read but meet zero weights (predicated loads). The
 * rows of a block of pixels are interleaved by 16-byte chunks: chunk c of pixel i at
 * col + c * cs + 16 * i (cs = 16 x the pixels of a block), so that one pointer with
 * immediate offsets reaches every pixel's chunk.
 * The last channel of a group with an odd channel count keeps its own row of kk bytes in
 * that very order, so it is read with contiguous loads. */

/* The byte offsets, from the start of a 16-tap step of a channel pair, of o's weights
 * (off[0..15]) and o + 1's (off[16..31]): r (at most 4) blocks, then the tl tail taps;
 * lanes past them 0 (not read: the loads are predicated). */
static inline void mtvm_mm_s8_mve_offsets(int32_t r, int32_t tl, uint8_t off[32])
{
    int32_t j;
    for (j = 0; j < 32; ++j) {
        off[j] = 0;
    }
    for (j = 0; j < 4 * r; ++j) {
        off[j] = (uint8_t)(8 * (j >> 2) + (j & 3));
        off[16 + j] = (uint8_t)(off[j] + 4);
    }
    for (j = 0; j < tl; ++j) {
        const int32_t slot = mtvm_col_tail_slot(j, tl);
        off[4 * r + j] = (uint8_t)(8 * r + 2 * slot);
        off[16 + 4 * r + j] = (uint8_t)(8 * r + 2 * slot + 1);
    }
}

/* ... of the last (partial) step: nb % 4 blocks and the tail. Filled once per kernel. */
static inline void mtvm_mm_s8_mve_tail(int32_t nb, int32_t tl, uint8_t off[32])
{
    mtvm_mm_s8_mve_offsets(nb & 3, tl, off);
}

/* The gather offsets of 16 taps of channel o in a full step (32 bytes: four blocks of
 * o's and o + 1's four bytes). */
static const uint8_t mtvm_mm_s8_mve_lanes[16] = {0, 1, 2, 3, 8, 9, 10, 11,
                                                 16, 17, 18, 19, 24, 25, 26, 27};

/* acc[0] += p0.w_o, acc[1] += p0.w_o1, acc[2] += p1.w_o, acc[3] += p1.w_o1 (pixels 1:
 * acc[0..1] only, row p1 not read). col: pixel 0's first chunk (pixel 1's 16 bytes on, the
 * next chunks cs bytes on); w: the channel pair's 2 * kk packed bytes; tail:
 * mtvm_mm_s8_mve_tail's offsets (unused, may be NULL, when nb % 4 and tl are 0). Two
 * gathers, two chunk loads and four VMLADAVA per 16 taps. */
static MTVM_ALWAYS_INLINE void mtvm_mm_s8_mve(const int8_t* col, int32_t cs, const int8_t* w,
                                              int32_t nb, int32_t tl, const uint8_t* tail,
                                              int32_t pixels, int32_t acc[4])
{
    const uint8x16_t off0 = vld1q_u8(mtvm_mm_s8_mve_lanes);
    const uint8x16_t off1 = vaddq_n_u8(off0, 4);
    const int8_t* c1 = col + 16;
    int32_t s00 = acc[0], s01 = acc[1];
    int32_t s10 = pixels == 2 ? acc[2] : 0, s11 = pixels == 2 ? acc[3] : 0;
    int32_t i;
    if (pixels == 2) {
        for (i = nb >> 2; i > 0; --i, w += 32, col += cs, c1 += cs) {
            const int8x16_t w0 = vldrbq_gather_offset_s8(w, off0);
            const int8x16_t w1 = vldrbq_gather_offset_s8(w, off1);
            const int8x16_t x0 = vld1q_s8(col);
            const int8x16_t x1 = vld1q_s8(c1);
            s00 = vmladavaq_s8(s00, x0, w0);
            s01 = vmladavaq_s8(s01, x0, w1);
            s10 = vmladavaq_s8(s10, x1, w0);
            s11 = vmladavaq_s8(s11, x1, w1);
        }
    } else {
        for (i = nb >> 2; i > 0; --i, w += 32, col += cs) {
            const int8x16_t x0 = vld1q_s8(col);
            s00 = vmladavaq_s8(s00, x0, vldrbq_gather_offset_s8(w, off0));
            s01 = vmladavaq_s8(s01, x0, vldrbq_gather_offset_s8(w, off1));
        }
    }
    if ((nb & 3) || tl) {
        /* the last blocks and the tail: lanes past them load zero weights */
        const mve_pred16_t p = vctp8q((uint32_t)(4 * (nb & 3) + tl));
        const int8x16_t w0 = vldrbq_gather_offset_z_s8(w, vld1q_u8(tail), p);
        const int8x16_t w1 = vldrbq_gather_offset_z_s8(w, vld1q_u8(tail + 16), p);
        const int8x16_t x0 = vld1q_s8(col);
        s00 = vmladavaq_s8(s00, x0, w0);
        s01 = vmladavaq_s8(s01, x0, w1);
        if (pixels == 2) {
            const int8x16_t x1 = vld1q_s8(c1);
            s10 = vmladavaq_s8(s10, x1, w0);
            s11 = vmladavaq_s8(s11, x1, w1);
        }
    }
    acc[0] = s00;
    acc[1] = s01;
    if (pixels == 2) {
        acc[2] = s10;
        acc[3] = s11;
    }
}

/* The last channel of a group with an odd channel count: acc[p] += row p . w for npx (1 or
 * 2) pixels (the column as for mtvm_mm_s8_mve); w: its kk bytes, already in the column's
 * order (contiguous loads, the last one predicated). */
static MTVM_ALWAYS_INLINE void mtvm_mmx1_s8_mve(const int8_t* col, int32_t cs, const int8_t* w,
                                                int32_t kk, int32_t npx, int32_t acc[2])
{
    const int8_t* c1 = col + 16;
    int32_t s0 = acc[0], s1 = acc[1];
    for (; kk > 0; kk -= 16, w += 16, col += cs, c1 += cs) {
        const int8x16_t wv = vldrbq_z_s8(w, vctp8q((uint32_t)kk));
        s0 = vmladavaq_s8(s0, vld1q_s8(col), wv);
        if (npx == 2) {
            s1 = vmladavaq_s8(s1, vld1q_s8(c1), wv);
        }
    }
    acc[0] = s0;
    acc[1] = s1;
}

/* (a0, a1, a2, a3) as one vector. (Through the stack: two STRD and a VLDRW, as gcc builds
 * a vector initializer. The two-lane VMOV from general registers would take two, but under
 * gas and QEMU its lanes came out swapped from the reading of its syntax, so it is not
 * relied on until checked on silicon.) */
static MTVM_ALWAYS_INLINE int32x4_t mtvm_s32x4_mve(int32_t a0, int32_t a1, int32_t a2,
                                                   int32_t a3)
{
    const int32x4_t v = {a0, a1, a2, a3};
    return v;
}

/* Four pixels x two channels: *v0 = bias[0] + (p0..p3 . w_o), *v1 = bias[1] + (p0..p3 .
 * w_o1), over a column block of four pixels (cs = 64) and a channel pair's packed weights
 * (as mtvm_mm_s8_mve). Two gathers, four chunk loads (one pointer) and eight VMLADAVA per
 * 16 taps: eight sums in general registers. */
static MTVM_ALWAYS_INLINE void mtvm_mm4x2_s8_mve(const int8_t* col, const int8_t* w, int32_t nb,
                                                 int32_t tl, const uint8_t* tail,
                                                 const int32_t* bias, int32x4_t* v0,
                                                 int32x4_t* v1)
{
    const uint8x16_t off0 = vld1q_u8(mtvm_mm_s8_mve_lanes);
    const uint8x16_t off1 = vaddq_n_u8(off0, 4);
    int32_t a0 = bias[0], a1 = bias[0], a2 = bias[0], a3 = bias[0];
    int32_t b0 = bias[1], b1 = bias[1], b2 = bias[1], b3 = bias[1];
    int32_t i;
    for (i = nb >> 2; i > 0; --i, w += 32, col += 64) {
        const int8x16_t w0 = vldrbq_gather_offset_s8(w, off0);
        const int8x16_t w1 = vldrbq_gather_offset_s8(w, off1);
        int8x16_t x = vld1q_s8(col);
        a0 = vmladavaq_s8(a0, x, w0);
        b0 = vmladavaq_s8(b0, x, w1);
        x = vld1q_s8(col + 16);
        a1 = vmladavaq_s8(a1, x, w0);
        b1 = vmladavaq_s8(b1, x, w1);
        x = vld1q_s8(col + 32);
        a2 = vmladavaq_s8(a2, x, w0);
        b2 = vmladavaq_s8(b2, x, w1);
        x = vld1q_s8(col + 48);
        a3 = vmladavaq_s8(a3, x, w0);
        b3 = vmladavaq_s8(b3, x, w1);
    }
    if ((nb & 3) || tl) {
        const mve_pred16_t p = vctp8q((uint32_t)(4 * (nb & 3) + tl));
        const int8x16_t w0 = vldrbq_gather_offset_z_s8(w, vld1q_u8(tail), p);
        const int8x16_t w1 = vldrbq_gather_offset_z_s8(w, vld1q_u8(tail + 16), p);
        int8x16_t x = vld1q_s8(col);
        a0 = vmladavaq_s8(a0, x, w0);
        b0 = vmladavaq_s8(b0, x, w1);
        x = vld1q_s8(col + 16);
        a1 = vmladavaq_s8(a1, x, w0);
        b1 = vmladavaq_s8(b1, x, w1);
        x = vld1q_s8(col + 32);
        a2 = vmladavaq_s8(a2, x, w0);
        b2 = vmladavaq_s8(b2, x, w1);
        x = vld1q_s8(col + 48);
        a3 = vmladavaq_s8(a3, x, w0);
        b3 = vmladavaq_s8(b3, x, w1);
    }
    *v0 = mtvm_s32x4_mve(a0, a1, a2, a3);
    *v1 = mtvm_s32x4_mve(b0, b1, b2, b3);
}

/* The cheap requantization of QConv (conv._Store, where products are never exact ties), on
 * four sums of one channel o: hi = (acc * mult) >> 32, then with one shift for the layer
 * (m > 0) (hi + add) >> m, add = 2^(m-1) + y_zp 2^m; else per channel ((hi >> (m_o - 1)) +
 * add) >> 1, m_o - 1 = -2 - shift[o], add = 2 y_zp + 1; clamped to [lo, hi]. */
typedef struct {
    const int32_t* mult;    /* [channels] (step 1) or one value (step 0) */
    const int32_t* shift;
    int32_t step, m, add, lo, hi;
} mtvm_requant_s8_mve_t;

static MTVM_ALWAYS_INLINE int32x4_t mtvm_requant_s8_mve(int32x4_t acc, size_t o,
                                                        const mtvm_requant_s8_mve_t* q)
{
    acc = vmulhq_s32(acc, vdupq_n_s32(q->mult[o * (size_t)q->step]));
    if (q->m > 0) {
        acc = vshlq_r_s32(vaddq_n_s32(acc, q->add), -q->m);   /* arithmetic right shifts */
    } else {
        acc = vshlq_r_s32(acc, 2 + q->shift[o * (size_t)q->step]);
        acc = vshrq_n_s32(vaddq_n_s32(acc, q->add), 1);
    }
    return vminq_s32(vmaxq_s32(acc, vdupq_n_s32(q->lo)), vdupq_n_s32(q->hi));
}

/* Output channels o, o + 1 of four pixels (a column block, cs = 64), requantized and stored
 * as bytes (int8 or uint8) at y[0..3] and y[ohw..ohw + 3]: mtvm_mm4x2_s8_mve (passes 1), or
 * two passes of mtvm_mm_s8_mve (pixels 0, 1 then 2, 3; four sums each). The one pass reads
 * the weights once, but its eight sums want eight even registers, the only ones VMLADAVA
 * accumulates in, and gcc spills some: which costs fewer instructions depends on the
 * loops around (measured: two passes for KxK and strided convs, one for pointwise ones). */
static MTVM_ALWAYS_INLINE void mtvm_conv4x2_s8_mve(const int8_t* col, const int8_t* w, int32_t nb,
                                                   int32_t tl, const uint8_t* tail,
                                                   const int32_t* bias, size_t o,
                                                   const mtvm_requant_s8_mve_t* q, int8_t* y,
                                                   size_t ohw, int32_t passes)
{
    int32x4_t v0, v1;
    if (passes == 2) {
        int32_t a[4] = {bias[o], bias[o + 1], bias[o], bias[o + 1]};
        int32_t b[4] = {bias[o], bias[o + 1], bias[o], bias[o + 1]};
        mtvm_mm_s8_mve(col, 64, w, nb, tl, tail, 2, a);
        mtvm_mm_s8_mve(col + 32, 64, w, nb, tl, tail, 2, b);
        v0 = mtvm_s32x4_mve(a[0], a[2], b[0], b[2]);
        v1 = mtvm_s32x4_mve(a[1], a[3], b[1], b[3]);
    } else {
        mtvm_mm4x2_s8_mve(col, w, nb, tl, tail, bias + o, &v0, &v1);
    }
    vstrbq_s32(y, mtvm_requant_s8_mve(v0, o, q));
    vstrbq_s32(y + ohw, mtvm_requant_s8_mve(v1, o + 1, q));
}

/* One output channel o of four pixels when a pixel has at most 16 taps (one step): its
 * weights gathered once (off: its 16 offsets from mtvm_mm_s8_mve_offsets, w: its channel
 * pair's bytes), four VMLADAV against the four chunks of the column block (cs = 64; loaded
 * once for all channels by the compiler), requantized and stored as bytes at y[0..3]. One
 * channel at a time: fewer live registers than mtvm_conv4x2_s8_mve, whose sums gcc
 * shuffles through the stack when a step is all there is. */
static MTVM_ALWAYS_INLINE void mtvm_conv4x1_s8_mve(const int8_t* col, const int8_t* w,
                                                   const uint8_t* off, int32_t kk,
                                                   const int32_t* bias, size_t o,
                                                   const mtvm_requant_s8_mve_t* q, int8_t* y)
{
    const int8x16_t wv = vldrbq_gather_offset_z_s8(w, vld1q_u8(off), vctp8q((uint32_t)kk));
    const int32x4_t v = mtvm_s32x4_mve(vmladavq_s8(vld1q_s8(col), wv),
                                       vmladavq_s8(vld1q_s8(col + 16), wv),
                                       vmladavq_s8(vld1q_s8(col + 32), wv),
                                       vmladavq_s8(vld1q_s8(col + 48), wv));
    vstrbq_s32(y, mtvm_requant_s8_mve(vaddq_n_s32(v, bias[o]), o, q));
}

/* A conv's column geometry (emit_im2col_mve: static tables per kernel). */
typedef struct {
    const uint16_t* off;   /* [kp] each column byte's input offset from the window's first
                              input: ci * h * w + ky * dh * w + kx * dw (0 past kk) */
    const int16_t* dy;     /* [kp] its row in the window, ky * dh (NULL: no padding) */
    const int16_t* dx;     /* [kp] its column, kx * dw */
    int32_t kp, h, w;      /* row bytes (a multiple of 16); the input plane */
    int32_t cs;            /* bytes from one 16-byte chunk of a pixel's row to its next */
    int32_t ylast, xlast;  /* (kh - 1) * dh, (kw - 1) * dw: the window's extent */
    int32_t zp;            /* the input zero point: the value of padding taps */
} mtvm_im2col_s8_mve_t;

/* The column row of a window inside the planes, its first input at p. */
static MTVM_ALWAYS_INLINE void mtvm_im2col_inside_s8_mve(int8_t* col, const int8_t* p,
                                                         const mtvm_im2col_s8_mve_t* g)
{
    int32_t i;
    for (i = 0; i < g->kp; i += 16, col += g->cs) {
        vstrbq_s16(col, vldrbq_gather_offset_s16(p, vld1q_u16(g->off + i)));
        vstrbq_s16(col + 8, vldrbq_gather_offset_s16(p, vld1q_u16(g->off + i + 8)));
    }
}

/* One pixel's column row (its 16-byte chunks cs bytes apart): the window whose first input
 * is at (iy0, ix0) of the channel planes x (negative or past the plane: padding, read as the
 * zero point). Eight taps per step: a widening byte gather with 16-bit offsets (the plane
 * stack is under 64 KiB, checked at compile time), stored narrowed; a window crossing the
 * border gathers only the lanes inside (a predicate from the tap's row and column) and
 * selects the zero point for the rest. */
static MTVM_ALWAYS_INLINE void mtvm_im2col_s8_mve(int8_t* col, const int8_t* x, int32_t iy0,
                                                  int32_t ix0, const mtvm_im2col_s8_mve_t* g)
{
    const int32_t base = iy0 * g->w + ix0;
    int32_t i;
    if (iy0 >= 0 && ix0 >= 0 && iy0 + g->ylast < g->h && ix0 + g->xlast < g->w) {
        mtvm_im2col_inside_s8_mve(col, x + base, g);
        return;
    }
    {
        const int16x8_t zp = vdupq_n_s16((int16_t)g->zp);
        for (i = 0; i < g->kp; i += 8) {
            const int16x8_t y = vaddq_n_s16(vld1q_s16(g->dy + i), (int16_t)iy0);
            const int16x8_t xx = vaddq_n_s16(vld1q_s16(g->dx + i), (int16_t)ix0);
            mve_pred16_t p = vcmpgeq_n_s16(y, 0);
            p = vcmpltq_m_n_s16(y, (int16_t)g->h, p);
            p = vcmpgeq_m_n_s16(xx, 0, p);
            p = vcmpltq_m_n_s16(xx, (int16_t)g->w, p);
            /* the offsets from the plane's start, modulo 2^16: exact in the lanes read */
            const uint16x8_t o = vaddq_n_u16(vld1q_u16(g->off + i), (uint16_t)base);
            const int16x8_t v = vldrbq_gather_offset_z_s16(x, o, p);
            vstrbq_s16(col + (i >> 4) * g->cs + (i & 15), vpselq_s16(v, zp, p));
        }
    }
}

/* _Store's cheap requantization of one sum of channel o (the integers of
 * mtvm_requant_s8_mve). */
static MTVM_ALWAYS_INLINE int32_t mtvm_requant1_s8_mve(int32_t acc, size_t o,
                                                       const mtvm_requant_s8_mve_t* q)
{
    const int32_t hi = (int32_t)(((int64_t)acc * q->mult[o * (size_t)q->step]) >> 32);
    const int32_t v = q->m > 0 ? (hi + q->add) >> q->m
                               : ((hi >> (-2 - q->shift[o * (size_t)q->step])) + q->add) >> 1;
    return v < q->lo ? q->lo : (v > q->hi ? q->hi : v);
}

/* One group's output plane (emit_im2col_mve: a static constant per kernel). */
typedef struct {
    int32_t ohw, ow;          /* output pixels, per row */
    int32_t sh, sw, ph, pw;   /* pixel (oy, ox)'s window starts at (oy sh - ph, ox sw - pw) */
    int32_t pointwise;        /* 1: pixel q's window starts at q of the planes read as a row */
    int32_t passes;           /* mtvm_conv4x2_s8_mve's */
    int32_t mg, kk;           /* output channels, taps per output */
} mtvm_conv_plane_s8_mve_t;

/* QConv's MVE path over one group: y (int8 or uint8 bytes, channel o0's plane first) from
 * the group's input planes x and packed weights w (bias, requantization: indexed by the
 * channel, o0 + j). Blocks of four output pixels in flat order gathered into the column
 * (4 rows, cs = 64), met two channels at a time by mtvm_conv4x2_s8_mve (or, for at most 16
 * taps, mtvm_conv4x1_s8_mve twice); the plane's last one to three pixels in pairs
 * (mtvm_mm_s8_mve, scalar requantization); the odd last channel mtvm_mmx1_s8_mve. */
/* The column rows of npx pixels from pixel q on (at (*oy, *ox), advanced past them). */
static MTVM_ALWAYS_INLINE void mtvm_conv_gather_s8_mve(int8_t* col, const int8_t* x, int32_t q,
                                                       int32_t npx, int32_t* oy, int32_t* ox,
                                                       const mtvm_im2col_s8_mve_t* geo,
                                                       const mtvm_conv_plane_s8_mve_t* c)
{
    int32_t px;
    for (px = 0; px < npx; ++px) {
        if (c->pointwise) {   /* never a border: no test */
            mtvm_im2col_inside_s8_mve(col + 16 * px, x + q + px, geo);
        } else {
            mtvm_im2col_s8_mve(col + 16 * px, x, *oy * c->sh - c->ph, *ox * c->sw - c->pw, geo);
            if (++*ox == c->ow) {
                *ox = 0;
                ++*oy;
            }
        }
    }
}

static MTVM_ALWAYS_INLINE void mtvm_conv_group_s8_mve(int8_t* col, const int8_t* x,
                                                      const int8_t* w, const int32_t* bias,
                                                      size_t o0, int8_t* y,
                                                      const mtvm_im2col_s8_mve_t* geo,
                                                      const mtvm_requant_s8_mve_t* rq,
                                                      const mtvm_conv_plane_s8_mve_t* c)
{
    const int32_t nb = c->kk / 4, tl = c->kk % 4;
    const size_t o1 = o0 + (size_t)c->mg - 1;   /* the last channel pair starts before o1 */
    uint8_t offs[32];   /* the weights' gather offsets: of the one step, or of the last */
    int32_t q, oy = 0, ox = 0, h;
    uint8_t* yb = (uint8_t*)y;
    if (c->kk <= 16) {
        mtvm_mm_s8_mve_offsets(nb, tl, offs);
    } else {
        mtvm_mm_s8_mve_tail(nb, tl, offs);
    }
    for (q = 0; q + 4 <= c->ohw; q += 4) {   /* blocks of four pixels */
        const int8_t* wq = w;
        uint8_t* yq = yb + q;
        size_t o = o0;
        mtvm_conv_gather_s8_mve(col, x, q, 4, &oy, &ox, geo, c);
        for (; o < o1; o += 2, wq += 2 * c->kk, yq += 2 * c->ohw) {
            if (c->kk <= 16) {
                mtvm_conv4x1_s8_mve(col, wq, offs, c->kk, bias, o, rq, (int8_t*)yq);
                mtvm_conv4x1_s8_mve(col, wq, offs + 16, c->kk, bias, o + 1, rq,
                                    (int8_t*)yq + c->ohw);
            } else {
                mtvm_conv4x2_s8_mve(col, wq, nb, tl, offs, bias, o, rq, (int8_t*)yq,
                                    (size_t)c->ohw, c->passes);
            }
        }
        if (c->mg % 2) {   /* the odd last channel: its own row of weights */
            for (h = 0; h < 4; h += 2) {
                int32_t a[2] = {bias[o], bias[o]};
                mtvm_mmx1_s8_mve(col + 16 * h, 64, wq, c->kk, 2, a);
                yq[h] = (uint8_t)mtvm_requant1_s8_mve(a[0], o, rq);
                yq[h + 1] = (uint8_t)mtvm_requant1_s8_mve(a[1], o, rq);
            }
        }
    }
    if (q < c->ohw) {   /* the plane's last one to three pixels, in pairs */
        const int32_t npx = c->ohw - q;
        const int8_t* wq = w;
        uint8_t* yq = yb + q;
        size_t o = o0;
        mtvm_conv_gather_s8_mve(col, x, q, npx, &oy, &ox, geo, c);
        for (; o < o1; o += 2, wq += 2 * c->kk, yq += 2 * c->ohw) {
            for (h = 0; h < npx; h += 2) {
                const int32_t n2 = npx - h < 2 ? 1 : 2;
                int32_t a[4] = {bias[o], bias[o + 1], bias[o], bias[o + 1]};
                mtvm_mm_s8_mve(col + 16 * h, 64, wq, nb, tl, offs, n2, a);
                yq[h] = (uint8_t)mtvm_requant1_s8_mve(a[0], o, rq);
                yq[c->ohw + h] = (uint8_t)mtvm_requant1_s8_mve(a[1], o + 1, rq);
                if (n2 == 2) {
                    yq[h + 1] = (uint8_t)mtvm_requant1_s8_mve(a[2], o, rq);
                    yq[c->ohw + h + 1] = (uint8_t)mtvm_requant1_s8_mve(a[3], o + 1, rq);
                }
            }
        }
        if (c->mg % 2) {
            for (h = 0; h < npx; h += 2) {
                const int32_t n2 = npx - h < 2 ? 1 : 2;
                int32_t a[2] = {bias[o], bias[o]};
                mtvm_mmx1_s8_mve(col + 16 * h, 64, wq, c->kk, n2, a);
                yq[h] = (uint8_t)mtvm_requant1_s8_mve(a[0], o, rq);
                if (n2 == 2) {
                    yq[h + 1] = (uint8_t)mtvm_requant1_s8_mve(a[1], o, rq);
                }
            }
        }
    }
}

/* QConv (folded=1) on an MVE core, the whole conv (mtvm.ops.quantized.conv.emit_im2col_mve
 * passes its constants): batches x groups of mtvm_conv_group_s8_mve. scratch: the column
 * (4 * kp bytes); x: [batches][c][h * wd] int8; w: the packed weights; y: [batches][groups *
 * mg][ohw] bytes; off, dy, dx: the column tables (mve_column_tables; dy, dx NULL where no
 * window crosses the border) of a window of the planes read as gh x gw (a pointwise conv:
 * 1 x h * wd), extent (ylast, xlast); passes: mtvm_conv4x2_s8_mve's; the requantization
 * as mtvm_requant_s8_mve_t. */
static MTVM_ALWAYS_INLINE void mtvm_conv_s8_mve(
    uint8_t* scratch, const int8_t* x, const int8_t* w, const int32_t* bias, void* y,
    const uint16_t* off, const int16_t* dy, const int16_t* dx, int32_t batches, int32_t groups,
    int32_t c, int32_t hw, int32_t kp, int32_t gh, int32_t gw, int32_t ylast, int32_t xlast,
    int32_t zp, int32_t ohw, int32_t ow, int32_t sh, int32_t sw, int32_t ph, int32_t pw,
    int32_t pointwise, int32_t passes, int32_t mg, int32_t kk, const int32_t* mult,
    const int32_t* shift,
    int32_t step, int32_t m, int32_t add, int32_t lo, int32_t hi)
{
    const mtvm_im2col_s8_mve_t geo = {off, dy, dx, kp, gh, gw, 64, ylast, xlast, zp};
    const mtvm_conv_plane_s8_mve_t plane = {ohw, ow, sh, sw, ph, pw, pointwise, passes, mg, kk};
    const mtvm_requant_s8_mve_t rq = {mult, shift, step, m, add, lo, hi};
    const int32_t cg = c / groups;
    int32_t b, g;
    for (b = 0; b < batches; ++b) {
        for (g = 0; g < groups; ++g) {
            mtvm_conv_group_s8_mve((int8_t*)scratch, x + ((size_t)b * c + (size_t)g * cg) * hw,
                                   w + (size_t)g * mg * kk, bias, (size_t)g * mg,
                                   (int8_t*)y + ((size_t)b * groups + g) * mg * ohw, &geo, &rq,
                                   &plane);
        }
    }
}

#endif  /* __ARM_FEATURE_MVE */

#endif  /* MTVM_MM_S8_MVE_H_ */
