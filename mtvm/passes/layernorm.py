"""A LayerNormalization written out as its arithmetic becomes the one op.

Exports before opset 17 (PyTorch's nn.LayerNorm, many TensorFlow graphs) have no
LayerNormalization: each one is nine ops,

    m = ReduceMean(x, axes=[-1]);  d = Sub(x, m);  v = ReduceMean(Pow(d, 2), axes=[-1])
    y = Div(d, Sqrt(Add(v, eps)))  [* Scale]  [+ B]

nine kernels, five of them elementwise passes over the tensor, where the op is one
kernel with its statistics in registers. The match is strict: the last axes reduced
with keepdims, Pow by 2 (or d * d), one-element epsilon, Scale and B constants of the
normalized dims, every intermediate read only inside the pattern (d by the Pow and the
Div), all float32. The fused op computes the same expressions (mean, mean of the
squared deviations, the division) up to float rounding. A quantized model whose
quantizer put QuantizeLinear/DequantizeLinear between these ops keeps them: fused,
its rounding between the steps would be lost.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from ..ops.reduce import reduced_axes


def _scalar(g: Graph, name: str) -> float | None:
    v = g.const(name)
    return float(v.ravel()[0]) if v is not None and v.size == 1 and v.dtype.kind == "f" \
        else None


def _reduced_tail(g: Graph, n: Node) -> int | None:
    """The first axis of a ReduceMean over the last axes with keepdims, else None."""
    if n.op != "ReduceMean" or n.domain or not n.attrs.get("keepdims", 1):
        return None
    rank = len(g.tensors[n.inputs[0]].shape)
    axes = n.attrs.get("axes")      # canonical: opset 18's axes input is the attribute
    if not axes:
        return None
    axes = reduced_axes(rank, axes, 0)
    return axes[0] if axes == list(range(axes[0], rank)) else None


def fuse_layernorm(graph: Graph) -> Graph:
    """Replace each written-out LayerNormalization (see module doc) by the op."""
    if not any(n.op == "ReduceMean" for n in graph.nodes):
        return graph
    g = graph.copy()
    uses = g.consumers()

    def only_use(name: str, op: str) -> Node | None:
        """The one consumer of `name`, if it is an `op` (no graph output, no tail)."""
        c = uses.get(name, [])
        if len(c) != 1 or name in g.outputs or c[0].op != op or c[0].domain or c[0].tail:
            return None
        return c[0]

    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for mean in g.nodes:
        axis = _reduced_tail(g, mean)
        if axis is None or id(mean) in dropped or mean.tail:
            continue
        x = mean.inputs[0]
        if np.dtype(g.tensors[x].dtype) != np.float32:
            continue
        sub = only_use(mean.outputs[0], "Sub")
        if sub is None or sub.inputs != [x, mean.outputs[0]]:
            continue
        d = sub.outputs[0]
        c = list({id(n): n for n in uses.get(d, [])}.values())    # Mul(d, d) reads it twice
        if len(c) != 2 or d in g.outputs:
            continue
        sq = next((n for n in c if n.op in ("Pow", "Mul")), None)
        div = next((n for n in c if n.op == "Div"), None)
        if sq is None or div is None or sq.tail or div.tail or div.inputs[0] != d:
            continue
        if not ((sq.op == "Pow" and sq.inputs[0] == d and _scalar(g, sq.inputs[1]) == 2.0) or
                (sq.op == "Mul" and sq.inputs == [d, d])):
            continue
        var = only_use(sq.outputs[0], "ReduceMean")
        if var is None or _reduced_tail(g, var) != axis:
            continue
        add = only_use(var.outputs[0], "Add")
        if add is None or var.outputs[0] not in add.inputs:
            continue
        eps = _scalar(g, add.inputs[1] if add.inputs[0] == var.outputs[0] else add.inputs[0])
        sqrt = only_use(add.outputs[0], "Sqrt")
        if eps is None or eps < 0 or sqrt is None or div.inputs[1] != sqrt.outputs[0] or \
                len(uses.get(sqrt.outputs[0], [])) != 1:
            continue
        chain = [mean, sub, sq, var, add, sqrt, div]
        norm_shape = g.tensors[x].shape[axis:]
        out, params = div.outputs[0], {}
        for op in ("Mul", "Add"):            # * Scale, then + B, each optional
            nxt = only_use(out, op)
            if nxt is None:
                continue
            other = nxt.inputs[1] if nxt.inputs[0] == out else nxt.inputs[0]
            v = g.const(other)
            if v is None or v.dtype != np.float32 or len(v.shape) > len(norm_shape) or \
                    np.broadcast_shapes(v.shape, norm_shape) != tuple(norm_shape):
                continue
            params[op] = np.broadcast_to(v, norm_shape).astype(np.float32)
            chain.append(nxt)
            out = nxt.outputs[0]
        scale, bias = params.get("Mul"), params.get("Add")
        if any(g.tensors[n.outputs[0]].shape != g.tensors[x].shape for n in (sub, div)):
            continue
        ones = np.ones(norm_shape, np.float32) if scale is None else scale
        inputs = [x, g.add_const(f"{div.name}_scale", ones)]
        if bias is not None:
            inputs.append(g.add_const(f"{div.name}_bias", bias))
        replaced[id(chain[-1])] = Node("LayerNormalization", chain[-1].name, inputs, [out],
                                       dict(axis=axis, epsilon=float(np.float32(eps))))
        dropped.update(id(n) for n in chain[:-1])
    if not replaced:
        return graph
    g.nodes = [replaced.get(id(n), n) for n in g.nodes if id(n) not in dropped]
    return g
