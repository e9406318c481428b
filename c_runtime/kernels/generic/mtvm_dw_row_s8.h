/* mtvm_dw_row_s8.h: The row micro-kernels of the int8 3-wide depthwise windows (SMLAD /
 * SMLAxy on a DSP core, plain sums elsewhere) and the DSP byte unpacking they share.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DW_ROW_S8_H_
#define MTVM_DW_ROW_S8_H_

#include <stdint.h>
#include <string.h>
#include "mtvm_dsp.h"
#include "mtvm_ror8.h"
#include "mtvm_depthwise_s8.h"

/* One row of a 3-wide window for 4 or 2 neighbouring output pixels at x stride S (1 or
 * 2), data type <d> (s8, u8), middle weight in the bottom (b) or top (t) half of wm:
 *
 *   void mtvm_dw3x<npix>s<S><b|t>_<d>(const T* p, int32_t w0, int32_t w1, int32_t w2,
 *                                    int32_t w02, int32_t wm, int32_t* a0, ...)
 *   a[i] += p[S i] w0 + p[S i + 1] w1 + p[S i + 2] w2
 *
 * w02 holds (w0, w2) as two int16 lanes, wm holds w1 in its bottom or top half (the DSP
 * form reads these, the plain one w0, w1, w2). Reads exactly the bytes the window
 * covers. QConv's depthwise emitter (mtvm/ops/quantized/depthwise.py) calls them. */

#if defined(__ARM_FEATURE_DSP)

/* The intrinsics by the names the definitions below pass (only a DSP build spells them). */
#define MTVM_DW_SXTB16_ __sxtb16
#define MTVM_DW_SXTB16_ROR8_ mtvm_sxtb16_ror8
#define MTVM_DW_UXTB16_ __uxtb16
#define MTVM_DW_UXTB16_ROR8_ mtvm_uxtb16_ror8
#define MTVM_DW_SMLAB_b __smlabb
#define MTVM_DW_SMLAB_t __smlabt
#define MTVM_DW_SMLAT_b __smlatb
#define MTVM_DW_SMLAT_t __smlatt

/* XX_: SXTB16 / UXTB16 (the even bytes), XR_: the same of the odd bytes; B_, T_: the
 * SMLAxy of the bottom and the top data half with the chosen weight half. */
#define MTVM_DW_ROW_S1X4_(XX_, XR_, B_, T_) \
    uint32_t x4; \
    memcpy(&x4, p, 4); \
    const int32_t lo = XX_((int32_t)x4);  /* (p0, p2) */ \
    const int32_t hi = XR_((int32_t)x4);  /* (p1, p3) */ \
    const int32_t p4 = p[4], p5 = p[5]; \
    *a0 = B_(hi, wm, __smlad(lo, w02, *a0)); \
    *a1 = T_(lo, wm, __smlad(hi, w02, *a1)); \
    *a2 = T_(hi, wm, __smladx(mtvm_pkhbt(p4, lo), w02, *a2));  /* (p4, p2) */ \
    *a3 = B_(p4, wm, __smladx(mtvm_pkhbt(p5, hi), w02, *a3));  /* (p5, p3) */

#define MTVM_DW_ROW_S1X2_(XX_, XR_, B_, T_) \
    uint32_t x4; \
    memcpy(&x4, p, 4); \
    const int32_t lo = XX_((int32_t)x4);  /* (p0, p2) */ \
    const int32_t hi = XR_((int32_t)x4);  /* (p1, p3) */ \
    *a0 = B_(hi, wm, __smlad(lo, w02, *a0)); \
    *a1 = T_(lo, wm, __smlad(hi, w02, *a1));

#define MTVM_DW_ROW_S2X4_(XX_, XR_, B_, T_) \
    uint32_t x4, y4; \
    memcpy(&x4, p, 4); \
    memcpy(&y4, p + 4, 4); \
    const int32_t lo = XX_((int32_t)x4);   /* (p0, p2) */ \
    const int32_t hi = XR_((int32_t)x4);   /* (p1, p3) */ \
    const int32_t lo2 = XX_((int32_t)y4);  /* (p4, p6) */ \
    const int32_t hi2 = XR_((int32_t)y4);  /* (p5, p7) */ \
    const int32_t p8 = p[8]; \
    *a0 = B_(hi, wm, __smlad(lo, w02, *a0)); \
    *a1 = T_(hi, wm, __smladx(mtvm_pkhbt(lo2, lo), w02, *a1));  /* (p4, p2) */ \
    *a2 = B_(hi2, wm, __smlad(lo2, w02, *a2)); \
    *a3 = T_(hi2, wm, __smladx(mtvm_pkhbt(p8, lo2), w02, *a3));  /* (p8, p6) */

#define MTVM_DW_ROW_S2X2_(XX_, XR_, B_, T_) \
    uint32_t x4; \
    memcpy(&x4, p, 4); \
    const int32_t lo = XX_((int32_t)x4);  /* (p0, p2) */ \
    const int32_t hi = XR_((int32_t)x4);  /* (p1, p3) */ \
    const int32_t p4 = p[4]; \
    *a0 = B_(hi, wm, __smlad(lo, w02, *a0)); \
    *a1 = T_(hi, wm, __smladx(mtvm_pkhbt(p4, lo), w02, *a1));  /* (p4, p2) */

#define MTVM_DW_ROW_BODY_(S_, N_, XX_, XR_, B_, T_) \
    MTVM_DW_ROW_S##S_##X##N_##_(XX_, XR_, B_, T_) \
    (void)w0; \
    (void)w1; \
    (void)w2;

#else

