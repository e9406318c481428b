/* mtvm_f32_prelude.h: The per-target part of the float schedules: MTVM_FMAF and MTVM_F32_NR.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_F32_PRELUDE_H_
#define MTVM_F32_PRELUDE_H_

#include <math.h>
#include <stdint.h>

/* mtvm float schedules: the per-target part, chosen here once.
 * MTVM_FMAF: fused multiply-add where the FPU has it (Cortex-M4F vfma, x86 FMA),
 * else multiply and add (never a libm call). MTVM_F32_NR: output columns per
 * register block: 16 on x86 with AVX2+FMA (one AVX-512 vector, or two AVX ones), else 4
 * scalars. MTVM_F32_AVX512 / MTVM_F32_AVX2 (1 or 0): which x86 kernels the float
 * schedules use (the AVX-512 ones: band, direct, 16-lane masks). */
#if defined(__FP_FAST_FMAF)
#define MTVM_FMAF(a, b, c) fmaf((a), (b), (c))
#else
#define MTVM_FMAF(a, b, c) ((a) * (b) + (c))
#endif
#if defined(__AVX512F__) && !defined(MTVM_NO_SIMD)
#include <immintrin.h>
#define MTVM_F32_NR 16
#define MTVM_F32_AVX512 1
#define MTVM_F32_AVX2 0
#elif defined(__AVX2__) && defined(__FMA__) && !defined(MTVM_NO_SIMD)
#include <immintrin.h>
/* Two 8-float vectors per row: each broadcast weight feeds two FMAs (with one vector
 * per row the loop was bound by its broadcasts, 9 loads per 8 FMAs: 86-96 against
 * 108-115 GFLOPS for 8 x 16 tiles on a Zen 4 core, built for AVX2). */
#define MTVM_F32_NR 16
#define MTVM_F32_AVX512 0
#define MTVM_F32_AVX2 1
#else
#define MTVM_F32_NR 4
#define MTVM_F32_AVX512 0
#define MTVM_F32_AVX2 0
#endif

#endif  /* MTVM_F32_PRELUDE_H_ */
