/* mtvm_cvtr_f32_dsp.h: VCVTR: float to int32 in the current rounding mode (QuantizeLinear).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_CVTR_F32_DSP_H_
#define MTVM_CVTR_F32_DSP_H_

#include <stdint.h>
#include "mtvm_dsp.h"

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FP) && (__ARM_FP & 4) && \
    defined(__GNUC__)
#define MTVM_CVTR 1
/* VCVTR.S32.F32: v rounded in the current rounding mode, saturated to int32. */
static inline int32_t mtvm_cvtr(float v)
{
    int32_t r;
    float t;   /* a scratch register: v itself stays usable (no VMOV copy) */
    __asm__("vcvtr.s32.f32 %1, %2\n\tvmov %0, %1" : "=r"(r), "=&t"(t) : "t"(v));
    return r;
}
#endif

#endif  /* MTVM_CVTR_F32_DSP_H_ */
