"""Float at the edges of a quantized model (`--float-io`): the host quantizes
float inputs and dequantizes integer outputs with each tensor's scale and zero
point from metadata.json, exactly as ONNX QuantizeLinear/DequantizeLinear do
(round half to even, saturate), so the device only ever sees integers."""
from __future__ import annotations

import numpy as np

from ..errors import MtvmError


def _params(q: dict, ndim: int):
    scale = np.asarray(q["scale"], np.float32)
    zp = np.asarray(q["zero_point"], np.int64)
    if q.get("axis") is not None and scale.size > 1:
        shape = [1] * ndim
        shape[q["axis"]] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return scale, zp


def quantize(x, q: dict, dtype, name: str) -> np.ndarray:
    """float x -> integer tensor of `dtype` (QuantizeLinear)."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise MtvmError(f"input \"{name}\": --float-io expects float data, got {x.dtype.name}")
    dt = np.dtype(dtype)
    scale, zp = _params(q, x.ndim)
    v = np.rint(x.astype(np.float32) / scale).astype(np.int64) + zp
    return np.clip(v, np.iinfo(dt).min, np.iinfo(dt).max).astype(dt)


def dequantize(y, q: dict) -> np.ndarray:
    """integer tensor -> float32 (DequantizeLinear)."""
    y = np.asarray(y)
    scale, zp = _params(q, y.ndim)
    return ((y.astype(np.int64) - zp).astype(np.float32) * scale).astype(np.float32)


def is_quantized(t) -> bool:
    return t.quantization is not None and np.dtype(t.dtype).kind in "iu"
