/* mtvm_e8m0.h: float8_e8m0fnu (a power of two) <-> float32.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_E8M0_H_
#define MTVM_E8M0_H_

#include <math.h>
#include <stdint.h>

static inline float mtvm_e8m0_to_f32(uint8_t c)
{
    /* float8e8m0fnu: an unsigned power of two 2^(c - 127); 0xff is NaN. */
    return c == 0xffu ? NAN : ldexpf(1.0f, (int)c - 127);
}

static inline uint8_t mtvm_f32_to_e8m0(float f, int round_mode, int saturate)
{
    /* round_mode: 0 up, 1 down, 2 nearest. */
    int e;
    float m;
    if (isnan(f)) {
        return 0xffu;
    }
    if (isinf(f)) {
        return saturate ? 0xfeu : 0xffu;
    }
    f = fabsf(f);
    if (f == 0.0f) {
        return 0u;
    }
    m = frexpf(f, &e);                  /* f = m * 2^e, m in [0.5, 1) */
    e -= 1;                             /* f = (2m) * 2^e, 2m in [1, 2) */
    if (m != 0.5f) {
        if (round_mode == 0 || (round_mode == 2 && 2.0f * m >= 1.5f)) {
            e += 1;
        }
    }
    e += 127;
    if (e < 0) {
        return 0u;
    }
    if (e > 254) {
        return saturate ? 0xfeu : 0xffu;
    }
    return (uint8_t)e;
}

#endif  /* MTVM_E8M0_H_ */
