/* mtvm_mm_rq_s8_dsp.h: The Arm DSP int8 QMatMul of one packed block of V = 4 or 5 input
 * rows against every weight row, the requantization and the stores in the same loop
 * (mtvm/schedules/arm_dsp/matmul_s8.py, its fused form).
 *
 * The rows are packed by mtvm_packv_8_dsp (mtvm_mm_s8_dsp.h); each weight row is read in
 * place, one LDR and two SXTB16 per four bytes and an LDRD and two SMLADs per packed row,
 * as mtvm_dotvp_8_dsp does. What this adds is the column's epilogue in the same Thumb-2
 * loop: the column's parameters are one block of the table prm (laid out at compile
 * time: bias, mult, rnd, sh and, with a folded bias Add, its c and ia; per channel),
 * read with post-incremented loads, so that per column of V outputs the bias starts the
 * sums (an LDR and V - 1 MOVs), SMMLA + ASR + SSAT requantize each, MLA + SSAT (its ASR
 * the Add's shift) apply the Add, and STRBs at constant offsets store the column. Where
 * the generated C called the dot product and requantized after it, its loop spilled the
 * pointers and rebuilt them per column (about 60 instructions a column of five against
 * 31 here, 43 with the Add).
 *
 * 13 registers (V = 5): Armv7E-M optimized builds only (the M33's Armv8-M build, or -O0,
 * cannot give them); elsewhere the same integers in C.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MM_RQ_S8_DSP_H_
#define MTVM_MM_RQ_S8_DSP_H_

#include <stdint.h>
#include "mtvm_dsp.h"
#include "mtvm_mm_s8_dsp.h"
#include "mtvm_depthwise_s8.h"

/* Words of a column's parameter block: bias, mult, rnd, sh, and with the Add its c (post
 * 1: the one ia of all columns after the last block) or c and ia (post 2). post | 4
 * (MTVM_MM_RQ_PACKED): rnd and sh in one word, rnd | sh -- rnd = 2^(sh - 1) + zp 2^sh
 * has its low five bits clear where every sh is 6 or more -- a word fewer a column (a
 * small transformer's projections: 192 bytes of flash per 48 columns), one instruction
 * more a column and block of rows to take them apart. */
#define MTVM_MM_RQ_PACKED 4
#define MTVM_MM_RQ_ADD_FORM(post) ((post) & 3)
#define MTVM_MM_RQ_PRM(post) \
    (((post) & MTVM_MM_RQ_PACKED ? 3 : 4) + \
     (MTVM_MM_RQ_ADD_FORM(post) == 2 ? 2 : MTVM_MM_RQ_ADD_FORM(post) ? 1 : 0))

#if defined(MTVM_MM_S8_DSP_THUMB2) && defined(__ARM_ARCH_7EM__)
#define MTVM_MM_RQ_ASM 1
/* the bias into every sum */
#define MTVM_MM_RQ_INIT4 \
    "ldr    %[s0], [%[prm]], #4\n\t" \
    "mov    %[s1], %[s0]\n\t" \
    "mov    %[s2], %[s0]\n\t" \
    "mov    %[s3], %[s0]\n\t"
#define MTVM_MM_RQ_INIT5 MTVM_MM_RQ_INIT4 "mov    %[s4], %[s0]\n\t"
/* one sum requantized: (high word of s * mult + rnd) >> sh, saturated to int8 */
#define MTVM_MM_RQ_ONE(S) \
    "smmla  %[" S "], %[" S "], %[w], %[h]\n\t" \
    "asr    %[" S "], %[" S "], %[x0]\n\t" \
    "ssat   %[" S "], #8, %[" S "]\n\t"
/* the folded bias Add: (c + s ia) >> n, saturated to int8 (c in p, ia in x1) */
#define MTVM_MM_RQ_ADD(S) \
    "mla    %[" S "], %[" S "], %[x1], %[p]\n\t" \
    "ssat   %[" S "], #8, %[" S "], asr %[n]\n\t"