#define MTVM_DW_ROW_PLAIN_(S_, I_) \
    *a##I_ += (int32_t)p[S_ * I_] * w0 + (int32_t)p[S_ * I_ + 1] * w1 \
        + (int32_t)p[S_ * I_ + 2] * w2;
#define MTVM_DW_ROW_PLAIN_2_(S_) MTVM_DW_ROW_PLAIN_(S_, 0) MTVM_DW_ROW_PLAIN_(S_, 1)
#define MTVM_DW_ROW_PLAIN_4_(S_) MTVM_DW_ROW_PLAIN_2_(S_) MTVM_DW_ROW_PLAIN_(S_, 2) \
    MTVM_DW_ROW_PLAIN_(S_, 3)
#define MTVM_DW_ROW_BODY_(S_, N_, XX_, XR_, B_, T_) \
    (void)w02; \
    (void)wm; \
    MTVM_DW_ROW_PLAIN_##N_##_(S_)

#endif

#define MTVM_DW_ROW_ACCS_2_ int32_t* a0, int32_t* a1
#define MTVM_DW_ROW_ACCS_4_ int32_t* a0, int32_t* a1, int32_t* a2, int32_t* a3

/* mtvm_dw3x<N_>s<S_><W_>_<D_>, data type T_, SXTB16/UXTB16 XX_ and its odd-byte form XR_ */
#define MTVM_DEFINE_DW_ROW_(S_, N_, W_, D_, T_, XX_, XR_) \
    static inline void mtvm_dw3x##N_##s##S_##W_##_##D_(const T_* p, int32_t w0, int32_t w1, \
                                                       int32_t w2, int32_t w02, int32_t wm, \
                                                       MTVM_DW_ROW_ACCS_##N_##_) \
    { \
        MTVM_DW_ROW_BODY_(S_, N_, XX_, XR_, MTVM_DW_SMLAB_##W_, MTVM_DW_SMLAT_##W_) \
    }
#define MTVM_DEFINE_DW_ROWS_(D_, T_, XX_, XR_) \
    MTVM_DEFINE_DW_ROW_(1, 4, b, D_, T_, XX_, XR_) MTVM_DEFINE_DW_ROW_(1, 4, t, D_, T_, XX_, XR_) \
    MTVM_DEFINE_DW_ROW_(1, 2, b, D_, T_, XX_, XR_) MTVM_DEFINE_DW_ROW_(1, 2, t, D_, T_, XX_, XR_) \
    MTVM_DEFINE_DW_ROW_(2, 4, b, D_, T_, XX_, XR_) MTVM_DEFINE_DW_ROW_(2, 4, t, D_, T_, XX_, XR_) \
    MTVM_DEFINE_DW_ROW_(2, 2, b, D_, T_, XX_, XR_) MTVM_DEFINE_DW_ROW_(2, 2, t, D_, T_, XX_, XR_)

MTVM_DEFINE_DW_ROWS_(s8, int8_t, MTVM_DW_SXTB16_, MTVM_DW_SXTB16_ROR8_)
MTVM_DEFINE_DW_ROWS_(u8, uint8_t, MTVM_DW_UXTB16_, MTVM_DW_UXTB16_ROR8_)

#if defined(__ARM_FEATURE_DSP)
/* (p0, p2) and (p1, p3) as int16 lanes, from one (unaligned) word load:
 * mtvm_dw_unpack_<s8|u8>(const T* p, int32_t* lo, int32_t* hi). */
#define MTVM_DEFINE_DW_UNPACK_(D_, T_, XX_, XR_) \
    static inline void mtvm_dw_unpack_##D_(const T_* p, int32_t* lo, int32_t* hi) \
    { \
        uint32_t x4; \
        memcpy(&x4, p, 4); \
        *lo = XX_((int32_t)x4); \
        *hi = XR_((int32_t)x4); \
    }
MTVM_DEFINE_DW_UNPACK_(s8, int8_t, __sxtb16, mtvm_sxtb16_ror8)
MTVM_DEFINE_DW_UNPACK_(u8, uint8_t, __uxtb16, mtvm_uxtb16_ror8)

/* *a0 += p0 w0 + p1 w1 + p2 w2, *a1 += p1 w0 + p2 w1 + p3 w2 with lo = (p0, p2),
 * hi = (p1, p3), w02 = (w0, w2) and w1 in the bottom (mtvm_dw_mac2b) or top
 * (mtvm_dw_mac2t) half of wm. */
#define MTVM_DEFINE_DW_MAC2_(W_) \
    static inline void mtvm_dw_mac2##W_(int32_t lo, int32_t hi, int32_t w02, int32_t wm, \
                                        int32_t* a0, int32_t* a1) \
    { \
        *a0 = __smlab##W_(hi, wm, __smlad(lo, w02, *a0)); \
        *a1 = __smlat##W_(lo, wm, __smlad(hi, w02, *a1)); \
    }
MTVM_DEFINE_DW_MAC2_(b)
MTVM_DEFINE_DW_MAC2_(t)

/* The second pixel of the pair alone: *a += p1 w0 + p2 w1 + p3 w2 (lo, hi unpacked from
 * p, one byte before the window: a row's last pixel then reads no byte past the row). */
#define MTVM_DEFINE_DW_MAC1_(W_) \
    static inline void mtvm_dw_mac1##W_(int32_t lo, int32_t hi, int32_t w02, int32_t wm, \
                                        int32_t* a) \
    { \
        *a = __smlat##W_(lo, wm, __smlad(hi, w02, *a)); \
    }
MTVM_DEFINE_DW_MAC1_(b)
MTVM_DEFINE_DW_MAC1_(t)
#endif

#endif  /* MTVM_DW_ROW_S8_H_ */
