/* mtvm_depthwise_s8_mve.h: QConv's depthwise plane (folded=0) on Helium (MVE) cores: four
 * output pixels of a row per vector of int32 sums, one widening byte load (a gather at
 * x stride 2 or more) and one VMLA by the tap's weight per tap, the requantization on the
 * vector (VMULH, VADD, VSHL, VMAX/VMIN) and a narrowing store.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DEPTHWISE_S8_MVE_H_
#define MTVM_DEPTHWISE_S8_MVE_H_

#include <stddef.h>
#include <stdint.h>
#include "mtvm_mm_s8_mve.h"   /* mtvm_s32x4_mve */

#if defined(__ARM_FEATURE_MVE)
#include <arm_mve.h>

/* The plane's geometry and requantization (mtvm.ops.quantized.depthwise: emit_depthwise). */
typedef struct {
    int32_t row_w;               /* bytes from one input row to the next */
    int32_t oh, ow, kh, kw, sh, sw, dh, dw;
    int32_t mult, rnd, sh_r;     /* (high word of acc * mult + rnd) >> sh_r: the fast
                                    requantization, rounding and output zero point in rnd */
    int32_t lo, hi;              /* the clamp (the activation's range) */
    int32_t over;                /* 1: a row's last vector may read its lanes past the row
                                    (up to 3 * sw bytes), which stay inside the plane for every
                                    row but the last (3 * sw <= sh * row_w) */
} mtvm_dw_plane_s8_mve_t;

/* Four pixels' taps at q, q + sw, q + 2 sw, q + 3 sw (a widening load, or a gather). */
static MTVM_ALWAYS_INLINE int32x4_t mtvm_dw_load_s8_mve(const int8_t* q,
                                                        const mtvm_dw_plane_s8_mve_t* g,
                                                        uint32x4_t step)
{
    return g->sw == 1 ? vldrbq_s32(q) : vldrbq_gather_offset_s32(q, step);
}

/* (high word of acc * mult + rnd) >> sh_r, clamped: the integers of mtvm_dw_requantize. */
static MTVM_ALWAYS_INLINE int32x4_t mtvm_dw_requantize_s8_mve(int32x4_t acc,
                                                              const mtvm_dw_plane_s8_mve_t* g)
{
    acc = vmulhq_s32(acc, vdupq_n_s32(g->mult));
    acc = vaddq_n_s32(acc, g->rnd);
    acc = vshlq_r_s32(acc, -g->sh_r);      /* a negative count: arithmetic right shift */
    acc = vmaxq_s32(acc, vdupq_n_s32(g->lo));
    return vminq_s32(acc, vdupq_n_s32(g->hi));
}

/* Output rows [oy0, oy1) of any window: per tap a (predicated, in a row's last vector)
 * load and a VMLA by w[tap], read from memory. */
static MTVM_ALWAYS_INLINE void mtvm_dw_rows_s8_mve(const int8_t* x, int8_t* y, const int8_t* w,
                                                   int32_t bias, const mtvm_dw_plane_s8_mve_t* g,
                                                   int32_t oy0, int32_t oy1)
{
    const uint32x4_t step = vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)g->sw);
    int32_t oy, ox, ky, kx;
    for (oy = oy0; oy < oy1; ++oy) {
        for (ox = 0; ox < g->ow; ox += 4) {
            const mve_pred16_t pred = vctp32q((uint32_t)(g->ow - ox));
            const int8_t* p = x + oy * g->sh * g->row_w + ox * g->sw;
            int32x4_t acc = vdupq_n_s32(bias);
            for (ky = 0; ky < g->kh; ++ky) {
                for (kx = 0; kx < g->kw; ++kx) {
                    const int8_t* q = p + ky * g->dh * g->row_w + kx * g->dw;
                    const int32x4_t v = g->sw == 1 ? vldrbq_z_s32(q, pred)
                                                   : vldrbq_gather_offset_z_s32(q, step, pred);
                    acc = vmlaq_n_s32(acc, v, w[ky * g->kw + kx]);
                }
            }
            vstrbq_p_s32(y + oy * g->ow + ox, mtvm_dw_requantize_s8_mve(acc, g), pred);
        }
    }
}

