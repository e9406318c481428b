"""QAdd and QMul on Armv7E-M/v8-M DSP cores (with a one-element constant operand: a
256-entry table made by the op's reference): the zero points and the rounding half folded into one
64-bit constant, two SMLALs an element and round-half-to-even from the low word
(c_runtime/kernels/arm_dsp/mtvm_qadd_s8_dsp.h), over rows where both operands are
contiguous (same shapes, or one broadcast over the leading dims: a bias). Bit-exact with
the portable kernel (mtvm.ops.quantized.elementwise.QAdd), whose 64-bit rounding this
replaces; other broadcasts keep it.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...codegen.cwriter import (Cast, Comment, Const, Decl, ExprStmt, For, Raw, Table,
                                Type, Var, call, render_c)
from ...ops.quantized.common import store_lines, ties_impossible
from ...ops.quantized.narrow import fit_channels, narrow_qadd, value_range as _range
from ...ops.quantized.elementwise import row_layout, scalar_operand as _scalar
from .. import Schedule, register
from .matmul_s8 import _ext


def ties_possible(k, a_zp, b_zp, a_mult, b_mult, shift) -> bool:
    """Whether some pair of input values puts (a - za) ia + (b - zb) ib exactly halfway
    between two multiples of 2^shift (at most 256 x 256 pairs: all checked)."""
    ta = (_range(k.ins[0]) - int(a_zp)) * int(a_mult)
    tb = (_range(k.ins[1]) - int(b_zp)) * int(b_mult)
    mask, half = (1 << int(shift)) - 1, 1 << (int(shift) - 1)
    return bool(np.any(((ta[:, None] + tb[None, :]) & mask) == half))


def narrow_affine(k, x_zp, y_zp, act_min, act_max) -> tuple[np.ndarray, int] | None:
    """QAffine's per-channel y = clamp((c[ch] + x ia[ch]) >> n) with one n for all channels,
    equal to the op's reference for each value x can hold (fit_channels; the slope scale mult
    2^(shift - 31) scaled to 2^n and nudged by one): (the [C][2] table of (c, ia), n), or
    None."""
    from ...ops.quantized.common import finish
    x, scale, offset, mult, shift = k.ins[:5]
    if any(b.const is None for b in (scale, offset, mult, shift)):
        return None
    chans = max(scale.size, offset.size, mult.size, shift.size)
    par = [np.broadcast_to(np.asarray(b.const, np.int64).ravel(), (chans,))
           for b in (scale, offset, mult, shift)]
    vx = _range(x)
    xmax = int(np.abs(vx).max())
    acc = (vx[None, :] - int(x_zp)) * par[0][:, None] + par[1][:, None]
    pre = finish(acc, par[2][:, None], par[3][:, None], int(y_zp), -(1 << 40), 1 << 40,
                 np.int64)
    out = np.clip(pre, act_min, act_max)
    low, high = pre <= act_min, pre >= act_max
    step = 2.0 ** (par[3].astype(np.float64) - 31) * par[2]
    slope, bias = par[0] * step, par[1] * step
    unit = float(np.max(np.abs(slope) * (xmax + abs(int(x_zp))) + np.abs(bias))) + \
        abs(int(y_zp)) + 2
    if not np.isfinite(unit):
        return None
    return fit_channels(vx, out, low, high, slope, unit)


def scalar_lut(k, attrs: dict) -> str | None:
    """With a one-element constant operand, the op is a function of the other's byte: a
    256-entry table made by the op's own reference (the same integers), one load an
    element. None otherwise."""
    from ...ops.base import get_op
    j = _scalar(k)
    if j is None:
        return None
    x = k.ins[1 - j]
    vals = _range(x)
    c = np.full(vals.shape, np.asarray(k.ins[j].const).ravel()[0], np.int64)
    ins = [c, vals] if j == 0 else [vals, c]
    ins = [v.astype(np.dtype(b.dtype)) for v, b in zip(ins, k.ins[:2])]
    # the kernels' int32 arithmetic and the reference's int64 agree where the value before
    # the zero point and the clamp stays well inside int32 (always, for 8-bit scales)
    from ...ops.quantized.common import requantize, round_shift
    a, b = (v.astype(np.int64) for v in ins)
    if k.node.op == "QAdd":
        pre = round_shift((a - attrs["a_zp"]) * attrs["a_mult"] +
                          (b - attrs["b_zp"]) * attrs["b_mult"], attrs["shift"])
    else:
        pre = requantize((a - attrs["a_zp"]) * (b - attrs["b_zp"]), attrs["y_mult"],
                         attrs["y_shift"])
    if np.abs(pre).max() + abs(int(attrs["y_zp"])) >= 1 << 30:
        return None
    op = get_op(k.node.op, k.node.domain)
    table = np.asarray(op.reference(*ins, **attrs)).astype(np.dtype(k.out.dtype))
    t = Var("lut", Type(k.out.dtype))
    k.library("mtvm_lut_8_dsp.h")
    return render_c([Comment("a function of one byte (the other operand a constant): its "
                             "table, from the op's reference"),
                     Table(t, table),
                     ExprStmt(call(f"mtvm_lut_{_ext(x)}_dsp", Var(x.c), Var(k.out.c),
                                   k.out.size, t))])


@register
class QLutDsp(Schedule):
    """QLut four bytes a step (c_runtime/kernels/arm_dsp/mtvm_lut_8_dsp.h): one word load,
    then an extend-with-rotate as each byte's index."""
    op = "QLut"
    domain = "mtvm"
    name = "qlut_s8.dsp_words"
    family = "arm_dsp"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        x, table = k.ins[:2]
        return (k.target.is_arm_dsp and _ext(x) is not None and _ext(k.out) is not None
                and table.size == 256)

    def emit(self, k, /, **attrs) -> str:
        x, table = k.ins[:2]
        k.library("mtvm_lut_8_dsp.h")
        return render_c([ExprStmt(call(f"mtvm_lut_{_ext(x)}_dsp", Var(x.c), Var(k.out.c),
                                       k.out.size, Var(table.c)))])


