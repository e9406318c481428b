"""Operator fusion: an anchor kernel (Conv, Gemm, MatMul, pooling, or an
elementwise op) absorbs the chain of elementwise ops that consume only its
output — bias adds, activations, the Add of a residual — so the tail runs on
each value before it is stored and no intermediate tensor is written."""
from __future__ import annotations



from ..codegen.kernel import epilogue_mode
from ..ir import Graph, Node
from ..ops.base import get_op


def _chain_index(node: Node, value: str) -> int | None:
    idx = [i for i, x in enumerate(node.inputs) if x == value]
    return idx[0] if len(idx) == 1 else None


def _can_take(g: Graph, anchor: Node, cand: Node, value: str) -> bool:
    op = get_op(cand.op, cand.domain)
    if not op.elementwise or len([o for o in cand.outputs if o]) != 1:
        return False
    pos = _chain_index(cand, value)
    if pos is None or (pos != 0 and not getattr(op, "commutative", False)):
        return False
    out_t, val_t = g.tensors[cand.outputs[0]], g.tensors[value]
    if out_t.shape != val_t.shape or out_t.dtype != val_t.dtype:
        return False  # the tail must not broadcast the value up or change its type
    for i, other in enumerate(cand.inputs):
        if i == pos:
            continue
        if not other or g.tensors[other].dtype != val_t.dtype:
            return False
        if epilogue_mode(val_t.shape, g.tensors[other].shape) is None:
            return False
    if pos != 0:
        cand.inputs[0], cand.inputs[pos] = cand.inputs[pos], cand.inputs[0]
    return True


def fuse_elementwise_tails(graph: Graph) -> Graph:
    g = graph.copy()
    uses = g.consumers()
    fused: set[int] = set()
    for n in g.nodes:
        if id(n) in fused or n.alias or not get_op(n.op, n.domain).anchor:
            continue
        if len([o for o in n.outputs if o]) != 1:
            continue
        while True:
            value = n.kernel_outputs[0]
            users = uses.get(value, [])
            if value in g.outputs or len(users) != 1 or id(users[0]) in fused:
                break
            cand = users[0]
            if cand is n or cand.tail or not _can_take(g, n, cand, value):
                break
            n.tail.append(cand)
            fused.add(id(cand))
            # Tail inputs must already be computed when the anchor runs.
            if not _inputs_ready(g, n, cand):
                n.tail.pop()
                fused.discard(id(cand))
                break
    g.nodes = [n for n in g.nodes if id(n) not in fused]
    return g


def _inputs_ready(g: Graph, anchor: Node, cand: Node) -> bool:
    """True if every extra input of `cand` is available before `anchor` runs."""
    order = {id(n): i for i, n in enumerate(g.nodes)}
    producers = {o: n for n in g.nodes for o in n.kernel_outputs}
    for x in cand.inputs[1:]:
        p = producers.get(x)
        if p is not None and order[id(p)] > order[id(anchor)]:
            return False
    return True