/* Output rows [0, oy1) of a 3x3 window, where a row's last vector may read past the row (or
 * the row is whole vectors): the nine weights in registers, the taps written out (gcc -O2
 * unrolls neither the general loops nor a predicated tail without spilling them). */
static MTVM_ALWAYS_INLINE void mtvm_dw_rows3x3_s8_mve(const int8_t* x, int8_t* y,
                                                      const int8_t* w, int32_t bias,
                                                      const mtvm_dw_plane_s8_mve_t* g,
                                                      int32_t oy1)
{
    const uint32x4_t step = vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)g->sw);
    const int32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6],
                  w7 = w[7], w8 = w[8];
    const int32_t r1 = g->dh * g->row_w, r2 = 2 * g->dh * g->row_w, c1 = g->dw, c2 = 2 * g->dw;
    int32_t oy, ox;
    for (oy = 0; oy < oy1; ++oy) {
        const int8_t* r = x + oy * g->sh * g->row_w;
        int8_t* yr = y + oy * g->ow;
        for (ox = 0; ox < g->ow; ox += 4) {
            const int8_t* p = r + ox * g->sw;
            int32x4_t acc = vdupq_n_s32(bias);
            acc = vmlaq_n_s32(acc, mtvm_dw_load_s8_mve(p, g, step), w0);
            acc = vmlaq_n_s32(acc, mtvm_dw_load_s8_mve(p + c1, g, step), w1);
            acc = vmlaq_n_s32(acc, mtvm_dw_load_s8_mve(p + c2, g, step), w2);
            acc = vmlaq_n_s32(acc, mtvm_dw_load_s8_mve(p + r1, g, step), w3);
            acc = vmlaq_n_s32(acc, mtvm_dw_load_s8_mve(p + r1 + c1, g, step), w4);
            acc = vmlaq_n_s32(acc, mtvm_dw_load_s8_mve(p + r1 + c2, g, step), w5);
            acc = vmlaq_n_s32(acc, mtvm_dw_load_s8_mve(p + r2, g, step), w6);
            acc = vmlaq_n_s32(acc, mtvm_dw_load_s8_mve(p + r2 + c1, g, step), w7);
            acc = vmlaq_n_s32(acc, mtvm_dw_load_s8_mve(p + r2 + c2, g, step), w8);
            acc = mtvm_dw_requantize_s8_mve(acc, g);
            if (g->ow % 4 == 0) {
                vstrbq_s32(yr + ox, acc);
            } else {
                vstrbq_p_s32(yr + ox, acc, vctp32q((uint32_t)(g->ow - ox)));
            }
        }
    }
}

/* One channel of a window of at most 16 taps whose offsets fit a byte (taps[j] = ky * dh *
 * row_w + kx * dw, in tap order, 0 past kh * kw): per output pixel one byte gather of its
 * window and one VMLADAV.S8 against the channel's int8 weights wk[kh * kw] (zero past them),
 * four pixels' sums moved into a vector and requantized together; a row's last pixels one
 * at a time. Reads only the windows' bytes (lanes past the taps read the first one). */
static MTVM_ALWAYS_INLINE void mtvm_dw_plane_dot_s8_mve(const int8_t* x, int8_t* y,
                                                        const int8_t* wk, int32_t bias,
                                                        const uint8_t* taps,
                                                        const mtvm_dw_plane_s8_mve_t* g)
{
    const int8x16_t wv = vldrbq_z_s8(wk, vctp8q((uint32_t)(g->kh * g->kw)));
    const uint8x16_t ov = vld1q_u8(taps);
    const int32_t sw = g->sw;
    int32_t oy, ox;
    for (oy = 0; oy < g->oh; ++oy) {
        const int8_t* p = x + oy * g->sh * g->row_w;
        int8_t* yr = y + oy * g->ow;
        for (ox = 0; ox + 4 <= g->ow; ox += 4, p += 4 * sw) {
            const int32_t a0 = vmladavq_s8(vldrbq_gather_offset_s8(p, ov), wv);
            const int32_t a1 = vmladavq_s8(vldrbq_gather_offset_s8(p + sw, ov), wv);
            const int32_t a2 = vmladavq_s8(vldrbq_gather_offset_s8(p + 2 * sw, ov), wv);
            const int32_t a3 = vmladavq_s8(vldrbq_gather_offset_s8(p + 3 * sw, ov), wv);
            const int32x4_t acc = vaddq_n_s32(mtvm_s32x4_mve(a0, a1, a2, a3), bias);
            vstrbq_s32(yr + ox, mtvm_dw_requantize_s8_mve(acc, g));
        }
        for (; ox < g->ow; ++ox, p += sw) {
            int32_t a = bias + vmladavq_s8(vldrbq_gather_offset_s8(p, ov), wv);
            a = ((int32_t)(((int64_t)a * g->mult) >> 32) + g->rnd) >> g->sh_r;
            a = a < g->lo ? g->lo : (a > g->hi ? g->hi : a);
            yr[ox] = (int8_t)a;
        }
    }
}

