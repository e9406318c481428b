"""Signal processing: the window functions (Hann, Hamming, Blackman: their size is
a compile-time value, so they fold to constants), DFT and STFT (direct O(n^2)
transforms, accumulated in double) and MelWeightMatrix (folded to a constant)."""
from __future__ import annotations

import math

import numpy as np

from .base import Op, move_input_to_attr, need_const, register
from .indexing import body, nest, prod


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
