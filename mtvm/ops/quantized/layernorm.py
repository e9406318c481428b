"""QLayerNorm: LayerNormalization on an 8-bit tensor, for the DequantizeLinear ->
LayerNormalization -> QuantizeLinear of a QDQ transformer (mtvm/passes/quantize.py).

One kernel instead of three, and no float tensor between the 8-bit ones. Per row
of the normalized dims:

- the statistics in integers, exactly: S = sum(q), Q = sum(q^2) of q = x - x_zp
  (int32: the pass allows at most 32,767 values a row), the variance numerator
  n Q - S^2 in int64 (int32 where it cannot overflow: rows of up to ~180 values);
  then mean = x_scale S / n and
  inv_std = 1 / sqrt(x_scale^2 (n Q - S^2) / n^2 + epsilon) in float;
- each output (x a + c) g_j + b_j with a = x_scale inv_std, c = -(mean inv_std) -
  x_zp a (the input's zero point taken in once per row, not per value), g_j the
  Scale divided by y_scale and b_j the B divided by y_scale plus the output's zero
  point, at compile time (`gain`, `offset`): the value QuantizeLinear divides by
  its scale plus the zero point, rounded half to even, clamped. (Per value on a
  Cortex-M4: one conversion, two multiplies, two adds, VCVTR and SSAT; the zero
  points added apart took two instructions more of 18.)

The float LayerNormalization (two-pass mean and variance, then (x - mean) inv_std
Scale + B, then / y_scale) rounds differently in the last bits, so an output can
differ from onnxruntime's by one quantization step where the float value is
within rounding of a half. The same statements are the LLVM backend's; the C
stores through VCVTR, QADD and SSAT on Arm DSP cores with an FPU (as
QuantizeLinear does) and through the 1.5 * 2^23 rounding elsewhere.
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import (Assign, Cast, Const, Decl, ExprStmt, For, Pragma, RawExpr, Type,
                                Var, call, index_type, param, render_c)
from ..base import register
from ..quantize import as_quantized, round_to_range
from .common import DOMAIN, INT8_EXT, IntOp

F, CF = Type("float32"), Type("float32", const=True)
I32, I64 = Type("int32"), Type("int64")
MAX_COLS = 32767          # sum(q^2) of a row in int32


def _f(value) -> Const:
    return Const(float(np.float32(value)), "float32")


def fold_params(scale, b, y_scale, y_zp: int) -> tuple[np.ndarray, np.ndarray]:
    """(gain, offset): Scale divided by y_scale, and B (b may be None: 0) divided by
    y_scale plus the output's zero point y_zp, as float32."""
    gain = (np.asarray(scale, np.float64) / np.float64(y_scale)).astype(np.float32)
    b = np.zeros(gain.shape) if b is None else np.asarray(b, np.float64)
    offset = (b / np.float64(y_scale) + y_zp).astype(np.float32)
    return gain.reshape(-1), offset.reshape(-1)


