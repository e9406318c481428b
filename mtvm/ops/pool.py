"""Pooling: MaxPool, AveragePool (1-D to 3-D windows), GlobalAveragePool,
GlobalMaxPool, MaxUnpool; NCHW, float (the max pools also 8/16/32-bit integers).

Canonical form (after `canonicalize`): strides, dilations and explicit pads are
attributes and auto_pad is NOTSET. Window semantics as ONNX Runtime and
PyTorch: with ceil_mode a last window may hang over the end of the padded
input (it is clipped, and dropped if it would start in the end padding);
AveragePool divides by the number of taps inside the input
(count_include_pad=0) or inside the padded input (count_include_pad=1).

auto_pad SAME_* pads as the spec says: output ceil(in / stride), total pad
(out - 1) * stride + dilated kernel extent - in, clamped at 0. (onnxruntime
sizes that pad with the undilated kernel, so it differs for dilated SAME pools.)

Where the ONNX references are wrong, mtvm follows onnxruntime and the tests
check against it: onnx.reference (1.23) shifts the windows when the ceil_mode
overhang is two or more elements (AveragePool kernel 3, stride 3, length 7),
and its GlobalMaxPool reduces the wrong axes for inputs that are not 4-D.

NaN propagates as in NumPy and the ONNX reference: a max pool over a window
holding a NaN gives NaN, whatever its position (onnxruntime's result depends on
where the NaN is: its x86 max instruction drops a NaN accumulator).

Not supported (UnsupportedError / ShapeError at compile time): dtypes other
than float32/float64 (plus int8/uint8/int16/uint16/int32 for the max pools);
pads as large as the dilated kernel extent (a window entirely in padding;
onnxruntime rejects it too).

The C kernels loop over batch, channel and output position; the range of
kernel taps inside the input is computed once per output position (shared
helpers in mtvm/ops/conv.py), so the inner loops have no bounds checks.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..codegen.cwriter import (Assign, Cast, Comment, Const, Decl, ExprStmt, For, If, RawExpr, Type,
                               Var, and_, call, gt, index_type, lt, not_, or_, param, render_c,
                               select, tail)
from .base import Op, move_input_to_attr, register
from .conv import (
    CWriter,
    check_float,
    lin,
    make_axes,
    tap_loops,
    window_attrs,
    window_bounds,
    window_views,
)
from .indexing import prod
from .reduce import SUM_LANES, sum_in_lanes

CINT = Type("int32", const=True)

INT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")


def lowest(dtype):
    """The identity of max: -inf, or the integer type's minimum."""
    dtype = np.dtype(dtype)
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def check_max_dtype(what: str, x) -> None:
    """Max pooling needs only comparisons: float and 8/16/32-bit integers."""
    if np.dtype(x.dtype).name not in INT_DTYPES:
        check_float(what, [x])


def pool_geometry(x_shape, *, kernel_shape=None, strides=None, dilations=None, pads=None,
                  auto_pad="NOTSET", ceil_mode=0):
    """Validated window axes of a pooling node."""
    if kernel_shape is None:
        raise ShapeError("kernel_shape is required")
    if len(x_shape) < 3:
        raise ShapeError(f"input {list(x_shape)} must have rank >= 3 (N, C, spatial...)")
    kernel, strides, dilations, pads = window_attrs(x_shape, kernel_shape, strides, dilations,
                                                    pads, auto_pad)
    rank = len(kernel)
    for i in range(rank):
        extent = (kernel[i] - 1) * dilations[i] + 1
        if max(pads[i], pads[rank + i]) >= extent:
            raise ShapeError(f"pads {pads} must be smaller than the kernel extent {extent} "
                             f"(a window would lie entirely in the padding)")
    return make_axes(x_shape[2:], kernel, strides, dilations, pads, ceil_mode)


def tap_counts(a, include_pad: bool) -> np.ndarray:
    """Per output position of axis `a`: taps inside the input (or the padded input)."""
    first = np.arange(a.out) * a.stride - a.pad_begin
    pos = first[:, None] + np.arange(a.kernel)[None, :] * a.dilation
    lo, hi = (-a.pad_begin, a.size + a.pad_end) if include_pad else (0, a.size)
    return ((pos >= lo) & (pos < hi)).sum(axis=1)


