"""Elementwise math functions beyond the arithmetic of elementwise.py:
trigonometric and hyperbolic functions, Erf, Sign, Round, Mod and the variadic
Sum/Mean (activations are in activations.py).

Every one is a `scalar` C expression used by the generic elementwise kernel
(broadcasting) and by fused epilogues.
"""
from __future__ import annotations

import math

import numpy as np

from ..codegen.cwriter import Const, Expr, call, gt, lt, operand, select
from .base import ElementwiseOp, register
from .elementwise import Unary, _fn, unary


def erf_ref(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


# erf(x) = x P(x^2) / Q(x^2) (the rational of Eigen's generic_fast_erf_float on
# [-4, 4], degrees 12 and 8 in x, both negated; highest degree first) for |x| <= 3.6,
# +-1 beyond: the rational's few ulps of rounding reach above 1 from x = 3.604 on
# (3.650 with fused multiply-adds: every float checked), and 1 - erf(3.6) = 3.6e-7.
ERF_F32_LIMIT = 3.6
ERF_F32_P = (2.72614225801306e-10, -2.77068142495902e-08, 2.10102402082508e-06,
             5.69250639462346e-05, 7.34990630326855e-04, 2.95459980854025e-03,
             1.60960333262415e-02)
ERF_F32_Q = (1.45660718464996e-05, 2.13374055278905e-04, 1.68282697438203e-03,
             7.37332916720468e-03, 1.42647390514189e-02)


def _horner(coefficients, x: Expr) -> Expr:
    p = Const(coefficients[0], "float32")
    for c in coefficients[1:]:
        p = p * x + Const(c, "float32")
    return p


def erf_f32(x: Expr) -> Expr:
    """erf of a float expression without libm: relative error below 5e-7 (6e-8 is
    float's half ulp at 1; tests/kernels/test_exp_erf_f32.py sweeps the floats), NaN
    stays NaN, erf(-0) = -0, |x| > 3.6 and +-inf give exactly +-1, |erf| <= 1.
    Arithmetic and selects only: gcc vectorizes a loop over it (with AVX-512's masks;
    for AVX2 or SSE only without -ftrapping-math, which the generated source turns off:
    c_runtime/kernels/generic/mtvm_no_trapping_math.h), and on a Cortex-M4F it is
    about 30 instructions where newlib's erff is a call. An expression rather than a
    kernel-library function because the LLVM backend lowers the same expressions and
    knows no call but libm's and mtvm_exp_f32.
    x * (P/Q), P/Q first, so that subnormal x keep their precision; for huge |x|,
    x^2 = inf makes P/Q NaN in the arm the selects do not take."""
    x2 = x * x
    rational = x * (_horner(ERF_F32_P, x2) / _horner(ERF_F32_Q, x2))
    one, limit = Const(1, "float32"), Const(ERF_F32_LIMIT, "float32")
    return select(gt(x, limit), one, select(lt(x, -limit), -one, rational))


@register("Erf")
class Erf(Unary):
    """float: erf_f32's expression; double: libm's erf."""
    np_fn = staticmethod(erf_ref)
    c_fn = "erf"

    def scalar(self, k, args):
        if k.ctype == "float":
            return erf_f32(operand(args[0]))
        return call(_fn(k, "erf"), operand(args[0]))


unary("Acos", np.arccos, "acos")
unary("Acosh", np.arccosh, "acosh")
unary("Asin", np.arcsin, "asin")
unary("Asinh", np.arcsinh, "asinh")
unary("Atan", np.arctan, "atan")
unary("Atanh", np.arctanh, "atanh")
unary("Cosh", np.cosh, "cosh")
unary("Sinh", np.sinh, "sinh")
unary("Tan", np.tan, "tan")


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


