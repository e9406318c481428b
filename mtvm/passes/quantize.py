"""QDQ -> integer kernels.

A quantized ONNX model (onnxruntime's quantize_static, QDQ format) computes
in float between DequantizeLinear (DQ) and QuantizeLinear (Q) nodes. Each
pattern "DQ inputs -> op [-> Relu/Clip] -> Q" whose op has an integer kernel
becomes that kernel, reading the DQ's 8-bit input and writing the Q's 8-bit
output; the float tensors in between disappear:

    DQ(x) -> Conv(DQ(W), DQ(b)) [-> Relu] -> Q  =>  QConv(x, W, b')     int32 acc, requantized
    DQ(x) -> Gemm/MatMul(DQ(W)) -> Q            =>  QMatMul(x, W^T, b')
    DQ(a), DQ(b) -> Add / Mul -> Q              =>  QAdd / QMul
    DQ(x) -> AveragePool / GlobalAveragePool / ReduceMean(spatial) -> Q  =>  QAvgPool
    DQ(x) -> BatchNormalization / Mul,Add,Sub,Div by constants -> Q      =>  QAffine
    DQ(x) -> unary elementwise chain (Sigmoid, Tanh, LeakyRelu, ...) -> Q =>  QLut (256 entries)
    DQ(x) -> MaxPool / Reshape / Flatten / Squeeze / Unsqueeze / Transpose / Gather / Slice
          / Concat -> Q
          with the same scale and zero point  =>  the op on the 8-bit tensor itself
    DQ(x) -> Resize -> Q                        =>  QResize (nearest: a gather, through a
          requantizing table if the scales differ; linear/cubic: the float taps on
          dequantized inputs, rounded as Q does); a QAffine requantization after it
          (into a Concat's scale) is folded into its table

Relu and Clip before the Q become the kernel's clamp bounds (exact: rounding
is monotonic). Multipliers sx*sw[c]/sy become int32 mantissa + shift
(mtvm/ops/quantized/); biases are re-expressed in units of sx*sw[c] with
the zero-point corrections folded in. The QOperator ops (QLinearConv, ...)
are lowered to the same kernels by `lower` of their definitions in
mtvm/ops/quantized/qoperator.py, called from here.

Anything else stays float between its DQ and Q; `float_fallback_nodes` lists
those nodes (reported in metadata.json and by `mtvm compile`).
"""
from __future__ import annotations

import logging

import numpy as np

from ..interp import run_node
from ..ir import Graph, Node, Tensor
from ..ops.base import get_op
from ..ops.quantized.common import DOMAIN, quantize_multiplier
from ..ops.quantized.elementwise import add_multipliers
from ..ops.quantized.softmax import softmax_bits, softmax_table
from ..ops.quantize import dequantize_ref, qrange, quantize_ref
from ..ops.reduce import reduced_axes
from ..qparams import QP, dense_node, requant_node, usable_scale
from ..qparams import avgpool_node as _avgpool_node
from ..qparams import multiplier_consts as _mult_consts
from ..qparams import per_axis as _vec
from ..qparams import to_quant_params as _qparams

log = logging.getLogger("mtvm")

CLAMPS = ("Relu", "Clip")
PASS_THROUGH = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Gather", "Slice")


class Ctx:
    def __init__(self, g: Graph):
        self.g = g
        self.producers = {o: n for n in g.nodes for o in n.outputs if o}
        self.consumers = g.consumers()
        self.counter = 0
        self._values: dict = {}

    def const(self, name: str, depth: int = 0):
        """Value of a constant or of a constant subgraph (DQ of weights, Identity, ...)."""
        if not name:
            return None
        if name in self._values:
            return self._values[name]
        self._values[name] = value = self._const(name, depth)
        return value

    def _const(self, name: str, depth: int):
        t = self.g.tensors.get(name)
        if t is not None and t.data is not None:
            return t.data
        p = self.producers.get(name)
        if p is None or depth > 8 or p.tail:
            return None
        vals = {}
        for i in p.inputs:
            if i and self.const(i, depth + 1) is None:
                return None
        sub = Graph(self.g.name, self.g.tensors, [], [], [])
        with np.errstate(all="ignore"):
            run_node(sub, p, _ConstLookup(self, vals))
        return vals.get(name)

    def qparams(self, node: Node, data_rank: int) -> QP | None:
        """Scale/zero point of a Q or DQ node (constant), or None."""
        scale = self.const(node.inputs[1]) if len(node.inputs) > 1 else None
        if scale is None:
            return None
        zp = self.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
        dtype = np.dtype(self.g.tensors[node.outputs[0]].dtype if node.op == "QuantizeLinear"
                         else self.g.tensors[node.inputs[0]].dtype)
        scale = np.asarray(scale, np.float64)
        if not usable_scale(scale):
            return None
        zp = np.zeros(scale.shape, np.int64) if zp is None else np.asarray(zp, np.int64)
        axis = None
        if scale.size > 1:
            axis = node.attrs.get("axis", 1)
            axis = axis + data_rank if axis < 0 else axis
        return QP(scale.ravel() if axis is not None else scale.reshape(()),
                  zp.ravel() if axis is not None else zp.reshape(()), dtype, axis)

    def dq_source(self, name: str, per_tensor: bool = True):
        """(8-bit tensor name, QP) when `name` is the output of a DQ."""
        p = self.producers.get(name)
        if p is None or p.op != "DequantizeLinear" or p.domain or p.tail:
            return None
        qp = self.qparams(p, len(self.g.tensors[name].shape))
        if qp is None or (per_tensor and qp.axis is not None):
            return None
        if qp.dtype.name not in ("int8", "uint8", "int32"):
            return None
        return p.inputs[0], qp

    def dq_const(self, name: str):
        """(integer constant array, QP) of a DQ whose input is a constant."""
        src = self.dq_source(name, per_tensor=False)
        if src is None:
            return None
        value = self.const(src[0])
        return None if value is None else (value, src[1])

    def single_use(self, name: str) -> bool:
        return name not in self.g.outputs and len(self.consumers.get(name, [])) == 1

    def add_const(self, hint: str, value) -> str:
        return self.g.add_const(hint, np.ascontiguousarray(value))

    def new_tensor(self, hint: str, shape, dtype, qp: QP | None = None) -> str:
        name = hint
        while name in self.g.tensors:
            self.counter += 1
            name = f"{hint}_{self.counter}"
        self.g.tensors[name] = Tensor(name, tuple(shape), np.dtype(dtype), quant=_qparams(qp))
        return name


