"""Elementwise math functions beyond the arithmetic of elementwise.py:
trigonometric and hyperbolic functions, Erf, Sign, Round, Mod and the variadic
Sum/Mean (activations are in activations.py).

Every one is a `scalar` C expression used by the generic elementwise kernel
(broadcasting) and by fused epilogues.
"""
from __future__ import annotations

import math

import numpy as np

from .base import ElementwiseOp, register
from .elementwise import _fn, unary


def erf_ref(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


unary("Acos", np.arccos, "acos")
unary("Acosh", np.arccosh, "acosh")
unary("Asin", np.arcsin, "asin")
unary("Asinh", np.arcsinh, "asinh")
unary("Atan", np.arctan, "atan")
unary("Atanh", np.arctanh, "atanh")
unary("Cosh", np.cosh, "cosh")
unary("Sinh", np.sinh, "sinh")
unary("Tan", np.tan, "tan")
unary("Erf", erf_ref, "erf")


@register("Sign")
class Sign(ElementwiseOp):
    def reference(self, x):
        return np.sign(x).astype(x.dtype)

    def scalar(self, k, args):
        x, z = args[0], k.lit(0)
        if k.ctype.startswith("uint"):
            return f"({x} > {z} ? {k.lit(1)} : {z})"
        # Neither > 0 nor < 0: 0 or NaN, returned as it is (np.sign(NaN) is NaN).
        return f"({x} > {z} ? {k.lit(1)} : ({x} < {z} ? {k.lit(-1)} : {x}))"


@register("Round")
class Round(ElementwiseOp):
    """Half to even: rint under the default rounding mode."""

    def reference(self, x):
        return np.round(x).astype(x.dtype)

    def scalar(self, k, args):
        return f"{_fn(k, 'rint')}({args[0]})"


@register("Mod")
class Mod(ElementwiseOp):
    def reference(self, a, b, *, fmod=0):
        if fmod:
            return np.fmod(a, b).astype(a.dtype)
        return np.mod(a, b).astype(a.dtype)

    def scalar(self, k, args, *, fmod=0):
        a, b = args
        if k.ctype in ("float", "double"):
            if fmod:
                return f"{_fn(k, 'fmod')}({a}, {b})"
            t, f = k.ctype, _fn(k, "")
            name = k.helper(f"mtvm_pymod{f}", f"""static inline {t} mtvm_pymod{f}({t} a, {t} b)
{{
    /* NumPy's mod: the result takes the divisor's sign (zero too). */
    {t} r = fmod{f}(a, b);
    if (r == 0) {{
        return copysign{f}(0, b);
    }}
    return ((r < 0) != (b < 0)) ? r + b : r;
}}""")
            return f"{name}({a}, {b})"
        if fmod or k.ctype.startswith("uint"):
            return f"({k.ctype})({a} % {b})"
        # Python-style: the result takes the divisor's sign.
        r = f"({k.ctype})({a} % {b})"
        return f"(({r} != 0 && (({r} < 0) != ({b} < 0))) ? ({k.ctype})({r} + {b}) : {r})"


@register("Sum", "Mean")
class SumMean(ElementwiseOp):
    commutative = True

    def reference(self, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        if self.name == "Mean":
            out = out / np.asarray(len(xs), out.dtype)
        return np.asarray(out).astype(xs[0].dtype)

    def scalar(self, k, args):
        s = " + ".join(args)
        if self.name == "Mean":
            return f"(({s}) / {k.lit(len(args))})"
        return f"({s})"


# -- activations ----------------------------------------------------------------------------


