"""Float32 register-blocked micro-kernels shared by the Conv schedules (and
usable by any GEMM-shaped kernel): static inline C functions of the kernel library.

The micro-kernel computes one MR x NR tile of a matrix product

    tile[r][q] = sum_t a[t * MR + r] * b[t * ldb + q]      r < MR, q < n <= NR

`a` is the weights, packed at compile time in the order the loop reads them
(MR consecutive output channels per tap), so each step loads MR weights and
NR activations for MR * NR multiply-accumulates.

The kernels themselves are C in the kernel library: c_runtime/kernels/generic/
mtvm_gemm_f32.h (the GEMM tile: AVX-512, AVX2 + FMA, or scalar with the Thumb-2
VFP block, chosen by the C preprocessor in mtvm_f32_prelude.h, so one generated
source serves every target) and x86/mtvm_conv_f32_x86.h (the AVX-512 band and
direct kernels). Their rows are written out per row (named accumulators, which
gcc keeps in registers at -O2) by a macro, so the generated source instantiates
each height it uses with one line, e.g. `MTVM_DEFINE_F32_GEMM(mtvm_f32_gemm_8xNR, 8)`.

Define MTVM_NO_SIMD to force the portable path.
"""
from __future__ import annotations

import numpy as np

from ..codegen.cwriter import (Block, ExprStmt, For, If, PreIf, Raw, RawExpr, Var, call, eq,
                               render_c)
from ..errors import MtvmError

# Schedule knobs of the micro-kernel (the tuning issue will search them).
# `mr` is emitted in Python (rows of the tile); NR is per target (mtvm_f32_prelude.h).
MR = 8
# The most rows a micro-kernel can have (MTVM_REPEAT_MAX of mtvm_repeat.h).
MAX_ROWS = 16


def prelude(k) -> None:
    k.library("mtvm_f32_prelude.h")


def _define(k, macro: str, name: str, mr: int, what: str) -> str:
    """Declare micro-kernel `name` of mr rows: one line instantiating its C macro
    (c_runtime/kernels/generic/mtvm_gemm_f32.h and x86/mtvm_conv_f32_x86.h write the
    kernels out per row with MTVM_REPEAT, up to MTVM_REPEAT_MAX rows)."""
    if not 1 <= mr <= MAX_ROWS:
        raise MtvmError(f"a float micro-kernel of {mr} rows: the kernel library's have 1 to "
                        f"{MAX_ROWS} (gemm_mr / mr knob)")
    k.library("mtvm_gemm_f32.h")
    if name not in k.helpers:
        k.helper(name, f"/* {what} */\n{macro}({name}, {mr})")
    return name


def gemm_ukernel(k, mr: int) -> str:
    """Declare the mr-row micro-kernel helper; returns its name (with the Thumb-2
    VFP 4 x 4 block where the FPU fuses)."""
    k.library("mtvm_gemm_f32_vfp.h")
    return _define(k, "MTVM_DEFINE_F32_GEMM", f"mtvm_f32_gemm_{mr}xNR", mr,
                   f"tile[r * MTVM_F32_NR + q] = sum_t a[t * {mr} + r] * b[t * ldb + q], "
                   f"r < {mr}, q < n <= MTVM_F32_NR")


def gemm_epi_ukernel(k, mr: int, offsets: bool = False) -> str:
    """Declare the AVX2 micro-kernel of mr rows with the epilogue in registers (only
    compiled where MTVM_F32_AVX2): y[r * ldy + q] = clamp(sum_t a[t * mr + r] *
    b[t * ldb + q] + bias[r], lo, hi), r < mr, q < n <= MTVM_F32_NR; with offsets, tap t
    reads b[off[t] + q] (as gemm_ukernel_offsets). Returns its name."""
    form, b = ("_OFF", "b[off[t] + q]") if offsets else ("", "b[t * ldb + q]")
    return _define(k, f"MTVM_DEFINE_F32_GEMM_EPI{form}",
                   f"mtvm_f32_gemm_{mr}xNR{form.lower()}_epi", mr,
                   f"y[r * ldy + q] = clamp(sum_t a[t * {mr} + r] * {b} + bias[r], lo, hi), "
                   f"r < {mr}, q < n <= MTVM_F32_NR (AVX2)")


def avx2_c(k) -> bool:
    """Whether k's C may be built with AVX2 + FMA (its MTVM_F32_AVX2 branches can run):
    an x86 target that has them, or the portable target c, whose #if picks by the
    compiler's flags."""
    return k.target.is_generic or k.target.has("avx2", "fma")


def clamp_bounds(k) -> tuple | None:
    """(lo, hi), the bounds of k's fused tail as its attributes give them (None:
    unbounded), when the tail is nothing, one Relu or one Clip with constant bounds;
    None for any other tail (a residual Add, a Sigmoid, ...)."""
    tail = k.node.tail
    if not tail:
        return None, None
    t = tail[0]
    if len(tail) > 1 or t.domain or len([i for i in t.inputs if i]) != 1 or \
            t.op not in ("Relu", "Clip"):
        return None
    return (0, None) if t.op == "Relu" else (t.attrs.get("min"), t.attrs.get("max"))


