/* mtvm_gemv_s8_dsp.h: The Arm DSP int8 matrix-vector product of a batch-1 QMatMul (a
 * fully connected layer with constant weights): the input vector packed once per call into
 * int16 pairs (mtvm_packv_8_dsp of mtvm_mm_s8_dsp.h, one vector), then four weight rows a
 * pass. The weights are laid out at compile time for it (schedules/arm_dsp/gemv_s8.py,
 * interleaved_rows): each block of four rows holds, per eight columns, the eight bytes of
 * row 0, then rows 1, 2 and 3 (32 bytes), so that one pointer walks the block with LDRDs;
 * the n % 8 columns past the last whole eight follow as four rows of n % 8 bytes. Per eight
 * columns (Thumb-2 assembly): two LDRDs of the packed input shared by the four rows, and per
 * row one LDRD, four SXTB16 (UXTB16 for uint8) and four SMLADs -- 38 instructions per 32
 * MACs plus the loop (four eights a step), where rows read at a stride took one LDR per four
 * bytes and an LDRD of the input per four columns (21 per 16). The bytes past the last whole
 * eight are summed in C (a group of four with SMLAD, then one at a time). Without the DSP
 * extension (host tests, M3) or the assembly (-O0) the same sums in portable C.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_GEMV_S8_DSP_H_
#define MTVM_GEMV_S8_DSP_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_mm_s8_dsp.h"

#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__) && \
    defined(__OPTIMIZE__)
/* (13 registers: at -O0, with the frame pointer, GCC cannot give them all: C then) */
#define MTVM_GEMV_S8_DSP_THUMB2 1
/* One row's eight bytes, the next two words at [wp] (wp stepping on), widened into lanes
 * (0, 2) and (1, 3) of each word (EXT: "sxtb16" for int8, "uxtb16" for uint8), four
 * SMLADs with the packed input pairs x0..x3. */
#define MTVM_GEMV4_ROW_ASM(EXT, S) \
    "ldrd   %[lo], %[hi], [%[wp]], #8\n\t" \
    EXT "  %[h], %[lo], ror #8\n\t" \
    EXT "  %[lo], %[lo]\n\t" \
    "smlad  %[" S "], %[lo], %[x0], %[" S "]\n\t" \
    "smlad  %[" S "], %[h], %[x1], %[" S "]\n\t" \
    EXT "  %[h], %[hi], ror #8\n\t" \
    EXT "  %[hi], %[hi]\n\t" \
    "smlad  %[" S "], %[hi], %[x2], %[" S "]\n\t" \
    "smlad  %[" S "], %[h], %[x3], %[" S "]\n\t"
/* Eight columns of the four rows. */
#define MTVM_GEMV4_EIGHT_ASM(EXT) \
    "ldrd   %[x0], %[x1], [%[xp]], #8\n\t" \
    "ldrd   %[x2], %[x3], [%[xp]], #8\n\t" \
    MTVM_GEMV4_ROW_ASM(EXT, "s0") MTVM_GEMV4_ROW_ASM(EXT, "s1") \
    MTVM_GEMV4_ROW_ASM(EXT, "s2") MTVM_GEMV4_ROW_ASM(EXT, "s3")
#define MTVM_GEMV4_ASM_(EIGHTS)                                                             \
    do {                                                                                     \
        uint32_t lo, hi, h, x0, x1, x2, x3;                                                  \
        __asm__(EIGHTS                                                                       \
                : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3),                \
                  [wp] "+r"(wp), [xp] "+r"(xq), [lo] "=&r"(lo), [hi] "=&r"(hi),             \
                  [h] "=&r"(h), [x0] "=&r"(x0), [x1] "=&r"(x1), [x2] "=&r"(x2),            \
                  [x3] "=&r"(x3)                                                             \
                : : "memory");                                                               \
    } while (0)
/* One eight, and four (the loop's instructions per 128 MACs instead of per 32). */
#define MTVM_GEMV4_ASM(EXT) MTVM_GEMV4_ASM_(MTVM_GEMV4_EIGHT_ASM(EXT))
#define MTVM_GEMV4_ASM4(EXT)                                                                 \
    MTVM_GEMV4_ASM_(MTVM_GEMV4_EIGHT_ASM(EXT) MTVM_GEMV4_EIGHT_ASM(EXT)                      \
                    MTVM_GEMV4_EIGHT_ASM(EXT) MTVM_GEMV4_EIGHT_ASM(EXT))
#endif

/* *s<r> += sum of x[e] * (row r of the block w)[e], e < n, r < 4; w: a block of four rows
 * of n bytes in the interleaved layout (4 n bytes, word-aligned), int8 (w_u 0) or uint8
 * (1); x: n bytes, int8 (x_u 0) or uint8 (1), xp: x packed by mtvm_packv_8_dsp (one
 * vector). */