class WindowPool(Op):
    """MaxPool and AveragePool: a reduction over each window."""
    anchor = True

    def canonicalize(self, node, graph, opset):
        x = graph.tensors[node.inputs[0]]
        a = node.attrs
        if len(x.shape) < 3 or "kernel_shape" not in a:
            return  # `infer` reports it
        kernel, strides, dilations, pads = window_attrs(
            x.shape, a["kernel_shape"], a.get("strides"), a.get("dilations"), a.get("pads"),
            a.get("auto_pad", "NOTSET"))
        a.update(kernel_shape=kernel, strides=strides, pads=pads)
        if any(d != 1 for d in dilations):
            a["dilations"] = dilations
        a.pop("auto_pad", None)

    def infer(self, node, inputs, consts):
        x = inputs[0]
        axes = pool_geometry(x.shape, **self.window(node.attrs))
        shape = (*x.shape[:2], *[a.out for a in axes])
        return [(shape, x.dtype), (shape, np.dtype(np.int64))][:len(node.outputs)]

    @staticmethod
    def window(attrs: dict) -> dict:
        keys = ("kernel_shape", "strides", "dilations", "pads", "auto_pad", "ceil_mode")
        return {k: v for k, v in attrs.items() if k in keys}

    def macs(self, node, inputs, outputs):
        """Window taps read (compares or adds), not multiplies."""
        return int(outputs[0].size * np.prod(node.attrs.get("kernel_shape", [1])))

    def emit(self, k, **attrs):
        x = k.ins[0]
        axes = pool_geometry(x.shape, **self.window(attrs))
        return emit_pool(k, self, axes, attrs)

    # Hooks of the C emitter, per pooling kind.
    def init(self, k) -> str:
        raise NotImplementedError

    def accumulate(self, xe: str, positions: list[str], p: dict) -> str:
        raise NotImplementedError

    def finish(self, w: CWriter, k, axes, windows, attrs) -> None:
        """Statements turning the window reduction `acc` into the pooled value."""


@register("MaxPool")
class MaxPool(WindowPool):
    """The optional Indices output holds the flat input index of each maximum
    (the first one in scan order; a window holding NaN gives NaN and the index of
    its first NaN, as np.max and np.argmax), spatial dims row-major
    (storage_order=0) or column-major (1), batch and channel outermost, padding
    not counted."""

    def check(self, node, inputs):
        check_max_dtype("MaxPool", inputs[0])

    def reference(self, x, *, auto_pad="NOTSET", ceil_mode=0, dilations=None,
                  kernel_shape=None, pads=None, storage_order=0, strides=None):
        axes = pool_geometry(x.shape, kernel_shape=kernel_shape, strides=strides,
                             dilations=dilations, pads=pads, auto_pad=auto_pad,
                             ceil_mode=ceil_mode)
        index = input_indices(x.shape, storage_order)
        y = arg = None
        for (_, view), (_, where) in zip(window_views(x, axes, lowest(x.dtype)),
                                         window_views(index, axes, -1)):
            if y is None:
                y, arg = view.copy(), where.copy()
                continue
            take = (where >= 0) & ((view > y) | (arg < 0) | (isnan(view) & ~isnan(y)))
            y, arg = np.where(take, view, y), np.where(take, where, arg)
        return y.astype(x.dtype), arg

    def init(self, k):
        return k.lit(lowest(k.out.dtype))

    def accumulate(self, xe, positions, p):
        if not p["indices"]:
            return max_step(xe, p["float"])
        sizes = p["sizes"]
        if p["storage_order"]:
            strides = [int(np.prod(sizes[:i], dtype=np.int64)) for i in range(len(sizes))]
        else:
            strides = [int(np.prod(sizes[i + 1:], dtype=np.int64)) for i in range(len(sizes))]
        index = lin(("x_base", 1), *zip(positions, strides))
        x, acc, arg = RawExpr(xe), Var("acc"), Var("arg")
        take = or_(gt(x, acc), lt(arg, 0))
        if p["float"]:   # the first NaN of the window, as np.argmax
            take = or_(lt(arg, 0), and_(or_(gt(x, acc), call("isnan", x)),
                                        not_(call("isnan", acc))))
        return render_c(If(take, [Assign(acc, x), Assign(arg, RawExpr(index))]))


