/* mtvm_lut_8_dsp.h: a 256-entry table applied to 8-bit data (QLut, and QAdd / QMul by a
 * constant scalar), four bytes a step for 32-bit cores: one word load, then per byte one
 * extend-with-rotate (SXTB/UXTB ROR #8/#16, or ASR/LSR #24) as the index, the table load
 * and the store -- about 3.5 instructions a byte where the byte loop takes 6.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_LUT_8_DSP_H_
#define MTVM_LUT_8_DSP_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"

/* Byte l (0..3) of w as an index: int8 (x_u 0, -128..127) or uint8 (x_u 1, 0..255). */
static MTVM_ALWAYS_INLINE int32_t mtvm_lut_index(uint32_t w, int32_t l, int x_u)
{
    if (l == 3) {
        return x_u ? (int32_t)(w >> 24) : (int32_t)w >> 24;
    }
    return x_u ? (int32_t)(uint8_t)(w >> (8 * l)) : (int32_t)(int8_t)(w >> (8 * l));
}

/* y[i] = table[x[i] - min], i < n: x int8 (x_u 0, min -128) or uint8 (x_u 1, min 0); y and
 * the table 8-bit of either type; y may be x (each word is read before its bytes are
 * written). */
static MTVM_ALWAYS_INLINE void mtvm_lut_8_dsp(const uint8_t* x, int x_u, uint8_t* y,
                                              int32_t n, const uint8_t* table)
{
    const uint8_t* t = x_u ? table : table + 128;    /* indexed by the value itself */
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, x + i, 4);
        const uint8_t b0 = t[mtvm_lut_index(w, 0, x_u)], b1 = t[mtvm_lut_index(w, 1, x_u)];
        const uint8_t b2 = t[mtvm_lut_index(w, 2, x_u)], b3 = t[mtvm_lut_index(w, 3, x_u)];
        y[i] = b0;
        y[i + 1] = b1;
        y[i + 2] = b2;
        y[i + 3] = b3;
    }
    for (; i < n; ++i) {
        y[i] = t[mtvm_byte_at(x, i, x_u)];
    }
}

/* The same with 32-bit entries (a DequantizeLinear's 256 floats, moved as their bits): y[i]
 * = table[x[i] - min]; y does not overlap x. */
static MTVM_ALWAYS_INLINE void mtvm_lut32_8_dsp(const uint8_t* x, int x_u, uint32_t* y,
                                                int32_t n, const uint32_t* table)
{
    const uint32_t* t = x_u ? table : table + 128;
    /* pointer steps: with an index, gcc 12 -O2 warned of an overflowing iteration of
     * the tail loop (-Waggressive-loop-optimizations), which -Werror makes an error */
    const uint8_t* const end4 = x + (n & ~3);
    for (; x != end4; x += 4, y += 4) {
        uint32_t w;
        memcpy(&w, x, 4);
        y[0] = t[mtvm_lut_index(w, 0, x_u)];
        y[1] = t[mtvm_lut_index(w, 1, x_u)];
        y[2] = t[mtvm_lut_index(w, 2, x_u)];
        y[3] = t[mtvm_lut_index(w, 3, x_u)];
    }
    for (int32_t i = 0; i < (n & 3); ++i) {
        y[i] = t[mtvm_byte_at(x, i, x_u)];
    }
}

/* The named forms: the input int8 (s8) or uint8 (u8); output and table bytes of either type
 * (mtvm_lut_*), or 32-bit values of either type (mtvm_lut32_*). */
static MTVM_ALWAYS_INLINE void mtvm_lut_s8_dsp(const int8_t* x, void* y, int32_t n,
                                               const void* table)
{
    mtvm_lut_8_dsp((const uint8_t*)x, 0, (uint8_t*)y, n, (const uint8_t*)table);
}
static MTVM_ALWAYS_INLINE void mtvm_lut_u8_dsp(const uint8_t* x, void* y, int32_t n,
                                               const void* table)
{
    mtvm_lut_8_dsp(x, 1, (uint8_t*)y, n, (const uint8_t*)table);
}

static MTVM_ALWAYS_INLINE void mtvm_lut32_s8_dsp(const int8_t* x, void* y, int32_t n,
                                                 const void* table)
{
    mtvm_lut32_8_dsp((const uint8_t*)x, 0, (uint32_t*)y, n, (const uint32_t*)table);
}
static MTVM_ALWAYS_INLINE void mtvm_lut32_u8_dsp(const uint8_t* x, void* y, int32_t n,
                                                 const void* table)
{
    mtvm_lut32_8_dsp(x, 1, (uint32_t*)y, n, (const uint32_t*)table);
}

#endif  /* MTVM_LUT_8_DSP_H_ */
