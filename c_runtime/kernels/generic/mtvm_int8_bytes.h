/* mtvm_int8_bytes.h: Reading int8 or uint8 data as integers, one byte or four at a time, for
 * the integer kernels that take either (the signedness is a constant argument: after
 * inlining, each call site keeps only its own instructions).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_INT8_BYTES_H_
#define MTVM_INT8_BYTES_H_

#include <stdint.h>
#include "mtvm_dsp.h"
#include "mtvm_ror8.h"

/* Forced inlining: the signedness flags below must fold at each call. */
#if defined(__GNUC__)
#define MTVM_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define MTVM_ALWAYS_INLINE inline
#endif

/* Byte i of p: int8 (is_unsigned 0) or uint8 (1) data. */
static MTVM_ALWAYS_INLINE int32_t mtvm_byte_at(const uint8_t* p, int32_t i, int is_unsigned)
{
    return is_unsigned ? (int32_t)p[i] : (int32_t)(int8_t)p[i];
}

#if defined(__ARM_FEATURE_DSP)
/* The four bytes of v as two pairs of 16-bit lanes: bytes (0, 2), with SXTB16 or UXTB16,
 * and bytes (1, 3), with the same ROR #8. */
static MTVM_ALWAYS_INLINE int32_t mtvm_widen_02(uint32_t v, int is_unsigned)
{
    return is_unsigned ? (int32_t)__uxtb16((int32_t)v) : (int32_t)__sxtb16((int32_t)v);
}

static MTVM_ALWAYS_INLINE int32_t mtvm_widen_13(uint32_t v, int is_unsigned)
{
    return is_unsigned ? mtvm_uxtb16_ror8((int32_t)v) : mtvm_sxtb16_ror8((int32_t)v);
}
#endif

#endif  /* MTVM_INT8_BYTES_H_ */
