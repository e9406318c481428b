"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare.

Canonical form: `axes` is an attribute (list, or None for "all"); from opset
18 (ReduceSum: 13) ONNX passes it as an input, which must be constant.
The kernel loops over the kept dimensions and reduces in an inner loop nest.
Adjacent dimensions that are both kept or both reduced are merged first, so
reducing the H and W of an NCHW tensor is two loops, not four.

Unsupported: axes computed at run time ("input 1 (axes) must be a constant;
... Bind it with --bind axes=VALUE.npy"); non-float inputs except for
ReduceMax/ReduceMin ("ReduceSum on int32 is not supported (float32 only)").
Accumulation is in the input type (float32), not in double.
NaN propagates as in NumPy and the ONNX reference: a NaN in the reduced set gives
NaN for every reduction, ReduceMax/ReduceMin too (onnxruntime's ReduceMax keeps
or drops it depending on its position).

Also the loop helpers shared by the other "along an axis" families
(softmax.py, normalization.py).
"""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .base import Op, move_input_to_attr, register


# -- helpers shared with softmax.py and normalization.py -------------------------

def prod(dims) -> int:
    return int(np.prod(dims, dtype=np.int64))


def norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def split_axis(shape, axis: int, end: int | None = None) -> tuple[int, int, int]:
    """(outer, n, inner): shape viewed as [prod(:axis), prod(axis:end+1), prod(end+1:)]."""
    end = axis if end is None else end
    return prod(shape[:axis]), prod(shape[axis:end + 1]), prod(shape[end + 1:])


def indent(lines, n: int = 1) -> list[str]:
    return ["    " * n + s if s else s for s in lines]


def row_loops(outer: int, n: int, inner: int, body: list[str]) -> list[str]:
    """Loops over the rows of an (outer, n, inner) view; `body` sees `base` (the
    offset of the row's element 0) and reads element r at `base + r * inner`."""
    lines = [f"for (size_t o = 0; o < {outer}; ++o) {{"]
    if inner == 1:
        lines.append(f"    const size_t base = o * {n};")
        lines += indent(body)
    else:
        lines.append(f"    for (size_t s = 0; s < {inner}; ++s) {{")
        lines.append(f"        const size_t base = o * {n * inner} + s;")
        lines += indent(body, 2)
        lines.append("    }")
    lines.append("}")
    return lines


def at(base: str, var: str, stride: int) -> str:
    """C index expression base + var * stride."""
    return f"{base} + {var}" if stride == 1 else f"{base} + {var} * {stride}"


def libm(k, name: str) -> str:
    """expf for float kernels, exp for double."""
    return name + ("f" if k.ctype == "float" else "")


def require_float(node, inputs) -> None:
    dt = inputs[0].dtype
    if np.dtype(dt).kind != "f":
        raise UnsupportedError(f"{node.op} on {np.dtype(dt).name} is not supported "
                               "(float32 only)")


# -- reductions -----------------------------------------------------------------

def _reduced_axes(rank: int, axes, noop: int) -> list[int] | None:
    """Sorted non-negative axes to reduce; None means 'no reduction' (noop): then,
    as the spec says since onnx PR #7394, each element is reduced as a set of one
    (ReduceL2 gives |x|, ReduceSumSquare x*x)."""
    if axes is None or len(axes) == 0:
        return None if noop else list(range(rank))
    return sorted({norm_axis(int(a), rank) for a in axes})


def _merged_dims(shape, axes) -> list[tuple[int, bool, int]]:
    """(size, reduced?, input element stride) of shape's dims, size-1 dims
    dropped and adjacent dims of the same kind merged."""
    strides = [prod(shape[d + 1:]) for d in range(len(shape))]
    dims: list[list] = []
    for d, size in enumerate(shape):
        if size == 1:
            continue
        red = d in axes
        if dims and dims[-1][1] == red and dims[-1][2] == size * strides[d]:
            dims[-1][0] *= size
            dims[-1][2] = strides[d]
        else:
            dims.append([size, red, strides[d]])
    return [tuple(x) for x in dims]


class Reduce(Op):
    anchor = True
    axes_input_opset = 18

    # (initial accumulator, combine(acc, x), final(acc, count)) as C text
    def init(self, k):
        return k.lit(0)

    def combine(self, k, acc, x):
        return f"{acc} + {x}"

    def final(self, k, acc, count):
        return acc

    def np_reduce(self, x, axes, keepdims):
        raise NotImplementedError

    def empty_value(self, k) -> str:
        """The result of reducing an empty set."""
        return self.final(k, self.init(k), 0)

    def canonicalize(self, node, graph, opset):
        if opset >= self.axes_input_opset:
            move_input_to_attr(graph, node, 1, "axes")

    any_dtype = False   # True: init/combine/final are valid for integers and bool too

    def check(self, node, inputs):
        if not self.any_dtype:
            require_float(node, inputs)

    def reference(self, x, *, axes=None, keepdims=1, noop_with_empty_axes=0):
        red = _reduced_axes(x.ndim, axes, noop_with_empty_axes) or []
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(self.np_reduce(x, tuple(red), bool(keepdims))).astype(x.dtype)

    def infer(self, node, inputs, consts):
        shape = inputs[0].shape
        red = _reduced_axes(len(shape), node.attrs.get("axes"),
                            node.attrs.get("noop_with_empty_axes", 0))
        if red is None:
            return [(shape, inputs[0].dtype)]
        if any(a >= len(shape) for a in red):
            raise UnsupportedError(f"axes {node.attrs.get('axes')} out of range for rank "
                                   f"{len(shape)}")
        keep = node.attrs.get("keepdims", 1)
        out = tuple(1 if d in red else s for d, s in enumerate(shape) if keep or d not in red)
        return [(out, inputs[0].dtype)]

    def macs(self, node, inputs, outputs):
        return inputs[0].size

    def emit(self, k, *, axes=None, keepdims=1, noop_with_empty_axes=0):
        x = k.ins[0]
        if k.out.size == 0:
            return "(void)out0;  /* empty output */"
        red = _reduced_axes(len(x.shape), axes, noop_with_empty_axes)
        red = [] if red is None else red   # noop: each element is a set of one
        dims = _merged_dims(x.shape, set(red))
        count = prod([x.shape[a] for a in red])
        kept = [(s, st) for s, r, st in dims if not r]
        reduced = [(s, st) for s, r, st in dims if r]
        out_strides = [prod([s for s, _ in kept[i + 1:]]) for i in range(len(kept))]
        lines, depth = [], 0
        for i, (size, _) in enumerate(kept):
            lines.append("    " * depth + f"for (size_t i{i} = 0; i{i} < {size}; ++i{i}) {{")
            depth += 1
        base = " + ".join(f"i{i}" if st == 1 else f"i{i} * {st}"
                          for i, (_, st) in enumerate(kept))
        idx = " + ".join(f"i{i}" if st == 1 else f"i{i} * {st}"
                         for i, st in enumerate(out_strides)) or "0"
        if count == 0:   # reduction over an empty set: the op's identity value
            body = [f"{k.ctype} v = {self.empty_value(k)};"]
        else:
            body = self.body(k, x, reduced, base, count)
        ep = k.epilogue("v", idx)
        body += ([ep] if ep else []) + [f"out0[{idx}] = v;"]
        lines += indent(body, depth)
        for d in reversed(range(depth)):
            lines.append("    " * d + "}")
        return "\n".join(lines)

    def body(self, k, x, reduced, base, count) -> list[str]:
        """Statements leaving the reduced value in `v`."""
        if self._lanes_sum(k, reduced, count):
            lines = sum_in_lanes(k, x, base, count)
        else:
            lines = [f"{k.ctype} acc = {self.init(k)};"]
            lines += reduce_nest(x, reduced, base, f"acc = {self.combine(k, 'acc', 'x')};", k)
        lines.append(f"{k.ctype} v = {self.final(k, 'acc', count)};")
        return lines


    def _lanes_sum(self, k, reduced, count) -> bool:
        """A float sum over one contiguous run, long enough to split into lanes."""
        return type(self).combine is Reduce.combine and k.ctype in ("float", "double") \
            and len(reduced) == 1 and reduced[0][1] == 1 and count >= 2 * SUM_LANES


SUM_LANES = 8


def sum_in_lanes(k, x, base: str, count: int) -> list[str]:
    """acc = the sum of x[base .. base + count) in SUM_LANES interleaved partial sums,
    added pairwise at the end: one chain of dependent adds would bound the speed
    (C fixes the order of float additions, so gcc cannot split it itself); written
    as named scalars, gcc vectorizes them on a SIMD host and keeps them in
    registers on a Cortex-M. Rounding differs from a left-to-right sum, with an
    error bound no worse."""
    t = k.ctype
    z = k.lit(0)
    s = [f"s{j}" for j in range(SUM_LANES)]
    main = count // SUM_LANES * SUM_LANES
    lines = [f"const {t}* xr = {x.c} + {base or '0'};",
             *(f"{t} " + ", ".join(f"{v} = {z}" for v in s[i:i + 4]) + ";"
               for i in range(0, SUM_LANES, 4)),
             f"for (size_t r = 0; r < {main}; r += {SUM_LANES}) {{"]
    lines += ["    " + " ".join(f"{v} += xr[r + {j}];" if j else f"{v} += xr[r];"
                                for j, v in enumerate(s[i:i + 4], start=i))
              for i in range(0, SUM_LANES, 4)]
    pairs = s
    while len(pairs) > 1:
        pairs = [f"({a} + {b})" for a, b in zip(pairs[::2], pairs[1::2])]
    lines += ["}", f"{t} acc = {pairs[0][1:-1]};"]
    # Constant bounds, and no tail loop when there is no tail: gcc 12 -O3 proved a
    # `for (; r < count; ++r)` after a loop ending at r == count dead and refused it
    # under -Werror ("iteration ... invokes undefined behavior").
    if main < count:
        lines.append(f"for (size_t r = {main}; r < {count}; ++r) acc += xr[r];")
    return lines


def reduce_nest(x, reduced, base: str, stmt: str, k) -> list[str]:
    """Loops over the reduced dims binding `x` to each element, then `stmt`; a block
    of its own when nothing is reduced (one element: ReduceLogSumExp's two nests
    would declare `x` twice in one scope)."""
    if not reduced:
        terms = [base] if base else []
        return ["{", f"    const {k.ctype} x = {x.c}[{' + '.join(terms) or '0'}];",
                f"    {stmt}", "}"]
    terms = [base] if base else []
    lines = []
    for j, (size, st) in enumerate(reduced):
        lines.append("    " * j + f"for (size_t r{j} = 0; r{j} < {size}; ++r{j}) {{")
        terms.append(f"r{j}" if st == 1 else f"r{j} * {st}")
    pad = "    " * len(reduced)
    lines.append(pad + f"const {k.ctype} x = {x.c}[{' + '.join(terms) or '0'}];")
    lines.append(pad + stmt)
    for j in reversed(range(len(reduced))):
        lines.append("    " * j + "}")
    return lines


def reduce_op(name, np_fn, *, init=None, combine=None, final=None, axes_opset=18,
              any_dtype=False):
    attrs = {"np_reduce": lambda self, x, axes, keep: np_fn(x, axes, keep),
             "axes_input_opset": axes_opset, "any_dtype": any_dtype}
    if init:
        attrs["init"] = lambda self, k: init(k)
    if combine:
        attrs["combine"] = lambda self, k, acc, x: combine(k, acc, x)
    if final:
        attrs["final"] = lambda self, k, acc, n: final(k, acc, n)
    return register(name)(type(name, (Reduce,), attrs))


def _sum(x, axes, keep):
    return np.sum(x, axis=axes, keepdims=keep)


reduce_op("ReduceSum", _sum, axes_opset=13)
reduce_op("ReduceMean", lambda x, a, kd: np.mean(x, axis=a, keepdims=kd),
          final=lambda k, acc, n: (f"{acc} / {k.lit(n)}" if n != 1 else acc) if n else
          k.lit(np.nan))
def _lowest(k, sign: int) -> str:
    """-inf (sign -1) or +inf in the kernel's dtype; for integers and bool its extremes."""
    dt = np.dtype(k.graph.tensors[k.node.outputs[0]].dtype)
    if dt.kind == "f":
        return k.lit(sign * np.inf)
    if dt == np.bool_:
        return k.lit(sign > 0)
    info = np.iinfo(dt)
    return k.lit(info.max if sign > 0 else info.min)


def _extreme(x, axes, keep, fn, sign):
    if x.size == 0:   # the empty set: the identity of max / min
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keep or d not in axes)
        fill = sign * np.inf if x.dtype.kind == "f" else (sign > 0 if x.dtype == np.bool_ else
                                                           (np.iinfo(x.dtype).max if sign > 0
                                                            else np.iinfo(x.dtype).min))
        return np.full(shape, fill, x.dtype)
    return fn(x, axis=axes, keepdims=keep)


def _extreme_step(k, cmp: str, acc: str, x: str) -> str:
    """acc cmp x: the new accumulator. Floats as np.max/np.min: a NaN is taken, and
    a NaN accumulator stays (no comparison with it is true)."""
    if k.ctype in ("float", "double"):
        return f"({x} {cmp} {acc} || isnan({x})) ? {x} : {acc}"
    return f"{x} {cmp} {acc} ? {x} : {acc}"


reduce_op("ReduceMax", lambda x, a, kd: _extreme(x, a, kd, np.max, -1), any_dtype=True,
          init=lambda k: _lowest(k, -1), combine=lambda k, acc, x: _extreme_step(k, ">", acc, x))
reduce_op("ReduceMin", lambda x, a, kd: _extreme(x, a, kd, np.min, 1), any_dtype=True,
          init=lambda k: _lowest(k, 1), combine=lambda k, acc, x: _extreme_step(k, "<", acc, x))
reduce_op("ReduceProd", lambda x, a, kd: np.prod(x, axis=a, keepdims=kd),
          init=lambda k: k.lit(1), combine=lambda k, acc, x: f"{acc} * {x}")
reduce_op("ReduceL1", lambda x, a, kd: np.sum(np.abs(x), axis=a, keepdims=kd),
          combine=lambda k, acc, x: f"{acc} + {libm(k, 'fabs')}({x})")
reduce_op("ReduceL2", lambda x, a, kd: np.sqrt(np.sum(x * x, axis=a, keepdims=kd)),
          combine=lambda k, acc, x: f"{acc} + {x} * {x}",
          final=lambda k, acc, n: f"{libm(k, 'sqrt')}({acc})")
reduce_op("ReduceSumSquare", lambda x, a, kd: np.sum(x * x, axis=a, keepdims=kd),
          combine=lambda k, acc, x: f"{acc} + {x} * {x}")
reduce_op("ReduceLogSum", lambda x, a, kd: np.log(np.sum(x, axis=a, keepdims=kd)),
          final=lambda k, acc, n: f"{libm(k, 'log')}({acc})")


@register("ReduceLogSumExp")
class ReduceLogSumExp(Reduce):
    """log(sum(exp(x - max))) + max: two passes, stable for large inputs."""

    def np_reduce(self, x, axes, keep):
        m = np.max(x, axis=axes, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        r = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
        return r if keep else np.squeeze(r, axis=axes)

    def empty_value(self, k):
        return k.lit(-np.inf)

    def body(self, k, x, reduced, base, count):
        lines = [f"{k.ctype} mx = {k.lit(-np.inf)};"]
        lines += reduce_nest(x, reduced, base, "mx = x > mx ? x : mx;", k)
        lines.append(f"if (!isfinite(mx)) mx = {k.lit(0)};")
        lines.append(f"{k.ctype} acc = {k.lit(0)};")
        lines += reduce_nest(x, reduced, base, f"acc += {libm(k, 'exp')}(x - mx);", k)
        lines.append(f"{k.ctype} v = {libm(k, 'log')}(acc) + mx;")
        return lines