static MTVM_ALWAYS_INLINE void mtvm_gemv4_8_dsp(const uint8_t* w, int w_u, const uint32_t* xp,
                                                const uint8_t* x, int x_u, int32_t n,
                                                int32_t* acc0, int32_t* acc1, int32_t* acc2,
                                                int32_t* acc3)
{
    int32_t s0 = *acc0, s1 = *acc1, s2 = *acc2, s3 = *acc3;
    const int32_t n8 = n & ~7;
    const uint8_t* tail = w + 4 * n8;   /* the four rows' last n - n8 bytes, row after row */
    const int32_t nt = n - n8;
    int32_t e = 0;
#if defined(MTVM_GEMV_S8_DSP_THUMB2)
    {   /* in assembly (the C form spills the sums) */
        const uint8_t* wp = w;
        const uint32_t* xq = xp;
        for (; e + 32 <= n8; e += 32) {
            if (w_u) {
                MTVM_GEMV4_ASM4("uxtb16");
            } else {
                MTVM_GEMV4_ASM4("sxtb16");
            }
        }
        for (; e < n8; e += 8) {
            if (w_u) {
                MTVM_GEMV4_ASM("uxtb16");
            } else {
                MTVM_GEMV4_ASM("sxtb16");
            }
        }
    }
#else   /* (at -O0 on DSP cores too: the same sums, a byte at a time) */
    (void)xp;
    for (; e < n8; e += 8) {
        for (int32_t c = 0; c < 8; ++c) {
            const int32_t v = mtvm_byte_at(x, e + c, x_u);
            s0 += v * mtvm_byte_at(w, 4 * e + c, w_u);
            s1 += v * mtvm_byte_at(w, 4 * e + 8 + c, w_u);
            s2 += v * mtvm_byte_at(w, 4 * e + 16 + c, w_u);
            s3 += v * mtvm_byte_at(w, 4 * e + 24 + c, w_u);
        }
    }
#endif
#if defined(__ARM_FEATURE_DSP)
    if (nt >= 4) {   /* a group of four of the tail: lanes (0, 2) and (1, 3) */
        const uint32_t x0 = xp[n8 / 2], x1 = xp[n8 / 2 + 1];
        uint32_t b;
        memcpy(&b, tail, 4);
        s0 = __smlad(mtvm_widen_13(b, w_u), (int32_t)x1, __smlad(mtvm_widen_02(b, w_u),
                                                                 (int32_t)x0, s0));
        memcpy(&b, tail + nt, 4);
        s1 = __smlad(mtvm_widen_13(b, w_u), (int32_t)x1, __smlad(mtvm_widen_02(b, w_u),
                                                                 (int32_t)x0, s1));
        memcpy(&b, tail + 2 * nt, 4);
        s2 = __smlad(mtvm_widen_13(b, w_u), (int32_t)x1, __smlad(mtvm_widen_02(b, w_u),
                                                                 (int32_t)x0, s2));
        memcpy(&b, tail + 3 * nt, 4);
        s3 = __smlad(mtvm_widen_13(b, w_u), (int32_t)x1, __smlad(mtvm_widen_02(b, w_u),
                                                                 (int32_t)x0, s3));
        e += 4;
    }
#endif
    for (; e < n; ++e) {
        const int32_t v = mtvm_byte_at(x, e, x_u);
        const int32_t c = e - n8;
        s0 += v * mtvm_byte_at(tail, c, w_u);
        s1 += v * mtvm_byte_at(tail, nt + c, w_u);
        s2 += v * mtvm_byte_at(tail, 2 * nt + c, w_u);
        s3 += v * mtvm_byte_at(tail, 3 * nt + c, w_u);
    }
    *acc0 = s0; *acc1 = s1; *acc2 = s2; *acc3 = s3;
}

/* The named forms the generated kernels call: mtvm_gemv4_<x>_<w>_dsp(w, xp, x, n, s0, s1,
 * s2, s3) (w: a block of four rows, interleaved; s0..s3: int32 variables, the four sums,
 * updated in place). */
#define MTVM_GEMV4_(XU, WU, w, xp, x, n, s0, s1, s2, s3)                                     \
    mtvm_gemv4_8_dsp((const uint8_t*)(w), WU, (xp), (const uint8_t*)(x), XU, (n), &(s0),     \
                     &(s1), &(s2), &(s3))
#define mtvm_gemv4_s8_s8_dsp(w, xp, x, n, s0, s1, s2, s3) \
    MTVM_GEMV4_(0, 0, w, xp, x, n, s0, s1, s2, s3)
#define mtvm_gemv4_u8_s8_dsp(w, xp, x, n, s0, s1, s2, s3) \
    MTVM_GEMV4_(1, 0, w, xp, x, n, s0, s1, s2, s3)
#define mtvm_gemv4_s8_u8_dsp(w, xp, x, n, s0, s1, s2, s3) \
    MTVM_GEMV4_(0, 1, w, xp, x, n, s0, s1, s2, s3)
#define mtvm_gemv4_u8_u8_dsp(w, xp, x, n, s0, s1, s2, s3) \
    MTVM_GEMV4_(1, 1, w, xp, x, n, s0, s1, s2, s3)

#endif  /* MTVM_GEMV_S8_DSP_H_ */