#define MTVM_MM_RQ_STORE4 \
    "strb   %[s1], [%[y], %[o1]]\n\t" \
    "strb   %[s2], [%[y], %[o2]]\n\t" \
    "strb   %[s3], [%[y], %[o3]]\n\t"
#define MTVM_MM_RQ_STORE5 MTVM_MM_RQ_STORE4 "strb   %[s4], [%[y], %[o4]]\n\t"
/* A column's mult (w), rnd (h) and sh (x0): three words, or (packed) rnd | sh in one */
#define MTVM_MM_RQ_PARAMS3 \
    "ldrd   %[w], %[h], [%[prm]], #8\n\t" \
    "ldr    %[x0], [%[prm]], #4\n\t"
#define MTVM_MM_RQ_PARAMS2 \
    "ldrd   %[w], %[h], [%[prm]], #8\n\t" \
    "and    %[x0], %[h], #31\n\t" \
    "bic    %[h], %[h], #31\n\t"
/* The loop over the columns: INIT, the groups (GROUPS a step until p reaches pend, then
 * TAIL: the groups past the last whole step), the parameters (PARAMS), EPI (requantization
 * and the Add), the stores (row 0 post-incremented). */
#define MTVM_MM_RQ_LOOP(INIT, GROUPS, TAIL, PARAMS, EPI, STORES) \
    "1:\n\t" \
    "ldr    %[p], %[p0]\n\t" \
    INIT \
    "2:\n\t" \
    GROUPS \
    "ldr    %[x0], %[pend]\n\t" \
    "cmp    %[p], %[x0]\n\t" \
    "bne    2b\n\t" \
    TAIL \
    PARAMS \
    EPI \
    STORES \
    "strb   %[s0], [%[y]], #1\n\t" \
    "ldr    %[x0], %[yend]\n\t" \
    "cmp    %[y], %[x0]\n\t" \
    "bne    1b\n\t"
#define MTVM_MM_RQ_LOAD_ADD1 "ldr    %[p], [%[prm]], #4\n\t" "ldr    %[x1], %[ia]\n\t"
#define MTVM_MM_RQ_LOAD_ADD2 "ldrd   %[p], %[x1], [%[prm]], #8\n\t"
#define MTVM_MM_RQ_EPI4 \
    MTVM_MM_RQ_ONE("s0") MTVM_MM_RQ_ONE("s1") MTVM_MM_RQ_ONE("s2") MTVM_MM_RQ_ONE("s3")
#define MTVM_MM_RQ_EPI5 MTVM_MM_RQ_EPI4 MTVM_MM_RQ_ONE("s4")
#define MTVM_MM_RQ_ADD4 \
    MTVM_MM_RQ_ADD("s0") MTVM_MM_RQ_ADD("s1") MTVM_MM_RQ_ADD("s2") MTVM_MM_RQ_ADD("s3")
#define MTVM_MM_RQ_ADD5 MTVM_MM_RQ_ADD4 MTVM_MM_RQ_ADD("s4")
/* One group of V sums: the weights' four bytes read and widened (N), or already widened
 * into the two words (w0, w2), (w1, w3) (W: one LDRD where N takes an LDR and two SXTB16) */
#define MTVM_MM_RQ_GROUP_N4 MTVM_DOTVP_GROUP4("sxtb16")
#define MTVM_MM_RQ_GROUP_N5 MTVM_DOTVP_GROUP5("sxtb16")
#define MTVM_MM_RQ_GROUP_W4 \
    "ldrd   %[w], %[h], [%[a]], #8\n\t" \
    MTVM_DOTVP_SMLAD2("s0") MTVM_DOTVP_SMLAD2("s1") MTVM_DOTVP_SMLAD2("s2") \
    MTVM_DOTVP_SMLAD2("s3")