def clamp_tail(k) -> tuple[str, str] | None:
    """(lo, hi), C expressions, when the fused tail is nothing, one Relu or one Clip with
    constant bounds (clamp_bounds): what the AVX2 epilogue kernel applies in registers.
    None for any other tail: those keep the tile and its loop."""
    bounds = clamp_bounds(k)
    if bounds is None:
        return None
    lo, hi = bounds
    return ("-INFINITY" if lo is None else k.lit(lo), "INFINITY" if hi is None else k.lit(hi))


def vfp_epi_mode(k) -> tuple[str, int] | None:
    """(mode, hi's bits) of the Arm VFP epilogue kernels (mtvm_f32_gemm_rows_<mode>_vfp,
    c_runtime/kernels/arm_dsp/mtvm_gemm_f32_vfp.h) for k's fused tail: no tail ("none"),
    a Relu or a Clip at 0 without a maximum ("relu"), a Clip from 0 to a finite maximum
    above 0 ("relu_hi": Relu6). None for any other tail, and for float types other than
    float32."""
    if np.dtype(k.graph.tensors[k.node.kernel_outputs[0]].dtype) != np.float32:
        return None
    bounds = clamp_bounds(k)
    if bounds is None:
        return None
    if not k.node.tail:
        return "none", 0
    lo, hi = bounds
    if lo is None or float(lo) != 0.0:
        return None
    if hi is None:
        return "relu", 0
    hi = np.float32(hi)
    if not (np.isfinite(hi) and hi > 0):
        return None
    return "relu_hi", int(hi.view(np.int32))


def column_tiles(k, *, rows: int, taps: int, a: str, b: str, ldb: int, cols: int,
                 store: list[str], epi: tuple[str, int] | None = None,
                 vfp: list[str] | None = None) -> list[str]:
    """C lines: the rows x MTVM_F32_NR tiles of the micro-kernel across `cols`
    columns (the last one partial), tile[r][q] = sum_t a[t * rows + r] *
    b[t * ldb + q] where `b` is a C expression of the block's first column q0;
    then `store` (C lines) for each r < rows, q < nq of the tile. epi: (y, ldy),
    the C expression of the tile's first output (of q0) and the output's row
    stride, where the kernel's tail is at most a clamp (clamp_tail) and its C may
    be built for AVX2 (avx2_c): then AVX2 builds store the tile from registers
    (gemm_epi_ukernel), the rest as above. vfp: C lines computing and storing a whole
    tile on Arm FPUs (where MTVM_GEMM_F32_VFP), the partial ones as above."""
    tile = [f"float tile[{rows} * MTVM_F32_NR];",
            f"{gemm_ukernel(k, rows)}({taps}, {a}, {b}, {ldb}, nq, tile);",
            f"for (size_t r = 0; r < {rows}; ++r) {{",
            "    for (int q = 0; q < nq; ++q) {",
            *["        " + s for s in store],
            "    }",
            "}"]
    clamp = clamp_tail(k) if epi is not None and avx2_c(k) else None
    if vfp is not None:
        other = [Raw("\n".join(tile))]
        tile = render_c([PreIf("defined(MTVM_GEMM_F32_VFP)",
                               [If(eq(Var("nq"), 4), [Raw(v) for v in vfp], [Block(other)])],
                               other)]).splitlines()
    elif clamp is not None:
        args = [taps, a, b, ldb, "nq", "NULL", *clamp, *epi]
        tile = render_c([PreIf("MTVM_F32_AVX2", [ExprStmt(call(
            gemm_epi_ukernel(k, rows), *(RawExpr(str(v)) for v in args)))],
            [Raw("\n".join(tile))])]).splitlines()
    return [f"for (int q0 = 0; q0 < {cols}; q0 += MTVM_F32_NR) {{",
            f"    const int nq = {cols} - q0 < MTVM_F32_NR ? {cols} - q0 : MTVM_F32_NR;",
            *[("    " + s if s and not s.startswith("#") else s) for s in tile],
            "}"]


def row_blocks(count: int, mr: int, block) -> list[str]:
    """C lines: block(m0, rows) for the full blocks of mr rows (a C loop over m0),
    then for the remainder (its own micro-kernel height: rows is a constant)."""
    full = count // mr * mr
    out = []
    if full:
        out.append(For(Var("m0"), full, [Raw("\n".join(block("m0", mr)))], step=mr))
    if count > full:
        out.append(Block([Raw("\n".join(block(str(full), count - full)))]))
    return render_c(out).splitlines()


def gemm_ukernel_offsets(k, mr: int) -> str:
    """Like gemm_ukernel, but tap t reads b + off[t] (a compile-time table) instead of
    b + t * ldb: the taps of a convolution window over rows held in scratch. With
    the Thumb-2 VFP 4 x 4 block too (once only where the module also had the plain
    kernel: ic_resnet8 on the M4 24.8 M -> 20.0 M instructions for 2.8 KB of flash)."""
    k.library("mtvm_gemm_f32_vfp.h")
    return _define(k, "MTVM_DEFINE_F32_GEMM_OFF", f"mtvm_f32_gemm_{mr}xNR_off", mr,
                   f"tile[r * MTVM_F32_NR + q] = sum_t a[t * {mr} + r] * b[off[t] + q], "
                   f"r < {mr}, q < n <= MTVM_F32_NR")


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


