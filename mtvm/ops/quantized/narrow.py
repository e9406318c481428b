"""32-bit forms of the 8-bit elementwise ops' 64-bit requantization: constants that give
every pair of input values the reference's output, checked over all of them (at most
256 x 256). Shared by the Arm DSP schedules (mtvm/schedules/arm_dsp/elementwise_s8.py)
and the generic QAdd schedule (mtvm/schedules/generic/qadd_s8.py)."""
from __future__ import annotations

import functools

import numpy as np


def value_range(buf) -> np.ndarray:
    """Every value buf can hold: its constant's values, or its dtype's range."""
    if buf.const is not None:
        return np.unique(np.asarray(buf.const, np.int64))
    info = np.iinfo(np.dtype(buf.dtype))
    return np.arange(info.min, info.max + 1, dtype=np.int64)


def fit_c(t: np.ndarray, out: np.ndarray, low: np.ndarray, high: np.ndarray, n: int,
          rest: int) -> int | None:
    """A c with clamp((c + t) >> n) == out for every element and |c| + rest < 2^31, or None.
    Each element bounds c: unclamped, out 2^n <= c + t < (out + 1) 2^n; clamped low (the
    reference's value at or below the clamp) only from above, c + t < (out + 1) 2^n;
    clamped high only from below, c + t >= out 2^n. The middle of the interval is taken
    (half a step inside a bound that is alone)."""
    one = 1 << n
    lower = out[~low] * one - t[~low]
    upper = (out[~high] + 1) * one - t[~high] - 1
    c_lo = int(lower.max()) if lower.size else None
    c_hi = int(upper.min()) if upper.size else None
    if c_lo is None and c_hi is None:
        return None
    if c_lo is None or c_hi is None:
        c = c_hi - one // 2 if c_lo is None else c_lo + one // 2
    elif c_lo > c_hi:
        return None
    else:
        c = (c_lo + c_hi) // 2
    return c if abs(c) + rest < 1 << 31 else None


def fit_channels(values: np.ndarray, out: np.ndarray, low: np.ndarray, high: np.ndarray,
                 slope: np.ndarray, unit: float) -> tuple[np.ndarray, int] | None:
    """([C][2] int64 of (c, ia), n): per channel ch, clamp((c + v ia) >> n) == out[ch] for
    every v of `values` (low/high: where the reference is clamped, as fit_c), with one n
    for all channels -- the largest that keeps `unit` per step of 2^n within int32, or up
    to two below -- and ia the channel's real slope scaled to 2^n, nudged by one; None when
    no such constants exist."""
    vmax = int(np.abs(values).max())
    n0 = top_n(unit, 30)
    for n in range(n0, max(n0 - 3, 0), -1):
        table = np.zeros((out.shape[0], 2), np.int64)
        for ch in range(out.shape[0]):
            for d in (0, -1, 1):
                ia = int(round(float(slope[ch]) * 2.0 ** n)) + d
                c = fit_c(values * ia, out[ch], low[ch], high[ch], n, vmax * abs(ia))
                if c is not None:
                    table[ch] = c, ia
                    break
            else:
                break
        else:
            return table, n
    return None


def top_n(unit: float, cap: int) -> int:
    """The largest n <= cap with unit 2^n < 2^31: sums of at most `unit` per step of 2^n
    stay within int32."""
    return min(cap, int(np.floor(np.log2(((1 << 31) - 1) / max(unit, 1e-9)))))


def narrow_qadd(k, a_zp, b_zp, y_zp, a_mult, b_mult, shift, act_min, act_max
                ) -> tuple[int, int, int, int] | None:
    """(c, ia, ib, n) with y = clamp((c + a ia + b ib) >> n) equal to the op's reference
    for every pair of values the operands can hold, and no partial sum beyond int32; None
    when none is found. The op's 31-bit multipliers need a 64-bit accumulator, but 8-bit
    inputs rarely need that precision: scaled down by 2^(shift - n) and nudged by one,
    the constants usually give the same 65,536 outputs, checked here pair by pair (fit_c).
    Exact halves (ratios of 1/2: the reference's ties to even) have no such form.
    Memoized on the operands' values and the attributes: a schedule's applies() and its
    emit() both ask, and the search tries up to 27 constant sets on 65,536 pairs."""
    va, vb = value_range(k.ins[0]), value_range(k.ins[1])
    return _narrow_qadd(va.tobytes(), vb.tobytes(), int(a_zp), int(b_zp), int(y_zp),
                        int(a_mult), int(b_mult), int(shift), int(act_min), int(act_max))


@functools.lru_cache(maxsize=256)
def _narrow_qadd(va_bytes: bytes, vb_bytes: bytes, a_zp: int, b_zp: int, y_zp: int,
                 a_mult: int, b_mult: int, shift: int, act_min: int, act_max: int
                 ) -> tuple[int, int, int, int] | None:
    from .common import round_shift
    va, vb = np.frombuffer(va_bytes, np.int64), np.frombuffer(vb_bytes, np.int64)
    t_ref = ((va[:, None] - int(a_zp)) * int(a_mult) + (vb[None, :] - int(b_zp)) * int(b_mult))
    pre = round_shift(t_ref, int(shift)) + int(y_zp)
    out = np.clip(pre, act_min, act_max).ravel()
    low, high = (pre <= act_min).ravel(), (pre >= act_max).ravel()
    amax, bmax = int(np.abs(va).max()), int(np.abs(vb).max())
    ra, rb = abs(int(a_mult)) / 2.0 ** int(shift), abs(int(b_mult)) / 2.0 ** int(shift)
    # per step of 2^n: the products, the zero points' terms in c, the output's zero point
    n0 = top_n(ra * (amax + abs(int(a_zp))) + rb * (bmax + abs(int(b_zp))) + abs(int(y_zp))
               + 2, int(shift))
    for n in range(n0, max(n0 - 3, 0), -1):
        scale = 2.0 ** (n - int(shift))
        for dia in (0, -1, 1):
            for dib in (0, -1, 1):
                ia, ib = round(int(a_mult) * scale) + dia, round(int(b_mult) * scale) + dib
                t = (va[:, None] * ia + vb[None, :] * ib).ravel()
                c = fit_c(t, out, low, high, n, amax * abs(ia) + bmax * abs(ib))
                if c is not None:
                    return c, ia, ib, n
    return None
