/* mtvm_mm_s8_dsp.h: The Arm DSP int8 matrix-product micro-kernel of QMatMul and
 * QBatchMatMul: one byte vector (int8 or uint8, read in place) times V = 4, 5 or 6 vectors
 * packed once per call into int16 pairs (mtvm_packv_8_dsp), V int32 sums per pass.
 *
 * The packed layout, per group of four elements e0..e3 and per vector r < V, two words:
 * (e0 | e2 << 16) and (e1 | e3 << 16) -- the lanes SXTB16/UXTB16 give a byte word
 * without and with ROR #8 -- so one group of the byte vector is one LDR and two
 * extends, and each packed vector two LDRs (an LDRD) and two SMLADs: 3 + 3 V instructions
 * per 4 V MACs (15 per 16 with four vectors, 21 per 24 with six). A group past the end of
 * a vector holds zeros, and so does a missing vector (fewer than V): their sums are exact
 * and unused.
 * Without the DSP extension (host tests, M3) the same layout is read in portable C.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MM_S8_DSP_H_
#define MTVM_MM_S8_DSP_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"

/* Words of one packed block of V vectors of n elements. */
#define MTVM_PACKV_WORDS(V, n) (2 * (V) * (((n) + 3) / 4))

/* Packs nv (<= V) vectors of n elements into dst (MTVM_PACKV_WORDS(V, n) words): element e
 * of vector r is src[r * vs + e * es], int8 (is_unsigned 0) or uint8 (1). */
static MTVM_ALWAYS_INLINE void mtvm_packv_8_dsp(const uint8_t* src, int is_unsigned,
                                                int32_t vs, int32_t es, int32_t nv, int32_t V,
                                                int32_t n, uint32_t* dst)
{
    int32_t g = 0;
#if defined(__ARM_FEATURE_DSP)
    if (nv == V && es == 1) {   /* contiguous: a word and its two extends per group */
        for (; g + 4 <= n; g += 4, dst += 2 * V) {
            for (int32_t r = 0; r < V; ++r) {
                uint32_t w;
                memcpy(&w, src + r * vs + g, 4);   /* one LDR (unaligned allowed) */
                dst[2 * r] = (uint32_t)mtvm_widen_02(w, is_unsigned);
                dst[2 * r + 1] = (uint32_t)mtvm_widen_13(w, is_unsigned);
            }
        }
    }
#endif
    if (nv == V) {   /* full groups of full vectors */
        for (; g + 4 <= n; g += 4, dst += 2 * V) {
            for (int32_t r = 0; r < V; ++r) {
                const uint8_t* s = src + r * vs + g * es;
                const uint32_t v0 = (uint16_t)mtvm_byte_at(s, 0, is_unsigned);
                const uint32_t v1 = (uint16_t)mtvm_byte_at(s, es, is_unsigned);
                const uint32_t v2 = (uint16_t)mtvm_byte_at(s, 2 * es, is_unsigned);
                const uint32_t v3 = (uint16_t)mtvm_byte_at(s, 3 * es, is_unsigned);
                dst[2 * r] = v0 | (v2 << 16);
                dst[2 * r + 1] = v1 | (v3 << 16);
            }
        }
    }
    for (; g < n; g += 4, dst += 2 * V) {   /* the rest, zero-padded */
        for (int32_t r = 0; r < V; ++r) {
            uint32_t v[4] = { 0, 0, 0, 0 };
            for (int32_t e = 0; r < nv && e < 4 && g + e < n; ++e) {
                v[e] = (uint16_t)mtvm_byte_at(src, r * vs + (g + e) * es, is_unsigned);
            }
            dst[2 * r] = v[0] | (v[2] << 16);
            dst[2 * r + 1] = v[1] | (v[3] << 16);
        }
    }
}

/* Lane l (0, 1) of a packed word (the portable dot products; mtvm_mm_rq_s8_dsp.h's C form
 * of the wide weights). */
static inline int32_t mtvm_packv_lane(uint32_t w, int l)
{
    return (int32_t)(int16_t)(uint16_t)(l ? w >> 16 : w);
}

/* Optimized builds only: at -O0 V is not a constant, all three statements are kept, and
 * gcc 12's register allocator did not come back from the six-sum one (twelve operands
 * with r7 the frame pointer); the C loop below is the debug build's. */
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__) && defined(__OPTIMIZE__)
#define MTVM_MM_S8_DSP_THUMB2 1
/* One group in Thumb-2: a's word widened into lanes (0, 2) and (1, 3) (EXT: "sxtb16" for
 * int8, "uxtb16" for uint8), one LDRD and two SMLADs per packed vector. */
