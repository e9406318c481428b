/* mtvm_st16x2.h: Two int16 values stored as one word (the im2col column writer).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_ST16X2_H_
#define MTVM_ST16X2_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_dsp.h"

/* t[0] = a, t[1] = b (int16). On a DSP core one PKHBT and one word store (gcc builds
 * the word with UXTH + ORR, or merges halfword stores through spills). */
static inline void mtvm_st16x2(int16_t* t, int32_t a, int32_t b)
{
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__)
    uint32_t v;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(v) : "r"(a), "r"(b));
    memcpy(t, &v, 4);
#else
    t[0] = (int16_t)a;
    t[1] = (int16_t)b;
#endif
}

#endif  /* MTVM_ST16X2_H_ */
