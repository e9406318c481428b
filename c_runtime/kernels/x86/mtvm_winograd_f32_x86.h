/* mtvm_winograd_f32_x86.h: 3 x 3 stride-1 float convolution by Winograd's minimal
 * filtering F(4 x 4, 3 x 3) (Lavin and Gray 2015): 36 multiplications per 4 x 4 output
 * tile and input channel instead of 144. AVX2 + FMA (it compiles in AVX-512 builds
 * too, but the schedule gives it to AVX2 builds only).
 * Part of mtvm's kernel library (c_runtime/kernels/README.md).
 *
 * The schedule (mtvm/ops/conv_winograd.py) calls the three stages per block of `nt`
 * tiles (whole rows of `tw` tiles each, tile t = i * tw + j in the block):
 *
 *   mtvm_wino_f32_input:   V[xi][c][t] = (B^T d B)[xi], d the 6 x 6 input patch of tile t
 *                          (zero in the padding), for every input channel c;
 *   mtvm_wino_f32_gemm:    M[xi][r][t] = sum_c U[xi][m0 + r][c] V[xi][c][t], for a block
 *                          of 4 (or 1) output channels; U = G g G^T, transformed at
 *                          compile time;
 *   mtvm_wino_f32_output:  y = A^T M A (+ bias, clamped to [lo, hi]) for one channel,
 *                          written as 4 output rows per tile row.
 *
 * Lanes are 8 tiles of a row: the input rows are split into their 4 column phases
 * with in-lane transposes (each tile starts 4 columns after the last), so every
 * stage runs on whole vectors. A tile row narrower than 8 tiles writes its unused
 * lanes into the next row's slots, which that row then overwrites (ascending order);
 * the buffers hold 8 spare tiles past the block for the last row's. */
#ifndef MTVM_WINOGRAD_F32_X86_H_
#define MTVM_WINOGRAD_F32_X86_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "mtvm_f32_prelude.h"

#if MTVM_F32_AVX512 || MTVM_F32_AVX2

/* The 1-D input transform B^T d, d0..d5 -> t0..t5 (points 0, 1, -1, 2, -2). */
#define MTVM_WINO_IN_(d0, d1, d2, d3, d4, d5, t0, t1, t2, t3, t4, t5) \
    { const __m256 four_ = _mm256_set1_ps(4.0f), five_ = _mm256_set1_ps(5.0f); \
      const __m256 two_ = _mm256_set1_ps(2.0f); \
      const __m256 s34_ = _mm256_add_ps(d3, d4), s12_ = _mm256_add_ps(d1, d2); \
      const __m256 d43_ = _mm256_sub_ps(d4, d3), d12_ = _mm256_sub_ps(d1, d2); \
      const __m256 d42_ = _mm256_sub_ps(d4, d2), d13_ = _mm256_sub_ps(d1, d3); \
      t0 = _mm256_fnmadd_ps(five_, d2, _mm256_fmadd_ps(four_, d0, d4)); \
      t1 = _mm256_fnmadd_ps(four_, s12_, s34_); \
      t2 = _mm256_fmadd_ps(four_, d12_, d43_); \
      t3 = _mm256_fnmadd_ps(two_, d13_, d42_); \
      t4 = _mm256_fmadd_ps(two_, d13_, d42_); \
      t5 = _mm256_fnmadd_ps(five_, d3, _mm256_fmadd_ps(four_, d1, d5)); }

/* The 1-D output transform A^T m, m0..m5 -> y0..y3. */
#define MTVM_WINO_OUT_(m0, m1, m2, m3, m4, m5, y0, y1, y2, y3) \
    { const __m256 a_ = _mm256_add_ps(m1, m2), b_ = _mm256_sub_ps(m1, m2); \
      const __m256 c_ = _mm256_add_ps(m3, m4), d_ = _mm256_sub_ps(m3, m4); \
      y0 = _mm256_add_ps(_mm256_add_ps(m0, a_), c_); \
      y1 = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), d_, b_); \
      y2 = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), c_, a_); \
      y3 = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), d_, b_), m5); }

/* Floats of each stage's buffer (the schedule's scratch_bytes mirrors these). Rows of
 * twp = 8 * ceil(tw / 8) tiles; ldv = tiles per (xi, channel) row of V and M. */
static inline int mtvm_wino_f32_twp(int tw) { return (tw + 7) / 8 * 8; }
static inline int mtvm_wino_f32_ldv(int nt) { return (nt + 7) / 8 * 8 + 8; }
static inline int mtvm_wino_f32_rowbuf(int tw) { return 4 * mtvm_wino_f32_twp(tw) + 8; }

