"""What an operator's C emitter sees: its buffers, its attributes and a way
to apply the fused elementwise tail (the epilogue) to a computed value."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..ops.base import c_literal, ctype, get_op
from ..target import GENERIC, Target


@dataclass
class Buf:
    c: str                          # C parameter name inside the kernel
    name: str                       # IR tensor name
    shape: tuple[int, ...]
    dtype: np.dtype
    const: np.ndarray | None = None  # constant value, when known at compile time

    @property
    def ctype(self) -> str:
        return ctype(self.dtype)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def strides(self) -> tuple[int, ...]:
        """Row-major element strides."""
        s, out = 1, []
        for d in reversed(self.shape):
            out.append(s)
            s *= d
        return tuple(reversed(out))


def epilogue_mode(out_shape, operand_shape) -> str | None:
    """How a fused binary tail reads its other operand at output element (idx, ch):
    'scalar' (one value), 'full' (same layout as the output), 'channel' (varies
    only along axis 1), 'last' (varies only along the last axis: the bias of a
    MatMul over [..., N]), or None when it cannot be fused."""
    size = int(np.prod(operand_shape, dtype=np.int64))
    if size == 1:
        return "scalar"
    if len(operand_shape) > len(out_shape):
        return None
    padded = (1,) * (len(out_shape) - len(operand_shape)) + tuple(operand_shape)
    if padded == tuple(out_shape):
        return "full"
    if len(out_shape) >= 2 and padded[1] == out_shape[1] and \
            all(d == 1 for i, d in enumerate(padded) if i != 1):
        return "channel"
    if len(out_shape) >= 3 and padded[-1] == out_shape[-1] and \
            all(d == 1 for d in padded[:-1]):
        return "last"
    return None


class Kernel:
    """One fused kernel: anchor node + elementwise tail, as a C function."""

    def __init__(self, graph, node, fname: str, target: Target = GENERIC,
                 config=None):
        self.graph, self.node, self.fname = graph, node, fname
        self.target = target           # what the C runs on (mtvm.target)
        # Knob values chosen for this kernel's schedule (mtvm.schedules.ScheduleConfig;
        # None: every schedule's defaults).
        self.config = config
        self.schedule = None           # name of the schedule that emitted it, if any
        self.knobs: dict = {}          # that schedule's knob values
        self.ins: list[Buf | None] = []
        for i, name in enumerate(node.inputs):
            self.ins.append(self._buf(f"in{i}", name) if name else None)
        self.outs = [self._buf(f"out{i}", name) if name else None
                     for i, name in enumerate(node.kernel_outputs)]
        self.eps: list[Buf] = []       # extra operands of the fused tail
        for t in node.tail:
            for name in t.inputs[1:]:
                if name and not self._inline(name):
                    self.eps.append(self._buf(f"ep{len(self.eps)}", name))
        # The model's constants of the inputs a schedule re-laid out (weight_layout):
        # {input index: the plain Buf}; k.ins[i] is then the laid-out one.
        self.plain_ins: dict[int, Buf] = {}
        self.scratch_bytes = 0         # set by the op (planned in the arena)
        # Index of the input the output is written over (decided before emission,
        # see memory.inplace_steps): that input and the output lose `restrict`.
        self.inplace: int | None = None
        # Name of a fused tail operand (a residual) the output is written over.
        self.inplace_tail: str | None = None
        self.helpers: dict[str, str] = {}  # file-scope C the body calls, by name (see helper())
        self.libraries: list[str] = []     # kernel library files it needs (see library())

    def plain(self, i: int) -> Buf | None:
        """Input i as the op means it (its shape and values before any weight layout)."""
        return self.plain_ins.get(i, self.ins[i])

    def _buf(self, c, name) -> Buf:
        t = self.graph.tensors[name]
        return Buf(c, name, tuple(t.shape), np.dtype(t.dtype), t.data)

    def _inline(self, name) -> bool:
        t = self.graph.tensors[name]
        return t.data is not None and t.size == 1

    @property
    def _first_out(self) -> str:
        """The anchor's first output that is not omitted (RNN's Y may be "")."""
        return next((o for o in self.node.outputs if o), self.node.outputs[0])

    # -- helpers for emitters --------------------------------------------------
    @property
    def out(self) -> Buf:
        return self.outs[0]

    @property
    def ctype(self) -> str:
        """C type of the anchor's computation (its first output's dtype)."""
        t = self.graph.tensors[self._first_out]
        return ctype(t.dtype)

    def lit(self, value, dtype=None) -> str:
        return c_literal(value, dtype if dtype is not None else
                         self.graph.tensors[self._first_out].dtype)

    def channel_of(self, idx: str) -> str:
        """Axis-1 coordinate of flat output index `idx` (a C expression)."""
        shape = self.graph.tensors[self._first_out].shape
        inner = int(np.prod(shape[2:], dtype=np.int64)) if len(shape) > 2 else 1
        c = shape[1] if len(shape) > 1 else 1
        return f"((({idx}) / {inner}) % {c})" if inner > 1 else f"(({idx}) % {c})"

    def epilogue(self, acc: str, idx: str, ch: str | None = None,
                 last: str | None = None) -> str:
        """C statements applying the fused tail to variable `acc`, the value of
        output element `idx` (flat) whose axis-1 coordinate is `ch` and last-axis
        coordinate `last` (both derived from idx when not given)."""
        lines, ep = [], iter(self.eps)
        shape = self.graph.tensors[self._first_out].shape
        for t in self.node.tail:
            args = [acc]
            for name in t.inputs[1:]:
                tensor = self.graph.tensors[name]
                if self._inline(name):
                    args.append(c_literal(tensor.data.ravel()[0], tensor.dtype))
                    continue
                buf = next(ep)
                mode = epilogue_mode(shape, tensor.shape)
                if mode == "scalar":
                    args.append(f"{buf.c}[0]")
                elif mode == "full":
                    args.append(f"{buf.c}[{idx}]")
                elif mode == "last":
                    args.append(f"{buf.c}[{last if last is not None else f'({idx}) % {shape[-1]}'}]")
                else:
                    args.append(f"{buf.c}[{ch if ch is not None else self.channel_of(idx)}]")
            lines.append(f"{acc} = {get_op(t.op, t.domain).scalar(self, args, **t.attrs)};")
        return " ".join(lines)

    def helper(self, name: str, code: str) -> str:
        """Declare file-scope C (a static inline function, an #include) the body
        uses; emitted once per source file however many kernels ask. Returns name."""
        self.helpers.setdefault(name, code)
        return name

    def library(self, *files: str) -> None:
        """Use files of the kernel library (c_runtime/kernels/, e.g.
        "mtvm_gemm_f32.h"): they are copied into the module, specialized for
        the target, and the kernels source includes the headers."""
        for f in files:
            if f not in self.libraries:
                self.libraries.append(f)

    # -- assembling the function ----------------------------------------------
    def params(self, body: str) -> list[tuple[str, Buf | None]]:
        """(C declaration, buffer) of each parameter the body uses, in order:
        inputs, tail operands, outputs, scratch."""
        used = set(re.findall(r"[A-Za-z_]\w*", body))
        out = []
        shared = self.ins[self.inplace] if self.inplace is not None else None
        if self.inplace_tail is not None:
            shared = next(b for b in self.eps if b.name == self.inplace_tail)
        for b in self.ins + self.eps:
            if b is not None and b.c in used:
                qual = "" if b is shared else " restrict"
                out.append((f"const {b.ctype}*{qual} {b.c}", b))
        for i, b in enumerate(self.outs):
            if b is not None:
                qual = "" if shared is not None and i == 0 else " restrict"
                out.append((f"{b.ctype}*{qual} {b.c}", b))
        if self.scratch_bytes:
            out.append(("uint8_t* restrict scratch", None))
        return out