#define MTVM_DOTVP_SMLAD2(S) \
    "ldrd   %[x0], %[x1], [%[p]], #8\n\t" \
    "smlad  %[" S "], %[w], %[x0], %[" S "]\n\t" \
    "smlad  %[" S "], %[h], %[x1], %[" S "]\n\t"
#define MTVM_DOTVP_A(EXT) \
    "ldr    %[w], [%[a]], #4\n\t" \
    EXT "  %[h], %[w], ror #8\n\t" \
    EXT "  %[w], %[w]\n\t"
#define MTVM_DOTVP_GROUP4(EXT) MTVM_DOTVP_A(EXT) \
    MTVM_DOTVP_SMLAD2("s0") MTVM_DOTVP_SMLAD2("s1") MTVM_DOTVP_SMLAD2("s2") \
    MTVM_DOTVP_SMLAD2("s3")
#define MTVM_DOTVP_GROUP5(EXT) MTVM_DOTVP_GROUP4(EXT) MTVM_DOTVP_SMLAD2("s4")
#define MTVM_DOTVP_GROUP6(EXT) MTVM_DOTVP_GROUP5(EXT) MTVM_DOTVP_SMLAD2("s5")
#define MTVM_DOTVP_TEMPS \
    [a] "+r"(a), [p] "+r"(p), [w] "=&r"(w), [h] "=&r"(h), [x0] "=&r"(x0), [x1] "=&r"(x1)
#define MTVM_DOTVP_OPS4 \
    [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), MTVM_DOTVP_TEMPS
#define MTVM_DOTVP_OPS5 MTVM_DOTVP_OPS4, [s4] "+r"(s4)
#define MTVM_DOTVP_OPS6 MTVM_DOTVP_OPS5, [s5] "+r"(s5)
/* One asm statement of V sums (4, 5 or 6) running G4, G5 or G6: one group or two. */
#define MTVM_DOTVP_STMT(G4, G5, G6)                                                          \
    do {                                                                                     \
        uint32_t w, h, x0, x1;                                                               \
        if (V == 4) {                                                                        \
            __asm__(G4 : MTVM_DOTVP_OPS4 : : "memory");                                      \
        } else if (V == 5) {                                                                 \
            __asm__(G5 : MTVM_DOTVP_OPS5 : : "memory");                                      \
        } else {                                                                             \
            __asm__(G6 : MTVM_DOTVP_OPS6 : : "memory");                                      \
        }                                                                                    \
    } while (0)
/* Two groups a statement. */
#define MTVM_DOTVP_ASM(EXT)                                                                  \
    MTVM_DOTVP_STMT(MTVM_DOTVP_GROUP4(EXT) MTVM_DOTVP_GROUP4(EXT),                           \
                    MTVM_DOTVP_GROUP5(EXT) MTVM_DOTVP_GROUP5(EXT),                           \
                    MTVM_DOTVP_GROUP6(EXT) MTVM_DOTVP_GROUP6(EXT))
/* One group: the last of an odd count (the C loop below, after the statements above,
 * spilled and reloaded the sums: about 35 instructions a call where this takes 3 + 3 V). */
#define MTVM_DOTVP_ASM1(EXT) \
    MTVM_DOTVP_STMT(MTVM_DOTVP_GROUP4(EXT), MTVM_DOTVP_GROUP5(EXT), MTVM_DOTVP_GROUP6(EXT))
/* ASM (a statement macro above) for a's signedness (a_u: uint8, UXTB16; else int8, SXTB16). */
#define MTVM_DOTVP_U(ASM, a_u)  \
    do {                        \
        if (a_u) {              \
            ASM("uxtb16");      \
        } else {                \
            ASM("sxtb16");      \
        }                       \
    } while (0)
#endif

/* *acc<r> += sum of a[e] * (element e of packed vector r), e < n, r < V (4, 5 or 6; the
 * pointers past V unused); a: n bytes, int8 (a_u 0) or uint8 (1); p: a block packed by
 * mtvm_packv_8_dsp with the same V and n. */
