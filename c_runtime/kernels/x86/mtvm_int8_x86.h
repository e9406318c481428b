/* mtvm_int8_x86.h: Whether the int8 kernels take their x86 SIMD path (MTVM_INT8_X86).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_INT8_X86_H_
#define MTVM_INT8_X86_H_

#include <stdint.h>
#include <string.h>

/* x86 hosts (the same C benchmarked against onnxruntime): the int8 im2col
 * blocks in AVX2 (VPMADDWD) or AVX-512 VNNI (VPDPWSSD). MTVM_NO_SIMD forces the
 * portable loops. */
#if defined(__AVX2__) && !defined(MTVM_NO_SIMD) && !defined(__ARM_FEATURE_DSP)
#include <immintrin.h>
#define MTVM_INT8_X86 1

/* The low bytes of the eight int32 lanes of v (values already clamped to 8 bits) stored
 * at y: y[i] = (uint8_t)v[i]. */
static inline void mtvm_store_low_bytes8_x86(uint8_t* y, __m256i v)
{
    const __m256i low_bytes = _mm256_setr_epi8(   /* per 128-bit half: lanes 0..3 */
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    uint64_t q;
    v = _mm256_shuffle_epi8(v, low_bytes);
    q = (uint64_t)(uint32_t)_mm256_cvtsi256_si32(v) |
        (uint64_t)(uint32_t)_mm256_extract_epi32(v, 4) << 32;
    memcpy(y, &q, 8);
}
#endif

#endif  /* MTVM_INT8_X86_H_ */