@register
class QAddDsp(Schedule):
    op = "QAdd"
    domain = "mtvm"
    name = "qadd_s8.dsp_smlal"
    family = "arm_dsp"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        a, b = k.ins[:2]
        e = _ext(k.out)
        return (k.target.is_arm_dsp and e is not None and _ext(a) == e and _ext(b) == e
                and 1 <= int(attrs.get("shift", 0)) <= 31 and row_layout(k) is not None)

    def emit(self, k, /, *, a_zp, b_zp, y_zp, a_mult, b_mult, shift, act_min=-128,
             act_max=127):
        lut = scalar_lut(k, dict(a_zp=a_zp, b_zp=b_zp, y_zp=y_zp, a_mult=a_mult, b_mult=b_mult,
                                 shift=shift, act_min=act_min, act_max=act_max))
        if lut is not None:
            return lut
        k.library("mtvm_qadd_s8_dsp.h")
        inner, moves = row_layout(k)
        rows = k.out.size // inner
        zps, mults = (int(a_zp), int(b_zp)), (int(a_mult), int(b_mult))
        c = -zps[0] * mults[0] - zps[1] * mults[1] + (1 << (int(shift) - 1))
        r = Var("r")
        ptr = [Var(x.c, Type(x.dtype, pointer=True)) + (r * inner if mv else Const(0))
               for x, mv in zip(k.ins[:2], moves)]
        out = Var(k.out.c, Type(k.out.dtype, pointer=True)) + r * inner
        j = _scalar(k)
        narrow = narrow_qadd(k, a_zp, b_zp, y_zp, a_mult, b_mult, shift, int(act_min),
                             int(act_max)) if j is None else None
        if narrow is not None:
            c32, ia, ib, n32 = narrow
            return render_c([Comment(f"{rows} row(s) of {inner}: 32-bit constants that give "
                                     "every input pair the reference's output"),
                             For(r, rows, [ExprStmt(call(
                                 f"mtvm_qadd32_{_ext(k.out)}_dsp", *ptr, out, inner,
                                 Const(c32, "int32"), ia, ib, n32, int(act_min),
                                 int(act_max)))])])
        # the 64-bit form: the tie test left out where no input pair makes a tie
        n = int(shift) if ties_possible(k, a_zp, b_zp, a_mult, b_mult, shift) else -int(shift)
        rest = (n, int(y_zp), int(act_min), int(act_max))
        if j is None:
            body = ExprStmt(call(f"mtvm_qadd_{_ext(k.out)}_dsp", *ptr, out, inner,
                                 Const(c, "int64"), *mults, *rest))
        else:   # the constant's term folded into c
            c += int(np.asarray(k.ins[j].const).ravel()[0]) * mults[j]
            body = ExprStmt(call(f"mtvm_qadd1_{_ext(k.out)}_dsp", ptr[1 - j], out, inner,
                                 Const(c, "int64"), mults[1 - j], *rest))
        note = "" if n > 0 else " (no input pair makes a tie: -shift)"
        return render_c([Comment(f"{rows} row(s) of {inner}: the zero points and half of "
                                 f"2^{int(shift)} in one 64-bit constant{note}"),
                         For(r, rows, [body])])