def isnan(a: np.ndarray) -> np.ndarray:
    """np.isnan, all False for integers."""
    return np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)


def max_step(xe: str, is_float: bool) -> str:
    """C statement acc = max(acc, xe) with NumPy's NaN rule for floats (a NaN
    anywhere in the window gives NaN): a NaN xe is taken, and a NaN acc stays
    because no comparison with it is true."""
    x, acc = RawExpr(xe), Var("acc")
    take = or_(gt(x, acc), call("isnan", x)) if is_float else gt(x, acc)
    return render_c(If(take, [Assign(acc, x)]))


def input_indices(shape, storage_order: int) -> np.ndarray:
    """Flat input index of every element as MaxPool's Indices output counts it."""
    index = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    if storage_order:
        spatial = int(np.prod(shape[2:]))
        nc = index // spatial
        cols = np.arange(spatial, dtype=np.int64).reshape(shape[:1:-1]).T
        index = nc * spatial + cols
    return index


@register("AveragePool")
class AveragePool(WindowPool):
    def check(self, node, inputs):
        check_float("AveragePool", inputs)

    def reference(self, x, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0,
                  dilations=None, kernel_shape=None, pads=None, strides=None):
        axes = pool_geometry(x.shape, kernel_shape=kernel_shape, strides=strides,
                             dilations=dilations, pads=pads, auto_pad=auto_pad,
                             ceil_mode=ceil_mode)
        total = np.zeros(x.shape[:2] + tuple(a.out for a in axes))
        for _, view in window_views(x.astype(np.float64), axes, 0.0):
            total += view
        count = np.ones(())
        for a in axes:
            count = np.multiply.outer(count, tap_counts(a, bool(count_include_pad)))
        return (total / count).astype(x.dtype)

    def init(self, k):
        return k.lit(0)

    def accumulate(self, xe, positions, p):
        return render_c(Assign(Var("acc"), RawExpr(xe), "+="))

    def finish(self, w, k, axes, windows, attrs):
        include_pad = bool(attrs.get("count_include_pad", 0))
        factors, const = [], 1
        for a, (o, (i0, lo, hi)) in zip(axes, windows):
            n = padded_taps(w, a, o, i0) if include_pad else \
                (hi - lo if isinstance(lo, int) and isinstance(hi, int) else
                 (hi if lo == 0 else f"({hi} - {lo})"))
            if isinstance(n, int):
                const *= n
            else:
                factors.append(n)
        if not factors:
            if const > 1:
                w.line(f"acc *= {k.lit(1.0 / const)};  /* 1 / {const} taps */")
            return
        if const != 1:
            factors.append(str(const))
        w.line(f"acc /= ({k.ctype})({' * '.join(factors)});  /* taps in the window */")


def padded_taps(w: CWriter, a, o, i0):
    """Taps of axis `a` inside the padded input at output `o` (count_include_pad=1):
    the kernel size, except where a ceil_mode window hangs over the end padding."""
    end = a.size + a.pad_end
    k, d = a.kernel, a.dilation
    if a.last_tap < end:
        return k
    if isinstance(o, int):
        return int(tap_counts(a, True)[o])
    var = f"k{a.name}_n"
    avail = f"{end} - {i0}" if d == 1 else f"({end} - {i0} + {d - 1}) / {d}"
    w.line(render_c(Decl(Var(var, CINT), select(lt(RawExpr(f"{i0} + {(k - 1) * d}"), end), k,
                                                RawExpr(avail)))))
    return var


def pool_comment(op, x, y, axes, attrs) -> str:
    def fmt(values):
        return "x".join(str(v) for v in values)
    pads = [a.pad_begin for a in axes] + [a.pad_end for a in axes]
    extra = ""
    if op.name == "AveragePool":
        extra = f", count_include_pad {attrs.get('count_include_pad', 0)}"
    return (f"/* {op.name} {len(axes)}-D: x {fmt(x.shape)} -> y {fmt(y.shape)};\n"
            f" * kernel {fmt(a.kernel for a in axes)}, stride {fmt(a.stride for a in axes)}, "
            f"dilation {fmt(a.dilation for a in axes)}, pads {pads}, "
            f"ceil_mode {attrs.get('ceil_mode', 0)}{extra} */")


