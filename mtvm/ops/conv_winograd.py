"""The x86 Winograd schedule of float Conv: 3x3, stride 1, no dilation, one group,
computed as F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
Networks", 2015): per 4x4 output tile and input channel, 36 multiplications in the
transformed domain instead of 144 -- on layers that direct convolution already runs
near the FMA units' peak (ic_resnet8's and denoise_unet's 3x3 layers on AVX2), the
only way to less time.

  U = G g G^T      per (output, input) channel: the 3x3 weights as 6x6, at compile time
  V = B^T d B      per tile and input channel: its 6x6 input patch (4 apart, 2 overlap)
  M[xi] = U[xi] V[xi]   36 GEMMs over the input channels
  y = A^T M A      per tile and output channel: the 4x4 outputs

The C is c_runtime/kernels/x86/mtvm_winograd_f32_x86.h (8-lane AVX2 + FMA code).
conv.x86_variant gives it to AVX2 builds only: on AVX-512 the 512-bit direct and band
kernels are faster. This module decides where it applies, transforms and packs the
weights, sizes the scratch and emits the loops that call the kernel's stages.

Accuracy: the transforms' constants (1/4, 1/6, 1/24; 4, 5, 8) cost float32 about a
decimal digit against direct summation -- relative errors of ~1e-6 of the output's
magnitude on the benchmark layers, inside the 1e-4 that float results are held to.
"""
from __future__ import annotations

import numpy as np

from ..codegen.cwriter import (Assign, Block, Comment, Decl, ExprStmt, For, RawExpr, Type,
                               Var, call, lt, render_c, select)
from ..codegen.cwriter import tail as tail_stmts
from ..memory.planner import ALIGN

# F(4x4, 3x3) with interpolation points 0, 1, -1, 2, -2 (and infinity).
G = np.array([[1 / 4, 0, 0],
              [-1 / 6, -1 / 6, -1 / 6],
              [-1 / 6, 1 / 6, -1 / 6],
              [1 / 24, 1 / 12, 1 / 6],
              [1 / 24, -1 / 12, 1 / 6],
              [0, 0, 1]], np.float64)
BT = np.array([[4, 0, -5, 0, 1, 0],
               [0, -4, -4, 1, 1, 0],
               [0, 4, -4, -1, 1, 0],
               [0, -2, -1, 2, 1, 0],
               [0, 2, -1, -2, 1, 0],
               [0, 4, 0, -5, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 1, 1, 0],
               [0, 1, -1, 2, -2, 0],
               [0, 1, 1, 4, 4, 0],
               [0, 1, -1, 8, -8, 1]], np.float64)

TILE = 4           # outputs per tile side
ALPHA = 6          # transformed tile side (TILE + 3 - 1)
MR = 4             # output channels per GEMM block (mtvm_wino_f32_gemm)
# The bytes skipped at most to align the buffers to 64: scratch starts on the
# planner's alignment (16), so 48 -- derived, since fewer would overrun the arena
ALIGN_SLACK = max(0, 64 - ALIGN)


def applies(x, wt, axes, group) -> bool:
    """A 2-D float Conv the kernel computes: 3x3, stride 1, dilation 1, one group."""
    return (group == 1 and len(axes) == 2 and tuple(wt.shape[2:]) == (3, 3)
            and all(a.stride == 1 and a.dilation == 1 for a in axes))


