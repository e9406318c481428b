"""More normalizations: RMSNormalization, LRN, GroupNormalization and
MeanVarianceNormalization. Each is one kernel with loops over rows; nothing
needs scratch memory."""
from __future__ import annotations

import numpy as np

from .base import Op, register
from .indexing import naxis, nest, prod, strides_of


def _libm(k, name: str) -> str:
    return name + ("f" if k.ctype == "float" else "")


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
            f"{t} r = {k.lit(1)} / {_libm(k, 'sqrt')}(ss / {k.lit(n)} + {k.lit(epsilon)});",
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
            f"{t} v = in0[p] / {_libm(k, 'pow')}({k.lit(bias)} + {k.lit(alpha / size)} * s, "
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
                         f"const {t} r = {k.lit(1)} / {_libm(k, 'sqrt')}(var + {k.lit(1e-9)});",
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
                              + [f"const {t} r = {k.lit(1)} / {_libm(k, 'sqrt')}(var + "
                                 f"{k.lit(epsilon)});",
                                 f"for (size_t j = 0; j < {n}; ++j) {{",
                                 f"    {t} v = (in0[base + j] - mean) * r * {w} + {b};",
                                 f"    {k.epilogue('v', 'base + j')}",
                                 "    out0[base + j] = v;",
                                 "}"]))