class _ConstLookup(dict):
    """The `values` dict run_node writes to, reading constant inputs through ctx.const."""

    def __init__(self, ctx, out):
        super().__init__()
        self.ctx, self.out = ctx, out

    def __contains__(self, name):
        return self.ctx.const(name) is not None

    def __getitem__(self, name):
        return self.ctx.const(name)

    def __setitem__(self, name, value):
        self.out[name] = value


def clamp_bounds(ctx: Ctx, acts: list[Node], qy: QP) -> tuple[int, int] | None:
    """The output range after the fused Relu/Clip, in the output's integers."""
    lo, hi = qrange(qy.dtype)
    for a in acts:
        if a.op == "Relu":
            lo = max(lo, qy.z)
        elif a.op == "Clip":
            if len([i for i in a.inputs if i]) > 1:
                return None
            if a.attrs.get("min") is not None:
                lo = max(lo, int(quantize_ref(np.float32(a.attrs["min"]), qy.s, qy.z,
                                              qy.dtype)))
            if a.attrs.get("max") is not None:
                hi = min(hi, int(quantize_ref(np.float32(a.attrs["max"]), qy.s, qy.z,
                                              qy.dtype)))
        else:
            return None
    return lo, hi


def _bias(ctx: Ctx, name: str, qx: QP, w_scale, oc: int):
    """(float bias or None, int32 bias in units of sx*sw when stored so, or None)."""
    if not name:
        return None, None
    dq = ctx.dq_const(name)
    if dq is not None:
        b, qb = dq
        if qb.dtype == np.int32 and not np.any(qb.zp) and np.allclose(
                _vec(qb.scale, oc), qx.s * _vec(w_scale, oc), rtol=1e-6, atol=0):
            return None, _vec(b, oc).astype(np.int64)
    value = ctx.const(name)
    if value is None:
        return False, None
    return np.asarray(value, np.float64), None


# -- rules: (ctx, op node, fused clamps, q node, qy) -> list of new nodes or None -------

def rule_conv(ctx, p, acts, q, qy):
    xs = ctx.dq_source(p.inputs[0])
    wq = ctx.dq_const(p.inputs[1])
    if xs is None or wq is None or xs[1].dtype.name not in ("int8", "uint8"):
        return None
    (x_name, qx), (w, qw) = xs, wq
    if w.dtype.name not in ("int8", "uint8") or w.ndim not in (3, 4) or \
            (qw.axis not in (None, 0)):
        return None
    clamp = clamp_bounds(ctx, acts, qy)
    b_real, b_int = _bias(ctx, p.inputs[2] if len(p.inputs) > 2 else "", qx, qw.scale,
                          w.shape[0])
    if clamp is None or b_real is False:
        return None
    a = p.attrs
    rank = w.ndim - 2
    attrs = dict(strides=list(a.get("strides", [1] * rank)), pads=list(a.get("pads", [0] * 2 * rank)),
                 dilations=list(a.get("dilations", [1] * rank)), group=int(a.get("group", 1)))
    w_name = ctx.dq_source(p.inputs[1], per_tensor=False)[0]
    n = dense_node(ctx, "QConv", p.name, x_name, qx, w, qw.scale, qw.zp, b_real, b_int, qy,
                   clamp, q.outputs[0], attrs, w_name=w_name)
    return [n] if n else None


def rule_conv_transpose(ctx, p, acts, q, qy):
    """A ConvTranspose in integers, its int8 weights kept int8 (in float they were four
    times the flash: denoise_unet_int8's 32 KiB).

    Kernel == stride (a U-Net's up-convolution): y[co, h s + i, w s + j] =
    sum_ci x[ci, h, w] W[ci, co, i, j] is a pointwise QConv with Co s^2 output channels
    (co, i, j), then DepthToSpace (CRD: channel co s^2 + i s + j goes to
    (h s + i, w s + j)). Otherwise, where the float pass would decompose it
    (passes/conv_transpose.py: a strided one with a larger kernel, padding, output
    padding): one QConv per phase, then the interleave (Concat, Reshape, Transpose,
    Reshape, Slice). Either way the nodes after the QConvs only move bytes, so the
    requantization and the fused clamp commute with them."""
    from ..ops.conv_transpose import stride_sized
    from .conv_transpose import interleave, phase_plan, phase_weights
    xs, wq = ctx.dq_source(p.inputs[0]), ctx.dq_const(p.inputs[1])
    if xs is None or wq is None or xs[1].dtype.name not in ("int8", "uint8"):
        return None
    (x_name, qx), (w, qw) = xs, wq
    x_shape = ctx.g.tensors[p.inputs[0]].shape
    if w.dtype.name not in ("int8", "uint8") or w.ndim not in (3, 4) or \
            w.ndim != len(x_shape) or qw.axis not in (None, 1) or p.attrs.get("group", 1) != 1:
        return None     # grouped: dequantized, then the float pass's grouped phases
    sized = stride_sized(x_shape, w.shape, p.attrs)
    plan = None if sized else phase_plan(x_shape, w.shape, p.attrs)
    if not (sized and w.ndim == 4 and w.shape[2] == w.shape[3]) and plan is None:
        return None
    clamp = clamp_bounds(ctx, acts, qy)
    ci, co = w.shape[0], w.shape[1]
    b_real, b_int = _bias(ctx, p.inputs[2] if len(p.inputs) > 2 else "", qx, qw.scale, co)
    if clamp is None or b_real is False:
        return None
    out_dtype = ctx.g.tensors[q.outputs[0]].dtype

    def qconv(name, w_conv, reps, out, pads):   # w_conv [Co reps][Ci][taps...]
        def rows(v):   # a per-output-channel vector, one entry per row of w_conv
            return None if v is None else np.repeat(_vec(v, co), reps)
        rank = w_conv.ndim - 2
        return dense_node(ctx, "QConv", name, x_name, qx, w_conv, rows(qw.scale),
                          rows(qw.zp), rows(b_real), rows(b_int), qy, clamp, out,
                          dict(strides=[1] * rank, pads=list(pads), dilations=[1] * rank,
                               group=1))
    if sized:
        s = w.shape[2]
        w_pw = np.ascontiguousarray(w.transpose(1, 2, 3, 0).reshape(co * s * s, ci, 1, 1))
        mid = ctx.new_tensor(f"{p.name}_phases", (x_shape[0], co * s * s, *x_shape[2:]),
                             out_dtype, qy)
        n = qconv(p.name, w_pw, s * s, mid, [0, 0, 0, 0])
        return None if n is None else \
            [n, Node("DepthToSpace", f"{p.name}_interleave", [mid], [q.outputs[0]],
                     dict(blocksize=s, mode="CRD"))]
    nodes, phases = [], []
    for r, (taps, attrs) in enumerate(plan["phases"]):
        out = ctx.new_tensor(f"{p.name}_phase{r}", (x_shape[0], co, *plan["t"]), out_dtype, qy)
        n = qconv(f"{p.name}_phase{r}", phase_weights(w, taps), 1, out, attrs["pads"])
        if n is None:
            return None
        nodes.append(n)
        phases.append(out)
    tail = interleave(ctx.g, p.name, phases, q.outputs[0], plan, out_dtype)
    for t in tail[:-1]:
        for o in t.outputs:
            ctx.g.tensors[o].quant = _qparams(qy)
    return nodes + tail


