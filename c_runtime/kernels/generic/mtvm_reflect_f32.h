/* mtvm_reflect_f32.h: Reflection of a coordinate into [lo, hi] (GridSample padding_mode=reflection).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_REFLECT_F32_H_
#define MTVM_REFLECT_F32_H_

#include <stdint.h>

static inline float mtvm_reflect(float x, float lo, float hi)
{
    /* Reflect x by the nearer border until it lies in [lo, hi]. */
    const float rng = hi - lo;
    if (x < lo) {
        const float dx = lo - x;
        const int n = (int)(dx / rng);
        const float r = dx - (float)n * rng;
        return (n % 2 == 0) ? lo + r : hi - r;
    }
    if (x > hi) {
        const float dx = x - hi;
        const int n = (int)(dx / rng);
        const float r = dx - (float)n * rng;
        return (n % 2 == 0) ? hi - r : lo + r;
    }
    return x;
}

#endif  /* MTVM_REFLECT_F32_H_ */
