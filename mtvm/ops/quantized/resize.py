"""QResize: Resize between DequantizeLinear and QuantizeLinear on the 8-bit
tensors themselves (created by the QDQ pass, mtvm/passes/quantize.py).

    nearest   y = remap[x[src]]        a gather; `remap` (256 entries) is the
                                       requantization x -> y, left out when the
                                       two share scale and zero point (a copy)
    linear / cubic
              acc = sum_taps (w_a * w_b * ...) * ((float)(x[src] - x_zp) * x_scale)
              y = remap[saturate(round_half_even(acc / y_scale) + y_zp)]

in float32: each input dequantized as DequantizeLinear does; the taps, their
weights and their order the float Resize kernel's (mtvm/ops/resize.py: per-axis
tables from onnx.reference's coefficients, the axes' weights multiplied first,
the taps summed outer axis first); the rounding QuantizeLinear's (the 1.5 * 2^23
trick). So the result is what DQ -> Resize -> Q computes in float, bit for bit
(up to the C compiler contracting a multiply-add), without the float tensors.
One change to the taps: where onnxruntime's linear kernels clamp the source
coordinate to the last input, they weigh that input twice by 0.5, and so does
QResize (its sums then round as theirs do: the U-Net's x2 bilinear layer is
bit-exact). `remap` may also carry a following per-tensor requantization (the
QAffine the pass puts before a Concat of another scale), folded into the table
at compile time: one kernel instead of DQ, Resize, Q and QAffine.

The loop nest hoists each axis' table reads (source offsets, weight products)
to that axis' loop. The last axis, when its taps repeat (integer upsampling),
runs as a loop over periods with constant taps, in blocks of up to 32 periods
(no scalar remainder loop). For a target with vectors (x86, portable C) each
output row first dequantizes its input rows into float scratch and writes its
phases as int32 scratch rows, interleaved into the output afterwards: the main
loop then holds float lanes only, and gcc vectorizes it at the full width (with
8-bit loads and stores in it, it picks 16-byte vectors: 270 instead of 173 us
on the U-Net's layer, x86-64 with AVX-512). The remap is a last pass over each
finished row. Points outside the input (tf_crop_and_resize) store
`ext_q`, the extrapolation value quantized (and remapped).

On the cores that read the taps' bytes directly (Cortex-M, RISC-V: scalar_fpu), where the float
computation is an exact integer one in disguise -- equal input and output scales, and
weights that are multiples of 2^-m (a x2 or x4 bilinear: 0.75, 0.25; m <= DYADIC_MAX_BITS
over the axes) -- it computes S = sum W (x - x_zp) in int32 with W = w 2^m, and y =
floor((S + 2^(m-1)) / 2^m) + y_zp clamped (int_plan). The float sum is within 2^-12 of the
exact S / 2^m, so it rounds to the same integer unless S / 2^m is a tie (S = 2^(m-1) mod
2^m): those outputs take the float computation above, whose rounding noise decides a tie
-- the result stays the float one bit for bit, for fewer instructions (unet_v15_int8's x2
bilinear layer on the Cortex-M4, with its ties and its plain period loop: 47 -> 31 a value).
"""
from __future__ import annotations

import itertools

import numpy as np

from ...codegen.cwriter import (INDEX, Assign, Binary, Cast, Const, Decl, For, If, Table, Type,
                                Var, eq, gt, le, lt, ne, param, render_c, scaled, select,
                                sum_of)
from ..base import get_op, register
from ..quantize import qrange, round_to_range
from .common import DOMAIN, IntOp

