/* mtvm_qmatmul_s8_avx2_x86.h: QMatMul (x [m][k] int8 or uint8 times constant int8 weights
 * [n][k], requantized to 8 bits) on x86 hosts with AVX2: eight output channels a vector,
 * one per int32 lane, and four rows of x at a time. The weights come packed at compile
 * time as each lane's two taps in one int16 pair (mtvm/schedules/x86/qmatmul_s8.py); the
 * rows are widened once into int16 pairs in scratch; per pair of taps one load of the
 * weights, and per row a broadcast of its pair, a VPMADDWD (s16 x s16 pairs: exact, no
 * saturation) and a VPADDD. The generic kernel (mtvm_dot_8.h) widened every weight again
 * for every row and summed across lanes once per output. Then requantized on vectors as
 * mtvm_requantize_nt does (the schedule takes only multipliers with no tie), plus the
 * output zero point, clamped. The same integers as the portable kernel.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_QMATMUL_S8_AVX2_X86_H_
#define MTVM_QMATMUL_S8_AVX2_X86_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "mtvm_int8_bytes.h"
#include "mtvm_int8_x86.h"
#include "mtvm_mulhi_s32_x86.h"

#if defined(MTVM_INT8_X86)
/* Operands:
 *   x      [m][k] bytes (x_u: uint8, else int8)
 *   wp     [ceil(n / 8)][kp][8] int32, kp = ceil(k / 2): lane l of block b is output channel
 *          8 b + l, its taps 2 j and 2 j + 1 the low and high int16 of wp[b][j][l] (0 past k
 *          and past n)
 *   bias   [n] int32 (the zero-point terms folded in)
 *   mult, shift: per channel (ms / ss 1) or one value (0); y = mtvm_requantize_nt(acc, mult,
 *          shift) + y_zp clamped to [lo, hi]
 *   post   NULL, or a folded bias Add (mtvm/passes/matmul_bias.py) as [2][n] int32: each
 *          clamped y of column j becomes (post[j] + y post[n + j]) >> post_n clamped to
 *          [plo, phi]
 *   xp     scratch: 4 kp int32 (four rows as int16 pairs)
 *   y      [m][n] bytes */
/* lo and hi (each within int16) as the int16 lanes (lo, hi) of one word, lo first in memory */
static MTVM_ALWAYS_INLINE int32_t mtvm_qmm_s16_pair(int32_t lo, int32_t hi)
{
    return (int32_t)((uint32_t)(uint16_t)(int16_t)lo | ((uint32_t)(uint16_t)(int16_t)hi << 16));
}

