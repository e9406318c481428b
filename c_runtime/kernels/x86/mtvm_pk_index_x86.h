/* mtvm_pk_index_x86.h: Where a weight sits in the packed int8 convolution rows.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_PK_INDEX_X86_H_
#define MTVM_PK_INDEX_X86_H_

#include <stdint.h>
#include "mtvm_int8_x86.h"

#if defined(MTVM_INT8_X86)
/* Index of weight (j, t) (channel j of a group of mg, tap t of kk) in the group's
 * packed rows (the inverse of conv_pack_index): per pair of channels, blocks of four
 * taps pair-permuted (w0 w2 w1 w3), channel j's then j + 1's, then the tail taps
 * interleaved in their column slots; an odd last channel keeps its own row. */
static inline int32_t mtvm_pk_index(int32_t j, int32_t t, int32_t kk, int32_t mg)
{
    const int32_t nb = kk / 4, tl = kk % 4, q = t % 4;
    const int32_t perm = q == 1 ? 2 : (q == 2 ? 1 : q);
    if ((j & 1) == 0 && j + 1 == mg) {                        /* its own row */
        return j * kk + (t < 4 * nb ? 4 * (t / 4) + perm : t);
    }
    if (t < 4 * nb) {
        return (j & ~1) * kk + 8 * (t / 4) + 4 * (j & 1) + perm;
    }
    {
        const int32_t r = t - 4 * nb;                         /* tail tap r */
        const int32_t slot = tl == 3 && r ? 3 - r : r;
        return (j & ~1) * kk + 8 * nb + 2 * slot + (j & 1);
    }
}
#endif

#endif  /* MTVM_PK_INDEX_X86_H_ */