#define MTVM_MM_RQ_GROUP_W5 MTVM_MM_RQ_GROUP_W4 MTVM_DOTVP_SMLAD2("s4")
/* U groups a step (1, 2, 4 or 8) of V sums, F the weights' form (N or W) */
#define MTVM_MM_RQ_G1(V, F) MTVM_MM_RQ_GROUP_##F##V
#define MTVM_MM_RQ_G2(V, F) MTVM_MM_RQ_G1(V, F) MTVM_MM_RQ_G1(V, F)
#define MTVM_MM_RQ_G4(V, F) MTVM_MM_RQ_G2(V, F) MTVM_MM_RQ_G2(V, F)
#define MTVM_MM_RQ_G8(V, F) MTVM_MM_RQ_G4(V, F) MTVM_MM_RQ_G4(V, F)
#define MTVM_MM_RQ_OPS4 \
    [s0] "=&r"(s0), [s1] "=&r"(s1), [s2] "=&r"(s2), [s3] "=&r"(s3), [w] "=&r"(w), \
    [h] "=&r"(h), [x0] "=&r"(x0), [x1] "=&r"(x1), [p] "=&r"(p), [a] "+r"(a), \
    [prm] "+r"(prm), [y] "+r"(y)
#define MTVM_MM_RQ_OPS5 MTVM_MM_RQ_OPS4, [s4] "=&r"(s4)
#define MTVM_MM_RQ_INS \
    [p0] "m"(p0), [pend] "m"(pend), [yend] "m"(yend), [ia] "m"(ia), [n] "i"(post_shift), \
    [o1] "i"(ldy), [o2] "i"(2 * ldy), [o3] "i"(3 * ldy), [o4] "i"(4 * ldy)
#define MTVM_MM_RQ_G0(V, F) ""
#define MTVM_MM_RQ_G3(V, F) MTVM_MM_RQ_G2(V, F) MTVM_MM_RQ_G1(V, F)
/* One asm statement for V, U, the T tail groups, F, the parameters' form P (3 or 2 words)
 * and the Add (constants after inlining). */
