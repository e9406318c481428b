"""Elementwise operators: unary math and activations, binary arithmetic with
NumPy broadcasting. Each defines `reference` and `scalar`; the one generic
kernel below loops over the output and reads each input through its
broadcast strides, so the same `scalar` serves standalone kernels and fused
epilogues."""
from __future__ import annotations

import re

import numpy as np

from .base import Op, register


def broadcast_strides(in_shape, out_shape) -> list[int]:
    """Element strides of an input viewed with the output's rank (0 where broadcast)."""
    padded = (1,) * (len(out_shape) - len(in_shape)) + tuple(in_shape)
    strides, s = [], 1
    for d in reversed(padded):
        strides.append(0 if d == 1 else s)
        s *= d
    return list(reversed(strides))


def emit_elementwise(op, k, attrs) -> str:
    """One loop over the output; each input is read at its broadcast offset."""
    out = k.out
    shape = out.shape
    exprs, index_lines = [], []
    rank = len(shape)
    needs_coords = False
    for j, b in enumerate(k.ins):
        if b is None:
            exprs.append(None)
        elif b.size == out.size:   # broadcasting to an equal size means the same layout
            exprs.append(f"{b.c}[i]")
        elif b.size == 1:
            exprs.append(f"{b.c}[0]")
        else:
            needs_coords = True
            st = broadcast_strides(b.shape, shape)
            terms = [f"c{d} * {s}" for d, s in enumerate(st) if s]
            index_lines.append(f"size_t o{j} = {' + '.join(terms) or '0'};")
            exprs.append(f"{b.c}[o{j}]")
    body = []
    if needs_coords:
        # Only the coordinates some input is strided along are computed.
        used = sorted({int(t.split()[0][1:]) for line in index_lines
                       for t in line.split("=", 1)[1].rstrip(";").split("+") if "*" in t})
        for d in used:
            inner = int(np.prod(shape[d + 1:], dtype=np.int64))
            div = f"i / {inner}" if inner > 1 else "i"
            body.append(f"size_t c{d} = ({div}) % {shape[d]};" if d else f"size_t c{d} = {div};")
        body.extend(index_lines)
    value = op.scalar(k, [e for e in exprs if e is not None], **attrs)
    body.append(f"{k.ctype} v = {value};")
    ep = k.epilogue("v", "i")
    if ep:
        body.append(ep)
    body.append("out0[i] = v;")
    inner = "\n    ".join(body)
    return f"for (size_t i = 0; i < {out.size}; ++i) {{\n    {inner}\n}}"


def _is_float(k) -> bool:
    return k.ctype in ("float", "double")


def _fn(k, name: str) -> str:
    """libm function for the kernel's float type: expf for float, exp for double."""
    return name + ("f" if k.ctype == "float" else "")


# -- unary -------------------------------------------------------------------

class Unary(Op):
    elementwise = True
    anchor = True
    np_fn = None
    c_fn = None      # "exp" -> expf(x) / exp(x)

    def reference(self, x):
        return self.np_fn(x).astype(x.dtype)

    def scalar(self, k, args):
        return f"{_fn(k, self.c_fn)}({args[0]})"


def unary(name, np_fn, c_fn):
    cls = type(name, (Unary,), {"np_fn": staticmethod(np_fn), "c_fn": c_fn})
    return register(name)(cls)


unary("Exp", np.exp, "exp")
unary("Log", np.log, "log")
unary("Sqrt", np.sqrt, "sqrt")
unary("Tanh", np.tanh, "tanh")
unary("Floor", np.floor, "floor")
unary("Ceil", np.ceil, "ceil")
unary("Sin", np.sin, "sin")
unary("Cos", np.cos, "cos")


@register("Relu")
class Relu(Op):
    elementwise = anchor = True

    def reference(self, x):
        return np.maximum(x, 0).astype(x.dtype)

    def scalar(self, k, args):
        # NaN fails the comparison and passes through, as np.maximum(NaN, 0); on x86
        # the same one compare-and-mask (or maxps(0, x)) as `x > 0 ? x : 0`.
        x = args[0]
        return f"({x} < {k.lit(0)} ? {k.lit(0)} : {x})"


@register("Neg")
class Neg(Op):
    elementwise = anchor = True

    def reference(self, x):
        return np.negative(x)

    def scalar(self, k, args):
        return f"(-{args[0]})"


