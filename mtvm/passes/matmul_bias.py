"""A QAdd of a constant row after a QMatMul becomes the QMatMul's last step.

PyTorch exports a Linear layer on a [batch, tokens, features] tensor as MatMul then
Add(bias), and onnxruntime's quantize_static puts a QuantizeLinear between them: the
matmul's output is rounded to 8 bits, then the bias (itself 8 bits) is added and the
sum rounded again. Both roundings are part of the model's arithmetic, so the bias
cannot join the accumulator; but the Add is, per output column j, a function of one
8-bit value y1, f_j(y1) = clamp(round((y1 - za) sa / sy + (b_j - zb) sb / sy) + zy).
This pass finds 32-bit constants (c_j, ia_j) and one shift n with
clamp((c_j + y1 ia_j) >> n) == f_j(y1) for every y1 the matmul can store (checked
value by value, as the DSP QAdd's narrow form is: ops/quantized/narrow.py), and gives
them to the QMatMul as input 6 ([N + 1]: the c_j and the one ia where every ia_j is
the same, else [N][2] pairs) with attrs post_shift/post_min/post_max: the kernel
applies them to each output before storing it (ops/quantized/common.py,
post_add_lines). The same bytes as the two kernels, without the second pass over
the tensor: a small transformer's projections have one such Add each (7 of the 10
QAdds of bench/variants.py's transformer_v9_int8; 7.5 instructions an element on
the Cortex-M4 as a QAdd, two in the matmul's epilogue).

Run by the C backend only (compiler._compile_graph): the LLVM backend's QMatMul
nests do not take the extra step."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from ..ops.quantized.common import DOMAIN, round_shift
from ..ops.quantized.narrow import fit_channels


def _row_constant(g: Graph, name: str, out_shape) -> np.ndarray | None:
    """The constant's values per output column (length N) when it varies only along the
    output's last axis (or is one value), else None."""
    t = g.tensors.get(name)
    if t is None or not t.is_const or len(t.shape) > len(out_shape):
        return None
    n = out_shape[-1]
    padded = (1,) * (len(out_shape) - len(t.shape)) + tuple(t.shape)
    if any(d != 1 for d in padded[:-1]) or padded[-1] not in (1, n):
        return None
    return np.broadcast_to(np.asarray(t.data, np.int64).ravel(), (n,))


def post_add_table(values: np.ndarray, row: np.ndarray, pos: int, attrs: dict
                   ) -> tuple[np.ndarray, int] | None:
    """([N][2] int32 of (c_j, ia_j), n) with clamp((c_j + v ia_j) >> n, act_min, act_max)
    equal to QAdd(attrs) of v (operand `pos`) and row[j] (the other operand) for every v
    of `values`, partial sums within int32; None when no such constants are found."""
    zp = (int(attrs["a_zp"]), int(attrs["b_zp"]))
    mult = (int(attrs["a_mult"]), int(attrs["b_mult"]))
    shift, y_zp = int(attrs["shift"]), int(attrs["y_zp"])
    lo, hi = int(attrs.get("act_min", -128)), int(attrs.get("act_max", 127))
    if not 1 <= shift <= 62:
        return None
    terms_v = (values - zp[pos]) * mult[pos]                       # [V]
    terms_b = (row - zp[1 - pos]) * mult[1 - pos]                  # [N]
    pre = round_shift(terms_v[None, :] + terms_b[:, None], shift) + y_zp     # [N][V]
    out = np.clip(pre, lo, hi)
    low, high = pre <= lo, pre >= hi
    slope = mult[pos] / 2.0 ** shift
    unit = abs(slope) * int(np.abs(values).max()) + \
        float(np.abs(terms_b - zp[pos] * mult[pos]).max()) / 2.0 ** shift + abs(y_zp) + 2
    found = fit_channels(values, out, low, high, np.full(row.size, slope), unit)
    return None if found is None else (found[0].astype(np.int32), found[1])


def fold_matmul_bias_adds(graph: Graph) -> Graph:
    g = graph.copy()
    uses = g.consumers()
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for n in g.nodes:
        if n.domain != DOMAIN or n.op != "QMatMul" or n.tail or len(n.outputs) != 1:
            continue
        # with a requantization (an int32 output, MatMulInteger, has no mult), not folded yet
        if not 5 <= len(n.inputs) <= 6 or not n.inputs[3] or "post_shift" in n.attrs:
            continue
        y1 = n.outputs[0]
        users = uses.get(y1, [])
        if y1 in g.outputs or len(users) != 1:
            continue
        add = users[0]
        if add.domain != DOMAIN or add.op != "QAdd" or add.tail or id(add) in dropped:
            continue
        pos = [i for i, x in enumerate(add.inputs[:2]) if x == y1]
        if len(pos) != 1:
            continue
        pos = pos[0]
        out_t = g.tensors[add.outputs[0]]
        y1_t = g.tensors[y1]
        if tuple(out_t.shape) != tuple(y1_t.shape) or \
                np.dtype(out_t.dtype) not in (np.int8, np.uint8):
            continue
        row = _row_constant(g, add.inputs[1 - pos], y1_t.shape)
        if row is None:
            continue
        lo1, hi1 = int(n.attrs.get("act_min", -128)), int(n.attrs.get("act_max", 127))
        found = post_add_table(np.arange(lo1, hi1 + 1, dtype=np.int64), row, pos, add.attrs)
        if found is None:
            continue
        table, shift = found
        attrs = dict(n.attrs, post_shift=int(shift),
                     post_min=int(add.attrs.get("act_min", -128)),
                     post_max=int(add.attrs.get("act_max", 127)))
        if np.all(table[:, 1] == table[0, 1]):   # one slope (the usual case): 4 bytes a column
            # and the slope last (read from flash once: as a literal gcc multiplies by
            # shifts and adds, 950 more bytes of code in transformer_v9_int8)
            table = np.append(table[:, 0], table[0, 1]).astype(np.int32)
        post = g.add_const(f"{n.name}_bias_add", table)
        ins = list(n.inputs) + [""] * (6 - len(n.inputs)) + [post]
        replaced[id(n)] = Node("QMatMul", n.name, ins, list(add.outputs), attrs, domain=DOMAIN)
        dropped.add(id(add))
    if not replaced:
        return g
    g.nodes = [replaced.get(id(n), n) for n in g.nodes if id(n) not in dropped]
    return g
