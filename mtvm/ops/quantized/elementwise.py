"""Quantized elementwise ops: QAdd and QMul (broadcasting, each operand with its
own scale), QAffine (a per-channel integer scale and offset, then a requantization:
a folded BatchNormalization) and QLut (a 256-entry table:
any unary function of an int8 value)."""
from __future__ import annotations

import math

import numpy as np

from ...codegen.cwriter import Comment, For, Raw, Var, render_c
from ..base import register
from .common import (
    DOMAIN,
    IntOp,
    finish,
    indent_c,
    minus,
    per_channel,
    plus,
    requantize_helper,
    round_shift,
    store_lines,
)


def scalar_operand(k) -> int | None:
    """The index of an input that is a one-element constant (the other one full size)."""
    for j, b in enumerate(k.ins[:2]):
        if b.const is not None and b.size == 1 and k.ins[1 - j].size == k.out.size:
            return j
    return None


def row_layout(k) -> tuple[int, list[bool]] | None:
    """(elements a row, per input whether it advances by a row) where each input is
    contiguous over the output's trailing dims and either full or broadcast over the
    leading ones (a one-element constant: rows of the whole output); None otherwise (or
    rows shorter than 4)."""
    from ..elementwise import broadcast_strides
    shape = tuple(k.out.shape)
    if scalar_operand(k) is not None:
        return k.out.size, [True, True]
    full = broadcast_strides(shape, shape)
    strides = [broadcast_strides(b.shape, shape) for b in k.ins[:2]]
    t = len(shape)
    while t > 0 and all(s[t - 1] == full[t - 1] for s in strides):
        t -= 1
    inner = int(np.prod(shape[t:], dtype=np.int64))
    moves = []
    for s in strides:
        if s[:t] == full[:t]:
            moves.append(True)
        elif not any(s[:t]):
            moves.append(False)
        else:
            return None
    return (inner, moves) if inner >= 4 else None


def binary_loop(k, body) -> str:
    """The loop of a broadcasting binary op: body(ea, eb, out) -> C lines, with the C
    expressions of both inputs and of the output element. Over rows (row_layout) where
    it applies: no per-element index arithmetic (a division and a modulo per broadcast
    input had made kwt_tiny_int8's bias Add 2 ns an element), so the inner loop
    vectorizes; else one flat loop, each input at its broadcast offset."""
    layout = row_layout(k)
    if layout is None:
        la, ea = _broadcast_index(k.ins[0], k.out.shape)
        lb, eb = _broadcast_index(k.ins[1], k.out.shape)
        return render_c(For(Var("i"), k.out.size, [Raw("\n".join(la + lb + body(ea, eb,
                                                                                "out0[i]")))]))
    inner, moves = layout
    rows = k.out.size // inner
    at = "r * %d + j" % inner if rows > 1 else "j"
    ex = [f"{b.c}[0]" if b.size == 1 else f"{b.c}[{at if mv else 'j'}]"
          for b, mv in zip(k.ins[:2], moves)]
    loop = For(Var("j"), inner, [Raw("\n".join(body(ex[0], ex[1], f"out0[{at}]")))])
    return render_c(loop if rows == 1 else
                    [Comment(f"rows of {inner}"), For(Var("r"), rows, [loop])])


def _broadcast_index(b, out_shape) -> tuple[list[str], str]:
    """(C lines computing the offset, C expression) of input `b` at flat output i."""
    from ..elementwise import broadcast_strides
    size = int(np.prod(out_shape, dtype=np.int64))
    if b.size == size:
        return [], f"{b.c}[i]"
    if b.size == 1:
        return [], f"{b.c}[0]"
    st = broadcast_strides(b.shape, out_shape)
    terms = []
    for d, s in enumerate(st):
        if s:
            inner = int(np.prod(out_shape[d + 1:], dtype=np.int64))
            coord = f"(i / {inner})" if inner > 1 else "i"
            terms.append(f"({coord} % {out_shape[d]}) * {s}")
    return [f"size_t o_{b.c} = {' + '.join(terms)};"], f"{b.c}[o_{b.c}]"


def add_multipliers(ra: float, rb: float) -> tuple[int, int, int]:
    """ra ~= ia / 2^n and rb ~= ib / 2^n with the larger of ia, ib in [2^30, 2^31)."""
    top = max(ra, rb)
    n = min(62, max(1, 30 - math.frexp(top)[1] + 1)) if top > 0 else 31
    ia, ib = int(round(ra * 2.0 ** n)), int(round(rb * 2.0 ** n))
    if max(ia, ib) >= 1 << 31:
        n -= 1
        ia, ib = int(round(ra * 2.0 ** n)), int(round(rb * 2.0 ** n))
    return ia, ib, n


