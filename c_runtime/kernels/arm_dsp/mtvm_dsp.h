/* mtvm_dsp.h: The Arm DSP extension's intrinsics, where the core has it.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DSP_H_
#define MTVM_DSP_H_

#include <stdint.h>

/* Cortex-M DSP extension (M4, M7, M33, M55): SIMD multiply-accumulate. */
#if defined(__ARM_FEATURE_DSP)
#include <arm_acle.h>
#endif

#endif  /* MTVM_DSP_H_ */