def rule_gemm(ctx, p, acts, q, qy):
    xs = ctx.dq_source(p.inputs[0])
    wq = ctx.dq_const(p.inputs[1])
    if p.op == "MatMul" and wq is None and xs is not None:
        bs = ctx.dq_source(p.inputs[1])     # activation x activation
        clamp = clamp_bounds(ctx, acts, qy)
        if bs is None or clamp is None or xs[1].dtype.name not in ("int8", "uint8") or \
                bs[1].dtype.name not in ("int8", "uint8") or \
                min(len(ctx.g.tensors[i].shape) for i in p.inputs[:2]) < 2:
            return None     # (a vector operand: QBatchMatMul takes matrices; it stays float)
        from ..ops.quantized.qoperator import batch_matmul_node
        n = batch_matmul_node(ctx, p.name, xs[0], xs[1], bs[0], bs[1], qy, q.outputs[0], clamp)
        return [n] if n else None
    if xs is None or wq is None or xs[1].dtype.name not in ("int8", "uint8"):
        return None
    (x_name, qx), (w, qw) = xs, wq
    if w.dtype.name not in ("int8", "uint8") or w.ndim != 2:
        return None
    a = p.attrs
    if p.op == "Gemm":
        if a.get("transA", 0) or len(ctx.g.tensors[p.inputs[0]].shape) != 2:
            return None
        trans_b, alpha, beta = a.get("transB", 0), a.get("alpha", 1.0), a.get("beta", 1.0)
    else:
        trans_b, alpha, beta = 0, 1.0, 1.0
    if qw.axis is not None and qw.axis != (0 if trans_b else 1):
        return None
    w_nk = w if trans_b else np.ascontiguousarray(w.T)
    n_out = w_nk.shape[0]
    clamp = clamp_bounds(ctx, acts, qy)
    bias_name = p.inputs[2] if p.op == "Gemm" and len(p.inputs) > 2 else ""
    b_real, b_int = _bias(ctx, bias_name, qx, qw.scale, n_out)
    if clamp is None or b_real is False:
        return None
    if b_real is not None:
        if np.size(b_real) not in (1, n_out):
            return None
        # in output units: alpha (x w) + beta C, alpha carried by the weight scale
        b_real = _vec(b_real, n_out) * beta
    elif b_int is not None and (alpha != 1.0 or beta != 1.0):
        return None
    w_name = ctx.dq_source(p.inputs[1], per_tensor=False)[0] if trans_b else None
    n = dense_node(ctx, "QMatMul", p.name, x_name, qx, w_nk, np.asarray(qw.scale) * alpha,
                   qw.zp, b_real, b_int, qy, clamp, q.outputs[0], {}, w_name=w_name)
    return [n] if n else None


def rule_add_mul(ctx, p, acts, q, qy):
    srcs = [ctx.dq_source(i) for i in p.inputs[:2]]
    if any(s is None or s[1].dtype.name not in ("int8", "uint8") for s in srcs):
        return rule_affine(ctx, p, acts, q, qy)
    clamp = clamp_bounds(ctx, acts, qy)
    if clamp is None:
        return None
    (a, qa), (b, qb) = srcs
    lo, hi = clamp
    lut = scalar_operand_lut(ctx, p, srcs, qy, clamp, q.outputs[0])
    if lut is not None:
        return [lut]
    if p.op == "Add":
        ia, ib, n = add_multipliers(qa.s / qy.s, qb.s / qy.s)
        attrs = dict(a_zp=qa.z, b_zp=qb.z, y_zp=qy.z, a_mult=ia, b_mult=ib, shift=n,
                     act_min=lo, act_max=hi)
        return [Node("QAdd", p.name, [a, b], [q.outputs[0]], attrs, domain=DOMAIN)]
    my, sy = quantize_multiplier(qa.s * qb.s / qy.s)
    attrs = dict(a_zp=qa.z, b_zp=qb.z, y_zp=qy.z, y_mult=int(my[0]), y_shift=int(sy[0]),
                 act_min=lo, act_max=hi)
    return [Node("QMul", p.name, [a, b], [q.outputs[0]], attrs, domain=DOMAIN)]


