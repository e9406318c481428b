/* mtvm_ror8.h: Byte rotation and the SXTB16/UXTB16-with-rotate the int8 kernels unpack with.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_ROR8_H_
#define MTVM_ROR8_H_

#include <stdint.h>
#include "mtvm_dsp.h"

/* x rotated right by 8 bits. */
static inline uint32_t mtvm_ror8(uint32_t x)
{
    return (x >> 8) | (x << 24);
}

#if defined(__ARM_FEATURE_DSP)
/* Sign/zero-extend bytes 1 and 3 into two 16-bit lanes: one SXTB16/UXTB16 with its
 * ROR #8 operand (what CMSIS-Core's __SXTB16_RORn does; gcc 12 does not fold the
 * rotate into the ACLE intrinsic by itself). */
#if defined(__GNUC__)
static inline int32_t mtvm_sxtb16_ror8(int32_t x)
{
    int32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}
static inline int32_t mtvm_uxtb16_ror8(int32_t x)
{
    int32_t r;
    __asm__("uxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}
#else
static inline int32_t mtvm_sxtb16_ror8(int32_t x) { return __sxtb16((int32_t)mtvm_ror8((uint32_t)x)); }
static inline int32_t mtvm_uxtb16_ror8(int32_t x) { return __uxtb16((int32_t)mtvm_ror8((uint32_t)x)); }
#endif
#endif

#endif  /* MTVM_ROR8_H_ */
