"""Comparisons, logic and bitwise operators, Where, IsNaN/IsInf, BitShift.

All are elementwise with NumPy broadcasting (the generic kernel of
elementwise.py); bool tensors are uint8_t holding 0 or 1.
"""
from __future__ import annotations

import numpy as np

from .base import ElementwiseOp, register


def _in_dtype(k, j=0) -> np.dtype:
    b = k.ins[j] if j < len(k.ins) and k.ins[j] is not None else None
    return b.dtype if b is not None else np.dtype(np.float32)


# -- comparisons: output bool -------------------------------------------------------------

_CMP = {"Equal": ("==", np.equal), "Greater": (">", np.greater), "Less": ("<", np.less),
        "GreaterOrEqual": (">=", np.greater_equal), "LessOrEqual": ("<=", np.less_equal)}


@register(*_CMP)
class Compare(ElementwiseOp):
    anchor = False

    def reference(self, a, b):
        return _CMP[self.name][1](a, b)

    def scalar(self, k, args):
        return f"({args[0]} {_CMP[self.name][0]} {args[1]})"


# -- logic on bool ---------------------------------------------------------------------------

_LOGIC = {"And": ("&&", np.logical_and), "Or": ("||", np.logical_or),
          "Xor": ("!=", np.logical_xor)}


@register(*_LOGIC)
class Logic(ElementwiseOp):
    commutative = True

    def reference(self, a, b):
        return _LOGIC[self.name][1](a, b)

    def scalar(self, k, args):
        return f"({args[0]} {_LOGIC[self.name][0]} {args[1]})"


@register("Not")
class Not(ElementwiseOp):
    def reference(self, x):
        return np.logical_not(x)

    def scalar(self, k, args):
        return f"(!{args[0]})"


# -- bitwise on integers ---------------------------------------------------------------------

_BITS = {"BitwiseAnd": ("&", np.bitwise_and), "BitwiseOr": ("|", np.bitwise_or),
         "BitwiseXor": ("^", np.bitwise_xor)}


@register(*_BITS)
class Bitwise(ElementwiseOp):
    commutative = True

    def reference(self, a, b):
        return _BITS[self.name][1](a, b)

    def scalar(self, k, args):
        return f"({k.ctype})({args[0]} {_BITS[self.name][0]} {args[1]})"


@register("BitwiseNot")
class BitwiseNot(ElementwiseOp):
    def reference(self, x):
        return np.invert(x)

    def scalar(self, k, args):
        return f"({k.ctype})(~{args[0]})"


@register("BitShift")
class BitShift(ElementwiseOp):
    def reference(self, x, y, *, direction):
        bits = x.dtype.itemsize * 8
        u = np.dtype(f"uint{bits}")
        y = np.asarray(y).astype(x.dtype).view(u)
        ok = y < bits
        ys = np.where(ok, y, 0)
        if direction == "LEFT":
            out = np.left_shift(x.view(u), ys.astype(u)).view(x.dtype)
            return np.where(ok, out, 0).astype(x.dtype)
        out = np.right_shift(x, ys.astype(x.dtype))
        return np.where(ok, out, np.where(x < 0, -1, 0)).astype(x.dtype)

    def scalar(self, k, args, *, direction):
        x, y, t = args[0], args[1], k.ctype
        bits = np.dtype(_in_dtype(k)).itemsize * 8
        u = t if t.startswith("uint") else "u" + t
        # The shift count is taken as unsigned; shifting by the width or more
        # (undefined in C) gives 0, or -1 for a negative value shifted right.
        big = f"((uint64_t)(u{t})({y}) >= {bits}u)" if not t.startswith("uint") else \
            f"((uint64_t)({y}) >= {bits}u)"
        if direction == "LEFT":
            return f"({big} ? ({t})0 : ({t})(({u})({x}) << {y}))"
        full = f"({t})({x} < 0 ? -1 : 0)" if not t.startswith("uint") else f"({t})0"
        return f"({big} ? {full} : ({t})({x} >> {y}))"


# -- selection and classification ------------------------------------------------------------

@register("Where")
class Where(ElementwiseOp):
    anchor = False

    def reference(self, c, x, y):
        return np.where(c, x, y).astype(np.result_type(x, y))

    def scalar(self, k, args):
        return f"({args[0]} ? {args[1]} : {args[2]})"


@register("IsNaN")
class IsNaN(ElementwiseOp):
    anchor = False

    def reference(self, x):
        return np.isnan(x)

    def scalar(self, k, args):
        return f"(uint8_t)isnan({args[0]})"


@register("IsInf")
class IsInf(ElementwiseOp):
    anchor = False

    def reference(self, x, *, detect_negative=1, detect_positive=1):
        return (np.isinf(x) & (((x > 0) & bool(detect_positive))
                               | ((x < 0) & bool(detect_negative))))

    def scalar(self, k, args, *, detect_negative=1, detect_positive=1):
        x = args[0]
        if detect_negative and detect_positive:
            return f"(uint8_t)isinf({x})"
        if not detect_negative and not detect_positive:
            return "(uint8_t)0"
        sign = ">" if detect_positive else "<"
        return f"(uint8_t)(isinf({x}) && {x} {sign} 0)"
