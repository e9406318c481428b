"""Resize (opset 11+) and Upsample: nearest, linear and cubic, every
coordinate transformation mode, antialias, exclude_outside, keep_aspect_ratio
and tf_crop_and_resize extrapolation.

Resize is separable: along each resized axis every output position is a
weighted sum of a few input positions. Those taps and weights are computed
at compile time (from onnx.reference's 1-D interpolation, applied to the
identity, so the coefficient rules are the spec's own) and emitted as small
constant tables; the kernel loops over the output and sums the taps of each
resized axis. Nearest mode has one tap of weight 1: a plain gather, exact for
every dtype. roi, scales and sizes must be known at compile time.
"""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .base import Op, ctype, need_const, register
from .indexing import body, nest, strides_of


def _coeff_fn(mode, nearest_mode, cubic_coeff_a, antialias):
    from onnx.reference.ops import op_resize as R
    if mode == "nearest":
        return lambda x, s: R._nearest_coeffs(x, mode=nearest_mode)
    if mode == "cubic":
        f = R._cubic_coeffs_antialias if antialias else R._cubic_coeffs
        return lambda x, s: f(x, s, A=cubic_coeff_a)
    if mode == "linear":
        return R._linear_coeffs_antialias if antialias else R._linear_coeffs
    raise UnsupportedError(f"Resize mode {mode!r} is not supported")


def plan(shape, roi, scales, sizes, axes, keep_aspect_ratio_policy):
    """Per axis of the input: (scale, output size, roi pair or None, resized?)."""
    r = len(shape)
    axes = list(range(r)) if axes is None else [a + r if a < 0 else a for a in axes]
    n = len(axes)
    scale = {a: 1.0 for a in range(r)}
    out = {a: shape[a] for a in range(r)}
    if sizes is not None and len(sizes):
        sz = [int(s) for s in sizes][-n:]
        if keep_aspect_ratio_policy in ("not_larger", "not_smaller"):
            ratios = [sz[i] / shape[a] for i, a in enumerate(axes)]
            s = min(ratios) if keep_aspect_ratio_policy == "not_larger" else max(ratios)
            for a in axes:
                scale[a] = s
                out[a] = int(s * shape[a] + 0.5)
        else:
            for i, a in enumerate(axes):
                scale[a] = sz[i] / shape[a]
                out[a] = sz[i]
    elif scales is not None and len(scales):
        sc = [float(s) for s in scales][-n:]
        for i, a in enumerate(axes):
            scale[a] = sc[i]
            out[a] = int(sc[i] * shape[a])
    else:
        raise UnsupportedError("Resize needs scales or sizes")
    res = []
    for a in range(r):
        pair = None
        if roi is not None and len(roi):
            rr = [float(v) for v in roi]
            i = axes.index(a) if a in axes else None
            if i is not None:
                pair = (rr[i], rr[i + n]) if len(rr) == 2 * n else (rr[a], rr[a + r])
        identity = abs(scale[a] - 1.0) < 1e-12 and out[a] == shape[a] and \
            (pair is None or (abs(pair[0]) < 1e-12 and abs(pair[1] - 1) < 1e-12))
        res.append((scale[a], out[a], pair, a in axes and not identity))
    return res


def _nearest_index(x: np.ndarray, nearest_mode: str) -> np.ndarray:
    """The input index a source coordinate picks (onnx.reference's nearest modes)."""
    frac = x - np.floor(x)
    if nearest_mode == "floor":
        return np.floor(x)
    if nearest_mode == "ceil":
        return np.ceil(x)
    up = nearest_mode == "round_prefer_ceil"
    return np.where(frac == 0.5, np.ceil(x) if up else np.floor(x), np.round(x))


def tf_half_pixel_nn_matrix(n_in, scale, n_out, nearest_mode) -> np.ndarray:
    """Resize-11's tf_half_pixel_for_nn (what tf2onnx writes for a nearest upsampling;
    onnx.reference lacks it): source (x + 0.5) / scale in float32 as onnxruntime computes
    it, the nearest input by nearest_mode, clamped to the input."""
    x = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) / np.float32(scale)
    idx = np.clip(_nearest_index(x.astype(np.float64), nearest_mode), 0, n_in - 1)
    m = np.zeros((n_out, n_in))
    m[np.arange(n_out), idx.astype(np.int64)] = 1.0
    return m


