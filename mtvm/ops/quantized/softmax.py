"""QSoftmax: softmax of int8 values through an exp table in fixed point
(SOFTMAX_BITS fractional bits), one integer division per row."""
from __future__ import annotations

import numpy as np

from ..base import register
from .common import DOMAIN, IntOp, plus

SOFTMAX_BITS = 20     # exp table entries are exp(sx * d) in units of 2^-20
SHORT_BITS = 15       # or, for short rows, of 2^-15: uint16 entries, half the table's flash


def softmax_bits(d: int, y_scale: float) -> int:
    """The table's fractional bits B for rows of d values and output scale sy. The
    computed probability e_i / sum e is within (d + 1) 2^-(B + 1) of the exact one (each
    entry rounded by at most half a unit, the largest exactly 2^B); B = 15 where that is
    at most a tenth of an output step -- a classifier's last Softmax over a few classes,
    whose 1 KiB uint32 table was a twentieth of a small model's flash -- else 20."""
    return SHORT_BITS if (d + 1) * 2.0 ** -(SHORT_BITS + 1) <= y_scale / 10 else SOFTMAX_BITS


def softmax_table(x_scale: float, bits: int = SOFTMAX_BITS) -> np.ndarray:
    """exp(sx * d) * 2^bits for d = x - max(x) in [-255, 0] (index d + 255): uint32, or
    uint16 for bits <= 15 (at most 2^15)."""
    d = np.arange(-255, 1, dtype=np.float64)
    return np.rint(np.exp(x_scale * d) * (1 << bits)).astype(
        np.uint16 if bits <= 15 else np.uint32)


def _table_max(table) -> int:
    """The largest exp-table entry (2^32 when the table is not known: no bound)."""
    return int(np.max(table.const)) if table.const is not None else 1 << 32


def _numerator_max(table, d: int, inv: int) -> int:
    """The largest shifted numerator (e inv + sum 2^15) >> 16 over rows of d values."""
    e_max = _table_max(table)
    return (e_max * int(inv) + e_max * d * (1 << 15)) >> 16


def softmax_fits_32(table, d: int, inv: int) -> bool:
    """Whether the shifted numerator provably fits 32 bits (then one 32-bit division a
    value)."""
    return _numerator_max(table, d, inv) < (1 << 32)


def softmax_recip_ok(table, d: int, inv: int) -> bool:
    """Whether mtvm_div_recip_u32 (mtvm_requantize.h) divides exactly here: the shifted
    numerator below 2^31, every quotient below 2^14 (it is at most inv / 2^16 + 1: a
    value's e is at most the row's sum) and the row's sum below 2^35."""
    return table.const is not None and _numerator_max(table, d, inv) < (1 << 31) and \
        int(inv) // (1 << 16) + 1 < (1 << 14) and _table_max(table) * d < (1 << 35)


@register("QSoftmax", domain=DOMAIN)
class QSoftmax(IntOp):
    """Softmax over the last axis of an 8-bit tensor, in integers: e = table[x - max],
    y = zy + round(e * inv / (sum(e) * 2^16)) with inv = round(2^16 / sy).
    inputs: x, table uint32[256] (uint16 for short rows: softmax_bits)."""
    elementwise_inplace = True

    def reference(self, x, table, *, inv, y_zp, act_min=-128, act_max=127):
        d = x.shape[-1]
        xs = x.reshape(-1, d).astype(np.int64)
        e = np.asarray(table, np.int64)[xs - xs.max(axis=1, keepdims=True) + 255]
        den = e.sum(axis=1, keepdims=True) << 16
        q = (e * inv + den // 2) // den
        out_dtype = np.int8 if act_min < 0 else np.uint8
        return np.clip(q + y_zp, act_min, act_max).astype(out_dtype).reshape(x.shape)

    def emit(self, k, *, inv, y_zp, act_min=-128, act_max=127):
        x, table = k.ins[:2]
        d = x.shape[-1]
        rows = x.size // d
        # round(num / den) with den = sum * 2^16 is floor((num + den / 2) / 2^16) / sum
        # (nested floor division): one 32-bit division (UDIV on a Cortex-M3/M4)
        # instead of a 64-bit one (a library call there), where the shifted
        # numerator provably fits 32 bits.
        if softmax_recip_ok(table, d, inv):
            # the same division by the row's sum, through its reciprocal where the host
            # has double vectors (exact under the bounds softmax_recip_ok checks)
            k.library("mtvm_requantize.h")
            den = ("const uint64_t half = (uint64_t)sum << 15;   /* den / 2 */\n"
                   "    const mtvm_recip_t rs = mtvm_recip_u32(sum);")
            q = "mtvm_div_recip_u32((uint32_t)((num + half) >> 16), sum, rs)"
        elif softmax_fits_32(table, d, inv):
            den = "const uint64_t half = (uint64_t)sum << 15;   /* den / 2 */"
            q = "(int32_t)((uint32_t)((num + half) >> 16) / sum)"
        else:
            den = "const uint64_t den = (uint64_t)sum << 16;"
            q = "(int32_t)((num + den / 2) / den)"
        return "\n".join([
            f"for (size_t r = 0; r < {rows}; ++r) {{",
            f"    const {x.ctype}* xr = {x.c} + r * {d};",
            f"    int32_t m = xr[0];",
            f"    for (size_t i = 1; i < {d}; ++i) m = xr[i] > m ? xr[i] : m;",
            "    uint32_t sum = 0;   /* exp(sx * (x - max)) in units of 2^-20 */",
            f"    for (size_t i = 0; i < {d}; ++i) sum += {table.c}[(int32_t)xr[i] - m + 255];",
            f"    {den}",
            f"    for (size_t i = 0; i < {d}; ++i) {{",
            f"        uint64_t num = (uint64_t){table.c}[(int32_t)xr[i] - m + 255] * {inv}u;",
            f"        int32_t v = {q}{plus(y_zp)};",
            f"        v = v < {act_min} ? {act_min} : (v > {act_max} ? {act_max} : v);",
            f"        out0[r * {d} + i] = ({k.out.ctype})v;",
            "    }",
            "}"])