static MTVM_ALWAYS_INLINE void mtvm_qmatmul_avx2_x86(const uint8_t* x, int x_u, int32_t m,
                                                     int32_t k, int32_t n, const int32_t* wp,
                                                     const int32_t* bias, const int32_t* mult,
                                                     int ms, const int32_t* shift, int ss,
                                                     int32_t y_zp, int32_t lo, int32_t hi,
                                                     const int32_t* post, int32_t post_n,
                                                     int32_t plo, int32_t phi,
                                                     int32_t* xp, uint8_t* y)
{
    const int32_t kp = (k + 1) / 2;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int32_t i = 0; i < m; i += 4) {
        const int32_t rows = m - i < 4 ? m - i : 4;
        /* rows past m repeat the last one: computed, never stored */
        for (int32_t r = 0; r < 4; ++r) {
            const uint8_t* a = x + (size_t)(i + (r < rows ? r : rows - 1)) * (size_t)k;
            int32_t* d = xp + r * kp;
            int32_t t = 0;
            for (; t + 16 <= k; t += 16) {
                const __m128i v = _mm_loadu_si128((const __m128i*)(const void*)(a + t));
                _mm256_storeu_si256((__m256i*)(void*)(d + t / 2),
                                    x_u ? _mm256_cvtepu8_epi16(v) : _mm256_cvtepi8_epi16(v));
            }
            /* the tail as whole int32 words: int16 stores here and the int32 loads of xp
             * below would be unrelated types to the compiler, which may then reorder them
             * (gcc -O3 -march=x86-64-v3 did, on a 25-column A V of attention) */
            for (; t < k; t += 2) {
                d[t / 2] = mtvm_qmm_s16_pair(mtvm_byte_at(a, t, x_u),
                                             t + 1 < k ? mtvm_byte_at(a, t + 1, x_u) : 0);
            }
        }
        for (int32_t o = 0; o < n; o += 8) {
            const int32_t cols = n - o < 8 ? n - o : 8;
            const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane);
            const __m256i b = _mm256_maskload_epi32(bias + o, live);
            __m256i s0 = b, s1 = b, s2 = b, s3 = b;
            const int32_t* w = wp + (size_t)(o / 8) * (size_t)kp * 8u;
            for (int32_t j = 0; j < kp; ++j, w += 8) {
                const __m256i wv = _mm256_loadu_si256((const __m256i*)(const void*)w);
                s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_set1_epi32(xp[j]), wv));
                s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_set1_epi32(xp[kp + j]), wv));
                s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_set1_epi32(xp[2 * kp + j]),
                                                            wv));
                s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(_mm256_set1_epi32(xp[3 * kp + j]),
                                                            wv));
            }
            /* mtvm_requantize_nt per lane: (hi + 2^(e - 1)) >> e, e = -1 - shift (the lanes
             * past n have mult 0 and are not stored) */
            const __m256i mv = ms ? _mm256_maskload_epi32(mult + o, live)
                                  : _mm256_set1_epi32(mult[0]);
            const __m256i sv = ss ? _mm256_maskload_epi32(shift + o, live)
                                  : _mm256_set1_epi32(shift[0]);
            const __m256i e = _mm256_sub_epi32(_mm256_set1_epi32(-1), sv);
            const __m256i rnd = _mm256_sllv_epi32(_mm256_set1_epi32(1),
                                                  _mm256_sub_epi32(e, _mm256_set1_epi32(1)));
            const __m256i vzp = _mm256_set1_epi32(y_zp), vlo = _mm256_set1_epi32(lo),
                          vhi = _mm256_set1_epi32(hi);
            const __m256i pc = post != NULL ? _mm256_maskload_epi32(post + o, live)
                                            : _mm256_setzero_si256();
            const __m256i pia = post != NULL ? _mm256_maskload_epi32(post + n + o, live)
                                             : _mm256_setzero_si256();
            __m256i s[4];
            s[0] = s0;
            s[1] = s1;
            s[2] = s2;
            s[3] = s3;
            for (int32_t r = 0; r < rows; ++r) {
                __m256i v = _mm256_srav_epi32(_mm256_add_epi32(mtvm_mulhi_x86(s[r], mv), rnd), e);
                v = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(v, vzp), vlo), vhi);
                if (post != NULL) {
                    v = _mm256_sra_epi32(_mm256_add_epi32(pc, _mm256_mullo_epi32(v, pia)),
                                         _mm_cvtsi32_si128(post_n));
                    v = _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(plo)),
                                         _mm256_set1_epi32(phi));
                }
                uint8_t* dst = y + (size_t)(i + r) * (size_t)n + (size_t)o;
                if (cols == 8) {
                    mtvm_store_low_bytes8_x86(dst, v);
                } else {
                    uint8_t t8[8];
                    mtvm_store_low_bytes8_x86(t8, v);
                    memcpy(dst, t8, (size_t)cols);
                }
            }
        }
    }
}

/* QBatchMatMul's right operand, computed at run time: b [kk][n] (b_u: uint8) minus its zero
 * point zb packed as mtvm_qmatmul_avx2_x86's wp (int16 pairs: the differences lie within
 * +-255), and bias[j] = -za sum_p (b[p][j] - zb), so that the kernel's sums are
 * sum_p (a[i][p] - za)(b[p][j] - zb). */
static MTVM_ALWAYS_INLINE void mtvm_qmm_pack_b_avx2_x86(const uint8_t* b, int b_u, int32_t kk,
                                                       int32_t n, int32_t za, int32_t zb,
                                                       int32_t* wp, int32_t* bias)
{
    const int32_t kp = (kk + 1) / 2;
    for (int32_t j0 = 0; j0 < n; j0 += 8) {
        for (int32_t q = 0; q < kp; ++q, wp += 8) {
            for (int32_t l = 0; l < 8; ++l) {
                const int32_t j = j0 + l;
                int32_t lo = 0, hi = 0;
                if (j < n) {
                    lo = mtvm_byte_at(b, 2 * q * n + j, b_u) - zb;
                    if (2 * q + 1 < kk) {
                        hi = mtvm_byte_at(b, (2 * q + 1) * n + j, b_u) - zb;
                    }
                }
                wp[l] = mtvm_qmm_s16_pair(lo, hi);
            }
        }
    }
    for (int32_t j = 0; j < n; ++j) {
        int32_t s = 0;
        for (int32_t p = 0; p < kk; ++p) {
            s += mtvm_byte_at(b, p * n + j, b_u) - zb;
        }
        bias[j] = -za * s;
    }
}
#endif

#endif  /* MTVM_QMATMUL_S8_AVX2_X86_H_ */
