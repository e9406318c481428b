"""Activation functions: Elu, Selu, Celu, ThresholdedRelu, Softplus, Softsign,
Mish, Swish, Gelu (erf and tanh forms), PRelu, Shrink, SwiGLU and the ai.onnx.ml
Binarizer.

Each is a `scalar` C expression used by the generic elementwise kernel
(broadcasting) and by fused epilogues."""
from __future__ import annotations

import math

import numpy as np

from ..codegen.cwriter import operand
from .base import ElementwiseOp, register
from .elementwise import _fn, exp_fn, tanh_fn
from .math_functions import erf_f32, erf_ref


@register("Elu")
class Elu(ElementwiseOp):
    def reference(self, x, *, alpha=1.0):
        a = np.asarray(alpha, x.dtype)
        return np.where(x >= 0, x, a * (np.exp(x) - 1)).astype(x.dtype)

    def scalar(self, k, args, *, alpha=1.0):
        x = args[0]
        return (f"({x} >= {k.lit(0)} ? {x} : "
                f"{k.lit(alpha)} * ({_fn(k, 'exp')}({x}) - {k.lit(1)}))")


@register("Selu")
class Selu(ElementwiseOp):
    def reference(self, x, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
        a, g = np.asarray(alpha, x.dtype), np.asarray(gamma, x.dtype)
        return np.where(x > 0, g * x, g * (a * np.exp(x) - a)).astype(x.dtype)

    def scalar(self, k, args, *, alpha=1.67326319217681884765625,
               gamma=1.05070102214813232421875):
        x, a, g = args[0], k.lit(alpha), k.lit(gamma)
        return f"({x} > {k.lit(0)} ? {g} * {x} : {g} * ({a} * {_fn(k, 'exp')}({x}) - {a}))"


@register("Celu")
class Celu(ElementwiseOp):
    def reference(self, x, *, alpha=1.0):
        a = np.asarray(alpha, x.dtype)
        return (np.maximum(x, 0) + np.minimum(0, a * (np.exp(x / a) - 1))).astype(x.dtype)

    def scalar(self, k, args, *, alpha=1.0):
        x, a, z = args[0], k.lit(alpha), k.lit(0)
        neg = f"{a} * ({_fn(k, 'exp')}({x} / {a}) - {k.lit(1)})"
        # max(x, 0) + min(0, neg), a NaN passing both (NumPy's maximum and minimum).
        return f"(({x} < {z} ? {z} : {x}) + ({neg} > {z} ? {z} : {neg}))"


@register("ThresholdedRelu")
class ThresholdedRelu(ElementwiseOp):
    def reference(self, x, *, alpha=1.0):
        return np.where(x > alpha, x, 0).astype(x.dtype)

    def scalar(self, k, args, *, alpha=1.0):
        return f"({args[0]} > {k.lit(alpha)} ? {args[0]} : {k.lit(0)})"


@register("Softplus")
class Softplus(ElementwiseOp):
    """log(1 + e^x) as x + log1p(e^-x) for x > 0 (as onnxruntime computes it): e^x alone
    overflows above 88.7 and gave inf where the answer is x."""

    def reference(self, x):
        with np.errstate(over="ignore", invalid="ignore"):
            y = np.where(x > 0, x + np.log1p(np.exp(-np.abs(x))), np.log1p(np.exp(x)))
        return y.astype(x.dtype)

    def scalar(self, k, args):
        x, log1p, exp = args[0], _fn(k, "log1p"), _fn(k, "exp")
        return f"({x} > {k.lit(0)} ? {x} + {log1p}({exp}(-{x})) : {log1p}({exp}({x})))"


@register("Softsign")
class Softsign(ElementwiseOp):
    def reference(self, x):
        return (x / (1 + np.abs(x))).astype(x.dtype)

    def scalar(self, k, args):
        return f"({args[0]} / ({k.lit(1)} + {_fn(k, 'fabs')}({args[0]})))"


@register("Mish")
class Mish(ElementwiseOp):
    def reference(self, x):
        return (x * np.tanh(np.log1p(np.exp(x)))).astype(x.dtype)

    def scalar(self, k, args):
        x = args[0]
        return f"({x} * {_fn(k, 'tanh')}({_fn(k, 'log1p')}({_fn(k, 'exp')}({x}))))"


@register("Swish")
class Swish(ElementwiseOp):
    def reference(self, x, *, alpha=1.0):
        a = np.asarray(alpha, x.dtype)
        return (x / (1 + np.exp(-a * x))).astype(x.dtype)

    def scalar(self, k, args, *, alpha=1.0):
        x = args[0]
        return f"({x} / ({k.lit(1)} + {exp_fn(k)}(-{k.lit(alpha)} * {x})))"


@register("Gelu")
class Gelu(ElementwiseOp):
    def reference(self, x, *, approximate="none"):
        if approximate == "tanh":
            c = math.sqrt(2 / math.pi)
            return (0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x ** 3)))).astype(x.dtype)
        return (0.5 * x * (1 + erf_ref(x / math.sqrt(2)))).astype(x.dtype)

    def scalar(self, k, args, *, approximate="none"):
        x = args[0]
        if approximate == "tanh":
            inner = f"{k.lit(math.sqrt(2 / math.pi))} * ({x} + {k.lit(0.044715)} * {x} * {x} * {x})"
            return f"({k.lit(0.5)} * {x} * ({k.lit(1)} + {tanh_fn(k)}({inner})))"
        scaled = f"({x} * {k.lit(1 / math.sqrt(2))})"
        erf = erf_f32(operand(scaled)) if k.ctype == "float" else f"{_fn(k, 'erf')}{scaled}"
        return f"({k.lit(0.5)} * {x} * ({k.lit(1)} + {erf}))"


