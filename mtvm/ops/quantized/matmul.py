"""QMatMul (a constant int8 B: a Linear layer; the dense dot-product kernel,
four output columns at a time) and QBatchMatMul (both operands computed, batch
dims broadcast: attention)."""
from __future__ import annotations

import numpy as np

from ..base import register
from .common import (
    DOMAIN,
    INT8_EXT,
    IntOp,
    finish,
    has_post_add,
    indent_c,
    minus,
    operands,
    per_channel,
    post_add_pairs,
    store_lines,
    ties_impossible,
)


def dot_helper(k, a_dtype, b_dtype, rows: int = 1) -> str:
    """The name of the int32 dot product of an a_dtype vector with `rows` (1 or 4)
    b_dtype vectors (c_runtime/kernels/generic/mtvm_dot_8.h); the 4-row form loads
    and widens `a` once for four output channels."""
    na, nb = INT8_EXT[np.dtype(a_dtype).name][1], INT8_EXT[np.dtype(b_dtype).name][1]
    if k.target.has("mve") and na == nb == "s8":   # Helium: VMLADAVA.S8 (mtvm_dot_8_mve.h)
        k.library("mtvm_dot_8_mve.h")
        return f"mtvm_dot{'4' if rows == 4 else ''}_s8_s8_mve"
    k.library("mtvm_dot_8.h")
    if rows == 4 and k.target.is_riscv:   # RV32: c_runtime/kernels/riscv/mtvm_dot_8_rv32.h
        k.library("mtvm_dot_8_rv32.h")
        return f"mtvm_dot4_rv32_{na}_{nb}"
    return f"mtvm_dot{'4' if rows == 4 else ''}_{na}_{nb}"


def dense_lines(k, x, w, bias, mult, shift, w_zp, *, a: str, o_begin: str, o_end: str, kk: int,
                count: int, y_zp: int, act_min: int, act_max: int, dst,
                xsum: str | None) -> list[str]:
    """C lines: for o in [o_begin, o_end): dst(o) = requantized bias[o] + dot(a, w[o]),
    four output channels at a time (one pass over `a` for four weight rows)."""
    dot1 = dot_helper(k, x.dtype, w.dtype) if count % 4 else None
    dot4 = dot_helper(k, x.dtype, w.dtype, rows=4) if count >= 4 else None
    zw = (lambda ch: f" - {per_channel(w_zp, ch)} * {xsum}") if w_zp is not None else \
        (lambda ch: "")
    if mult is None:
        def store(acc, ch):
            return [f"{dst(ch)} = {acc};"]
    else:
        def store(acc, ch):
            return store_lines(k, acc, y_zp, act_min, act_max, mult, shift, ch, dst(ch))
    lines = [f"size_t o = {o_begin};"]
    if count >= 4:
        lines += [f"for (; o + 4 <= {o_end}; o += 4) {{",
                  f"    int32_t acc4[4] = {{ {bias.c}[o], {bias.c}[o + 1], {bias.c}[o + 2], "
                  f"{bias.c}[o + 3] }};",
                  f"    {dot4}({a}, {w.c} + o * {kk}, {kk}, {kk}, acc4);",
                  "    for (size_t r = 0; r < 4; ++r) {",
                  f"        int32_t acc = acc4[r]{zw('o + r')};"]
        lines += indent_c(store("acc", "o + r"), 2)
        lines += ["    }", "}"]
    if count % 4:
        lines += [f"for (; o < {o_end}; ++o) {{",
                  f"    int32_t acc = {bias.c}[o] + {dot1}({a}, {w.c} + o * {kk}, {kk})"
                  f"{zw('o')};"]
        lines += indent_c(store("acc", "o"))
        lines.append("}")
    return lines