@register("QAdd", domain=DOMAIN)
class QAdd(IntOp):
    """y = zy + round(((a - za) * ia + (b - zb) * ib) / 2^n), ia / 2^n = sa / sy and
    ib / 2^n = sb / sy: both rescales on one 64-bit accumulator, one rounding."""
    elementwise_inplace = True

    def reference(self, a, b, *, a_zp, b_zp, y_zp, a_mult, b_mult, shift, act_min=-128,
                  act_max=127):
        acc = (a.astype(np.int64) - a_zp) * a_mult + (b.astype(np.int64) - b_zp) * b_mult
        out_dtype = np.int8 if act_min < 0 else np.uint8
        return np.clip(round_shift(acc, shift) + y_zp, act_min, act_max).astype(out_dtype)

    def emit(self, k, *, a_zp, b_zp, y_zp, a_mult, b_mult, shift, act_min=-128, act_max=127):
        k.library("mtvm_requantize.h")
        return binary_loop(k, lambda ea, eb, y: [
            f"int64_t acc = (int64_t)((int32_t){ea}{minus(a_zp)}) * {a_mult} +",
            f"              (int64_t)((int32_t){eb}{minus(b_zp)}) * {b_mult};",
            f"int32_t v = (int32_t)mtvm_round_shift(acc, {shift}){plus(y_zp)};",
            f"v = v < {act_min} ? {act_min} : (v > {act_max} ? {act_max} : v);",
            f"{y} = ({k.out.ctype})v;"])


@register("QMul", domain=DOMAIN)
class QMul(IntOp):
    """y = zy + rq((a - za) * (b - zb), sa * sb / sy)."""
    elementwise_inplace = True

    def reference(self, a, b, *, a_zp, b_zp, y_zp, y_mult, y_shift, act_min=-128,
                  act_max=127):
        acc = (a.astype(np.int64) - a_zp) * (b.astype(np.int64) - b_zp)
        out_dtype = np.int8 if act_min < 0 else np.uint8
        return finish(acc, y_mult, y_shift, y_zp, act_min, act_max, out_dtype)

    def emit(self, k, *, a_zp, b_zp, y_zp, y_mult, y_shift, act_min=-128, act_max=127):
        rq = requantize_helper(k)
        return binary_loop(k, lambda ea, eb, y: [
            f"int32_t acc = ((int32_t){ea}{minus(a_zp)}) * ((int32_t){eb}{minus(b_zp)});",
            f"acc = {rq}(acc, {y_mult}, {y_shift}){plus(y_zp)};",
            f"acc = acc < {act_min} ? {act_min} : (acc > {act_max} ? {act_max} : acc);",
            f"{y} = ({k.out.ctype})acc;"])


@register("QAffine", domain=DOMAIN)
class QAffine(IntOp):
    """Per-channel y = zy + rq((x - zx) * scale[c] + offset[c], mult[c]): a
    BatchNormalization or a Mul/Add by constants between quantized tensors, or a
    plain requantization (scale 1, offset 0). inputs: x, scale int32 [C|1],
    offset int32 [C|1], mult [C|1], shift [C|1]; `axis` is the channel axis."""
    elementwise_inplace = True

    def reference(self, x, scale, offset, mult, shift, *, axis=1, x_zp=0, y_zp=0,
                  act_min=-128, act_max=127):
        shape = [1] * x.ndim
        if np.size(scale) > 1:
            shape[axis] = -1

        def chan(v):
            return np.asarray(v, np.int64).reshape(shape if np.size(v) > 1 else ())
        acc = (x.astype(np.int64) - x_zp) * chan(scale) + chan(offset)
        out_dtype = np.int8 if act_min < 0 else np.uint8
        return finish(acc, chan(mult), chan(shift), y_zp, act_min, act_max, out_dtype)

    def emit(self, k, *, axis=1, x_zp=0, y_zp=0, act_min=-128, act_max=127):
        x, scale, offset, mult, shift = k.ins[:5]
        lines = [f"for (size_t i = 0; i < {x.size}; ++i) {{"]
        ch = "0"
        if max(scale.size, offset.size, mult.size, shift.size) > 1:
            inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
            coord = f"i / {inner}" if inner > 1 else "i"
            lines.append(f"    size_t c = ({coord}) % {x.shape[axis]};")
            ch = "c"
        lines.append(f"    int32_t acc = ((int32_t){x.c}[i]{minus(x_zp)}) * "
                     f"{per_channel(scale, ch)} + {per_channel(offset, ch)};")
        lines += indent_c(store_lines(k, "acc", y_zp, act_min, act_max, mult, shift, ch,
                                     "out0[i]"))
        lines.append("}")
        return "\n".join(lines)


@register("QLut", domain=DOMAIN)
class QLut(IntOp):
    """y = table[x - qmin]: any per-tensor unary function of an 8-bit tensor
    (Sigmoid, Tanh, LeakyRelu, ...), tabulated at compile time."""
    elementwise_inplace = True

    def reference(self, x, table):
        lo = -128 if x.dtype == np.int8 else 0
        return table[x.astype(np.int64) - lo]

    def emit(self, k):
        x, table = k.ins[:2]
        off = " + 128" if x.dtype == np.int8 else ""
        return (f"for (size_t i = 0; i < {x.size}; ++i) {{\n"
                f"    out0[i] = {table.c}[(int32_t){x.c}[i]{off}];\n}}")
