"""ConvTranspose as convolutions over its phases.

A stride-s ConvTranspose writes each output position o from the kernel taps k
with o + pad - k = s i (i an input position): the positions of one phase
r = o mod s take the taps k = c, c + s, c + 2s, ... (c = (r + pad) mod s), and
output t of the phase (o = r + s t) reads input t + base - j at tap c + j s
(base = (r + pad - c) / s). That is a stride-1 Conv of the input with those taps
in reverse order and pads (n - 1 - base, and what gives ceil(O / s) outputs) --
a Conv the fast schedules compute, where the ConvTranspose kernel visits every
tap of every output position and keeps the one in s^D that lands.

    ConvTranspose(x, W, b)  =>  Conv_r(x, W_r, b) for every phase r (s^D of them)
                                -> Concat over channels -> Reshape -> Transpose
                                (the phases interleaved) -> Reshape [-> Slice]

The kernel == stride case (a U-Net's 2x2 up-convolution) keeps its own
schedule (schedules/generic/conv_transpose_f32.py: one pointwise GEMM per phase).
Rewritten: float32, 1-D or 2-D, constant W, any groups (each phase a grouped Conv), no
dilation, a stride above 1 in some dimension, every phase with at least one tap and pads >= 0
(padding below the kernel size); the rest stays one ConvTranspose kernel. The
QDQ pass decomposes int8 ones the same way, before this pass runs (phase_plan,
phase_weights, interleave; mtvm/passes/quantize.py rule_conv_transpose).
"""
from __future__ import annotations

import itertools

import numpy as np

from ..ir import Graph, Node, Tensor