@register("QMatMul", domain=DOMAIN)
class QMatMul(IntOp):
    """x [..., M, K] times constant w stored transposed [N, K]: y [..., M, N].
    inputs: x, w, bias [N], mult [N|1], shift [N|1], w_zp [N] (optional), post [N][2] or
    [N + 1] (optional: a folded bias Add, passes/matmul_bias.py: each stored value v of
    column j becomes clamp((post[j][0] + v post[j][1]) >> post_shift, post_min, post_max),
    or with post [N + 1], clamp((post[j] + v post[N]) >> ...)).
    Without mult/shift the output is the int32 accumulator (MatMulInteger)."""

    def reference(self, x, w, bias, mult=None, shift=None, w_zp=None, post=None, *, x_zp=0,
                  y_zp=0, act_min=-128, act_max=127, post_shift=0, post_min=-128,
                  post_max=127):
        kk = x.shape[-1]
        a = x.reshape(-1, kk).astype(np.int64)
        acc = a @ w.astype(np.int64).T + np.asarray(bias, np.int64)
        if w_zp is not None:
            acc -= a.sum(axis=1, keepdims=True) * np.asarray(w_zp, np.int64)
        shape = x.shape[:-1] + (w.shape[0],)
        if mult is None:
            return acc.astype(np.int32).reshape(shape)
        out_dtype = np.int8 if act_min < 0 else np.uint8
        y = finish(acc, mult, shift, y_zp, act_min, act_max, out_dtype)
        if post is not None:
            c, ia = post_add_pairs(np.asarray(post, np.int64))
            v = (c + y.astype(np.int64) * ia) >> int(post_shift)
            y = np.clip(v, post_min, post_max).astype(np.int8 if post_min < 0 else np.uint8)
        return y.reshape(shape)

    def macs(self, node, inputs, outputs):
        return outputs[0].size * inputs[0].shape[-1]

    def emit(self, k, *, x_zp=0, y_zp=0, act_min=-128, act_max=127, post_shift=None,
             post_min=None, post_max=None):
        # post_*: a folded bias Add, applied by store_lines (post_add_lines)
        x, w, bias, mult, shift, w_zp = operands(k)
        kk, nn = x.shape[-1], w.shape[0]
        m = x.size // kk
        lines = [f"/* {x.c}: input [{m}][{kk}], {w.c}: weights [{nn}][{kk}] (transposed), "
                 f"{bias.c}: int32 bias (zero-point terms folded in)"
                 + (f",\n * {mult.c}/{shift.c}: requantization multiplier/shift"
                    if mult is not None and mult.size > 1 else "")
                 + (f", {w_zp.c}: weight zero points" if w_zp is not None and w_zp.size > 1
                    else "") + " */",
                 f"for (size_t i = 0; i < {m}; ++i) {{",
                 f"    const {x.ctype}* a = {x.c} + i * {kk};"]
        xsum = None
        if w_zp is not None:
            xsum = "asum"
            lines += ["    int32_t asum = 0;",
                      f"    for (size_t t = 0; t < {kk}; ++t) asum += a[t];"]
        lines += indent_c(dense_lines(k, x, w, bias, mult, shift, w_zp, a="a", o_begin="0",
                                     o_end=str(nn), kk=kk, count=nn, y_zp=y_zp, act_min=act_min,
                                     act_max=act_max, dst=lambda ch: f"out0[i * {nn} + {ch}]",
                                     xsum=xsum))
        lines.append("}")
        if vnni_applies(k):
            from ...codegen.cwriter import PreIf, Raw, render_c
            lines = [lines[0], render_c(PreIf("defined(MTVM_QMM_VNNI)",
                                              vnni_call(k, m, kk, nn, y_zp, act_min, act_max),
                                              [Raw("\n".join(lines[1:]))]))]
        return "\n".join(lines)


def vector_requant_operands(k) -> bool:
    """What QMatMul's vector kernels (the x86 VNNI branch here, the AVX2 packed schedule,
    mtvm/schedules/x86/qmatmul_s8.py) take: 8-bit data, constant int8 weights without
    zero points, constant multipliers without ties (their vector requantization is
    mtvm_requantize_nt's), not in place."""
    x, w, bias, mult, shift, w_zp = operands(k)
    return np.dtype(x.dtype) in (np.int8, np.uint8) and \
        np.dtype(k.out.dtype) in (np.int8, np.uint8) and np.dtype(w.dtype) == np.int8 and \
        w.const is not None and w_zp is None and bias is not None and mult is not None and \
        shift is not None and mult.const is not None and shift.const is not None and \
        ties_impossible(mult.const, shift.const) and k.inplace is None