/* One channel: y[oy][ox] (int8 or uint8 bytes) from the plane x (bordered by the zero point
 * where the conv pads: the caller's scratch copy), weights w[kh * kw] and the bias with the
 * zero-point terms folded in. */
static MTVM_ALWAYS_INLINE void mtvm_dw_plane_s8_mve(const int8_t* x, int8_t* y, const int8_t* w,
                                                    int32_t bias,
                                                    const mtvm_dw_plane_s8_mve_t* g)
{
    int32_t fast = 0;   /* rows done with the weights in registers */
    if (g->kh == 3 && g->kw == 3) {
        fast = g->ow % 4 == 0 ? g->oh : (g->over ? g->oh - 1 : 0);
        mtvm_dw_rows3x3_s8_mve(x, y, w, bias, g, fast);
    }
    mtvm_dw_rows_s8_mve(x, y, w, bias, g, fast, g->oh);
}

/* rows x n bytes from src (rows n apart) to dst + at (rows stride apart): a padded plane's
 * interior, 16 bytes per load and store, the last ones predicated (a row of the
 * depthwise's scratch copy costs a few instructions instead of a memcpy call). */
static MTVM_ALWAYS_INLINE void mtvm_copy_rows_s8_mve(int8_t* dst, int32_t at, int32_t stride,
                                                     const int8_t* src, int32_t rows,
                                                     int32_t n)
{
    int32_t r, i;
    for (r = 0, dst += at; r < rows; ++r, dst += stride, src += n) {
        for (i = 0; i < n; i += 16) {
            const mve_pred16_t p = vctp8q((uint32_t)(n - i));
            vstrbq_p_s8(dst + i, vldrbq_z_s8(src + i, p), p);
        }
    }
}

/* One depthwise channel as emit_depthwise passes it: the plane x (row_w bytes per row), its
 * int8 weights w[kh * kw], the bias with the zero-point terms folded in, the fast
 * requantization (mult, rnd, sh_r) and clamp [lo, hi]; taps: the window's byte offsets for
 * mtvm_dw_plane_dot_s8_mve, or NULL for mtvm_dw_plane_s8_mve. y: int8 or uint8 bytes. */
static MTVM_ALWAYS_INLINE void mtvm_dw_channel_s8_mve(
    const int8_t* x, void* y, const int8_t* w, int32_t bias, int32_t mult, int32_t rnd,
    int32_t sh_r, const uint8_t* taps, int32_t row_w, int32_t oh, int32_t ow, int32_t kh,
    int32_t kw, int32_t sh, int32_t sw, int32_t dh, int32_t dw, int32_t lo, int32_t hi,
    int32_t over)
{
    const mtvm_dw_plane_s8_mve_t g = {row_w, oh, ow, kh, kw, sh, sw, dh, dw, mult, rnd, sh_r,
                                      lo, hi, over};
    if (taps != NULL) {
        mtvm_dw_plane_dot_s8_mve(x, (int8_t*)y, w, bias, taps, &g);
    } else {
        mtvm_dw_plane_s8_mve(x, (int8_t*)y, w, bias, &g);
    }
}

#endif  /* __ARM_FEATURE_MVE */

#endif  /* MTVM_DEPTHWISE_S8_MVE_H_ */
