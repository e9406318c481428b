"""Float32 register-blocked micro-kernels shared by the Conv schedules (and
usable by any GEMM-shaped kernel), emitted as static inline C helpers.

The micro-kernel computes one MR x NR tile of a matrix product

    tile[r][q] = sum_t a[t * MR + r] * b[t * ldb + q]      r < MR, q < n <= NR

`a` is the weights, packed at compile time in the order the loop reads them
(MR consecutive output channels per tap), so each step loads MR weights and
NR activations for MR * NR multiply-accumulates.

The per-target part of the schedule is chosen by the C preprocessor, in one
place (c_runtime/kernels/generic/mtvm_f32_prelude.h), so one generated source serves every target:

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

# Schedule knobs of the micro-kernel (the tuning issue will search them).
# `mr` is emitted in Python (rows of the tile); NR is per target (mtvm_f32_prelude.h).
MR = 8


def prelude(k) -> None:
    k.library("mtvm_f32_prelude.h")


def gemm_ukernel(k, mr: int) -> str:
    """Declare the mr-row micro-kernel helper; returns its name."""
    prelude(k)
    k.library("mtvm_gemm_f32_vfp.h")
    name = f"mtvm_f32_gemm_{mr}xNR"
    if name not in k.helpers:
        k.helper(name, _ukernel_source(name, mr))
    return name


def column_tiles(k, *, rows: int, taps: int, a: str, b: str, ldb: int, cols: int,
                 store: list[str]) -> list[str]:
    """C lines: the rows x MTVM_F32_NR tiles of the micro-kernel across `cols`
    columns (the last one partial), tile[r][q] = sum_t a[t * rows + r] *
    b[t * ldb + q] where `b` is a C expression of the block's first column q0;
    then `store` (C lines) for each r < rows, q < nq of the tile."""
    return [f"for (int q0 = 0; q0 < {cols}; q0 += MTVM_F32_NR) {{",
            f"    const int nq = {cols} - q0 < MTVM_F32_NR ? {cols} - q0 : MTVM_F32_NR;",
            f"    float tile[{rows} * MTVM_F32_NR];",
            f"    {gemm_ukernel(k, rows)}({taps}, {a}, {b}, {ldb}, nq, tile);",
            f"    for (size_t r = 0; r < {rows}; ++r) {{",
            "        for (int q = 0; q < nq; ++q) {",
            *["            " + s for s in store],
            "        }",
            "    }",
            "}"]


def row_blocks(count: int, mr: int, block) -> list[str]:
    """C lines: block(m0, rows) for the full blocks of mr rows (a C loop over m0),
    then for the remainder (its own micro-kernel height: rows is a constant)."""
    full = count // mr * mr
    lines = []
    if full:
        lines.append(f"for (size_t m0 = 0; m0 < {full}; m0 += {mr}) {{")
        lines += ["    " + s for s in block("m0", mr)]
        lines.append("}")
    if count > full:
        lines.append("{")
        lines += ["    " + s for s in block(str(full), count - full)]
        lines.append("}")
    return lines


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
    L = [f"/* tile[r * MTVM_F32_NR + q] = sum_t a[t * {mr} + r] * ({row})[q],",
         f" * r < {mr}, q < n <= MTVM_F32_NR. */",
         f"static inline void {name}(int taps, const float* restrict a,",
         "    const float* restrict b, " +
         ("const int32_t* restrict off" if offsets else "int ldb") +
         ", int n, float* restrict tile)", "{"]

    def simd(vec, width, zero, load, mload, fma, bcast, store, mask_setup):
        out = [f"    /* {mr} x {width} block: {mr} accumulators of {width} floats */"]
        out += [f"    {vec} c{r} = {zero};" for r in rows]

        def body(ld):
            lines = [f"        for (int t = 0; t < taps; ++t, {step}) {{"]
            if offsets:
                lines.append("            const float* bt = b + off[t];")
            lines.append(f"            const {vec} bv = {ld};")
            for r in rows:
                lines.append(f"            c{r} = {fma}({bcast.format(r=r)}, bv, c{r});")
            lines.append("        }")
            return lines
        out.append(f"    if (n == {width}) {{")
        out += body(load.format(p=bt))
        out.append("    } else {  /* partial tile: lanes q >= n are not read */")
        out += ["        " + m for m in mask_setup]
        out += body(mload.format(p=bt))
        out.append("    }")
        out += [f"    {store}(tile + {r * width}, c{r});" for r in rows]
        return out
    L.append("#if MTVM_F32_NR == 16")
    L += simd("__m512", 16, "_mm512_setzero_ps()", "_mm512_loadu_ps({p})",
              "_mm512_maskz_loadu_ps(k, {p})", "_mm512_fmadd_ps", "_mm512_set1_ps(a[{r}])",
              "_mm512_storeu_ps", ["const __mmask16 k = (__mmask16)((1u << n) - 1u);"])
    L.append("#elif MTVM_F32_NR == 8")
    L += simd("__m256", 8, "_mm256_setzero_ps()", "_mm256_loadu_ps({p})",
              "_mm256_maskload_ps({p}, k)", "_mm256_fmadd_ps", "_mm256_broadcast_ss(a + {r})",
              "_mm256_storeu_ps",
              ["const __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32(n),",
               "    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));"])
    L.append("#else")
    # Scalar: rows in passes of up to 4 (4 x 4 accumulators + 4 activations + 1
    # weight fit the FPU's 32 registers), each pass over all taps.
    for g0 in range(0, mr, 4):
        grp = range(g0, min(mr, g0 + 4))
        L.append(f"    {{  /* rows {g0}..{grp[-1]}: {4 * len(grp)} scalar accumulators */")
        L.append(f"        const float* at = a + {g0};" if g0 else "        const float* at = a;")
        L.append(f"        const float* bb = b;" if not offsets else "")
        L.append("        if (n == 4) {")
        asm = len(grp) == 4
        if asm:   # the 4 x 4 block in assembly where the FPU fuses (mtvm_gemm_f32_vfp.h)
            call = (f"mtvm_f32_gemm_4x4_off_vfp(taps, at, {mr}, b, off, tile + {g0 * 4});"
                    if offsets else
                    f"mtvm_f32_gemm_4x4_vfp(taps, at, {mr}, bb, ldb, tile + {g0 * 4});")
            L += ["#if defined(MTVM_GEMM_F32_VFP)", "            " + call, "#else"]
        for r in grp:
            L.append("            float " + ", ".join(f"c{r}_{q} = 0.0f" for q in range(4)) + ";")
        adv = f"at += {mr}" + ("" if offsets else ", bb += ldb")
        L.append(f"            for (int t = 0; t < taps; ++t, {adv}) {{")
        src = "b + off[t]" if offsets else "bb"
        L.append(f"                const float* bt = {src};")
        L.append("                const float b0 = bt[0], b1 = bt[1], b2 = bt[2], b3 = bt[3];")
        for r in grp:
            fmas = [f"c{r}_{q} = MTVM_FMAF(a{r}, b{q}, c{r}_{q});" for q in range(4)]
            L.append(f"                {{ const float a{r} = at[{r - g0}];")
            L.append("                  " + " ".join(fmas[:2]))
            L.append("                  " + " ".join(fmas[2:]) + " }")
        L.append("            }")
        for r in grp:
            L.append("            " + " ".join(f"tile[{r * 4 + q}] = c{r}_{q};"
                                              for q in range(4)))
        if asm:
            L.append("#endif")
        L += ["        } else {  /* partial tile */",
              f"            for (int r = {g0}; r < {grp[-1] + 1}; ++r) {{",
              "                for (int q = 0; q < n; ++q) {",
              "                    float s = 0.0f;",
              "                    for (int t = 0; t < taps; ++t) {",
              f"                        s = MTVM_FMAF(a[t * {mr} + r], "
              f"{'b[off[t] + q]' if offsets else 'b[t * ldb + q]'}, s);",
              "                    }",
              "                    tile[r * 4 + q] = s;",
              "                }",
              "            }",
              "        }",
              "    }"]
    L += ["#endif", "}"]
    return "\n".join(line for line in L if line != "")


# -- GEMV: one row of activations times a row-major matrix -------------------------


def gemv_ukernel(k) -> str:
    """The GEMV micro-kernel (c_runtime/kernels/generic/mtvm_gemv_f32.h): out[q] =
    sum_t x[t] * b[t * ldb + q], q < n <= MTVM_F32_GEMV_COLS. Returns its name."""
    k.library("mtvm_gemv_f32.h")
    return "mtvm_f32_gemv"


def gemv_blocked(k) -> str:
    """mtvm_f32_gemv over all n columns, block by block (out has exactly n floats)."""
    k.library("mtvm_gemv_f32.h")
    return "mtvm_f32_gemv_blocked"


# -- band: a tile of 2 x 16 flat positions, AVX-512 only ------------------------------


def band_ukernel(k, mr: int) -> str:
    """Declare the AVX-512 band micro-kernel (only compiled where MTVM_F32_NR == 16):

        tile[r * 32 + q] = sum_c sum_j a[(c * ntaps + j) * mr + r] * b[c * cs + off[j] + q]

    r < mr, q < n <= 32: two 16-float vectors per row, 2 * mr accumulators, so each
    broadcast weight feeds two FMAs (the one-vector kernel is bound by its loads:
    mr broadcasts + one activation load per mr FMAs). n <= 16 runs one vector.
    Returns its name."""
    prelude(k)
    name = f"mtvm_f32_band_{mr}x32"
    if name not in k.helpers:
        k.helper(name, _band_source(name, mr))
    return name


def _band_source(name: str, mr: int) -> str:
    rows = range(mr)
    L = ["#if MTVM_F32_NR == 16",
         f"/* tile[r * 32 + q] = sum_c sum_j a[(c * ntaps + j) * {mr} + r] * "
         "b[c * cs + off[j] + q],",
         f" * r < {mr}, q < n <= 32 (masked loads: lanes q >= n are not read). */",
         f"static inline void {name}(int chans, int cs, int ntaps, "
         "const int32_t* restrict off,",
         "    const float* restrict a, const float* restrict b, int n, float* restrict tile)",
         "{",
         "    const __mmask16 k0 = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);"]

    def body(nv):
        out = [f"        __m512 {', '.join(f'c{r}_{v} = _mm512_setzero_ps()' for v in range(nv))};"
               for r in rows]
        out += ["        for (int c = 0; c < chans; ++c, b += cs) {",
                f"            for (int j = 0; j < ntaps; ++j, a += {mr}) {{",
                "                const float* bt = b + off[j];",
                "                const __m512 v0 = _mm512_maskz_loadu_ps(k0, bt);"]
        if nv == 2:
            out.append("                const __m512 v1 = _mm512_maskz_loadu_ps(k1, bt + 16);")
        for r in rows:
            out.append(f"                {{ const __m512 w = _mm512_set1_ps(a[{r}]);")
            out.append("                  " + " ".join(
                f"c{r}_{v} = _mm512_fmadd_ps(w, v{v}, c{r}_{v});" for v in range(nv)) + " }")
        out += ["            }", "        }"]
        out += [f"        _mm512_storeu_ps(tile + {r * 32 + 16 * v}, c{r}_{v});"
                for r in rows for v in range(nv)]
        if nv == 1:
            # The second halves too, with zeros: every lane of the tile is written, so
            # gcc -O3 cannot see a read of it as uninitialized (-Werror=uninitialized
            # fired on light_resnet50's 14-wide bands).
            out += [f"        _mm512_storeu_ps(tile + {r * 32 + 16}, _mm512_setzero_ps());"
                    for r in rows]
        return out
    L.append("    if (n > 16) {  /* two vectors */")
    L.append("        const __mmask16 k1 = (__mmask16)(n >= 32 ? 0xffffu : (1u << (n - 16)) - 1u);")
    L += body(2)
    L.append("    } else {  /* one vector */")
    L += body(1)
    L += ["    }", "}", "#endif"]
    return "\n".join(L)


# -- direct: same-size stride-1 convolution on the flat plane, AVX-512 only -----------


def direct_ukernel(k, mr: int) -> str:
    """Declare the AVX-512 direct micro-kernel (only compiled where MTVM_F32_NR == 16)
    for a stride-1 convolution whose output plane has the input's size (W columns,
    `plane` positions): output position p = oh * W + ow and tap (kh, kw) read input
    p + dy * W + dx (dy = kh * dh - ph, dx = kw * dw - pw), so a tile of 32
    consecutive positions (two vectors, any number of rows) reads 32 consecutive
    inputs per tap, without copying; lanes whose tap falls in the padding are
    masked off (AVX-512 masked loads do not fault there).

        tile[r * 32 + q] = sum_c,kh,kw a[((c * kh_n + kh) * kw_n + kw) * mr + r]
                                       * x[c * plane + p0 + q + dy * W + dx]

    r < mr, q < n <= 32 (0 where the tap is padding). Returns its name."""
    prelude(k)
    k.library("mtvm_direct_f32_masks_x86.h")
    name = f"mtvm_f32_direct_{mr}x32"
    if name not in k.helpers:
        k.helper(name, _direct_source(name, mr))
    return name


def _direct_source(name: str, mr: int) -> str:
    rows = range(mr)
    fmas = "\n".join(
        f"            {{ const __m512 a{r} = _mm512_set1_ps(a[{r}]);\n"
        f"              c{r}_0 = _mm512_fmadd_ps(a{r}, v0, c{r}_0);"
        f" c{r}_1 = _mm512_fmadd_ps(a{r}, v1, c{r}_1); }}"
        for r in rows)
    accs = "\n".join(f"    __m512 c{r}_0 = _mm512_setzero_ps(), c{r}_1 = _mm512_setzero_ps();"
                     for r in rows)
    stores = "\n".join(f"    _mm512_storeu_ps(tile + {r * 32}, c{r}_0); "
                       f"_mm512_storeu_ps(tile + {r * 32 + 16}, c{r}_1);" for r in rows)
    return f"""\
