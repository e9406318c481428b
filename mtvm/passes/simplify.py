"""Simplifications: Identity removal, constant folding, dead code, aliases."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..interp import run_node
from ..ir import Graph, all_inputs
from ..ops.base import get_op
from ..ops.layout import transpose_dims

IDENTITY_OPS = {"Identity", "Dropout"}


def _rename_uses(g: Graph, old: str, new: str) -> None:
    for n in g.nodes:
        for part in [n] + n.tail:
            part.inputs = [new if i == old else i for i in part.inputs]


def remove_identities(graph: Graph) -> Graph:
    """Identity(x) -> x (Dropout at inference too): consumers read x directly.
    Kept only where it copies a graph input (or constant) into a graph output."""
    g = graph.copy()
    kept = []
    for n in g.nodes:
        if n.op in IDENTITY_OPS and not n.domain and n.inputs and n.inputs[0] and \
                len([o for o in n.outputs if o]) == 1:
            src, dst = n.inputs[0], n.outputs[0]
            if dst not in g.outputs:
                _rename_uses(g, dst, src)
                continue
            producer = next((p for p in kept if src in p.kernel_outputs), None)
            if producer is not None and src not in g.outputs:
                # The producer writes straight into the graph output.
                producer_outs = producer.tail[-1].outputs if producer.tail else producer.outputs
                producer_outs[producer_outs.index(src)] = dst
                _rename_uses(g, src, dst)
                continue
            if n.op == "Dropout":
                n.op, n.outputs, n.inputs, n.attrs = "Identity", n.outputs[:1], n.inputs[:1], {}
        kept.append(n)
    g.nodes = kept
    return g


def fold_constants(graph: Graph) -> Graph:
    """A node whose inputs are all constant becomes a constant; so does one whose
    outputs follow from static shapes alone (Shape, Size: Op.static_outputs)."""
    g = graph.copy()
    kept = []
    for n in g.nodes:
        ins = [i for i in all_inputs(n) if i]
        op = get_op(n.op, n.domain)
        static = None if n.tail else op.static_outputs(n, [g.tensors[i] if i else None
                                                            for i in n.inputs])
        if static is not None:
            for name, value in zip(n.outputs, static):
                if name:
                    t = g.tensors[name]
                    g.tensors[name] = t.__class__(name, t.shape, t.dtype,
                                                  np.asarray(value, t.dtype).reshape(t.shape))
            continue
        if n.tail or not getattr(op, "foldable", True) or \
                not all(g.tensors[i].is_const for i in ins):
            kept.append(n)
            continue
        values: dict = {}
        with np.errstate(all="ignore"):
            run_node(g, n, values)
        for name, value in values.items():
            # A new Tensor: the copied graph shares Tensor objects with its source.
            g.tensors[name] = dataclasses.replace(g.tensors[name], data=value)
    g.nodes = kept
    return g


def eliminate_dead(graph: Graph) -> Graph:
    """Drop nodes none of whose outputs reach a graph output; drop unused tensors."""
    g = graph.copy()
    live = set(g.outputs)
    kept = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.kernel_outputs if o):
            kept.append(n)
            live.update(i for i in all_inputs(n) if i)
    g.nodes = list(reversed(kept))
    used = live | set(g.inputs)
    for n in g.nodes:
        for part in [n] + n.tail:
            used.update(o for o in part.outputs if o)
    g.tensors = {k: v for k, v in g.tensors.items() if k in used}
    return g


def moves_only_unit_axes(n, g: Graph) -> bool:
    """A Transpose whose permutation keeps its axes of more than one element in order
    (it moves only axes of size 1: an attention head split with one head, [1, T, 1, D]
    -> [1, 1, T, D]): its bytes are the input's, in the same order."""
    if n.op != "Transpose" or n.domain or not n.inputs or n.inputs[0] not in g.tensors:
        return False
    # the op's own merge of its output dims: one run at stride 1 is the input's order
    dims = transpose_dims(g.tensors[n.inputs[0]].shape, n.attrs.get("perm"))
    return len(dims) == 1 and dims[0][1] == 1


def mark_aliases(graph: Graph) -> Graph:
    """Reshape/Flatten/Squeeze/Unsqueeze keep the bytes, and so does a Transpose that
    moves only axes of size 1: their output is a view of the input, unless it must be a
    distinct buffer (a graph output)."""
    g = graph.copy()
    for n in g.nodes:
        op = get_op(n.op, n.domain)
        n.alias = bool((op.alias or moves_only_unit_axes(n, g)) and
                       n.outputs[0] not in g.outputs and not g.tensors[n.inputs[0]].is_const)
    return g
