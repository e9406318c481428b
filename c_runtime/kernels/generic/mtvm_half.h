/* mtvm_half.h: float16 and bfloat16 <-> float32, round to nearest even (as NumPy and ml_dtypes).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_HALF_H_
#define MTVM_HALF_H_

#include <math.h>
#include <stdint.h>

static inline float mtvm_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t man = (uint32_t)h & 0x3ffu;
    uint32_t x;
    float f;
    if (exp == 0x1fu) {
        x = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0u) {
        x = sign | ((exp + 112u) << 23) | (man << 13);
    } else {
        f = (float)man * 5.9604644775390625e-8f;   /* subnormal: man * 2^-24 */
        return sign ? -f : f;
    }
    memcpy(&f, &x, sizeof f);
    return f;
}

static inline uint16_t mtvm_f32_to_f16(float f)
{
    uint32_t x, sign, exp, man, h, rem;
    int32_t e;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000u;
    exp = (x >> 23) & 0xffu;
    man = x & 0x7fffffu;
    if (exp == 0xffu) {
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    }
    e = (int32_t)exp - 112;
    if (e >= 31) {
        return (uint16_t)(sign | 0x7c00u);
    }
    if (e <= 0) {                 /* subnormal half (or zero) */
        uint32_t shift, mid;
        if (e < -10) {
            return (uint16_t)sign;
        }
        man |= 0x800000u;
        shift = (uint32_t)(14 - e);
        h = man >> shift;
        rem = man & ((1u << shift) - 1u);
        mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (h & 1u))) {
            h++;
        }
        return (uint16_t)(sign | h);
    }
    h = ((uint32_t)e << 10) | (man >> 13);
    rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
        h++;                      /* a carry into the exponent is still right */
    }
    return (uint16_t)(sign | h);
}

static inline float mtvm_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static inline uint16_t mtvm_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u);   /* quiet NaN */
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

#endif  /* MTVM_HALF_H_ */
