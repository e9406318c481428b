/* mtvm_mmx1_s16.h: The last output channel of a QConv group with an odd channel count,
 * over one or two pixels of the im2col column (mtvm_mm2x2_s16's layout).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MMX1_S16_H_
#define MTVM_MMX1_S16_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_im2col_slots.h"

/* acc[p] += p-th pixel's column . w for npx (1 or 2) pixels; w (uint8 data when w_u,
 * else int8): one channel's row, blocks of four taps pair-permuted (w0 w2 w1 w3), then
 * the tl tail taps in order; the column: per block four int16 taps of pixel 0, then
 * pixel 1's, then the tail words (mtvm.ops.quantized.conv.tail_slot). */
static MTVM_ALWAYS_INLINE void mtvm_mmx1_s16(const int16_t* c, const uint8_t* w, int w_u,
                                             int32_t nb, int32_t tl, int32_t npx,
                                             int32_t acc[2])
{
    int32_t s0 = acc[0], s1 = acc[1];
    const int16_t* t = c + 8 * nb;
    for (; nb > 0; --nb, c += 8, w += 4) {
#if defined(__ARM_FEATURE_DSP)
        uint32_t x0, x1, x2, x3, wa;
        memcpy(&x0, c, 4);
        memcpy(&x1, c + 2, 4);
        memcpy(&x2, c + 4, 4);   /* (not set for one pixel: not used) */
        memcpy(&x3, c + 6, 4);
        memcpy(&wa, w, 4);
        s0 = __smlad((int32_t)x0, mtvm_widen_02(wa, w_u), s0);
        s0 = __smlad((int32_t)x1, mtvm_widen_13(wa, w_u), s0);
        if (npx == 2) {
            s1 = __smlad((int32_t)x2, mtvm_widen_02(wa, w_u), s1);
            s1 = __smlad((int32_t)x3, mtvm_widen_13(wa, w_u), s1);
        }
#else
        for (int32_t j = 0; j < 4; ++j) {
            const int32_t q = j == 1 ? 2 : (j == 2 ? 1 : j);
            s0 += (int32_t)c[j] * mtvm_byte_at(w, q, w_u);
            if (npx == 2) s1 += (int32_t)c[4 + j] * mtvm_byte_at(w, q, w_u);
        }
#endif
    }
    for (int32_t j = 0; j < tl; ++j) {   /* the column's tail words: see tail_slot */
        const int32_t q = mtvm_col_tail_slot(j, tl);
        s0 += (int32_t)t[q] * mtvm_byte_at(w, j, w_u);
        if (npx == 2) s1 += (int32_t)t[(tl <= 2 ? 2 : 4) + q] * mtvm_byte_at(w, j, w_u);
    }
    acc[0] = s0;
    acc[1] = s1;
}

/* The named forms the generated kernels call. */
static inline void mtvm_mmx1_s16_s8(const int16_t* c, const int8_t* w, int32_t nb, int32_t tl,
                                    int32_t npx, int32_t acc[2])
{
    mtvm_mmx1_s16(c, (const uint8_t*)w, 0, nb, tl, npx, acc);
}

static inline void mtvm_mmx1_s16_u8(const int16_t* c, const uint8_t* w, int32_t nb, int32_t tl,
                                    int32_t npx, int32_t acc[2])
{
    mtvm_mmx1_s16(c, w, 1, nb, tl, npx, acc);
}

#endif  /* MTVM_MMX1_S16_H_ */