def tiles(axes) -> tuple[int, int]:
    """(tile rows, tiles per row) of the output."""
    ah, aw = axes
    return -(-ah.out // TILE), -(-aw.out // TILE)


def transformed_weights(w: np.ndarray) -> np.ndarray:
    """U = G g G^T of weights w [M, C, 3, 3], packed as mtvm_wino_f32_gemm reads it:
    per xi (36), per block of MR output channels (then single channels), [c][MR]."""
    m_out, c_in = w.shape[:2]
    u = np.einsum("ak,mckl,bl->abmc", G, w.astype(np.float64), G).reshape(36, m_out, c_in)
    packed = np.empty((36, m_out, c_in), np.float64)
    for m0, rows in blocks(m_out):
        packed[:, m0:m0 + rows, :] = u[:, m0:m0 + rows, :].transpose(0, 2, 1).reshape(
            36, rows, c_in)
    return packed.astype(np.float32).ravel()


def blocks(m_out: int) -> list[tuple[int, int]]:
    """(first channel, rows) of the GEMM's channel blocks: MR at a time, then one."""
    full = m_out // MR * MR
    return [(m0, MR) for m0 in range(0, full, MR)] + [(m, 1) for m in range(full, m_out)]


def block_rows(axes, s: dict) -> int:
    """Tile rows per block: about winograd_tiles tiles (at least one row)."""
    th, tw = tiles(axes)
    return max(1, min(th, s["winograd_tiles"] // tw))


def _layout(c_in: int, axes, s: dict, row_out: bool) -> dict:
    """Floats of each scratch buffer (the kernel's mtvm_wino_f32_* size functions)."""
    ah, aw = axes
    th, tw = tiles(axes)
    rows = block_rows(axes, s)
    twp = -(-tw // 8) * 8
    ldv = -(-(rows * tw) // 8) * 8 + 8
    return {"ldv": ldv,
            "v": ALPHA * ALPHA * c_in * ldv,
            "m": ALPHA * ALPHA * MR * ldv,
            "in": 4 * twp + 8 + (4 * rows + 2) * ALPHA * twp,
            "rows": TILE * aw.out if row_out else 0}


def scratch_bytes(c_in: int, axes, s: dict, row_out: bool) -> int:
    """What emit_body asks for (row_out: a tail that is not a clamp): the buffers and
    up to ALIGN_SLACK bytes at the scratch's start skipped to align them to 64."""
    lay = _layout(c_in, axes, s, row_out)
    return 4 * (lay["v"] + lay["m"] + lay["in"] + lay["rows"]) + ALIGN_SLACK


def emit_body(k, w, x, wt, bias, axes, s: dict, clamp) -> int:
    """The schedule's C into CWriter w (x, bias: the kernel's Bufs; wt: the plain
    weights); returns its scratch bytes. clamp: (lo, hi) C expressions where the fused
    tail is at most a clamp (conv.clamp_tail) -- then the kernel stores the outputs;
    else (None) each tile row's outputs go through scratch and the tail is applied
    on the way to out0."""
    from .conv import kernel_const

    ah, aw = axes
    n_batch, c_in, m_out = x.shape[0], x.shape[1], k.out.shape[1]
    th, tw = tiles(axes)
    rows = block_rows(axes, s)
    lay = _layout(c_in, axes, s, clamp is None)
    ub = kernel_const(k, f"{wt.name}_winograd", transformed_weights(np.asarray(wt.const)))
    in_plane, out_plane = ah.size * aw.size, ah.out * aw.out
    w.line(f"/* Schedule (x86): Winograd F(4x4, 3x3). Blocks of {rows} rows of {tw} tiles\n"
           f" * (4x4 outputs each): the input patches transformed (B^T d B) for all {c_in}\n"
           f" * channels, 36 GEMMs per block of {MR} output channels against the weights\n"
           f" * transformed at compile time (G g G^T), then A^T M A per output channel.\n"
           f" * c_runtime/kernels/x86/mtvm_winograd_f32_x86.h */")
    k.library("mtvm_winograd_f32_x86.h")

    f32 = Type("float32")
    fp, cfp = Type("float32", pointer=True), Type("float32", pointer=True, const=True)
    i32 = Type("int32", const=True)
    v, mb, sb, yrows = (Var(name, fp) for name in ("wino_v", "wino_m", "wino_s", "wino_y"))
    n, i0, i, r, mo, a, q = (Var(name, Type("int32")) for name in
                             ("n", "i0", "i", "r", "mo", "a", "q"))
    ib, nt8, oh, nrows, m, y_idx = (Var(name, i32) for name in
                                    ("ib", "nt8", "oh", "nrows", "m", "y_idx"))
    x_n, y_n, out0, acc = Var("x_n", cfp), Var("y_n", fp), Var("out0", fp), Var("acc", f32)
    u = Var(ub.c, cfp)

    # V and M 64-byte aligned (their rows are whole 32-byte vectors of tiles): the arena
    # aligns scratch to 16 only, and a 32-byte load off that alignment splits a cache
    # line one time in four
    prologue = [Decl(v, RawExpr("(float*)(((uintptr_t)scratch + 63) & ~(uintptr_t)63)")),
                Decl(mb, v + lay["v"]),
                Decl(sb, mb + lay["m"])]
    if clamp is None:
        prologue.append(Decl(yrows, sb + lay["in"]))

    def output_rows(m0, mr) -> list:
        """GEMM of the block's mr channels, then their outputs a tile row at a time."""
        bias_m = Var(bias.c, cfp)[m] if bias is not None else RawExpr("0.0f")
        args = [mb + r * lay["ldv"], mr * lay["ldv"], i * tw, tw, aw.out, nrows, bias_m]
        per_row = [Decl(oh, (i0 + i) * TILE),
                   Decl(nrows, select(lt(ah.out - oh, TILE), ah.out - oh, TILE))]
        if clamp is not None:
            per_row.append(ExprStmt(call("mtvm_wino_f32_output", *args, RawExpr(clamp[0]),
                                         RawExpr(clamp[1]), y_n + m * out_plane + oh * aw.out,
                                         aw.out)))
        else:
            per_row += [
                ExprStmt(call("mtvm_wino_f32_output", *args, RawExpr("-INFINITY"),
                              RawExpr("INFINITY"), yrows, aw.out)),
                For(a, nrows, [For(q, aw.out, [
                    Decl(y_idx, n * (m_out * out_plane) + m * out_plane + (oh + a) * aw.out + q),
                    Decl(acc, yrows[a * aw.out + q]),
                    *tail_stmts(k, acc, y_idx, m),
                    Assign(out0[y_idx], acc)])])]
        return [ExprStmt(call("mtvm_wino_f32_gemm", u, c_in, m_out, m0, mr, v, lay["ldv"],
                              nt8, mb)),
                For(r, mr, [Decl(m, m0 + r), For(i, ib, per_row)])]

    channel_blocks = []
    full = m_out // MR
    if full:
        channel_blocks.append(For(mo, full, output_rows(mo * MR, MR)))
    for m_single in range(full * MR, m_out):
        channel_blocks.append(Block(output_rows(m_single, 1)))
    block = [Decl(ib, select(lt(th - i0, rows), th - i0, rows)),
             Decl(nt8, call("mtvm_wino_f32_ldv", ib * tw)),
             ExprStmt(call("mtvm_wino_f32_input", x_n, c_in, ah.size, aw.size, ah.pad_begin,
                           aw.pad_begin, tw, i0, ib, v, lay["ldv"], sb)),
             *channel_blocks]
    per_image = [Decl(x_n, Var(x.c, cfp) + n * (c_in * in_plane)),
                 *([Decl(y_n, out0 + n * (m_out * out_plane))] if clamp is not None else []),
                 Comment("lanes past the last tile are read, never stored: keep them finite"),
                 ExprStmt(call("memset", v, 0, RawExpr(f"{lay['v']} * sizeof(float)"))),
                 For(i0, th, block, step=rows)]
    w.line(render_c(prologue + [For(n, n_batch, per_image)]))
    return scratch_bytes(c_in, axes, s, clamp is None)
