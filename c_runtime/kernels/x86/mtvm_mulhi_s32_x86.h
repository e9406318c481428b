/* mtvm_mulhi_s32_x86.h: High words of int32 x int32 products, eight (AVX-512: sixteen)
 * lanes at a time.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MULHI_S32_X86_H_
#define MTVM_MULHI_S32_X86_H_

#include <stdint.h>
#include "mtvm_int8_x86.h"

#if defined(MTVM_INT8_X86)
/* (a * m) >> 32 per int32 lane: the high words of the exact 64-bit products (VPMULDQ
 * on the even lanes, and on the odd ones shifted down). */
static inline __m256i mtvm_mulhi_x86(__m256i a, __m256i m)
{
    const __m256i even = _mm256_srli_epi64(_mm256_mul_epi32(a, m), 32);
    const __m256i odd = _mm256_mul_epi32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(m, 32));
    return _mm256_blend_epi32(even, odd, 0xAA);
}

#if defined(__AVX512F__)
/* mtvm_mulhi_x86 on sixteen lanes. */
static inline __m512i mtvm_mulhi16_x86(__m512i a, __m512i m)
{
    const __m512i even = _mm512_srli_epi64(_mm512_mul_epi32(a, m), 32);
    const __m512i odd = _mm512_mul_epi32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(m, 32));
    return _mm512_mask_blend_epi32((__mmask16)0xAAAA, even, odd);
}
#endif
#endif

#endif  /* MTVM_MULHI_S32_X86_H_ */
