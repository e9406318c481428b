"""QOperator-format quantized operators: QLinearConv, QLinearMatMul, ConvInteger,
MatMulInteger (ai.onnx) and QLinearAdd, QLinearMul, QLinearAveragePool,
QLinearGlobalAveragePool, QLinearLeakyRelu, QLinearSigmoid, QLinearSoftmax,
QLinearConcat (com.microsoft, as onnxruntime defines them).

Each `reference` is the operator's definition (integer accumulation, then the
float rescale and round-half-to-even, as ONNX and onnxruntime specify). Each
`lower` rewrites the node into the integer kernels of this package
(fixed-point requantization, no float at run time); the QDQ pass calls it.
Lowering needs the scales, zero points and weights as constants (initializers,
as quantizers write them); a model that computes them at run time is refused
with a message naming the input to bind with --bind.
"""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ..base import Op, register
from ..quantize import dequantize_ref, qrange, quantize_ref
from .common import DOMAIN, conv_acc, quantize_multiplier
from .elementwise import add_multipliers
from .softmax import softmax_bits, softmax_table

MS = "com.microsoft"


def _requant_ref(acc, real_scale, y_zp, dtype):
    """onnxruntime's rescale: round_half_even(acc * scale) + zero point, saturated."""
    lo, hi = qrange(dtype)
    v = np.rint(np.asarray(acc, np.float64) * real_scale) + np.asarray(y_zp, np.int64)
    return np.clip(v, lo, hi).astype(dtype)


def _zp(zp, dtype=np.uint8):
    return np.zeros((), dtype) if zp is None else np.asarray(zp)


def _per_axis_vec(v, n):
    v = np.asarray(v).ravel()
    return np.broadcast_to(v, (n,)) if v.size == 1 else v


class QOp(Op):
    """Lowering support shared by the QOperator ops."""
    min_opset = 10

    def emit(self, k, **attrs):
        producers = k.graph.producers()
        if any(getattr(producers.get(i), "op", None) == "DynamicQuantizeLinear"
               for i in k.node.inputs if i):
            raise UnsupportedError(
                f"{self.name}: dynamic quantization (onnxruntime quantize_dynamic: scales and "
                "zero points computed at run time) is not compiled to integer kernels -- "
                "quantize the model statically (quantize_static, QDQ format) or compile "
                "the float model")
        raise UnsupportedError(
            f"{self.name}: not lowered to integer kernels -- mtvm needs constant, finite "
            "scales, zero points and weights (bind graph inputs with --bind NAME=VALUE.npy) "
            "and supports a subset of this operator's attributes (docs/quantization.md), "
            "while quantizing the model in QDQ format (onnxruntime quantize_static with "
            "quant_format=QuantFormat.QDQ) runs the rest in float")

    @staticmethod
    def params(ctx, node, i_scale, i_zp, data):
        """QP of (scale, zero point) inputs i_scale / i_zp for tensor `data`, or None."""
        from ...qparams import QP, usable_scale
        scale = ctx.const(node.inputs[i_scale])
        if scale is None:
            return None
        zname = node.inputs[i_zp] if i_zp is not None and i_zp < len(node.inputs) else ""
        zp = ctx.const(zname) if zname else None
        if zname and zp is None:
            return None
        dtype = np.dtype(ctx.g.tensors[data].dtype)
        scale = np.asarray(scale, np.float64)
        if not usable_scale(scale):
            return None
        zp = np.zeros(scale.shape, np.int64) if zp is None else np.asarray(zp, np.int64)
        if scale.size > 1 or zp.size > 1:
            return QP(scale.ravel(), np.broadcast_to(zp.ravel(), scale.ravel().shape).copy(),
                      dtype, axis=0)
        qp = QP(scale.reshape(()), zp.reshape(()), dtype)
        t = ctx.g.tensors[data]
        if not t.is_const and t.quant is None and dtype.kind in "iu":
            QOp.annotate(ctx, data, qp)      # metadata.json reports it (model inputs too)
        return qp

    @staticmethod
    def annotate(ctx, name, qp):
        from ...qparams import to_quant_params as _qparams
        ctx.g.tensors[name].quant = _qparams(qp)


# -- convolution and matrix product --------------------------------------------------------

