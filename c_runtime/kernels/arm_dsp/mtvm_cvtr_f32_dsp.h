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

/* y[i] = sat8(qadd(VCVTR(x[i] / scale), zp)), i < n (a multiple of four), int8 (SSAT) or
 * uint8 (USAT) outputs: four elements a step in one block -- one VLDMIA, two VMOVs of a
 * register pair -- 25 instructions where the C took 33 (no NaN check: see mtvm_ioc_*). */
#define MTVM_QUANTIZE4_ASM(SAT) \
    "1:\n\t" \
    "vldmia %[x]!, {s8-s11}\n\t" \
    "vdiv.f32 s8, s8, %[sc]\n\t" \
    "vdiv.f32 s9, s9, %[sc]\n\t" \
    "vdiv.f32 s10, s10, %[sc]\n\t" \
    "vdiv.f32 s11, s11, %[sc]\n\t" \
    "vcvtr.s32.f32 s8, s8\n\t" \
    "vcvtr.s32.f32 s9, s9\n\t" \
    "vcvtr.s32.f32 s10, s10\n\t" \
    "vcvtr.s32.f32 s11, s11\n\t" \
    "vmov %[a], %[b], s8, s9\n\t" \
    "vmov %[c], %[d], s10, s11\n\t" \
    "qadd %[a], %[a], %[zp]\n\t" \
    "qadd %[b], %[b], %[zp]\n\t" \
    "qadd %[c], %[c], %[zp]\n\t" \
    "qadd %[d], %[d], %[zp]\n\t" \
    SAT " %[a], #8, %[a]\n\t" \
    SAT " %[b], #8, %[b]\n\t" \
    SAT " %[c], #8, %[c]\n\t" \
    SAT " %[d], #8, %[d]\n\t" \
    "strb %[b], [%[y], #1]\n\t" \
    "strb %[c], [%[y], #2]\n\t" \
    "strb %[d], [%[y], #3]\n\t" \
    "strb %[a], [%[y]], #4\n\t" \
    "cmp %[y], %[end]\n\t" \
    "bne 1b"
#define MTVM_QUANTIZE4_OPS \
    : [x] "+r"(x), [y] "+r"(y), [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [d] "=&r"(d) \
    : [sc] "t"(scale), [zp] "r"(zp), [end] "r"(end) \
    : "s8", "s9", "s10", "s11", "cc", "memory"

static inline void mtvm_quantize4_f32_s8(const float* x, int8_t* y, int32_t n, float scale,
                                         int32_t zp)
{
    const int8_t* end = y + n;
    int32_t a, b, c, d;
    if (n > 0) __asm__ volatile(MTVM_QUANTIZE4_ASM("ssat") MTVM_QUANTIZE4_OPS);
}

static inline void mtvm_quantize4_f32_u8(const float* x, uint8_t* y, int32_t n, float scale,
                                         int32_t zp)
{
    const uint8_t* end = y + n;
    int32_t a, b, c, d;
    if (n > 0) __asm__ volatile(MTVM_QUANTIZE4_ASM("usat") MTVM_QUANTIZE4_OPS);
}
#endif

#endif  /* MTVM_CVTR_F32_DSP_H_ */