def scalar_operand_lut(ctx, p, srcs, qy: QP, clamp, out: str) -> Node | None:
    """An Add or Mul whose other operand is one constant value (the 1 of a GELU's 1 + erf,
    a scale): a function of one byte, tabulated as onnxruntime computes DQ -> op -> Q in
    float32 (the integer QAdd/QMul round once where the float chain rounds the sum and the
    quotient: one step apart on some values, and such steps add up along a chain). None
    when neither operand is a one-element constant or the output is broadcast wider."""
    out_shape = tuple(ctx.g.tensors[p.outputs[0]].shape)
    for j in (0, 1):
        c = ctx.const(srcs[j][0])
        x_name, qx = srcs[1 - j]
        if c is None or np.size(c) != 1 or \
                tuple(ctx.g.tensors[p.inputs[1 - j]].shape) != out_shape:
            continue
        lo, hi = qrange(qx.dtype)
        vx = dequantize_ref(np.arange(lo, hi + 1).astype(qx.dtype), qx.s, np.array(qx.z))
        vc = dequantize_ref(np.asarray(c).reshape(1), srcs[j][1].s, np.array(srcs[j][1].z))[0]
        with np.errstate(all="ignore"):
            v = (vx + vc) if p.op == "Add" else (vx * vc)     # IEEE: commutative
        table = np.clip(quantize_ref(v.astype(np.float32), qy.s, np.array(qy.z), qy.dtype),
                        clamp[0], clamp[1]).astype(qy.dtype)
        return Node("QLut", p.name, [x_name, ctx.add_const(p.name + "_table", table)], [out],
                    {}, domain=DOMAIN)
    return None


# The integer average pool keeps one (multiplier, shift) per window count, so
# its constants grow with the window: larger windows stay float.
MAX_AVGPOOL_WINDOW = 1 << 16


def rule_avgpool(ctx, p, acts, q, qy):
    xs = ctx.dq_source(p.inputs[0])
    clamp = clamp_bounds(ctx, acts, qy)
    if xs is None or clamp is None or xs[1].dtype.name not in ("int8", "uint8"):
        return None
    x_name, qx = xs
    shape = ctx.g.tensors[p.inputs[0]].shape
    a = p.attrs
    if p.op == "ReduceMean":
        # canonical by now: the axes an attribute (ops/reduce.py), opset 18's input too
        axes = reduced_axes(len(shape), a.get("axes"), a.get("noop_with_empty_axes", 0))
        if axes is None:
            return None
        if axes != list(range(2, len(shape))) or len(shape) not in (3, 4):
            return _reduce_mean_as_pool(ctx, p, x_name, qx, qy, clamp, shape, axes, q)
    if len(shape) not in (3, 4):
        return None
    if p.op == "GlobalAveragePool":
        kernel, strides, pads, include = list(shape[2:]), [1] * (len(shape) - 2), \
            [0] * (2 * (len(shape) - 2)), 1
    elif p.op == "ReduceMean":
        kernel, strides, pads, include = list(shape[2:]), [1] * (len(shape) - 2), \
            [0] * (2 * (len(shape) - 2)), 1
    else:
        if any(d != 1 for d in a.get("dilations", [1])) or a.get("ceil_mode", 0):
            return None
        kernel, strides = a["kernel_shape"], a.get("strides", [1] * len(a["kernel_shape"]))
        pads, include = a.get("pads", [0] * 2 * len(kernel)), a.get("count_include_pad", 0)
    if np.prod(kernel, dtype=object) > MAX_AVGPOOL_WINDOW:
        return None
    n = _avgpool_node(ctx, p, x_name, qx, qy, clamp, kernel, strides, pads, include,
                      q.outputs[0])
    # The kernel's geometry must give the float op's output size.
    ref = get_op("QAvgPool", DOMAIN).reference
    zeros = np.zeros(shape, qx.dtype)
    try:
        got = ref(zeros, ctx.const(n.inputs[1]), ctx.const(n.inputs[2]),
                  **{k: v for k, v in n.attrs.items() if k != "out_shape"})
    except Exception:
        return None
    return [n] if got.size == ctx.g.tensors[q.outputs[0]].size else None


def _reduce_mean_as_pool(ctx, p, x_name, qx, qy, clamp, shape, axes, q):
    """A ReduceMean over contiguous axes that are not the trailing spatial ones (a
    transformer's mean over the sequence of [1, S, D]) as an average pool: the tensor
    viewed as [1, P, R, Q] (the dims before, in and after the reduced ones), a window
    of R x 1, the result [1, P, 1, Q] viewed as the output (both views Reshapes: no
    copy). In float it needed the whole tensor dequantized in the arena."""
    if axes != list(range(axes[0], axes[-1] + 1)):
        return None
    pre = int(np.prod(shape[:axes[0]], dtype=np.int64))
    red = int(np.prod(shape[axes[0]:axes[-1] + 1], dtype=np.int64))
    post = int(np.prod(shape[axes[-1] + 1:], dtype=np.int64))
    if red > MAX_AVGPOOL_WINDOW or red == 0:
        return None
    view = ctx.new_tensor(f"{x_name}_pool_view", (1, pre, red, post), qx.dtype, qx)
    pooled = ctx.new_tensor(f"{q.outputs[0]}_pooled", (1, pre, 1, post), qy.dtype, qy)
    pool = _avgpool_node(ctx, p, view, qx, qy, clamp, [red, 1], [1, 1], [0, 0, 0, 0], 1,
                         pooled)
    out_shape = list(ctx.g.tensors[q.outputs[0]].shape)
    return [Node("Reshape", f"{p.name}_view", [x_name], [view],
                 dict(shape=[1, pre, red, post], allowzero=0)),
            pool,
            Node("Reshape", f"{p.name}_out", [pooled], [q.outputs[0]],
                 dict(shape=out_shape, allowzero=0))]


