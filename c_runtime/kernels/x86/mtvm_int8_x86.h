/* mtvm_int8_x86.h: Whether the int8 kernels take their x86 SIMD path (MTVM_INT8_X86).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_INT8_X86_H_
#define MTVM_INT8_X86_H_

#include <stdint.h>

/* x86 hosts (the same C benchmarked against onnxruntime): the int8 im2col
 * blocks in AVX2 (VPMADDWD) or AVX-512 VNNI (VPDPWSSD). MTVM_NO_SIMD forces the
 * portable loops. */
#if defined(__AVX2__) && !defined(MTVM_NO_SIMD) && !defined(__ARM_FEATURE_DSP)
#include <immintrin.h>
#define MTVM_INT8_X86 1
#endif

#endif  /* MTVM_INT8_X86_H_ */
