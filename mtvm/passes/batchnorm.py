"""BatchNormalization folding.

  Conv(x, W, b) -> BN(s, t, m, v)   =>  Conv(x, W*k, (b-m)*k + t),  k = s/sqrt(v+eps)
  Gemm(x, B, c) -> BN               =>  same, k applied per output column
  BN alone                          =>  x*k + (t - m*k)   (a Mul and an Add, which fuse)
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node


def _bn_params(g: Graph, bn: Node):
    vals = [g.const(i) for i in bn.inputs[1:5]]
    if any(v is None for v in vals) or len(bn.outputs) > 1 and any(bn.outputs[1:]):
        return None
    s, t, m, v = (np.asarray(x, np.float64) for x in vals)
    k = s / np.sqrt(v + bn.attrs.get("epsilon", 1e-5))
    return k, t - m * k


def _fold_into(g: Graph, prod: Node, k, shift) -> bool:
    """Scale the producer's output channels by k and add shift; False if impossible."""
    w = g.const(prod.inputs[1])
    if w is None or w.dtype.kind != "f":
        return False
    if prod.op == "Conv":
        if w.shape[0] != k.size:
            return False
        new_w = w * k.reshape((-1,) + (1,) * (w.ndim - 1))
        out_ch = w.shape[0]
    elif prod.op == "Gemm":
        if prod.attrs.get("transA", 0) or w.ndim != 2:
            return False
        tb = prod.attrs.get("transB", 0)
        out_ch = w.shape[0] if tb else w.shape[1]
        if out_ch != k.size:
            return False
        new_w = w * (k.reshape(-1, 1) if tb else k.reshape(1, -1))
    else:
        return False
    bias = g.const(prod.inputs[2]) if len(prod.inputs) > 2 and prod.inputs[2] else None
    if len(prod.inputs) > 2 and prod.inputs[2] and bias is None:
        return False
    if prod.op == "Gemm":
        alpha, beta = prod.attrs.get("alpha", 1.0), prod.attrs.get("beta", 1.0)
        if bias is not None and np.broadcast_shapes(bias.shape, (out_ch,)) != (out_ch,):
            return False  # a full-matrix C cannot be scaled per column without a copy
        b = np.zeros(out_ch) if bias is None else np.asarray(bias, np.float64) * beta
        new_w = new_w * alpha
        prod.attrs["alpha"], prod.attrs["beta"] = 1.0, 1.0
    else:
        b = np.zeros(out_ch) if bias is None else np.asarray(bias, np.float64)
    new_b = b * k + shift
    prod.inputs[1] = g.add_const(prod.inputs[1] + "_bnfold", new_w.astype(w.dtype))
    name = g.add_const((prod.inputs[2] if len(prod.inputs) > 2 and prod.inputs[2] else
                        prod.name + "_bias") + "_bnfold", new_b.astype(w.dtype))
    if len(prod.inputs) > 2:
        prod.inputs[2] = name
    else:
        prod.inputs.append(name)
    return True


def fold_batchnorm(graph: Graph) -> Graph:
    g = graph.copy()
    producers = {o: n for n in g.nodes for o in n.outputs}
    uses = g.consumers()
    drop = set()
    new_nodes = []
    for n in g.nodes:
        if n.op != "BatchNormalization" or n.domain:
            new_nodes.append(n)
            continue
        params = _bn_params(g, n)
        if params is None:
            new_nodes.append(n)
            continue
        k, shift = params
        x = n.inputs[0]
        prod = producers.get(x)
        if prod is not None and len(uses.get(x, [])) == 1 and x not in g.outputs \
                and not prod.tail and _fold_into(g, prod, k, shift):
            # The producer now writes the BN output directly.
            prod.outputs[prod.outputs.index(x)] = n.outputs[0]
            drop.add(x)
            continue
        # Standalone: scale-shift broadcast over axis 1.
        rank = len(g.tensors[x].shape)
        shape = (-1,) + (1,) * max(rank - 2, 0)
        dt = g.tensors[x].dtype
        kc = g.add_const(n.name + "_scale", k.reshape(shape).astype(dt))
        sc = g.add_const(n.name + "_shift", shift.reshape(shape).astype(dt))
        mid = n.outputs[0] + "_scaled"
        g.tensors[mid] = g.tensors[n.outputs[0]].__class__(mid, g.tensors[x].shape, dt)
        new_nodes.append(Node("Mul", n.name + "_mul", [x, kc], [mid]))
        new_nodes.append(Node("Add", n.name + "_add", [mid, sc], [n.outputs[0]]))
    g.nodes = new_nodes
    for d in drop:
        g.tensors.pop(d, None)
    return g
