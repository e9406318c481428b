"""The operator registry and the base class every operator definition uses.

An operator lives in one place: a class registered for one or more ONNX op
types, holding its shape/type rule (`infer`), its NumPy reference
(`reference`, ONNX attribute names as keyword arguments with the spec's
defaults) and its C emitter (`emit`, or `scalar` for elementwise ops, which
the generic elementwise kernel and fused epilogues both use).
See mtvm/ops/_template.py for a skeleton to copy.
"""
from __future__ import annotations

import inspect
import math

import numpy as np

from ..errors import ShapeError, UnsupportedError

REGISTRY: dict[tuple[str, str], "Op"] = {}


def register(*op_types: str, domain: str = ""):
    """Class decorator: one instance of the class per ONNX op type."""
    def wrap(cls):
        for t in op_types:
            REGISTRY[(domain, t)] = cls(t, domain)
        return cls
    return wrap


def get_op(op_type: str, domain: str = "") -> "Op | None":
    return REGISTRY.get(("" if domain == "ai.onnx" else domain, op_type))


def node_macs(graph, node) -> int:
    """The multiply-accumulates of one node of `graph` (its operator's `macs`, given the
    node's input and output tensors)."""
    ins = [graph.tensors[x] if x else None for x in node.inputs]
    outs = [graph.tensors[x] for x in node.outputs if x]
    return int(get_op(node.op, node.domain).macs(node, ins, outs))


def supported_ops() -> list[str]:
    return sorted(t if not d else f"{d}.{t}" for d, t in REGISTRY)