static MTVM_ALWAYS_INLINE void mtvm_dotvp_8_dsp(const uint8_t* a, int a_u, const uint32_t* p,
                                                int32_t n, int32_t V, int32_t* acc0,
                                                int32_t* acc1, int32_t* acc2, int32_t* acc3,
                                                int32_t* acc4, int32_t* acc5)
{
    int32_t s0 = *acc0, s1 = *acc1, s2 = *acc2, s3 = *acc3;
    int32_t s4 = V > 4 ? *acc4 : 0, s5 = V > 5 ? *acc5 : 0;
#if defined(__ARM_FEATURE_DSP)
    int32_t g = n >> 2;                 /* whole groups, then 0..3 bytes (constants after */
    const int32_t tail = n & 3;         /* inlining: the tail's loads are unrolled)        */
#if defined(MTVM_MM_S8_DSP_THUMB2)
    for (; g >= 4; g -= 4) {   /* four groups a step: half the loop's instructions */
        MTVM_DOTVP_U(MTVM_DOTVP_ASM, a_u);
        MTVM_DOTVP_U(MTVM_DOTVP_ASM, a_u);
    }
    if (g >= 2) {              /* two more */
        MTVM_DOTVP_U(MTVM_DOTVP_ASM, a_u);
        g -= 2;
    }
    if (g == 1 && tail == 0) { /* the last one */
        MTVM_DOTVP_U(MTVM_DOTVP_ASM1, a_u);
        g = 0;
    }
#endif
    for (; g >= 0; --g, a += 4, p += 2 * V) {
        uint32_t w = 0;
        if (g > 0) {
            memcpy(&w, a, 4);
        } else if (tail == 0) {
            break;
        } else {   /* the last bytes, the rest zero (little-endian: byte e is lane e) */
            w = a[0];
            if (tail > 1) w |= (uint32_t)a[1] << 8;
            if (tail > 2) w |= (uint32_t)a[2] << 16;
        }
        const int32_t lo = mtvm_widen_02(w, a_u), hi = mtvm_widen_13(w, a_u);
        s0 = __smlad(hi, (int32_t)p[1], __smlad(lo, (int32_t)p[0], s0));
        s1 = __smlad(hi, (int32_t)p[3], __smlad(lo, (int32_t)p[2], s1));
        s2 = __smlad(hi, (int32_t)p[5], __smlad(lo, (int32_t)p[4], s2));
        s3 = __smlad(hi, (int32_t)p[7], __smlad(lo, (int32_t)p[6], s3));
        if (V > 4) s4 = __smlad(hi, (int32_t)p[9], __smlad(lo, (int32_t)p[8], s4));
        if (V > 5) s5 = __smlad(hi, (int32_t)p[11], __smlad(lo, (int32_t)p[10], s5));
    }
#else
    for (; n > 0; n -= 4, a += 4, p += 2 * V) {
        for (int32_t e = 0; e < 4 && e < n; ++e) {
            const int32_t x = mtvm_byte_at(a, e, a_u);
            const int32_t word = e & 1, lane = e >> 1;
            s0 += x * mtvm_packv_lane(p[word], lane);
            s1 += x * mtvm_packv_lane(p[2 + word], lane);
            s2 += x * mtvm_packv_lane(p[4 + word], lane);
            s3 += x * mtvm_packv_lane(p[6 + word], lane);
            if (V > 4) s4 += x * mtvm_packv_lane(p[8 + word], lane);
            if (V > 5) s5 += x * mtvm_packv_lane(p[10 + word], lane);
        }
    }
#endif
    *acc0 = s0; *acc1 = s1; *acc2 = s2; *acc3 = s3;
    if (V > 4) *acc4 = s4;
    if (V > 5) *acc5 = s5;
}

/* sum of x[0..n): int8 (u 0) or uint8 (1). On a DSP core USADA8 adds four bytes a step
 * (int8 bytes biased by 128 to uint8, the bias taken off at the end). */
static MTVM_ALWAYS_INLINE int32_t mtvm_sum_8_dsp(const uint8_t* x, int u, int32_t n)
{
    int32_t i = 0, s = 0;
#if defined(__ARM_FEATURE_DSP)
    uint32_t acc = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, x + i, 4);
        acc = __usada8(u ? w : w ^ 0x80808080u, 0, acc);
    }
    s = (int32_t)acc - (u ? 0 : 128 * i);
#endif
    for (; i < n; ++i) {
        s += mtvm_byte_at(x, i, u);
    }
    return s;
}

/* s[q] = sum of column q < 4 of the rows x 4 block at b (rows `stride` bytes apart; int8:
 * u 0, uint8: 1). On a DSP core in int16 lanes where none can overflow (rows <= 255 for
 * int8, <= 128 for uint8): per row one LDR, two extends and two SADD16s (about 1.75
 * instructions a byte where the column loop took four); else one column at a time. */
static MTVM_ALWAYS_INLINE void mtvm_colsum4_8_dsp(const uint8_t* b, int u, int32_t rows,
                                                  int32_t stride, int32_t* s)
{
#if defined(__ARM_FEATURE_DSP)
    if (rows <= (u ? 128 : 255)) {
        int32_t even = 0, odd = 0;   /* lanes: columns (0, 2) and (1, 3) */
        for (int32_t r = 0; r < rows; ++r, b += stride) {
            uint32_t w;
            memcpy(&w, b, 4);
            even = __sadd16(even, mtvm_widen_02(w, u));
            odd = __sadd16(odd, mtvm_widen_13(w, u));
        }
        s[0] = (int16_t)even;
        s[1] = (int16_t)odd;
        s[2] = even >> 16;
        s[3] = odd >> 16;
        return;
    }
#endif
    for (int32_t q = 0; q < 4; ++q) {
        s[q] = 0;
        for (int32_t r = 0; r < rows; ++r) {
            s[q] += mtvm_byte_at(b, r * stride + q, u);
        }
    }
}
/* colsum[j] = sum of column j of the rows x cols matrix b (int8: u 0; uint8: 1), j < cols:
 * four columns a step (mtvm_colsum4_8_dsp), the last ones one at a time. */