def emit_pool(k, op, axes, attrs) -> str:
    w = CWriter()
    x, y = k.ins[0], k.out
    ct = k.ctype
    n_batch, chans = x.shape[0], x.shape[1]
    in_plane = int(np.prod(x.shape[2:], dtype=np.int64))
    out_plane = int(np.prod(y.shape[2:], dtype=np.int64))
    w.line(pool_comment(op, x, y, axes, attrs))
    indices = len(k.outs) > 1 and k.outs[1] is not None
    with w.loop("n", n_batch, "batch") as n, w.loop("c", chans, "channel") as c:
        base = lin((n, chans * in_plane), (c, in_plane))
        w.line(render_c(Decl(Var("x_c", Type(x.dtype, pointer=True, const=True)),
                             Var(x.c) + RawExpr(base))))
        if indices:
            w.line(render_c([Decl(Var("x_base", CINT), RawExpr(base)),
                             Comment("flat index of x_c[0]")]))
        emit_pool_positions(w, k, op, axes, attrs, [], dict(
            n=n, c=c, chans=chans, out_plane=out_plane, ct=ct, indices=indices,
            sizes=x.shape[2:], storage_order=attrs.get("storage_order", 0),
            float=np.dtype(x.dtype).kind == "f"))
    return w.text()


def emit_pool_positions(w, k, op, axes, attrs, windows, p):
    """Loop over output axis i = len(windows) (recursively); innermost: one value."""
    i = len(windows)
    if i < len(axes):
        a = axes[i]
        with w.loop(f"o{a.name}", a.out) as o:
            windows.append((o, window_bounds(w, a, o)))
            emit_pool_positions(w, k, op, axes, attrs, windows, p)
            windows.pop()
        return
    terms = [(p["n"], p["chans"] * p["out_plane"]), (p["c"], p["out_plane"])]
    stride = p["out_plane"]
    for a, (o, _) in zip(axes, windows):
        stride //= a.out
        terms.append((o, stride))
    acc, y_idx = Var("acc", Type(k.out.dtype)), Var("y_idx", CINT)
    w.line(render_c([Decl(y_idx, RawExpr(lin(*terms))), Decl(acc, RawExpr(op.init(k)))]))
    if p["indices"]:
        w.line(render_c([Decl(Var("arg", Type("int64")), Const(-1, "int64")),
                         Comment("flat input index of acc")]))
    tap_loops(w, axes, [b for _, b in windows], "x_c", p["ct"],
              lambda xe, taps, positions: op.accumulate(xe, positions, p))
    op.finish(w, k, axes, windows, attrs)
    ep = k.epilogue("acc", "y_idx", lin((p["c"], 1)))
    if ep:
        w.line(ep)
    w.line(render_c(Assign(Var("out0")[y_idx], acc)))
    if p["indices"]:
        w.line(render_c(Assign(Var("out1")[y_idx], Var("arg"))))


