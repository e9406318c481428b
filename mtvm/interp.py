"""The NumPy interpreter of the IR. It is the spec: a pass is correct when
interp(before) == interp(after), and generated C is checked against it."""
from __future__ import annotations

import numpy as np

from .ir import Graph, Node
from .ops.base import get_op


def run_node(graph: Graph, node: Node, values: dict) -> None:
    """Evaluate `node` (and its fused tail), storing outputs into `values`."""
    def get(name):
        if not name:
            return None
        return values[name] if name in values else graph.tensors[name].data

    for part in [node] + node.tail:
        op = get_op(part.op, part.domain)
        outs = op.reference(*[get(i) for i in part.inputs], **part.attrs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for name, value in zip(part.outputs, outs):
            if name:
                t = graph.tensors[name]
                values[name] = np.asarray(value, dtype=t.dtype).reshape(t.shape)


def interpret(graph: Graph, inputs: dict, keep_all: bool = False) -> dict:
    """Run the graph on `inputs` ({name: array}); returns {output name: array}
    (every intermediate tensor too with keep_all)."""
    values = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        if name not in inputs:
            raise KeyError(f"missing input {name}")
        values[name] = np.asarray(inputs[name], t.dtype).reshape(t.shape)
    for node in graph.nodes:
        run_node(graph, node, values)
    if keep_all:
        return values
    return {o: values[o] if o in values else graph.tensors[o].data for o in graph.outputs}
