"""A quantized ONNX model evaluated with exact quantization arithmetic: the
second tie-breaker of validation (mtvm.validate.TIE_BREAKERS), after
onnxruntime's integer kernels.

The reference proper (onnxruntime, graph optimizations off) runs each QDQ layer
as ONNX writes it: dequantize to float32, the float op in float32, quantize.
When the true value of an output element is within float32's rounding of x.5
steps, the reference may round it to the wrong side, and later layers can grow
that one step to several. onnxruntime's integer kernels (graph optimizations
on) settle that only in the layers it fuses into them; a Conv whose input also
feeds a residual Add it leaves in float32 (a MobileNetV2 of `bench/variants.py
--seed 19`: one value of exactly 34.5000009 steps is 34.499996 in float32, and
6 steps at the softmax).

Here the same model runs in the ONNX reference evaluator (NumPy) with its float
tensors in float64: DequantizeLinear produces float64, the float ops compute in
float64 (an int8 layer's sums are exact, their products with the scales good to
1e-16), QuantizeLinear rounds half to even as ONNX defines. A float32 graph
input is still quantized in float32, as ONNX defines for float32 data. This is
no better reference for the ops whose float32 result mtvm reproduces (Add,
Resize, Softmax... of dequantized values): it is only tried for an output that
is off, and it is slower than onnxruntime.
"""
from __future__ import annotations

import copy

import numpy as np

_FLOAT = 1       # onnx.TensorProto.FLOAT
_DOUBLE = 11     # onnx.TensorProto.DOUBLE


def _widen_tensor(t) -> None:
    """A FLOAT TensorProto becomes a DOUBLE one with the same values, in place."""
    from onnx import numpy_helper
    if t.data_type != _FLOAT:
        return
    a = numpy_helper.to_array(t).astype(np.float64)
    t.CopyFrom(numpy_helper.from_array(a, t.name))


def _widen_graph(g) -> None:
    from onnx import helper
    for t in g.initializer:
        _widen_tensor(t)
    for vi in list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == _FLOAT:
            vi.type.tensor_type.elem_type = _DOUBLE
    for node in g.node:
        for i, attr in enumerate(node.attribute):
            if attr.name == "to" and node.op_type == "Cast" and attr.i == _FLOAT:
                attr.i = _DOUBLE
            elif attr.name in ("value", "value_float", "value_floats") and node.op_type in (
                    "Constant", "ConstantOfShape"):
                if attr.name == "value":
                    _widen_tensor(attr.t)
                else:           # a float32 constant: as a float64 tensor
                    v = np.asarray(helper.get_attribute_value(attr), np.float64)
                    t = helper.make_tensor("value", _DOUBLE, v.shape, v.ravel())
                    node.attribute[i].CopyFrom(helper.make_attribute("value", t))
            if attr.g.node:
                _widen_graph(attr.g)
            for sub in attr.graphs:
                _widen_graph(sub)


def _widen_float_inputs(g) -> None:
    """A float32 graph input stays float32 for the QuantizeLinear nodes that take
    it (quantizing float32 data is defined in float32: x / scale, rounded); every
    other node gets it through a Cast to float64."""
    from onnx import helper
    inits = {t.name for t in g.initializer}
    casts = []
    for vi in g.input:
        if vi.name in inits or vi.type.tensor_type.elem_type != _FLOAT:
            continue
        wide = f"{vi.name}.float64"
        users = [(n, i) for n in g.node for i, x in enumerate(n.input) if x == vi.name
                 and not (n.op_type == "QuantizeLinear" and i == 0)]
        for n, i in users:
            n.input[i] = wide
        if users:
            casts.append(helper.make_node("Cast", [vi.name], [wide], to=_DOUBLE))
    for k, node in enumerate(casts):
        g.node.insert(k, node)


def _along(v, x: np.ndarray, axis: int, block_size: int) -> np.ndarray:
    """A scale or zero point as float64, broadcastable against x: a scalar, one
    value per index of `axis`, or (block_size) one per block of it."""
    v = np.asarray(v, np.float64)
    if v.size == 1:
        return v.reshape(())
    axis %= x.ndim
    if block_size:
        return np.repeat(v, block_size, axis=axis).take(range(x.shape[axis]), axis=axis)
    shape = [1] * x.ndim
    shape[axis] = v.size
    return v.reshape(shape)


def _evaluator(model):
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun

    class DequantizeLinear(OpRun):
        op_domain = ""

        def _run(self, x, x_scale, x_zero_point=None, axis=1, block_size=0,
                 output_dtype=None):
            zp = 0.0 if x_zero_point is None else _along(x_zero_point, x, axis, block_size)
            return ((x.astype(np.float64) - zp) * _along(x_scale, x, axis, block_size),)

    class QuantizeLinear(OpRun):
        op_domain = ""

        def _run(self, x, y_scale, y_zero_point=None, axis=1, saturate=1, block_size=0,
                 output_dtype=None, precision=None):
            from onnx import helper
            if y_zero_point is not None:
                dtype = np.asarray(y_zero_point).dtype
            else:
                dtype = np.dtype(helper.tensor_dtype_to_np_dtype(output_dtype)) \
                    if output_dtype else np.dtype(np.uint8)
            if dtype.kind not in "iu":
                raise NotImplementedError(f"QuantizeLinear to {dtype}")
            zp = 0.0 if y_zero_point is None else _along(y_zero_point, x, axis, block_size)
            scale = _along(y_scale, x, axis, block_size)
            x = np.asarray(x)
            if x.dtype == np.float32:       # float32 data (a graph input): in float32
                scale = scale.astype(np.float32)
            q = np.rint(x / scale).astype(np.float64) + zp
            info = np.iinfo(dtype)
            return (np.clip(q, info.min, info.max).astype(dtype),)

    m = copy.deepcopy(model)
    _widen_graph(m.graph)
    _widen_float_inputs(m.graph)
    return ReferenceEvaluator(m, new_ops=[DequantizeLinear, QuantizeLinear])


class ExactReference:
    """The model (a path or a ModelProto) in exact quantization arithmetic; build
    once, run per sample. run() returns the outputs (graph order), or None when
    the reference evaluator cannot run the model so (an op it lacks, a type it
    refuses): then nothing is settled by it."""

    def __init__(self, model):
        import onnx
        try:
            if not isinstance(model, onnx.ModelProto):
                model = onnx.load(str(model))
            self.evaluator = _evaluator(model)
        except Exception:
            self.evaluator = None

    def run(self, inputs: dict) -> list | None:
        if self.evaluator is None:
            return None
        feeds = {}
        for name in self.evaluator.input_names:
            if name not in inputs:
                return None
            feeds[name] = np.asarray(inputs[name])
        try:
            return [np.asarray(o) for o in self.evaluator.run(None, feeds)]
        except Exception:
            return None