def axis_matrix(n_in, scale, n_out, pair, coeffs, ctm, exclude_outside):
    """[n_out, n_in] interpolation weights of one axis; NaN rows are extrapolated."""
    from onnx.reference.ops.op_resize import _interpolate_1d_along_axis
    return _interpolate_1d_along_axis(np.eye(n_in), 0, scale, n_out, coeffs,
                                      roi=list(pair) if pair else None,
                                      extrapolation_value=np.nan,
                                      coordinate_transformation_mode=ctm,
                                      exclude_outside=bool(exclude_outside))


class _ResizeBase(Op):
    def _plan_and_mats(self, shape, roi, scales, sizes, attrs):
        p = plan(shape, roi, scales, sizes, attrs.get("axes"),
                 attrs.get("keep_aspect_ratio_policy", "stretch"))
        coeffs = _coeff_fn(attrs.get("mode", "nearest"),
                           attrs.get("nearest_mode", "round_prefer_floor"),
                           attrs.get("cubic_coeff_a", -0.75), attrs.get("antialias", 0))
        ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
        # align_corners and tf_crop_and_resize map through the output's integer length
        # ((in - 1) / (out - 1), as the spec and onnxruntime do), where onnx.reference
        # takes scale * in: with scales whose product is not whole (9 x 1.7 -> 15) the
        # scale given to it is out / in
        by_length = ctm in ("align_corners", "tf_crop_and_resize")
        if ctm == "tf_half_pixel_for_nn":
            if attrs.get("mode", "nearest") != "nearest":
                raise UnsupportedError("Resize: coordinate_transformation_mode "
                                       "tf_half_pixel_for_nn is for mode nearest only")
            mats = [tf_half_pixel_nn_matrix(shape[a], s, o,
                                            attrs.get("nearest_mode", "round_prefer_floor"))
                    if resized else None for a, (s, o, pair, resized) in enumerate(p)]
            return p, mats
        mats = [axis_matrix(shape[a], o / shape[a] if by_length else s, o, pair, coeffs, ctm,
                            attrs.get("exclude_outside", 0))
                if resized else None for a, (s, o, pair, resized) in enumerate(p)]
        return p, mats

    def _run(self, x, roi, scales, sizes, attrs):
        p, mats = self._plan_and_mats(x.shape, roi, scales, sizes, attrs)
        y = x.astype(np.float64)
        outside = np.zeros([o for _, o, _, _ in p], bool)
        for a, m in enumerate(mats):
            if m is None:
                continue
            bad = np.isnan(m).any(axis=1)
            y = np.moveaxis(np.tensordot(np.nan_to_num(m), y, axes=([1], [a])), 0, a)
            sh = [1] * x.ndim
            sh[a] = len(bad)
            outside = outside | bad.reshape(sh)
        y = np.where(outside, attrs.get("extrapolation_value", 0.0), y)
        if x.dtype.kind in "iu":   # truncated toward zero (the emitted C's cast)
            info = np.iinfo(x.dtype)
            return np.clip(np.trunc(y), info.min, info.max).astype(x.dtype)
        return y.astype(x.dtype)

    def _emit(self, k, roi, scales, sizes, attrs):
        x = k.ins[0]
        if np.dtype(x.dtype) == np.float32 and attrs.get("mode", "nearest") != "nearest":
            # QResize's loop nest on floats: its last axis as loops over periods with
            # constant taps where the taps repeat (integer upsampling), which vectorize;
            # the taps, weights and summation order are this kernel's (and onnxruntime's)
            from ..codegen.cwriter import render_c
            from .quantized.resize import qresize_nest
            return render_c(qresize_nest(k, float_io=True, roi=roi, scales=scales,
                                         sizes=sizes, **attrs))
        p, mats = self._plan_and_mats(x.shape, roi, scales, sizes, attrs)
        t = k.ctype
        acc_t = "double" if t == "double" else "float"
        out_shape = [o for _, o, _, _ in p]
        ist = x.strides
        nearest = attrs.get("mode", "nearest") == "nearest"
        lines, taps, any_outside = [], {}, []
        for a, m in enumerate(mats):
            if m is None:
                continue
            T, idx, w, bad = sparse_taps(m)
            taps[a] = T
            lines.append(f"static const uint32_t idx{a}[{idx.size}] = "
                         f"{{ {', '.join(str(v) for v in idx.ravel())} }};")
            if not nearest:
                lines.append(f"static const {acc_t} w{a}[{w.size}] = "
                             f"{{ {', '.join(k.lit(v, np.float64 if acc_t == 'double' else np.float32) for v in w.ravel())} }};")
            if bad.any():
                any_outside.append(a)
                lines.append(f"static const uint8_t ext{a}[{bad.size}] = "
                             f"{{ {', '.join('1' if b else '0' for b in bad)} }};")
        o_idx = " + ".join(f"i{d} * {s}" for d, s in enumerate(strides_of(out_shape))) or "0"
        src_terms, inner_open, weights = [], [], []
        for a in range(len(out_shape)):
            if a in taps:
                src_terms.append(f"(size_t)idx{a}[i{a} * {taps[a]} + t{a}] * {ist[a]}")
                weights.append(f"w{a}[i{a} * {taps[a]} + t{a}]")
            else:
                src_terms.append(f"i{a} * {ist[a]}")
        src = " + ".join(src_terms) or "0"
        if nearest:
            inner = [f"out0[{o_idx}] = in0[{' + '.join(s.replace(f't{a}]', '0]') for a, s in enumerate(src_terms)) or '0'}];"]
        else:
            # the weights' product first, then times the input (onnxruntime's order: float
            # results equal its bit for bit where the weights are exact, so a quantized model
            # rounds its ties the same way)
            core = [f"acc += {' * '.join(weights)} * ({acc_t})in0[{src}];"]
            for a in sorted(taps, reverse=True):
                core = [f"for (size_t t{a} = 0; t{a} < {taps[a]}; ++t{a}) {{"] + \
                    ["    " + s for s in core] + ["}"]
            store = "acc"
            if np.dtype(x.dtype).kind in "iu":
                # an 8-bit (integer) tensor interpolated directly: the sum truncated toward
                # zero, as onnxruntime's cast of its float result (and onnx.reference's)
                info = np.iinfo(x.dtype)
                lo, hi = k.lit(info.min, np.float64), k.lit(info.max, np.float64)
                store = f"({t})(acc < {lo} ? {lo} : (acc > {hi} ? {hi} : acc))"
            inner = [f"{acc_t} acc = 0;"] + core + [f"out0[{o_idx}] = ({t}){store};"]
        if any_outside:
            cond = " || ".join(f"ext{a}[i{a}]" for a in any_outside)
            ev = attrs.get("extrapolation_value", 0.0)
            inner = [f"if ({cond}) {{", f"    out0[{o_idx}] = {k.lit(ev)};", "    continue;",
                     "}"] + inner
        lines += nest(out_shape, inner)
        return body(lines)