def rule_maxpool(ctx, p, acts, q, qy):
    xs = ctx.dq_source(p.inputs[0])
    if xs is None or len([o for o in p.outputs if o]) != 1 or acts or not xs[1].same(qy) \
            or xs[1].dtype.name not in ("int8", "uint8") or p.attrs.get("ceil_mode", 0):
        return None
    if p.attrs.get("storage_order", 0) or len(ctx.g.tensors[p.inputs[0]].shape) not in (3, 4):
        return None
    a = p.attrs
    k = a["kernel_shape"]
    attrs = dict(kernel_shape=list(k), strides=list(a.get("strides", [1] * len(k))),
                 pads=list(a.get("pads", [0] * 2 * len(k))),
                 dilations=list(a.get("dilations", [1] * len(k))))
    return [Node("QMaxPool", p.name, [xs[0]], [q.outputs[0]], attrs, domain=DOMAIN)]


def rule_pass_through(ctx, p, acts, q, qy):
    """Layout ops move bytes: run them on the 8-bit tensor when the scales match."""
    xs = ctx.dq_source(p.inputs[0])
    if xs is None or acts or not xs[1].same(qy) or get_op(p.op, p.domain) is None:
        return None
    n = p.copy()
    n.inputs[0] = xs[0]
    n.outputs = [q.outputs[0]]
    return [n]


def rule_concat(ctx, p, acts, q, qy):
    srcs = [ctx.dq_source(i) for i in p.inputs]
    if acts or any(s is None or s[1].dtype != qy.dtype for s in srcs):
        return None
    nodes, ins = [], []
    for i, (name, qx) in enumerate(srcs):
        if qx.same(qy):
            ins.append(name)
            continue
        mid = ctx.new_tensor(f"{p.name}_in{i}_requantized", ctx.g.tensors[name].shape,
                             qy.dtype, qy)
        nodes.append(requant_node(ctx, f"{p.name}_requantize{i}", name, qx, qy, mid))
        ins.append(mid)
    n = p.copy()
    n.inputs, n.outputs = ins, [q.outputs[0]]
    return nodes + [n]


def rule_resize(ctx, p, acts, q, qy):
    """Resize on the 8-bit tensor (QResize): a gather for nearest (with a requantizing
    table when the scales differ), else the float taps on dequantized values, rounded
    as QuantizeLinear does (mtvm/ops/quantized/resize.py). (Upsample is deprecated from
    opset 10, where QuantizeLinear starts: it never sits between DQ and Q.)"""
    from ..ops.quantized.resize import RESIZE_ATTRS
    xs = ctx.dq_source(p.inputs[0])
    if xs is None or acts or len([i for i in p.inputs if i]) != 1 or \
            xs[1].dtype.name not in ("int8", "uint8") or qy.dtype.name not in ("int8", "uint8"):
        return None
    x_name, qx = xs
    a = p.attrs
    if any(k.startswith("_") and k not in ("_roi", "_scales", "_sizes") for k in a):
        return None
    attrs = {k: a[k] for k in RESIZE_ATTRS if k in a}
    attrs.update(roi=a.get("_roi"), scales=a.get("_scales"), sizes=a.get("_sizes"))
    if attrs.get("mode", "nearest") not in ("nearest", "linear", "cubic"):
        return None
    lo, _ = qrange(qx.dtype)
    values = np.arange(lo, lo + 256).astype(qx.dtype)
    ev = np.float32(a.get("extrapolation_value", 0.0))
    attrs.update(x_scale=float(np.float32(qx.s)), x_zp=qx.z, y_scale=float(np.float32(qy.s)),
                 y_zp=qy.z, y_dtype=qy.dtype.name,
                 ext_q=int(quantize_ref(np.array([ev]), qy.s, np.array(qy.z), qy.dtype)[0]))
    inputs = [x_name]
    if attrs["mode"] == "nearest" and not (qx.same(qy) and qx.dtype == qy.dtype):
        remap = quantize_ref(dequantize_ref(values, qx.s, np.array(qx.z)), qy.s,
                             np.array(qy.z), qy.dtype)
        inputs.append(ctx.add_const(p.name + "_remap", remap))
    n = Node("QResize", p.name, inputs, [q.outputs[0]], attrs, domain=DOMAIN)
    # The kernel's geometry must give the float op's output shape.
    ref = get_op("QResize", DOMAIN).reference
    try:
        got = ref(np.zeros(ctx.g.tensors[p.inputs[0]].shape, qx.dtype),
                  *[ctx.const(i) for i in inputs[1:]], **attrs)
    except Exception:
        return None
    return [n] if tuple(got.shape) == tuple(ctx.g.tensors[q.outputs[0]].shape) else None


def fuse_resize_requantize(ctx) -> None:
    """A QResize whose only reader is a per-tensor QAffine (the requantization the
    Concat rule inserts) or a QLut takes that function into its remap table."""
    g = ctx.g
    cons = g.consumers()
    producers = {o: n for n in g.nodes for o in n.outputs if o}
    drop = set()
    for n in g.nodes:
        if n.op != "QResize" or n.domain != DOMAIN or id(n) in drop:
            continue
        t = n.outputs[0]
        readers = cons.get(t, [])
        dead = [c for c in readers if c.op == "DequantizeLinear" and not c.domain and
                not cons.get(c.outputs[0]) and c.outputs[0] not in g.outputs]
        readers = [c for c in readers if c not in dead]
        if t in g.outputs or len(readers) != 1:
            continue
        c = readers[0]
        if c.domain != DOMAIN or c.op not in ("QAffine", "QLut") or c.inputs[0] != t or c.tail:
            continue
        consts = [ctx.const(i) for i in c.inputs[1:]]
        if any(v is None for v in consts) or \
                (c.op == "QAffine" and any(np.size(v) != 1 for v in consts)):
            continue
        tdt = g.tensors[t].dtype
        lo, _ = qrange(tdt)
        values = np.arange(lo, lo + 256).astype(tdt)
        try:
            table = np.asarray(get_op(c.op, DOMAIN).reference(values, *consts, **c.attrs))
        except Exception:
            continue
        if table.dtype != np.dtype(g.tensors[c.outputs[0]].dtype):
            continue
        old = ctx.const(n.inputs[1]) if len(n.inputs) > 1 else None
        if len(n.inputs) > 1 and old is None:
            continue
        n.attrs["ext_q"] = int(table[int(n.attrs.get("ext_q", 0)) - lo])
        if old is not None:
            table = table[np.asarray(old).astype(np.int64) - lo]
        x_dt = g.tensors[n.inputs[0]].dtype
        if n.attrs.get("mode") == "nearest" and np.dtype(x_dt) == table.dtype and \
                np.array_equal(table, np.arange(lo, lo + 256)):
            n.inputs = n.inputs[:1]
        else:
            n.inputs = [n.inputs[0], ctx.add_const(n.name + "_remap", table)]
        n.outputs = [c.outputs[0]]
        drop.add(id(c))
        drop.update(id(d) for d in dead)
        if producers.get(t) is n:
            g.tensors.pop(t, None)
    if drop:
        g.nodes = [n for n in g.nodes if id(n) not in drop]


