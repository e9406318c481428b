"""Signal processing: the window functions (Hann, Hamming, Blackman: their size is
a compile-time value, so they fold to constants), DFT and STFT (direct O(n^2)
transforms, accumulated in double) and MelWeightMatrix (folded to a constant)."""
from __future__ import annotations

import math

import numpy as np

from ..codegen.cwriter import (Assign, Cast, Const, Decl, For, Type, Var, call, ge, index_type,
                               param, render_c, select)
from .base import Op, move_input_to_attr, need_const, register
from .indexing import prod

D64, CD64 = Type("float64"), Type("float64", const=True)


def _d(value) -> Const:
    """A double constant."""
    return Const(float(value), "float64")


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
        T = Type(k.outs[0].dtype)
        m = min(n, n_in)
        sign = 1.0 if inverse else -1.0
        xin = x.shape[-1]
        X, out = param(x), param(k.outs[0], output=True)
        o, f, s_, j = Var("o"), Var("f"), Var("s"), Var("j")
        re, imag = Var("re", D64), Var("imag", D64)
        ang, c, sn, xr, xi = (Var(v, CD64) for v in ("ang", "c", "sn", "xr", "xi"))
        x_at = (o * n_in + j) * inner + s_
        im = Cast(D64, X[x_at * 2 + 1]) if cplx else _d(0)

        def scaled(v):
            return Cast(T, v / _d(n) if inverse else v)
        # Accumulated in double: the outputs near 0 are checked against atol 1e-7.
        cell = [Decl(re, _d(0)), Decl(imag, _d(0)),
                For(j, m, [Decl(ang, _d(sign * 2 * math.pi / n) * Cast(D64, (f * j) % n)),
                           Decl(c, call("cos", ang)), Decl(sn, call("sin", ang)),
                           Decl(xr, Cast(D64, X[x_at * xin])), Decl(xi, im),
                           Assign(re, xr * c - xi * sn, "+="),
                           Assign(imag, xr * sn + xi * c, "+=")]),
                Assign(out[((o * n_out + f) * inner + s_) * 2], scaled(re)),
                Assign(out[((o * n_out + f) * inner + s_) * 2 + 1], scaled(imag))]
        return render_c(For(o, outer, [For(f, n_out, [For(s_, inner, cell)])]))

    def _emit_irfft(self, k, a, n_in, n):
        """Real output of length n from n_in Hermitian bins (the rest conjugate)."""
        x = k.ins[0]
        outer = prod(x.shape[:a])
        inner = prod(x.shape[a + 1:-1])
        cplx = x.shape[-1] == 2
        X = param(x)
        o, tt, s_, q = Var("o"), Var("tt"), Var("s"), Var("q")
        kk, conj = Var("kk", index_type(const=True)), Var("conj", Type("int32", const=True))
        acc = Var("acc", D64)
        re, im, ang = (Var(v, CD64) for v in ("re", "im", "ang"))
        at = ((o * n_in + kk) * inner + s_) * x.shape[-1]
        im_value = select(conj, _d(-1), _d(1)) * Cast(D64, X[at + 1]) if cplx else _d(0)
        cell = [Decl(acc, _d(0)),
                For(q, n, [Decl(conj, ge(q, n_in)), Decl(kk, select(conj, n - q, q)),
                           Decl(re, Cast(D64, X[at])), Decl(im, im_value),
                           Decl(ang, _d(2 * math.pi / n) * Cast(D64, (q * tt) % n)),
                           Assign(acc, re * call("cos", ang) - im * call("sin", ang), "+=")]),
                Assign(param(k.outs[0], output=True)[(o * n + tt) * inner + s_],
                       Cast(Type(k.outs[0].dtype), acc / _d(n)))]
        return render_c(For(o, outer, [For(tt, n, [For(s_, inner, cell)])]))


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
        T = Type(k.outs[0].dtype)
        X, out = param(x), param(k.outs[0], output=True)
        b, f, q, j = Var("b"), Var("f"), Var("q"), Var("j")
        p = Var("p", index_type(const=True))
        re, imag = Var("re", D64), Var("imag", D64)
        ang, xr, xi = (Var(v, CD64) for v in ("ang", "xr", "xi"))
        w = Cast(D64, param(win)[j]) if win is not None else _d(1)
        im = Cast(D64, X[(b * L + p) * 2 + 1]) if xin == 2 else _d(0)
        cell = [Decl(re, _d(0)), Decl(imag, _d(0)),
                For(j, n, [Decl(p, f * frame_step + j),
                           Decl(ang, _d(-2 * math.pi / n) * Cast(D64, (q * j) % n)),
                           Decl(xr, Cast(D64, X[(b * L + p) * xin]) * w),
                           Decl(xi, im * w),
                           Assign(re, xr * call("cos", ang) - xi * call("sin", ang), "+="),
                           Assign(imag, xr * call("sin", ang) + xi * call("cos", ang), "+=")]),
                Assign(out[((b * frames + f) * bins + q) * 2], Cast(T, re)),
                Assign(out[((b * frames + f) * bins + q) * 2 + 1], Cast(T, imag))]
        return render_c(For(b, B, [For(f, frames, [For(q, bins, cell)])]))
