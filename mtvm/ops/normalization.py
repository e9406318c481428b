"""Normalizations (inference): BatchNormalization, InstanceNormalization,
LayerNormalization, LpNormalization, RMSNormalization, GroupNormalization,
MeanVarianceNormalization and LRN.

BatchNormalization with constant statistics is folded into the producing
Conv/Gemm, or lowered to a Mul and an Add, by mtvm/passes/batchnorm.py; the
kernel here runs when neither happened (statistics computed at run time, or
compiling without that pass).

Unsupported (float32/float64 only): training (BatchNormalization
training_mode=1 or its running-statistics outputs: "training_mode=1 is not
supported (inference only); export the model in eval mode"), LayerNormalization
stash_type != 1, LpNormalization p other than 1 and 2.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedError
from .base import Op, register
from .elementwise import broadcast_strides
from .indexing import naxis, nest, strides_of
from .reduce import (
    at,
    indent,
    libm,
    norm_axis,
    prod,
    require_float,
    row_loops,
    split_axis,
)


def _channel_loops(k, n: int, c: int, inner: int, per_channel: list[str],
                   per_element) -> str:
    """for c: <per_channel>; for n, s: idx; <per_element(idx)>  (NC... layout)."""
    lines = [f"for (size_t c = 0; c < {c}; ++c) {{"]
    lines += indent(per_channel)
    lines.append(f"    for (size_t n = 0; n < {n}; ++n) {{")
    if inner == 1:
        lines.append(f"        const size_t idx = n * {c} + c;")
        lines += indent(per_element("idx"), 2)
    else:
        lines.append(f"        const size_t base = n * {c * inner} + c * {inner};")
        lines.append(f"        for (size_t s = 0; s < {inner}; ++s) {{")
        lines += indent(per_element("base + s"), 3)
        lines.append("        }")
    lines += ["    }", "}"]
    return "\n".join(lines)


def _store(k, value: str, idx: str, ch: str | None) -> list[str]:
    lines = [f"{k.ctype} v = {value};"]
    ep = k.epilogue("v", idx, ch)
    if ep:
        lines.append(ep)
    lines.append(f"out0[{idx}] = v;")
    return lines


@register("BatchNormalization")
class BatchNormalization(Op):
    """y = (x - mean) / sqrt(var + epsilon) * scale + B, per channel (axis 1)."""
    anchor = True

    def canonicalize(self, node, graph, opset):
        if node.attrs.get("training_mode", 0):
            raise UnsupportedError("training_mode=1 is not supported (inference only); "
                                   "export the model in eval mode")
        if any(node.outputs[1:]):
            raise UnsupportedError("the running mean/variance outputs (training) are not "
                                   "supported; export the model in eval mode")
        node.attrs.pop("training_mode", None)
        node.attrs.pop("momentum", None)   # training only
        node.attrs.pop("spatial", None)    # opset < 9 only; 1 is the per-channel form

    def check(self, node, inputs):
        require_float(node, inputs)
        if len(inputs[0].shape) < 2:
            raise UnsupportedError("input must have rank >= 2 (N, C, ...)")

    def reference(self, x, scale, b, mean, var, *, epsilon=1e-5):
        shape = (1, -1) + (1,) * (x.ndim - 2)
        r = lambda a: np.asarray(a).reshape(shape)  # noqa: E731
        y = (x - r(mean)) / np.sqrt(r(var) + np.asarray(epsilon, x.dtype)) * r(scale) + r(b)
        return y.astype(x.dtype)

    def infer(self, node, inputs, consts):
        return [(inputs[0].shape, inputs[0].dtype)]

    def macs(self, node, inputs, outputs):
        return inputs[0].size

    def emit(self, k, *, epsilon=1e-5):
        x, scale, b, mean, var = k.ins[:5]
        n, c = x.shape[:2]
        per_channel = [
            f"const {k.ctype} g = {scale.c}[c] / {libm(k, 'sqrt')}({var.c}[c] + "
            f"{k.lit(epsilon)});",
            f"const {k.ctype} t = {b.c}[c] - {mean.c}[c] * g;"]
        return _channel_loops(k, n, c, prod(x.shape[2:]), per_channel,
                              lambda i: _store(k, f"{x.c}[{i}] * g + t", i, "c"))


@register("InstanceNormalization")
class InstanceNormalization(Op):
    """Per (n, c): y = (x - mean) / sqrt(var + epsilon) * scale[c] + B[c], the
    statistics taken over the spatial dims."""
    anchor = True

    def check(self, node, inputs):
        require_float(node, inputs)
        if len(inputs[0].shape) < 3:
            raise UnsupportedError("input must have rank >= 3 (N, C, D1, ...)")

    def reference(self, x, scale, b, *, epsilon=1e-5):
        axes = tuple(range(2, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
        shape = (1, -1) + (1,) * (x.ndim - 2)
        y = (x - mean) / np.sqrt(var + np.asarray(epsilon, x.dtype)) * scale.reshape(shape) \
            + b.reshape(shape)
        return y.astype(x.dtype)

    def infer(self, node, inputs, consts):
        return [(inputs[0].shape, inputs[0].dtype)]

    def macs(self, node, inputs, outputs):
        return 3 * inputs[0].size

    def emit(self, k, *, epsilon=1e-5):
        x, scale, b = k.ins[:3]
        n, c = x.shape[:2]
        inner = prod(x.shape[2:])
        lines = [f"for (size_t n = 0; n < {n}; ++n) {{",
                 f"    for (size_t c = 0; c < {c}; ++c) {{",
                 f"        const size_t base = n * {c * inner} + c * {inner};"]
        body = _mean_inv_std(k, x, "base", inner, epsilon)
        body += [f"const {k.ctype} g = inv_std * {scale.c}[c];",
                 f"const {k.ctype} t = {b.c}[c] - mean * g;",
                 f"for (size_t s = 0; s < {inner}; ++s) {{"]
        body += indent(_store(k, f"{x.c}[base + s] * g + t", "base + s", "c"))
        body.append("}")
        lines += indent(body, 2) + ["    }", "}"]
        return "\n".join(lines)


def _mean_inv_std(k, x, base: str, count: int, epsilon) -> list[str]:
    """Two-pass mean and 1/sqrt(variance + epsilon) of x[base .. base + count)."""
    t = k.ctype
    return [f"{t} sum = {k.lit(0)};",
            f"for (size_t s = 0; s < {count}; ++s) {{",
            f"    sum += {x.c}[{base} + s];",
            "}",
            f"const {t} mean = sum / {k.lit(count)};",
            f"{t} sq = {k.lit(0)};",
            f"for (size_t s = 0; s < {count}; ++s) {{",
            f"    const {t} d = {x.c}[{base} + s] - mean;",
            "    sq += d * d;",
            "}",
            f"const {t} inv_std = {k.lit(1)} / {libm(k, 'sqrt')}(sq / {k.lit(count)} + "
            f"{k.lit(epsilon)});"]


@register("LayerNormalization")
class LayerNormalization(Op):
    """Statistics over the dims from `axis` on; Scale and B broadcast (unidirectionally)
    to those dims.
    Optional outputs Mean and InvStdDev (shape: x.shape[:axis] + 1s)."""
    anchor = True
    min_opset = 17

    def check(self, node, inputs):
        require_float(node, inputs)
        if node.attrs.get("stash_type", 1) != 1:
            raise UnsupportedError("stash_type other than 1 (float32 statistics) is not "
                                   "supported")
        shape = inputs[0].shape
        axis = norm_axis(node.attrs.get("axis", -1), len(shape))
        for t in inputs[1:]:
            if t is not None and np.broadcast_shapes(t.shape, shape[axis:]) != shape[axis:]:
                raise ShapeError(f"Scale/B of shape {list(t.shape)} does not broadcast to "
                                 f"the normalized shape {list(shape[axis:])}")

    def reference(self, x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
        axis = norm_axis(axis, x.ndim)
        axes = tuple(range(axis, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
        inv_std = 1 / np.sqrt(var + np.asarray(epsilon, x.dtype))
        y = (x - mean) * inv_std * scale
        if b is not None:
            y = y + b
        return y.astype(x.dtype), mean.astype(x.dtype), inv_std.astype(x.dtype)

    def infer(self, node, inputs, consts):
        x = inputs[0]
        axis = norm_axis(node.attrs.get("axis", -1), len(x.shape))
        stats = tuple(x.shape[:axis]) + (1,) * (len(x.shape) - axis)
        return [(x.shape, x.dtype), (stats, x.dtype), (stats, x.dtype)]

    def macs(self, node, inputs, outputs):
        return 4 * inputs[0].size

    def emit(self, k, *, axis=-1, epsilon=1e-5, stash_type=1):
        x = k.ins[0]
        axis = norm_axis(axis, len(x.shape))
        rows, cols = prod(x.shape[:axis]), prod(x.shape[axis:])

        norm_shape = x.shape[axis:]
        params = [b for b in k.ins[1:3] if b is not None]
        # Scale/B of the full normalized shape (or scalars) are read at j; others
        # broadcast along some normalized dims, which then get a loop each.
        nested = any(b.size not in (1, cols) for b in params)
        names = [f"j{d}" for d in range(len(norm_shape))]

        def param(buf):
            if buf.size == 1:
                return f"{buf.c}[0]"
            if not nested:
                return f"{buf.c}[j]"
            st = broadcast_strides(buf.shape, norm_shape)
            terms = [v if t == 1 else f"{v} * {t}" for v, t in zip(names, st) if t]
            return f"{buf.c}[{' + '.join(terms) or '0'}]"

        value = f"({x.c}[base + j] - mean) * inv_std * {param(k.ins[1])}"
        if len(k.ins) > 2 and k.ins[2] is not None:
            value += f" + {param(k.ins[2])}"
        body = [f"const size_t base = r * {cols};"]
        body += _mean_inv_std(k, x, "base", cols, epsilon)
        for i, what in ((1, "mean"), (2, "inv_std")):
            if len(k.outs) > i and k.outs[i] is not None:
                body.append(f"out{i}[r] = {what};")
        store = _store(k, value, "base + j", None)
        if not nested:
            body += [f"for (size_t j = 0; j < {cols}; ++j) {{"] + indent(store) + ["}"]
        else:
            flat = " + ".join(v if st == 1 else f"{v} * {st}"
                              for v, st in zip(names, prod_strides(norm_shape)))
            inner = [f"const size_t j = {flat};"] + store
            for d in reversed(range(len(norm_shape))):
                inner = [f"for (size_t {names[d]} = 0; {names[d]} < {norm_shape[d]}; "
                         f"++{names[d]}) {{"] + indent(inner) + ["}"]
            body += inner
        return "\n".join([f"for (size_t r = 0; r < {rows}; ++r) {{"] + indent(body) + ["}"])


def prod_strides(shape) -> list[int]:
    """Row-major element strides of `shape`."""
    return [prod(shape[d + 1:]) for d in range(len(shape))]


@register("LpNormalization")
class LpNormalization(Op):
    """x / ||x||_p along `axis` (p = 1 or 2); a zero norm gives 0."""
    anchor = True

    def check(self, node, inputs):
        require_float(node, inputs)
        if node.attrs.get("p", 2) not in (1, 2):
            raise UnsupportedError(f"p={node.attrs.get('p')}: only p=1 and p=2 exist")

    def reference(self, x, *, axis=-1, p=2):
        norm = np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1 else \
            np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(norm == 0, 0, x / norm).astype(x.dtype)

    def infer(self, node, inputs, consts):
        return [(inputs[0].shape, inputs[0].dtype)]

    def macs(self, node, inputs, outputs):
        return 2 * inputs[0].size

    def emit(self, k, *, axis=-1, p=2):
        x = k.ins[0]
        outer, n, inner = split_axis(x.shape, norm_axis(axis, len(x.shape)))
        t = k.ctype
        elem = f"{x.c}[{at('base', 'r', inner)}]"
        acc = f"{libm(k, 'fabs')}({elem})" if p == 1 else f"{elem} * {elem}"
        norm = "sum" if p == 1 else f"{libm(k, 'sqrt')}(sum)"
        body = [f"{t} sum = {k.lit(0)};",
                f"for (size_t r = 0; r < {n}; ++r) {{",
                f"    sum += {acc};",
                "}",
                f"const {t} norm = {norm};",
                f"const {t} inv = norm == {k.lit(0)} ? {k.lit(0)} : {k.lit(1)} / norm;",
                f"for (size_t r = 0; r < {n}; ++r) {{",
                f"    const size_t idx = {at('base', 'r', inner)};"]
        body += indent(_store(k, f"{x.c}[idx] * inv", "idx", None))
        body.append("}")
        return "\n".join(row_loops(outer, n, inner, body))


def bcast_offset(idx: str, in_shape, out_shape) -> str:
    """C expression: offset into a tensor of in_shape broadcast to out_shape,
    for the flat output index `idx`."""
    from .elementwise import broadcast_strides
    st = broadcast_strides(in_shape, out_shape)
    terms = []
    for d, s in enumerate(st):
        if not s:
            continue
        inner = prod(out_shape[d + 1:])
        c = f"({idx} / {inner})" if inner > 1 else f"{idx}"
        c = f"({c} % {out_shape[d]})" if d > 0 else c
        terms.append(c if s == 1 else f"{c} * {s}")
    return " + ".join(terms) if terms else "0"


@register("RMSNormalization")
class RMSNormalization(Op):
    def reference(self, x, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
        a = naxis(axis, x.ndim)
        ms = np.mean(np.square(x.astype(np.float64)), axis=tuple(range(a, x.ndim)),
                     keepdims=True)
        return (x / np.sqrt(ms + epsilon) * scale).astype(x.dtype)

    def emit(self, k, *, axis=-1, epsilon=1e-5, stash_type=1):
        x, w = k.ins[0], k.ins[1]
        a = naxis(axis, len(x.shape))
        outer, n = prod(x.shape[:a]), prod(x.shape[a:])
        t = k.ctype
        widx = bcast_offset("p", w.shape, x.shape)
        return "\n".join(nest([outer], [
            f"const size_t base = i0 * {n};",
            f"{t} ss = {k.lit(0)};",
            f"for (size_t j = 0; j < {n}; ++j) {{",
            "    ss += in0[base + j] * in0[base + j];",
            "}",
            f"{t} r = {k.lit(1)} / {libm(k, 'sqrt')}(ss / {k.lit(n)} + {k.lit(epsilon)});",
            f"for (size_t j = 0; j < {n}; ++j) {{",
            "    const size_t p = base + j;",
            f"    {t} v = in0[p] * r * in1[{widx}];",
            f"    {k.epilogue('v', 'p')}",
            "    out0[p] = v;",
            "}"]))


@register("LRN")
class LRN(Op):
    """Local response normalization across channels (NCHW...)."""

    def reference(self, x, *, size, alpha=1e-4, beta=0.75, bias=1.0):
        C = x.shape[1]
        sq = np.square(x.astype(np.float64))
        s = np.zeros_like(sq)
        lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
        for c in range(C):
            s[:, c] = sq[:, max(0, c - lo):min(C, c + hi + 1)].sum(axis=1)
        return (x / (bias + alpha / size * s) ** beta).astype(x.dtype)

    def emit(self, k, *, size, alpha=1e-4, beta=0.75, bias=1.0):
        x = k.ins[0]
        N, C = x.shape[:2]
        inner = prod(x.shape[2:])
        lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
        t = k.ctype
        return "\n".join(nest([N, C, inner], [
            f"const size_t c0 = i1 >= {lo} ? i1 - {lo} : 0;",
            f"const size_t c1 = i1 + {hi} < {C} ? i1 + {hi} : {C - 1};",
            f"{t} s = {k.lit(0)};",
            "for (size_t c = c0; c <= c1; ++c) {",
            f"    const {t} v = in0[(i0 * {C} + c) * {inner} + i2];",
            "    s += v * v;",
            "}",
            f"const size_t p = (i0 * {C} + i1) * {inner} + i2;",
            f"{t} v = in0[p] / {libm(k, 'pow')}({k.lit(bias)} + {k.lit(alpha / size)} * s, "
            f"{k.lit(beta)});",
            k.epilogue("v", "p"),
            "out0[p] = v;"]))


def _mean_var_lines(k, n: int, base: str, stride: str = "") -> list[str]:
    """C lines computing `mean` and `var` of n values in0[base + j{stride}]."""
    t = k.ctype
    at = f"in0[{base} + j{stride}]"
    return [f"{t} mean = {k.lit(0)}, var = {k.lit(0)};",
            f"for (size_t j = 0; j < {n}; ++j) mean += {at};",
            f"mean /= {k.lit(n)};",
            f"for (size_t j = 0; j < {n}; ++j) {{ const {t} d = {at} - mean; var += d * d; }}",
            f"var /= {k.lit(n)};"]


@register("MeanVarianceNormalization")
class MeanVarianceNormalization(Op):
    def reference(self, x, *, axes=(0, 2, 3)):
        ax = tuple(naxis(a, x.ndim) for a in axes)
        m = x.mean(axis=ax, keepdims=True)
        v = ((x - m) ** 2).mean(axis=ax, keepdims=True)
        return ((x - m) / np.sqrt(v + 1e-9)).astype(x.dtype)

    def emit(self, k, *, axes=(0, 2, 3)):
        x = k.ins[0]
        rank = len(x.shape)
        ax = sorted(naxis(a, rank) for a in axes)
        kept = [d for d in range(rank) if d not in ax]
        st = strides_of(x.shape)
        n = prod([x.shape[d] for d in ax])
        # Offsets of the reduced elements relative to a kept position: a table.
        red = [0]
        for d in ax:
            red = [o + i * st[d] for o in red for i in range(x.shape[d])]
        t = k.ctype
        kept_shape = [x.shape[d] for d in kept]
        base = " + ".join(f"i{j} * {st[d]}" for j, d in enumerate(kept)) or "0"
        lines = [f"static const size_t red[{len(red)}] = {{ {', '.join(map(str, red))} }};"]
        lines += nest(kept_shape or [1], [f"const size_t base = {base};"]
                      + [f"{t} mean = {k.lit(0)}, var = {k.lit(0)};",
                         f"for (size_t j = 0; j < {n}; ++j) mean += in0[base + red[j]];",
                         f"mean /= {k.lit(n)};",
                         f"for (size_t j = 0; j < {n}; ++j) {{ const {t} d = in0[base + red[j]]"
                         " - mean; var += d * d; }",
                         f"var /= {k.lit(n)};",
                         f"const {t} r = {k.lit(1)} / {libm(k, 'sqrt')}(var + {k.lit(1e-9)});",
                         f"for (size_t j = 0; j < {n}; ++j) out0[base + red[j]] = "
                         "(in0[base + red[j]] - mean) * r;"])
        return "\n".join(lines)


@register("GroupNormalization")
class GroupNormalization(Op):
    def reference(self, x, scale, bias, *, num_groups, epsilon=1e-5, stash_type=1):
        N, C = x.shape[:2]
        g = x.reshape(N, num_groups, -1).astype(np.float64)
        m = g.mean(axis=2, keepdims=True)
        v = g.var(axis=2, keepdims=True)
        y = ((g - m) / np.sqrt(v + epsilon)).reshape(x.shape)
        shp = (1, C) + (1,) * (x.ndim - 2)
        if scale.size == num_groups and num_groups != C:   # opset 18 form: per group
            scale = np.repeat(scale, C // num_groups)
            bias = np.repeat(bias, C // num_groups)
        return (y * scale.reshape(shp) + bias.reshape(shp)).astype(x.dtype)

    def emit(self, k, *, num_groups, epsilon=1e-5, stash_type=1):
        x, sc = k.ins[0], k.ins[1]
        N, C = x.shape[:2]
        inner = prod(x.shape[2:])
        G = num_groups
        n = C // G * inner
        per_group = sc.size == G and G != C
        ch = f"(i1 * {C // G} + j / {inner})"
        w = f"in1[i1]" if per_group else f"in1[{ch}]"
        b = f"in2[i1]" if per_group else f"in2[{ch}]"
        t = k.ctype
        return "\n".join(nest([N, G], [f"const size_t base = (i0 * {G} + i1) * {n};"]
                              + _mean_var_lines(k, n, "base")
                              + [f"const {t} r = {k.lit(1)} / {libm(k, 'sqrt')}(var + "
                                 f"{k.lit(epsilon)});",
                                 f"for (size_t j = 0; j < {n}; ++j) {{",
                                 f"    {t} v = (in0[base + j] - mean) * r * {w} + {b};",
                                 f"    {k.epilogue('v', 'base + j')}",
                                 "    out0[base + j] = v;",
                                 "}"]))