AFFINE = ("BatchNormalization", "Mul", "Add", "Sub", "Div")


def _affine_step(ctx, n: Node, value: str, k, t):
    """Compose (k, t) of y = k*x + t with node n applied to x = `value`; None if not affine."""
    if n.op == "BatchNormalization":
        if n.inputs[0] != value or len([o for o in n.outputs if o]) != 1:
            return None
        vals = [ctx.const(i) for i in n.inputs[1:5]]
        if any(v is None for v in vals):
            return None
        s, b, m, v = (np.asarray(x, np.float64) for x in vals)
        kk = s / np.sqrt(v + n.attrs.get("epsilon", 1e-5))
        rank = len(ctx.g.tensors[value].shape)
        shape = (1, -1) + (1,) * (rank - 2)
        kk, tt = kk.reshape(shape), (b - m * kk).reshape(shape)
        return k * kk, t * kk + tt
    others = [i for i in n.inputs[:2] if i != value]
    if len(n.inputs) != 2 or len(others) != 1:
        return None
    c = ctx.const(others[0])
    if c is None:
        return None
    c = np.asarray(c, np.float64)
    first = n.inputs[0] == value
    if n.op == "Mul":
        return k * c, t * c
    if n.op == "Add":
        return k, t + c
    if n.op == "Sub":
        return (k, t - c) if first else (-k, c - t)
    if n.op == "Div" and first:
        return k / c, t / c
    return None


def rule_affine(ctx, p, acts, q, qy):
    """A chain of BatchNormalization / Mul / Add / Sub / Div by constants."""
    chain = [p]
    while True:
        cand = [i for i in chain[0].inputs[:1 if chain[0].op == "BatchNormalization" else 2]
                if i and ctx.const(i) is None]
        if len(cand) != 1:
            return None
        src = ctx.producers.get(cand[0])
        if src is not None and src.op in AFFINE and not src.domain and ctx.single_use(cand[0]):
            chain.insert(0, src)
            continue
        break
    xs = ctx.dq_source(cand[0])
    clamp = clamp_bounds(ctx, acts, qy)
    if xs is None or clamp is None or xs[1].dtype.name not in ("int8", "uint8"):
        return None
    x_name, qx = xs
    shape = ctx.g.tensors[cand[0]].shape
    k, t, value = np.ones(()), np.zeros(()), cand[0]
    for n in chain:
        r = _affine_step(ctx, n, value, k, t)
        if r is None:
            return None
        k, t = r
        value = n.outputs[0]
    rank = len(shape)
    k = np.broadcast_to(k, np.broadcast_shapes(np.shape(k), np.shape(t)))
    t = np.broadcast_to(t, k.shape)
    if k.ndim > rank or np.broadcast_shapes(k.shape, shape) != tuple(shape):
        return None
    k = k.reshape((1,) * (rank - k.ndim) + k.shape)
    t = t.reshape(k.shape)
    varying = [d for d in range(rank) if k.shape[d] > 1]
    if len(varying) > 1:
        return None
    axis = varying[0] if varying else 1
    kc, tc = k.ravel().astype(np.float64), t.ravel().astype(np.float64)
    r = kc * qx.s / qy.s                   # output units per input step
    o = tc / qy.s                          # output units of the offset
    p_bits = 16
    while True:
        scale = np.where(r > 0, 1, np.where(r < 0, -1, 0)) << p_bits
        real = np.where(r != 0, np.abs(r), 1.0) / (1 << p_bits)
        offset = np.rint(o / real)
        if np.abs(offset).max(initial=0) + 256 * (1 << p_bits) < (1 << 31) or p_bits == 0:
            break
        p_bits -= 2
    if np.abs(offset).max(initial=0) >= 1 << 31:
        return None
    mult, shift = quantize_multiplier(real)
    lo, hi = clamp
    inputs = [x_name, ctx.add_const(p.name + "_scale", scale.astype(np.int32)),
              ctx.add_const(p.name + "_offset", offset.astype(np.int32)),
              ctx.add_const(p.name + "_mult", mult), ctx.add_const(p.name + "_shift", shift)]
    return ([Node("QAffine", p.name, inputs, [q.outputs[0]],
                  dict(axis=axis, x_zp=qx.z, y_zp=qy.z, act_min=lo, act_max=hi), domain=DOMAIN)],
            chain[:-1])


def lut_node(ctx, nodes: list[Node], x_name: str, qx: QP, qy: QP, out: str,
             value: str | None = None) -> Node:
    """Tabulate a chain of float ops on all 256 values of the 8-bit input: unary
    ops, and (with `value`, the float tensor the chain starts from) binary ones
    whose other operand is a one-element constant (_scalar_operand)."""
    lo, hi = qrange(qx.dtype)
    xs = np.arange(lo, hi + 1).astype(qx.dtype)
    v = dequantize_ref(xs, qx.s, np.array(qx.z))
    with np.errstate(all="ignore"):
        for n in nodes:
            args = [v if i == value or value is None else
                    np.asarray(ctx.const(i), np.float32).reshape(()) for i in n.inputs if i]
            v = np.asarray(get_op(n.op, n.domain).reference(*args, **n.attrs), np.float32)
            value = n.outputs[0] if value is not None else None
    table = quantize_ref(v, qy.s, np.array(qy.z), qy.dtype)
    name = nodes[-1].name
    return Node("QLut", name, [x_name, ctx.add_const(name + "_table", table)], [out], {},
                domain=DOMAIN)