def _conv_attrs(x_shape, w_shape, attrs):
    from ..conv import window_attrs
    kernel = attrs.get("kernel_shape") or list(w_shape[2:])
    kernel, strides, dilations, pads = window_attrs(
        x_shape, kernel, attrs.get("strides"), attrs.get("dilations"), attrs.get("pads"),
        attrs.get("auto_pad", "NOTSET"))
    return dict(strides=strides, pads=pads, dilations=dilations,
                group=int(attrs.get("group", 1)))


def _conv_int(x, x_zp, w, w_zp, attrs):
    """Exact int64 sum of (x - x_zp)(w - w_zp[oc]) (NCHW output)."""
    geo = _conv_attrs(x.shape, w.shape, attrs)
    if x.ndim not in (3, 4):
        raise UnsupportedError("only 1-D and 2-D integer convolutions are supported")
    oc = w.shape[0]
    wz = _per_axis_vec(_zp(w_zp), oc).astype(np.int64).reshape((oc,) + (1,) * (w.ndim - 1))
    xz = int(np.asarray(_zp(x_zp)).ravel()[0])
    acc, (oh, ow) = conv_acc(x.astype(np.int64) - xz, w.astype(np.int64) - wz, 0, **geo)
    shape = (x.shape[0], oc) + ((oh, ow) if x.ndim == 4 else (ow,))
    return acc.reshape(shape)


def _lower_conv(ctx, node, x, qx, w_name, qw, qy, bias_int, out, requant=True):
    from ...qparams import dense_node, zero_point_terms
    w = ctx.const(w_name)
    if w is None or qx is None or qw is None or (requant and qy is None) or qx.axis is not None:
        return None
    geo = _conv_attrs(ctx.g.tensors[x].shape, w.shape, node.attrs)
    if len(w.shape) not in (3, 4):
        return None
    oc = w.shape[0]
    if not requant:
        from ...ir import Node
        zw = _per_axis_vec(qw.zp, oc).astype(np.int64)
        folded = -zero_point_terms(w, qx.z, zw)
        ins = [x, ctx.add_const(node.name + "_w", w),
               ctx.add_const(node.name + "_bias", folded.astype(np.int32)), "", ""]
        if np.any(zw):
            ins.append(ctx.add_const(node.name + "_wzp", zw.astype(np.int32)))
        else:
            ins = ins[:3]
        return [Node("QConv", node.name, ins, [out], dict(geo, x_zp=qx.z), domain=DOMAIN)]
    clamp = qrange(qy.dtype)
    n = dense_node(ctx, "QConv", node.name, x, qx, w, qw.scale, qw.zp, None,
                   None if bias_int is None else _per_axis_vec(bias_int, oc).astype(np.int64),
                   qy, clamp, out, geo, w_name=w_name)
    return [n] if n else None


@register("QLinearConv")
class QLinearConv(QOp):
    def reference(self, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                  y_zero_point, b=None, *, auto_pad="NOTSET", dilations=None, group=1,
                  kernel_shape=None, pads=None, strides=None):
        attrs = dict(auto_pad=auto_pad, dilations=dilations, group=group,
                     kernel_shape=kernel_shape, pads=pads, strides=strides)
        acc = _conv_int(x, x_zero_point, w, w_zero_point, attrs)
        oc = w.shape[0]
        shape = (1, oc) + (1,) * (x.ndim - 2)
        if b is not None:
            acc = acc + np.asarray(b, np.int64).reshape(shape)
        scale = (np.float64(np.float32(x_scale)) *
                 _per_axis_vec(w_scale, oc).astype(np.float32).astype(np.float64) /
                 np.float64(np.float32(y_scale))).reshape(shape)
        return _requant_ref(acc, scale, y_zero_point, np.asarray(y_zero_point).dtype)

    def lower(self, ctx, node):
        x, w = node.inputs[0], node.inputs[3]
        qx = self.params(ctx, node, 1, 2, x)
        qw = self.params(ctx, node, 4, 5, w)
        qy = self.params(ctx, node, 6, 7, node.outputs[0])
        bias = ctx.const(node.inputs[8]) if len(node.inputs) > 8 and node.inputs[8] else None
        if len(node.inputs) > 8 and node.inputs[8] and bias is None:
            return None
        if qw is not None and qw.axis is not None:
            qw.axis = 0
        new = _lower_conv(ctx, node, x, qx, w, qw, qy,
                          np.zeros(1, np.int64) if bias is None else bias, node.outputs[0])
        if new:
            self.annotate(ctx, node.outputs[0], qy)
        return new