#define MTVM_MM_RQ_STMT(V, U, T, F, P, EPI)                                                 \
    __asm__ volatile(MTVM_MM_RQ_LOOP(MTVM_MM_RQ_INIT##V, MTVM_MM_RQ_G##U(V, F),            \
                                     MTVM_MM_RQ_G##T(V, F), MTVM_MM_RQ_PARAMS##P, EPI,     \
                                     MTVM_MM_RQ_STORE##V)                                  \
                     : MTVM_MM_RQ_OPS##V : MTVM_MM_RQ_INS : "cc", "memory")
#endif

/* y[r * ldy + o] (r < V, o < nn; ldy: the rows' stride, nn where y holds these columns
 * only) = the requantized sum of bias_o and packed row r times
 * weight row o (w + o * kk, int8; wide: the rows widened by mtvm_mm_rq_widen_s8, 2 kk
 * bytes each), then the folded bias Add when post & 3 is 1 or 2 (its shift post_shift,
 * both clamps the whole int8 range); prm: the table (MTVM_MM_RQ_PRM words a column, rnd
 * and sh packed in one with post | MTVM_MM_RQ_PACKED); p0: the
 * packed block (V rows of kk elements, kk a multiple of 4). V, kk, nn, post, post_shift
 * and wide are constants at each call: the asm needs them as immediates. */
#define mtvm_mm_rq_s8_dsp(V, w, p0, kk, nn, ldy, prm, y, post, post_shift, wide) \
    mtvm_mm_rq_s8_dsp_##V(w, p0, kk, kk, nn, ldy, prm, y, post, post_shift, wide)

/* The weights' n bytes (n a multiple of 4) widened for the wide form: per four bytes the
 * words (w0, w2), (w1, w3) as int16 lanes -- what the narrow form's SXTB16s make of them
 * each time a block of rows reads them (mtvm_packv_8_dsp of one vector). dst: 2 n bytes,
 * word-aligned. */
static MTVM_ALWAYS_INLINE void mtvm_mm_rq_widen_s8(const int8_t* w, int32_t n, uint32_t* dst)
{
    mtvm_packv_8_dsp((const uint8_t*)w, 0, 0, 1, 1, 1, n, dst);
}

#if defined(MTVM_MM_RQ_ASM)
#define MTVM_MM_RQ_BODY(V)                                                                  \
    do {                                                                                   \
        const int32_t* pend = (const int32_t*)p0 + 2 * V * (kk / 4 - MTVM_MM_RQ_TAIL(kc));  \
        int8_t* yend = y + nn;                                                             \
        int32_t s0, s1, s2, s3, s4, w, h, x0, x1;   /* s4: with five rows only */          \
        const uint32_t* p;                                                                 \
        const int8_t* a = wt;                                                              \
        const int32_t ia =                                                                 \
            MTVM_MM_RQ_ADD_FORM(post) == 1 ? prm[MTVM_MM_RQ_PRM(post) * nn] : 0;           \
        (void)s4;                                                                          \
        if (wide && (post & MTVM_MM_RQ_PACKED)) {                                          \
            MTVM_MM_RQ_POSTS(V, W, 2);                                                     \
        } else if (wide) {                                                                 \
            MTVM_MM_RQ_POSTS(V, W, 3);                                                     \
        } else if (post & MTVM_MM_RQ_PACKED) {                                             \
            MTVM_MM_RQ_POSTS(V, N, 2);                                                     \
        } else {                                                                           \
            MTVM_MM_RQ_POSTS(V, N, 3);                                                     \
        }                                                                                  \
    } while (0)
#define MTVM_MM_RQ_POSTS(V, F, P)                                                           \
    do {                                                                                   \
        if (MTVM_MM_RQ_ADD_FORM(post) == 1) {                                              \
            MTVM_MM_RQ_STEPS(V, F, P,                                                      \
                             MTVM_MM_RQ_EPI##V MTVM_MM_RQ_LOAD_ADD1 MTVM_MM_RQ_ADD##V);    \
        } else if (MTVM_MM_RQ_ADD_FORM(post) == 2) {                                       \
            MTVM_MM_RQ_STEPS(V, F, P,                                                      \
                             MTVM_MM_RQ_EPI##V MTVM_MM_RQ_LOAD_ADD2 MTVM_MM_RQ_ADD##V);    \
        } else {                                                                           \
            MTVM_MM_RQ_STEPS(V, F, P, MTVM_MM_RQ_EPI##V);                                  \
        }                                                                                  \
    } while (0)
/* Groups a step: eight where the depth has 16 groups or more and a multiple of eight
 * (the loop's three instructions per 144 or 120), else four with the 0-3 groups past the
 * last step after the loop (a depth of 49 tokens: 13 groups, one a step took a fifth more
 * instructions), else two or one -- the code of eight would add a quarter KiB of flash
 * per layer for 3 instructions a column at a depth of 32. */
#define MTVM_MM_RQ_TAIL(kk) \
    (((kk) / 4) % 8 == 0 && (kk) / 4 >= 16 ? 0 : (kk) / 4 >= 4 ? ((kk) / 4) % 4 : 0)
#define MTVM_MM_RQ_STEPS(V, F, P, EPI)                                                        \
    do {                                                                                      \
        if ((kc / 4) % 8 == 0 && kc / 4 >= 16) MTVM_MM_RQ_STMT(V, 8, 0, F, P, EPI);           \
        else if (kc / 4 >= 4 && MTVM_MM_RQ_TAIL(kc) == 0) MTVM_MM_RQ_STMT(V, 4, 0, F, P, EPI);\
        else if (kc / 4 >= 4 && MTVM_MM_RQ_TAIL(kc) == 1) MTVM_MM_RQ_STMT(V, 4, 1, F, P, EPI);\
        else if (kc / 4 >= 4 && MTVM_MM_RQ_TAIL(kc) == 2) MTVM_MM_RQ_STMT(V, 4, 2, F, P, EPI);\
        else if (kc / 4 >= 4) MTVM_MM_RQ_STMT(V, 4, 3, F, P, EPI);                            \
        else if ((kc / 4) % 2 == 0) MTVM_MM_RQ_STMT(V, 2, 0, F, P, EPI);                      \
        else MTVM_MM_RQ_STMT(V, 1, 0, F, P, EPI);                                             \
    } while (0)
#endif

/* QBatchMatMul's right operand b [K][n] (int8, rows ldb apart) as the wide form's weight
 * rows, for a left operand read as it is: per column j its K values minus zb, zeros past K
 * up to kk (K rounded up to four), in groups of four as the int16 pairs (b0, b2), (b1, b3);
 * and its parameter block {-za sum_k (b - zb), mult, rnd, sh}, so that the fused loop's
 * sums are sum_k a (b - zb) - za sum_k (b - zb) = sum_k (a - za)(b - zb), with no per-row
 * term. dst: n kk / 2 words; prm: 4 n words. */
static inline void mtvm_mm_rq_cols_s8(const int8_t* b, int32_t K, int32_t n, int32_t ldb,
                                      int32_t kk, int32_t zb, int32_t za, int32_t mult,
                                      int32_t rnd, int32_t sh, uint32_t* dst, int32_t* prm)
{
    for (int32_t j = 0; j < n; ++j, prm += 4) {
        const int8_t* c = b + j;
        int32_t sum = 0, g = 0;
        for (; g + 4 <= K; g += 4, dst += 2, c += 4 * ldb) {
            const int32_t v0 = c[0] - zb, v1 = c[ldb] - zb, v2 = c[2 * ldb] - zb,
                          v3 = c[3 * ldb] - zb;
            sum += v0 + v1 + v2 + v3;
            dst[0] = (uint32_t)(uint16_t)v0 | ((uint32_t)(uint16_t)v2 << 16);
            dst[1] = (uint32_t)(uint16_t)v1 | ((uint32_t)(uint16_t)v3 << 16);
        }
        for (; g < kk; g += 4, dst += 2) {   /* the last values and the zeros after them */
            int32_t v[4];
            for (int32_t e = 0; e < 4; ++e) {
                v[e] = g + e < K ? b[(g + e) * ldb + j] - zb : 0;
                sum += v[e];
            }
            dst[0] = (uint32_t)(uint16_t)v[0] | ((uint32_t)(uint16_t)v[2] << 16);
            dst[1] = (uint32_t)(uint16_t)v[1] | ((uint32_t)(uint16_t)v[3] << 16);
        }
        prm[0] = -za * sum;
        prm[1] = mult;
        prm[2] = rnd;
        prm[3] = sh;
    }
}

/* The same integers in C: per column the V sums (mtvm_dotvp_8_dsp), each requantized,
 * saturated, through the Add, stored. */
static MTVM_ALWAYS_INLINE void mtvm_mm_rq_s8_dsp_c(int32_t V, const int8_t* wt,
                                                   const uint32_t* p0, int32_t kk,
                                                   int32_t nn, int32_t ldy,
                                                   const int32_t* prm, int8_t* y,
                                                   int32_t post, int32_t post_shift, int wide)
{
    const int32_t form = MTVM_MM_RQ_ADD_FORM(post), packed = post & MTVM_MM_RQ_PACKED;
    const int32_t ia = form == 1 ? prm[MTVM_MM_RQ_PRM(post) * nn] : 0;
    for (int32_t o = 0; o < nn; ++o, wt += wide ? 2 * kk : kk, prm += MTVM_MM_RQ_PRM(post)) {
        const int32_t rnd = packed ? (int32_t)((uint32_t)prm[2] & ~31u) : prm[2];
        const int32_t sh = packed ? prm[2] & 31 : prm[3];
        const int32_t* add = prm + (packed ? 3 : 4);   /* the Add's c (and ia) */
        int32_t s[5];
        for (int32_t r = 0; r < 5; ++r) {
            s[r] = prm[0];
        }
        if (wide) {   /* the widened words against the packed rows' words */
            const uint32_t* ww = (const uint32_t*)(const void*)wt;
            for (int32_t g = 0; g < kk / 4; ++g) {
                for (int32_t r = 0; r < V; ++r) {
                    const uint32_t* pr = p0 + 2 * (g * V + r);
                    for (int32_t l = 0; l < 2; ++l) {
                        s[r] += mtvm_packv_lane(ww[2 * g], l) * mtvm_packv_lane(pr[0], l) +
                                mtvm_packv_lane(ww[2 * g + 1], l) * mtvm_packv_lane(pr[1], l);
                    }
                }
            }
        } else {
            mtvm_dotvp_8_dsp((const uint8_t*)wt, 0, p0, kk, V, &s[0], &s[1], &s[2], &s[3],
                             &s[4], &s[4]);
        }
        for (int32_t r = 0; r < V; ++r) {
            int32_t v = mtvm_requantize_s8(s[r], prm[1], rnd, sh, -128, 127);
            if (form) {
                v = (add[0] + v * (form == 2 ? add[1] : ia)) >> post_shift;
                v = v < -128 ? -128 : (v > 127 ? 127 : v);
            }
            y[r * ldy + o] = (int8_t)v;
        }
    }
}

/* mtvm_mm_rq_s8_dsp_4 and _5: the loop where it applies (a depth of whole groups, the
 * rows' stores within STRB's 12-bit offsets), else the C form. kc: a constant depth whose
 * steps (MTVM_MM_RQ_STEPS: groups a step, the groups after the loop) are kk's, where kk
 * is a run-time value (MTVM_DEFINE_MM_RQ_S8_DSP_K); else kk itself. */
#if defined(MTVM_MM_RQ_ASM)
#define MTVM_MM_RQ_TRY(V)                                                                   \
    if (kc % 4 == 0 && nn > 0 && (V - 1) * ldy < 4096 && post_shift >= 0 &&               \
        post_shift < 32) {                                                                  \
        MTVM_MM_RQ_BODY(V);                                                                 \
        return;                                                                             \
    }
#else
#define MTVM_MM_RQ_TRY(V)
#endif
#define MTVM_MM_RQ_FN(V)                                                                    \
    static MTVM_ALWAYS_INLINE void mtvm_mm_rq_s8_dsp_##V(                                  \
        const int8_t* wt, const uint32_t* p0, int32_t kc, int32_t kk, int32_t nn,          \
        int32_t ldy,                                                                       \
        const int32_t* prm,                                                                \
        int8_t* y, int32_t post, int32_t post_shift, int wide)                             \
    {                                                                                      \
        (void)kc;   /* (the C form: no steps to choose) */                                 \
        MTVM_MM_RQ_TRY(V)                                                                  \
        mtvm_mm_rq_s8_dsp_c(V, wt, p0, kk, nn, ldy, prm, y, post, post_shift, wide);       \
    }
MTVM_MM_RQ_FN(4)
MTVM_MM_RQ_FN(5)

/* Defines NAME(w, p0, prm, y): mtvm_mm_rq_s8_dsp with these constants, out of line, so
 * that the layers of one shape share one copy of the loop (a transformer's projections
 * are of a few shapes: inlined in each, the loop and its epilogue took 6 KB of
 * transformer_v12_int8's flash, 1.06 of emx-onnx-cgen's). */
#define MTVM_DEFINE_MM_RQ_S8_DSP(NAME, V, KK, NN, LDY, POST, POST_SHIFT, WIDE)               \
    static __attribute__((noinline)) void NAME(const int8_t* w, const uint32_t* p0,       \
                                               const int32_t* prm, int8_t* y)             \
    {                                                                                      \
        mtvm_mm_rq_s8_dsp(V, w, p0, KK, NN, LDY, prm, y, POST, POST_SHIFT, WIDE);          \
    }

/* As MTVM_DEFINE_MM_RQ_S8_DSP with the depth an argument, NAME(w, p0, prm, y, kk): one copy
 * for the depths of one step form, KC one of them (a transformer's 64 -> 64 and 128 -> 64
 * projections: 660 bytes of flash less). */
#define MTVM_DEFINE_MM_RQ_S8_DSP_K(NAME, V, KC, NN, LDY, POST, POST_SHIFT, WIDE)              \
    static __attribute__((noinline)) void NAME(const int8_t* w, const uint32_t* p0,       \
                                               const int32_t* prm, int8_t* y, int32_t kk) \
    {                                                                                      \
        mtvm_mm_rq_s8_dsp_##V(w, p0, KC, kk, NN, LDY, prm, y, POST, POST_SHIFT, WIDE);     \
    }

#endif  /* MTVM_MM_RQ_S8_DSP_H_ */
