"""Float32 register-blocked micro-kernels shared by the Conv schedules (and
usable by any GEMM-shaped kernel), emitted as static inline C helpers.

The micro-kernel computes one MR x NR tile of a matrix product

    tile[r][q] = sum_t a[t * MR + r] * b[t * ldb + q]      r < MR, q < n <= NR

`a` is the weights, packed at compile time in the order the loop reads them
(MR consecutive output channels per tap), so each step loads MR weights and
NR activations for MR * NR multiply-accumulates.

The per-target part of the schedule is chosen by the C preprocessor, in one
place (`PRELUDE`), so one generated source serves every target:

  * x86 with AVX2 + FMA (the host, cc -march=native):  NR = 16, two 8-float
    vectors per row; MR rows -> 2 * MR vector accumulators; a partial tile
    uses masked loads.
  * everything else (Cortex-M4F/M7, soft float, a host without AVX2): NR = 4,
    MR * 4 scalar accumulators written out by this generator (gcc keeps them
    in the FPU's 32 registers at -O2, where it would not unroll a loop over an
    accumulator array), fused multiply-add (vfma) where the FPU has it.

Define MTVM_NO_SIMD to force the portable path.
"""
from __future__ import annotations

PRELUDE = """\
/* mtvm float schedules: the per-target part, chosen here once.
 * MTVM_FMAF: fused multiply-add where the FPU has it (Cortex-M4F vfma, x86 FMA),
 * else multiply and add (never a libm call). MTVM_F32_NR: output columns per
 * register block: 16 (two AVX vectors) on x86 with AVX2+FMA, else 4 scalars. */
#if defined(__FP_FAST_FMAF)
#define MTVM_FMAF(a, b, c) fmaf((a), (b), (c))
#else
#define MTVM_FMAF(a, b, c) ((a) * (b) + (c))
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(MTVM_NO_SIMD)
#include <immintrin.h>
#define MTVM_F32_NR 16
#else
#define MTVM_F32_NR 4
#endif"""

# Schedule knobs of the micro-kernel (the tuning issue will search them).
# `mr` is emitted in Python (rows of the tile); NR is per target (PRELUDE).
MR = 4


def prelude(k) -> None:
    k.helper("mtvm_f32_prelude", PRELUDE)


def gemm_ukernel(k, mr: int) -> str:
    """Declare the mr-row micro-kernel helper; returns its name."""
    prelude(k)
    name = f"mtvm_f32_gemm_{mr}xNR"
    if name not in k.helpers:
        k.helper(name, _ukernel_source(name, mr))
    return name


def gemm_ukernel_offsets(k, mr: int) -> str:
    """Like gemm_ukernel, but tap t reads b + off[t] (a compile-time table) instead of
    b + t * ldb: the taps of a convolution window over rows held in scratch."""
    prelude(k)
    name = f"mtvm_f32_gemm_{mr}xNR_off"
    if name not in k.helpers:
        k.helper(name, _ukernel_source(name, mr, offsets=True))
    return name


def _ukernel_source(name: str, mr: int, offsets: bool = False) -> str:
    rows = range(mr)
    row = "b + off[t]" if offsets else "b + t * ldb"
    step = f"a += {mr}" if offsets else f"a += {mr}, b += ldb"
    bt = "bt" if offsets else "b"
    L = [f"/* tile[r * MTVM_F32_NR + q] = sum_t a[t * {mr} + r] * ({row})[q], "
         f"r < {mr}, q < n <= MTVM_F32_NR. */",
         f"static inline void {name}(int taps, const float* restrict a, "
         "const float* restrict b,",
         "    " + ("const int32_t* restrict off" if offsets else "int ldb") +
         ", int n, float* restrict tile)", "{",
         "#if MTVM_F32_NR == 16",
         f"    /* {mr} x 16 block: {2 * mr} accumulators of 8 floats */"]
    acc = [f"c{r}_{h}" for r in rows for h in (0, 1)]
    L.append("    __m256 " + ", ".join(f"{c} = _mm256_setzero_ps()" for c in acc) + ";")

    def avx_body(load0, load1):
        out = [f"        for (int t = 0; t < taps; ++t, {step}) {{"]
        if offsets:
            out.append("            const float* bt = b + off[t];")
        out.append(f"            const __m256 b0 = {load0}, b1 = {load1};")
        for r in rows:
            out.append(f"            {{ const __m256 a{r} = _mm256_broadcast_ss(a + {r}); "
                       f"c{r}_0 = _mm256_fmadd_ps(a{r}, b0, c{r}_0); "
                       f"c{r}_1 = _mm256_fmadd_ps(a{r}, b1, c{r}_1); }}")
        out.append("        }")
        return out
    L.append("    if (n == 16) {")
    L += avx_body(f"_mm256_loadu_ps({bt})", f"_mm256_loadu_ps({bt} + 8)")
    L += ["    } else {  /* partial tile: lanes q >= n are not read */",
          "        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);",
          "        const __m256i k0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);",
          "        const __m256i k1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), lane);"]
    L += avx_body(f"_mm256_maskload_ps({bt}, k0)", f"_mm256_maskload_ps({bt} + 8, k1)")
    L.append("    }")
    for r in rows:
        L.append(f"    _mm256_storeu_ps(tile + {r * 16}, c{r}_0); "
                 f"_mm256_storeu_ps(tile + {r * 16 + 8}, c{r}_1);")
    L += ["#else",
          "    if (n == 4) {",
          f"        /* {mr} x 4 block: {4 * mr} scalar accumulators */"]
    sacc = [f"c{r}_{q}" for r in rows for q in range(4)]
    L.append("        float " + ", ".join(f"{c} = 0.0f" for c in sacc) + ";")
    L.append(f"        for (int t = 0; t < taps; ++t, {step}) {{")
    if offsets:
        L.append("            const float* bt = b + off[t];")
    L.append(f"            const float b0 = {bt}[0], b1 = {bt}[1], b2 = {bt}[2], b3 = {bt}[3];")
    for r in rows:
        L.append(f"            {{ const float a{r} = a[{r}]; " + " ".join(
            f"c{r}_{q} = MTVM_FMAF(a{r}, b{q}, c{r}_{q});" for q in range(4)) + " }")
    L.append("        }")
    for r in rows:
        L.append("        " + " ".join(f"tile[{r * 4 + q}] = c{r}_{q};" for q in range(4)))
    L += ["    } else {  /* partial tile */",
          f"        for (int r = 0; r < {mr}; ++r) {{",
          "            for (int q = 0; q < n; ++q) {",
          "                float s = 0.0f;",
          "                for (int t = 0; t < taps; ++t) {",
          f"                    s = MTVM_FMAF(a[t * {mr} + r], "
          f"{'b[off[t] + q]' if offsets else 'b[t * ldb + q]'}, s);",
          "                }",
          "                tile[r * 4 + q] = s;",
          "            }",
          "        }",
          "    }",
          "#endif",
          "}"]
    return "\n".join(L)