def _zero_point_qp(ctx, node, i: int, data: str):
    """ConvInteger/MatMulInteger: input i (a zero point, default 0) of integer tensor
    `data` as unit-scale quantization parameters; None when it is not constant."""
    from ...qparams import QP
    name = node.inputs[i] if i < len(node.inputs) else ""
    v = ctx.const(name) if name else np.zeros((), np.int64)
    if v is None:
        return None
    v = np.asarray(v, np.int64)
    return QP(np.ones(v.shape), v, np.dtype(ctx.g.tensors[data].dtype),
              None if v.size == 1 else 0)


@register("ConvInteger")
class ConvInteger(QOp):
    def reference(self, x, w, x_zero_point=None, w_zero_point=None, *, auto_pad="NOTSET",
                  dilations=None, group=1, kernel_shape=None, pads=None, strides=None):
        attrs = dict(auto_pad=auto_pad, dilations=dilations, group=group,
                     kernel_shape=kernel_shape, pads=pads, strides=strides)
        return _conv_int(x, x_zero_point, w, w_zero_point, attrs).astype(np.int32)

    def lower(self, ctx, node):
        x, w = node.inputs[0], node.inputs[1]
        qx, qw = _zero_point_qp(ctx, node, 2, x), _zero_point_qp(ctx, node, 3, w)
        if qx is not None and qx.axis is not None:
            return None
        return _lower_conv(ctx, node, x, qx, w, qw, None, None, node.outputs[0], requant=False)