def vnni_applies(k) -> bool:
    """Whether QMatMul's C has the AVX-512 VNNI branch (x86/mtvm_qmatmul_s8_vnni_x86.h):
    where it may run (target c, an AVX-512 x86 target), on vector_requant_operands."""
    t = k.target
    return (t.is_generic or (t.is_x86 and t.has("avx512f"))) and vector_requant_operands(k)


def vnni_call(k, m: int, kk: int, nn: int, y_zp: int, act_min: int, act_max: int) -> list:
    """Statements calling mtvm_qmatmul_vnni_x86 for the whole QMatMul."""
    from ...codegen.cwriter import ArrayDecl, Cast, ExprStmt, RawExpr, Type, Var, call
    x, w, bias, mult, shift, _ = operands(k)
    k.library("mtvm_qmatmul_s8_vnni_x86.h")
    tables = []

    def params(buf, name):   # (pointer, per-channel): one value as a table of its own
        if buf.size > 1:
            return Var(buf.c), 1
        tables.append(ArrayDecl(Var(name, Type("int32", const=True)),
                                (int(np.asarray(buf.const).ravel()[0]),)))
        return Var(name), 0
    post = [RawExpr("NULL"), 0, 0, 0, 0]
    if has_post_add(k):
        a = k.node.attrs
        post = [Var(k.ins[6].c), int(len(k.ins[6].shape) == 2), int(a["post_shift"]),
                int(a["post_min"]), int(a["post_max"])]
    u8 = Type("uint8", pointer=True)
    args = [Cast(Type("uint8", pointer=True, const=True), Var(x.c)),
            int(np.dtype(x.dtype) == np.uint8), m, kk, nn, Var(w.c), Var(bias.c),
            *params(mult, "rq_mult"), *params(shift, "rq_shift"), int(y_zp), int(act_min),
            int(act_max), *post, Cast(u8, Var(k.out.c))]
    return tables + [ExprStmt(call("mtvm_qmatmul_vnni_x86", *args))]


def _batch_offsets(shape, batch_out) -> list[tuple[int, int]]:
    """(dim index, element stride) terms of a [..., R, C] operand's batch offset."""
    from ..elementwise import broadcast_strides
    mat = int(np.prod(shape[-2:], dtype=np.int64))
    st = broadcast_strides(tuple(shape[:-2]), tuple(batch_out))
    return [(d, s * mat) for d, s in enumerate(st) if s]


def batch_offset_c(shape, batch_out) -> str:
    """C expression of a [..., R, C] operand's element offset for batch entry t (flat
    over batch_out, broadcast where the operand's dimension is 1)."""
    terms = []
    for d, s in _batch_offsets(shape, batch_out):
        inner = int(np.prod(batch_out[d + 1:], dtype=np.int64))
        coord = f"(t / {inner})" if inner > 1 else "t"
        terms.append(f"({coord} % {batch_out[d]}) * {s}")
    return " + ".join(terms) or "0"


