"""Elementwise operators: unary math and activations, binary arithmetic with
NumPy broadcasting. Each defines `reference` and `scalar`; the one generic
kernel below loops over the output and reads each input through its
broadcast strides, so the same `scalar` serves standalone kernels and fused
epilogues."""
from __future__ import annotations

import re

import numpy as np

from ..codegen.cwriter import (
    Assign,
    Binary as BinaryExpr,
    Const,
    Decl,
    Expr,
    For,
    RawExpr,
    Stmt,
    Type,
    Var,
    call,
    ge,
    gt,
    kernel_dtype,
    kernel_lit,
    lt,
    operand,
    or_,
    param,
    render_c,
    scaled,
    select,
    sum_of,
    tail,
)
from .base import Op, register


def broadcast_strides(in_shape, out_shape) -> list[int]:
    """Element strides of an input viewed with the output's rank (0 where broadcast)."""
    padded = (1,) * (len(out_shape) - len(in_shape)) + tuple(in_shape)
    strides, s = [], 1
    for d in reversed(padded):
        strides.append(0 if d == 1 else s)
        s *= d
    return list(reversed(strides))


def elementwise_body(op, k, attrs) -> list[Stmt]:
    """One loop over the output; each input is read at its broadcast offset."""
    shape = k.out.shape
    i = Var("i")
    offsets, loads, strided_axes = [], [], set()
    for j, b in enumerate(k.ins):
        if b is None:
            continue
        if b.size == k.out.size:   # broadcasting to an equal size means the same layout
            loads.append(param(b)[i])
        elif b.size == 1:
            loads.append(param(b)[0])
        else:
            st = broadcast_strides(b.shape, shape)
            strided_axes.update(d for d, s in enumerate(st) if s)
            offset = Var(f"o{j}")
            offsets.append(Decl(offset, sum_of(scaled(Var(f"c{d}"), s)
                                               for d, s in enumerate(st) if s)))
            loads.append(param(b)[offset])
    # Only the coordinates some input is strided along are computed.
    body = [Decl(Var(f"c{d}"), _coordinate(i, shape, d)) for d in sorted(strided_axes)]
    body += offsets
    v = Var("v", Type(kernel_dtype(k)))
    args = loads if getattr(op, "scalar_exprs", False) else [render_c(e) for e in loads]
    body += [Decl(v, operand(op.scalar(k, args, **attrs))), *tail(k, v, i),
             Assign(param(k.out, output=True)[i], v)]
    return [For(i, k.out.size, body)]


def _coordinate(i: Expr, shape, d: int) -> Expr:
    """Axis-d coordinate of flat index i in a row-major `shape`."""
    inner = int(np.prod(shape[d + 1:], dtype=np.int64))
    c = i / inner if inner > 1 else i
    return c % shape[d] if d else c


def _is_float(k) -> bool:
    return k.ctype in ("float", "double")


def _fn(k, name: str) -> str:
    """libm function for the kernel's float type: expf for float, exp for double."""
    return name + ("f" if k.ctype == "float" else "")


def exp_fn(k) -> str:
    """e^x of the kernel's float type: in float the kernel library's mtvm_exp_f32 (on a
    glibc host branch-free, so that the elementwise loop vectorizes, where libm's expf
    is a call; on a microcontroller cheaper than its libm's), libm's exp in double."""
    if k.ctype == "float":
        k.library("mtvm_exp_f32.h")
        return "mtvm_exp_f32"
    return "exp"


def tanh_fn(k) -> str:
    """tanh of the kernel's float type: in float the kernel library's rational
    mtvm_tanh_f32 (relative error below 4e-7; branch-free, so it vectorizes on a host;
    libm's tanhf took about 100 instructions an element on the M4), libm's in double."""
    if k.ctype == "float":
        k.library("mtvm_activation_f32.h")
        return "mtvm_tanh_f32"
    return "tanh"


# -- unary -------------------------------------------------------------------

class Unary(Op):
    elementwise = True
    anchor = True
    scalar_exprs = True   # scalar() takes and returns cwriter expressions (else C text)
    np_fn = None
    c_fn = None      # "exp" -> expf(x) / exp(x)

    def reference(self, x):
        return self.np_fn(x).astype(x.dtype)

    def scalar(self, k, args):
        return call(_fn(k, self.c_fn), operand(args[0]))


