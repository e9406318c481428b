/* mtvm_requantize.h: Fixed-point requantization of int32 accumulators (bit-exact with the
 * NumPy model mtvm.ops.quantized.common.requantize).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_REQUANTIZE_H_
#define MTVM_REQUANTIZE_H_

#include <stdint.h>

/* round(v / 2^n), n in [1, 62], halves to even (as ONNX's QuantizeLinear rounds). */
static inline int64_t mtvm_round_shift(int64_t v, int32_t n)
{
    int64_t half = (int64_t)1 << (n - 1);
    return (v + half - 1 + ((v >> n) & 1)) >> n;
}

/* round(acc * mult * 2^(shift - 31)) from the exact 64-bit product with one
 * rounding (TFLite's TFLITE_SINGLE_ROUNDING and CMSIS-NN's
 * CMSIS_NN_USE_SINGLE_ROUNDING requantization, but ties to even). mult in
 * [2^30, 2^31), shift in [-31, 30]; the result saturates to int32. */
static inline int32_t mtvm_requantize(int32_t acc, int32_t mult, int32_t shift)
{
    int64_t prod = (int64_t)acc * mult;
    if (shift < 0) {
        /* Shift by n = 31 - shift >= 32 on the high word (|hi| < 2^30), with
         * the low word deciding ties: the same result in 32-bit arithmetic. */
        int32_t hi = (int32_t)(prod >> 32);
        uint32_t lo = (uint32_t)prod;
        int32_t m = -1 - shift;                                   /* n - 32 */
        if (m == 0) {
            return hi + ((lo > 0x80000000u || (lo == 0x80000000u && (hi & 1))) ? 1 : 0);
        }
        return (hi + (1 << (m - 1)) - ((((hi >> m) & 1) == 0 && lo == 0) ? 1 : 0)) >> m;
    }
    int64_t r = mtvm_round_shift(prod, 31 - shift);
    return r > INT32_MAX ? INT32_MAX : (r < INT32_MIN ? INT32_MIN : (int32_t)r);
}

/* floor(n / d) for a divisor d fixed over many n (QSoftmax: one per row), where the
 * emitter has proved n < 2^31, quotients below 2^14 and d < 2^35 (quantized.softmax.
 * softmax_recip_ok). Hosts with double-precision vectors (x86-64, AArch64): n times d's
 * reciprocal plus 2^-36, truncated -- exact under those bounds (the two roundings move
 * n / d by at most q 2^-51 < 2^-37, less than the 2^-36 added; a quotient that is not
 * an integer lies at least 1 / d > 2^-35 below the next one), and a loop of them
 * vectorizes, where an integer division each stays scalar (2.5 ns an element in
 * kwt_tiny_int8's attention softmax). Elsewhere the integer division itself. */
#if defined(__x86_64__) || defined(__aarch64__)
typedef double mtvm_recip_t;
static inline mtvm_recip_t mtvm_recip_u32(uint32_t d)
{
    return 1.0 / (double)d;
}
static inline int32_t mtvm_div_recip_u32(uint32_t n, uint32_t d, mtvm_recip_t r)
{
    (void)d;
    return (int32_t)((double)(int32_t)n * r + 0x1p-36);
}
#else
typedef uint32_t mtvm_recip_t;
static inline mtvm_recip_t mtvm_recip_u32(uint32_t d)
{
    return d;
}
static inline int32_t mtvm_div_recip_u32(uint32_t n, uint32_t d, mtvm_recip_t r)
{
    (void)r;
    return (int32_t)(n / d);
}
#endif

#endif  /* MTVM_REQUANTIZE_H_ */
