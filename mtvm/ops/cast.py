"""Cast and CastLike, including float16 / bfloat16.

Half types are stored as their 16 bits (uint16_t) and converted with the
small helpers below (round to nearest even, like NumPy and ml_dtypes); every
other operator computes them in float32 (mtvm/passes/widen.py). A Cast to a
half type whose output the widening pass turned into float32 rounds through
the half type, so the values are exactly those of the half-typed graph.
CastLike becomes Cast (the target type is the second input's static dtype).
float8, int4/uint4 and string targets are not supported.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..errors import UnsupportedError
from .base import Op, ctype, register

HALF_HELPERS = {
    "mtvm_f16_to_f32": r"""static inline float mtvm_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t man = (uint32_t)h & 0x3ffu;
    uint32_t x;
    float f;
    if (exp == 0x1fu) {
        x = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0u) {
        x = sign | ((exp + 112u) << 23) | (man << 13);
    } else {
        f = (float)man * 5.9604644775390625e-8f;   /* subnormal: man * 2^-24 */
        return sign ? -f : f;
    }
    memcpy(&f, &x, sizeof f);
    return f;
}""",
    "mtvm_f32_to_f16": r"""static inline uint16_t mtvm_f32_to_f16(float f)
{
    uint32_t x, sign, exp, man, h, rem;
    int32_t e;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000u;
    exp = (x >> 23) & 0xffu;
    man = x & 0x7fffffu;
    if (exp == 0xffu) {
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    }
    e = (int32_t)exp - 112;
    if (e >= 31) {
        return (uint16_t)(sign | 0x7c00u);
    }
    if (e <= 0) {                 /* subnormal half (or zero) */
        uint32_t shift, mid;
        if (e < -10) {
            return (uint16_t)sign;
        }
        man |= 0x800000u;
        shift = (uint32_t)(14 - e);
        h = man >> shift;
        rem = man & ((1u << shift) - 1u);
        mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (h & 1u))) {
            h++;
        }
        return (uint16_t)(sign | h);
    }
    h = ((uint32_t)e << 10) | (man >> 13);
    rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
        h++;                      /* a carry into the exponent is still right */
    }
    return (uint16_t)(sign | h);
}""",
    "mtvm_bf16_to_f32": r"""static inline float mtvm_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}""",
    "mtvm_f32_to_bf16": r"""static inline uint16_t mtvm_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u);   /* quiet NaN */
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}""",
}

_TO_F32 = {"float16": "mtvm_f16_to_f32", "bfloat16": "mtvm_bf16_to_f32"}
_FROM_F32 = {"float16": "mtvm_f32_to_f16", "bfloat16": "mtvm_f32_to_bf16"}


def np_dtype(to) -> np.dtype:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(to)))
    except Exception as e:  # noqa: BLE001
        raise UnsupportedError(f"Cast to ONNX type {to} is not supported") from e


def convert_expr(k, x: str, src: np.dtype, dst: np.dtype, via: np.dtype | None = None) -> str:
    """C expression converting value `x` stored as `src` into `dst` (rounding
    through the half type `via` on the way, when given)."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst and via is None:
        return x
    if src.name in _TO_F32:
        x = f"{k.helper(_TO_F32[src.name], HALF_HELPERS[_TO_F32[src.name]])}({x})"
        src = np.dtype(np.float32)
    if via is not None and via.name in _FROM_F32:
        to, back = _FROM_F32[via.name], _TO_F32[via.name]
        k.helper(to, HALF_HELPERS[to])
        k.helper(back, HALF_HELPERS[back])
        x = f"{back}({to}((float){x}))"
        src = np.dtype(np.float32)
    if dst.name in _FROM_F32:
        fn = k.helper(_FROM_F32[dst.name], HALF_HELPERS[_FROM_F32[dst.name]])
        return f"{fn}((float){x})"
    if dst == np.bool_:
        return f"(uint8_t)({x} != 0)"
    if src == np.bool_ or src == dst:
        return f"({ctype(dst)}){x}" if src != dst else x
    return f"({ctype(dst)}){x}"


@register("Cast", "CastLike")
class Cast(Op):
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
            return np.asarray(x).astype(dst)

    def emit(self, k, *, to, saturate=1, round_mode=None):
        src, dst = k.ins[0].dtype, k.out.dtype
        want = np_dtype(to)
        via = want if want.name in _FROM_F32 and dst != want else None
        expr = convert_expr(k, "in0[i]", src, dst, via)
        return (f"for (size_t i = 0; i < {k.out.size}; ++i) {{\n"
                f"    out0[i] = {expr};\n}}")
