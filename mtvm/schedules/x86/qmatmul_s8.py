"""QMatMul and QBatchMatMul on x86-64-v3 targets (AVX2 and FMA, no AVX-512): eight output
channels a vector and four rows at a time, the right operand as int16 pairs -- QMatMul's
weights packed at compile time, QBatchMatMul's operand (attention's keys and values) per
batch entry at run time, its zero point subtracted there
(c_runtime/kernels/x86/mtvm_qmatmul_s8_avx2_x86.h).

The generic kernel (mtvm_dot_8.h's four-row dot product) widens every weight again for
every row and sums across lanes once per output; kwt_tiny_int8's projections ran at
23 MACs/ns there. Only where the requantization has no tie (mtvm_requantize_nt: the
kernel's vector form) and the weights are symmetric; two rows or more (one row is a GEMV:
the dot product reads each weight once anyway). Target c (and the AVX-512 hosts) keep the
generic kernel: its weights are the plain ones every branch of the portable C reads.
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import Cast, Decl, ExprStmt, For, RawExpr, Type, Var, call, render_c
from ...ops.quantized.common import has_post_add, operands, post_add_pairs, ties_impossible
from ...ops.quantized.matmul import batch_offset_c, vector_requant_operands
from .. import Schedule, register

ROWS = 4      # rows of x a pass (the kernel's four sums)
LANES = 8     # output channels a vector


def avx2_matmul_weights(w: np.ndarray) -> np.ndarray:
    """[ceil(n / 8)][ceil(k / 2)][8] int32 of weights [n][k]: lane l of block b holds output
    channel 8 b + l's taps 2 j (low int16) and 2 j + 1 (high), zeros past k and n."""
    n, kk = w.shape
    kp, nb = (kk + 1) // 2, (n + LANES - 1) // LANES
    wide = np.zeros((nb * LANES, 2 * kp), np.int32)
    wide[:n, :kk] = w
    lo = wide[:, 0::2].astype(np.uint32) & 0xFFFF
    hi = (wide[:, 1::2].astype(np.uint32) & 0xFFFF) << 16
    words = (lo | hi).view(np.int32)                       # [nb * 8][kp]
    return np.ascontiguousarray(words.reshape(nb, LANES, kp).transpose(0, 2, 1))


def _x86_v3(t) -> bool:
    return t.is_x86 and t.has("avx2", "fma") and not t.has("avx512f")


def _byte(buf) -> bool:
    return np.dtype(buf.dtype) in (np.int8, np.uint8)


@register
class QMatMulAvx2(Schedule):
    op = "QMatMul"
    domain = "mtvm"
    name = "qmatmul_s8.avx2_packed"
    family = "x86"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        if not _x86_v3(k.target):
            return False
        x, bias = k.ins[0], k.ins[2]
        # (the packed kernel's bias is read as a table: constant)
        return vector_requant_operands(k) and bias.const is not None and \
            x.size // x.shape[-1] >= 2

    def weight_layout(self, k, /, **attrs):
        layout = {1: avx2_matmul_weights(np.asarray(k.ins[1].const))}
        if has_post_add(k):   # the folded bias Add's c and ia as [2][n]: vector loads
            c, ia = post_add_pairs(k.ins[6].const)
            layout[6] = np.ascontiguousarray(np.stack([c, np.broadcast_to(ia, c.shape)]))
        return layout

    def scratch_bytes(self, k, /, **attrs) -> int:
        return ROWS * 4 * ((k.ins[0].shape[-1] + 1) // 2)

    def emit(self, k, /, *, x_zp=0, y_zp=0, act_min=-128, act_max=127, post_shift=None,
             post_min=None, post_max=None):
        x, wp, bias, mult, shift, _ = operands(k)
        w = k.plain(1)
        kk, nn = x.shape[-1], w.shape[0]
        m = x.size // kk
        k.library("mtvm_qmatmul_s8_avx2_x86.h")
        u8 = Type("uint8", pointer=True)
        post = [Var(k.ins[6].c), int(post_shift), int(post_min), int(post_max)] \
            if has_post_add(k) else [RawExpr("NULL"), 0, 0, 0]
        args = [Cast(Type("uint8", pointer=True, const=True), Var(x.c)),
                int(np.dtype(x.dtype) == np.uint8), m, kk, nn, Var(wp.c), Var(bias.c),
                Var(mult.c), int(mult.size > 1), Var(shift.c), int(shift.size > 1),
                int(y_zp), int(act_min), int(act_max), *post,
                Cast(Type("int32", pointer=True), Var("scratch")), Cast(u8, Var(k.out.c))]
        return render_c([ExprStmt(call("mtvm_qmatmul_avx2_x86", *args))])


@register
class QBatchMatMulAvx2(Schedule):
    op = "QBatchMatMul"
    domain = "mtvm"
    name = "qbatchmatmul_s8.avx2_packed"
    family = "x86"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        a, b = k.ins[:2]
        mult, shift = (list(k.ins) + [None, None])[2:4]
        if not _x86_v3(k.target) or not (_byte(a) and _byte(b) and _byte(k.out)):
            return False
        if mult is None or shift is None or mult.const is None or shift.const is None or \
                shift.size != 1 or not ties_impossible(mult.const, shift.const):
            return False
        return a.shape[-2] >= 2

    def scratch_bytes(self, k, /, **attrs) -> int:
        kk, n = k.ins[0].shape[-1], k.ins[1].shape[-1]
        kp = (kk + 1) // 2
        return 4 * (((n + LANES - 1) // LANES) * LANES * kp + n + ROWS * kp)

    def emit(self, k, /, *, a_zp=0, b_zp=0, y_zp=0, act_min=-128, act_max=127):
        a, b, mult, shift = k.ins[:4]
        m, kk, n = a.shape[-2], a.shape[-1], b.shape[-1]
        batch = k.out.shape[:-2]
        nb = int(np.prod(batch, dtype=np.int64))
        kp = (kk + 1) // 2
        k.library("mtvm_qmatmul_s8_avx2_x86.h")
        i32p, u8c = Type("int32", pointer=True), Type("uint8", pointer=True, const=True)
        wp, bias, xp, t = Var("wp", i32p), Var("bias", i32p), Var("xp", i32p), Var("t")
        words = ((n + LANES - 1) // LANES) * LANES * kp
        pack = call("mtvm_qmm_pack_b_avx2_x86",
                    Cast(u8c, Var(b.c)) + RawExpr(batch_offset_c(b.shape, batch)),
                    int(np.dtype(b.dtype) == np.uint8), kk, n, int(a_zp), int(b_zp), wp, bias)
        mm = call("mtvm_qmatmul_avx2_x86",
                  Cast(u8c, Var(a.c)) + RawExpr(batch_offset_c(a.shape, batch)),
                  int(np.dtype(a.dtype) == np.uint8), m, kk, n, wp, bias, Var(mult.c),
                  int(mult.size > 1), Var(shift.c), 0, int(y_zp), int(act_min), int(act_max),
                  RawExpr("NULL"), 0, 0, 0, xp,
                  Cast(Type("uint8", pointer=True), Var(k.out.c)) + t * (m * n))
        return render_c([Decl(wp, Cast(i32p, Var("scratch"))), Decl(bias, wp + words),
                         Decl(xp, bias + n), For(t, nb, [ExprStmt(pack), ExprStmt(mm)])])