@register
class QAffineDsp(Schedule):
    """QAffine (a BatchNormalization or per-channel Mul/Add by constants between quantized
    tensors, a plain requantization) as clamp((c + x ia) >> n) per channel, where
    narrow_affine finds 32-bit constants giving every value of x the reference's output:
    one MLA and an SSAT an element where the portable kernel takes the 64-bit rounding."""
    op = "QAffine"
    domain = "mtvm"
    name = "qaffine_s8.dsp_narrow"
    family = "arm_dsp"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        e = _ext(k.out)
        if not (k.target.is_arm_dsp and e is not None and _ext(k.ins[0]) == e):
            return False
        return narrow_affine(k, attrs.get("x_zp", 0), attrs.get("y_zp", 0),
                             int(attrs.get("act_min", -128)),
                             int(attrs.get("act_max", 127))) is not None

    def emit(self, k, /, *, axis=1, x_zp=0, y_zp=0, act_min=-128, act_max=127):
        table, n = narrow_affine(k, x_zp, y_zp, int(act_min), int(act_max))
        k.library("mtvm_qadd_s8_dsp.h")
        x, e = k.ins[0], _ext(k.out)
        chans = table.shape[0]
        lim = (int(act_min), int(act_max))
        xp = Var(x.c, Type(x.dtype, pointer=True))
        yp = Var(k.out.c, Type(k.out.dtype, pointer=True))
        if chans == 1:
            return render_c([Comment("one (c, ia) for the whole tensor"),
                             ExprStmt(call(f"mtvm_qaffine32_{e}_dsp", xp, yp, x.size,
                                           Const(int(table[0, 0]), "int32"),
                                           int(table[0, 1]), n, *lim))])
        inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
        outer = x.size // (inner * chans)
        ca = Var("ca", Type("int32"))
        o, ch = Var("o"), Var("ch")
        body = [Comment(f"(c, ia) of each of the {chans} channels, n = {n}: 32-bit constants "
                        "giving every input value the reference's output"),
                Table(ca, table)]
        if inner == 1:
            body.append(For(o, outer, [ExprStmt(call(
                f"mtvm_qaffine32c_{e}_dsp", xp + o * chans, yp + o * chans, chans, ca, n,
                *lim))]))
        else:
            run = (o * chans + ch) * inner
            body.append(For(o, outer, [For(ch, chans, [ExprStmt(call(
                f"mtvm_qaffine32_{e}_dsp", xp + run, yp + run, inner, ca[2 * ch],
                ca[2 * ch + 1], n, *lim))])]))
        return render_c(body)


