"""Shape-only operators. Reshape/Flatten/Squeeze/Unsqueeze change no bytes:
they become zero-copy aliases (a memcpy only where the output must be its own
buffer, e.g. a graph output). Identity copies."""
from __future__ import annotations

import numpy as np

from .base import Op, move_input_to_attr, register


class AliasOp(Op):
    alias = True

    def emit(self, k, **attrs):
        # Only reached when the output must be a distinct buffer.
        return f"memcpy(out0, in0, {k.out.size * k.out.dtype.itemsize});"


@register("Reshape")
class Reshape(AliasOp):
    def canonicalize(self, node, graph, opset):
        move_input_to_attr(graph, node, 1, "shape")

    def reference(self, x, *, shape, allowzero=0):
        shape = list(shape)
        if not allowzero:
            shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return x.reshape(shape)


@register("Flatten")
class Flatten(AliasOp):
    def axis_ranks(self, node, inputs):
        return {"axis": (len(inputs[0].shape), 1)} if "axis" in node.attrs else {}

    def reference(self, x, *, axis=1):
        axis = axis + x.ndim if axis < 0 else axis
        return x.reshape(int(np.prod(x.shape[:axis])), -1) if x.size else \
            x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))


@register("Squeeze")
class Squeeze(AliasOp):
    def canonicalize(self, node, graph, opset):
        if opset >= 13:
            move_input_to_attr(graph, node, 1, "axes", lambda v: np.atleast_1d(v).tolist())

    def reference(self, x, *, axes=None):
        if axes is None:
            return np.squeeze(x)
        return np.squeeze(x, axis=tuple(a + x.ndim if a < 0 else a for a in axes))


@register("Unsqueeze")
class Unsqueeze(AliasOp):
    def canonicalize(self, node, graph, opset):
        if opset >= 13:
            move_input_to_attr(graph, node, 1, "axes", lambda v: np.atleast_1d(v).tolist())

    def axis_ranks(self, node, inputs):
        axes = node.attrs.get("axes")
        return {} if axes is None else {"axes": (len(inputs[0].shape) + len(axes), 0)}

    def reference(self, x, *, axes):
        rank = x.ndim + len(axes)
        axes = sorted(a + rank if a < 0 else a for a in axes)
        for a in axes:
            x = np.expand_dims(x, a)
        return x


@register("Identity")
class Identity(Op):
    elementwise = True

    def reference(self, x):
        return x.copy()

    def scalar(self, k, args):
        return args[0]

    def emit(self, k, **attrs):
        return f"memcpy(out0, in0, {k.out.size * k.out.dtype.itemsize});"
