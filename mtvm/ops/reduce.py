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
from ..codegen.cwriter import (
    Assign,
    Block,
    Cast,
    Comment,
    Decl,
    Expr,
    ExprStmt,
    For,
    If,
    Stmt,
    Type,
    VOID,
    Var,
    call,
    gt,
    index_type,
    kernel_dtype,
    kernel_lit,
    lt,
    not_,
    or_,
    param,
    scaled,
    select,
    sum_of,
    tail,
)
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


BASE = Var("base", index_type(const=True))   # offset of a row's element 0


def row_loops(outer: int, n: int, inner: int, body: list[Stmt]) -> list[Stmt]:
    """Loops over the rows of an (outer, n, inner) view; `body` sees BASE (the
    offset of the row's element 0) and reads element r at `BASE + r * inner`."""
    o, s = Var("o"), Var("s")
    if inner == 1:
        return [For(o, outer, [Decl(BASE, o * n), *body])]
    return [For(o, outer, [For(s, inner, [Decl(BASE, o * (n * inner) + s), *body])])]


def at(base: Expr, var: Expr, stride: int) -> Expr:
    """Index expression base + var * stride."""
    return base + scaled(var, stride)


def loop_nest(loops, body: list[Stmt]) -> list[Stmt]:
    """Nested loops, the first outermost: `loops` holds (Var, count) pairs."""
    for var, count in reversed(list(loops)):
        body = [For(var, count, body)]
    return list(body)


def value(k, name: str, const: bool = False) -> Var:
    """A local of the kernel's dtype."""
    return Var(name, Type(kernel_dtype(k), const=const))


def store(k, v: Var, idx: Expr, ch: Expr | None = None) -> list[Stmt]:
    """The fused tail applied to v, then out0[idx] = v."""
    return [*tail(k, v, idx, ch), Assign(param(k.out, output=True)[idx], v)]


def libm(k, name: str) -> str:
    """expf for float kernels, exp for double."""
    return name + ("f" if k.ctype == "float" else "")


def require_float(node, inputs) -> None:
    dt = inputs[0].dtype
    if np.dtype(dt).kind != "f":
        raise UnsupportedError(f"{node.op} on {np.dtype(dt).name} is not supported "
                               "(float32 only)")


# -- reductions -----------------------------------------------------------------

