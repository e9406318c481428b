/* mtvm_dot_8_mve.h: int32 dot products of int8 vectors on Helium (MVE) cores, one row or
 * four (QMatMul's and QBatchMatMul's dense loop, mtvm.ops.quantized.matmul.dense_lines):
 * VMLADAVA.S8, sixteen int8 MACs into a scalar per instruction, the last bytes through
 * zeroing predicated loads. Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DOT_8_MVE_H_
#define MTVM_DOT_8_MVE_H_

#include <stdint.h>
#include "mtvm_int8_bytes.h"   /* MTVM_ALWAYS_INLINE */

#if defined(__ARM_FEATURE_MVE)
#include <arm_mve.h>

/* sum of a[i] * b[i], i < n: the same exact integer as mtvm_dot_s8_s8. */
static MTVM_ALWAYS_INLINE int32_t mtvm_dot_s8_s8_mve(const int8_t* a, const int8_t* b,
                                                     int32_t n)
{
    int32_t acc = 0;
    for (; n >= 16; n -= 16, a += 16, b += 16) {
        acc = vmladavaq_s8(acc, vld1q_s8(a), vld1q_s8(b));
    }
    if (n > 0) {   /* lanes past n load zero (and read nothing) */
        const mve_pred16_t p = vctp8q((uint32_t)n);
        acc = vmladavaq_s8(acc, vldrbq_z_s8(a, p), vldrbq_z_s8(b, p));
    }
    return acc;
}

/* acc[r] += sum of a[i] * b[r * stride + i], i < n, r < 4: `a` loaded once per 16 bytes
 * for the four rows (four sums: even registers enough for VMLADAVA). */
static MTVM_ALWAYS_INLINE void mtvm_dot4_s8_s8_mve(const int8_t* a, const int8_t* b,
                                                   int32_t stride, int32_t n, int32_t acc[4])
{
    const int8_t* b1 = b + stride;
    const int8_t* b2 = b + 2 * stride;
    const int8_t* b3 = b + 3 * stride;
    int32_t s0 = acc[0], s1 = acc[1], s2 = acc[2], s3 = acc[3];
    for (; n >= 16; n -= 16, a += 16, b += 16, b1 += 16, b2 += 16, b3 += 16) {
        const int8x16_t av = vld1q_s8(a);
        s0 = vmladavaq_s8(s0, av, vld1q_s8(b));
        s1 = vmladavaq_s8(s1, av, vld1q_s8(b1));
        s2 = vmladavaq_s8(s2, av, vld1q_s8(b2));
        s3 = vmladavaq_s8(s3, av, vld1q_s8(b3));
    }
    if (n > 0) {
        const mve_pred16_t p = vctp8q((uint32_t)n);
        const int8x16_t av = vldrbq_z_s8(a, p);
        s0 = vmladavaq_s8(s0, av, vldrbq_z_s8(b, p));
        s1 = vmladavaq_s8(s1, av, vldrbq_z_s8(b1, p));
        s2 = vmladavaq_s8(s2, av, vldrbq_z_s8(b2, p));
        s3 = vmladavaq_s8(s3, av, vldrbq_z_s8(b3, p));
    }
    acc[0] = s0;
    acc[1] = s1;
    acc[2] = s2;
    acc[3] = s3;
}

#endif  /* __ARM_FEATURE_MVE */

#endif  /* MTVM_DOT_8_MVE_H_ */
