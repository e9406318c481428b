/* mtvm_requantize_nt.h: Requantization for multipliers that can never produce an exact tie.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_REQUANTIZE_NT_H_
#define MTVM_REQUANTIZE_NT_H_

#include <stdint.h>

/* mtvm_requantize for multipliers whose product with an int32 is never an exact
 * tie (mult has fewer than -shift trailing zero bits, shift <= -2; checked at
 * compile time): rounding half up then equals rounding half to even, and needs
 * only the high word of the product. */
static inline int32_t mtvm_requantize_nt(int32_t acc, int32_t mult, int32_t shift)
{
    int32_t hi = (int32_t)(((int64_t)acc * mult) >> 32);
    int32_t m = -1 - shift;                                       /* 1 .. 30 */
    return (hi + (1 << (m - 1))) >> m;
}

#endif  /* MTVM_REQUANTIZE_NT_H_ */
