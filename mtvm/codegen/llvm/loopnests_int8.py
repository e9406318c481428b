"""Integer convolutions and matrix products for the LLVM backend in pairs of
16-bit products, as the C backend's SIMD kernels compute them.

A folded QConv is bias[o] + the sum over every tap of xpad * (w - w_zp[o]),
where padding reads as the input zero point (QConv.reference, expanded); a
depthwise one the same minus x_zp * sum(w - w_zp[o]). Each weight minus its
zero point fits in 16 bits, and so does each input value, so two taps at once
are one 16-bit pair product:

  * x86: `pmaddwd` multiplies 16, 8 or 4 output channels' weight pairs by one
    input pair broadcast to every lane and adds each lane's two products (with
    AVX-512 VNNI LLVM fuses it with the accumulation: `vpdpwssd`); the input is
    read in place, the weights re-laid out at compile time as 32-bit words of
    two input channels' weights, [group][channel pair][kh][kw][output channel];
  * Arm DSP (Cortex-M4/M7/M33/M55): `smlad`, one pair product with
    accumulation, over an im2col column of int16 taps in the scratch (as the C
    backend's kernel), two output channels x two columns a block; depthwise
    rows and fully connected layers split words of four input bytes with
    `sxtb16`;
  * elsewhere (RV32, Cortex-M0/M3): the same schedules with two multiply-adds
    per pair.

Register tiles keep their sums in registers over the whole reduction. What
these nests cannot take (weights computed at run time, a kernel written over
its input) goes to the scalar nests of loopnests_more.
"""
from __future__ import annotations

import numpy as np

from ...ops.quantized.common import conv_geometry, operands
from ..cwriter import (
    Assign,
    Block,
    Cast,
    Const,
    Decl,
    Expr,
    For,
    If,
    Table,
    Type,
    Var,
    and_,
    eq,
    ge,
    lt,
    param,
    select,
)
from .cparse import NotLowerable
from .loopnests import I64, _split, nest, scratch_ptr
from .loopnests_more import _bin, _i, _requantized, qconv as qconv_scalar
from .loopnests_more import qmatmul as qmatmul_scalar
from .vector import Bitcast, Intrinsic, Lane, Splat, VecLoad, VecType, WordLoad

_I32 = Type("int32")
INDEX = Type("index")

# pmaddwd of each x86 vector width: int32 lanes -> the intrinsic.
_PMADDWD = {16: "llvm.x86.avx512.pmaddw.d.512", 8: "llvm.x86.avx2.pmadd.wd",
            4: "llvm.x86.sse2.pmadd.wd"}


def pair_mode(target) -> tuple[str, list[int]]:
    """How this target multiplies 16-bit pairs: ("x86", the int32 lane counts
    of its vectors, widest first), ("mve", []) -- Helium: byte dot products
    LLVM vectorizes into VMLADAVA --, ("dsp", []) or ("scalar", [])."""
    if target.is_x86:
        lanes = [16] if target.has("avx512bw") else []
        lanes += [8] if target.has("avx2") else []
        return "x86", lanes + [4]
    if target.is_arm and target.has("mve"):
        return "mve", []
    if target.is_arm and target.has("dsp"):
        return "dsp", []
    return "scalar", []


def _for(var: Var, n: int, body: list) -> list:
    """for var in [0, n), or the body alone with var = 0 when n is 1 (no loop for
    LLVM to peel: a 1x1 conv's tap loops vanish)."""
    return [For(var, n, body)] if n > 1 else [Block([Decl(var, Const(0)), *body])]


def _pack(lo: Expr, hi: Expr | None) -> Expr:
    """(lo & 0xffff) | (hi << 16): two int16 values in one int32 word, lo first
    in memory order (little-endian), as SMLAD and pmaddwd pair them."""
    low = _bin("&", lo, _i(0xFFFF))
    return low if hi is None else _bin("|", low, _bin("<<", hi, _i(16)))


def _centered(w: np.ndarray, w_zp) -> np.ndarray | None:
    """Weights [OC, ...] minus their zero points (w_zp: the kernel's per-channel or
    single zero point, or None) as [OC, K] int64; None when one does not fit 16
    bits (the pair products' operands)."""
    oc = w.shape[0]
    wl = w.reshape(oc, -1).astype(np.int64)
    if w_zp is not None:
        wl = wl - np.broadcast_to(w_zp.const.reshape(-1), (oc,)).astype(np.int64)[:, None]
    return None if wl.size and np.abs(wl).max() > 32767 else wl


def _requantize_store(k, value: Expr, ch: Expr, at: Expr, y_zp: int, act_min: int,
                      act_max: int) -> list:
    """out[at] = value requantized with output channel ch's multiplier (or the int32
    sum itself, without one), in a block of its own."""
    _, _, _, mult, shift, _ = operands(k)
    v = Var("v", _I32)
    st = [Decl(v, value)]
    if mult is not None:
        st += _requantized(k, v, ch, mult, shift, y_zp, act_min, act_max)
    out_t = Type(np.dtype(k.out.dtype).name)
    return [Block(st + [Assign(param(k.out, output=True)[at], Cast(out_t, v))])]


def weight_pairs(wl: np.ndarray, group: int, cg: int, kh: int, kw: int) -> np.ndarray:
    """Centered weights [OC, C/group * KH * KW] (logical order) as int32 words of
    channel pairs, [group][pair][KH][KW][OC/group]."""
    oc = wl.shape[0]
    wl = wl.reshape(oc, cg, kh, kw)
    cp = (cg + 1) // 2
    padded = np.zeros((oc, 2 * cp, kh, kw), np.int64)
    padded[:, :cg] = wl
    words = (padded[:, 0::2] & 0xFFFF) | ((padded[:, 1::2] & 0xFFFF) << 16)
    mg = oc // group
    table = words.astype(np.uint32).view(np.int32).reshape(group, mg, cp, kh, kw)
    return np.ascontiguousarray(table.transpose(0, 2, 3, 4, 1))