/* v[k][j] = (B^T d_j)[k] along one padded input row: d_j = row[4j .. 4j + 5], j < twp.
 * row holds 4 * twp + 8 floats. */
static inline void mtvm_wino_f32_row(const float* row, int twp, float* restrict v)
{
    for (int j0 = 0; j0 < twp; j0 += 8) {
        const float* b = row + 4 * j0;
        /* 8 tiles of 4 columns -> 4 vectors, column phase p in d<p> (lane j: tile j) */
        const __m256 q0 = _mm256_loadu_ps(b), q1 = _mm256_loadu_ps(b + 8);
        const __m256 q2 = _mm256_loadu_ps(b + 16), q3 = _mm256_loadu_ps(b + 24);
        const __m256 r0 = _mm256_permute2f128_ps(q0, q2, 0x20);
        const __m256 r1 = _mm256_permute2f128_ps(q0, q2, 0x31);
        const __m256 r2 = _mm256_permute2f128_ps(q1, q3, 0x20);
        const __m256 r3 = _mm256_permute2f128_ps(q1, q3, 0x31);
        const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
        const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
        const __m256 d0 = _mm256_shuffle_ps(t0, t2, 0x44), d1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        const __m256 d2 = _mm256_shuffle_ps(t1, t3, 0x44), d3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        /* columns 4j + 4 and 4j + 5: phases 0 and 1 one tile on */
        const __m256i next = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
        const __m256 d4 = _mm256_blend_ps(_mm256_permutevar8x32_ps(d0, next),
                                          _mm256_broadcast_ss(b + 32), 0x80);
        const __m256 d5 = _mm256_blend_ps(_mm256_permutevar8x32_ps(d1, next),
                                          _mm256_broadcast_ss(b + 33), 0x80);
        __m256 u0, u1, u2, u3, u4, u5;
        MTVM_WINO_IN_(d0, d1, d2, d3, d4, d5, u0, u1, u2, u3, u4, u5)
        _mm256_storeu_ps(v + 0 * twp + j0, u0);
        _mm256_storeu_ps(v + 1 * twp + j0, u1);
        _mm256_storeu_ps(v + 2 * twp + j0, u2);
        _mm256_storeu_ps(v + 3 * twp + j0, u3);
        _mm256_storeu_ps(v + 4 * twp + j0, u4);
        _mm256_storeu_ps(v + 5 * twp + j0, u5);
    }
}

/* V[(kr * 6 + k) * c_in + c][i * tw + j], t < ldv: the transformed 6 x 6 patches of tile
 * rows i0 .. i0 + rows - 1 (tiles of 4 x 4 outputs, tw to a row) of the c_in planes x
 * (h x w, zero padding pad_top above and pad_left to the left).
 * scratch: mtvm_wino_f32_rowbuf(tw) + (4 * rows + 2) * 6 * twp floats. */
static inline void mtvm_wino_f32_input(const float* restrict x, int c_in, int h, int w,
                                       int pad_top, int pad_left, int tw, int i0, int rows,
                                       float* restrict v, int ldv, float* restrict scratch)
{
    const int twp = mtvm_wino_f32_twp(tw), rb_n = mtvm_wino_f32_rowbuf(tw);
    const int in_rows = 4 * rows + 2, copy = w < rb_n - pad_left ? w : rb_n - pad_left;
    float* rb = scratch;
    float* u1 = scratch + rb_n;     /* [input row][k][twp]: the rows' 1-D transforms */
    memset(rb, 0, (size_t)rb_n * sizeof(float));
    for (int c = 0; c < c_in; ++c) {
        const float* xc = x + (size_t)c * h * w;
        for (int rr = 0; rr < in_rows; ++rr) {
            const int ih = 4 * i0 + rr - pad_top;
            float* u = u1 + (size_t)rr * 6 * twp;
            if ((unsigned)ih >= (unsigned)h) {   /* a padding row */
                memset(u, 0, (size_t)6 * twp * sizeof(float));
                continue;
            }
            memcpy(rb + pad_left, xc + (size_t)ih * w, (size_t)copy * sizeof(float));
            mtvm_wino_f32_row(rb, twp, u);
        }
        for (int i = 0; i < rows; ++i) {
            for (int k = 0; k < 6; ++k) {
                const float* u = u1 + (size_t)(4 * i) * 6 * twp + (size_t)k * twp;
                float* vo = v + ((size_t)k * c_in + c) * ldv + (size_t)i * tw;
                const size_t row_step = (size_t)6 * twp, xi_step = (size_t)6 * c_in * ldv;
                for (int j0 = 0; j0 < tw; j0 += 8) {
                    const __m256 d0 = _mm256_loadu_ps(u + j0);
                    const __m256 d1 = _mm256_loadu_ps(u + row_step + j0);
                    const __m256 d2 = _mm256_loadu_ps(u + 2 * row_step + j0);
                    const __m256 d3 = _mm256_loadu_ps(u + 3 * row_step + j0);
                    const __m256 d4 = _mm256_loadu_ps(u + 4 * row_step + j0);
                    const __m256 d5 = _mm256_loadu_ps(u + 5 * row_step + j0);
                    __m256 e0, e1, e2, e3, e4, e5;
                    MTVM_WINO_IN_(d0, d1, d2, d3, d4, d5, e0, e1, e2, e3, e4, e5)
                    _mm256_storeu_ps(vo + j0, e0);
                    _mm256_storeu_ps(vo + xi_step + j0, e1);
                    _mm256_storeu_ps(vo + 2 * xi_step + j0, e2);
                    _mm256_storeu_ps(vo + 3 * xi_step + j0, e3);
                    _mm256_storeu_ps(vo + 4 * xi_step + j0, e4);
                    _mm256_storeu_ps(vo + 5 * xi_step + j0, e5);
                }
            }
        }
    }
}

