/* mtvm_gemv_s8_dsp.h: The Arm DSP int8 matrix-vector product of a batch-1 QMatMul (a
 * fully connected layer with constant weights): the input vector packed once per call into
 * int16 pairs (mtvm_packv_8_dsp of mtvm_mm_s8_dsp.h, one vector), then four weight rows a
 * pass read in place, four groups of four bytes a step, then two (Thumb-2 assembly): per
 * group one LDRD of the packed input shared by the four rows, and per row one LDR, two SXTB16
 * (UXTB16 for uint8) and two SMLADs -- 21 instructions per 16 MACs plus the loop (two per
 * 64), where the dense kernel also widens the input for each group (23 per 16 plus three).
 * The rows are stride bytes apart: rows 1 and 3 read at a register offset from rows 0 and
 * 2. The bytes past the last whole group are summed one
 * at a time from the unpacked input x. Without the DSP extension (host tests, M3) the same
 * sums in portable C.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_GEMV_S8_DSP_H_
#define MTVM_GEMV_S8_DSP_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_mm_s8_dsp.h"

#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__) && \
    defined(__OPTIMIZE__)
/* (12 registers: at -O0, with the frame pointer, GCC cannot give them all: C then) */
#define MTVM_GEMV_S8_DSP_THUMB2 1
/* One weight row's group in Thumb-2: its word at [P, OFF] (P post-incremented when OFF is
 * "#4]"-style), widened into lanes (0, 2) and (1, 3) (EXT: "sxtb16" for int8, "uxtb16" for
 * uint8), two SMLADs with the packed input pair (x0, x1). */
#define MTVM_GEMV4_ROW_ASM(EXT, S, LOAD) \
    LOAD "\n\t" \
    EXT "  %[h], %[b], ror #8\n\t" \
    EXT "  %[b], %[b]\n\t" \
    "smlad  %[" S "], %[b], %[x0], %[" S "]\n\t" \
    "smlad  %[" S "], %[h], %[x1], %[" S "]\n\t"
/* One group of four rows: rows 1 and 3 at [wa, st] and [wb, st], then rows 0 and 2 with
 * the pointers stepping on. */
#define MTVM_GEMV4_GROUP_ASM(EXT) \
    "ldrd   %[x0], %[x1], [%[xp]], #8\n\t" \
    MTVM_GEMV4_ROW_ASM(EXT, "s1", "ldr    %[b], [%[wa], %[st]]") \
    MTVM_GEMV4_ROW_ASM(EXT, "s0", "ldr    %[b], [%[wa]], #4") \
    MTVM_GEMV4_ROW_ASM(EXT, "s3", "ldr    %[b], [%[wb], %[st]]") \
    MTVM_GEMV4_ROW_ASM(EXT, "s2", "ldr    %[b], [%[wb]], #4")
#define MTVM_GEMV4_ASM_(GROUPS)                                                              \
    do {                                                                                     \
        uint32_t b, h, x0, x1;                                                               \
        __asm__(GROUPS                                                                       \
                : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3),                \
                  [wa] "+r"(wa), [wb] "+r"(wb), [xp] "+r"(xp), [b] "=&r"(b), [h] "=&r"(h),  \
                  [x0] "=&r"(x0), [x1] "=&r"(x1)                                             \
                : [st] "r"(stride) : "memory");                                              \
    } while (0)
/* Two groups (eight bytes of each row) and four groups (sixteen: the loop's two
 * instructions per 64 MACs instead of per 32). */
#define MTVM_GEMV4_ASM(EXT) MTVM_GEMV4_ASM_(MTVM_GEMV4_GROUP_ASM(EXT) MTVM_GEMV4_GROUP_ASM(EXT))
#define MTVM_GEMV4_ASM4(EXT)                                                                  \
    MTVM_GEMV4_ASM_(MTVM_GEMV4_GROUP_ASM(EXT) MTVM_GEMV4_GROUP_ASM(EXT)                       \
                    MTVM_GEMV4_GROUP_ASM(EXT) MTVM_GEMV4_GROUP_ASM(EXT))
#endif

/* *s<r> += sum of x[e] * w[r * stride + e], e < n, r < 4; w: int8 (w_u 0) or uint8 (1);
 * x: n bytes, int8 (x_u 0) or uint8 (1), xp: x packed by mtvm_packv_8_dsp (one vector). */