def _matmul_int(a, a_zp, b, b_zp):
    """Exact int64 (a - a_zp) @ (b - b_zp); a_zp per row (1-D, size M) or scalar,
    b_zp per column (1-D, size N) or scalar."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    az, bz = np.asarray(_zp(a_zp), np.int64), np.asarray(_zp(b_zp), np.int64)
    if az.ndim == 1 and az.size > 1:
        az = az.reshape(-1, 1)
    return np.matmul(a64 - az, b64 - bz)


def batch_matmul_node(ctx, name, a, qa, b, qb, qy, out, clamp=None, requant=True):
    """QBatchMatMul: both operands may be computed at run time (per-tensor a, b zero point)."""
    from ...ir import Node
    if qa.axis is not None or np.asarray(qb.zp).size > 1 and np.any(qb.zp != qb.zp.ravel()[0]):
        return None
    bz = int(np.asarray(qb.zp).ravel()[0])
    if not requant:
        return Node("QBatchMatMul", name, [a, b], [out], dict(a_zp=qa.z, b_zp=bz),
                    domain=DOMAIN)
    from ...qparams import multiplier_consts as _mult_consts
    n = ctx.g.tensors[b].shape[-1]
    sb = np.broadcast_to(np.asarray(qb.scale, np.float64).ravel(), (n,))
    mult, shift = _mult_consts(ctx, name, qa.s * sb / qy.s)
    lo, hi = clamp or qrange(qy.dtype)
    return Node("QBatchMatMul", name, [a, b, mult, shift], [out],
                dict(a_zp=qa.z, b_zp=bz, y_zp=qy.z, act_min=lo, act_max=hi), domain=DOMAIN)


def _lower_matmul(ctx, node, a, qa, b_name, qb, qy, out, requant=True):
    from ...ir import Node
    from ...qparams import dense_node, zero_point_terms
    b = ctx.const(b_name)
    if qa is None or qb is None or qa.axis is not None or \
            (requant and (qy is None or qy.axis is not None)):
        return None
    if b is not None and b.ndim == 1 and qb.axis is None:
        # a vector B [K]: the product with the column [K][1], whose last axis of 1 MatMul's
        # 1-D rule drops (a Reshape of the same bytes)
        t = ctx.g.tensors[out]
        col = ctx.new_tensor(f"{out}_col", (*t.shape, 1), t.dtype, qy)
        new = _lower_matmul(ctx, node, a, qa, ctx.add_const(f"{node.name}_col", b.reshape(-1, 1)),
                            qb, qy, col, requant)
        return None if not new else new + [
            Node("Reshape", f"{node.name}_vector", [col], [out],
                 dict(shape=list(t.shape), allowzero=0))]
    if b is None or b.ndim != 2:
        if len(ctx.g.tensors[a].shape) < 2 or len(ctx.g.tensors[b_name].shape) < 2:
            return None     # a vector operand computed at run time: QBatchMatMul takes matrices
        new = batch_matmul_node(ctx, node.name, a, qa, b_name, qb, qy, out, requant=requant)
        return [new] if new else None
    w_nk = np.ascontiguousarray(b.T)
    n = w_nk.shape[0]
    if not requant:
        zw = _per_axis_vec(qb.zp, n).astype(np.int64)
        folded = -zero_point_terms(w_nk, qa.z, zw)
        ins = [a, ctx.add_const(node.name + "_w", w_nk),
               ctx.add_const(node.name + "_bias", folded.astype(np.int32))]
        if np.any(zw):
            ins += ["", "", ctx.add_const(node.name + "_wzp", zw.astype(np.int32))]
        return [Node("QMatMul", node.name, ins, [out], dict(x_zp=qa.z), domain=DOMAIN)]
    new = dense_node(ctx, "QMatMul", node.name, a, qa, w_nk, qb.scale, qb.zp, None, None, qy,
                     qrange(qy.dtype), out, {})
    return [new] if new else None


@register("QLinearMatMul")
class QLinearMatMul(QOp):
    def reference(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                  y_zero_point):
        acc = _matmul_int(a, a_zero_point, b, b_zero_point)
        sa = np.asarray(a_scale, np.float32).astype(np.float64)
        sb = np.asarray(b_scale, np.float32).astype(np.float64)
        if sa.ndim == 1 and sa.size > 1:
            sa = sa.reshape(-1, 1)
        scale = sa * sb / np.float64(np.float32(y_scale))
        return _requant_ref(acc, scale, y_zero_point, np.asarray(y_zero_point).dtype)

    def lower(self, ctx, node):
        a, b = node.inputs[0], node.inputs[3]
        qa = self.params(ctx, node, 1, 2, a)
        qb = self.params(ctx, node, 4, 5, b)
        qy = self.params(ctx, node, 6, 7, node.outputs[0])
        new = _lower_matmul(ctx, node, a, qa, b, qb, qy, node.outputs[0])
        if new:
            self.annotate(ctx, node.outputs[0], qy)
        return new


@register("MatMulInteger")
class MatMulInteger(QOp):
    def reference(self, a, b, a_zero_point=None, b_zero_point=None):
        return _matmul_int(a, a_zero_point, b, b_zero_point).astype(np.int32)

    def lower(self, ctx, node):
        a, b = node.inputs[0], node.inputs[1]
        return _lower_matmul(ctx, node, a, _zero_point_qp(ctx, node, 2, a), b,
                             _zero_point_qp(ctx, node, 3, b), None, node.outputs[0],
                             requant=False)


# -- com.microsoft elementwise, pooling, softmax, concat ------------------------------

class MsOp(QOp):
    min_opset = 1

    @staticmethod
    def float_fallback(ctx, node, ops: list, y_zp_index: int) -> list:
        """DQ -> ops -> Q in place of a QOperator node whose attributes none of mtvm's
        integer forms takes (a ceil_mode pool, a Softmax on an inner axis): what its
        reference computes, in float. node's inputs 0..2 are x, its scale and zero point,
        inputs y_zp_index - 1 and y_zp_index the output's; ops: (op, attrs, out shape)
        applied in turn to the float x (each canonicalized as the loader would)."""
        from ...ir import Node
        from ..base import get_op
        x, out = node.inputs[0], node.outputs[0]
        xf = ctx.new_tensor(f"{x}_f", ctx.g.tensors[x].shape, np.float32)
        nodes = [Node("DequantizeLinear", f"{node.name}_dq", list(node.inputs[:3]), [xf], {})]
        v = xf
        for i, (op, attrs, shape) in enumerate(ops):
            vf = ctx.new_tensor(f"{out}_f{i}", shape, np.float32)
            n = Node(op, f"{node.name}_{op.lower()}{i}", [v], [vf], dict(attrs))
            get_op(op).canonicalize(n, ctx.g, 19)
            nodes.append(n)
            v = vf
        y_ins = [v, node.inputs[y_zp_index - 1]] + \
            ([node.inputs[y_zp_index]] if len(node.inputs) > y_zp_index and
             node.inputs[y_zp_index] else [])
        nodes.append(Node("QuantizeLinear", f"{node.name}_q", y_ins, [out], {}))
        return nodes


def _deq(x, s, z):
    return dequantize_ref(x, np.asarray(s), _zp(z, x.dtype))


def _q(v, s, z, dtype):
    return quantize_ref(np.asarray(v, np.float32), np.asarray(s), np.asarray(_zp(z, dtype)),
                        np.asarray(_zp(z, dtype)).dtype)


@register("QLinearAdd", "QLinearMul", domain=MS)
class QLinearBinary(MsOp):
    def reference(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale,
                  c_zero_point=None):
        fa, fb = _deq(a, a_scale, a_zero_point), _deq(b, b_scale, b_zero_point)
        v = fa + fb if self.name == "QLinearAdd" else fa * fb
        return _q(v, c_scale, c_zero_point, a.dtype)

    def lower(self, ctx, node):
        from ...ir import Node
        from ...qparams import QP  # noqa: F401
        a, b, out = node.inputs[0], node.inputs[3], node.outputs[0]
        qa, qb = self.params(ctx, node, 1, 2, a), self.params(ctx, node, 4, 5, b)
        qy = self.params(ctx, node, 6, 7, out)
        if None in (qa, qb, qy) or any(q.axis is not None for q in (qa, qb, qy)):
            return None
        lo, hi = qrange(qy.dtype)
        if self.name == "QLinearAdd":
            ia, ib, n = add_multipliers(qa.s / qy.s, qb.s / qy.s)
            attrs = dict(a_zp=qa.z, b_zp=qb.z, y_zp=qy.z, a_mult=ia, b_mult=ib, shift=n,
                         act_min=lo, act_max=hi)
            new = Node("QAdd", node.name, [a, b], [out], attrs, domain=DOMAIN)
        else:
            my, sy = quantize_multiplier(qa.s * qb.s / qy.s)
            new = Node("QMul", node.name, [a, b], [out],
                       dict(a_zp=qa.z, b_zp=qb.z, y_zp=qy.z, y_mult=int(my[0]),
                            y_shift=int(sy[0]), act_min=lo, act_max=hi), domain=DOMAIN)
        self.annotate(ctx, out, qy)
        return [new]


class _QUnary(MsOp):
    """X, X_scale, X_zero_point, Y_scale, Y_zero_point: a float function of the
    dequantized input, requantized."""

    def fn(self, v, **attrs):
        raise NotImplementedError

    def reference(self, x, x_scale, x_zero_point, y_scale, y_zero_point=None, **attrs):
        return _q(self.fn(_deq(x, x_scale, x_zero_point), **attrs), y_scale, y_zero_point,
                  x.dtype)

    def lower(self, ctx, node):
        from ...ir import Node
        x, out = node.inputs[0], node.outputs[0]
        qx, qy = self.params(ctx, node, 1, 2, x), self.params(ctx, node, 3, 4, out)
        if qx is None or qy is None or qx.axis is not None or qy.axis is not None:
            return None
        lo, hi = qrange(qx.dtype)
        xs = np.arange(lo, hi + 1).astype(qx.dtype)
        table = self.reference(xs, np.float32(qx.s), np.array(qx.z, qx.dtype), np.float32(qy.s),
                               np.array(qy.z, qy.dtype), **node.attrs)
        self.annotate(ctx, out, qy)
        return [Node("QLut", node.name, [x, ctx.add_const(node.name + "_table", table)], [out],
                     {}, domain=DOMAIN)]


@register("QLinearSigmoid", domain=MS)
class QLinearSigmoid(_QUnary):
    def reference(self, x, x_scale, x_zero_point, y_scale, y_zero_point=None):
        return super().reference(x, x_scale, x_zero_point, y_scale, y_zero_point)

    def fn(self, v):
        return (1 / (1 + np.exp(-v.astype(np.float32)))).astype(np.float32)


@register("QLinearLeakyRelu", domain=MS)
class QLinearLeakyRelu(_QUnary):
    def reference(self, x, x_scale, x_zero_point, y_scale, y_zero_point=None, *, alpha=0.01):
        return super().reference(x, x_scale, x_zero_point, y_scale, y_zero_point, alpha=alpha)

    def fn(self, v, alpha=0.01):
        return np.where(v >= 0, v, v * np.float32(alpha)).astype(np.float32)


def _pool_geometry(x_shape, attrs, global_pool):
    from ..conv import window_attrs
    if global_pool:
        k = list(x_shape[2:])
        return k, [1] * len(k), [0] * (2 * len(k))
    kernel, strides, _, pads = window_attrs(x_shape, attrs["kernel_shape"], attrs.get("strides"),
                                            None, attrs.get("pads"),
                                            attrs.get("auto_pad", "NOTSET"))
    return kernel, strides, pads


def contrib_pool_attrs(x_shape, attrs: dict) -> dict:
    """AveragePool attributes giving what onnxruntime's QLinearAveragePool computes: with
    ceil_mode and count_include_pad it divides a window that runs past the padded input
    by the whole kernel (the ONNX AveragePool by the part inside): the same as floor mode
    over an input padded at the end until every ceil-mode window fits."""
    attrs = {k: a for k, a in attrs.items() if k != "channels_last"}
    if not (attrs.get("ceil_mode", 0) and attrs.get("count_include_pad", 0)):
        return attrs
    kernel, strides, pads = _pool_geometry(x_shape, attrs, False)
    d = len(kernel)
    pads = list(pads)
    for i in range(d):
        size = x_shape[2 + i] + pads[i] + pads[d + i]
        out = -(-(size - kernel[i]) // strides[i]) + 1
        if (out - 1) * strides[i] >= x_shape[2 + i] + pads[i]:   # ONNX: a window must start inside
            out -= 1
        pads[d + i] += max(0, (out - 1) * strides[i] + kernel[i] - size)
    return dict(kernel_shape=list(kernel), strides=list(strides), pads=pads, ceil_mode=0,
                count_include_pad=1)


class _QAvgPool(MsOp):
    global_pool = False

    def check(self, node, inputs):
        if node.attrs.get("channels_last", 0):
            raise UnsupportedError(f"{self.name} with channels_last=1 is not supported")

    def _float_pool(self, v, attrs):
        from ..base import get_op
        if self.global_pool:
            return v.mean(axis=tuple(range(2, v.ndim)), keepdims=True)
        return get_op("AveragePool").reference(v, **contrib_pool_attrs(v.shape, attrs))

    def lower(self, ctx, node):
        from ...qparams import avgpool_node as _avgpool_node
        x, out = node.inputs[0], node.outputs[0]
        qx, qy = self.params(ctx, node, 1, 2, x), self.params(ctx, node, 3, 4, out)
        shape = ctx.g.tensors[x].shape
        if qx is None or qy is None or qx.axis is not None or len(shape) not in (3, 4):
            return None
        if node.attrs.get("ceil_mode", 0) and not self.global_pool:   # no integer form
            return self.float_fallback(ctx, node, [
                ("AveragePool", contrib_pool_attrs(shape, node.attrs), ctx.g.tensors[out].shape)],
                4)
        kernel, strides, pads = _pool_geometry(shape, node.attrs, self.global_pool)
        include = 1 if self.global_pool else node.attrs.get("count_include_pad", 0)
        self.annotate(ctx, out, qy)
        return [_avgpool_node(ctx, node, x, qx, qy, qrange(qy.dtype), kernel, strides, pads,
                              include, out)]


@register("QLinearAveragePool", domain=MS)
class QLinearAveragePool(_QAvgPool):
    def reference(self, x, x_scale, x_zero_point, y_scale, y_zero_point=None, *,
                  auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, kernel_shape=None,
                  pads=None, strides=None, channels_last=0):
        attrs = dict(auto_pad=auto_pad, ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad, kernel_shape=kernel_shape,
                     pads=pads, strides=strides)
        v = self._float_pool(_deq(x, x_scale, x_zero_point), attrs)
        return _q(v, y_scale, y_zero_point, x.dtype)


@register("QLinearGlobalAveragePool", domain=MS)
class QLinearGlobalAveragePool(_QAvgPool):
    global_pool = True

    def reference(self, x, x_scale, x_zero_point, y_scale, y_zero_point=None, *,
                  channels_last=0):
        v = self._float_pool(_deq(x, x_scale, x_zero_point), {})
        return _q(v, y_scale, y_zero_point, x.dtype)


@register("QLinearSoftmax", domain=MS)
class QLinearSoftmax(MsOp):
    def reference(self, x, x_scale, x_zero_point, y_scale, y_zero_point=None, *, axis=-1,
                  opset=13):
        v = _deq(x, x_scale, x_zero_point).astype(np.float64)
        axis = axis + x.ndim if axis < 0 else axis
        if opset < 13:   # softmax of the 2-D coercion [prod(dims < axis), prod(dims >= axis)]
            v2 = v.reshape(int(np.prod(x.shape[:axis])), -1)
            e = np.exp(v2 - v2.max(axis=1, keepdims=True))
            s = (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)
        else:
            e = np.exp(v - v.max(axis=axis, keepdims=True))
            s = e / e.sum(axis=axis, keepdims=True)
        return _q(s, y_scale, y_zero_point, x.dtype)

    def lower(self, ctx, node):
        from ...ir import Node
        x, out = node.inputs[0], node.outputs[0]
        qx, qy = self.params(ctx, node, 1, 2, x), self.params(ctx, node, 3, 4, out)
        shape = ctx.g.tensors[x].shape
        axis = node.attrs.get("axis", -1)
        axis = axis + len(shape) if axis < 0 else axis
        if qx is None or qy is None or qx.axis is not None:
            return None
        if any(d != 1 for d in shape[axis + 1:]):   # an inner axis: the float Softmax
            if node.attrs.get("opset", 13) >= 13:
                ops = [("Softmax", dict(axis=axis), shape)]
            else:   # opset 1-12: over the 2-D coercion [prod(dims < axis), prod(dims >= axis)]
                rows = int(np.prod(shape[:axis], dtype=np.int64))
                flat = (rows, int(np.prod(shape, dtype=np.int64)) // max(rows, 1))
                ops = [("Reshape", dict(shape=list(flat), allowzero=0), flat),
                       ("Softmax", dict(axis=1), flat),
                       ("Reshape", dict(shape=list(shape), allowzero=0), shape)]
            return self.float_fallback(ctx, node, ops, 4)
        inv = int(round((1 << 16) / qy.s))
        lo, hi = qrange(qy.dtype)
        self.annotate(ctx, out, qy)
        return [Node("QSoftmax", node.name,
                     [x, ctx.add_const(node.name + "_exp",
                                       softmax_table(qx.s, softmax_bits(shape[axis], qy.s)))],
                     [out],
                     dict(inv=inv, y_zp=qy.z, act_min=lo, act_max=hi), domain=DOMAIN)]


@register("QLinearConcat", domain=MS)
class QLinearConcat(MsOp):
    def axis_ranks(self, node, inputs):   # inputs 0, 1 are the output's scale and zero point
        x = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
        return {"axis": (len(x.shape), 0)} if x is not None and "axis" in node.attrs else {}

    def reference(self, y_scale, y_zero_point, *xs, axis):
        parts = []
        for i in range(0, len(xs), 3):
            x, s, z = xs[i:i + 3]
            if np.float32(s) == np.float32(y_scale) and np.all(np.asarray(z) ==
                                                               np.asarray(y_zero_point)):
                parts.append(x)
            else:
                parts.append(_q(_deq(x, s, z), y_scale, y_zero_point, x.dtype))
        return np.concatenate(parts, axis=axis)

    def lower(self, ctx, node):
        from ...ir import Node
        from ...qparams import requant_node
        out = node.outputs[0]
        qy = self.params(ctx, node, 0, 1, out)
        if qy is None or qy.axis is not None:
            return None
        nodes, ins = [], []
        for j, i in enumerate(range(2, len(node.inputs), 3)):
            x = node.inputs[i]
            qx = self.params(ctx, node, i + 1, i + 2, x)
            if qx is None or qx.axis is not None:
                return None
            if qx.same(qy):
                ins.append(x)
                continue
            mid = ctx.new_tensor(f"{node.name}_in{j}_requantized", ctx.g.tensors[x].shape,
                                 qy.dtype, qy)
            nodes.append(requant_node(ctx, f"{node.name}_requantize{j}", x, qx, qy, mid))
            ins.append(mid)
        self.annotate(ctx, out, qy)
        return nodes + [Node("Concat", node.name, ins, [out], {"axis": node.attrs["axis"]})]


@register("QGemm", domain=MS)
class QGemm(MsOp):
    """onnxruntime's quantized Gemm (QOperator format): alpha * A' B' + C with C an
    int32 bias in units of a_scale * b_scale; requantized when y_scale is given,
    else a float output."""

    def reference(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c=None,
                  y_scale=None, y_zero_point=None, *, alpha=1.0, transA=0, transB=0):
        a2 = a.T if transA else a
        b2 = b.T if transB else b
        bz = np.asarray(_zp(b_zero_point), np.int64)
        acc = (a2.astype(np.int64) - np.int64(np.asarray(_zp(a_zero_point)).ravel()[0])) @ \
            (b2.astype(np.int64) - bz.reshape(1, -1) if bz.size > 1 else b2.astype(np.int64) - bz)
        if c is not None:
            acc = acc + np.asarray(c, np.int64)
        n = acc.shape[-1]
        scale = np.float64(np.float32(a_scale)) * \
            _per_axis_vec(np.asarray(b_scale, np.float32), n).astype(np.float64) * alpha
        if y_scale is None:
            return (acc * scale).astype(np.float32)
        return _requant_ref(acc, scale / np.float64(np.float32(y_scale)), y_zero_point,
                            np.asarray(y_zero_point).dtype)

    def infer(self, node, inputs, consts):
        a, b = inputs[0], inputs[3]
        a = node.attrs
        m = inputs[0].shape[1] if a.get("transA", 0) else inputs[0].shape[0]
        n = b.shape[0] if a.get("transB", 0) else b.shape[1]
        has_y = len(inputs) > 7 and inputs[7] is not None
        dtype = (inputs[8].dtype if len(inputs) > 8 and inputs[8] is not None else
                 np.dtype(np.uint8)) if has_y else np.dtype(np.float32)
        return [((m, n), dtype)]

    def lower(self, ctx, node):
        from ...ir import Node
        from ...qparams import QP, dense_node, zero_point_terms
        a_name, b_name = node.inputs[0], node.inputs[3]
        at = node.attrs
        b = ctx.const(b_name)
        if b is None or b.ndim != 2:
            return None
        qa = self.params(ctx, node, 1, 2, a_name)
        qb = self.params(ctx, node, 4, 5, b_name)
        if qa is None or qb is None or qa.axis is not None:
            return None
        first = []
        if at.get("transA", 0):   # A' by a Transpose of its bytes (the same scale and zero point)
            t = ctx.g.tensors[a_name]
            at_name = ctx.new_tensor(f"{a_name}_t", tuple(reversed(t.shape)), t.dtype, qa)
            first = [Node("Transpose", f"{node.name}_transpose_a", [a_name], [at_name],
                          dict(perm=[1, 0]))]
            a_name = at_name
        w_nk = b if at.get("transB", 0) else np.ascontiguousarray(b.T)
        n = w_nk.shape[0]
        alpha = float(at.get("alpha", 1.0))
        c_name = node.inputs[6] if len(node.inputs) > 6 else ""
        bias = ctx.const(c_name) if c_name else np.zeros(n, np.int64)
        if bias is None:
            return None
        bias = _per_axis_vec(np.asarray(bias, np.int64), n)
        out = node.outputs[0]
        has_y = len(node.inputs) > 7 and node.inputs[7]
        if has_y:
            qy = self.params(ctx, node, 7, 8, out)
            if qy is None or qy.axis is not None:
                return None
            new = dense_node(ctx, "QMatMul", node.name, a_name, qa, w_nk,
                             np.asarray(qb.scale) * alpha, qb.zp, None, bias, qy,
                             qrange(qy.dtype), out, {})
            if new is None:
                return None
            self.annotate(ctx, out, qy)
            return first + [new]
        # Float output: the int32 accumulator, then its scale per column.
        zw = _per_axis_vec(qb.zp, n).astype(np.int64)
        folded = bias - zero_point_terms(w_nk, qa.z, zw)
        acc = ctx.new_tensor(node.name + "_acc", ctx.g.tensors[out].shape, np.int32)
        ins = [a_name, ctx.add_const(node.name + "_w", w_nk),
               ctx.add_const(node.name + "_bias", folded.astype(np.int32))]
        if np.any(zw):
            ins += ["", "", ctx.add_const(node.name + "_wzp", zw.astype(np.int32))]
        scale = (qa.s * _per_axis_vec(qb.scale, n) * alpha).astype(np.float32)
        del QP
        return first + [Node("QMatMul", node.name, ins, [acc], dict(x_zp=qa.z), domain=DOMAIN),
                Node("DequantizeLinear", node.name + "_scale",
                     [acc, ctx.add_const(node.name + "_out_scale", scale),
                      ctx.add_const(node.name + "_out_zp", np.zeros(n, np.int32))], [out],
                     {"axis": 1})]
