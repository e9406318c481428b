"""Quantization parameters and the integer nodes built from them, shared by
the QDQ pass (mtvm/passes/quantize.py) and the QOperator ops
(mtvm/ops/quantized/qoperator.py), so that no op module imports a pass.

`ctx` below is anything with `add_const(hint, array) -> name` (the pass's
context): these functions add the constants a node reads and return it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import Node, QuantParams
from .ops.quantized.common import DOMAIN, quantize_multiplier
from .ops.quantize import qrange


@dataclass
class QP:
    """Quantization of one tensor: per-tensor (axis None) or per-axis."""
    scale: np.ndarray          # float64
    zp: np.ndarray             # int64, same shape as scale
    dtype: np.dtype
    axis: int | None = None

    @property
    def s(self) -> float:
        return float(self.scale.ravel()[0])

    @property
    def z(self) -> int:
        return int(self.zp.ravel()[0])

    def same(self, other: QP) -> bool:
        return self.axis is None and other.axis is None and self.dtype == other.dtype and \
            np.float32(self.s) == np.float32(other.s) and self.z == other.z


def usable_scale(scale: np.ndarray) -> bool:
    """Whether quantization scales can become integer kernels: finite and positive (an
    infinite one is onnxruntime's quantizer's answer to a tensor holding -inf; the ops
    around it stay float, computing what onnxruntime does)."""
    return scale.size > 0 and bool(np.all(np.isfinite(scale))) and not np.any(scale <= 0)


def to_quant_params(qp: QP | None) -> QuantParams | None:
    if qp is None:
        return None
    return QuantParams(np.asarray(qp.scale, np.float32), np.asarray(qp.zp).astype(qp.dtype),
                       qp.axis)


def per_axis(v, n) -> np.ndarray:
    v = np.asarray(v).ravel()
    return np.broadcast_to(v, (n,)).copy() if v.size == 1 else v


def multiplier_consts(ctx, hint: str, real) -> tuple[str, str]:
    m, s = quantize_multiplier(real)
    if np.all(m == m.ravel()[0]) and np.all(s == s.ravel()[0]):
        m, s = m.ravel()[:1], s.ravel()[:1]
    return ctx.add_const(hint + "_mult", m), ctx.add_const(hint + "_shift", s)


def zero_point_terms(w_int, x_zp: int, w_zp) -> np.ndarray:
    """Per output channel (row of w_int [channels][taps...]), what folding the zero points
    takes from its bias: sum_t (x - zx)(w - zw) = sum_t x (w - zw) - (zx sum_t w - K zx zw),
    K the row's taps; returns zx sum_t w - K zx zw (int64). w_zp: per channel or one."""
    oc = w_int.shape[0]
    taps = int(np.prod(w_int.shape[1:], dtype=np.int64))
    wsum = w_int.reshape(oc, -1).astype(np.int64).sum(axis=1)
    return x_zp * wsum - taps * x_zp * np.asarray(w_zp, np.int64)


def dense_node(ctx, op: str, name: str, x_name: str, qx: QP, w_int, w_scale, w_zp,
               bias_real, bias_int, qy: QP, clamp, out: str, attrs: dict,
               w_name: str | None = None) -> Node | None:
    """A QConv/QMatMul node: multipliers, folded bias, optional weight zero points.
    w_int: [output channels][taps...] (a QMatMul's [N][K])."""
    oc = w_int.shape[0]
    taps = int(np.prod(w_int.shape[1:], dtype=np.int64))
    w_scale = per_axis(w_scale, oc).astype(np.float64)
    w_zp = per_axis(w_zp, oc).astype(np.int64)
    acc_scale = qx.s * w_scale
    if bias_int is None:
        bias_int = np.zeros(oc, np.int64) if bias_real is None else \
            np.rint(per_axis(bias_real, oc).astype(np.float64) / acc_scale).astype(np.int64)
    # Depthwise convolutions sum (x - zx)(w - zw) over the taps inside the input (no
    # per-tap padding test); the others fold the zero-point terms into the bias.
    fold = not (op == "QConv" and w_int.shape[1] == 1 and taps <= 16)
    folded = bias_int.astype(np.int64) - (zero_point_terms(w_int, qx.z, w_zp) if fold else 0)
    if np.abs(folded).max(initial=0) >= 1 << 31:
        return None
    mult, shift = multiplier_consts(ctx, name, acc_scale / qy.s)
    inputs = [x_name, w_name or ctx.add_const(name + "_w", w_int),
              ctx.add_const(name + "_bias", folded.astype(np.int32)), mult, shift]
    if np.any(w_zp != 0):
        inputs.append(ctx.add_const(name + "_wzp", w_zp.astype(np.int32)))
    lo, hi = clamp
    attrs = dict(attrs, x_zp=qx.z, y_zp=qy.z, act_min=lo, act_max=hi)
    if op == "QConv" and not fold:
        attrs["folded"] = 0
    return Node(op, name, inputs, [out], attrs, domain=DOMAIN)


def avgpool_node(ctx, p, x_name, qx, qy, clamp, kernel, strides, pads, include_pad, out):
    count = int(np.prod(kernel, dtype=np.int64))
    if include_pad or not any(pads):   # every window counts all its taps: one multiplier
        real = [qx.s / (qy.s * count)]
    else:                              # one per count a window can have (index = count)
        real = [0.0] + (qx.s / (qy.s * np.arange(1, count + 1, dtype=np.float64))).tolist()
    m, s = quantize_multiplier(real)
    lo, hi = clamp
    attrs = dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads),
                 count_include_pad=int(include_pad), x_zp=qx.z, y_zp=qy.z, act_min=lo,
                 act_max=hi, out_shape=list(ctx.g.tensors[out].shape))
    return Node("QAvgPool", p.name, [x_name, ctx.add_const(p.name + "_mult", m),
                                     ctx.add_const(p.name + "_shift", s)], [out], attrs,
                domain=DOMAIN)


def requant_node(ctx, name, x_name, qx: QP, qy: QP, out: str, clamp=None) -> Node:
    mult, shift = quantize_multiplier(qx.s / qy.s)
    lo, hi = clamp or qrange(qy.dtype)
    return Node("QAffine", name, [x_name, ctx.add_const(name + "_scale", np.array([1], np.int32)),
                                  ctx.add_const(name + "_offset", np.array([0], np.int32)),
                                  ctx.add_const(name + "_mult", mult),
                                  ctx.add_const(name + "_shift", shift)],
                [out], dict(axis=1, x_zp=qx.z, y_zp=qy.z, act_min=lo, act_max=hi),
                domain=DOMAIN)
