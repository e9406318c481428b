"""Assorted operators: RotaryEmbedding, BitCast, CenterCropPad, Einsum, the
window functions (Hann, Hamming, Blackman: their size is a compile-time
value, so they fold to constants), DFT and STFT (direct O(n^2) transforms,
accumulated in double), Col2Im, MaxUnpool, Det, MelWeightMatrix (folded) and
TfIdfVectorizer (integer pools).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import UnsupportedError
from .base import Op, move_input_to_attr, need_const, register
from .indexing import body, nest, prod, strides_of


def _libm(k, name: str) -> str:
    return name + ("f" if k.ctype == "float" else "")


@register("RotaryEmbedding")
class RotaryEmbedding(Op):
    def reference(self, x, cos, sin, position_ids=None, **attrs):
        from onnx.reference.ops.op_rotary_embedding import rotary_embedding
        return rotary_embedding(x, cos, sin, position_ids=position_ids, **attrs).astype(x.dtype)

    def emit(self, k, *, interleaved=0, rotary_embedding_dim=0, num_heads=0):
        x = k.ins[0]
        pos = k.ins[3] if len(k.ins) > 3 else None
        if len(x.shape) == 4:
            B, H, S, D = x.shape
            addr = f"((b * {H} + h) * {S} + s) * {D}"
        else:
            B, S, HD = x.shape
            H = num_heads
            D = HD // H
            addr = f"(b * {S} + s) * {HD} + h * {D}"
        R = rotary_embedding_dim or D
        half = R // 2
        cache = f"(size_t)in3[b * {S} + s] * {half}" if pos is not None else \
            f"(b * {S} + s) * {half}"
        if interleaved:
            i1, i2 = "2 * i", "2 * i + 1"
        else:
            i1, i2 = "i", f"i + {half}"
        t = k.ctype
        lines = nest([B, S, H], [
            "const size_t b = i0, s = i1, h = i2;",
            f"const size_t base = {addr};",
            f"const size_t cb = {cache};",
            f"for (size_t i = 0; i < {half}; ++i) {{",
            f"    const {t} c = in1[cb + i], sn = in2[cb + i];",
            f"    const {t} x1 = in0[base + {i1}], x2 = in0[base + {i2}];",
            f"    out0[base + {i1}] = c * x1 - sn * x2;",
            f"    out0[base + {i2}] = sn * x1 + c * x2;",
            "}",
            f"for (size_t d = {R}; d < {D}; ++d) out0[base + d] = in0[base + d];"])
        return body(lines)


@register("BitCast")
class BitCast(Op):
    def reference(self, x, *, to):
        from .cast import np_dtype
        dt = np_dtype(to)
        if dt.itemsize != x.dtype.itemsize:
            raise UnsupportedError("BitCast between types of different widths")
        return np.array(x, copy=True).view(dt)

    def emit(self, k, *, to):
        return f"memcpy(out0, in0, {k.out.size * k.out.dtype.itemsize});"


@register("CenterCropPad")
class CenterCropPad(Op):
    def canonicalize(self, node, graph, opset):
        move_input_to_attr(graph, node, 1, "shape")

    def _plan(self, in_shape, shape, axes):
        rank = len(in_shape)
        axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
        out_shape, src_start, dst_start, count = list(in_shape), [0] * rank, [0] * rank, \
            list(in_shape)
        for a, sh in zip(axes, shape):
            dim = in_shape[a]
            out_shape[a] = sh
            if sh < dim:
                src_start[a] = (dim - sh) // 2
                count[a] = sh
            elif sh > dim:
                dst_start[a] = (sh - dim) // 2
        return out_shape, src_start, dst_start, count

    def reference(self, x, *, shape, axes=None):
        out_shape, ss, ds, cnt = self._plan(x.shape, shape, axes)
        res = np.zeros(out_shape, x.dtype)
        res[tuple(slice(d, d + c) for d, c in zip(ds, cnt))] = \
            x[tuple(slice(s, s + c) for s, c in zip(ss, cnt))]
        return res

    def emit(self, k, *, shape, axes=None):
        x = k.ins[0]
        out_shape, ss, ds, cnt = self._plan(x.shape, shape, axes)
        ost, ist = strides_of(out_shape), x.strides
        lines = [f"memset(out0, 0, {k.out.size} * sizeof out0[0]);"]
        if prod(cnt):
            vs = [f"i{d}" for d in range(len(cnt))]
            src = " + ".join([str(sum(s * st for s, st in zip(ss, ist)))]
                             + [f"{v} * {st}" for v, st in zip(vs, ist)])
            dst = " + ".join([str(sum(d * st for d, st in zip(ds, ost)))]
                             + [f"{v} * {st}" for v, st in zip(vs, ost)])
            lines += nest(cnt, [f"out0[{dst}] = in0[{src}];"])
        return body(lines)


@register("Einsum")
class Einsum(Op):
    """Any equation (an ellipsis becomes letters): loops over the output
    letters, an inner loop nest over the summed letters."""

    def reference(self, *xs, equation):
        wide = [x.astype(np.float32) if x.dtype.kind not in "fiub" else x for x in xs]
        return np.einsum(equation, *wide).astype(xs[0].dtype)

    @staticmethod
    def _expand(equation: str, ranks) -> str:
        """Equation with each "..." spelled out as upper-case letters."""
        eq = equation.replace(" ", "")
        if "..." not in eq:
            return eq
        lhs, arrow, rhs = eq.partition("->")
        terms = lhs.split(",")
        nell = max(r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t)
        letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:nell]
        out_terms = []
        for t, r in zip(terms, ranks):
            n = r - len(t.replace("...", ""))
            out_terms.append(t.replace("...", letters[nell - n:]))
        if arrow:
            rhs = rhs.replace("...", letters)
        else:
            rest = "".join(sorted(c for c in set("".join(out_terms)) if c.islower()
                                  and "".join(out_terms).count(c) == 1))
            rhs = letters + rest
        return ",".join(out_terms) + "->" + rhs

    def emit(self, k, *, equation):
        eq = self._expand(equation, [len(b.shape) for b in k.ins])
        lhs, _, rhs = eq.partition("->")
        terms = lhs.split(",")
        if not _:
            letters = sorted(set(lhs.replace(",", "")))
            rhs = "".join(c for c in letters if lhs.count(c) == 1)
        size = {}
        for term, b in zip(terms, k.ins):
            for c, n in zip(term, b.shape):
                size[c] = n
        summed = [c for c in dict.fromkeys(lhs.replace(",", "")) if c not in rhs]
        t = k.ctype
        prods = []
        for j, (term, b) in enumerate(zip(terms, k.ins)):
            st = strides_of(b.shape)
            idx = " + ".join(f"{_v(c)} * {s}" for c, s in zip(term, st)) or "0"
            prods.append(f"in{j}[{idx}]")
        ost = strides_of([size[c] for c in rhs])
        oidx = " + ".join(f"{_v(c)} * {s}" for c, s in zip(rhs, ost)) or "0"
        inner = [f"acc += {' * '.join(prods)};"]
        for c in reversed(summed):
            inner = [f"for (size_t {_v(c)} = 0; {_v(c)} < {size[c]}; ++{_v(c)}) {{"] + \
                ["    " + s for s in inner] + ["}"]
        lines_in = [f"{t} acc = {k.lit(0)};"] + inner + [f"out0[{oidx}] = acc;"]
        for c in reversed(rhs):
            lines_in = [f"for (size_t {_v(c)} = 0; {_v(c)} < {size[c]}; ++{_v(c)}) {{"] + \
                ["    " + s for s in lines_in] + ["}"]
        return body(lines_in)

    def macs(self, node, inputs, outputs):
        return 0


def _v(c: str) -> str:
    return f"i_{c}" if c.islower() else f"I_{c}"


# -- signal: windows and DFT ---------------------------------------------------------------

class _Window(Op):
    def canonicalize(self, node, graph, opset):
        v = need_const(graph, node, 0, "size")
        node.attrs["size"] = int(np.asarray(v).ravel()[0])
        node.inputs = []

    def values(self, n, N):
        raise NotImplementedError

    def reference(self, *, size, output_datatype=1, periodic=1):
        from .cast import np_dtype
        N = size if periodic else size - 1
        n = np.arange(size, dtype=np.float64)
        return self.values(n, N).astype(np_dtype(output_datatype))


@register("HannWindow")
class HannWindow(_Window):
    def values(self, n, N):
        return np.sin(n * np.pi / N) ** 2


@register("HammingWindow")
class HammingWindow(_Window):
    def values(self, n, N):
        return 25 / 46 - (1 - 25 / 46) * np.cos(2 * np.pi * n / N)


@register("BlackmanWindow")
class BlackmanWindow(_Window):
    def values(self, n, N):
        return 0.42 - 0.5 * np.cos(2 * np.pi * n / N) + 0.08 * np.cos(4 * np.pi * n / N)


@register("DFT")
class DFT(Op):
    """Direct DFT along one axis; the last input dim is 1 (real) or 2 (complex)."""

    def canonicalize(self, node, graph, opset):
        if opset >= 20:
            a = need_const(graph, node, 2, "axis")
            if a is not None:
                node.attrs["axis"] = int(np.asarray(a).ravel()[0])
            if len(node.inputs) > 2:
                node.inputs[2] = ""
        n = need_const(graph, node, 1, "dft_length")
        if n is not None:
            node.attrs["dft_length"] = int(np.asarray(n).ravel()[0])
        if len(node.inputs) > 1:
            node.inputs[1] = ""
        while node.inputs and not node.inputs[-1]:
            node.inputs.pop()
        node.attrs.setdefault("axis", 1 if opset < 20 else -2)

    def _geom(self, shape, axis, dft_length, onesided):
        rank = len(shape)
        a = axis + rank if axis < 0 else axis
        n_in = shape[a]
        n = dft_length or n_in
        n_out = n // 2 + 1 if onesided else n
        return a, n_in, n, n_out

    def reference(self, x, *, axis=1, dft_length=None, inverse=0, onesided=0):
        a, n_in, n, n_out = self._geom(x.shape, axis, dft_length, onesided)
        c = x[..., 0] + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
        if inverse and onesided:      # irfft: Hermitian half spectrum -> real signal
            n = dft_length or 2 * (n_in - 1)
            return np.fft.irfft(c, n=n, axis=a)[..., None].astype(x.dtype)
        if n_in < n:
            pad = [(0, 0)] * c.ndim
            pad[a] = (0, n - n_in)
            c = np.pad(c, pad)
        else:
            c = np.take(c, range(n), axis=a)
        r = np.fft.ifft(c, axis=a) if inverse else np.fft.fft(c, axis=a)
        r = np.take(r, range(n_out), axis=a)
        return np.stack([r.real, r.imag], axis=-1).astype(x.dtype)

    def emit(self, k, *, axis=1, dft_length=None, inverse=0, onesided=0):
        x = k.ins[0]
        a, n_in, n, n_out = self._geom(x.shape, axis, dft_length, onesided)
        if inverse and onesided:
            return self._emit_irfft(k, a, n_in, dft_length or 2 * (n_in - 1))
        cplx = x.shape[-1] == 2
        outer = prod(x.shape[:a])
        inner = prod(x.shape[a + 1:-1])
        t = k.ctype
        m = min(n, n_in)
        sign = 1.0 if inverse else -1.0
        scale = f" / {n}.0" if inverse else ""
        xin = x.shape[-1]
        im = f"(double)in0[((o * {n_in} + j) * {inner} + s) * 2 + 1]" if cplx else "0.0"
        # Accumulated in double: the outputs near 0 are checked against atol 1e-7.
        lines = nest([outer, n_out, inner], [
            "const size_t o = i0, f = i1, s = i2;",
            "double re = 0.0, imag = 0.0;",
            f"for (size_t j = 0; j < {m}; ++j) {{",
            f"    const double ang = {sign * 2 * math.pi / n!r} * (double)((f * j) % {n});",
            "    const double c = cos(ang), sn = sin(ang);",
            f"    const double xr = (double)in0[((o * {n_in} + j) * {inner} + s) * {xin}];",
            f"    const double xi = {im};",
            "    re += xr * c - xi * sn;",
            "    imag += xr * sn + xi * c;",
            "}",
            f"out0[((o * {n_out} + f) * {inner} + s) * 2] = ({t})(re{scale});",
            f"out0[((o * {n_out} + f) * {inner} + s) * 2 + 1] = ({t})(imag{scale});"])
        return body(lines)

    def _emit_irfft(self, k, a, n_in, n):
        """Real output of length n from n_in Hermitian bins (the rest conjugate)."""
        x = k.ins[0]
        outer = prod(x.shape[:a])
        inner = prod(x.shape[a + 1:-1])
        cplx = x.shape[-1] == 2
        at = f"((o * {n_in} + kk) * {inner} + s) * {x.shape[-1]}"
        im = f"(conj ? -1.0 : 1.0) * (double)in0[{at} + 1]" if cplx else "0.0"
        lines = nest([outer, n, inner], [
            "const size_t o = i0, tt = i1, s = i2;",
            "double acc = 0.0;",
            f"for (size_t q = 0; q < {n}; ++q) {{",
            f"    const int conj = q >= {n_in};",
            f"    const size_t kk = conj ? {n} - q : q;",
            f"    const double re = (double)in0[{at}];",
            f"    const double im = {im};",
            f"    const double ang = {2 * math.pi / n!r} * (double)((q * tt) % {n});",
            "    acc += re * cos(ang) - im * sin(ang);",
            "}",
            f"out0[(o * {n} + tt) * {inner} + s] = ({k.ctype})(acc / {n}.0);"])
        return body(lines)



@register("Col2Im")
class Col2Im(Op):
    """Sums the columns of an im2col matrix back into an image (N-D)."""

    def canonicalize(self, node, graph, opset):
        move_input_to_attr(graph, node, 2, "block_shape")
        move_input_to_attr(graph, node, 1, "image_shape")

    def _geom(self, image_shape, block_shape, dilations, pads, strides):
        D = len(image_shape)
        dil = dilations or [1] * D
        st = strides or [1] * D
        pd = pads or [0] * (2 * D)
        nb = [(image_shape[i] + pd[i] + pd[i + D] - dil[i] * (block_shape[i] - 1) - 1) // st[i]
              + 1 for i in range(D)]
        return D, dil, st, pd, nb

    def reference(self, x, *, image_shape, block_shape, dilations=None, pads=None,
                  strides=None):
        D, dil, st, pd, nb = self._geom(image_shape, block_shape, dilations, pads, strides)
        N, CK, L = x.shape
        K = prod(block_shape)
        C = CK // K
        out = np.zeros((N, C) + tuple(image_shape), x.dtype)
        for kidx in np.ndindex(*block_shape):
            kf = int(np.ravel_multi_index(kidx, block_shape))
            for lidx in np.ndindex(*nb):
                lf = int(np.ravel_multi_index(lidx, nb))
                pos = [lidx[i] * st[i] - pd[i] + kidx[i] * dil[i] for i in range(D)]
                if all(0 <= p < s for p, s in zip(pos, image_shape)):
                    out[(slice(None), slice(None)) + tuple(pos)] += x[:, kf::K][:, :C, lf]
        return out

    def emit(self, k, *, image_shape, block_shape, dilations=None, pads=None, strides=None):
        D, dil, st, pd, nb = self._geom(image_shape, block_shape, dilations, pads, strides)
        x = k.ins[0]
        N, CK, L = x.shape
        K = prod(block_shape)
        C = CK // K
        P = prod(image_shape)
        t = k.ctype
        loops = [N, C] + list(block_shape) + nb
        kv = [f"i{2 + i}" for i in range(D)]
        lv = [f"i{2 + D + i}" for i in range(D)]
        kf = " + ".join(f"{v} * {prod(block_shape[i + 1:])}" for i, v in enumerate(kv))
        lf = " + ".join(f"{v} * {prod(nb[i + 1:])}" for i, v in enumerate(lv))
        inner = []
        conds = []
        for i in range(D):
            inner.append(f"const int64_t p{i} = (int64_t)({lv[i]} * {st[i]} + {kv[i]} * {dil[i]})"
                         f" - {pd[i]};")
            conds.append(f"p{i} >= 0 && p{i} < {image_shape[i]}")
        pf = " + ".join(f"(size_t)p{i} * {prod(image_shape[i + 1:])}" for i in range(D))
        inner += [f"if ({' && '.join(conds)}) {{",
                  f"    out0[(i0 * {C} + i1) * {P} + {pf}] += "
                  f"in0[(i0 * {CK} + i1 * {K} + {kf}) * {L} + {lf}];", "}"]
        lines = [f"memset(out0, 0, {k.out.size} * sizeof out0[0]);"] + nest(loops, inner)
        del t
        return body(lines)


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
        lines = [f"memset(out0, 0, {k.out.size} * sizeof out0[0]);",
                 f"for (size_t i = 0; i < {x.size}; ++i) {{",
                 "    size_t r = (size_t)in1[i], o = 0;"]
        if shape == default:
            lines.append("    o = r;")
        else:
            for d in range(len(shape)):
                lines.append(f"    o += (r / {prod(default[d + 1:])}) % {default[d]} * "
                             f"{prod(shape[d + 1:])};")
        lines += ["    out0[o] = in0[i];", "}"]
        return body(lines)


@register("Det")
class Det(Op):
    """Determinant by Gaussian elimination with partial pivoting (double)."""

    def reference(self, x):
        return np.linalg.det(x.astype(np.float64)).astype(x.dtype)

    def emit(self, k):
        x = k.ins[0]
        n = x.shape[-1]
        batch = prod(x.shape[:-2])
        k.scratch_bytes = n * n * 8
        lines = ["double* a = (double*)scratch;"]
        lines += nest([batch], [
            f"for (size_t j = 0; j < {n * n}; ++j) a[j] = (double)in0[i0 * {n * n} + j];",
            "double det = 1.0;",
            f"for (size_t c = 0; c < {n}; ++c) {{",
            "    size_t p = c;",
            f"    for (size_t r = c + 1; r < {n}; ++r) "
            f"if (fabs(a[r * {n} + c]) > fabs(a[p * {n} + c])) p = r;",
            f"    if (a[p * {n} + c] == 0.0) {{ det = 0.0; break; }}",
            "    if (p != c) {",
            f"        for (size_t j = 0; j < {n}; ++j) {{ const double t = a[c * {n} + j]; "
            f"a[c * {n} + j] = a[p * {n} + j]; a[p * {n} + j] = t; }}",
            "        det = -det;",
            "    }",
            f"    det *= a[c * {n} + c];",
            f"    for (size_t r = c + 1; r < {n}; ++r) {{",
            f"        const double f = a[r * {n} + c] / a[c * {n} + c];",
            f"        for (size_t j = c; j < {n}; ++j) a[r * {n} + j] -= f * a[c * {n} + j];",
            "    }",
            "}",
            f"out0[i0] = ({k.ctype})det;"])
        return body(lines)


@register("MelWeightMatrix")
class MelWeightMatrix(Op):
    """All inputs are compile-time values: the matrix folds to a constant."""

    def canonicalize(self, node, graph, opset):
        names = ["num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
                 "upper_edge_hertz"]
        for i in reversed(range(len(names))):
            move_input_to_attr(graph, node, i, "_" + names[i], lambda v: v)

    def reference(self, **attrs):
        from .recurrent import reference_via_onnx
        vals = [attrs[f"_{n}"] for n in ("num_mel_bins", "dft_length", "sample_rate",
                                          "lower_edge_hertz", "upper_edge_hertz")]
        rest = {k: v for k, v in attrs.items() if not k.startswith("_")}
        return reference_via_onnx("MelWeightMatrix", vals, rest, 1)[0]


@register("TfIdfVectorizer")
class TfIdfVectorizer(Op):
    """n-gram counts over integer tokens (pool_int64s); TF, IDF or TFIDF."""

    def check(self, node, inputs):
        if node.attrs.get("pool_strings"):
            raise UnsupportedError("TfIdfVectorizer on strings is not supported")

    def reference(self, x, **attrs):
        from .recurrent import reference_via_onnx
        return reference_via_onnx("TfIdfVectorizer", [x], attrs, 1)[0]

    def _grams(self, attrs):
        """[(size, tokens, output index, weight)] of the pool grams in [min, max]."""
        pool = list(attrs.get("pool_int64s") or [])
        counts = list(attrs["ngram_counts"]) + [len(pool)]
        idx = list(attrs["ngram_indexes"])
        w = list(attrs.get("weights") or [1.0] * len(idx))
        lo, hi = attrs["min_gram_length"], attrs["max_gram_length"]
        out, gid = [], 0
        for n in range(1, len(counts)):
            seg = pool[counts[n - 1]:counts[n]]
            for j in range(0, len(seg), n):
                if lo <= n <= hi:
                    out.append((n, seg[j:j + n], idx[gid], w[gid]))
                gid += 1
        return out

    def emit(self, k, **attrs):
        x = k.ins[0]
        rows, L = (1, x.size) if len(x.shape) <= 1 else (x.shape[0], x.shape[1])
        O = k.out.shape[-1]
        grams = self._grams(attrs)
        maxskip = attrs["max_skip_count"]
        mode = attrs["mode"]
        lines = [f"memset(out0, 0, {k.out.size} * sizeof out0[0]);"]
        for n, toks, oi, w in grams:
            ds = [1] if n == 1 else list(range(1, maxskip + 2))
            match = " && ".join(f"in0[r * {L} + s + {j} * d] == {t}" for j, t in enumerate(toks))
            lines += nest([rows], [
                "const size_t r = i0;",
                f"for (size_t d = {ds[0]}; d <= {ds[-1]}; ++d) {{",
                f"    for (size_t s = 0; s + {n - 1} * d < {L}; ++s) {{",
                f"        if ({match}) out0[r * {O} + {oi}] += {k.lit(1)};",
                "    }", "}"])
        if mode != "TF":
            wt = [1.0] * O
            for n, toks, oi, w in grams:
                wt[oi] = w
            lines.append(f"static const {k.ctype} wt[{O}] = {{ "
                         f"{', '.join(k.lit(v) for v in wt)} }};")
            op = "out0[i] > 0 ? wt[i % {O}] : {z}" if mode == "IDF" else "out0[i] * wt[i % {O}]"
            lines.append(f"for (size_t i = 0; i < {k.out.size}; ++i) out0[i] = "
                         + op.format(O=O, z=k.lit(0)) + ";")
        return body(lines)


@register("STFT")
class STFT(Op):
    """Short-time Fourier transform: a direct DFT of each (windowed) frame."""

    def canonicalize(self, node, graph, opset):
        for i, name in ((3, "frame_length"), (1, "frame_step")):
            v = need_const(graph, node, i, name)
            if v is not None:
                node.attrs[name] = int(np.asarray(v).ravel()[0])
            if i < len(node.inputs):
                node.inputs[i] = ""
        while node.inputs and not node.inputs[-1]:
            node.inputs.pop()

    def _geom(self, x_shape, window_shape, frame_step, frame_length, onesided):
        n = frame_length if frame_length is not None else window_shape[0]
        frames = (x_shape[1] - n) // frame_step + 1
        bins = n // 2 + 1 if onesided else n
        return n, frames, bins

    def reference(self, x, _unused=None, window=None, *, frame_step, frame_length=None,
                  onesided=1):
        n, frames, bins = self._geom(x.shape, None if window is None else window.shape,
                                     frame_step, frame_length, onesided)
        c = x[..., 0] + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
        w = np.ones(n) if window is None else window.astype(np.float64)
        out = np.empty((x.shape[0], frames, bins), np.complex128)
        for f in range(frames):
            out[:, f] = np.fft.fft(c[:, f * frame_step:f * frame_step + n] * w, axis=1)[:, :bins]
        return np.stack([out.real, out.imag], axis=-1).astype(x.dtype)

    def emit(self, k, *, frame_step, frame_length=None, onesided=1):
        x = k.ins[0]
        win = k.ins[2] if len(k.ins) > 2 else None
        n, frames, bins = self._geom(x.shape, None if win is None else win.shape, frame_step,
                                     frame_length, onesided)
        B, L, xin = x.shape
        t = k.ctype
        w = "(double)in2[j]" if win is not None else "1.0"
        im = f"(double)in0[(b * {L} + p) * 2 + 1]" if xin == 2 else "0.0"
        lines = nest([B, frames, bins], [
            "const size_t b = i0, f = i1, q = i2;",
            "double re = 0.0, imag = 0.0;",
            f"for (size_t j = 0; j < {n}; ++j) {{",
            f"    const size_t p = f * {frame_step} + j;",
            f"    const double ang = {-2 * math.pi / n!r} * (double)((q * j) % {n});",
            f"    const double xr = (double)in0[(b * {L} + p) * {xin}] * {w};",
            f"    const double xi = {im} * {w};",
            "    re += xr * cos(ang) - xi * sin(ang);",
            "    imag += xr * sin(ang) + xi * cos(ang);",
            "}",
            f"out0[((b * {frames} + f) * {bins} + q) * 2] = ({t})re;",
            f"out0[((b * {frames} + f) * {bins} + q) * 2 + 1] = ({t})imag;"])
        return body(lines)