static MTVM_ALWAYS_INLINE void mtvm_colsum_8_dsp(const uint8_t* b, int u, int32_t rows,
                                                 int32_t cols, int32_t* colsum)
{
    int32_t j = 0;
    for (; j + 4 <= cols; j += 4) {
        mtvm_colsum4_8_dsp(b + j, u, rows, cols, colsum + j);
    }
    for (; j < cols; ++j) {
        int32_t s = 0;
        for (int32_t r = 0; r < rows; ++r) {
            s += mtvm_byte_at(b, r * cols + j, u);
        }
        colsum[j] = s;
    }
}

/* The named forms the generated kernels call: mtvm_sum_<t>_dsp, mtvm_packv_<t>_dsp
 * (vectors of type t) and mtvm_dot<V>p_<t>_dsp(a, p, n, s0, .., s<V-1>) (a byte vector of
 * type t; s0..: int32 variables, the V sums, updated in place -- a macro, so they stay in
 * registers). */
static MTVM_ALWAYS_INLINE int32_t mtvm_sum_s8_dsp(const int8_t* x, int32_t n)
{
    return mtvm_sum_8_dsp((const uint8_t*)x, 0, n);
}
static MTVM_ALWAYS_INLINE int32_t mtvm_sum_u8_dsp(const uint8_t* x, int32_t n)
{
    return mtvm_sum_8_dsp(x, 1, n);
}
static MTVM_ALWAYS_INLINE void mtvm_colsum_s8_dsp(const int8_t* b, int32_t rows, int32_t cols,
                                                  int32_t* colsum)
{
    mtvm_colsum_8_dsp((const uint8_t*)b, 0, rows, cols, colsum);
}
static MTVM_ALWAYS_INLINE void mtvm_colsum_u8_dsp(const uint8_t* b, int32_t rows, int32_t cols,
                                                  int32_t* colsum)
{
    mtvm_colsum_8_dsp(b, 1, rows, cols, colsum);
}
static MTVM_ALWAYS_INLINE void mtvm_packv_s8_dsp(const int8_t* src, int32_t vs, int32_t es,
                                                 int32_t nv, int32_t V, int32_t n,
                                                 uint32_t* dst)
{
    mtvm_packv_8_dsp((const uint8_t*)src, 0, vs, es, nv, V, n, dst);
}
static MTVM_ALWAYS_INLINE void mtvm_packv_u8_dsp(const uint8_t* src, int32_t vs, int32_t es,
                                                 int32_t nv, int32_t V, int32_t n,
                                                 uint32_t* dst)
{
    mtvm_packv_8_dsp(src, 1, vs, es, nv, V, n, dst);
}
#define MTVM_DOTP_(U, a, p, n, V, s0, s1, s2, s3, s4, s5) \
    mtvm_dotvp_8_dsp((const uint8_t*)(a), U, (p), (n), V, &(s0), &(s1), &(s2), &(s3), \
                     &(s4), &(s5))
#define mtvm_dot4p_s8_dsp(a, p, n, s0, s1, s2, s3) MTVM_DOTP_(0, a, p, n, 4, s0, s1, s2, s3, s3, s3)
#define mtvm_dot4p_u8_dsp(a, p, n, s0, s1, s2, s3) MTVM_DOTP_(1, a, p, n, 4, s0, s1, s2, s3, s3, s3)
#define mtvm_dot5p_s8_dsp(a, p, n, s0, s1, s2, s3, s4) \
    MTVM_DOTP_(0, a, p, n, 5, s0, s1, s2, s3, s4, s4)
#define mtvm_dot5p_u8_dsp(a, p, n, s0, s1, s2, s3, s4) \
    MTVM_DOTP_(1, a, p, n, 5, s0, s1, s2, s3, s4, s4)
#define mtvm_dot6p_s8_dsp(a, p, n, s0, s1, s2, s3, s4, s5) \
    MTVM_DOTP_(0, a, p, n, 6, s0, s1, s2, s3, s4, s5)
#define mtvm_dot6p_u8_dsp(a, p, n, s0, s1, s2, s3, s4, s5) \
    MTVM_DOTP_(1, a, p, n, 6, s0, s1, s2, s3, s4, s5)

#endif  /* MTVM_MM_S8_DSP_H_ */