def rule_layernorm(ctx, p, acts, q, qy):
    """LayerNormalization over an 8-bit tensor (QLayerNorm): the float statistics and
    normalization, read from and written to 8 bits (mtvm/ops/quantized/layernorm.py).
    Scale and B constant, one value per normalized element or one for all; only the
    normalized output used (not Mean / InvStdDev)."""
    xs = ctx.dq_source(p.inputs[0])
    clamp = clamp_bounds(ctx, acts, qy)
    if xs is None or clamp is None or xs[1].dtype.name not in ("int8", "uint8") or \
            qy.dtype != xs[1].dtype or p.attrs.get("stash_type", 1) != 1 or \
            any(o for o in p.outputs[1:]):
        return None
    shape = ctx.g.tensors[p.inputs[0]].shape
    axis = p.attrs.get("axis", -1)
    axis = axis + len(shape) if axis < 0 else axis
    cols = int(np.prod(shape[axis:], dtype=np.int64))
    from ..ops.quantized.layernorm import MAX_COLS, fold_params
    vals = [ctx.const(i) if i else None for i in (p.inputs + ["", ""])[1:3]]
    if cols > MAX_COLS or vals[0] is None or (p.inputs[2:3] and p.inputs[2] and vals[1] is None):
        return None
    if any(v is not None and (np.size(v) not in (1, cols) or np.asarray(v).dtype != np.float32)
           for v in vals) or np.size(vals[0]) != np.size(vals[1] if vals[1] is not None
                                                       else vals[0]):
        return None
    gain, offset = fold_params(vals[0], vals[1], np.float32(qy.s), qy.z)
    x_name, qx = xs
    lo, hi = clamp
    return [Node("QLayerNorm", p.name, [x_name, ctx.add_const(p.name + "_gain", gain),
                                        ctx.add_const(p.name + "_offset", offset)],
                 [q.outputs[0]], dict(axis=axis, epsilon=float(p.attrs.get("epsilon", 1e-5)),
                                      x_scale=float(np.float32(qx.s)), x_zp=qx.z, y_zp=qy.z,
                                      act_min=lo, act_max=hi), domain=DOMAIN)]


def rule_softmax(ctx, p, acts, q, qy):
    """Softmax over the last axis, from an exp table (integer-only)."""
    xs = ctx.dq_source(p.inputs[0])
    clamp = clamp_bounds(ctx, acts, qy)
    if xs is None or clamp is None or xs[1].dtype.name not in ("int8", "uint8"):
        return None
    shape = ctx.g.tensors[p.inputs[0]].shape
    default = -1 if ctx.g.opset >= 13 else 1
    axis = p.attrs.get("axis", default)
    axis = axis + len(shape) if axis < 0 else axis
    if any(d != 1 for d in shape[axis + 1:]) or len(shape) == 0:
        return None
    if ctx.g.opset < 13 and any(d != 1 for d in shape[axis + 1:]):
        return None
    x_name, qx = xs
    inv = int(round((1 << 16) / qy.s))
    if inv >= 1 << 32 or shape[axis] > 1 << 11:
        return None
    lo, hi = clamp
    table = ctx.add_const(p.name + "_exp", softmax_table(qx.s, softmax_bits(shape[axis], qy.s)))
    return [Node("QSoftmax", p.name, [x_name, table], [q.outputs[0]],
                 dict(inv=inv, y_zp=qy.z, act_min=lo, act_max=hi), domain=DOMAIN)]


RULES = {"Conv": rule_conv, "ConvTranspose": rule_conv_transpose, "Softmax": rule_softmax, "LayerNormalization": rule_layernorm, "Gemm": rule_gemm, "MatMul": rule_gemm, "Add": rule_add_mul,
         "Mul": rule_add_mul, "Sub": rule_affine, "Div": rule_affine,
         "BatchNormalization": rule_affine, "AveragePool": rule_avgpool,
         "GlobalAveragePool": rule_avgpool, "ReduceMean": rule_avgpool,
         "MaxPool": rule_maxpool, "Concat": rule_concat, "Resize": rule_resize}
RULES.update({op: rule_pass_through for op in PASS_THROUGH})


def _is_unary(ctx: Ctx, n: Node) -> bool:
    op = get_op(n.op, n.domain)
    return bool(op and op.elementwise and not n.domain and len([i for i in n.inputs if i]) == 1
                and len([o for o in n.outputs if o]) == 1 and not n.tail
                and n.op not in ("Identity",))


def _scalar_operand(ctx: Ctx, n: Node, value: str) -> bool:
    """Whether n is a float elementwise op of `value` and one one-element constant
    (x / sqrt(2) before an Erf): a function of `value` alone, tabulated as unary ones are."""
    op = get_op(n.op, n.domain)
    ins = [i for i in n.inputs if i]
    if not (op and op.elementwise and not n.domain and len(ins) == 2 and value in ins
            and len([o for o in n.outputs if o]) == 1 and not n.tail):
        return False
    other = ins[1] if ins[0] == value else ins[0]
    c = ctx.const(other)
    return other != value and c is not None and np.size(c) == 1 and \
        np.asarray(c).dtype.kind == "f"


def _lut_chain(ctx: Ctx, value: str, skip) -> tuple[list[Node], str] | None:
    """The single-use chain of unary and scalar-operand float ops from a
    DequantizeLinear of 8-bit data to `value` (a QuantizeLinear's input), and the
    DequantizeLinear's output; None when the chain does not start at one."""
    chain = []
    while True:
        p = ctx.producers.get(value)
        if p is None or id(p) in skip:
            return None
        if p.op == "DequantizeLinear" and not p.domain:
            return (chain, value) if chain else None
        if chain and not ctx.single_use(value):    # an intermediate result read elsewhere
            return None
        src = next((i for i in p.inputs if i and ctx.const(i) is None), None)
        if src is None or not (_is_unary(ctx, p) or _scalar_operand(ctx, p, src)):
            return None
        chain.insert(0, p)
        value = src


