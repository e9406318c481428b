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

/* The FPSCR's cumulative invalid-operation flag (IOC, bit 0), which VCVTR raises for a NaN
 * or a value out of int32's range: QuantizeLinear converts without looking at each value,
 * then redoes the tensor carefully only when the flag says something was invalid.
 * mtvm_ioc_clear clears it and returns the FPSCR as it was; mtvm_ioc_take returns whether
 * it was raised since and gives the flag back its earlier state too (it is sticky). The
 * memory clobbers keep the loop's loads and stores between the two. */
static inline uint32_t mtvm_ioc_clear(void)
{
    uint32_t s;
    __asm__ volatile("vmrs %0, fpscr" : "=r"(s) : : "memory");
    __asm__ volatile("vmsr fpscr, %0" : : "r"(s & ~1u) : "memory");
    return s;
}

static inline int mtvm_ioc_take(uint32_t before)
{
    uint32_t s;
    __asm__ volatile("vmrs %0, fpscr" : "=r"(s) : : "memory");
    __asm__ volatile("vmsr fpscr, %0" : : "r"(s | (before & 1u)) : "memory");
    return (int)(s & 1u);
}
#endif

#endif  /* MTVM_CVTR_F32_DSP_H_ */
