/* mtvm_mm_s16_thumb2.h: The Thumb-2 assembly blocks of the int8 im2col micro-kernel
 * (mtvm_mm_s16.h): four taps x one or two pixels x two output channels per block.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_MM_S16_THUMB2_H_
#define MTVM_MM_S16_THUMB2_H_

#include <stdint.h>
#include "mtvm_int8_bytes.h"

#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__) && defined(__thumb2__)
#define MTVM_MM_S16_THUMB2 1

/* The assembly text, built from string literals. EXT is "sxtb16" (int8 weights) or
 * "uxtb16" (uint8): it widens a weight word w0 w2 w1 w3 (conv_pack_index) into the
 * int16 lanes (w0, w1) (with ROR #8: the register's "h" twin) and (w2, w3). */
#define MTVM_MM_S16_WIDEN(EXT, R) \
    EXT " %[" R "h], %[" R "], ror #8\n\t" \
    EXT " %[" R "], %[" R "]\n\t"

/* The two channels' weight words: one LDRD where they are word-aligned, else two LDRs
 * (which take any address). */
#define MTVM_MM_S16_W_LDRD(EXT) \
    "ldrd   %[wa], %[wb], [%[w]], #8\n\t" \
    MTVM_MM_S16_WIDEN(EXT, "wa") MTVM_MM_S16_WIDEN(EXT, "wb")
#define MTVM_MM_S16_W_LDR(EXT) \
    "ldr    %[wa], [%[w]], #4\n\t" MTVM_MM_S16_WIDEN(EXT, "wa") \
    "ldr    %[wb], [%[w]], #4\n\t" MTVM_MM_S16_WIDEN(EXT, "wb")

/* One pixel's four int16 taps (x0: taps 0, 1; x1: taps 2, 3), the column pointer
 * advancing by STEP bytes. */
#define MTVM_MM_S16_X(STEP) "ldrd   %[x0], %[x1], [%[c]], #" STEP "\n\t"

/* Pixel P's four SMLADs: s<P>0 (channel o) and s<P>1 (channel o + 1). */
#define MTVM_MM_S16_SMLAD4(P) \
    "smlad  %[s" P "0], %[x0], %[wa], %[s" P "0]\n\t" \
    "smlad  %[s" P "0], %[x1], %[wah], %[s" P "0]\n\t" \
    "smlad  %[s" P "1], %[x0], %[wb], %[s" P "1]\n\t" \
    "smlad  %[s" P "1], %[x1], %[wbh], %[s" P "1]\n\t"

/* One block (15 instructions per 16 MACs for two pixels); WLOAD: MTVM_MM_S16_W_LDRD or
 * _LDR. For one pixel the column's pixel-1 slots are skipped. */
#define MTVM_MM2_S16_BLOCK(WLOAD) \
    MTVM_MM_S16_X("8") WLOAD MTVM_MM_S16_SMLAD4("0") MTVM_MM_S16_X("8") MTVM_MM_S16_SMLAD4("1")
#define MTVM_MM1_S16_BLOCK(WLOAD) MTVM_MM_S16_X("16") WLOAD MTVM_MM_S16_SMLAD4("0")

#define MTVM_MM_S16_TEMPS \
    [x0] "=&r"(x0), [x1] "=&r"(x1), [wa] "=&r"(wa), [wah] "=&r"(wah), [wb] "=&r"(wb), \
    [wbh] "=&r"(wbh)
#define MTVM_MM2_S16_OPS \
    [s00] "+r"(s00), [s01] "+r"(s01), [s10] "+r"(s10), [s11] "+r"(s11), [c] "+r"(c), \
    [w] "+r"(w), MTVM_MM_S16_TEMPS
#define MTVM_MM1_S16_OPS \
    [s00] "+r"(s00), [s01] "+r"(s01), [c] "+r"(c), [w] "+r"(w), MTVM_MM_S16_TEMPS

/* nb blocks of BLOCK: one, two, then loops of four (nb is a constant after inlining:
 * only the parts it needs remain). The operands are the variable arguments (they hold
 * commas). */
#define MTVM_MM_S16_NB(BLOCK, ...) \
    do { \
        if (nb & 1) __asm__(BLOCK : __VA_ARGS__ : : "memory"); \
        if (nb & 2) __asm__(BLOCK BLOCK : __VA_ARGS__ : : "memory"); \
        if (nb >= 4) { \
            const int16_t* end = c + 8 * (nb & ~3); \
            __asm__("1:\n\t" BLOCK BLOCK BLOCK BLOCK "cmp %[c], %[end]\n\tbne 1b\n\t" \
                    : __VA_ARGS__ : [end] "r"(end) : "cc", "memory"); \
        } \
    } while (0)

/* Both weight loads of one block shape: the caller's wal says which applies. */
#define MTVM_MM_S16_WAL(PIXBLOCK, EXT, ...) \
    do { \
        if (wal) MTVM_MM_S16_NB(PIXBLOCK(MTVM_MM_S16_W_LDRD(EXT)), __VA_ARGS__); \
        else MTVM_MM_S16_NB(PIXBLOCK(MTVM_MM_S16_W_LDR(EXT)), __VA_ARGS__); \
    } while (0)

/* acc[0..2 * pixels) += the nb column blocks at c . the two channels' weights at w
 * (mtvm_mm_s16's layout). Thumb-2 assembly: gcc 12 spills and does not use LDRD with
 * post-increment here. c is 8-byte aligned (the arena's scratch); wal (a constant):
 * w is word-aligned. w_u, pixels and wal are constants at each call. */
static MTVM_ALWAYS_INLINE void mtvm_mm_s16_thumb2(const int16_t* c, const uint8_t* w, int w_u,
                                                  int32_t pixels, int32_t nb, int32_t wal,
                                                  int32_t* acc)
{
    int32_t s00 = acc[0], s01 = acc[1];
    int32_t s10 = pixels == 2 ? acc[2] : 0, s11 = pixels == 2 ? acc[3] : 0;
    uint32_t x0, x1, wa, wah, wb, wbh;
    if (pixels == 2) {
        if (w_u) MTVM_MM_S16_WAL(MTVM_MM2_S16_BLOCK, "uxtb16", MTVM_MM2_S16_OPS);
        else MTVM_MM_S16_WAL(MTVM_MM2_S16_BLOCK, "sxtb16", MTVM_MM2_S16_OPS);
    } else {
        if (w_u) MTVM_MM_S16_WAL(MTVM_MM1_S16_BLOCK, "uxtb16", MTVM_MM1_S16_OPS);
        else MTVM_MM_S16_WAL(MTVM_MM1_S16_BLOCK, "sxtb16", MTVM_MM1_S16_OPS);
    }
    acc[0] = s00;
    acc[1] = s01;
    if (pixels == 2) {
        acc[2] = s10;
        acc[3] = s11;
    }
}
#endif

#endif  /* MTVM_MM_S16_THUMB2_H_ */