def reduced_axes(rank: int, axes, noop: int) -> list[int] | None:
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

    # (initial accumulator, combine(acc, x), final(acc, count)) as expressions
    def init(self, k):
        return kernel_lit(k, 0)

    def combine(self, k, acc, x):
        return acc + x

    def final(self, k, acc, count):
        return acc

    def np_reduce(self, x, axes, keepdims):
        raise NotImplementedError

    def empty_value(self, k) -> Expr:
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
        red = reduced_axes(x.ndim, axes, noop_with_empty_axes) or []
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(self.np_reduce(x, tuple(red), bool(keepdims))).astype(x.dtype)

    def infer(self, node, inputs, consts):
        shape = inputs[0].shape
        red = reduced_axes(len(shape), node.attrs.get("axes"),
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

    def ir_body(self, k, *, axes=None, keepdims=1, noop_with_empty_axes=0):
        return (self.loops(k, axes, noop_with_empty_axes))

    def loops(self, k, axes, noop_with_empty_axes) -> list[Stmt]:
        """A loop nest over the kept dims, each output reduced inside it."""
        x = k.ins[0]
        if k.out.size == 0:
            return [ExprStmt(Cast(Type(VOID), param(k.out, output=True))),
                    Comment("empty output")]
        red = reduced_axes(len(x.shape), axes, noop_with_empty_axes)
        red = [] if red is None else red   # noop: each element is a set of one
        dims = _merged_dims(x.shape, set(red))
        count = prod([x.shape[a] for a in red])
        kept = [(s, st) for s, r, st in dims if not r]
        reduced = [(s, st) for s, r, st in dims if r]
        out_strides = [prod([s for s, _ in kept[i + 1:]]) for i in range(len(kept))]
        kept_vars = [Var(f"i{i}") for i in range(len(kept))]
        base = sum_of(scaled(v, st) for v, (_, st) in zip(kept_vars, kept))
        idx = sum_of(scaled(v, st) for v, st in zip(kept_vars, out_strides))
        v = value(k, "v")
        if count == 0:   # reduction over an empty set: the op's identity value
            body = [Decl(v, self.empty_value(k))]
        else:
            body = self.body(k, x, reduced, base, count)
        body += store(k, v, idx)
        return loop_nest(zip(kept_vars, (size for size, _ in kept)), body)

    def body(self, k, x, reduced, base, count) -> list[Stmt]:
        """Statements leaving the reduced value in `v`."""
        acc = value(k, "acc")
        if self._lanes_sum(k, reduced, count):
            stmts = sum_in_lanes(k, x, base, count)
        else:
            stmts = [Decl(acc, self.init(k))]
            stmts += reduce_nest(k, x, reduced, base,
                                 lambda e: [Assign(acc, self.combine(k, acc, e))])
        return stmts + [Decl(value(k, "v"), self.final(k, acc, count))]

    def _lanes_sum(self, k, reduced, count) -> bool:
        """A float sum over one contiguous run, long enough to split into lanes."""
        return type(self).combine is Reduce.combine and k.ctype in ("float", "double") \
            and len(reduced) == 1 and reduced[0][1] == 1 and count >= 2 * SUM_LANES


SUM_LANES = 8


def sum_in_lanes(k, x, base: Expr, count: int) -> list[Stmt]:
    """acc = the sum of x[base .. base + count) in SUM_LANES interleaved partial sums,
    added pairwise at the end: one chain of dependent adds would bound the speed
    (C fixes the order of float additions, so gcc cannot split it itself); written
    as named scalars, gcc vectorizes them on a SIMD host and keeps them in
    registers on a Cortex-M. Rounding differs from a left-to-right sum, with an
    error bound no worse."""
    dt = kernel_dtype(k)
    xr, r = Var("xr", Type(dt, pointer=True, const=True)), Var("r")
    lanes = [value(k, f"s{j}") for j in range(SUM_LANES)]
    main = count // SUM_LANES * SUM_LANES
    stmts = [Decl(xr, param(x) + base), *(Decl(s, kernel_lit(k, 0)) for s in lanes),
             For(r, main, [Assign(s, xr[r + j] if j else xr[r], "+=")
                           for j, s in enumerate(lanes)], step=SUM_LANES)]
    pairs = lanes
    while len(pairs) > 1:
        pairs = [a + b for a, b in zip(pairs[::2], pairs[1::2])]
    acc = value(k, "acc")
    stmts.append(Decl(acc, pairs[0]))
    # Constant bounds, and no tail loop when there is no tail: gcc 12 -O3 proved a
    # `for (; r < count; ++r)` after a loop ending at r == count dead and refused it
    # under -Werror ("iteration ... invokes undefined behavior").
    if main < count:
        stmts.append(For(r, count, [Assign(acc, xr[r], "+=")], begin=main))
    return stmts


def element(k) -> Var:
    """The element a reduction reads (bound by reduce_nest)."""
    return value(k, "x", const=True)


def reduce_nest(k, x, reduced, base: Expr, body) -> list[Stmt]:
    """Loops over the reduced dims binding element(k) to each element, then the
    statements body(element); a block of its own when nothing is reduced (one
    element: ReduceLogSumExp's two nests would declare it twice in one scope)."""
    e = element(k)
    rs = [Var(f"r{j}") for j in range(len(reduced))]
    offset = sum_of([base, *(scaled(r, st) for r, (_, st) in zip(rs, reduced))])
    inner = [Decl(e, param(x)[offset]), *body(e)]
    if not reduced:
        return [Block(inner)]
    return loop_nest(zip(rs, (size for size, _ in reduced)), inner)


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
          final=lambda k, acc, n: (acc / kernel_lit(k, n) if n != 1 else acc) if n else
          kernel_lit(k, np.nan))
