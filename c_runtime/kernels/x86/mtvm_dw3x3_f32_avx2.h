/* mtvm_dw3x3_f32_avx2.h: One channel of a 3 x 3 stride-1 float depthwise convolution
 * (dilation 1) on AVX2 + FMA, read straight from the input plane and stored clamped:
 *
 *   y[oh][ow] = clamp(b + sum_ij w[i][j] x[oh + i - ph][ow + j - pw], lo, hi)
 *
 * (x zero outside its h x w plane) for oh < oh_n, ow < ow_n. Inside a row, 16 outputs
 * per step (two independent chains of nine FMAs: one chain leaves the FMA units idle
 * for its latency), then 8; at the row's ends the loads are masked to the row (a
 * masked-off lane does not fault) and the store to the outputs. Rows above or below
 * the plane read `zero` (w zero floats). No copy of the plane and no row of results in
 * scratch: the flat schedule it replaces spent as long copying the plane in and the
 * results out as computing (fomo_mbv2's 16-channel 48 x 48 layer: 3.3 + 5.0 of 17 us;
 * 12.7 us with this kernel; vww_mobilenetv1's 8-channel one 7.4 -> 6.6 us). Rows under
 * 32 outputs keep the flat schedule (the depthwise_avx2_min_cols knob), whose vectors
 * run across rows: nine loads per eight outputs either way, and here more of the
 * vectors are a row's ends (24 x 24: fomo_mbv2 14.1 -> 13.1 us but vww 6.8 -> 7.9;
 * 12 x 12: 9.9 -> 10.8).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DW3X3_F32_AVX2_H_
#define MTVM_DW3X3_F32_AVX2_H_

#include <stddef.h>
#include "mtvm_f32_prelude.h"

#if MTVM_F32_AVX2

/* The nine weights, bias and bounds of a channel, broadcast. */
typedef struct {
    __m256 w00, w01, w02, w10, w11, w12, w20, w21, w22, b, lo, hi;
} mtvm_dw3x3_f32_avx2_t;

/* acc = b + the nine taps at column c of rows r0..r2, LOAD(row, column) loading 8. */
#define MTVM_DW3X3_TAPS_(ACC, K, R0, R1, R2, C, LOAD) \
    ACC = _mm256_fmadd_ps((K)->w00, LOAD(R0, (C)), (K)->b); \
    ACC = _mm256_fmadd_ps((K)->w01, LOAD(R0, (C) + 1), ACC); \
    ACC = _mm256_fmadd_ps((K)->w02, LOAD(R0, (C) + 2), ACC); \
    ACC = _mm256_fmadd_ps((K)->w10, LOAD(R1, (C)), ACC); \
    ACC = _mm256_fmadd_ps((K)->w11, LOAD(R1, (C) + 1), ACC); \
    ACC = _mm256_fmadd_ps((K)->w12, LOAD(R1, (C) + 2), ACC); \
    ACC = _mm256_fmadd_ps((K)->w20, LOAD(R2, (C)), ACC); \
    ACC = _mm256_fmadd_ps((K)->w21, LOAD(R2, (C) + 1), ACC); \
    ACC = _mm256_fmadd_ps((K)->w22, LOAD(R2, (C) + 2), ACC);
#define MTVM_DW3X3_LOAD_(R, C) _mm256_loadu_ps((R) + (C))

/* Lanes l with 0 <= c + l < w. */
static inline __m256i mtvm_dw3x3_in_row_(int c, int w)
{
    const __m256i col = _mm256_add_epi32(_mm256_set1_epi32(c),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), col),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32(w), col));
}