class Op:
    """Base class. Override what the operator needs; defaults are documented."""
    elementwise = False   # a pure per-element function: implement `scalar`, may be fused as a tail
    anchor = False        # its emitter calls k.epilogue(), so an elementwise tail can be fused
    alias = False         # output is input 0 reinterpreted (same bytes, new shape): no kernel
    min_opset = 1         # oldest opset whose semantics this definition implements
    foldable = True       # may be evaluated at compile time when its inputs are known

    def __init__(self, name: str, domain: str = ""):
        self.name = name
        self.domain = domain

    # -- front end --------------------------------------------------------
    def canonicalize(self, node, graph, opset: int) -> None:
        """Rewrite `node` in place into the form `reference`/`emit` expect, e.g.
        move constant parameter inputs (axes, pads, shape) into attributes and
        map older-opset semantics onto the newest. Raise UnsupportedError
        (via `need_const`) when such an input is not constant."""

    # -- semantics --------------------------------------------------------
    def reference(self, *inputs, **attrs):
        """NumPy reference: returns one array or a tuple of arrays."""
        raise NotImplementedError(self.name)

    def infer(self, node, inputs: list, consts: list) -> list[tuple[tuple[int, ...], np.dtype]]:
        """(shape, dtype) of each output from the input Tensors. Default: run the
        reference on zeros (or the constant values); override for heavy ops."""
        args = [None if t is None else (c if c is not None else np.zeros(t.shape, t.dtype))
                for t, c in zip(inputs, consts)]
        with np.errstate(all="ignore"):
            outs = self.reference(*args, **node.attrs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return [(tuple(np.shape(o)), np.asarray(o).dtype) for o in outs]

    def macs(self, node, inputs: list, outputs: list) -> int:
        """Multiply-accumulates of one run (for metadata and MACs/tick)."""
        return 0

    # -- code generation ----------------------------------------------------
    def scratch_bytes(self, k, /, **attrs) -> int:
        """Arena scratch emit() will ask for (k.scratch_bytes): a pure function of
        the kernel's shapes, target and in-place decision, which memory planning
        calls instead of emitting (lowering checks that emit() asked for exactly
        that). Default: none."""
        return 0

    def scalar(self, k, args: list, **attrs):
        """C expression of one output element from the input elements `args`
        (elementwise ops only). `k` gives the dtype: k.ctype, k.lit(value).
        An op with `scalar_exprs = True` takes and returns mtvm.codegen.cwriter
        expressions; the others take and return C text."""
        raise NotImplementedError(self.name)

    def emit(self, k, /, **attrs) -> str:
        """C statements of the kernel body. `k` is a mtvm.codegen.kernel.Kernel.
        Default: ir_body rendered as C."""
        body = self.ir_body(k, **attrs)
        if body is None:
            raise NotImplementedError(self.name)
        from ..codegen.cwriter import render_c
        return render_c(body)

    def ir_body(self, k, /, **attrs):
        """The kernel body as C writer statements (mtvm.codegen.cwriter), which
        both the C and the LLVM backends render; None for an op whose emit()
        still writes C text (the LLVM backend cannot lower it)."""
        if self.elementwise:
            from .elementwise import elementwise_body
            return elementwise_body(self, k, attrs)
        return None

    def inplace_input(self, node, graph) -> int | None:
        """Index of the input whose buffer this kernel may write its output over
        (the planner decides; the emitter sees k.inplace). Elementwise ops: input
        0 when the output has its shape and dtype. Others: None (never)."""
        if not self.elementwise or not node.inputs or not node.inputs[0]:
            return None
        x, y = graph.tensors[node.inputs[0]], graph.tensors[node.kernel_outputs[0]]
        same = tuple(x.shape) == tuple(y.shape) and np.dtype(x.dtype) == np.dtype(y.dtype)
        return 0 if same else None

    def check(self, node, inputs: list) -> None:
        """Raise UnsupportedError for inputs or attributes the emitter cannot handle."""

    def axis_ranks(self, node, inputs: list) -> dict[str, tuple[int, int]]:
        """For each attribute of `node` that names axes: (rank, extra), its values
        valid in [-rank, rank - 1 + extra] (normalize_axes checks them). Default:
        the attributes in AXIS_ATTRS, against the rank of the first input."""
        x = next((t for t in inputs if t is not None), None)
        if x is None:
            return {}
        return {a: (len(x.shape), 0) for a in AXIS_ATTRS if node.attrs.get(a) is not None}

    def static_outputs(self, node, inputs: list) -> list | None:
        """Output values known from the input Tensors' static shapes and dtypes
        alone (Shape, Size), or None. Lets constant folding and need_const see
        through e.g. Reshape(x, Concat(Shape(x)[:1], [-1]))."""
        return None


class ElementwiseOp(Op):
    """A per-element function given by `scalar`: run by the generic broadcasting
    kernel and fusable into a producer's epilogue (its own kernel can take one
    too: anchor)."""
    elementwise = True
    anchor = True


AXIS_ATTRS = ("axis", "axes", "batch_axis", "time_axis")


def normalize_axis(axis, rank: int, what: str = "axis", extra: int = 0) -> int:
    """`axis` in [-rank, rank - 1 + extra] as a non-negative index, or a
    ShapeError (the one check every op with an axis attribute goes through)."""
    try:
        a = int(axis)
    except (TypeError, ValueError):
        raise ShapeError(f"{what}={axis!r} is not an integer") from None
    hi = rank - 1 + extra
    if not -rank <= a <= hi:
        raise ShapeError(f"{what}={a} is out of range for a rank-{rank} tensor "
                         f"(valid: {-rank}..{hi})")
    return a + rank if a < 0 else a


def normalize_axes(op, node, inputs: list) -> None:
    """Check every axis attribute of `node` (op.axis_ranks says which, and the
    rank each indexes) and store it non-negative; a list must not repeat an axis."""
    for attr, (rank, extra) in op.axis_ranks(node, inputs).items():
        value = node.attrs.get(attr)
        if value is None:
            continue
        if isinstance(value, (list, tuple, np.ndarray)):
            axes = [normalize_axis(a, rank, attr, extra) for a in np.asarray(value).ravel()]
            if len(set(axes)) != len(axes):
                raise ShapeError(f"{attr}={list(np.asarray(value).ravel())} names an axis "
                                 "more than once")
            node.attrs[attr] = axes
        else:
            node.attrs[attr] = normalize_axis(value, rank, attr, extra)


def bind_attrs(fn, attrs: dict, what: str) -> dict:
    """Check that every attribute is one `fn` accepts (keyword-only parameters)."""
    params = inspect.signature(fn).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return attrs
    unknown = [a for a in attrs if a not in params]
    if unknown:
        raise UnsupportedError(f"{what}: attribute(s) {', '.join(unknown)} not supported")
    return attrs


def need_const(graph, node, index: int, what: str):
    """The value of constant input `index` of `node`, or None when the input is
    omitted; a clear error when it is computed at run time."""
    if index >= len(node.inputs) or not node.inputs[index]:
        return None
    value = static_value(graph, node.inputs[index])
    if value is None:
        raise UnsupportedError(
            f'input {index} ({what}) must be a constant; '
            f'it is computed at run time. Bind it with --bind {node.inputs[index]}=VALUE.npy')
    return value


def static_value(graph, name: str, depth: int = 0):
    """The value of tensor `name` when it is known at compile time: a constant,
    or computed by nodes whose inputs are (recursively) known, or from static
    shapes (Op.static_outputs). None when it depends on run-time data."""
    value = graph.const(name)
    if value is not None or depth > 64 or name not in graph.tensors:
        return value
    producer = next((n for n in graph.nodes if name in n.outputs and not n.tail), None)
    if producer is None:
        return None
    op = get_op(producer.op, producer.domain)
    if op is None or not getattr(op, "foldable", True):
        return None
    ins = [graph.tensors[i] if i else None for i in producer.inputs]
    outs = op.static_outputs(producer, ins)
    if outs is None:
        vals = [static_value(graph, i, depth + 1) if i else None for i in producer.inputs]
        if any(v is None for v, i in zip(vals, producer.inputs) if i):
            return None
        with np.errstate(all="ignore"):
            outs = op.reference(*vals, **producer.attrs)
        outs = outs if isinstance(outs, tuple) else (outs,)
    t = graph.tensors[name]
    return np.asarray(outs[producer.outputs.index(name)], dtype=t.dtype).reshape(t.shape)


def move_input_to_attr(graph, node, index: int, attr: str, convert=lambda v: v.tolist()):
    """Canonicalize: constant input `index` becomes attribute `attr` (input dropped)."""
    value = need_const(graph, node, index, attr)
    if value is not None:
        node.attrs[attr] = convert(value)
    if index < len(node.inputs):
        node.inputs[index] = ""
    while node.inputs and not node.inputs[-1]:
        node.inputs.pop()


# -- C helpers shared by emitters ----------------------------------------------

CTYPES = {
    "float32": "float", "float64": "double",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "bool": "uint8_t",
    # Half types are stored as their bits; only Cast converts them (every other
    # op computes in float32: see mtvm/passes/widen.py).
    "float16": "uint16_t", "bfloat16": "uint16_t",
    "float8_e4m3fn": "uint8_t", "float8_e4m3fnuz": "uint8_t",
    "float8_e5m2": "uint8_t", "float8_e5m2fnuz": "uint8_t", "float4_e2m1fn": "uint8_t",
    "float8_e8m0fnu": "uint8_t",
    # Sub-byte integers: one element per byte, in its low bits (NumPy's layout).
    "int4": "int8_t", "uint4": "uint8_t", "int2": "int8_t", "uint2": "uint8_t",
}


def ctype(dtype) -> str:
    name = np.dtype(dtype).name
    if name not in CTYPES:
        raise UnsupportedError(f"dtype {name} is not supported")
    return CTYPES[name]


def c_literal(value, dtype) -> str:
    """A C literal of `value` in `dtype` that round-trips exactly."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        v = float(value)
        suffix = "f" if dt == np.float32 else ""
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "HUGE_VALF" if v > 0 and suffix else ("-HUGE_VALF" if suffix else
                                                          ("HUGE_VAL" if v > 0 else "-HUGE_VAL"))
        text = repr(np.float32(v).item()) if suffix else repr(v)
        if "e" not in text and "." not in text and "inf" not in text:
            text += ".0"
        return text + suffix
    if dt == np.bool_:
        return "1" if value else "0"
    v = int(value)
    if dt == np.int64:
        return f"INT64_C({v})" if v != -(1 << 63) else "INT64_MIN"
    if dt == np.uint64:
        return f"UINT64_C({v})"
    if dt == np.int32 and v == -(1 << 31):
        return "INT32_MIN"
    if dt.kind == "u":
        return f"{v}u"
    return str(v)