def _lowest(k, sign: int) -> Expr:
    """-inf (sign -1) or +inf in the kernel's dtype; for integers and bool its extremes."""
    dt = np.dtype(kernel_dtype(k))
    if dt.kind == "f":
        return kernel_lit(k, sign * np.inf)
    if dt == np.bool_:
        return kernel_lit(k, sign > 0)
    info = np.iinfo(dt)
    return kernel_lit(k, info.max if sign > 0 else info.min)


def _extreme(x, axes, keep, fn, sign):
    if x.size == 0:   # the empty set: the identity of max / min
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keep or d not in axes)
        fill = sign * np.inf if x.dtype.kind == "f" else (sign > 0 if x.dtype == np.bool_ else
                                                           (np.iinfo(x.dtype).max if sign > 0
                                                            else np.iinfo(x.dtype).min))
        return np.full(shape, fill, x.dtype)
    return fn(x, axis=axes, keepdims=keep)


def _extreme_step(k, cmp: str, acc: Expr, x: Expr) -> Expr:
    """acc cmp x: the new accumulator. Floats as np.max/np.min: a NaN is taken, and
    a NaN accumulator stays (no comparison with it is true)."""
    pick = gt(x, acc) if cmp == ">" else lt(x, acc)
    if k.ctype in ("float", "double"):
        return select(or_(pick, call("isnan", x)), x, acc)
    return select(pick, x, acc)


reduce_op("ReduceMax", lambda x, a, kd: _extreme(x, a, kd, np.max, -1), any_dtype=True,
          init=lambda k: _lowest(k, -1), combine=lambda k, acc, x: _extreme_step(k, ">", acc, x))
reduce_op("ReduceMin", lambda x, a, kd: _extreme(x, a, kd, np.min, 1), any_dtype=True,
          init=lambda k: _lowest(k, 1), combine=lambda k, acc, x: _extreme_step(k, "<", acc, x))
reduce_op("ReduceProd", lambda x, a, kd: np.prod(x, axis=a, keepdims=kd),
          init=lambda k: kernel_lit(k, 1), combine=lambda k, acc, x: acc * x)
reduce_op("ReduceL1", lambda x, a, kd: np.sum(np.abs(x), axis=a, keepdims=kd),
          combine=lambda k, acc, x: acc + call(libm(k, "fabs"), x))
reduce_op("ReduceL2", lambda x, a, kd: np.sqrt(np.sum(x * x, axis=a, keepdims=kd)),
          combine=lambda k, acc, x: acc + x * x,
          final=lambda k, acc, n: call(libm(k, "sqrt"), acc))
reduce_op("ReduceSumSquare", lambda x, a, kd: np.sum(x * x, axis=a, keepdims=kd),
          combine=lambda k, acc, x: acc + x * x)
reduce_op("ReduceLogSum", lambda x, a, kd: np.log(np.sum(x, axis=a, keepdims=kd)),
          final=lambda k, acc, n: call(libm(k, "log"), acc))


@register("ReduceLogSumExp")
class ReduceLogSumExp(Reduce):
    """log(sum(exp(x - max))) + max: two passes, stable for large inputs."""

    def np_reduce(self, x, axes, keep):
        m = np.max(x, axis=axes, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        r = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
        return r if keep else np.squeeze(r, axis=axes)

    def empty_value(self, k):
        return kernel_lit(k, -np.inf)

    def body(self, k, x, reduced, base, count):
        mx, acc = value(k, "mx"), value(k, "acc")
        return [Decl(mx, kernel_lit(k, -np.inf)),
                *reduce_nest(k, x, reduced, base,
                             lambda e: [Assign(mx, select(gt(e, mx), e, mx))]),
                If(not_(call("isfinite", mx)), [Assign(mx, kernel_lit(k, 0))]),
                Decl(acc, kernel_lit(k, 0)),
                *reduce_nest(k, x, reduced, base,
                             lambda e: [Assign(acc, call(libm(k, "exp"), e - mx), "+=")]),
                Decl(value(k, "v"), call(libm(k, "log"), acc) + mx)]