F32, I32 = Type("float32"), Type("int32")
# the Resize attributes a QResize keeps (the float op's meaning)
RESIZE_ATTRS = ("mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                "exclude_outside", "antialias", "keep_aspect_ratio_policy", "axes")


def _plan(shape, a):
    """(plan, per-axis interpolation matrices) of the float Resize."""
    attrs = {k: a[k] for k in RESIZE_ATTRS if a.get(k) is not None}
    return get_op("Resize")._plan_and_mats(shape, a.get("roi"), a.get("scales"),
                                           a.get("sizes"), attrs)


def _axes(shape, a):
    """out_shape, {axis: (T, idx [out, T], w float32 [out, T], outside [out])}."""
    from ..resize import sparse_taps
    p, mats = _plan(shape, a)
    taps = {}
    for ax, m in enumerate(mats):
        if m is None:
            continue
        T, idx, w, bad = sparse_taps(m)
        if a.get("mode", "nearest") == "nearest":
            T, idx, w = 1, idx[:, :1], w[:, :1]
        elif a.get("mode") == "linear" and not a.get("antialias", 0):
            # onnxruntime's linear kernels clamp the source coordinate to the last
            # input and then, as both taps are that input, weigh each by 0.5: the
            # same taps here, so the float sums round as its do.
            last = (np.count_nonzero(w, axis=1) == 1) & (idx[:, 0] == shape[ax] - 1) & \
                (w[:, 0] == 1) & ~bad
            if last.any():
                if T == 1:
                    T, idx, w = 2, np.repeat(idx, 2, axis=1), np.concatenate(
                        [w, np.zeros_like(w)], axis=1)
                idx[last, 1], w[last, 0], w[last, 1] = shape[ax] - 1, 0.5, 0.5
        taps[ax] = (T, idx, w.astype(np.float32), bad)
    return [o for _, o, _, _ in p], taps


def dq_table(dtype, x_scale, x_zp) -> np.ndarray:
    """DequantizeLinear of every value of the 8-bit type, in float32 as its kernel does."""
    lo, hi = qrange(dtype)
    v = np.arange(lo, hi + 1, dtype=np.int64) - int(x_zp)
    return (v.astype(np.float32) * np.float32(x_scale)).astype(np.float32)


def pre_dtype(x_dtype, a) -> np.dtype:
    """The type of the value before the remap: x's (nearest) or y's (interpolated)."""
    return np.dtype(x_dtype) if a.get("mode", "nearest") == "nearest" else np.dtype(a["y_dtype"])


@register("QResize", domain=DOMAIN)
class QResize(IntOp):
    """inputs: x (int8/uint8), remap (optional, 256 entries of the output type,
    indexed by the value before it minus its type's minimum)."""

    def reference(self, x, remap=None, **a):
        out_shape, taps = _axes(x.shape, a)
        r = x.ndim
        outside = np.zeros(out_shape, bool)
        for ax, (_, _, _, bad) in taps.items():
            sh = [1] * r
            sh[ax] = -1
            outside = outside | bad.reshape(sh)

        def gather(src, t_of):
            idx = [np.arange(out_shape[d]) if d not in taps else taps[d][1][:, t_of[d]]
                   for d in range(r)]
            return src[np.ix_(*idx)]
        pre = pre_dtype(x.dtype, a)
        if a.get("mode", "nearest") == "nearest":
            y = gather(x, {d: 0 for d in taps})
        else:
            dq = dq_table(x.dtype, a["x_scale"], a["x_zp"])
            xd = dq[x.astype(np.int64) - qrange(x.dtype)[0]]
            acc = None
            axes = sorted(taps)
            for combo in itertools.product(*[range(taps[d][0]) for d in axes]):
                t_of = dict(zip(axes, combo))
                w = None
                for d in axes:
                    sh = [1] * r
                    sh[d] = -1
                    wd = taps[d][2][:, t_of[d]].reshape(sh)
                    w = wd if w is None else (w * wd).astype(np.float32)
                g = gather(xd, t_of)
                term = g if w is None else (w * g).astype(np.float32)
                acc = term if acc is None else (acc + term).astype(np.float32)
            lo, hi = qrange(pre)
            big = np.float32(4194304.0)
            v = (acc / np.float32(a["y_scale"])).astype(np.float32)
            v = np.clip(np.nan_to_num(v, nan=-big), -big, big)
            v = np.rint(v).astype(np.float64) + int(a["y_zp"])
            y = np.clip(v, lo, hi).astype(pre)
        if remap is not None:
            y = np.asarray(remap)[y.astype(np.int64) - qrange(pre)[0]]
        out_dtype = np.asarray(remap).dtype if remap is not None else pre
        return np.where(outside, np.asarray(a.get("ext_q", 0)).astype(out_dtype),
                        y).astype(out_dtype)

    def scratch_bytes(self, k, /, **attrs) -> int:
        return scratch_bytes(k.ins[0].shape, attrs, k.target)

    def emit(self, k, **attrs):
        return render_c(qresize_nest(k, **attrs))


def periodic(idx, w, bad, max_period: int = 8, min_cover: int = 8):
    """(s0, P, Q, n) when outputs s0 .. s0 + n*P - 1 of an axis repeat a pattern of P
    outputs whose taps move Q inputs per period with the same weights (an integer
    upsampling: P = 2, Q = 1 away from the edges), else None."""
    n_out, T = idx.shape
    best = None
    for P in range(1, max_period + 1):
        for s0 in range(0, min(n_out - P, 2 * P + 2)):
            m = (n_out - s0) // P
            if m < 2:
                continue
            Q = int(idx[s0 + P, 0] - idx[s0, 0])
            if Q < 0:
                continue
            bi = idx[s0:s0 + m * P].reshape(m, P, T)
            bw = w[s0:s0 + m * P].reshape(m, P, T)
            ok = (bi == bi[0] + Q * np.arange(m)[:, None, None]).all(axis=(1, 2)) & \
                (bw == bw[0]).all(axis=(1, 2)) & ~bad[s0:s0 + m * P].reshape(m, P).any(axis=1)
            nper = m if ok.all() else int(np.argmin(ok))
            if nper * P >= min_cover and (best is None or nper * P > best[1] * best[3]):
                best = (s0, P, Q, nper)
    return best


def scalar_fpu(target) -> bool:
    """Cortex-M and RISC-V cores: no vectors to fill, the taps' bytes read directly."""
    return target.is_arm or target.is_riscv


def row_plan(shape, a, target):
    """(outer tap combinations, input row length, P, periods) when the kernel runs
    its last axis through scratch rows (interpolation with a repeating last axis,
    for a target with vectors: x86 or portable C), else None. On the scalar FPUs
    of Cortex-M and RISC-V cores reading the taps' bytes directly takes fewer
    instructions (0.4 M fewer on the denoising U-Net's layer, Cortex-M4)."""
    if a.get("mode", "nearest") == "nearest" or not len(shape) or \
            scalar_fpu(target):
        return None
    _, taps = _axes(shape, a)
    L = len(shape) - 1
    if L not in taps:
        return None
    per = periodic(*[taps[L][j] for j in (1, 2, 3)])
    if per is None:
        return None
    n_c = int(np.prod([taps[d][0] for d in taps if d != L], dtype=np.int64))
    return n_c, int(shape[L]), per[1], per[3]


def scratch_bytes(shape, a, target) -> int:
    """The float input rows and int32 phase rows of row_plan (0: none)."""
    plan = row_plan(shape, a, target)
    if plan is None:
        return 0
    n_c, w_in, P, nper = plan
    return 4 * (n_c * w_in + P * nper)


DYADIC_MAX_BITS = 10   # 2^-m steps of the integer path's weights, over all axes


def dyadic_bits(w) -> int | None:
    """The least m with every weight of w a multiple of 2^-m (None: above DYADIC_MAX_BITS)."""
    w = np.asarray(w, np.float64)
    for m in range(DYADIC_MAX_BITS + 1):
        if np.array_equal(np.round(w * (1 << m)), w * (1 << m)):
            return m
    return None


def int_plan(taps, a) -> dict | None:
    """{axis: its weights' bits m} when QResize computes in integers (see the module's
    docstring): an interpolating mode, equal input and output scales, every axis' weights
    multiples of 2^-m with the sum of the m at most DYADIC_MAX_BITS; else None."""
    if a.get("mode", "nearest") == "nearest" or \
            np.float32(a["x_scale"]) != np.float32(a["y_scale"]):
        return None
    bits = {ax: dyadic_bits(w) for ax, (_, _, w, _) in taps.items()}
    if any(m is None for m in bits.values()) or sum(bits.values()) > DYADIC_MAX_BITS:
        return None
    return bits


def qresize_nest(k, *, float_io: bool = False, **a) -> list:
    """The kernel in the C writer's IR (the C emitter renders it, the LLVM backend
    lowers the same statements). float_io: the float32 Resize's kernel on float
    tensors (mtvm/ops/resize.py): the same taps, weights and sums, with no
    dequantization, rounding or remap (a = the Resize's attributes with roi, scales,
    sizes and extrapolation_value).

    One loop per output axis; a resized axis reads its taps' source offsets and
    weights from tables in its loop (the weights multiplied into the outer axes'
    product there). The last axis, when resized with a repeating pattern (integer
    upsampling), runs its inner part as a loop over periods with the taps' offsets
    and weights as constants: contiguous loads the C compiler vectorizes. The
    remap table is then applied to each finished row in place (a byte lookup
    would keep the row loop from vectorizing)."""
    x = k.ins[0]
    remap = k.ins[1] if len(k.ins) > 1 and k.ins[1] is not None and not float_io else None
    out_shape, taps = _axes(x.shape, a)
    r = len(out_shape)
    ist = [int(np.prod(x.shape[d + 1:], dtype=np.int64)) for d in range(r)]
    ost = [int(np.prod(out_shape[d + 1:], dtype=np.int64)) for d in range(r)]
    nearest = a.get("mode", "nearest") == "nearest"
    X, Y = param(x), param(k.out, output=True)
    out_t = Type(np.dtype(k.out.dtype).name)
    pre = np.dtype(np.float32) if float_io else pre_dtype(x.dtype, a)
    pre_t = Type(pre.name)
    ext_c = Const(float(np.float32(a.get("extrapolation_value", 0.0))), "float32") \
        if float_io else Const(int(a.get("ext_q", 0)), out_t.dtype)
    f = lambda c: Const(float(np.float32(c)), "float32")  # noqa: E731
    L = r - 1
    per = periodic(*[taps[L][j] for j in (1, 2, 3)]) if r and L in taps else None
    stmts, off_v, w_v, ext_v = [], {}, {}, {}
    for ax, (T, idx, w, bad) in taps.items():
        if bad.any():
            ext_v[ax] = Var(f"ext{ax}", Type("uint8"))
            stmts.append(Table(ext_v[ax], bad.astype(np.uint8)))
        if ax == L and per is not None and per[0] == 0 and per[1] * per[3] == out_shape[L]:
            continue   # the periodic loop covers the axis: no tables
        off = idx.astype(np.int64) * ist[ax]
        it = "uint32" if off.max(initial=0) < 2 ** 32 else "uint64"
        off_v[ax] = Var(f"off{ax}", Type(it))
        stmts.append(Table(off_v[ax], off))
        if not nearest:
            w_v[ax] = Var(f"wt{ax}", F32)
            stmts.append(Table(w_v[ax], w))

    plan = None if float_io else row_plan(x.shape, a, k.target)
    # the integer path (int_plan) where the taps' bytes are read directly: per axis the
    # weights times 2^m as int32 tables beside the float ones (a tie's float fallback)
    bits = int_plan(taps, a) if scalar_fpu(k.target) and not float_io else None
    iw_v, iw_of = {}, {}   # int32 weight tables; float weight variable -> its int32 one
    if bits is not None:
        for ax, wv in w_v.items():
            iw_v[ax] = Var(f"iwt{ax}", I32)
            stmts.append(Table(iw_v[ax], np.round(taps[ax][2].astype(np.float64) *
                                                  (1 << bits[ax])).astype(np.int32)))
    rows = None
    if plan is not None:
        n_c, w_in, P_, nper_ = plan
        k.scratch_bytes = scratch_bytes(x.shape, a, k.target)
        base = Var("scratch", Type("uint8", pointer=True))

        def at_bytes(dtype, nbytes):
            return Cast(Type(dtype, pointer=True), base + nbytes if nbytes else base)
        rows = {"d": lambda c: at_bytes("float32", 4 * c * w_in),
                "t": lambda ph: at_bytes("int32", 4 * (n_c * w_in + ph * nper_))}

    def remapped(v):   # remap's entry for v, an int32 value of type `pre`
        lo = qrange(pre)[0]
        return param(remap)[v + Const(-lo, "int32") if lo else v]

    def to_out(v):   # a value of type `pre` (remapped later) stored in the output
        if pre == np.dtype(out_t.dtype):
            return Cast(out_t, v) if not isinstance(v, Var) or v.type != out_t else v
        return Cast(out_t, Cast(pre_t, v))

    def dq(e):   # an 8-bit value dequantized as DequantizeLinear computes it
        if float_io:
            return e
        zp = int(a["x_zp"])
        q = Cast(I32, e)
        q = q - Const(zp, "int32") if zp > 0 else (q + Const(-zp, "int32") if zp else q)
        return Cast(F32, q) * f(a["x_scale"])

    def value(offs, ws, o, tag="", load=None, store=None, iws=None):
        """Statements computing output element o (before the remap) from its taps;
        load(off): a tap's dequantized value (default: from x), store(v): the
        statement storing the result (default: to the output); iws: the taps' int32
        weights (w 2^m) where the integer path applies."""
        if nearest:
            v = X[offs[0]]
            return [Assign(Y[o], v if np.dtype(x.dtype) == np.dtype(out_t.dtype) else to_out(v))]
        terms = []
        for off, w in zip(offs, ws):
            d = dq(X[off]) if load is None else load(off)
            terms.append(d if w is None else w * d)
        acc, v = Var("acc" + tag, F32), Var("v" + tag, F32)
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        if float_io:
            return [Decl(acc, total), Assign(Y[o], acc) if store is None else store(acc)]
        lo, hi = qrange(pre)
        in_float = [Decl(acc, total),
                    Decl(v, acc / f(a["y_scale"])),
                    *round_to_range(v, f(int(a["y_zp"])), lo, hi),
                    Assign(Y[o], to_out(Cast(I32, v))) if store is None else store(v)]
        if iws is None:
            return in_float
        # S = sum W (x - x_zp), the x_zp term apart (loop-invariant where the weights are)
        m = sum(bits.values())
        S, q = Var("S" + tag, I32), Var("q" + tag, I32)
        wsum = sum_of([iw if iw is not None else Const(1, "int32") for iw in iws])
        S_expr = sum_of([Cast(I32, X[off]) if iw is None else iw * Cast(I32, X[off])
                         for off, iw in zip(offs, iws)])
        if int(a["x_zp"]):
            S_expr = S_expr - Const(int(a["x_zp"]), "int32") * wsum
        rounded = Binary(">>", S + Const(1 << (m - 1), "int32"), Const(m, "int32")) if m else S
        in_ints = [Decl(q, rounded + Const(int(a["y_zp"]), "int32") if int(a["y_zp"]) else
                        rounded),
                   Assign(q, select(lt(q, Const(lo, "int32")), Const(lo, "int32"), q)),
                   Assign(q, select(gt(q, Const(hi, "int32")), Const(hi, "int32"), q)),
                   Assign(Y[o], to_out(q))]
        if not m:
            return [Decl(S, S_expr), *in_ints]
        # a tie (S / 2^m = k + 1/2): the float sum's rounding noise decides it, so the
        # float computation
        tie = eq(Binary("&", S, Const((1 << m) - 1, "int32")), Const(1 << (m - 1), "int32"))
        return [Decl(S, S_expr), If(tie, in_float, in_ints)]

    loops = [Var(f"i{d}") for d in range(r)]

    def step(d, i, offs, ws):
        """Declarations of axis d at index i: each tap combination's offset and weight."""
        decls, new_offs, new_ws = [], [], []
        if d in taps:
            T = taps[d][0]
            for off, w in zip(offs, ws):
                for t in range(T):
                    n = len(new_offs)
                    at = scaled(i, T) + t if t else scaled(i, T)
                    sv = Var(f"s{d}_{n}")
                    decls.append(Decl(sv, sum_of([off, Cast(Type(INDEX), off_v[d][at])])))
                    new_offs.append(sv)
                    if nearest:
                        new_ws.append(None)
                        continue
                    wv = Var(f"w{d}_{n}", F32)
                    decls.append(Decl(wv, w_v[d][at] if w is None else w * w_v[d][at]))
                    new_ws.append(wv)
                    if bits is not None:
                        iwv = Var(f"iw{d}_{n}", I32)
                        iw = iw_of.get(w.name) if isinstance(w, Var) else None
                        decls.append(Decl(iwv, iw_v[d][at] if iw is None else iw * iw_v[d][at]))
                        iw_of[wv.name] = iwv
        else:
            for c, (off, w) in enumerate(zip(offs, ws)):
                sv = Var(f"s{d}_{c}")
                decls.append(Decl(sv, sum_of([off, scaled(i, ist[d])])))
                new_offs.append(sv)
                new_ws.append(w)
        return decls, new_offs, new_ws

    def fill(o, n):   # n outputs from o: the extrapolation value
        e = Var("e")
        return [For(e, n, [Assign(Y[sum_of([o, e])], ext_c)])]

    def row(offs, ws, o):
        """The last axis: its outputs o .. o + n - 1, then the remap, then its
        extrapolated points."""
        i, n = loops[L], out_shape[L]

        def int_weights(sw):   # the int32 weights of float weight variables (or None)
            if bits is None:
                return None
            return [iw_of[w.name] if isinstance(w, Var) else None for w in sw]

        def one(i):
            decls, so, sw = step(L, i, offs, ws)
            return decls + value(so, sw, sum_of([o, i]), iws=int_weights(sw))
        out = []
        if per is None:
            out.append(For(i, n, one(i)))
        else:
            s0, P, Q, nper = per
            T, idx, w, _ = taps[L]
            j, body = Var("j"), []
            if rows is not None:
                # the input rows dequantized once into scratch (float), the phases'
                # results into int32 scratch: a loop of float lanes only, which
                # gcc vectorizes at the full vector width
                xx = Var("xx")
                for c, off in enumerate(offs):
                    out.append(For(xx, x.shape[L], [
                        Assign(rows["d"](c)[xx], dq(X[sum_of([off, xx])]))]))
            for ph in range(P):
                so, sw, siw = [], [], []
                for c, (off, wo) in enumerate(zip(offs, ws)):
                    for t in range(T):
                        if rows is None:
                            so.append(sum_of([off, Const(int(idx[s0 + ph, t]) * ist[L]),
                                              scaled(j, Q * ist[L])]))
                        else:
                            so.append((c, sum_of([Const(int(idx[s0 + ph, t])), scaled(j, Q)])))
                        wc = Const(float(w[s0 + ph, t]), "float32")
                        sw.append(None if nearest else (wc if wo is None else wo * wc))
                        if bits is not None:
                            ic = Const(int(round(float(w[s0 + ph, t]) * (1 << bits[L]))), "int32")
                            siw.append(ic if wo is None else iw_of[wo.name] * ic)
                at = sum_of([o, scaled(j, P), Const(s0 + ph)])
                if rows is None:
                    body += value(so, sw, at, tag=str(ph), iws=siw if bits is not None else None)
                else:
                    tp = rows["t"](ph)
                    body += value(so, sw, at, tag=str(ph),
                                  load=lambda cs: rows["d"](cs[0])[cs[1]],
                                  store=lambda v, tp=tp: Assign(tp[j], Cast(I32, v)))
            if s0:
                out.append(For(i, s0, one(i)))
            B = 1 << min(5, nper.bit_length() - 1)
            # (on the scalar cores of row_plan a plain loop: the block moved back
            # recomputes up to B - 1 periods)
            if B >= 8 and nper > B and not scalar_fpu(k.target):
                # Blocks of B periods, the last one moved back to end at nper (its
                # outputs computed twice, the same values): every block a full
                # vector loop, no scalar remainder (short rows spent most of their
                # time in it).
                jb, j0 = Var("jb"), Var("j0")
                out.append(For(jb, nper, [
                    Decl(j0, select(le(jb + B, nper), jb, Const(nper - B))),
                    For(j, j0 + B, body, begin=j0)], step=B))
            else:
                out.append(For(j, nper, body))
            if rows is not None:   # the phases interleaved into the output row, remapped
                out.append(For(j, nper, [
                    Assign(Y[sum_of([o, scaled(j, P), Const(s0 + ph)])],
                           remapped(rows["t"](ph)[j]) if remap is not None else
                           to_out(rows["t"](ph)[j])) for ph in range(P)]))
            if s0 + nper * P < n:
                out.append(For(i, n, one(i), begin=Const(s0 + nper * P)))
        if remap is not None:
            # the remap as a last pass over the row's bytes, but for the periods the
            # interleave above has remapped already (its int32 values, not re-read)
            e = Var("e")
            at = Y[sum_of([o, e])]
            v = Cast(I32, at if pre == np.dtype(out_t.dtype) else Cast(pre_t, at))
            spans = [(0, n)] if per is None or rows is None else \
                [(0, per[0]), (per[0] + per[3] * per[1], n)]
            out += [For(e, end, [Assign(at, remapped(v))], begin=Const(begin) if begin else 0)
                    for begin, end in spans if end > begin]
        if L in ext_v:
            out.append(For(i, n, [If(ne(ext_v[L][i], Const(0, "uint8")),
                                     [Assign(Y[sum_of([o, i])], ext_c)])]))
        return out

    def level(d, offs, ws, o):
        if d == L:
            return row(offs, ws, o)
        i = loops[d]
        oo = Var(f"o{d}")
        decls, new_offs, new_ws = step(d, i, offs, ws)
        body = [Decl(oo, sum_of([o, scaled(i, ost[d])]))]
        rest = decls + level(d + 1, new_offs, new_ws, oo)
        if d in ext_v:   # a slab outside the input along axis d
            rest = [If(ne(ext_v[d][i], Const(0, "uint8")), fill(oo, ost[d]), rest)]
        return [For(i, out_shape[d], body + rest)]

    if int(np.prod(out_shape, dtype=np.int64)) == 0:
        return stmts
    if r == 0:
        return stmts + value([Const(0)], [None], Const(0)) + (
            [] if remap is None else [Assign(Y[Const(0)], param(remap)[
                Cast(I32, Cast(pre_t, Y[Const(0)])) + Const(-qrange(pre)[0], "int32")])])
    return stmts + level(0, [Const(0)], [None], Const(0))


__all__ = ["QResize", "qresize_nest", "dq_table", "periodic", "row_plan", "scratch_bytes",
           "RESIZE_ATTRS"]
