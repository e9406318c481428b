"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.

    QuantizeLinear    y = saturate(round_half_even(x / scale) + zero_point)
    DequantizeLinear  y = (x - zero_point) * scale
    DynamicQuantizeLinear: uint8, scale and zero point from the range [min(x,0), max(x,0)]

Per-tensor (scalar or one-element scale) and per-axis (1-D scale along `axis`),
int8/uint8/int16/uint16 (int32 too for DequantizeLinear, as biases are
stored). Opset 10..21 semantics: `axis` from 13, `saturate` (float8 only, so
ignored here) from 19, `block_size` and `output_dtype` from 21 (blocked
quantization is not supported).

These are the only kernels of a quantized model that compute in float: at the
model's float edges and around an operator that has no integer kernel (see
mtvm/passes/quantize.py). The division by the scale is done as in
onnxruntime (float32 x / scale, then nearest-even via rintf) so the results
match bit for bit.
"""
from __future__ import annotations

import re

import numpy as np

from ..codegen.cwriter import (VOID, Assign, Binary, Cast, Comment, Const, Decl, Expr, ExprStmt,
                               For, If, RawExpr, Type, Var, call, eq, ge, gt, index_type, lt, not_,
                               param, render_c, select)
from ..errors import ShapeError, UnsupportedError
from .base import Op, c_literal, normalize_axis, register

F, CF, I32 = Type("float32"), Type("float32", const=True), Type("int32")


def _f(value) -> Const:
    """A float constant."""
    return Const(float(value), "float32")

# Round to nearest (even, in the FPSCR's default mode) with VCVTR on a Cortex-M
# single-precision FPU; MTVM_CVTR says the fast QuantizeLinear loop may use it.
_SAT = {"int8": "__ssat", "uint8": "__usat", "int16": "__ssat", "uint16": "__usat"}


def sat_bits(name: str) -> int:
    return 8 if name.endswith("int8") else 16

QTYPES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
          "uint16": (0, 65535), "int32": (-(1 << 31), (1 << 31) - 1),
          # Sub-byte types, one element per byte in its low bits (ml_dtypes'
          # layout; see mtvm/ops/cast.py): stored masked, read sign-extended.
          "int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}
SUBBYTE_BITS = {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2}


def _load(x: str, dtype) -> str:
    """C expression of a quantized element as int32 (sub-byte types sign-extended)."""
    name = np.dtype(dtype).name
    if name not in SUBBYTE_BITS:
        return f"(int32_t){x}"
    bits = SUBBYTE_BITS[name]
    if name.startswith("u"):
        return f"((int32_t){x} & {(1 << bits) - 1})"
    return f"((((int32_t){x} & {(1 << bits) - 1}) ^ {1 << (bits - 1)}) - {1 << (bits - 1)})"

# TensorProto element types accepted as QuantizeLinear's output_dtype (opset 21)
_OUTPUT_DTYPES = {2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16}


def qrange(dtype) -> tuple[int, int]:
    name = np.dtype(dtype).name
    if name not in QTYPES:
        raise UnsupportedError(f"quantized type {name} is not supported "
                               f"(supported: {', '.join(QTYPES)})")
    return QTYPES[name]


_ROUND_LIMIT = 4194304.0    # 2^22
_ROUND_SHIFT = 12582912.0   # 1.5 * 2^23


def round_to_range(v: Var, zp: Expr | None, lo: int, hi: int) -> list:
    """Statements rounding v (x / scale) in place as QuantizeLinear does: half to even,
    plus the zero point zp (a float expression; None: v has it already), clamped to
    [lo, hi]. Store the result with `as_quantized`.

    Half to even by adding and subtracting 1.5 * 2^23, which leaves no fraction bits:
    what rintf does in the default rounding mode, without a libm call. It is exact for
    |v| < 2^22; anything larger (inf too) stays beyond an 8- or 16-bit range and is
    clamped, and a NaN fails `v >= lo` and ends at lo. Flat selects in this order let
    gcc vectorize the loop for SSE and AVX2 as well as AVX-512: limiting |v| to 2^22
    first, or a nested ?:, left it scalar without AVX-512 (16x slower on AVX2)."""
    big = _f(_ROUND_LIMIT)
    wide = max(-lo, hi) >= _ROUND_LIMIT   # int32: limit |v| first, or the cast overflows
    return [*([Assign(v, select(ge(v, -big), v, -big)), Assign(v, select(gt(v, big), big, v))]
              if wide else []),
            Assign(v, v + _f(_ROUND_SHIFT) - _f(_ROUND_SHIFT) + zp if zp is not None else
                   v + _f(_ROUND_SHIFT) - _f(_ROUND_SHIFT)),
            Assign(v, select(ge(v, _f(lo)), v, _f(lo))),
            Assign(v, select(gt(v, _f(hi)), _f(hi), v))]


def as_quantized(v: Expr, dtype) -> Cast:
    """v (integral, in the type's range) stored as dtype: through int32, which gcc
    vectorizes on AVX2 (float to int8 directly it does not)."""
    return Cast(Type(np.dtype(dtype).name), Cast(I32, v))


def per_axis(scale, x_ndim: int, axis: int):
    """(axis, scale reshaped to broadcast along it) or (None, scalar) per tensor."""
    scale = np.asarray(scale)
    if scale.size == 1 and scale.ndim <= 1:
        return None, scale.reshape(())
    if scale.ndim != 1:
        raise UnsupportedError("blocked quantization (scale of rank > 1) is not supported")
    axis = axis + x_ndim if axis < 0 else axis
    shape = [1] * x_ndim
    shape[axis] = scale.size
    return axis, scale.reshape(shape)


def check_qparams(node, x, scale, zero_point) -> None:
    """The scale and zero point of a QuantizeLinear / DequantizeLinear against
    its input `x` (Tensors): float scale, scalar or 1-D along a valid `axis` with
    one value per channel, a zero point of the scale's shape. Per axis, the
    node's axis is stored non-negative."""
    if scale is None:
        raise ShapeError("the scale input is missing")
    if np.dtype(scale.dtype).kind != "f":
        raise ShapeError(f"the scale must be a float tensor, it is {np.dtype(scale.dtype).name}")
    if len(scale.shape) > 1:
        raise UnsupportedError("blocked quantization (scale of rank > 1) is not supported")
    n = int(np.prod(scale.shape, dtype=np.int64))
    if n == 0:
        raise ShapeError("the scale is empty")
    if zero_point is not None:
        zn = int(np.prod(zero_point.shape, dtype=np.int64))
        if len(zero_point.shape) > 1 or zn != n:
            raise ShapeError(f"the zero point has shape {list(zero_point.shape)} and the scale "
                             f"{list(scale.shape)}; they must match")
        qrange(zero_point.dtype)
    if n == 1:
        return
    axis = normalize_axis(node.attrs.get("axis", 1), len(x.shape), "axis")
    if x.shape[axis] != n:
        raise ShapeError(f"the per-axis scale has {n} values but axis {axis} of the input has "
                         f"{x.shape[axis]}")
    node.attrs["axis"] = axis


def quantize_ref(x, scale, zero_point, dtype, axis=1):
    """The ONNX QuantizeLinear formula in NumPy (float32 division, round half to even)."""
    _, s = per_axis(scale, x.ndim, axis)
    zp = 0 if zero_point is None else per_axis(zero_point, x.ndim, axis)[1]
    lo, hi = qrange(dtype)
    with np.errstate(all="ignore"):
        v = np.rint(x.astype(np.float32) / s.astype(np.float32)).astype(np.float64)
    v = v + np.asarray(zp, np.float64)
    return np.clip(np.nan_to_num(v, nan=lo), lo, hi).astype(dtype)


def dequantize_ref(x, scale, zero_point, axis=1):
    _, s = per_axis(scale, x.ndim, axis)
    zp = 0 if zero_point is None else per_axis(zero_point, x.ndim, axis)[1]
    d = (x.astype(np.int64) - np.asarray(zp, np.int64)).astype(np.float32)
    return (d * s.astype(np.float32)).astype(np.float32)


def _channel_index(shape, axis) -> str:
    """C expression: the coordinate along `axis` of flat element i."""
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    div = f"i / {inner}" if inner > 1 else "i"
    return f"({div}) % {shape[axis]}" if axis > 0 else f"{div}"


def _elements(shape, axis, body: list) -> list:
    """`body` (statements on flat element i, and on its channel c along `axis` when
    per axis) over every element: one loop, or per axis a nest over (outer, c,
    inner) -- no division per element, and an inner loop gcc vectorizes."""
    i, n = Var("i"), int(np.prod(shape, dtype=np.int64))
    if axis is None:
        return [For(i, n, body)]
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    o, c, j = Var("o"), Var("c"), Var("j")
    at = o * shape[axis] + c if outer > 1 else c
    if inner > 1:
        nest = For(c, shape[axis], [For(j, inner, [Decl(i, at * inner + j)] + body)])
    else:
        nest = For(c, shape[axis], [Decl(i, at)] + body)
    return [For(o, outer, [nest]) if outer > 1 else nest]


def _param(k, index: int, axis) -> str:
    """C expression of input `index` (scale or zero point) for element i."""
    b = k.ins[index]
    if b.const is not None and b.size == 1:
        return c_literal(b.const.ravel()[0], b.dtype)
    if axis is None or b.size == 1:
        return f"{b.c}[0]"
    return f"{b.c}[c]"


def _axis_of(k, axis: int):
    x = k.ins[0]
    s = k.ins[1]
    if s.size == 1 and len(s.shape) <= 1:
        return None
    return axis + len(x.shape) if axis < 0 else axis


@register("QuantizeLinear")
class QuantizeLinear(Op):
    min_opset = 10

    def check(self, node, inputs):
        if node.attrs.get("block_size", 0):
            raise UnsupportedError("blocked quantization (block_size) is not supported")
        check_qparams(node, inputs[0], inputs[1] if len(inputs) > 1 else None,
                      inputs[2] if len(inputs) > 2 else None)

    def axis_ranks(self, node, inputs):
        return {}   # check_qparams checks the axis when it matters (per axis)

    def reference(self, x, y_scale, y_zero_point=None, *, axis=1, saturate=1, block_size=0,
                  output_dtype=0):
        if y_zero_point is not None:
            dtype = y_zero_point.dtype
        else:
            dtype = _OUTPUT_DTYPES.get(output_dtype, np.uint8) if output_dtype else np.uint8
            if output_dtype and output_dtype not in _OUTPUT_DTYPES:
                raise UnsupportedError(f"output_dtype {output_dtype} is not supported")
        return quantize_ref(x, y_scale, y_zero_point, dtype, axis)

    def infer(self, node, inputs, consts):
        zp = inputs[2] if len(inputs) > 2 else None
        out = node.attrs.get("output_dtype", 0)
        dtype = zp.dtype if zp is not None else _OUTPUT_DTYPES.get(out, np.uint8)
        qrange(dtype)
        return [(inputs[0].shape, np.dtype(dtype))]

    def emit(self, k, *, axis=1, saturate=1, block_size=0, output_dtype=0):
        x, out = k.ins[0], k.out
        ax = _axis_of(k, axis)
        lo, hi = qrange(out.dtype)
        scale = _param(k, 1, ax)
        zp = _param(k, 2, ax) if len(k.ins) > 2 and k.ins[2] is not None else "0"
        i, v = Var("i"), Var("v", F)
        if out.ctype == "float":
            raise UnsupportedError("QuantizeLinear to a float type is not supported")
        big = _f(_ROUND_LIMIT)
        store = as_quantized(v, out.dtype)
        if out.dtype.name in SUBBYTE_BITS:
            store = Cast(Type(out.dtype), Binary("&", Cast(Type("int32"), v),
                                                 Const((1 << SUBBYTE_BITS[out.dtype.name]) - 1)))
        portable = [Decl(v, Cast(F, param(x)[i]) / RawExpr(scale)),
                    *round_to_range(v, Cast(F, RawExpr(zp)), lo, hi),
                    Assign(param(out, output=True)[i], store)]
        loop = render_c(_elements(x.shape, ax, portable))
        sat = _SAT.get(out.dtype.name)
        if sat is None:
            return loop
        # Cortex-M with a single-precision FPU and the DSP extension: VCVTR rounds to
        # nearest even (the FPSCR's default mode, as rintf and the trick above use) and
        # saturates to int32; QADD adds the zero point without overflow, SSAT/USAT
        # clamp. Four elements per pass, none looked at: a NaN (which VCVTR turns into
        # 0) raises the FPSCR's invalid-operation flag, and then the careful loop, which
        # first replaces a NaN by -2^22 (an ordered compare fails) so that it ends at the
        # low end as above, redoes the tensor (mtvm_ioc_clear / mtvm_ioc_take).
        k.library("mtvm_dsp.h")
        k.library("mtvm_cvtr_f32_dsp.h")

        bits = sat_bits(out.dtype.name)

        def chan(idx: Expr) -> Expr:
            return RawExpr(re.sub(r"\bi\b", f"({render_c(idx)})", _channel_index(x.shape, ax)))

        def sc(j):   # scale and zero point of element i + j (per axis: its channel's)
            return (scale, zp) if ax is None else \
                (scale.replace("[c]", f"[c{j}]"), zp.replace("[c]", f"[c{j}]"))

        out_v = param(out, output=True)

        def at(j):   # element i + j
            return i + j if j else i

        def store(j, v):   # ACLE's intrinsics: names the C writer would take as reserved
            q = f"__qadd(mtvm_cvtr({render_c(v)}), (int32_t)({sc(j)[1]}))"
            return Assign(out_v[at(j)], Cast(Type(out.dtype), RawExpr(f"{sat}({q}, {bits})")))

        def channel(j):
            return [Decl(Var(f"c{j}", index_type(const=True)), chan(at(j)))] \
                if ax is not None else []
        n4 = out.size - out.size % 4
        fpscr = Var("fpscr", Type("uint32", const=True))
        dsp = [Decl(fpscr, call("mtvm_ioc_clear"))]
        if n4 and ax is None and bits == 8:   # per tensor, 8-bit: four a step in assembly
            dsp.append(ExprStmt(call(f"mtvm_quantize4_f32_{'s8' if out.dtype == np.int8 else 'u8'}",
                                     param(x), param(out, output=True), n4, RawExpr(scale),
                                     RawExpr(f"(int32_t)({zp})"))))
        elif n4:
            vs = [Var(f"v{j}", CF) for j in range(4)]
            four = [s for j in range(4) for s in channel(j)]
            four += [Decl(vs[j], Cast(F, param(x)[at(j)]) / RawExpr(sc(j)[0])) for j in range(4)]
            four += [store(j, vs[j]) for j in range(4)]
            dsp.append(For(i, n4, four, step=4))
        if n4 < out.size:
            dsp.append(For(i, out.size, channel(0) + [
                Decl(v, Cast(F, param(x)[i]) / RawExpr(sc(0)[0])), store(0, v)],
                begin=Const(n4)))
        careful = channel(0) + [Decl(v, Cast(F, param(x)[i]) / RawExpr(sc(0)[0])),
                                Assign(v, select(ge(v, -big), v, -big)), store(0, v)]
        dsp.append(If(call("mtvm_ioc_take", fpscr),
                      [Comment("a NaN or a value beyond int32: the careful loop, where a NaN "
                               "ends at the low end as in the portable one"),
                       For(i, out.size, careful)]))
        lines = ["#if defined(MTVM_CVTR)", render_c(dsp), "#else", loop, "#endif"]
        return "\n".join(lines)


@register("DequantizeLinear")
class DequantizeLinear(Op):
    min_opset = 10

    def check(self, node, inputs):
        if node.attrs.get("block_size", 0):
            raise UnsupportedError("blocked quantization (block_size) is not supported")
        qrange(inputs[0].dtype)
        check_qparams(node, inputs[0], inputs[1] if len(inputs) > 1 else None,
                      inputs[2] if len(inputs) > 2 else None)

    def axis_ranks(self, node, inputs):
        return {}   # check_qparams checks the axis when it matters (per axis)

    def reference(self, x, x_scale, x_zero_point=None, *, axis=1, block_size=0):
        return dequantize_ref(x, x_scale, x_zero_point, axis)

    def infer(self, node, inputs, consts):
        return [(inputs[0].shape, np.dtype(inputs[1].dtype))]

    def emit(self, k, *, axis=1, block_size=0):
        x, out = k.ins[0], k.out
        if out.ctype != "float":
            raise UnsupportedError(f"DequantizeLinear to {out.dtype.name} is not supported")
        ax = _axis_of(k, axis)
        scale = _param(k, 1, ax)
        zp = _param(k, 2, ax) if len(k.ins) > 2 and k.ins[2] is not None else "0"
        i, body = Var("i"), []
        if x.dtype == np.int32:
            value = (Cast(F, param(x)[i]) - Cast(F, RawExpr(zp))) * RawExpr(scale)
        else:
            zp_c = zp if zp == "0" or k.ins[2].const is not None and k.ins[2].size == 1 \
                else _load(zp, x.dtype)
            value = Cast(F, RawExpr(_load(f"{x.c}[i]", x.dtype)) - Cast(I32, RawExpr(zp_c))) \
                * RawExpr(scale)
        body.append(Assign(param(out, output=True)[i], value))
        return render_c(_elements(x.shape, ax, body))


@register("DynamicQuantizeLinear")
class DynamicQuantizeLinear(Op):
    """uint8 with scale = (max(x,0) - min(x,0)) / 255 computed at run time."""
    min_opset = 11

    def reference(self, x):
        x = x.astype(np.float32)
        lo = np.float32(min(0.0, float(x.min()) if x.size else 0.0))
        hi = np.float32(max(0.0, float(x.max()) if x.size else 0.0))
        scale = np.float32((hi - lo) / np.float32(255))
        if scale == 0:
            return (np.zeros(x.shape, np.uint8), np.array(0, np.float32), np.array(0, np.uint8))
        zp = np.uint8(np.clip(np.rint(np.float32(0) - lo / scale), 0, 255))
        y = quantize_ref(x, scale, np.array(zp), np.uint8)
        return y, np.array(scale, np.float32), np.array(zp, np.uint8)

    def infer(self, node, inputs, consts):
        return [(inputs[0].shape, np.dtype(np.uint8)), ((), np.dtype(np.float32)),
                ((), np.dtype(np.uint8))]

    def emit(self, k):
        x, n = k.ins[0], k.ins[0].size
        y, s, z = (k.outs + [None, None])[:3]
        X, i = param(x), Var("i")
        lo, hi, scale, zpf, v = (Var(name, F) for name in ("lo", "hi", "scale", "zpf", "v"))
        zp = Var("zp", Type("uint8"))
        zero, top = _f(0), _f(255)

        def clamp(e):
            return select(lt(e, zero), zero, select(gt(e, top), top, e))
        lines = [Comment("range including zero: [min(x, 0), max(x, 0)]"),
                 Decl(lo, zero), Decl(hi, zero),
                 For(i, n, [Assign(lo, select(lt(X[i], lo), X[i], lo)),
                            Assign(hi, select(gt(X[i], hi), X[i], hi))]),
                 Decl(scale, (hi - lo) / top),
                 Decl(zpf, select(eq(scale, zero), zero, call("rintf", zero - lo / scale))),
                 Assign(zpf, clamp(zpf)),
                 Decl(zp, Cast(Type("uint8"), zpf))]
        if y is not None:
            lines.append(For(i, n, [
                Decl(v, select(eq(scale, zero), zero, call("rintf", X[i] / scale) + zpf)),
                Assign(v, select(not_(ge(v, zero)), zero, select(gt(v, top), top, v))),
                Assign(param(y, output=True)[i], Cast(Type("uint8"), v))]))
        if s is not None:
            lines.append(Assign(param(s, output=True)[0], scale))
        if z is not None:
            lines.append(Assign(param(z, output=True)[0], zp))
        else:
            lines.append(ExprStmt(Cast(Type(VOID), zp)))
        return render_c(lines)
