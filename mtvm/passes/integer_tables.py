"""Integer elementwise subgraphs of one 8-bit tensor become one table (QLut).

After lower_quantized, a GELU in a quantized transformer is four kernels over the
same 8-bit tensor x: tables for Erf, + 1 and * 0.5, then a QMul of x and that
result. Every value they produce is a function of one 8-bit element of x, so the
whole cone is a 256-entry table, computed here by running the integer kernels'
own references on all 256 values of x: the same bytes, one pass instead of four
(kwt_tiny_int8 on the Cortex-M4: 3 kernels and 4 tables fewer per layer)."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from ..ops.base import get_op
from ..ops.quantized.common import DOMAIN

# Integer elementwise ops whose output element depends only on the same element of
# their full-size inputs (and on one-element constants).
TABULABLE = ("QLut", "QMul", "QAdd", "QAffine")


def _elementwise(g: Graph, n: Node) -> bool:
    """Whether n is a tabulable op with every constant input of one element (QLut:
    its table) and every other input the output's shape."""
    if n.domain != DOMAIN or n.op not in TABULABLE or n.tail or len(n.outputs) != 1:
        return False
    shape = g.tensors[n.outputs[0]].shape
    for j, i in enumerate(n.inputs):
        t = g.tensors.get(i) if i else None
        if t is None:
            return False
        if t.is_const:
            if t.size != 1 and not (n.op == "QLut" and j == 1):
                return False
        elif t.shape != shape:
            return False
    return True


def _cone(g: Graph, root: Node, producers, uses) -> tuple[list[Node], set[str]]:
    """The nodes of root's elementwise cone (inputs first) and its leaf tensors:
    an input is expanded into its producer when that producer is tabulable and
    root's cone is the only reader of its output."""
    nodes: list[Node] = []
    leaves: set[str] = set()

    def visit(n: Node) -> None:
        for i in n.inputs:
            if g.tensors[i].is_const:
                continue
            p = producers.get(i)
            if p is not None and uses.get(i, 0) == 1 and i not in g.outputs and \
                    _elementwise(g, p):
                visit(p)
            else:
                leaves.add(i)
        nodes.append(n)

    visit(root)
    return nodes, leaves


def _table(g: Graph, nodes: list[Node], x: str) -> np.ndarray:
    """The cone's output for every value of the 8-bit tensor x."""
    dtype = np.dtype(g.tensors[x].dtype)
    info = np.iinfo(dtype)
    values = {x: np.arange(info.min, info.max + 1).astype(dtype)}
    for n in nodes:
        args = [values[i] if i in values else np.asarray(g.tensors[i].data).reshape(
            g.tensors[i].data.shape if n.op == "QLut" else ()) for i in n.inputs]
        values[n.outputs[0]] = np.asarray(get_op(n.op, n.domain).reference(*args, **n.attrs))
    return values[nodes[-1].outputs[0]].astype(g.tensors[nodes[-1].outputs[0]].dtype)


def tabulate_integer_cones(graph: Graph) -> Graph:
    """Replace each cone of two or more tabulable kernels over one 8-bit tensor
    by one QLut. A single QMul or QAdd of x and a constant stays: on hosts with
    vectors it is faster than a table lookup."""
    if not any(n.domain == DOMAIN and n.op in TABULABLE for n in graph.nodes):
        return graph
    g = graph.copy()
    producers = g.producers()
    uses = {name: len(readers) for name, readers in g.consumers().items()}
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    # Last node first, so each cone is taken whole from its root.
    for n in reversed(g.nodes):
        if id(n) in dropped or not _elementwise(g, n):
            continue
        nodes, leaves = _cone(g, n, producers, uses)
        if len(nodes) < 2 or len(leaves) != 1:
            continue
        x = next(iter(leaves))
        if np.dtype(g.tensors[x].dtype).name not in ("int8", "uint8") or \
                np.dtype(g.tensors[n.outputs[0]].dtype).name not in ("int8", "uint8"):
            continue
        table = g.add_const(n.name + "_table", _table(g, nodes, x))
        replaced[id(n)] = Node("QLut", n.name, [x, table], list(n.outputs), {}, domain=DOMAIN)
        dropped.update(id(m) for m in nodes[:-1])
    if not replaced:
        return graph
    g.nodes = [replaced.get(id(n), n) for n in g.nodes if id(n) not in dropped]
    return g