def _im2col_geometry(k, strides, pads, dilations, group, folded):
    """(columns per tile, 32-bit words per column) of the im2col schedule, or None
    when the kernel does not take it (x86 computes from the input in place)."""
    x, w, _, _, _, w_zp = operands(k)
    if (not folded or w.const is None or pair_mode(k.target)[0] == "x86"
            or (w_zp is not None and w_zp.const is None)
            or np.dtype(x.dtype) not in (np.dtype("int8"), np.dtype("uint8"))):
        return None
    kk = x.shape[1] // group * int(np.prod(w.shape[2:]))
    if pair_mode(k.target)[0] == "mve":   # a column of bytes, 16 to a vector (or int16)
        return IM2COL_COLUMNS, max(-(-kk // 16) * 4, -(-kk // 4) * 2)
    return IM2COL_COLUMNS, -(-kk // 4) * 2


IM2COL_COLUMNS = 2   # output columns per im2col tile: 2 channels x 2 columns of sums


def _plane_geometry(k, strides, pads, dilations, folded):
    """(padded height, padded width) of the depthwise schedule's zero-point padded
    input plane, or None when the kernel does not take it."""
    x, w, _, _, _, w_zp = operands(k)
    if (folded or w.const is None or w.shape[1] != 1
            or (w_zp is not None and w_zp.const is None)
            or np.dtype(x.dtype) not in (np.dtype("int8"), np.dtype("uint8"))):
        return None
    h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = conv_geometry(
        x.shape, w.shape, strides, pads, dilations)
    # every tap of every output inside; rows a word long past the last tap
    return max(h + ph, (oh - 1) * sh + (kh - 1) * dh + 1), \
        max(wd + pw, (ow - 1) * sw + (kw - 1) * dw + 1) + 3


def _qconv_scratch(k, *, strides, pads, dilations, group=1, folded=1, **_attrs) -> int:
    geo = _im2col_geometry(k, strides, pads, dilations, group, folded)
    if geo is not None:
        return 4 * geo[0] * geo[1]
    plane = _plane_geometry(k, strides, pads, dilations, folded)
    return 0 if plane is None else -(-plane[0] * plane[1] // 4) * 4


@nest("QConv", domain="mtvm", scratch=_qconv_scratch)
def qconv(k, *, strides, pads, dilations, group=1, x_zp=0, y_zp=0, act_min=-128, act_max=127,
          folded=1):
    """Folded QConv in register tiles of 16-bit pair products (see the module's
    docstring); depthwise (folded=0) and the rest: the scalar nest."""
    attrs = dict(strides=strides, pads=pads, dilations=dilations, group=group, x_zp=x_zp,
                 y_zp=y_zp, act_min=act_min, act_max=act_max, folded=folded)
    x, w, bias, mult, shift, w_zp = operands(k)
    if (w.const is None or (w_zp is not None and w_zp.const is None)
            or np.dtype(x.dtype) not in (np.dtype("int8"), np.dtype("uint8"))):
        return qconv_scalar(k, **attrs)   # (which refuses to run in place)
    if not folded:
        if _plane_geometry(k, strides, pads, dilations, folded) is not None:
            return depthwise_plane(k, **attrs)
        return qconv_scalar(k, **attrs)
    n, c = x.shape[:2]
    oc = w.shape[0]
    h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = conv_geometry(
        x.shape, w.shape, strides, pads, dilations)
    cg, mg = c // group, oc // group
    wl = _centered(w.const, w_zp)   # [OC, cg * kh * kw]
    if _im2col_geometry(k, strides, pads, dilations, group, folded) is not None:
        if wl is None:
            raise NotLowerable("QConv weights minus their zero points beyond 16 bits")
        return im2col(k, wl, cg, kh, kw, strides=strides, pads=pads, dilations=dilations,
                      group=group, x_zp=x_zp, y_zp=y_zp, act_min=act_min, act_max=act_max)
    if k.inplace is not None:   # refuses_inplace keeps the planner from it
        raise NotLowerable("QConv's x86 tiles written over their input")
    if wl is None:
        return qconv_scalar(k, **attrs)
    table = weight_pairs(wl, group, cg, kh, kw)
    if (kh, kw, sh, sw, oh, ow) == (1, 1, 1, 1, h, wd) and ph == pw == 0:
        # A pointwise conv: its planes are rows of H*W pixels (one long row of tiles).
        h, wd, oh, ow = 1, h * wd, 1, oh * ow
    mode, lane_options = pair_mode(k.target)
    cp_full, odd = cg // 2, cg % 2
    X = param(x)
    wt = Var("wt", _I32)
    bv, gv, oyv, pv, kyv, kxv = (Var(s) for s in ("b", "g", "oy", "pv", "ky", "kx"))
    iy = Var("iy", I64)
    zero64 = Const(0, "int64")
    row_inside = and_(ge(iy, zero64), lt(iy, Const(h, "int64")))
    zp_pair = _pack(_i(x_zp), _i(x_zp))

    def oc_abs(m_in: Expr) -> Expr:
        return gv * mg + m_in if group > 1 else m_in

    def w_index(pair: Expr, m_in: Expr) -> Expr:
        g_off = gv * (-(-cg // 2) * kh * kw * mg) if group > 1 else Const(0)
        i = ((pair * kh + kyv) * kw + kxv) * mg + m_in
        return g_off + i if group > 1 else i

    def x_value(ci: Expr, col: Expr) -> Expr:
        """x[b, g*cg + ci, iy, col] as int32."""
        ch = gv * cg + ci if group > 1 else ci
        return Cast(_I32, X[((bv * c + ch) * h + Cast(INDEX, iy)) * wd + col])

    def store(acc: Expr, m_in: Expr, ox: Expr) -> list:
        """Requantize one sum and store it at output channel m_in, column ox."""
        o = oc_abs(m_in)
        return _requantize_store(k, acc, o, ((bv * oc + o) * oh + oyv) * ow + ox, y_zp,
                                 act_min, act_max)

    def tile(kind: str, lanes: int, m0: Expr, nm: int, ox0: Expr, nt: int,
             checked: bool = False) -> list:
        """nm channel blocks (vectors of `lanes`, or single channels) starting at
        m0 x nt columns from ox0 (checked: one column whose taps may fall in the
        padding)."""
        vec = kind == "x86"
        acc_t = VecType("int32", lanes=lanes) if vec else _I32
        acc = [[Var(f"acc{a}_{q}", acc_t) for q in range(nt)] for a in range(nm)]

        def m_of(a: int) -> Expr:
            step = a * lanes if vec else a
            return m0 + step if step else m0

        out = []
        for a in range(nm):
            init = VecLoad(param(bias), oc_abs(m_of(a)), lanes) if vec \
                else param(bias)[oc_abs(m_of(a))]
            out += [Decl(acc[a][q], init) for q in range(nt)]

        def columns(pair: Expr, has_hi: bool, inside: bool) -> list:
            """The products of one tap (pair, ky, kx) for the tile: inside: the
            tap's input row is inside the plane (else it reads the zero point)."""
            stmts, xs = [], []
            for q in range(nt):
                if not inside:
                    xs.append((None, None))
                    continue
                ix = Var(f"ix{q}", I64)
                col = ox0 + q if q else ox0
                if checked:
                    stmts.append(Decl(ix, Cast(I64, col * sw + kxv * dw) - Const(pw, "int64")))
                    col_at = Cast(INDEX, ix)
                    ok = and_(ge(ix, zero64), lt(ix, Const(wd, "int64")))
                else:
                    col_at = col * sw + kxv * dw - pw if pw else col * sw + kxv * dw
                ci = pair * 2
                lo, hi = Var(f"xlo{q}", _I32), Var(f"xhi{q}", _I32)
                lo_v = x_value(ci, col_at)
                hi_v = x_value(ci + 1, col_at) if has_hi else None
                if checked:
                    lo_v = select(ok, lo_v, _i(x_zp))
                    hi_v = None if hi_v is None else select(ok, hi_v, _i(x_zp))
                stmts.append(Decl(lo, lo_v))
                if hi_v is not None:
                    stmts.append(Decl(hi, hi_v))
                xs.append((lo, hi if has_hi else None))
            if kind == "scalar":
                wp = Cast(Type("int16", pointer=True, const=True), wt)
                for a in range(nm):
                    wi = w_index(pair, m_of(a))
                    w0, w1 = Var(f"w{a}lo", _I32), Var(f"w{a}hi", _I32)
                    stmts.append(Decl(w0, wp[wi * 2]))
                    if has_hi:
                        stmts.append(Decl(w1, wp[wi * 2 + 1]))
                    for q in range(nt):
                        lo, hi = xs[q]
                        term = w0 * (lo if lo is not None else _i(x_zp))
                        if has_hi:
                            term = term + w1 * (hi if hi is not None else _i(x_zp))
                        stmts.append(Assign(acc[a][q], term, "+="))
                return stmts
            packs = []
            for q in range(nt):
                lo, hi = xs[q]
                if lo is None:
                    packs.append(zp_pair)
                    continue
                xp = Var(f"xp{q}", _I32)
                stmts.append(Decl(xp, _pack(lo, hi)))
                packs.append(xp)
            for a in range(nm):
                wi = w_index(pair, m_of(a))
                if vec:
                    w16 = VecType("int16", lanes=2 * lanes)
                    wv = Var(f"wv{a}", w16)
                    stmts.append(Decl(wv, Bitcast(VecLoad(wt, wi, lanes), w16)))
                    for q in range(nt):
                        xv = Bitcast(Splat(packs[q], lanes), w16)
                        stmts.append(Assign(acc[a][q], Intrinsic(_PMADDWD[lanes], (wv, xv), acc_t),
                                            "+="))
                else:
                    wv = Var(f"wv{a}", _I32)
                    stmts.append(Decl(wv, wt[wi]))
                    for q in range(nt):
                        stmts.append(Assign(acc[a][q], Intrinsic(
                            "llvm.arm.smlad", (wv, packs[q], acc[a][q]), _I32)))
            return stmts

        def reduction(pair: Expr, has_hi: bool) -> list:
            row = [Decl(iy, Cast(I64, oyv * sh + kyv * dh) - Const(ph, "int64"))]
            if h == 1 and kh == 1 and ph == 0:   # one input row: always inside
                row += _for(kxv, kw, columns(pair, has_hi, True))
            else:
                row.append(If(row_inside, _for(kxv, kw, columns(pair, has_hi, True)),
                              _for(kxv, kw, columns(pair, has_hi, False))))
            return _for(kyv, kh, row)

        if cp_full:
            out.append(For(pv, cp_full, reduction(pv, True)))
        if odd:
            out += reduction(Const(cp_full), False)
        for a in range(nm):
            for q in range(nt):
                ox = ox0 + q if q else ox0
                if vec:
                    for i in range(lanes):
                        out += store(Lane(acc[a][q], i), m_of(a) + i if i else m_of(a), ox)
                else:
                    out += store(acc[a][q], m_of(a), ox)
        return [Block(out)]

    # Columns whose every tap lies inside the input row.
    lo = min(ow, -(-pw // sw))
    hi = max(lo, min(ow, (wd - 1 + pw - (kw - 1) * dw) // sw + 1))
    blocks = []   # (kind, lanes, first channel, count, channels per tile)
    first = 0
    if mode == "x86":
        lanes = next((L for L in lane_options if L <= mg), 0)
        if lanes:
            nvec = mg // lanes
            for f, cnt, width in _split(nvec, 2):
                blocks.append(("x86", lanes, f * lanes, cnt, width))
            first = nvec * lanes
    kind = "dsp" if mode == "dsp" else "scalar"
    for f, cnt, width in _split(mg - first, 4):
        blocks.append((kind, 1, first + f, cnt, width))

    owt, owe, mb = Var("owt"), Var("owe"), Var("mb")
    per_row = []
    for kind_, lanes_, first_m, count_m, nm in blocks:
        span = nm * lanes_
        m0 = (mb * span + first_m if first_m else mb * span) if count_m > 1 else Const(first_m)
        nt_max = 4 if kind_ == "x86" else 2
        row = []
        for first_t, count_t, nt in _split(hi - lo, nt_max):
            ox0 = owt * nt + (lo + first_t) if count_t > 1 else Const(lo + first_t)
            body = tile(kind_, lanes_, m0, nm, ox0, nt)
            row += [For(owt, count_t, body)] if count_t > 1 else body
        for e_lo, e_hi in ((0, lo), (hi, ow)):
            if e_hi > e_lo:
                row.append(For(owe, e_hi, tile(kind_, lanes_, m0, nm, owe, 1, checked=True),
                               begin=Const(e_lo)))
        per_row += [For(mb, count_m, row)] if count_m > 1 else row
    body = [For(oyv, oh, per_row)]
    if group > 1:
        body = [For(gv, group, body)]
    return [Table(wt, table), For(bv, n, body)]


def depthwise_plane(k, *, strides, pads, dilations, group=1, x_zp=0, y_zp=0, act_min=-128,
                    act_max=127, folded=0):
    """A depthwise QConv on a core without vectors, as the C backend's: each input
    plane is first copied into the scratch with its padding as the zero point,
    so that every tap of every output lies inside it and nothing is checked;
    then bias[o] - x_zp * sum(w') + the sum of padded * w' (w' = w - w_zp[o]).
    x86 at stride 1: vectors of 16 / 8 / 4 adjacent columns, each tap one
    widening load times the tap's weight in every lane.
    Arm DSP with 3 taps a row: one word of four bytes x0..x3 feeds two outputs'
    rows at stride 1 (SXTB16 gives (x0, x2) and, of the word rotated by 8,
    (x1, x3); SMLAD with (w0, w2) and SMLAxB with w1: 7 instructions for 6
    products), one output's at stride 2; otherwise tiles of four columns, each
    weight feeding the four."""
    del folded
    x, w, bias, mult, shift, w_zp = operands(k)
    n, c = x.shape[:2]
    oc = w.shape[0]
    h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = conv_geometry(
        x.shape, w.shape, strides, pads, dilations)
    mg = oc // group
    wl = _centered(w.const, w_zp)
    if wl is None:
        raise NotLowerable("depthwise weights minus their zero points beyond 16 bits")
    hp, wp = _plane_geometry(k, strides, pads, dilations, 0)
    offsets = (-x_zp * wl.sum(axis=1)).astype(np.int64).astype(np.int32)
    X = param(x)
    plane = Var("plane", Type("int8" if np.dtype(x.dtype) == np.dtype("int8") else "uint8",
                              pointer=True))
    wt, off = Var("dw_w", Type("int16")), Var("dw_off", _I32)
    w02, w1 = Var("dw_w02", _I32), Var("dw_w1", _I32)
    bv, ov, oyv, kyv, kxv, rv, cv = (Var(s) for s in ("b", "o", "oy", "ky", "kx", "r", "col"))
    words = pair_mode(k.target)[0] in ("dsp", "mve") and kw == 3 and dw == 1 and sw in (1, 2)
    ext = "llvm.arm.uxtb16" if np.dtype(x.dtype) == np.dtype("uint8") else "llvm.arm.sxtb16"
    zp = Cast(Type(np.dtype(x.dtype).name), _i(x_zp))

    # The padded plane of input channel o // mg (once per channel: mg == 1 mostly).
    src = (bv * c + (ov / mg if mg > 1 else ov)) * h
    copy_row = [If(and_(ge(rv, Const(ph)), lt(rv, Const(ph + h))),
                   [For(cv, wp, [Assign(plane[rv * wp + cv], select(
                       and_(ge(cv, Const(pw)), lt(cv, Const(pw + wd))),
                       X[(src + rv - ph) * wd + cv - pw], zp))])],
                   [For(cv, wp, [Assign(plane[rv * wp + cv], zp)])])]
    fill = [For(rv, hp, copy_row)]
    if mg > 1:
        fill = [If(eq(ov % mg, Const(0)), fill)]

    def store(acc: Var, ox: Expr) -> list:
        return _requantize_store(k, acc, ov, ((bv * oc + ov) * oh + oyv) * ow + ox, y_zp,
                                 act_min, act_max)

    def prow() -> Expr:
        return (oyv * sh + kyv * dh) * wp

    def tile(ox0: Expr, nt: int) -> list:
        accs = [Var(f"acc{q}", _I32) for q in range(nt)]
        out = [Decl(a, param(bias)[ov] + off[ov]) for a in accs]
        wv = Var("wk", _I32)
        taps = [Decl(wv, Cast(_I32, wt[(ov * kh + kyv) * kw + kxv]))]
        for q, a in enumerate(accs):
            col = ox0 + q if q else ox0
            taps.append(Assign(a, wv * Cast(_I32, plane[prow() + col * sw + kxv * dw]), "+="))
        out.append(For(kyv, kh, [For(kxv, kw, taps)]))
        for q, a in enumerate(accs):
            out += store(a, ox0 + q if q else ox0)
        return [Block(out)]

    def word_tile(ox0: Expr, nt: int) -> list:
        """nt columns from ox0: at stride 1, a word per two columns; at stride 2,
        one per column."""
        accs = [Var(f"acc{q}", _I32) for q in range(nt)]
        out = [Decl(a, param(bias)[ov] + off[ov]) for a in accs]
        wa, wb = Var("wa", _I32), Var("wb", _I32)
        row = [Decl(wa, w02[ov * kh + kyv]), Decl(wb, w1[ov * kh + kyv])]
        per_word = 2 if sw == 1 else 1
        for j in range(nt // per_word):
            word, even, odd = Var(f"xw{j}", _I32), Var(f"xe{j}", _I32), Var(f"xo{j}", _I32)
            col = ox0 + j * per_word if j else ox0
            pairs = _sxtb16_pairs(word, ext)
            row += [Decl(word, WordLoad(plane, prow() + col * sw)), Decl(even, pairs[0]),
                    Decl(odd, pairs[1])]
            a0 = accs[j * per_word]
            row += [Assign(a0, Intrinsic("llvm.arm.smlad", (even, wa, a0), _I32)),
                    Assign(a0, Intrinsic("llvm.arm.smlabb", (odd, wb, a0), _I32))]
            if per_word == 2:
                a1 = accs[j * 2 + 1]
                row += [Assign(a1, Intrinsic("llvm.arm.smlad", (odd, wa, a1), _I32)),
                        Assign(a1, Intrinsic("llvm.arm.smlatb", (even, wb, a1), _I32))]
        out.append(For(kyv, kh, row))
        for q, a in enumerate(accs):
            out += store(a, ox0 + q if q else ox0)
        return [Block(out)]

    def vector_tile(ox0: Expr, lanes: int) -> list:
        vt = VecType("int32", lanes=lanes)
        acc = Var("vacc", vt)
        out = [Decl(acc, Splat(param(bias)[ov] + off[ov], lanes))]
        wv = Var("wk", _I32)
        taps = [Decl(wv, Cast(_I32, wt[(ov * kh + kyv) * kw + kxv])),
                Assign(acc, Cast(vt, VecLoad(plane, prow() + ox0 + kxv * dw, lanes))
                       * Splat(wv, lanes), "+=")]
        out.append(For(kyv, kh, [For(kxv, kw, taps)]))
        for i in range(lanes):
            v = Var("v", _I32)
            out.append(Block([Decl(v, Lane(acc, i)), *store(v, ox0 + i if i else ox0)]))
        return [Block(out)]

    owt = Var("owt")
    row = []
    mode, lane_options = pair_mode(k.target)
    if mode == "mve":   # Helium: VMLA.I32 of 4 widened bytes by the weight, 4 a vector
        lane_options = [16, 8]
    lanes = next((L for L in lane_options if L <= ow), 0) if mode in ("x86", "mve") and sw == 1 \
        else 0
    if lanes:
        full = ow // lanes * lanes
        row.append(For(owt, ow // lanes, vector_tile(owt * lanes, lanes)))
        first = full
    elif words:
        step = 4 if sw == 1 else 2
        full = ow // step * step
        if full:
            row.append(For(owt, ow // step, word_tile(owt * step, step)))
        if ow - full >= 2 and sw == 1:
            row += word_tile(Const(full), 2)
            full += 2
        first = full
    else:
        first = 0
    for first_t, count_t, nt in _split(ow - first, 4):
        ox0 = owt * nt + (first + first_t) if count_t > 1 else Const(first + first_t)
        body = tile(ox0, nt)
        row += [For(owt, count_t, body)] if count_t > 1 else body
    tables = [Table(wt, np.ascontiguousarray(wl.astype(np.int16))), Table(off, offsets)]
    if words:
        taps = wl.reshape(oc * kh, 3)
        pairs = (taps[:, 0] & 0xFFFF) | ((taps[:, 2] & 0xFFFF) << 16)
        tables += [Table(w02, pairs.astype(np.uint32).view(np.int32)),
                   Table(w1, taps[:, 1].astype(np.int32))]
    return tables + [Decl(plane, Cast(plane.type, scratch_ptr("uint8"))),
                     For(bv, n, [For(ov, oc, [*fill, For(oyv, oh, row)])])]


def _sxtb16_pairs(word: Expr, ext: str = "llvm.arm.sxtb16") -> tuple[Expr, Expr]:
    """SXTB16 of a word of bytes b0..b3 and of the word rotated by 8: the int16
    pairs (b0, b2) and (b1, b3)."""
    rotated = _bin("|", Cast(_I32, _bin(">>", Cast(Type("uint32"), word), _i(8))),
                   _bin("<<", word, _i(24)))
    return Intrinsic(ext, (word,), _I32), Intrinsic(ext, (rotated,), _I32)


def im2col(k, wl: np.ndarray, cg: int, kh: int, kw: int, *, strides, pads, dilations, group,
           x_zp, y_zp, act_min, act_max) -> list:
    """A folded QConv on a core without vectors (Arm DSP: SMLAD; elsewhere two
    multiply-adds per pair), as the C backend's im2col kernel: per tile of
    IM2COL_COLUMNS output columns, their input taps in (channel, kh, kw) order,
    the padding as the zero point, are copied once as int16 into the scratch
    (padded with zeros to a multiple of four); then every block of two output
    channels is a dot product of their weights with the columns, no tap checked.
    The weights minus their zero points are int16 words of pairs on Arm DSP
    (one load per SMLAD), bytes elsewhere when they fit. None when a weight
    minus its zero point does not fit 16 bits."""
    x, _, bias, _, _, _ = operands(k)
    oc = wl.shape[0]
    n, c = x.shape[:2]
    h, wd, _, _, oh, ow, sh, sw, ph, pw, dh, dw = conv_geometry(
        x.shape, k.ins[1].shape, strides, pads, dilations)
    mg = oc // group
    kk = cg * kh * kw
    k4 = -(-kk // 4) * 4   # int16 slots of a column (two per word)
    mode = pair_mode(k.target)[0]
    fits8 = not wl.size or (wl.min() >= -128 and wl.max() <= 127)
    # Helium: byte columns and byte weights, plain dot products that LLVM's loop
    # vectorizer turns into VMLADAVA over 16 lanes (tail-predicated).
    mve = mode == "mve" and fits8 and np.dtype(x.dtype) == np.dtype("int8")
    dsp = mode in ("dsp", "mve") and not mve
    # Bytes where a byte load costs what a halfword's does; SMLAD wants int16 words
    # (bytes split by SXTB16 cost LLVM's code about 20 % more instructions: the
    # C backend's trade, 1.6-1.8x its weights' flash, is taken the other way here).
    bytes_ = not dsp and fits8
    if mve:
        k4 = -(-kk // 16) * 16   # the column's byte slots
    padded = np.zeros((oc, k4), np.int64)
    padded[:, :kk] = wl
    table = padded.astype(np.int8 if bytes_ else np.int16)
    X = param(x)
    wt = Var("wcols", Type("int8" if bytes_ else "int16"))
    w32 = Cast(Type("int32", pointer=True, const=True), wt)
    col16 = Var("col16", Type(np.dtype(x.dtype).name if mve else "int16", pointer=True))
    col32 = Var("col32", Type("int32", pointer=True))
    slot_t = Type(np.dtype(x.dtype).name if mve else "int16")
    bv, gv, oyv, ci, kyv, kxv, pv, mb = (Var(s) for s in ("b", "g", "oy", "ci", "ky", "kx",
                                                            "p", "mb"))
    iy, ix = Var("iy", I64), Var("ix", I64)
    zero64 = Const(0, "int64")

    def pack(q: int, ox: Expr, checked: bool) -> list:
        """Column q of the scratch: the taps of output column ox."""
        ch = gv * cg + ci if group > 1 else ci
        xrow = ((bv * c + ch) * h + Cast(INDEX, iy)) * wd
        slot = q * k4 + (ci * kh + kyv) * kw + kxv
        at = ox * sw + kxv * dw - pw if pw else ox * sw + kxv * dw
        if checked:
            inside = and_(ge(ix, zero64), lt(ix, Const(wd, "int64")))
            hit = [Decl(ix, Cast(I64, ox * sw + kxv * dw) - Const(pw, "int64")),
                   Assign(col16[slot], Cast(slot_t, select(
                       inside, Cast(_I32, X[xrow + Cast(INDEX, ix)]), _i(x_zp))))]
        else:
            hit = [Assign(col16[slot], Cast(slot_t, X[xrow + at]))]
        miss = [Assign(col16[slot], Cast(slot_t, _i(x_zp)))]
        row = [Decl(iy, Cast(I64, oyv * sh + kyv * dh) - Const(ph, "int64")),
               If(and_(ge(iy, zero64), lt(iy, Const(h, "int64"))), _for(kxv, kw, hit),
                  _for(kxv, kw, miss))]
        out = _for(ci, cg, _for(kyv, kh, row))
        out += [Assign(col16[q * k4 + t], Cast(slot_t, _i(0))) for t in range(kk, k4)]
        return out

    def dots(m0: Expr, nm: int, ox0: Expr, nt: int) -> list:
        """Output channels m0 .. m0 + nm - 1 of the nt packed columns."""
        acc = [[Var(f"acc{a}_{q}", _I32) for q in range(nt)] for a in range(nm)]
        o = [(gv * mg + m0 if group > 1 else m0) + a if a else
             (gv * mg + m0 if group > 1 else m0) for a in range(nm)]
        out = [Decl(acc[a][q], param(bias)[o[a]]) for a in range(nm) for q in range(nt)]
        step = []
        if mve:              # 16 byte products a step: VMLADAVA.S8
            v8 = VecType(np.dtype(x.dtype).name, lanes=16)
            xs = [Var(f"xv{q}", v8) for q in range(nt)]
            ws = [Var(f"wv{a}", VecType("int8", lanes=16)) for a in range(nm)]
            step += [Decl(xs[q], VecLoad(col16, q * k4 + pv * 16, 16)) for q in range(nt)]
            step += [Decl(ws[a], VecLoad(wt, o[a] * k4 + pv * 16, 16)) for a in range(nm)]
            # (unsigned = 0, subtract = 0, exchange = 0, accumulator, a, b): LLVM splits
            # the generic reduce(mul(sext, sext)) into 4-lane widening loads instead.
            step += [Assign(acc[a][q], Intrinsic(
                "llvm.arm.mve.vmldava.v16i8", (_i(0), _i(0), _i(0), acc[a][q], xs[q], ws[a]),
                _I32)) for a in range(nm) for q in range(nt)]
            steps = k4 // 16
        elif dsp:            # int16 weights: a weight word and a column word per pair
            xs = [Var(f"xq{q}", _I32) for q in range(nt)]
            ws = [Var(f"wq{a}", _I32) for a in range(nm)]
            step += [Decl(xs[q], col32[q * (k4 // 2) + pv]) for q in range(nt)]
            step += [Decl(ws[a], w32[o[a] * (k4 // 2) + pv]) for a in range(nm)]
            step += [Assign(acc[a][q], Intrinsic("llvm.arm.smlad", (ws[a], xs[q], acc[a][q]),
                                                 _I32)) for a in range(nm) for q in range(nt)]
            steps = k4 // 2
        else:                # two multiply-adds per pair
            xl = [Var(f"xl{q}", _I32) for q in range(nt)]
            xh = [Var(f"xh{q}", _I32) for q in range(nt)]
            wl_ = [Var(f"wl{a}", _I32) for a in range(nm)]
            wh_ = [Var(f"wh{a}", _I32) for a in range(nm)]
            for q in range(nt):
                step += [Decl(xl[q], col16[q * k4 + pv * 2]),
                         Decl(xh[q], col16[q * k4 + pv * 2 + 1])]
            for a in range(nm):
                step += [Decl(wl_[a], Cast(_I32, wt[o[a] * k4 + pv * 2])),
                         Decl(wh_[a], Cast(_I32, wt[o[a] * k4 + pv * 2 + 1]))]
            step += [Assign(acc[a][q], wl_[a] * xl[q] + wh_[a] * xh[q], "+=")
                     for a in range(nm) for q in range(nt)]
            steps = k4 // 2
        out.append(For(pv, steps, step))
        for a in range(nm):
            for q in range(nt):
                idx = ((bv * oc + o[a]) * oh + oyv) * ow + (ox0 + q if q else ox0)
                out += _requantize_store(k, acc[a][q], o[a], idx, y_zp, act_min, act_max)
        return [Block(out)]

    def tile(ox0: Expr, nt: int, checked: bool) -> list:
        out = []
        for q in range(nt):
            out += pack(q, ox0 + q if q else ox0, checked)
        for first, count, nm in _split(mg, 2):
            m0 = (mb * nm + first if first else mb * nm) if count > 1 else Const(first)
            body = dots(m0, nm, ox0, nt)
            out += [For(mb, count, body)] if count > 1 else body
        return [Block(out)]

    lo = min(ow, -(-pw // sw))
    hi = max(lo, min(ow, (wd - 1 + pw - (kw - 1) * dw) // sw + 1))
    owt, owe = Var("owt"), Var("owe")
    row = []
    for first_t, count_t, nt in _split(hi - lo, IM2COL_COLUMNS):
        ox0 = owt * nt + (lo + first_t) if count_t > 1 else Const(lo + first_t)
        body = tile(ox0, nt, False)
        row += [For(owt, count_t, body)] if count_t > 1 else body
    for e_lo, e_hi in ((0, lo), (hi, ow)):
        if e_hi > e_lo:
            row.append(For(owe, e_hi, tile(owe, 1, True), begin=Const(e_lo)))
    body = [For(oyv, oh, row)]
    if group > 1:
        body = [For(gv, group, body)]
    return [Table(wt, np.ascontiguousarray(table)), Decl(col16, scratch_ptr("int16")),
            Decl(col32, scratch_ptr("int32")), For(bv, n, body)]


@nest("QMatMul", domain="mtvm")
def qmatmul(k, *, x_zp=0, y_zp=0, act_min=-128, act_max=127):
    """x [..., M, K] times the constant w [N, K]: bias[o] + the sum of x * (w - w_zp[o]).
    On Arm DSP, per row, blocks of four output channels: a word of four input
    bytes, SXTB16 into (x0, x2) and (x1, x3), meets each channel's weights split
    the same way with two SMLADs; the K % 4 last products one by one. Elsewhere:
    the scalar nest (loopnests_more.qmatmul)."""
    x, w, bias, mult, shift, w_zp = operands(k)
    kk, nn = x.shape[-1], w.shape[0]
    mode, lane_options = pair_mode(k.target)
    if mode == "x86" and w.const is not None and (w_zp is None or w_zp.const is not None) \
            and np.dtype(x.dtype) in (np.dtype("int8"), np.dtype("uint8")):
        body = _qmatmul_x86(k, lane_options, y_zp=y_zp, act_min=act_min, act_max=act_max)
        if body is not None:
            return body
    if (mode not in ("dsp", "mve") or w.const is None or kk < 4
            or (w_zp is not None and w_zp.const is None)
            or np.dtype(x.dtype) not in (np.dtype("int8"), np.dtype("uint8"))):
        return qmatmul_scalar(k, x_zp=x_zp, y_zp=y_zp, act_min=act_min, act_max=act_max)
    wl = _centered(w.const, w_zp)
    if wl is None:
        return qmatmul_scalar(k, x_zp=x_zp, y_zp=y_zp, act_min=act_min, act_max=act_max)
    m = x.size // kk
    nb, tl = kk // 4, kk % 4
    blocks = wl[:, :4 * nb].reshape(nn, nb, 4)
    even = (blocks[..., 0] & 0xFFFF) | ((blocks[..., 2] & 0xFFFF) << 16)
    odd = (blocks[..., 1] & 0xFFFF) | ((blocks[..., 3] & 0xFFFF) << 16)
    words = np.stack([even, odd], axis=-1).astype(np.uint32).view(np.int32)   # [N][nb][2]
    X = param(x)
    wq, wtail = Var("wq", _I32), Var("wtail", Type("int16"))
    # The weights stay bytes when they fit (the C backend's flash; SXTB16 splits
    # them as it splits the input: +8 % instructions on kwt_tiny_int8), else int16.
    bytes_ = wl.min() >= -128 and wl.max() <= 127
    wb = Var("wb", Type("int8"))
    # Helium: 16 byte products an instruction (VMLADAVA.S8) where input and weights
    # are both signed bytes; the K % 16 last products one by one.
    mve = mode == "mve" and bytes_ and np.dtype(x.dtype) == np.dtype("int8") and kk >= 16
    if mve:
        nb, tl = kk // 16, kk % 16
    ext = "llvm.arm.uxtb16" if np.dtype(x.dtype) == np.dtype("uint8") else "llvm.arm.sxtb16"
    iv, jv, tv, mb = Var("i"), Var("j"), Var("t"), Var("mb")
    xw, xe, xo = Var("xw", _I32), Var("xe", _I32), Var("xo", _I32)

    def block(o0: Expr, nm: int) -> list:
        o = [o0 + a if a else o0 for a in range(nm)]
        acc = [Var(f"acc{a}", _I32) for a in range(nm)]
        out = [Decl(acc[a], param(bias)[o[a]]) for a in range(nm)]
        pairs = _sxtb16_pairs(xw, ext)
        step = [Decl(xw, WordLoad(X, iv * kk + jv * 4)), Decl(xe, pairs[0]), Decl(xo, pairs[1])]
        if mve:
            xv = Var("xv", VecType("int8", lanes=16))
            step = [Decl(xv, VecLoad(X, iv * kk + jv * 16, 16))]
            step += [Assign(acc[a], Intrinsic(
                "llvm.arm.mve.vmldava.v16i8", (_i(0), _i(0), _i(0), acc[a], xv,
                                               VecLoad(wb, o[a] * kk + jv * 16, 16)), _I32))
                for a in range(nm)]
        for a in range(nm if not mve else 0):
            if bytes_:
                ww, we, wo = Var(f"ww{a}", _I32), Var(f"we{a}", _I32), Var(f"wo{a}", _I32)
                wpairs = _sxtb16_pairs(ww)
                step += [Decl(ww, WordLoad(wb, o[a] * kk + jv * 4)), Decl(we, wpairs[0]),
                         Decl(wo, wpairs[1])]
                wev, wov = we, wo
            else:
                at = (o[a] * nb + jv) * 2
                wev, wov = wq[at], wq[at + 1]
            step += [Assign(acc[a], Intrinsic("llvm.arm.smlad", (xe, wev, acc[a]), _I32)),
                     Assign(acc[a], Intrinsic("llvm.arm.smlad", (xo, wov, acc[a]), _I32))]
        out.append(For(jv, nb, step))
        if tl:
            done = nb * (16 if mve else 4)
            out.append(For(tv, tl, [Assign(acc[a], Cast(_I32, X[iv * kk + done + tv])
                                           * Cast(_I32, wtail[o[a] * tl + tv]), "+=")
                                    for a in range(nm)]))
        for a in range(nm):
            out += _requantize_store(k, acc[a], o[a], iv * nn + o[a], y_zp, act_min, act_max)
        return [Block(out)]

    row = []
    for first, count, nm in _split(nn, 4):
        o0 = (mb * nm + first if first else mb * nm) if count > 1 else Const(first)
        body = block(o0, nm)
        row += [For(mb, count, body)] if count > 1 else body
    tables = [Table(wb, np.ascontiguousarray(wl.astype(np.int8)))] if bytes_ else \
        [Table(wq, np.ascontiguousarray(words))]
    if tl:
        tables.append(Table(wtail, np.ascontiguousarray(wl[:, kk - tl:]).astype(np.int16)))
    return tables + [For(iv, m, row)]


def _qmatmul_x86(k, lane_options, *, y_zp, act_min, act_max) -> list | None:
    """QMatMul on x86: vectors of output channels, pmaddwd of their weight pairs
    (two K positions, minus the zero points, re-laid [K/2][N] at compile time)
    with each row's input pair broadcast; tiles of up to 4 rows x 2 vectors (8
    sums in registers). None when N has no multiple of 4 lanes or a weight
    minus its zero point does not fit 16 bits."""
    x, w, bias, mult, shift, w_zp = operands(k)
    kk, nn = x.shape[-1], w.shape[0]
    lanes = next((L for L in lane_options if nn % L == 0), 0)
    if not lanes:
        return None
    wl = _centered(w.const, w_zp)
    if wl is None:
        return None
    m = x.size // kk
    kp = (kk + 1) // 2
    padded = np.zeros((nn, 2 * kp), np.int64)
    padded[:, :kk] = wl
    words = ((padded[:, 0::2] & 0xFFFF) | ((padded[:, 1::2] & 0xFFFF) << 16)).astype(np.uint32)
    table = np.ascontiguousarray(words.view(np.int32).T)   # [K/2][N]
    X = param(x)
    wt = Var("wpairs", _I32)
    acc_t, w16 = VecType("int32", lanes=lanes), VecType("int16", lanes=2 * lanes)
    iv, jv, pv = Var("it"), Var("jt"), Var("p")

    def tile(rows: list, o0: Expr, nvec: int, odd_tail: bool) -> list:
        acc = [[Var(f"vacc{r}_{v}", acc_t) for v in range(nvec)] for r in range(len(rows))]
        out = [Decl(acc[r][v], VecLoad(param(bias), o0 + v * lanes if v else o0, lanes))
               for r in range(len(rows)) for v in range(nvec)]

        def step(p: Expr, has_hi: bool) -> list:
            st = []
            wv = [Var(f"wv{v}", w16) for v in range(nvec)]
            st += [Decl(wv[v], Bitcast(VecLoad(wt, p * nn + o0 + v * lanes if v
                                               else p * nn + o0, lanes), w16))
                   for v in range(nvec)]
            for r, i in enumerate(rows):
                xp = Var(f"xp{r}", _I32)
                lo = Cast(_I32, X[i * kk + p * 2])
                hi = Cast(_I32, X[i * kk + p * 2 + 1]) if has_hi else None
                st.append(Decl(xp, _pack(lo, hi)))
                xs = Bitcast(Splat(xp, lanes), w16)
                st += [Assign(acc[r][v], Intrinsic(_PMADDWD[lanes], (wv[v], xs), acc_t), "+=")
                       for v in range(nvec)]
            return st
        if kk // 2:
            out.append(For(pv, kk // 2, step(pv, True)))
        if odd_tail:
            out.append(Block(step(Const(kk // 2), False)))
        for r, i in enumerate(rows):
            for v in range(nvec):
                for lane in range(lanes):
                    o = o0 + (v * lanes + lane) if v * lanes + lane else o0
                    out += _requantize_store(k, Lane(acc[r][v], lane), o, i * nn + o, y_zp,
                                             act_min, act_max)
        return [Block(out)]

    body = []
    for first_m, count_m, mr in _split(m, 4):
        base = (iv * mr + first_m if first_m else iv * mr) if count_m > 1 else Const(first_m)
        rows = [base + r if r else base for r in range(mr)]
        inner = []
        for first_v, count_v, nvec in _split(nn // lanes, max(1, 8 // mr) if mr > 1 else 4):
            span = nvec * lanes
            o0 = (jv * span + first_v * lanes if first_v else jv * span) if count_v > 1 \
                else Const(first_v * lanes)
            t = tile(rows, o0, nvec, kk % 2 == 1)
            inner += [For(jv, count_v, t)] if count_v > 1 else t
        body += [For(iv, count_m, inner)] if count_m > 1 else inner
    return [Table(wt, table)] + body