def _phases(size_in: int, size_out: int, k: int, s: int, pad: int):
    """Per phase r < s of one dimension: (first tap c, taps n, pad_begin, pad_end), or
    None when some phase has no tap or would need a negative pad."""
    t = -(-size_out // s)
    out = []
    for r in range(s):
        c = (r + pad) % s
        n = len(range(c, k, s))
        base = (r + pad - c) // s
        pb = n - 1 - base
        pe = t - size_in - pb + n - 1
        if n == 0 or pb < 0 or pe < 0:
            return None
        out.append((c, n, pb, pe))
    return out


def _tensor(g: Graph, base: str, shape, dtype) -> str:
    name = g.fresh_name(base)
    g.tensors[name] = Tensor(name, tuple(int(d) for d in shape), np.dtype(dtype))
    return name


def phase_plan(x_shape, w_shape, attrs) -> dict | None:
    """How a ConvTranspose of these shapes decomposes (None: it does not): per phase
    r (row-major over the stride grid), the kernel taps each dimension reads (in the
    Conv's order) and the stride-1 Conv's attributes; the phase outputs' extent t."""
    from ..ops.conv_transpose import _geometry, stride_sized
    group = attrs.get("group", 1)
    if len(x_shape) not in (3, 4) or group < 1 or w_shape[0] % group or \
            (group == 1 and stride_sized(x_shape, w_shape, attrs)):
        return None
    out, pads, strides, dil, ks = _geometry(x_shape, w_shape, attrs)
    D = len(out)
    if any(d != 1 for d in dil) or all(s == 1 for s in strides) or \
            list(ks) != list(w_shape[2:]):
        return None
    per_dim = [_phases(x_shape[2 + d], out[d], ks[d], strides[d], pads[d]) for d in range(D)]
    if any(p is None for p in per_dim):
        return None
    phases = []
    for r in itertools.product(*(range(s) for s in strides)):
        ph = [per_dim[d][r[d]] for d in range(D)]
        # Conv weights [Co][Ci][taps...]: W[ci][co] at taps c + j s, in reverse order
        taps = [[c + (cnt - 1 - j) * strides[d] for j in range(cnt)]
                for d, (c, cnt, _, _) in enumerate(ph)]
        attrs_r = dict(kernel_shape=[p[1] for p in ph], strides=[1] * D, dilations=[1] * D,
                       group=group, pads=[p[2] for p in ph] + [p[3] for p in ph])
        phases.append((taps, attrs_r))
    return dict(phases=phases, out=list(out), strides=list(strides),
                t=[-(-out[d] // strides[d]) for d in range(D)])


def phase_weights(w: np.ndarray, taps, group: int = 1) -> np.ndarray:
    """W [Ci][Co / group][k...] -> the phase's Conv weights [Co][Ci / group][taps...] (group
    g's input channels g Ci / group.. feed its outputs g Co / group.., in both ops)."""
    sub = w
    for d, idx in enumerate(taps):
        sub = np.take(sub, idx, axis=2 + d)
    ci, cog, rest = sub.shape[0], sub.shape[1], sub.shape[2:]
    sub = sub.reshape(group, ci // group, cog, *rest).swapaxes(1, 2)
    return np.ascontiguousarray(sub.reshape(group * cog, ci // group, *rest))


def interleave(g: Graph, name: str, phases: list[str], y: str, plan: dict, dtype) -> list[Node]:
    """The nodes weaving the phase outputs (each [N][Co][t...], in plan order) into y:
    Concat over channels -> Reshape -> Transpose -> Reshape [-> Slice]. They only move
    elements, of any type."""
    first = g.tensors[phases[0]].shape
    N, Co, t, s, out = first[0], first[1], plan["t"], plan["strides"], plan["out"]
    D = len(t)
    nodes = []
    cat = _tensor(g, f"{y}_phases", (N, len(phases) * Co, *t), dtype)
    nodes.append(Node("Concat", g.fresh_name(f"{name}_phases"), phases, [cat], dict(axis=1)))
    grid = (N, *s, Co, *t)                  # phases first, in the Concat's order
    perm = [0, D + 1] + [i for d in range(D) for i in (D + 2 + d, 1 + d)]
    shaped = _tensor(g, f"{y}_grid", grid, dtype)
    nodes.append(Node("Reshape", g.fresh_name(f"{name}_grid"), [cat], [shaped],
                      dict(shape=list(grid), allowzero=0)))
    woven_shape = [grid[i] for i in perm]
    woven = _tensor(g, f"{y}_woven", woven_shape, dtype)
    nodes.append(Node("Transpose", g.fresh_name(f"{name}_woven"), [shaped], [woven],
                      dict(perm=perm)))
    full = (N, Co, *[t[d] * s[d] for d in range(D)])
    if list(full[2:]) == list(out):
        nodes.append(Node("Reshape", g.fresh_name(f"{name}_out"), [woven], [y],
                          dict(shape=list(full), allowzero=0)))
    else:
        flat = _tensor(g, f"{y}_full", full, dtype)
        nodes.append(Node("Reshape", g.fresh_name(f"{name}_full"), [woven], [flat],
                          dict(shape=list(full), allowzero=0)))
        nodes.append(Node("Slice", g.fresh_name(f"{name}_out"), [flat], [y],
                          dict(starts=[0] * D, ends=list(out), axes=list(range(2, 2 + D)),
                               steps=[1] * D)))
    return nodes


def _rewrite(g: Graph, n: Node) -> list[Node] | None:
    x = g.tensors.get(n.inputs[0])
    w = g.const(n.inputs[1]) if len(n.inputs) > 1 else None
    if x is None or w is None or np.dtype(x.dtype) != np.float32 or w.dtype != np.float32 \
            or n.tail or len([o for o in n.outputs if o]) != 1:
        return None
    plan = phase_plan(x.shape, w.shape, n.attrs)
    if plan is None:
        return None
    y = n.outputs[0]
    bias = n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] else None
    nodes, phases = [], []
    group = n.attrs.get("group", 1)
    for taps, attrs in plan["phases"]:
        wname = g.add_const(f"{n.inputs[1]}_phase", phase_weights(w, taps, group))
        pname = _tensor(g, f"{y}_phase", (x.shape[0], w.shape[1] * group, *plan["t"]),
                        np.float32)
        nodes.append(Node("Conv", g.fresh_name(f"{n.name}_phase"), [n.inputs[0], wname]
                          + ([bias] if bias else []), [pname], attrs))
        phases.append(pname)
    return nodes + interleave(g, n.name, phases, y, plan, np.float32)


def decompose_conv_transpose(graph: Graph) -> Graph:
    """Every ConvTranspose that _rewrite takes becomes convolutions over its phases."""
    if not any(n.op == "ConvTranspose" and not n.domain for n in graph.nodes):
        return graph
    g = graph.copy()
    nodes = []
    for n in g.nodes:
        new = _rewrite(g, n) if n.op == "ConvTranspose" and not n.domain else None
        nodes.extend(new or [n])
    g.nodes = nodes
    return g