/* M[xi][r][t] = sum_c u[xi * m_out * c_in + m0 * c_in + c * mr + r] V[xi * c_in + c][t],
 * r < mr (4 or 1), t < nt8 (a multiple of 8, at most ldv): 4 x 16 tiles, then 4 x 8. */
static inline void mtvm_wino_f32_gemm(const float* restrict u, int c_in, int m_out, int m0,
                                      int mr, const float* restrict v, int ldv, int nt8,
                                      float* restrict mb)
{
    for (int xi = 0; xi < 36; ++xi) {
        const float* a = u + ((size_t)xi * m_out + m0) * c_in;
        const float* b = v + (size_t)xi * c_in * ldv;
        float* o = mb + (size_t)xi * mr * ldv;
        int t = 0;
        if (mr == 4) {
            for (; t + 16 <= nt8; t += 16) {
                __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
                __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
                __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
                __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
                const float* bt = b + t;
                const float* at = a;
                for (int c = 0; c < c_in; ++c, bt += ldv, at += 4) {
                    const __m256 v0 = _mm256_loadu_ps(bt), v1 = _mm256_loadu_ps(bt + 8);
                    const __m256 a0 = _mm256_broadcast_ss(at), a1 = _mm256_broadcast_ss(at + 1);
                    const __m256 a2 = _mm256_broadcast_ss(at + 2), a3 = _mm256_broadcast_ss(at + 3);
                    c00 = _mm256_fmadd_ps(a0, v0, c00); c01 = _mm256_fmadd_ps(a0, v1, c01);
                    c10 = _mm256_fmadd_ps(a1, v0, c10); c11 = _mm256_fmadd_ps(a1, v1, c11);
                    c20 = _mm256_fmadd_ps(a2, v0, c20); c21 = _mm256_fmadd_ps(a2, v1, c21);
                    c30 = _mm256_fmadd_ps(a3, v0, c30); c31 = _mm256_fmadd_ps(a3, v1, c31);
                }
                _mm256_storeu_ps(o + t, c00); _mm256_storeu_ps(o + t + 8, c01);
                _mm256_storeu_ps(o + ldv + t, c10); _mm256_storeu_ps(o + ldv + t + 8, c11);
                _mm256_storeu_ps(o + 2 * ldv + t, c20); _mm256_storeu_ps(o + 2 * ldv + t + 8, c21);
                _mm256_storeu_ps(o + 3 * ldv + t, c30); _mm256_storeu_ps(o + 3 * ldv + t + 8, c31);
            }
            for (; t < nt8; t += 8) {
                __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps();
                __m256 c2 = _mm256_setzero_ps(), c3 = _mm256_setzero_ps();
                const float* bt = b + t;
                const float* at = a;
                for (int c = 0; c < c_in; ++c, bt += ldv, at += 4) {
                    const __m256 v0 = _mm256_loadu_ps(bt);
                    c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(at), v0, c0);
                    c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(at + 1), v0, c1);
                    c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(at + 2), v0, c2);
                    c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(at + 3), v0, c3);
                }
                _mm256_storeu_ps(o + t, c0);
                _mm256_storeu_ps(o + ldv + t, c1);
                _mm256_storeu_ps(o + 2 * ldv + t, c2);
                _mm256_storeu_ps(o + 3 * ldv + t, c3);
            }
        } else {  /* one channel: 8 tiles at a time, the channels in two chains */
            for (; t < nt8; t += 8) {
                __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps();
                const float* bt = b + t;
                int c = 0;
                for (; c + 1 < c_in; c += 2, bt += 2 * ldv) {
                    c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + c), _mm256_loadu_ps(bt), c0);
                    c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + c + 1),
                                         _mm256_loadu_ps(bt + ldv), c1);
                }
                if (c < c_in) {
                    c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + c), _mm256_loadu_ps(bt), c0);
                }
                _mm256_storeu_ps(o + t, _mm256_add_ps(c0, c1));
            }
        }
    }
}

