/* mtvm_float8.h: the 8-bit (and 4-bit e2m1) floats <-> float32, parametrized by their format.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_FLOAT8_H_
#define MTVM_FLOAT8_H_

#include <math.h>
#include <stdint.h>

static inline float mtvm_f8_to_f32(uint8_t c, int nbits, int ebits, int mbits, int bias,
                                   int fnuz)
{
    const unsigned signbit = 1u << (nbits - 1);
    const int e = (c >> mbits) & ((1 << ebits) - 1);
    const int m = c & ((1 << mbits) - 1);
    const float sign = (c & signbit) ? -1.0f : 1.0f;
    if (fnuz && c == signbit) {
        return NAN;
    }
    if (!fnuz && e == (1 << ebits) - 1) {
        if (ebits == 4 && m == (1 << mbits) - 1) {
            return NAN;                       /* e4m3fn: S.1111.111 */
        }
        if (ebits == 5) {
            return m ? NAN : sign * HUGE_VALF;  /* e5m2: IEEE-like */
        }
    }
    if (e == 0) {
        return sign * ldexpf((float)m, 1 - bias - mbits);
    }
    return sign * ldexpf((float)((1 << mbits) + m), e - bias - mbits);
}

static inline uint8_t mtvm_f32_to_f8(float f, int nbits, int mbits, int bias, int fnuz,
                                     int has_inf, float maxval, int saturate,
                                     uint8_t max_code, uint8_t nan_code)
{
    /* Also the 4-bit float4e2m1 (nbits 4): codes are the low nbits bits. */
    const uint8_t sign = (!fnuz || f != 0.0f) && signbit(f) ? (uint8_t)(1u << (nbits - 1)) : 0u;
    float a = fabsf(f), q, r;
    int e;
    if (isnan(f)) {
        return nan_code;
    }
    if (isinf(f)) {
        if (saturate) {
            return (uint8_t)(sign | max_code);
        }
        return has_inf ? (uint8_t)(sign | (max_code + 1u)) : nan_code;
    }
    if (a == 0.0f) {
        return sign;
    }
    (void)frexpf(a, &e);                        /* a = frac * 2^e, frac in [0.5, 1) */
    e -= 1;
    if (e < 1 - bias) {
        e = 1 - bias;                           /* subnormal range: fixed quantum */
    }
    q = ldexpf(1.0f, e - mbits);
    r = rintf(a / q) * q;                       /* round to nearest even */
    if (r > maxval) {
        if (saturate) {
            return (uint8_t)(sign | max_code);
        }
        return has_inf ? (uint8_t)(sign | (max_code + 1u)) : nan_code;
    }
    if (r == 0.0f) {
        return fnuz ? 0u : sign;
    }
    if (r < ldexpf(1.0f, 1 - bias)) {
        return (uint8_t)(sign | (uint8_t)(r / ldexpf(1.0f, 1 - bias - mbits)));
    }
    (void)frexpf(r, &e);
    e -= 1;
    return (uint8_t)(sign | (uint8_t)((e + bias) << mbits)
                     | (uint8_t)(r / ldexpf(1.0f, e - mbits) - (float)(1 << mbits)));
}

#endif  /* MTVM_FLOAT8_H_ */