@register("Abs")
class Abs(Op):
    elementwise = anchor = True

    def reference(self, x):
        return np.abs(x)

    def scalar(self, k, args):
        x = args[0]
        return f"({x} < {k.lit(0)} ? -{x} : {x})"


@register("Reciprocal")
class Reciprocal(Op):
    elementwise = anchor = True

    def reference(self, x):
        return (1 / x).astype(x.dtype)

    def scalar(self, k, args):
        return f"({k.lit(1)} / {args[0]})"


@register("Sigmoid")
class Sigmoid(Op):
    elementwise = anchor = True

    def reference(self, x):
        return (1 / (1 + np.exp(-x))).astype(x.dtype)

    def scalar(self, k, args):
        return f"({k.lit(1)} / ({k.lit(1)} + {_fn(k, 'exp')}(-{args[0]})))"


@register("LeakyRelu")
class LeakyRelu(Op):
    elementwise = anchor = True

    def reference(self, x, *, alpha=0.01):
        return np.where(x >= 0, x, x * np.asarray(alpha, x.dtype)).astype(x.dtype)

    def scalar(self, k, args, *, alpha=0.01):
        x = args[0]
        return f"({x} >= {k.lit(0)} ? {x} : {k.lit(alpha)} * {x})"


@register("HardSigmoid")
class HardSigmoid(Op):
    elementwise = anchor = True

    def reference(self, x, *, alpha=0.2, beta=0.5):
        return np.clip(x * np.asarray(alpha, x.dtype) + np.asarray(beta, x.dtype), 0, 1) \
            .astype(x.dtype)

    def scalar(self, k, args, *, alpha=0.2, beta=0.5):
        lo, hi = k.lit(0), k.lit(1)
        v = f"({k.lit(alpha)} * {args[0]} + {k.lit(beta)})"
        return f"({v} < {lo} ? {lo} : ({v} > {hi} ? {hi} : {v}))"


@register("HardSwish")
class HardSwish(Op):
    elementwise = anchor = True

    def reference(self, x):
        return (x * np.clip(x / np.asarray(6, x.dtype) + np.asarray(0.5, x.dtype), 0, 1)) \
            .astype(x.dtype)

    def scalar(self, k, args):
        x = args[0]
        lo, hi = k.lit(0), k.lit(1)
        v = f"({x} * {k.lit(1 / 6)} + {k.lit(0.5)})"
        return f"({x} * ({v} < {lo} ? {lo} : ({v} > {hi} ? {hi} : {v})))"


@register("Clip")
class Clip(Op):
    """Canonical form: min/max as attributes (opset >= 11 passes them as inputs)."""
    elementwise = anchor = True

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
        v = args[0]
        if min is not None:
            v = f"({v} < {k.lit(min)} ? {k.lit(min)} : {v})"
        if max is not None:
            v = f"({v} > {k.lit(max)} ? {k.lit(max)} : {v})"
        return v


# -- binary ------------------------------------------------------------------

class Binary(Op):
    elementwise = anchor = True
    commutative = False
    np_fn = None
    c_op = None

    def reference(self, a, b):
        return self.np_fn(a, b).astype(np.result_type(a, b))

    def scalar(self, k, args):
        return f"({args[0]} {self.c_op} {args[1]})"


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
        return f"({args[0]} / {args[1]})"


@register("Pow")
class Pow(Binary):
    def reference(self, a, b):
        return np.power(a, b).astype(a.dtype)

    def scalar(self, k, args):
        return f"{_fn(k, 'pow')}({args[0]}, {args[1]})"


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
        v = args[0]
        for b in args[1:]:   # variadic: fold left
            v = nan_select(k, cmp, v, b)
        return v


_NUMBER = re.compile(r"-?(\d[\d.]*(e[-+]?\d+)?f?|HUGE_VALF?)")


def nan_select(k, cmp: str, a: str, b: str) -> str:
    """max (cmp ">") or min ("<") of C expressions a and b with NumPy's NaN rule: a
    NaN in either gives NaN. `p cmp q ? p : q` returns q when either is NaN, so a
    constant that is a number goes on the left (one maxps/minps on x86); two
    operands that may be NaN test the left one."""
    if not _is_float(k):
        return f"({a} {cmp} {b} ? {a} : {b})"
    if _NUMBER.fullmatch(b):
        a, b = b, a
    if _NUMBER.fullmatch(a):
        return f"({a} {cmp} {b} ? {a} : {b})"
    return f"(({a} {cmp} {b} || isnan({a})) ? {a} : {b})"
