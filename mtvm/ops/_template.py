"""Skeleton of an operator definition: copy into a module of mtvm/ops/ (or add
the class to its family's module), then add test cases in tests/ops/.

Everything about the operator lives in the class: the shape rule, the NumPy
reference and the C emitter. Attributes arrive as keyword arguments named as
in the ONNX spec, with the spec's defaults.
"""
import numpy as np

from .base import Op, register


@register("MyOp")                      # ONNX op type(s); domain="..." for others
class MyOp(Op):
    elementwise = False                # True: implement scalar() instead of emit()
    anchor = False                     # True: emit() applies k.epilogue() to each value

    def canonicalize(self, node, graph, opset):
        """Older opsets / constant inputs -> the attribute form used below."""

    def reference(self, x, *, alpha=1.0):
        return (x * alpha).astype(x.dtype)

    def infer(self, node, inputs, consts):
        x = inputs[0]
        return [(x.shape, x.dtype)]

    def macs(self, node, inputs, outputs):
        return outputs[0].size

    def emit(self, k, *, alpha=1.0):
        # k.ins[i] / k.out: Buf(c=param name, shape, dtype, const); k.lit(v) a C literal.
        return (f"for (size_t i = 0; i < {k.out.size}; ++i) {{\n"
                f"    {k.ctype} v = {k.lit(alpha)} * {k.ins[0].c}[i];\n"
                f"    {k.epilogue('v', 'i')}\n"
                f"    out0[i] = v;\n"
                f"}}")


del MyOp   # the template registers nothing real
from .base import REGISTRY as _R  # noqa: E402
_R.pop(("", "MyOp"), None)