class GlobalPool(Op):
    """Reduction over all spatial positions of each (batch, channel)."""
    anchor = True
    is_max = False

    def check(self, node, inputs):
        if self.is_max:
            check_max_dtype(self.name, inputs[0])
        else:
            check_float(self.name, inputs)
        if len(inputs[0].shape) < 2:
            raise ShapeError(f"input {list(inputs[0].shape)} must have rank >= 2")

    def reference(self, x):
        axes = tuple(range(2, x.ndim))
        if self.is_max:
            return np.max(x, axis=axes, keepdims=True)
        return np.mean(x.astype(np.float64), axis=axes, keepdims=True).astype(x.dtype)

    def infer(self, node, inputs, consts):
        x = inputs[0]
        return [((*x.shape[:2], *[1] * (len(x.shape) - 2)), x.dtype)]

    def macs(self, node, inputs, outputs):
        return int(np.prod(inputs[0].shape, dtype=np.int64))

    def emit(self, k):
        x = k.ins[0]
        ct = k.ctype
        n_batch, chans = x.shape[0], x.shape[1]
        plane = int(np.prod(x.shape[2:], dtype=np.int64))
        w = CWriter()
        w.line(f"/* {self.name}: x {'x'.join(map(str, x.shape))} -> y "
               f"{'x'.join(map(str, k.out.shape))} */")
        with w.loop("n", n_batch, "batch") as n, w.loop("c", chans, "channel") as c:
            T = Type(x.dtype)
            y_idx, acc = Var("y_idx", Type("int32", const=True)), Var("acc", T)
            w.line(render_c(Decl(y_idx, RawExpr(lin((n, chans), (c, 1))))))
            if not self.is_max and ct in ("float", "double") and plane >= 2 * SUM_LANES:
                # interleaved partial sums: one chain of dependent float adds bounds the
                # speed (a 31x10 plane: 5.5 us of a 57 us model on an AVX-512 host)
                w.line(render_c(sum_in_lanes(k, x, Var("y_idx") * plane, plane)))
            else:
                w.line(render_c(Decl(Var("x_c", Type(x.dtype, pointer=True, const=True)),
                                     Var(x.c) + RawExpr(lin(("y_idx", plane))))))
                w.line(render_c(Decl(acc, Const(lowest(x.dtype) if self.is_max else 0,
                                                x.dtype))))
                with w.loop("i", plane, "spatial position") as i:
                    xe = f"x_c[{lin((i, 1))}]"
                    w.line(max_step(xe, np.dtype(x.dtype).kind == "f") if self.is_max else
                           render_c(Assign(acc, RawExpr(xe), "+=")))
            if not self.is_max and plane > 1:
                w.line(render_c([Assign(acc, Const(1.0 / plane, x.dtype), "*="),
                                 Comment(f"1 / {plane} positions")]))
            for stmt in tail(k, acc, y_idx, RawExpr(lin((c, 1)))):
                w.line(render_c(stmt))
            w.line(render_c(Assign(Var("out0")[y_idx], acc)))
        return w.text()


@register("GlobalAveragePool")
class GlobalAveragePool(GlobalPool):
    pass


@register("GlobalMaxPool")
class GlobalMaxPool(GlobalPool):
    is_max = True


@register("MaxUnpool")
class MaxUnpool(Op):
    def canonicalize(self, node, graph, opset):
        move_input_to_attr(graph, node, 2, "output_shape")

    def _default(self, x_shape, kernel_shape, pads, strides):
        D = len(kernel_shape)
        st = strides or [1] * D
        pd = pads or [0] * (2 * D)
        return list(x_shape[:2]) + [(x_shape[2 + i] - 1) * st[i] - pd[i] - pd[i + D]
                                    + kernel_shape[i] for i in range(D)]

    def reference(self, x, indices, *, kernel_shape, output_shape=None, pads=None,
                  strides=None):
        default = self._default(x.shape, kernel_shape, pads, strides)
        shape = [int(d) for d in output_shape] if output_shape is not None else default
        out = np.zeros(shape, x.dtype)
        # Indices address the default-sized output; placed by coordinates.
        coords = np.unravel_index(indices.ravel().astype(np.int64), default)
        out[coords] = x.ravel()
        return out

    def emit(self, k, *, kernel_shape, output_shape=None, pads=None, strides=None):
        x = k.ins[0]
        default = self._default(x.shape, kernel_shape, pads, strides)
        shape = list(k.out.shape)
        i, r, o = Var("i"), Var("r"), Var("o")
        out0 = param(k.out, output=True)
        loop = [Decl(r, Cast(index_type(), param(k.ins[1])[i])), Decl(o, Const(0))]
        if shape == default:
            loop.append(Assign(o, r))
        else:
            loop += [Assign(o, (r / prod(default[d + 1:])) % default[d] * prod(shape[d + 1:]),
                            "+=") for d in range(len(shape))]
        loop.append(Assign(out0[o], param(x)[i]))
        size = RawExpr(f"{k.out.size} * sizeof out0[0]")
        return render_c([ExprStmt(call("memset", out0, 0, size)), For(i, x.size, loop)])
