/* mtvm_f32_prelude.h: The per-target part of the float schedules: MTVM_FMAF and MTVM_F32_NR.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_F32_PRELUDE_H_
#define MTVM_F32_PRELUDE_H_

#include <math.h>
#include <stdint.h>

/* mtvm float schedules: the per-target part, chosen here once.
 * MTVM_FMAF: fused multiply-add where the FPU has it (Cortex-M4F vfma, x86 FMA),
 * else multiply and add (never a libm call). MTVM_F32_NR: output columns per
 * register block: 16 (two AVX vectors) on x86 with AVX2+FMA, else 4 scalars. */
#if defined(__FP_FAST_FMAF)
#define MTVM_FMAF(a, b, c) fmaf((a), (b), (c))
#else
#define MTVM_FMAF(a, b, c) ((a) * (b) + (c))
#endif
#if defined(__AVX512F__) && !defined(MTVM_NO_SIMD)
#include <immintrin.h>
#define MTVM_F32_NR 16
#elif defined(__AVX2__) && defined(__FMA__) && !defined(MTVM_NO_SIMD)
#include <immintrin.h>
#define MTVM_F32_NR 8
#else
#define MTVM_F32_NR 4
#endif

#endif  /* MTVM_F32_PRELUDE_H_ */