def unary(name, np_fn, c_fn):
    cls = type(name, (Unary,), {"np_fn": staticmethod(np_fn), "c_fn": c_fn})
    return register(name)(cls)


unary("Exp", np.exp, "exp")
unary("Log", np.log, "log")
unary("Sqrt", np.sqrt, "sqrt")


@register("Tanh")
class Tanh(Unary):
    np_fn = staticmethod(np.tanh)

    def scalar(self, k, args):
        return call(tanh_fn(k), operand(args[0]))

unary("Floor", np.floor, "floor")
unary("Ceil", np.ceil, "ceil")
unary("Sin", np.sin, "sin")
unary("Cos", np.cos, "cos")


@register("Relu")
class Relu(Op):
    elementwise = anchor = scalar_exprs = True

    def reference(self, x):
        return np.maximum(x, 0).astype(x.dtype)

    def scalar(self, k, args):
        # NaN fails the comparison and passes through, as np.maximum(NaN, 0); on x86
        # the same one compare-and-mask (or maxps(0, x)) as `x > 0 ? x : 0`.
        x, zero = operand(args[0]), kernel_lit(k, 0)
        return select(lt(x, zero), zero, x)


@register("Neg")
class Neg(Op):
    elementwise = anchor = scalar_exprs = True

    def reference(self, x):
        return np.negative(x)

    def scalar(self, k, args):
        return -operand(args[0])


@register("Abs")
class Abs(Op):
    elementwise = anchor = scalar_exprs = True

    def reference(self, x):
        return np.abs(x)

    def scalar(self, k, args):
        x = operand(args[0])
        return select(lt(x, kernel_lit(k, 0)), -x, x)


@register("Reciprocal")
class Reciprocal(Op):
    elementwise = anchor = scalar_exprs = True

    def reference(self, x):
        return (1 / x).astype(x.dtype)

    def scalar(self, k, args):
        return kernel_lit(k, 1) / operand(args[0])


@register("Sigmoid")
class Sigmoid(Op):
    elementwise = anchor = scalar_exprs = True

    def reference(self, x):
        return (1 / (1 + np.exp(-x))).astype(x.dtype)

    def scalar(self, k, args):
        # e^-x overflows to inf below -88.7, where 1 / (1 + inf) = 0 as with libm.
        one = kernel_lit(k, 1)
        return one / (one + call(exp_fn(k), -operand(args[0])))


@register("LeakyRelu")
class LeakyRelu(Op):
    elementwise = anchor = scalar_exprs = True

    def reference(self, x, *, alpha=0.01):
        return np.where(x >= 0, x, x * np.asarray(alpha, x.dtype)).astype(x.dtype)

    def scalar(self, k, args, *, alpha=0.01):
        x = operand(args[0])
        return select(ge(x, kernel_lit(k, 0)), x, kernel_lit(k, alpha) * x)


@register("HardSigmoid")
class HardSigmoid(Op):
    elementwise = anchor = scalar_exprs = True

    def reference(self, x, *, alpha=0.2, beta=0.5):
        return np.clip(x * np.asarray(alpha, x.dtype) + np.asarray(beta, x.dtype), 0, 1) \
            .astype(x.dtype)

    def scalar(self, k, args, *, alpha=0.2, beta=0.5):
        return _clamp01(k, kernel_lit(k, alpha) * operand(args[0]) + kernel_lit(k, beta))


@register("HardSwish")
class HardSwish(Op):
    elementwise = anchor = scalar_exprs = True

    def reference(self, x):
        return (x * np.clip(x / np.asarray(6, x.dtype) + np.asarray(0.5, x.dtype), 0, 1)) \
            .astype(x.dtype)

    def scalar(self, k, args):
        x = operand(args[0])
        return x * _clamp01(k, x * kernel_lit(k, 1 / 6) + kernel_lit(k, 0.5))


@register("Clip")
class Clip(Op):
    """Canonical form: min/max as attributes (opset >= 11 passes them as inputs)."""
    elementwise = anchor = scalar_exprs = True

    def canonicalize(self, node, graph, opset):
        from .base import move_input_to_attr
        if opset >= 11:
            # Inputs are moved back to front so the indices stay valid.
            move_input_to_attr(graph, node, 2, "max", lambda v: float(v))
            move_input_to_attr(graph, node, 1, "min", lambda v: float(v))

    def reference(self, x, *, min=None, max=None):
        lo = -np.inf if min is None else min
        hi = np.inf if max is None else max
        return np.clip(x, lo, hi).astype(x.dtype)

    def scalar(self, k, args, *, min=None, max=None):
        v = operand(args[0])
        if min is not None:
            v = select(lt(v, kernel_lit(k, min)), kernel_lit(k, min), v)
        if max is not None:
            v = select(gt(v, kernel_lit(k, max)), kernel_lit(k, max), v)
        return v