@register
class QMulDsp(Schedule):
    """QMul over the same rows as QAdd, with the cheap requantization where no product can
    be a tie (mtvm.ops.quantized.common.requantize_fn: the same integers): SMULL, one add
    and a shift instead of the 64-bit rounding; by a constant scalar, a table."""
    op = "QMul"
    domain = "mtvm"
    name = "qmul_s8.dsp_rows"
    family = "arm_dsp"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        a, b = k.ins[:2]
        e = _ext(k.out)
        return (k.target.is_arm_dsp and e is not None and _ext(a) is not None
                and _ext(b) is not None and row_layout(k) is not None
                and (_scalar(k) is not None
                     or ties_impossible(np.array([attrs.get("y_mult", 0)]),
                                        np.array([attrs.get("y_shift", 0)]))))

    def emit(self, k, /, *, a_zp, b_zp, y_zp, y_mult, y_shift, act_min=-128, act_max=127):
        lut = scalar_lut(k, dict(a_zp=a_zp, b_zp=b_zp, y_zp=y_zp, y_mult=y_mult,
                                 y_shift=y_shift, act_min=act_min, act_max=act_max))
        if lut is not None:
            return lut
        inner, moves = row_layout(k)
        rows = k.out.size // inner
        r, i = Var("r"), Var("i")
        acc = Var("acc", Type("int32"))
        j = _scalar(k)
        terms = []
        for n, (x, mv, zp) in enumerate(zip(k.ins[:2], moves, (a_zp, b_zp))):
            if n == j:
                terms.append(Const(int(np.asarray(x.const).ravel()[0]) - int(zp), "int32"))
                continue
            v = Cast(Type("int32"), Var(x.c, Type(x.dtype, pointer=True))[
                (r * inner if mv else Const(0)) + i])
            terms.append(v - int(zp) if zp > 0 else (v + (-int(zp)) if zp else v))
        consts = {n: SimpleNamespace(const=np.array([int(v)], np.int32), size=1, dtype=np.int32,
                                     c=n) for n, v in (("mult", y_mult), ("shift", y_shift))}
        store = store_lines(k, "acc", int(y_zp), int(act_min), int(act_max), consts["mult"],
                            consts["shift"], "0", f"{k.out.c}[r * {inner} + i]")
        body = For(i, inner, [Decl(acc, terms[0] * terms[1]), Raw("\n".join(store))])
        return render_c([Comment(f"{rows} row(s) of {inner}"), For(r, rows, [body])])


@register
class QSoftmaxDsp(Schedule):
    """QSoftmax of int8 rows (c_runtime/kernels/arm_dsp/mtvm_softmax_s8_dsp.h): the maximum
    four bytes an SSUB8/SEL pair, the table read through a pointer offset by the maximum;
    where the portable kernel's 32-bit division applies (the same integers)."""
    op = "QSoftmax"
    domain = "mtvm"
    name = "qsoftmax_s8.dsp_rows"
    family = "arm_dsp"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        from ...ops.quantized.softmax import softmax_fits_32
        x, table = k.ins[:2]
        return (k.target.is_arm_dsp and _ext(x) == "s8" and _ext(k.out) is not None
                and np.dtype(table.dtype) == np.uint32   # uint16 (short rows): the C kernel
                and softmax_fits_32(table, x.shape[-1], int(attrs.get("inv", 0))))

    def emit(self, k, /, *, inv, y_zp, act_min=-128, act_max=127):
        k.library("mtvm_softmax_s8_dsp.h")
        x, table = k.ins[:2]
        d = x.shape[-1]
        r = Var("r")
        row = ExprStmt(call("mtvm_softmax_row_s8_dsp",
                            Var(x.c, Type(x.dtype, pointer=True)) + r * d,
                            Cast(Type("uint8", pointer=True), Var(k.out.c)) + r * d, d,
                            Var(table.c), Const(int(inv), "uint32"), int(y_zp), int(act_min),
                            int(act_max)))
        return render_c([For(r, x.size // d, [row])])
