/* mtvm_gemv_f32_prelude.h: Output columns per float GEMV block.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_GEMV_F32_PRELUDE_H_
#define MTVM_GEMV_F32_PRELUDE_H_

#include <stdint.h>
#include "mtvm_f32_prelude.h"

/* Output columns per GEMV block: 64 (4 x 16, AVX-512), 32 (4 x 8, AVX2), else 8
 * scalar accumulators. */
#if MTVM_F32_AVX512
#define MTVM_F32_GEMV_COLS 64
#elif MTVM_F32_AVX2
#define MTVM_F32_GEMV_COLS 32
#else
#define MTVM_F32_GEMV_COLS 8
#endif

#endif  /* MTVM_GEMV_F32_PRELUDE_H_ */
