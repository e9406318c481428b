"""Cast and CastLike, including float16 / bfloat16, and BitCast.

Half types are stored as their 16 bits (uint16_t) and converted with the
small helpers below (round to nearest even, like NumPy and ml_dtypes); every
other operator computes them in float32 (mtvm/passes/widen.py). A Cast to a
half type whose output the widening pass turned into float32 rounds through
the half type, so the values are exactly those of the half-typed graph.
CastLike becomes Cast (the target type is the second input's static dtype).
float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) is stored as its byte and converted
the same way, with the `saturate` attribute. Packed sub-byte types
(int4/uint4/int2/uint2, float4e2m1) are held one element per byte, as
NumPy/ml_dtypes hold them (the host interface), not packed. float8e8m0 and
strings are not supported.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..errors import UnsupportedError
from .base import Op, ctype, register

# Small floats: (bits, exponent bits, mantissa bits, bias, fnuz, has_inf, largest finite,
# code of the largest finite, NaN code). fnuz: no negative zero, the sign bit
# alone is NaN; e4m3fn: S.1111.111 is NaN, no inf; e2m1: no inf, no NaN.
FLOAT8 = {
    "float8_e4m3fn": (8, 4, 3, 7, 0, 0, 448.0, 0x7e, 0x7f),
    "float8_e4m3fnuz": (8, 4, 3, 8, 1, 0, 240.0, 0x7f, 0x80),
    "float8_e5m2": (8, 5, 2, 15, 0, 1, 57344.0, 0x7b, 0x7f),
    "float8_e5m2fnuz": (8, 5, 2, 16, 1, 0, 57344.0, 0x7f, 0x80),
    "float4_e2m1fn": (4, 2, 1, 1, 0, 0, 6.0, 0x7, 0x8),
}
# Sub-byte integers, one element per byte in its low bits (as NumPy/ml_dtypes
# hold them); a conversion wraps to the type's bits, as the ONNX reference does.
SUBBYTE_INT = {"int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}


_TO_F32 = {"float16": "mtvm_f16_to_f32", "bfloat16": "mtvm_bf16_to_f32"}
_FROM_F32 = {"float16": "mtvm_f32_to_f16", "bfloat16": "mtvm_f32_to_bf16"}


def _to_f32(k, x: str, name: str) -> str:
    if name == "float8_e8m0fnu":
        k.library("mtvm_e8m0.h")
        return f"mtvm_e8m0_to_f32({x})"
    if name in FLOAT8:
        nb, eb, mb, bias, fnuz = FLOAT8[name][:5]
        k.library("mtvm_float8.h")
        return f"mtvm_f8_to_f32({x}, {nb}, {eb}, {mb}, {bias}, {fnuz})"
    k.library("mtvm_half.h")
    return f"{_TO_F32[name]}({x})"


def _from_f32(k, x: str, name: str, saturate: int, round_mode: str = "up") -> str:
    if name == "float8_e8m0fnu":
        k.library("mtvm_e8m0.h")
        fn = "mtvm_f32_to_e8m0"
        rm = {"up": 0, "down": 1, "nearest": 2}.get(round_mode or "up", 0)
        return f"{fn}((float){x}, {rm}, {1 if saturate else 0})"
    if name in FLOAT8:
        nb, _, mb, bias, fnuz, has_inf, mx, max_code, nan_code = FLOAT8[name]
        if nb == 4:
            saturate = 1
        k.library("mtvm_float8.h")
        return (f"mtvm_f32_to_f8((float){x}, {nb}, {mb}, {bias}, {fnuz}, {has_inf}, "
                f"{mx!r}f, {1 if saturate else 0}, {max_code:#x}u, {nan_code:#x}u)")
    k.library("mtvm_half.h")
    return f"{_FROM_F32[name]}((float){x})"


SMALL_FLOATS = set(_TO_F32) | set(FLOAT8) | {"float8_e8m0fnu"}


def np_dtype(to) -> np.dtype:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(to)))
    except Exception as e:  # noqa: BLE001
        raise UnsupportedError(f"Cast to ONNX type {to} is not supported") from e


def convert_expr(k, x: str, src: np.dtype, dst: np.dtype, via: np.dtype | None = None,
                 saturate: int = 1, round_mode: str = "up") -> str:
    """C expression converting value `x` stored as `src` into `dst` (rounding
    through the small float type `via` on the way, when given)."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst and via is None:
        return x
    if src.name in SMALL_FLOATS:
        x = _to_f32(k, x, src.name)
        src = np.dtype(np.float32)
    if src.name in SUBBYTE_INT:
        bits, signed = SUBBYTE_INT[src.name]
        mask, half = (1 << bits) - 1, 1 << (bits - 1)
        x = (f"((((int32_t){x} & {mask}) ^ {half}) - {half})" if signed else
             f"((int32_t){x} & {mask})")
        src = np.dtype(np.int32)
    if via is not None and via.name in SMALL_FLOATS:
        x = _to_f32(k, _from_f32(k, x, via.name, saturate, round_mode), via.name)
        src = np.dtype(np.float32)
    if dst.name in SMALL_FLOATS:
        return _from_f32(k, x, dst.name, saturate, round_mode)
    if dst.name in SUBBYTE_INT:
        bits, _ = SUBBYTE_INT[dst.name]
        return f"({ctype(dst)})((int64_t)({x}) & {(1 << bits) - 1})"
    if dst == np.bool_:
        return f"(uint8_t)({x} != 0)"
    if src == dst:
        return x
    return f"({ctype(dst)}){x}"