#if MTVM_F32_NR == 16
/* tile[r * 32 + q] = sum over c, kh, kw of a[((c * kh_n + kh) * kw_n + kw) * {mr} + r]
 * * x[c * plane + p0 + q + dy * w + dx], dy = kh * dh - ph, dx = kw * dw - pw; taps in
 * the padding (row or column outside the plane) and lanes q >= n masked off. */
static inline void {name}(int chans, int plane, int w, int kh_n, int kw_n, int dh,
    int dw, int ph, int pw, const float* restrict a, const float* restrict x, int p0, int n,
    float* restrict tile)
{{
{accs}
    /* per tap j = kh * kw_n + kw (kh_n * kw_n <= 64): its offset and lanes inside */
    int off[64];
    __mmask16 m0[64], m1[64];
    const int taps = kh_n * kw_n;
    for (int kh = 0, j = 0; kh < kh_n; ++kh) {{
        const int dy = kh * dh - ph;
        /* rows inside the plane: 0 <= p + dy * w < plane, p < p0 + n */
        const int lo = -dy * w, hi = plane - dy * w < p0 + n ? plane - dy * w : p0 + n;
        const __mmask16 r0 = mtvm_lanes16(lo, hi, p0), r1 = mtvm_lanes16(lo, hi, p0 + 16);
        for (int kw = 0; kw < kw_n; ++kw, ++j) {{
            const int dx = kw * dw - pw;
            off[j] = dy * w + dx;
            m0[j] = r0 & mtvm_cols16(p0, w, dx);
            m1[j] = r1 & mtvm_cols16(p0 + 16, w, dx);
        }}
    }}
    x += p0;
    for (int c = 0; c < chans; ++c, x += plane) {{
        for (int j = 0; j < taps; ++j, a += {mr}) {{
            const __m512 v0 = _mm512_maskz_loadu_ps(m0[j], x + off[j]);
            const __m512 v1 = _mm512_maskz_loadu_ps(m1[j], x + off[j] + 16);
{fmas}
        }}
    }}
{stores}
}}
#endif"""