@register("PRelu")
class PRelu(ElementwiseOp):
    def canonicalize(self, node, graph, opset):
        # Old exporters give a per-channel slope as [C] for an N-C-... input,
        # which does not broadcast from the right: make it [C, 1, ...].
        x, s = graph.tensors[node.inputs[0]], graph.tensors[node.inputs[1]]
        if s.data is not None and len(s.shape) == 1 and len(x.shape) > 2 and \
                s.shape[0] == x.shape[1] != x.shape[-1]:
            node.inputs[1] = graph.add_const(node.inputs[1] + "_per_channel", s.data.reshape(
                (s.shape[0],) + (1,) * (len(x.shape) - 2)))

    def reference(self, x, slope):
        return np.where(x < 0, x * slope, x).astype(x.dtype)

    def scalar(self, k, args):
        x, s = args
        return f"({x} < {k.lit(0)} ? {x} * {s} : {x})"


@register("Shrink")
class Shrink(ElementwiseOp):
    def reference(self, x, *, bias=0.0, lambd=0.5):
        b = np.asarray(bias).astype(x.dtype)
        return np.where(x < -lambd, x + b, np.where(x > lambd, x - b, 0)).astype(x.dtype)

    def scalar(self, k, args, *, bias=0.0, lambd=0.5):
        x = args[0]
        dt = None if k.ctype in ("float", "double") else np.float64   # no truncation
        lam, nl, b = k.lit(lambd, dt), k.lit(-lambd, dt), k.lit(bias, dt)
        if not k.ctype.startswith("uint"):
            return f"({x} < {nl} ? {x} + {b} : ({x} > {lam} ? {x} - {b} : {k.lit(0)}))"
        return f"({x} > {lam} ? {x} - {b} : {k.lit(0)})"


@register("SwiGLU")
class SwiGLU(ElementwiseOp):
    """swish(a, alpha) * b."""

    def reference(self, a, b, *, alpha=1.0):
        al = np.asarray(alpha, a.dtype)
        return (a / (1 + np.exp(-al * a)) * b).astype(a.dtype)

    def scalar(self, k, args, *, alpha=1.0):
        a, b = args
        return f"({a} / ({k.lit(1)} + {exp_fn(k)}(-{k.lit(alpha)} * {a})) * {b})"


@register("Binarizer", domain="ai.onnx.ml")
class Binarizer(ElementwiseOp):
    def reference(self, x, *, threshold=0.0):
        return (x > threshold).astype(x.dtype)

    def scalar(self, k, args, *, threshold=0.0):
        return f"({args[0]} > {k.lit(threshold)} ? {k.lit(1)} : {k.lit(0)})"
