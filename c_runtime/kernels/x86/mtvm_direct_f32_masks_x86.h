/* mtvm_direct_f32_masks_x86.h: AVX-512 lane masks of the direct float convolution.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DIRECT_F32_MASKS_X86_H_
#define MTVM_DIRECT_F32_MASKS_X86_H_

#include <stdint.h>
#include "mtvm_f32_prelude.h"

#if MTVM_F32_AVX512
/* Lanes [lo, hi) of the 16 starting at position base, as a mask. */
static inline __mmask16 mtvm_lanes16(int lo, int hi, int base)
{
    lo -= base; hi -= base;
    lo = lo < 0 ? 0 : lo > 16 ? 16 : lo;
    hi = hi < 0 ? 0 : hi > 16 ? 16 : hi;
    return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

/* Lanes of the 16 positions from p whose column p % w plus dx is inside [0, w). */
static inline __mmask16 mtvm_cols16(int p, int w, int dx)
{
    unsigned m = 0;
    int ow = p % w;
    for (int l = 0; l < 16; ++l, ow = ow + 1 == w ? 0 : ow + 1)
        m |= (unsigned)((unsigned)(ow + dx) < (unsigned)w) << l;
    return (__mmask16)m;
}
#endif

#endif  /* MTVM_DIRECT_F32_MASKS_X86_H_ */
