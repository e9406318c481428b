/* mtvm_maxpool_8_dsp.h: QMaxPool's 2-wide windows at stride 2 (a 1-D MaxPool 2 of the
 * IMU and audio nets, and 2x2 / 1x2 windows in 2-D), unpadded, four outputs a step on
 * cores with the DSP extension: the byte-wise maximum of two words is SSUB8 (or USUB8)
 * then SEL, so a row pair is maxed four bytes at a time, and the horizontal pairs of a
 * word are its bytes 0 and 2 after maxing it with itself shifted by a byte -- about 18
 * instructions for four outputs where the byte loop takes 9 an output (cnn1d_v10_int8's
 * first pool: 14,080 instructions for 1,536 outputs).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MAXPOOL_8_DSP_H_
#define MTVM_MAXPOOL_8_DSP_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"

#if defined(__ARM_FEATURE_DSP)
/* The byte-wise maximum of words a and b: int8 (u 0) or uint8 (u 1) lanes. */
static MTVM_ALWAYS_INLINE uint32_t mtvm_max4_8_dsp(uint32_t a, uint32_t b, int u)
{
    if (u) {
        (void)__usub8(a, b);    /* GE per byte: a >= b */
    } else {
        (void)__ssub8(a, b);
    }
    return __sel(a, b);
}
#endif

/* y[i] = max(x0[2 i], x0[2 i + 1]) and, with a second row x1 (else NULL), of x1[2 i],
 * x1[2 i + 1] too, for i < n; int8 (u 0) or uint8 (u 1). */
static MTVM_ALWAYS_INLINE void mtvm_maxpool2_8_dsp(const uint8_t* x0, const uint8_t* x1,
                                                   uint8_t* y, int32_t n, int u)
{
    const size_t count = n > 0 ? (size_t)n : 0u;
    size_t i = 0, rest = count;
#if defined(__ARM_FEATURE_DSP)
    for (; i + 4 <= count; i += 4) {
        uint32_t a, b;
        memcpy(&a, x0 + 2 * i, 4);
        memcpy(&b, x0 + 2 * i + 4, 4);
        if (x1 != NULL) {
            uint32_t c, d;
            memcpy(&c, x1 + 2 * i, 4);
            memcpy(&d, x1 + 2 * i + 4, 4);
            a = mtvm_max4_8_dsp(a, c, u);
            b = mtvm_max4_8_dsp(b, d, u);
        }
        /* bytes 0 and 2 of max(w, w >> 8) are the pairs (0, 1) and (2, 3) */
        a = (uint32_t)__uxtb16(mtvm_max4_8_dsp(a, a >> 8, u));
        b = (uint32_t)__uxtb16(mtvm_max4_8_dsp(b, b >> 8, u));
        a |= a >> 8;          /* bytes 0, 1: the two outputs of each */
        b |= b >> 8;
        const uint32_t w = (a & 0xFFFFu) | (b << 16);    /* PKHBT */
        memcpy(y + i, &w, 4);
    }
    /* the rest from pointers moved past the words (with the index carried over, gcc 12
     * warned of an overflow at 2^31 iterations of this loop for a constant count) */
    x0 += 2 * i;
    if (x1 != NULL) {
        x1 += 2 * i;
    }
    y += i;
    rest = count - i;
#endif
    for (i = 0; i < rest; ++i) {
        int32_t m = mtvm_byte_at(x0 + 2 * i, 0, u);
        const int32_t v = mtvm_byte_at(x0 + 2 * i, 1, u);
        m = v > m ? v : m;
        if (x1 != NULL) {
            const int32_t v0 = mtvm_byte_at(x1 + 2 * i, 0, u);
            const int32_t v1 = mtvm_byte_at(x1 + 2 * i, 1, u);
            m = v0 > m ? v0 : m;
            m = v1 > m ? v1 : m;
        }
        y[i] = (uint8_t)m;
    }
}

#endif  /* MTVM_MAXPOOL_8_DSP_H_ */
