/* mtvm_transpose8_dsp.h: The transpose of a byte matrix on the Arm DSP cores (Transpose of
 * int8 and uint8 tensors whose permutation is a 2-D transpose once the axes of size 1 are
 * dropped and adjacent axes merged: an attention's K^T).
 *
 * Blocks of four rows and four columns through registers: four word loads (unaligned
 * loads are allowed), UXTB16 and an ORR with a shifted operand interleave the bytes of
 * two rows ((a0 b0 a2 b2), (a1 b1 a3 b3)), PKHBT/PKHTB pair the halves of two such words
 * into the four columns, four word stores: about 27 instructions per 16 bytes where the
 * byte loop took 4 a byte. The last rows and columns (rows or cols not a multiple of
 * four) byte by byte. Without the DSP extension (host tests, M3) the byte loop.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_TRANSPOSE8_DSP_H_
#define MTVM_TRANSPOSE8_DSP_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "mtvm_dsp.h"
#include "mtvm_int8_bytes.h"

#if defined(__ARM_FEATURE_DSP)
/* high 0: (lo's low half, hi's low half) as one word, PKHBT; high 1: (lo's high half,
 * hi's high half), PKHTB (gcc builds them with UXTH or AND and an ORR). */
static MTVM_ALWAYS_INLINE uint32_t mtvm_pk_halves(uint32_t lo, uint32_t hi, int high)
{
#if defined(__GNUC__) && defined(__thumb2__)
    uint32_t r;
    if (high) {
        __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(hi), "r"(lo));
    } else {
        __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(lo), "r"(hi));
    }
    return r;
#else
    return high ? (lo >> 16) | (hi & 0xFFFF0000u) : (lo & 0xFFFFu) | (hi << 16);
#endif
}
#endif

/* dst[c * rows + r] = src[r * cols + c], r < rows, c < cols. (Each loop starts from its
 * own bound, not from where the one before stopped: gcc 12 warned, wrongly, of undefined
 * behaviour in the loops past the blocks.) */
static inline void mtvm_transpose8_dsp(const uint8_t* src, size_t rows, size_t cols,
                                       uint8_t* dst)
{
#if defined(__ARM_FEATURE_DSP)
    const size_t rows4 = rows & ~(size_t)3, cols4 = cols & ~(size_t)3;
    for (size_t r = 0; r < rows4; r += 4) {
        const uint8_t* s = src + r * cols;
        uint8_t* d = dst + r;
        for (size_t c = 0; c < cols4; c += 4, s += 4, d += 4 * rows) {
            uint32_t a, b, e, f;
            memcpy(&a, s, 4);
            memcpy(&b, s + cols, 4);
            memcpy(&e, s + 2 * cols, 4);
            memcpy(&f, s + 3 * cols, 4);
            /* bytes (a0 b0 a2 b2), (a1 b1 a3 b3), and the same of rows e, f */
            const uint32_t ab02 = __uxtb16(a) | (__uxtb16(b) << 8);
            const uint32_t ab13 = __uxtb16((a >> 8) | (a << 24)) | (b & 0xFF00FF00u);
            const uint32_t ef02 = __uxtb16(e) | (__uxtb16(f) << 8);
            const uint32_t ef13 = __uxtb16((e >> 8) | (e << 24)) | (f & 0xFF00FF00u);
            const uint32_t c0 = mtvm_pk_halves(ab02, ef02, 0);
            const uint32_t c1 = mtvm_pk_halves(ab13, ef13, 0);
            const uint32_t c2 = mtvm_pk_halves(ab02, ef02, 1);
            const uint32_t c3 = mtvm_pk_halves(ab13, ef13, 1);
            memcpy(d, &c0, 4);
            memcpy(d + rows, &c1, 4);
            memcpy(d + 2 * rows, &c2, 4);
            memcpy(d + 3 * rows, &c3, 4);
        }
        for (size_t c = cols4; c < cols; ++c) {   /* the last columns of these rows */
            for (size_t i = 0; i < 4; ++i) {
                dst[c * rows + r + i] = src[(r + i) * cols + c];
            }
        }
    }
#else
    const size_t rows4 = 0;
#endif
    for (size_t r = rows4; r < rows; ++r) {   /* the last rows (all without the DSP) */
        for (size_t c = 0; c < cols; ++c) {
            dst[c * rows + r] = src[r * cols + c];
        }
    }
}

#endif  /* MTVM_TRANSPOSE8_DSP_H_ */