/* Outputs ow .. ow + 7 (those below ow_n) of a row whose taps leave the row: masked. */
static inline void mtvm_dw3x3_edge_(const mtvm_dw3x3_f32_avx2_t* k, const float* r0,
                                    const float* r1, const float* r2, int c, int w,
                                    float* y, int n)
{
    const __m256i m0 = mtvm_dw3x3_in_row_(c, w), m1 = mtvm_dw3x3_in_row_(c + 1, w);
    const __m256i m2 = mtvm_dw3x3_in_row_(c + 2, w);
    __m256 acc;
    /* each tap column its mask: column c + j reads with m<j> (pointers from the row's
     * start, c may be negative: masked lanes are not read) */
#define MTVM_DW3X3_MASKED_(R, C) \
    _mm256_maskload_ps((R) + (C), (C) == c ? m0 : ((C) == c + 1 ? m1 : m2))
    MTVM_DW3X3_TAPS_(acc, k, r0, r1, r2, c, MTVM_DW3X3_MASKED_)
#undef MTVM_DW3X3_MASKED_
    acc = _mm256_min_ps(k->hi, _mm256_max_ps(k->lo, acc));
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(y, keep, acc);
}

static inline void mtvm_dw3x3s1_f32_avx2(const float* x, int h, int w, int ph, int pw,
                                          const float* wk, float b, float lo, float hi,
                                          float* y, int oh_n, int ow_n, const float* zero)
{
    const mtvm_dw3x3_f32_avx2_t k = {
        _mm256_set1_ps(wk[0]), _mm256_set1_ps(wk[1]), _mm256_set1_ps(wk[2]),
        _mm256_set1_ps(wk[3]), _mm256_set1_ps(wk[4]), _mm256_set1_ps(wk[5]),
        _mm256_set1_ps(wk[6]), _mm256_set1_ps(wk[7]), _mm256_set1_ps(wk[8]),
        _mm256_set1_ps(b), _mm256_set1_ps(lo), _mm256_set1_ps(hi)};
    for (int oh = 0; oh < oh_n; ++oh) {
        const int ih = oh - ph;
        const float* r0 = (unsigned)ih < (unsigned)h ? x + (size_t)ih * w : zero;
        const float* r1 = (unsigned)(ih + 1) < (unsigned)h ? x + (size_t)(ih + 1) * w : zero;
        const float* r2 = (unsigned)(ih + 2) < (unsigned)h ? x + (size_t)(ih + 2) * w : zero;
        float* yr = y + (size_t)oh * ow_n;
        int ow = 0;
        for (; ow < pw && ow < ow_n; ow += 8) {
            mtvm_dw3x3_edge_(&k, r0, r1, r2, ow - pw, w, yr + ow, ow_n - ow);
        }
        for (; ow - pw + 18 <= w && ow + 16 <= ow_n; ow += 16) {
            __m256 a0, a1;
            MTVM_DW3X3_TAPS_(a0, &k, r0, r1, r2, ow - pw, MTVM_DW3X3_LOAD_)
            MTVM_DW3X3_TAPS_(a1, &k, r0, r1, r2, ow - pw + 8, MTVM_DW3X3_LOAD_)
            _mm256_storeu_ps(yr + ow, _mm256_min_ps(k.hi, _mm256_max_ps(k.lo, a0)));
            _mm256_storeu_ps(yr + ow + 8, _mm256_min_ps(k.hi, _mm256_max_ps(k.lo, a1)));
        }
        for (; ow - pw + 10 <= w && ow + 8 <= ow_n; ow += 8) {
            __m256 a0;
            MTVM_DW3X3_TAPS_(a0, &k, r0, r1, r2, ow - pw, MTVM_DW3X3_LOAD_)
            _mm256_storeu_ps(yr + ow, _mm256_min_ps(k.hi, _mm256_max_ps(k.lo, a0)));
        }
        for (; ow < ow_n; ow += 8) {
            mtvm_dw3x3_edge_(&k, r0, r1, r2, ow - pw, w, yr + ow, ow_n - ow);
        }
    }
}

#endif  /* MTVM_F32_AVX2 */

#endif  /* MTVM_DW3X3_F32_AVX2_H_ */