static MTVM_ALWAYS_INLINE void mtvm_gemv4_8_dsp(const uint8_t* w, int w_u, int32_t stride,
                                                const uint32_t* xp, const uint8_t* x,
                                                int x_u, int32_t n, int32_t* acc0,
                                                int32_t* acc1, int32_t* acc2, int32_t* acc3)
{
    int32_t s0 = *acc0, s1 = *acc1, s2 = *acc2, s3 = *acc3;
    int32_t e = 0;
#if defined(__ARM_FEATURE_DSP)
    const uint8_t* w1 = w + stride;
    const uint8_t* w2 = w + 2 * stride;
    const uint8_t* w3 = w + 3 * stride;
#if defined(MTVM_GEMV_S8_DSP_THUMB2)
    {   /* two groups a step in assembly (the C form spills the sums) */
        const uint8_t* wa = w + e;
        const uint8_t* wb = w + 2 * stride + e;
        for (; e + 16 <= n; e += 16) {
            if (w_u) {
                MTVM_GEMV4_ASM4("uxtb16");
            } else {
                MTVM_GEMV4_ASM4("sxtb16");
            }
        }
        for (; e + 8 <= n; e += 8) {
            if (w_u) {
                MTVM_GEMV4_ASM("uxtb16");
            } else {
                MTVM_GEMV4_ASM("sxtb16");
            }
        }
    }
#endif
#define MTVM_GEMV4_ROW(S, P, OFF, XL, XH)                                                   \
    do {                                                                                     \
        uint32_t b;                                                                          \
        memcpy(&b, (P) + e + (OFF), 4);                                                      \
        S = __smlad(mtvm_widen_13(b, w_u), (int32_t)(XH),                                    \
                    __smlad(mtvm_widen_02(b, w_u), (int32_t)(XL), S));                       \
    } while (0)
    for (; e + 4 <= n; e += 4, xp += 2) {   /* a group a step */
        const uint32_t x0 = xp[0], x1 = xp[1];
        MTVM_GEMV4_ROW(s0, w, 0, x0, x1);
        MTVM_GEMV4_ROW(s1, w1, 0, x0, x1);
        MTVM_GEMV4_ROW(s2, w2, 0, x0, x1);
        MTVM_GEMV4_ROW(s3, w3, 0, x0, x1);
    }
#undef MTVM_GEMV4_ROW
#else
    (void)xp;
#endif
    for (; e < n; ++e) {
        const int32_t v = mtvm_byte_at(x, e, x_u);
        s0 += v * mtvm_byte_at(w, e, w_u);
        s1 += v * mtvm_byte_at(w, stride + e, w_u);
        s2 += v * mtvm_byte_at(w, 2 * stride + e, w_u);
        s3 += v * mtvm_byte_at(w, 3 * stride + e, w_u);
    }
    *acc0 = s0; *acc1 = s1; *acc2 = s2; *acc3 = s3;
}

/* The named forms the generated kernels call: mtvm_gemv4_<x>_<w>_dsp(w, stride, xp, x, n,
 * s0, s1, s2, s3) (s0..s3: int32 variables, the four sums, updated in place). */
#define MTVM_GEMV4_(XU, WU, w, stride, xp, x, n, s0, s1, s2, s3)                            \
    mtvm_gemv4_8_dsp((const uint8_t*)(w), WU, (stride), (xp), (const uint8_t*)(x), XU, (n), \
                     &(s0), &(s1), &(s2), &(s3))
#define mtvm_gemv4_s8_s8_dsp(w, st, xp, x, n, s0, s1, s2, s3) \
    MTVM_GEMV4_(0, 0, w, st, xp, x, n, s0, s1, s2, s3)
#define mtvm_gemv4_u8_s8_dsp(w, st, xp, x, n, s0, s1, s2, s3) \
    MTVM_GEMV4_(1, 0, w, st, xp, x, n, s0, s1, s2, s3)
#define mtvm_gemv4_s8_u8_dsp(w, st, xp, x, n, s0, s1, s2, s3) \
    MTVM_GEMV4_(0, 1, w, st, xp, x, n, s0, s1, s2, s3)
#define mtvm_gemv4_u8_u8_dsp(w, st, xp, x, n, s0, s1, s2, s3) \
    MTVM_GEMV4_(1, 1, w, st, xp, x, n, s0, s1, s2, s3)

#endif  /* MTVM_GEMV_S8_DSP_H_ */