@register("QLayerNorm", domain=DOMAIN)
class QLayerNorm(IntOp):
    """y = QuantizeLinear(LayerNormalization(DequantizeLinear(x)), y_scale, y_zp) over
    the dims from `axis` on. Inputs: x (8-bit), gain and offset (float32: Scale / y_scale
    and B / y_scale + y_zp, one value per normalized element or one for all); x_scale,
    x_zp, y_zp per tensor (y_zp is in offset); act_min/act_max a fused clamp."""

    def reference(self, x, gain, offset, *, axis, epsilon, x_scale, x_zp, y_zp, act_min,
                  act_max):
        cols = int(np.prod(x.shape[axis:], dtype=np.int64))
        xr = x.astype(np.int64).reshape(-1, cols)
        q = xr - x_zp
        s, sq = q.sum(axis=1, keepdims=True), (q * q).sum(axis=1, keepdims=True)
        n, xs = np.float32(cols), np.float32(x_scale)
        mean = xs * s.astype(np.float32) / n
        var = (cols * sq - s * s).astype(np.float32) * np.float32(xs * xs / (n * n))
        inv = np.float32(1) / np.sqrt(var + np.float32(epsilon))
        a = xs * inv
        c = -(mean * inv) - np.float32(x_zp) * a
        v = (xr.astype(np.float32) * a + c) * gain.reshape(1, -1) + offset.reshape(1, -1)
        v = np.rint(v.astype(np.float32))
        return np.clip(v, act_min, act_max).astype(x.dtype).reshape(x.shape)

    def _rows(self, k, store_fn, *, axis, epsilon, x_scale, x_zp, stats=None, unroll=None):
        """The kernel's statements; stats(row pointer, cols, zp, s, sq): statements
        setting the declared s and sq (default: the byte loop); unroll: a Pragma before
        the loop over a row's values."""
        x, gain, offset = k.ins[:3]
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        cols = int(np.prod(x.shape[axis:], dtype=np.int64))
        X = param(x)
        r, j = Var("r"), Var("j")
        base = Var("base", index_type(const=True))
        s, sq, q = Var("s", I32), Var("sq", I32), Var("q", Type("int32", const=True))
        num = Var("num", Type("int64", const=True))
        mean, inv, a, c = (Var(n_, CF) for n_ in ("mean", "inv_std", "a", "c"))
        v = Var("v", F)
        zp = Const(int(x_zp), "int32")

        def per(buf):
            return param(buf)[0] if buf.size == 1 else param(buf)[j]
        xs, n = np.float32(x_scale), np.float32(cols)
        value = (Cast(F, X[base + j]) * a + c) * per(gain) + per(offset)
        body = [Decl(base, r * cols), Decl(s, Const(0, "int32")), Decl(sq, Const(0, "int32"))]
        body += stats(X + base, cols, zp, s, sq) if stats else \
            [For(j, cols, [Decl(q, Cast(I32, X[base + j]) - zp), Assign(s, q, "+="),
                           Assign(sq, q * q, "+=")])]
        info = np.iinfo(x.dtype)
        q_max = max(abs(int(info.min) - int(x_zp)), abs(int(info.max) - int(x_zp)))
        if cols * cols * q_max * q_max < 1 << 31:
            # n Q and S^2 fit int32: the same value, converted to float without the
            # int64 conversion's library call (about 40 instructions a row on a Cortex-M4)
            num = Var("num", Type("int32", const=True))
            num_value = sq * Const(cols, "int32") - s * s
        else:
            num_value = Cast(I64, sq) * Const(cols, "int64") - Cast(I64, s) * Cast(I64, s)
        body += [Decl(num, num_value),
                 Decl(mean, Cast(F, s) * _f(xs / n)),
                 Decl(inv, _f(1) / call("sqrtf", Cast(F, num) * _f(xs * xs / (n * n))
                                        + _f(epsilon))),
                 Decl(a, _f(xs) * inv), Decl(c, -(mean * inv) - _f(x_zp) * a),
                 *([unroll] if unroll else []),
                 For(j, cols, [Decl(v, value), *store_fn(param(k.out, output=True)[base + j],
                                                          v)])]
        return [For(r, rows, body)]

    def ir_body(self, k, /, *, axis, epsilon, x_scale, x_zp, y_zp, act_min, act_max):
        def store(dst, v):   # QuantizeLinear's portable rounding
            return [*round_to_range(v, None, int(act_min), int(act_max)),   # y_zp: in offset
                    Assign(dst, as_quantized(v, k.out.dtype))]
        return self._rows(k, store, axis=axis, epsilon=epsilon, x_scale=x_scale, x_zp=x_zp)

    def emit(self, k, /, **attrs) -> str:
        lo, hi = int(attrs["act_min"]), int(attrs["act_max"])
        if not (k.target.is_arm_dsp and k.target.fpu) or \
                (lo, hi) not in ((-128, 127), (0, 255)):    # a fused Relu: the portable store
            return render_c(self.ir_body(k, **attrs))
        k.library("mtvm_dsp.h")
        k.library("mtvm_cvtr_f32_dsp.h")
        sat = "__ssat" if np.dtype(k.out.dtype) == np.int8 else "__usat"
        out_t = Type(np.dtype(k.out.dtype).name)

        def store(dst, v):
            # VCVTR rounds half to even (the FPSCR's default mode; the zero point is in
            # offset) and saturates to int32, SSAT/USAT clamp to 8 bits
            r = f"{sat}(mtvm_cvtr({render_c(v)}), 8)"
            return [Assign(dst, Cast(out_t, RawExpr(r)))]
        k.library("mtvm_stats_8_dsp.h")
        ext = INT8_EXT[np.dtype(k.ins[0].dtype).name][1]

        def stats(row, cols, zp, s, sq):   # four bytes a step: USADA8, SMLAD
            return [ExprStmt(call(f"mtvm_sum_sq_{ext}_dsp", row, cols, zp, RawExpr(f"&{s.name}"),
                                  RawExpr(f"&{sq.name}")))]
        # the target has the DSP extension and a single-precision FPU: MTVM_CVTR is there
        # four values a step: the loop's compare and branch per four (gcc leaves it rolled)
        return render_c(self._rows(k, store, axis=attrs["axis"], epsilon=attrs["epsilon"],
                                   x_scale=attrs["x_scale"], x_zp=attrs["x_zp"], stats=stats,
                                   unroll=Pragma("GCC unroll 4")))

    def macs(self, node, inputs, outputs):
        return 4 * inputs[0].size