# -- binary ------------------------------------------------------------------

class Binary(Op):
    elementwise = anchor = scalar_exprs = True
    commutative = False
    np_fn = None
    c_op = None

    def reference(self, a, b):
        return self.np_fn(a, b).astype(np.result_type(a, b))

    def scalar(self, k, args):
        return BinaryExpr(self.c_op, operand(args[0]), operand(args[1]))


def binary(name, np_fn, c_op, commutative):
    cls = type(name, (Binary,), {"np_fn": staticmethod(np_fn), "c_op": c_op,
                                 "commutative": commutative})
    return register(name)(cls)


binary("Add", np.add, "+", True)
binary("Sub", np.subtract, "-", False)
binary("Mul", np.multiply, "*", True)


@register("Div")
class Div(Binary):
    def reference(self, a, b):
        if a.dtype.kind in "iu":
            return np.trunc(a / b).astype(a.dtype)   # C semantics: truncation
        return (a / b).astype(a.dtype)

    def scalar(self, k, args):
        return operand(args[0]) / operand(args[1])


@register("Pow")
class Pow(Binary):
    """x ** 2 and x ** 3 by a constant exponent as products (a tanh-GELU's cube: powf took
    259 instructions an element on the M4, the products 2; within an ulp or two of powf,
    as onnxruntime's own squaring and cubing are); other exponents through powf."""

    def reference(self, a, b):
        return np.power(a, b).astype(a.dtype)

    @staticmethod
    def _exponent(k, e) -> float | None:
        """The exponent when it is one constant value: inlined into a fused tail (a C
        literal), or this kernel's own second input."""
        if isinstance(e, str):
            try:
                return float(e.rstrip("f"))
            except ValueError:
                return None
        b = k.ins[1] if k.node.op == "Pow" and len(k.ins) > 1 else None
        if b is not None and b.const is not None and b.size == 1:
            return float(np.asarray(b.const).ravel()[0])
        return None

    def scalar(self, k, args):
        x = operand(args[0])
        e = self._exponent(k, args[1])
        if k.out.dtype.kind == "f" and e in (2.0, 3.0):
            return x * x if e == 2.0 else x * x * x
        return call(_fn(k, "pow"), x, operand(args[1]))


@register("Max", "Min")
class MinMax(Binary):
    """Variadic: any number of inputs, broadcast together."""
    commutative = True

    def reference(self, *xs):
        fn = np.maximum if self.name == "Max" else np.minimum
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out

    def scalar(self, k, args):
        cmp = ">" if self.name == "Max" else "<"
        v = operand(args[0])
        for b in args[1:]:   # variadic: fold left
            v = nan_select(k, cmp, v, operand(b))
        return v


_NUMBER = re.compile(r"-?(\d[\d.]*(e[-+]?\d+)?f?|HUGE_VALF?)")


def _is_number(e: Expr) -> bool:
    """A constant that is not NaN (C text from a string-based caller: a literal)."""
    if isinstance(e, Const):
        return not np.isnan(e.value)
    return isinstance(e, RawExpr) and bool(_NUMBER.fullmatch(e.text))


def nan_select(k, cmp: str, a: Expr, b: Expr) -> Expr:
    """max (cmp ">") or min ("<") of a and b with NumPy's NaN rule: a NaN in
    either gives NaN. `p cmp q ? p : q` returns q when either is NaN, so a
    constant that is a number goes on the left (one maxps/minps on x86); two
    operands that may be NaN test the left one."""
    pick = gt if cmp == ">" else lt
    if not _is_float(k):
        return select(pick(a, b), a, b)
    if _is_number(b):
        a, b = b, a
    if _is_number(a):
        return select(pick(a, b), a, b)
    return select(or_(pick(a, b), call("isnan", a)), a, b)


def _clamp01(k, v: Expr) -> Expr:
    """v limited to [0, 1] (a NaN stays NaN)."""
    lo, hi = kernel_lit(k, 0), kernel_lit(k, 1)
    return select(lt(v, lo), lo, select(gt(v, hi), hi, v))
