"""Weights as `const` data (they stay in flash).

Each constant is a union of its typed array and a byte view. Large ones are
initialized from a string literal of octal escapes: gcc reads 10 MB of that in
about a second, where a numeric initializer list of the same data takes ten
or more. Small ones are written as readable numbers.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..ops.base import c_literal, ctype
from .names import c_comment

READABLE_MAX = 64          # elements; above this the byte-string form is used
_OCTAL = ["\\%03o" % i for i in range(256)]


def union_type(sym: str, arr: np.ndarray) -> str:
    n = max(arr.size, 1)
    # A string literal's terminating NUL needs one more byte (gcc 15's -Wextra
    # warns when it does not fit); the other initializers fill the array exactly,
    # and a 64-element int32 array then takes 256 bytes of flash, not 260.
    extra = 1 if _written_as_string(arr) else 0
    return (f"union {sym}_u {{ unsigned char bytes[{n * arr.dtype.itemsize + extra}]; "
            f"{ctype(arr.dtype)} data[{n}]; }}")


def content_key(arr: np.ndarray) -> tuple:
    """Two constants with the same key are the same bytes of flash: a module
    stores one of them (e.g. the zero biases of several convolutions). A digest
    of the bytes, not a copy of them (a model's weights can be 100 MB)."""
    arr = np.ascontiguousarray(arr)
    return (arr.dtype.str, arr.size, hashlib.sha256(arr.view(np.uint8)).digest())


ZERO_MIN = 1 << 16         # bytes; an all-zero constant this large is not spelled out


def _all_zero(arr: np.ndarray) -> bool:
    """Large all-zero constants (synthetic models, e.g. ConstantOfShape weights)
    are written `= { { 0 } }`: still const data in flash (.rodata), but no text
    for the C compiler to read."""
    return arr.nbytes >= ZERO_MIN and not np.any(arr.view(np.uint8))


def _written_as_string(arr: np.ndarray) -> bool:
    """As definition() writes it: the octal byte string (not all zeros, not short
    and finite)."""
    arr = _stored(arr)
    if _all_zero(arr):
        return False
    return not (arr.size <= READABLE_MAX and
                (arr.dtype.kind != "f" or bool(np.isfinite(arr).all())))


def _stored(arr: np.ndarray) -> np.ndarray:
    """The array as its bytes are written: bool as uint8, the narrow floats and
    integers as their bits."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8)
    if arr.dtype.name in ("float16", "bfloat16") or arr.dtype.name.startswith("float8") \
            or arr.dtype.name in ("float4_e2m1fn", "int4", "uint4", "int2", "uint2"):
        arr = arr.view(np.uint16 if arr.dtype.itemsize == 2 else np.uint8)  # stored as bits
    return arr


def declaration(sym: str, arr: np.ndarray) -> str:
    return f"{union_type(sym, arr)};\nextern const union {sym}_u {sym};"


_OCTAL_S4 = np.array([e.encode() for e in _OCTAL], dtype="S4")
_ROW = 64                  # bytes per line of the literal


def _byte_string(raw: bytes) -> str:
    """Lines of "\\ooo..." literals, _ROW bytes each, indented by four spaces.
    Built in NumPy (a table lookup per byte): 20 MB in 0.7 s, where a Python
    loop over the bytes took 1.9 s."""
    esc = _OCTAL_S4[np.frombuffer(raw, np.uint8)].view(np.uint8).reshape(-1, 4)
    full = len(raw) // _ROW
    sep = b'"\n    "'
    rows = np.empty((full, _ROW * 4 + len(sep)), np.uint8)
    rows[:, :_ROW * 4] = esc[:full * _ROW].reshape(full, _ROW * 4)
    rows[:, _ROW * 4:] = np.frombuffer(sep, np.uint8)
    body = rows.tobytes() + esc[full * _ROW:].tobytes()
    if len(raw) % _ROW == 0:
        body = body[:-len(sep)]             # no empty last line
    return ('"' + body.decode("ascii") + '"') if raw else ""


def definition(sym: str, arr: np.ndarray, origin: str) -> str:
    arr = _stored(arr)
    head = f"/* {c_comment(origin)}: {arr.dtype.name}{list(arr.shape)} */\nconst union {sym}_u {sym} = "
    if _all_zero(arr):
        return head + "{ { 0 } };  /* all zeros */\n"
    if not _written_as_string(arr):   # inf/nan literals would need math.h
        vals = ", ".join(c_literal(v, arr.dtype) for v in arr.ravel().tolist()) or "0"
        return head + f"{{ .data = {{ {vals} }} }};\n"
    return head + "{\n    " + _byte_string(arr.astype(arr.dtype.newbyteorder("<")).tobytes()) \
        + "\n};\n"


ENDIAN_CHECK = """#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "mtvm constants are stored little-endian"
#endif
"""
