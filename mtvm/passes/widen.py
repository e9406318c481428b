"""float16 / bfloat16 (and float8): computed in float32.

Every half-precision tensor inside the graph becomes float32 (constants are
converted); a graph input or output keeps its half type (stored as the
uint16_t bits) and gets a Cast at the boundary. So no emitter except Cast's
ever sees a half type, and a model's arithmetic runs at float32 precision,
which is what a Cortex-M without an FP16 unit does anyway. A Cast *to* a half
type inside the graph keeps its rounding: its float32 output holds values
rounded to the half type (see mtvm/ops/cast.py).
"""
from __future__ import annotations

import numpy as np
import onnx

from ..ir import Graph, Node, Tensor

HALF = ("float16", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
        "float8_e5m2fnuz", "float4_e2m1fn", "float8_e8m0fnu")
_TO = {"float16": onnx.TensorProto.FLOAT16, "bfloat16": onnx.TensorProto.BFLOAT16,
       "float8_e4m3fn": onnx.TensorProto.FLOAT8E4M3FN,
       "float8_e4m3fnuz": onnx.TensorProto.FLOAT8E4M3FNUZ,
       "float8_e5m2": onnx.TensorProto.FLOAT8E5M2,
       "float8_e5m2fnuz": onnx.TensorProto.FLOAT8E5M2FNUZ,
       "float4_e2m1fn": onnx.TensorProto.FLOAT4E2M1,
       "float8_e8m0fnu": onnx.TensorProto.FLOAT8E8M0}


def as_computed(t: Tensor) -> Tensor:
    """`t` as an arithmetic op's kernel will see it: float32 in place of float16
    or bfloat16. (float8/float4 stay as they are: they are storage types that
    Cast and the quantization operators handle, and say so in their errors.)"""
    if np.dtype(t.dtype).name not in ("float16", "bfloat16"):
        return t
    return Tensor(t.name, t.shape, np.dtype(np.float32),
                  None if t.data is None else t.data.astype(np.float32))


def _is_half(t: Tensor) -> bool:
    return np.dtype(t.dtype).name in HALF


def _rename_input(nodes, old: str, new: str) -> None:
    for n in nodes:
        for part in [n] + n.tail:
            part.inputs = [new if i == old else i for i in part.inputs]


def widen_half(graph: Graph) -> Graph:
    if not any(_is_half(t) for t in graph.tensors.values()):
        return graph
    g = graph.copy()
    f32 = np.dtype(np.float32)
    head, tail = [], []
    # Graph outputs produced by a Cast to their half type stay as they are.
    producers = {o: n for n in g.nodes for o in n.outputs}
    keep = {o for o in g.outputs if _is_half(g.tensors[o]) and o in producers
            and producers[o].op == "Cast" and not producers[o].tail}
    for name in list(g.outputs):
        t = g.tensors[name]
        if not _is_half(t) or name in keep or name not in producers:
            continue
        wide = g.fresh_name(name + "_f32")
        n = producers[name]
        for part in [n] + n.tail:
            part.outputs = [wide if o == name else o for o in part.outputs]
        _rename_input(g.nodes, name, wide)
        g.tensors[wide] = Tensor(wide, t.shape, f32)
        tail.append(Node("Cast", f"{name}_to_{np.dtype(t.dtype).name}", [wide], [name],
                         {"to": _TO[np.dtype(t.dtype).name]}))
    for name, t in list(g.tensors.items()):
        if not _is_half(t) or name in keep or name in g.outputs:
            continue
        if name in g.inputs:
            wide = g.fresh_name(name + "_f32")
            _rename_input(g.nodes, name, wide)
            g.tensors[wide] = Tensor(wide, t.shape, f32)
            head.append(Node("Cast", f"{name}_to_float", [name], [wide],
                             {"to": onnx.TensorProto.FLOAT}))
        elif t.data is not None:
            g.tensors[name] = Tensor(name, t.shape, f32, t.data.astype(np.float32))
        else:
            g.tensors[name] = Tensor(name, t.shape, f32)
    g.nodes = head + g.nodes + tail
    return g