@register("QBatchMatMul", domain=DOMAIN)
class QBatchMatMul(IntOp):
    """a [..., M, K] times b [..., K, N] (both may be computed at run time), NumPy
    batch broadcasting: acc = sum_k (a - za)(b - zb). inputs: a, b, mult [N|1],
    shift [N|1]; without mult/shift the output is the int32 accumulator."""

    def reference(self, a, b, mult=None, shift=None, *, a_zp=0, b_zp=0, y_zp=0,
                  act_min=-128, act_max=127):
        acc = np.matmul(a.astype(np.int64) - a_zp, b.astype(np.int64) - b_zp)
        if mult is None:
            return acc.astype(np.int32)
        out_dtype = np.int8 if act_min < 0 else np.uint8
        return finish(acc, mult, shift, y_zp, act_min, act_max, out_dtype)

    def macs(self, node, inputs, outputs):
        return outputs[0].size * inputs[0].shape[-1]

    def scratch_bytes(self, k, /, **attrs) -> int:
        """One batch entry of b transposed (rounded up to words), its column sums
        and one row of per-column constants (int32)."""
        kk, n = k.ins[0].shape[-1], k.ins[1].shape[-1]
        return (n * kk + 3) // 4 * 4 + 8 * n

    def emit(self, k, *, a_zp=0, b_zp=0, y_zp=0, act_min=-128, act_max=127):
        a, b = k.ins[:2]
        mult, shift = (k.ins + [None, None])[2:4]
        out = k.out
        m, kk, n = a.shape[-2], a.shape[-1], b.shape[-1]
        batch = out.shape[:-2]
        nb = int(np.prod(batch, dtype=np.int64))

        def offset(buf):
            return batch_offset_c(buf.shape, batch)
        from types import SimpleNamespace
        bt_bytes = (n * kk + 3) // 4 * 4
        from ...codegen.cwriter import (Assign, Cast, Comment, Decl, For, Raw, RawExpr,
                                        Type, Var, render_c)
        i32, ptr = Type("int32"), Type(b.dtype, pointer=True)
        bt, bsum, brow = Var("bt", ptr), Var("bsum", Type("int32", pointer=True)), \
            Var("brow", Type("int32", pointer=True))
        t, i, j, p, s_, v = Var("t"), Var("i"), Var("j"), Var("p"), Var("s", i32), \
            Var("v", Type(b.dtype, const=True))
        pa = Var("pa", Type(a.dtype, pointer=True, const=True))
        pb = Var("pb", Type(b.dtype, pointer=True, const=True))
        ar, asum = Var("ar", Type(a.dtype, pointer=True, const=True)), Var("asum", i32)
        transpose = For(j, n, [Decl(s_, 0),
                               For(p, kk, [Decl(v, pb[p * n + j]), Assign(bt[j * kk + p], v),
                                           Assign(s_, v, "+=")]),
                               Assign(bsum[j], s_)])

        def term(coef: int, var: str) -> str:
            return "" if not coef else (f" + {coef} * {var}" if coef > 0 else
                                        f" - {-coef} * {var}")
        const = f"{kk * a_zp * b_zp}{term(-b_zp, 'asum')}{term(-a_zp, 'bsum[j]')}"
        wbuf = SimpleNamespace(c="bt", dtype=b.dtype)
        bias = SimpleNamespace(c="brow")
        dense = dense_lines(
            k, a, wbuf, bias, mult, shift, None, a="ar", o_begin="0", o_end=str(n), kk=kk,
            count=n, y_zp=y_zp, act_min=act_min, act_max=act_max, xsum=None,
            dst=(lambda ch: f"out0[(t * {m} + i) * {n} + {ch}]"))
        row = [Decl(ar, pa + i * kk)]
        if b_zp:
            row += [Decl(asum, 0), For(p, kk, [Assign(asum, ar[p], "+=")])]
        row += [For(j, n, [Assign(brow[j], RawExpr(const))]), Raw("\n".join(dense))]
        body = [Comment(f"per batch entry, b's block transposed into scratch ([{n}][{kk}]: "
                        "each output a contiguous dot product,"),
                Comment("four columns per pass over a's row) with its column sums; the zero "
                        "points enter once per row and column:"),
                Comment("sum (a - za)(b - zb) = sum a b - zb sum a - za sum b + K za zb"),
                Decl(bt, Cast(ptr, Var("scratch"))),
                Decl(bsum, Cast(bsum.type, Var("scratch") + bt_bytes)),
                Decl(brow, bsum + n), Comment("a row's constant terms per column"),
                For(t, nb, [Decl(pa, Var(a.c) + RawExpr(offset(a))),
                            Decl(pb, Var(b.c) + RawExpr(offset(b))),
                            transpose, For(i, m, row)])]
        return render_c(body)