def sparse_taps(m: np.ndarray):
    """An axis' interpolation matrix [out, in] (NaN rows: outside, extrapolated) as
    (taps per output T, input indices [out, T], weights [out, T], outside [out])."""
    bad = np.isnan(m).any(axis=1)
    mm = np.nan_to_num(m)
    T = max(int((mm[o] != 0).sum()) for o in range(mm.shape[0])) or 1
    idx = np.zeros((mm.shape[0], T), np.int64)
    w = np.zeros((mm.shape[0], T))
    for o in range(mm.shape[0]):
        nz = np.nonzero(mm[o])[0]
        idx[o, :len(nz)] = nz
        w[o, :len(nz)] = mm[o, nz]
    return T, idx, w, bad


@register("Resize")
class Resize(_ResizeBase):
    def canonicalize(self, node, graph, opset):
        for i, name in ((1, "roi"), (2, "scales"), (3, "sizes")):
            v = need_const(graph, node, i, name)
            node.attrs["_" + name] = None if v is None else np.asarray(v).ravel().tolist()
        node.inputs = node.inputs[:1]

    def check(self, node, inputs):
        ctype(inputs[0].dtype)

    def reference(self, x, **attrs):
        a = {k: v for k, v in attrs.items() if not k.startswith("_")}
        return self._run(x, attrs.get("_roi"), attrs.get("_scales"), attrs.get("_sizes"), a)

    def emit(self, k, **attrs):
        a = {key: v for key, v in attrs.items() if not key.startswith("_")}
        return self._emit(k, attrs.get("_roi"), attrs.get("_scales"), attrs.get("_sizes"), a)


@register("Upsample")
class Upsample(_ResizeBase):
    """Deprecated (opset 7-9): Resize with scales, asymmetric coordinates."""

    def canonicalize(self, node, graph, opset):
        if len(node.inputs) > 1:
            v = need_const(graph, node, 1, "scales")
            node.attrs["scales"] = np.asarray(v).ravel().tolist()
            node.inputs = node.inputs[:1]

    def reference(self, x, *, scales, mode="nearest"):
        attrs = {"mode": "linear" if mode in ("linear", "bilinear") else mode,
                 "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
        return self._run(x, None, scales, None, attrs)

    def emit(self, k, *, scales, mode="nearest"):
        attrs = {"mode": "linear" if mode in ("linear", "bilinear") else mode,
                 "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
        return self._emit(k, None, scales, None, attrs)