# -- band: a tile of 2 x 16 flat positions, AVX-512 and AVX2 ---------------------------


def band_ukernel(k, mr: int) -> str:
    """Declare the x86 band micro-kernel (only compiled where MTVM_F32_AVX512 or
    MTVM_F32_AVX2; on AVX2 each half of 16 positions is two 8-float vectors):

        tile[r * 32 + q] = sum_c sum_j a[(c * ntaps + j) * mr + r] * b[c * cs + off[j] + q]

    r < mr, q < n <= 32: two 16-float vectors per row, 2 * mr accumulators, so each
    broadcast weight feeds two FMAs (the one-vector kernel is bound by its loads:
    mr broadcasts + one activation load per mr FMAs). n <= 16 runs one vector.
    Returns its name."""
    return _define(k, "MTVM_DEFINE_F32_BAND", f"mtvm_f32_band_{mr}x32", mr,
                   f"tile[r * 32 + q] = sum_c sum_j a[(c * ntaps + j) * {mr} + r] * "
                   f"b[c * cs + off[j] + q], r < {mr}, q < n <= 32 (AVX-512, AVX2)")


def band_epi_ukernel(k, mr: int) -> str:
    """Declare the band micro-kernel with the conv's epilogue in registers (AVX-512 and
    AVX2): y[r * ldy + q] = clamp(tile[r * 32 + q] + bias[r], lo, hi), q < n, the tile
    as band_ukernel's. Returns its name."""
    return _define(k, "MTVM_DEFINE_F32_BAND_EPI", f"mtvm_f32_band_{mr}x32_epi", mr,
                   f"y[r * ldy + q] = clamp(band tile[r * 32 + q] + bias[r], lo, hi), "
                   f"r < {mr}, q < n <= 32 (AVX-512, AVX2)")


def pwcv_ukernel(k, positions: int, epi: bool, isa: str = "avx512") -> str:
    """Declare the pointwise kernel over output channels for `positions` positions
    (x86/mtvm_pwcv_f32_x86.h; only compiled where MTVM_F32_AVX512, or for isa "avx2"
    MTVM_F32_AVX2): with epi, y[r * ldy + q] = clamp(tile + bias[r], lo, hi) stored from
    the registers, else tile[q * block + r] = sum_c a[block][c][r % 8] * x[c * ldx + q],
    r < nm <= block (32, AVX2 16), q < positions. Returns its name."""
    if not 1 <= positions <= MAX_ROWS:
        raise MtvmError(f"a pointwise tile of {positions} positions: 1 to {MAX_ROWS}")
    k.library("mtvm_pwcv_f32_x86.h")
    kind = "pwcv8" if isa == "avx2" else "pwcv"
    name = f"mtvm_f32_{kind}_{positions}{'_epi' if epi else ''}"
    if name not in k.helpers:
        macro = f"MTVM_DEFINE_F32_{kind.upper()}{'_EPI' if epi else ''}"
        what = (f"y[r * ldy + q] = clamp(sum_c a[r][c] x[c * ldx + q] + bias[r], lo, hi)"
                if epi else "tile[q * block + r] = sum_c a[r][c] x[c * ldx + q]")
        k.helper(name, f"/* {what}, r < nm, q < {positions} "
                       f"({'AVX2' if isa == 'avx2' else 'AVX-512'}) */\n{macro}({name}, {positions})")
    return name


# -- direct: same-size stride-1 convolution on the flat plane, AVX-512 only -----------


def direct_ukernel(k, mr: int) -> str:
    """Declare the AVX-512 direct micro-kernel (only compiled where MTVM_F32_AVX512)
    for a stride-1 convolution whose output plane has the input's size (W columns,
    `plane` positions): output position p = oh * W + ow and tap (kh, kw) read input
    p + dy * W + dx (dy = kh * dh - ph, dx = kw * dw - pw), so a tile of 32
    consecutive positions (two vectors, any number of rows) reads 32 consecutive
    inputs per tap, without copying; lanes whose tap falls in the padding are
    masked off (AVX-512 masked loads do not fault there).

        tile[r * 32 + q] = sum_c,kh,kw a[((c * kh_n + kh) * kw_n + kw) * mr + r]
                                       * x[c * plane + p0 + q + dy * W + dx]

    r < mr, q < n <= 32 (0 where the tap is padding). Returns its name."""
    return _define(k, "MTVM_DEFINE_F32_DIRECT", f"mtvm_f32_direct_{mr}x32", mr,
                   f"tile[r * 32 + q] = sum_c,kh,kw a[((c * kh_n + kh) * kw_n + kw) * {mr} + r]"
                   f" * x[c * plane + p0 + q + dy * w + dx], r < {mr}, q < n <= 32 (AVX-512)")