def lower_quantized(graph: Graph) -> Graph:
    """Rewrite every DQ -> op -> Q pattern with an integer kernel (see module doc)."""
    g = graph.copy()
    if not any(n.op in ("QuantizeLinear", "DequantizeLinear") or
               hasattr(get_op(n.op, n.domain), "lower") for n in g.nodes):
        return g
    ctx = Ctx(g)
    replaced: dict[int, list[Node]] = {}
    dropped: set[int] = set()
    for q in list(g.nodes):
        if q.domain in ("", "com.microsoft") and hasattr(get_op(q.op, q.domain), "lower"):
            new = get_op(q.op, q.domain).lower(ctx, q)
            if new:
                replaced[id(q)] = new
            continue
        if q.op != "QuantizeLinear" or q.domain or id(q) in dropped:
            continue
        qy = ctx.qparams(q, len(g.tensors[q.inputs[0]].shape))
        if qy is None or qy.axis is not None or qy.dtype.name not in ("int8", "uint8"):
            continue
        # Walk back over single-use unary elementwise ops to the anchor.
        value = q.inputs[0]
        if not ctx.single_use(value):
            continue
        chain = []
        while True:
            p = ctx.producers.get(value)
            if p is None or id(p) in dropped or id(p) in replaced or not _is_unary(ctx, p):
                break
            chain.insert(0, p)
            value = p.inputs[0]
            if not ctx.single_use(value):
                break
        anchor = ctx.producers.get(value)
        new, extra = None, []
        if anchor is None or id(anchor) in replaced or id(anchor) in dropped or anchor.tail:
            continue
        if anchor.op == "DequantizeLinear" and not anchor.domain:
            xs = ctx.dq_source(value)
            if chain and xs is not None and xs[1].dtype.name in ("int8", "uint8"):
                new = [lut_node(ctx, chain, xs[0], xs[1], qy, q.outputs[0])]
        elif not anchor.domain and anchor.op in RULES and ctx.single_use(value) and \
                all(c.op in CLAMPS for c in chain):
            try:
                new = RULES[anchor.op](ctx, anchor, chain, q, qy)
            except (ValueError, KeyError, TypeError) as e:
                log.debug("quantize: %s %s not lowered: %s", anchor.op, anchor.name, e)
                new = None
            if isinstance(new, tuple):
                new, extra = new
        if not new and anchor.op != "DequantizeLinear":
            # GELU's x / sqrt(2) -> Erf, or any chain of ops with scalar operands: a table
            found = _lut_chain(ctx, q.inputs[0], set(dropped) | set(replaced))
            xs = ctx.dq_source(found[1]) if found else None
            if xs is not None and xs[1].dtype.name in ("int8", "uint8"):
                chain, anchor = found[0], ctx.producers[found[1]]
                new = [lut_node(ctx, chain, xs[0], xs[1], qy, q.outputs[0], found[1])]
        if not new:
            continue
        g.tensors[q.outputs[0]].quant = _qparams(qy)
        if anchor.op == "DequantizeLinear":
            replaced[id(chain[0])] = new
            dropped.update(id(c) for c in chain[1:])
        else:
            replaced[id(anchor)] = new
            dropped.update(id(c) for c in chain + extra)
        dropped.add(id(q))
    if not replaced:
        return g
    nodes = []
    for n in g.nodes:
        if id(n) in dropped:
            continue
        nodes.extend(replaced.get(id(n), [n]))
    g.nodes = nodes
    fuse_resize_requantize(ctx)
    _annotate(ctx)
    fallback = float_fallback_nodes(g)
    if fallback:
        log.debug("%d node(s) run in float between DequantizeLinear and QuantizeLinear "
                 "(no integer kernel): %s", len(fallback), ", ".join(fallback))
    return g


def _annotate(ctx: Ctx) -> None:
    """Record scale and zero point on every 8-bit tensor a Q writes or a DQ reads."""
    g = ctx.g
    for n in g.nodes:
        if n.domain or n.op not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        t = n.outputs[0] if n.op == "QuantizeLinear" else n.inputs[0]
        if t in g.tensors and g.tensors[t].quant is None and not g.tensors[t].is_const:
            qp = ctx.qparams(n, len(g.tensors[t].shape))
            if qp is not None:
                g.tensors[t].quant = _qparams(qp)


def float_fallback_nodes(g: Graph) -> list[str]:
    """Nodes of a quantized graph computing in float on dequantized activations:
    those reading a (non-constant) DequantizeLinear output or feeding a QuantizeLinear."""
    producers = {o: n for n in g.nodes for o in n.kernel_outputs}
    quant_inputs = {n.inputs[0] for n in g.nodes if n.op == "QuantizeLinear" and not n.domain}
    out = []
    for n in g.nodes:
        if n.domain or n.op in ("QuantizeLinear", "DequantizeLinear") or n.alias:
            continue
        reads_dq = any(
            (p := producers.get(i)) is not None and p.op == "DequantizeLinear" and not p.domain
            for i in n.inputs if i)
        if reads_dq or any(o in quant_inputs for o in n.kernel_outputs):
            out.append(f'{n.op} "{n.name}"')
    return out


def quantization_metadata(g: Graph) -> dict:
    """metadata.json entries: how many kernels are integer, which nodes fell back
    to float (also as a note, which `mtvm compile` prints)."""
    if not any(n.domain == DOMAIN or n.op in ("QuantizeLinear", "DequantizeLinear")
               for n in g.nodes):
        return {}
    fallback = float_fallback_nodes(g)
    md = {"quantization": {"integer_kernels": sum(n.domain == DOMAIN for n in g.nodes),
                           "float_fallback": fallback}}
    if fallback:
        md["notes"] = [f"{len(fallback)} node(s) run in float between DequantizeLinear and "
                       f"QuantizeLinear (no integer kernel): {', '.join(fallback)}"]
    return md
