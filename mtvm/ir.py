"""The graph IR: tensors with static shape and dtype, nodes, constants.

A Graph is a plain container; passes are functions Graph -> Graph and the
NumPy interpreter (mtvm.interp) defines what a graph means.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .codegen.names import ir_name
from .errors import ShapeError

# The largest tensor mtvm accepts: 2^31 elements and bytes for a constant (as
# int32 indices and most toolchains' object sizes allow; the largest
# conformance models hold 400 MB weight matrices), 256 MiB for a tensor
# computed at run time (microcontrollers have kilobytes to megabytes of RAM).
# The bounds keep compile time and memory finite on absurd shapes (a 2^31-1
# dim), which are refused, not attempted.
MAX_TENSOR_ELEMENTS = 1 << 31
MAX_TENSOR_BYTES = 1 << 31
MAX_ACTIVATION_BYTES = 1 << 28


def check_tensor_size(t: "Tensor", what: str, constant: bool = False) -> None:
    """A ShapeError naming `what` when t has a negative dim or is over the
    bounds (those of a constant when `constant`)."""
    if any(int(d) < 0 for d in t.shape):
        raise ShapeError(f"{what} has a negative dimension in shape {list(t.shape)}")
    size = 1
    for d in t.shape:
        size *= int(d)       # Python ints: no overflow
    nbytes = size * np.dtype(t.dtype).itemsize
    limit = MAX_TENSOR_BYTES if constant else MAX_ACTIVATION_BYTES
    if size > MAX_TENSOR_ELEMENTS or nbytes > limit:
        kind = "a constant" if constant else "a tensor computed at run time"
        raise ShapeError(f"{what} has shape {list(t.shape)} ({size} elements, {nbytes} bytes), "
                         f"over the {min(MAX_TENSOR_ELEMENTS, limit)} elements / {limit >> 20} "
                         f"MiB mtvm accepts for {kind}; check the model's (or --input-shape's) "
                         "dims")


@dataclass
class QuantParams:
    """Affine quantization: real = scale * (q - zero_point); per-tensor or per-axis."""
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None = None


@dataclass
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    data: np.ndarray | None = None          # set for constants (weights)
    quant: QuantParams | None = None

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


@dataclass
class Node:
    op: str
    name: str
    inputs: list[str]                        # "" marks an omitted optional input
    outputs: list[str]
    attrs: dict = field(default_factory=dict)
    domain: str = ""
    # Elementwise nodes fused after this one: each takes the previous output as
    # its first input; the last tail node's output is this kernel's output.
    tail: list[Node] = field(default_factory=list)
    alias: bool = False                      # output shares the input's storage
    # A Concat whose producers write its inputs straight into its output (each
    # input a view of the output at its byte offset; memory.concat_views): no
    # kernel runs for it.
    concat_views: bool = False

    def copy(self) -> Node:
        return dataclasses.replace(self, inputs=list(self.inputs), outputs=list(self.outputs),
                                   attrs=dict(self.attrs), tail=[t.copy() for t in self.tail])

    @property
    def has_kernel(self) -> bool:
        """False for the nodes that only name bytes other kernels write (views)."""
        return not (self.alias or self.concat_views)

    @property
    def kernel_outputs(self) -> list[str]:
        """The tensors the fused kernel writes."""
        return self.tail[-1].outputs if self.tail else self.outputs


@dataclass
class Graph:
    name: str
    tensors: dict[str, Tensor]
    nodes: list[Node]
    inputs: list[str]
    outputs: list[str]
    opset: int = 17
    source: str = "<model>"                  # file name, for error messages
    notes: list[str] = field(default_factory=list)   # for the user: metadata "notes"

    def copy(self) -> Graph:
        return Graph(self.name, dict(self.tensors), [n.copy() for n in self.nodes],
                     list(self.inputs), list(self.outputs), self.opset, self.source,
                     list(self.notes))

    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.kernel_outputs}

    def consumers(self) -> dict[str, list[Node]]:
        uses: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in all_inputs(n):
                if i:
                    uses.setdefault(i, []).append(n)
        return uses

    def const(self, name: str) -> np.ndarray | None:
        t = self.tensors.get(name)
        return None if t is None else t.data

    def fresh_name(self, name: str) -> str:
        """`name`, or `name_1`, `name_2`, ... : the first no tensor has yet."""
        base, k = name, 0
        while name in self.tensors:
            k += 1
            name = f"{base}_{k}"
        return name

    def add_const(self, name: str, value: np.ndarray) -> str:
        name = self.fresh_name(name)
        value = np.asarray(value)
        value = np.ascontiguousarray(value) if value.ndim else value.copy()  # keep 0-d
        self.tensors[name] = Tensor(name, tuple(value.shape), value.dtype, value)
        return name

    def dump(self) -> str:
        return dump(self)


def all_inputs(node: Node) -> list[str]:
    """Inputs of a node including those its fused tail reads (minus the chained value)."""
    names = list(node.inputs)
    for t in node.tail:
        names.extend(t.inputs[1:])
    return names


def _fmt_tensor(t: Tensor) -> str:
    dims = "x".join(str(d) for d in t.shape) or "scalar"
    q = f" q(scale={t.quant.scale.ravel()[:1]}, zp={t.quant.zero_point.ravel()[:1]})" if t.quant else ""
    return f"{np.dtype(t.dtype).name}[{dims}]{q}"


def _fmt_attr(v) -> str:
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}" if v.size > 8 else repr(v.tolist())
    return ascii(v)     # a string attribute's newlines and non-ASCII escaped


def dump(g: Graph) -> str:
    """Text form of the IR, one node per line (what `mtvm compile --dump-ir` prints).
    Names are written through ir_name: escaped, they cannot forge a line."""
    lines = [f"graph {ir_name(g.name)} (opset {g.opset}) {{"]
    for i in g.inputs:
        lines.append(f"  input  %{ir_name(i)}: {_fmt_tensor(g.tensors[i])}")
    consts = [t for t in g.tensors.values() if t.is_const]
    lines.append(f"  # {len(consts)} constants, {sum(t.nbytes for t in consts)} bytes")
    for n in g.nodes:
        for k, part in enumerate([n] + n.tail):
            attrs = ", ".join(f"{a}={_fmt_attr(v)}" for a, v in sorted(part.attrs.items()))
            ins = ", ".join(f"%{ir_name(i)}" if i else "_" for i in part.inputs)
            outs = ", ".join(f"%{ir_name(o)}: {_fmt_tensor(g.tensors[o])}" for o in part.outputs
                             if o in g.tensors)
            prefix = "  " if k == 0 else "    ⤷ "
            tag = " (alias)" if part.alias else " (views)" if part.concat_views else ""
            lines.append(f"{prefix}{outs} = {part.op}{tag}({ins})"
                         + (f" {{{attrs}}}" if attrs else "") + f"  # {ir_name(part.name)}")
    for o in g.outputs:
        lines.append(f"  output %{ir_name(o)}: {_fmt_tensor(g.tensors[o])}")
    lines.append("}")
    return "\n".join(lines) + "\n"