/* Output rows 4 i .. 4 i + rows - 1 (rows <= 4) of one channel from its M (mch =
 * M[0][r]: M[xi][r][t] at mch[xi * ldm + t]), tile row i at t = i * tw of the block:
 * y[a * ldy + q] = clamp((A^T M A)[a][q] + bias, lo, hi), q < ow. */
static inline void mtvm_wino_f32_output(const float* restrict mch, int ldm, int t, int tw,
                                        int ow, int rows, float bias, float lo, float hi,
                                        float* restrict y, int ldy)
{
    const __m256 bias_ = _mm256_set1_ps(bias), lo_ = _mm256_set1_ps(lo), hi_ = _mm256_set1_ps(hi);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int j0 = 0; j0 < tw; j0 += 8) {
        const float* m = mch + t + j0;
        __m256 z[4][6];       /* A^T along the patch's rows, per column k */
        for (int k = 0; k < 6; ++k) {
            const __m256 m0 = _mm256_loadu_ps(m + (size_t)(0 * 6 + k) * ldm);
            const __m256 m1 = _mm256_loadu_ps(m + (size_t)(1 * 6 + k) * ldm);
            const __m256 m2 = _mm256_loadu_ps(m + (size_t)(2 * 6 + k) * ldm);
            const __m256 m3 = _mm256_loadu_ps(m + (size_t)(3 * 6 + k) * ldm);
            const __m256 m4 = _mm256_loadu_ps(m + (size_t)(4 * 6 + k) * ldm);
            const __m256 m5 = _mm256_loadu_ps(m + (size_t)(5 * 6 + k) * ldm);
            MTVM_WINO_OUT_(m0, m1, m2, m3, m4, m5, z[0][k], z[1][k], z[2][k], z[3][k])
        }
        const int cols = ow - 4 * j0 < 32 ? ow - 4 * j0 : 32;
        for (int a = 0; a < rows; ++a) {
            __m256 s0, s1, s2, s3;
            MTVM_WINO_OUT_(z[a][0], z[a][1], z[a][2], z[a][3], z[a][4], z[a][5], s0, s1, s2, s3)
            s0 = _mm256_min_ps(hi_, _mm256_max_ps(lo_, _mm256_add_ps(s0, bias_)));
            s1 = _mm256_min_ps(hi_, _mm256_max_ps(lo_, _mm256_add_ps(s1, bias_)));
            s2 = _mm256_min_ps(hi_, _mm256_max_ps(lo_, _mm256_add_ps(s2, bias_)));
            s3 = _mm256_min_ps(hi_, _mm256_max_ps(lo_, _mm256_add_ps(s3, bias_)));
            /* the 4 column phases (lane j: tile j) back to 32 consecutive columns */
            const __m256 t0 = _mm256_unpacklo_ps(s0, s1), t1 = _mm256_unpackhi_ps(s0, s1);
            const __m256 t2 = _mm256_unpacklo_ps(s2, s3), t3 = _mm256_unpackhi_ps(s2, s3);
            const __m256 r0 = _mm256_shuffle_ps(t0, t2, 0x44), r1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            const __m256 r2 = _mm256_shuffle_ps(t1, t3, 0x44), r3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            const __m256 q[4] = {
                _mm256_permute2f128_ps(r0, r1, 0x20), _mm256_permute2f128_ps(r2, r3, 0x20),
                _mm256_permute2f128_ps(r0, r1, 0x31), _mm256_permute2f128_ps(r2, r3, 0x31),
            };
            float* yr = y + (size_t)a * ldy + 4 * j0;
            if (cols == 32) {
                for (int e = 0; e < 4; ++e) _mm256_storeu_ps(yr + 8 * e, q[e]);
            } else {
                for (int e = 0; e < 4 && 8 * e < cols; ++e) {
                    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8 * e), lane);
                    _mm256_maskstore_ps(yr + 8 * e, keep, q[e]);
                }
            }
        }
    }
}

#endif  /* MTVM_F32_AVX512 || MTVM_F32_AVX2 */

#endif  /* MTVM_WINOGRAD_F32_X86_H_ */