@register("Cast", "CastLike")
class Cast(Op):
    sees_small_floats = True      # converts them itself (every other op sees float32)
    def canonicalize(self, node, graph, opset):
        if node.op == "CastLike":
            like = graph.tensors[node.inputs[1]]
            node.op = "Cast"
            node.attrs["to"] = helper.np_dtype_to_tensor_dtype(np.dtype(like.dtype))
            node.inputs = node.inputs[:1]

    def check(self, node, inputs):
        src = np.dtype(inputs[0].dtype)
        dst = np_dtype(node.attrs.get("to"))
        for dt in (src, dst):
            ctype(dt)     # raises for string, float8, int4...

    def reference(self, x, *, to, saturate=1, round_mode=None):
        dst = np_dtype(to)
        with np.errstate(all="ignore"):
            if dst.name in SUBBYTE_INT:
                bits, signed = SUBBYTE_INT[dst.name]
                v = np.asarray(x).astype(np.int64) & ((1 << bits) - 1)
                if signed:
                    v = (v ^ (1 << (bits - 1))) - (1 << (bits - 1))
                return v.astype(dst)
            if dst.name in FLOAT8:
                from onnx import numpy_helper  # noqa: F401  (ml_dtypes registered)
                x32 = np.asarray(x).astype(np.float32)
                if saturate:
                    mx = FLOAT8[dst.name][6]
                    x32 = np.where(np.isnan(x32), x32, np.clip(x32, -mx, mx))
                return x32.astype(dst)
            return np.asarray(x).astype(dst)

    def emit(self, k, *, to, saturate=1, round_mode=None):
        src, dst = k.ins[0].dtype, k.out.dtype
        want = np_dtype(to)
        via = want if want.name in SMALL_FLOATS and dst != want else None
        expr = convert_expr(k, "in0[i]", src, dst, via, saturate, round_mode)
        return (f"for (size_t i = 0; i < {k.out.size}; ++i) {{\n"
                f"    out0[i] = {expr};\n}}")


@register("BitCast")
class BitCast(Op):
    def reference(self, x, *, to):
        from .cast import np_dtype
        dt = np_dtype(to)
        if dt.itemsize != x.dtype.itemsize:
            raise UnsupportedError("BitCast between types of different widths")
        return np.array(x, copy=True).view(dt)

    def emit(self, k, *, to):
        return f"memcpy(out0, in0, {k.out.size * k.out.dtype.itemsize});"
