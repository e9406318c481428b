/* mtvm_dw_f32_cv8_avx2.h: Float depthwise convolution of small planes, eight channels
 * at a time (AVX2 + FMA): a lane per channel, as libraries with a channel-blocked layout
 * (NCHW8c) compute it. Per group of eight channels the input planes are transposed into
 * a zero-bordered [row][column][8] block in scratch (8 x 8 transposes in registers),
 * each output pixel is then kh x kw FMAs of whole vectors (whole-pixel loads, no border
 * code, any stride and dilation), and the outputs are transposed back into the
 * channels' planes, clamped. On planes of a few rows and columns this replaces a
 * copy-in, a flat loop and a copy-out per channel whose fixed costs dominated: per
 * layer, AVX2, vww_mobilenetv1's 6 x 6 ones 3.62 -> 2.40 us, its 3 x 3 one 5.66 -> 2.28,
 * kws_dscnn's 25 x 5 ones 4.35 -> 3.69. The two transposes cost about 0.3 ns a value,
 * so planes from about 12 x 12 up keep the flat loop (vww's 12 x 12 layer: 4.17 us flat,
 * 6.06 here): the depthwise_cv8_max_plane knob, 128 input pixels. AVX-512 hosts run it
 * too where their direct kernel does not apply or fills one tile (conv.depthwise_cv8_avx512):
 * 88 channels of 8 x 8 at stride 2, 7.2 -> 5.4 us (Zen 5).
 * Every load is a whole pixel of the block (32 bytes; the arena aligns scratch to 16,
 * so half of them may still cross a cache line, against most of the flat loop's).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_DW_F32_CV8_AVX2_H_
#define MTVM_DW_F32_CV8_AVX2_H_

#include <stddef.h>
#include <string.h>
#include "mtvm_f32_prelude.h"

#if MTVM_F32_AVX2 || MTVM_F32_AVX512   /* AVX2 code, which AVX-512 hosts run too */

/* r[0..7] = the 8 x 8 block with rows and columns exchanged. */
static inline void mtvm_transpose8_f32_avx2(__m256 r[8])
{
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* Floats of scratch the kernel needs (the schedule mirrors this): the bordered input
 * block, hp x wp pixels, and the output block, rounded up to whole 8-pixel groups. */
static inline int mtvm_dw_f32_cv8_floats(int hp, int wp, int oh_n, int ow_n)
{
    return 8 * (hp * wp + (oh_n * ow_n + 7) / 8 * 8);
}

/* Channels c < nc (nc <= 8) of x (planes h x w, `plane` floats apart; y likewise,
 * oh_n x ow_n, `out_plane` apart): y[c][oh][ow] = clamp(bias[c] + sum_ij wt[c][i][j]
 * x[c][oh sh + i dh - ph][ow sw + j dw - pw], lo, hi), zero outside the plane.
 * wt: the group's weights [nc][kh_n][kw_n]; bias: nc floats or NULL. hp, wp: the
 * bordered block (at least ph + h and (oh_n - 1) sh + (kh_n - 1) dh + 1 rows, and so
 * for the columns). In place (y == x) is safe: a group's inputs are all read first. */
static inline void mtvm_dw_f32_cv8_avx2(const float* x, int plane, int h, int w,
                                        int kh_n, int kw_n, int sh, int sw, int dh, int dw,
                                        int ph, int pw, int hp, int wp,
                                        const float* wt, const float* bias, int nc,
                                        float lo, float hi, float* y, int out_plane,
                                        int oh_n, int ow_n, float* buf)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    float* in = buf;                          /* [hp][wp][8] */
    float* out = buf + 8 * hp * wp;           /* [oh_n * ow_n rounded to 8][8] */
    const int taps = kh_n * kw_n;
    memset(in, 0, (size_t)8 * hp * wp * sizeof(float));
    /* in: 8 channel rows of 8 columns transposed to 8 pixels of 8 channels */
    for (int ih = 0; ih < h; ++ih) {
        for (int iw = 0; iw < w; iw += 8) {
            const int n = w - iw < 8 ? w - iw : 8;
            const __m256i cols = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
            __m256 r[8];
            for (int c = 0; c < 8; ++c) {
                r[c] = c < nc ? _mm256_maskload_ps(x + (size_t)c * plane + (size_t)ih * w + iw,
                                                   cols)
                              : _mm256_setzero_ps();
            }
            mtvm_transpose8_f32_avx2(r);
            float* dst = in + ((size_t)(ih + ph) * wp + pw + iw) * 8;
            for (int j = 0; j < n; ++j) _mm256_storeu_ps(dst + 8 * j, r[j]);
        }
    }
    /* the weights and bias, a lane per channel (lanes past nc: 0) */
    __m256 wv[49];
    for (int t = 0; t < taps; ++t) {
        float v[8] = {0};
        for (int c = 0; c < nc; ++c) v[c] = wt[c * taps + t];
        wv[t] = _mm256_loadu_ps(v);
    }
    float bb[8] = {0};
    for (int c = 0; c < nc && bias; ++c) bb[c] = bias[c];
    const __m256 bv = _mm256_loadu_ps(bb), lov = _mm256_set1_ps(lo), hiv = _mm256_set1_ps(hi);
    for (int oh = 0; oh < oh_n; ++oh) {
        for (int ow = 0; ow < ow_n; ++ow) {
            const float* p = in + ((size_t)oh * sh * wp + (size_t)ow * sw) * 8;
            __m256 acc = bv;
            for (int i = 0; i < kh_n; ++i) {
                for (int j = 0; j < kw_n; ++j) {
                    acc = _mm256_fmadd_ps(wv[i * kw_n + j],
                                          _mm256_loadu_ps(p + ((size_t)i * dh * wp + j * dw) * 8),
                                          acc);
                }
            }
            _mm256_storeu_ps(out + ((size_t)oh * ow_n + ow) * 8,
                             _mm256_min_ps(hiv, _mm256_max_ps(lov, acc)));
        }
    }
    /* out: 8 pixels of 8 channels transposed back to 8 channel rows */
    const int q_n = oh_n * ow_n;
    for (int q = 0; q < q_n; q += 8) {
        const int n = q_n - q < 8 ? q_n - q : 8;
        __m256 r[8];
        for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(out + (size_t)(q + j) * 8);
        mtvm_transpose8_f32_avx2(r);
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
        for (int c = 0; c < nc; ++c) {
            float* yc = y + (size_t)c * out_plane + q;
            if (n == 8) {
                _mm256_storeu_ps(yc, r[c]);
            } else {
                _mm256_maskstore_ps(yc, keep, r[c]);
            }
        }
    }
}

#endif  /* MTVM_F32_AVX2 || MTVM_F32_AVX512 */

#endif  /* MTVM_DW_F32_CV8_AVX2_H_ */
