/* mtvm_colmean_8_dsp.h: QAvgPool whose window is a plane's whole height and one column (a
 * transformer's mean over its tokens: ReduceMean over axis 1) on the Arm DSP cores: the
 * column sums four columns a step in int16 lanes (mtvm_colsum4_8_dsp: per row one LDR, two
 * extends and two SADD16s), where the window loop took six instructions a byte; then each
 * column's sum less rows * zx requantized as the portable kernel does
 * (mtvm.ops.quantized.pool.QAvgPool): the same integers. And the mean of whole planes
 * (GlobalAveragePool: a CNN's last pool) four bytes a step with USADA8 (mtvm_sum_8_dsp),
 * where the window loop took seven instructions a byte.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_COLMEAN_8_DSP_H_
#define MTVM_COLMEAN_8_DSP_H_

#include <stdint.h>
#include "mtvm_mm_s8_dsp.h"
#include "mtvm_requantize.h"

/* y[j] = clamp(requantize(sum_r (x[r * cols + j] - zx), mult, shift) + zy, lo, hi), j < cols
 * (a multiple of 4); x int8 (u 0) or uint8 (u 1), rows within mtvm_colsum4_8_dsp's lanes
 * for the fast step. */
static MTVM_ALWAYS_INLINE void mtvm_colmean_8_dsp(const uint8_t* x, int u, int32_t rows,
                                                  int32_t cols, int32_t zx, int32_t mult,
                                                  int32_t shift, int32_t zy, int32_t lo,
                                                  int32_t hi, uint8_t* y)
{
    for (int32_t j = 0; j + 4 <= cols; j += 4) {
        int32_t s[4];
        mtvm_colsum4_8_dsp(x + j, u, rows, cols, s);
        for (int32_t q = 0; q < 4; ++q) {
            int32_t v = mtvm_requantize(s[q] - rows * zx, mult, shift) + zy;
            v = v < lo ? lo : (v > hi ? hi : v);
            y[j + q] = (uint8_t)v;
        }
    }
}

/* y[p] = clamp(requantize(sum_i (x[p * n + i] - zx), mult, shift) + zy, lo, hi), p < planes;
 * x int8 (u 0) or uint8 (u 1). */
static MTVM_ALWAYS_INLINE void mtvm_planemean_8_dsp(const uint8_t* x, int u, int32_t planes,
                                                    int32_t n, int32_t zx, int32_t mult,
                                                    int32_t shift, int32_t zy, int32_t lo,
                                                    int32_t hi, uint8_t* y)
{
    for (int32_t p = 0; p < planes; ++p) {
        int32_t v = mtvm_requantize(mtvm_sum_8_dsp(x + p * n, u, n) - n * zx, mult, shift) + zy;
        y[p] = (uint8_t)(v < lo ? lo : (v > hi ? hi : v));
    }
}

#endif  /* MTVM_COLMEAN_8_DSP_H_ */
