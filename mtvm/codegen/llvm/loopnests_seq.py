"""LLVM-backend loop nests of the recurrent and upsampling ops: RNN, GRU, LSTM,
ConvTranspose, Resize and Upsample (the C writer's IR, as loopnests.py).

RNN / GRU / LSTM: every attribute the C emitter (mtvm/ops/recurrent.py)
supports -- directions, layout, sequence_lens, initial states, peepholes,
input_forget, linear_before_reset, clip, activations with alpha/beta -- with
the state in scratch memory (so Y may be unused). Each direction and batch
entry runs its sequence in chunks of CHUNK steps: first the input projections
of the chunk's steps (W x + biases, all gate rows side by side) as one product
in register tiles of 4 steps, then step by step the recurrent product R h
(all gate rows, from the projection) into a gate buffer, and the elementwise
gate math, which updates the hidden (and cell) state in place and writes Y.
GRU without linear_before_reset first finishes z and r, then R_h (r * h);
with it, the h gate's W_h x + Wb_h stay in the projection and R_h h + Rb_h
go to the gate buffer. The products run in register tiles of a few vectors
of gate rows (explicit vectors on x86: one hidden value splat, a vector of
weights per tile column) or, without vectors (Cortex-M), of 16 scalars; the
constant W and R are re-laid out as panels, each tile's weights for one input
contiguous. Sums are added in the order of the inputs as the C emitter does,
except a one-row tile of fewer vectors than the FMA pipeline keeps busy, which
keeps a few partial sums over interleaved inputs. The gates' tanh and sigmoid
in float are the kernel library's (mtvm_activation_f32.h: a rational tanh, no
libm), as in C. Both directions share one run-time loop when their
activations agree; an initial state that is a constant zero is no state.

ConvTranspose (any number of spatial axes, groups, strides, dilations, pads,
output_padding, output_shape, auto_pad) in scatter form per output plane: the
plane is set to the bias, each input channel adds w * x for every kernel tap
over the input range whose output falls inside (constant bounds, computed
here), and the fused tail then finishes the plane. The taps of the last axis
share one loop where they all land (for a kernel the size of the stride, as a
U-Net's up-convolution, their stores then interleave into contiguous runs,
which LLVM vectorizes).

Resize / Upsample: the C emitter's per-axis tables (mtvm/ops/resize.py: input
offsets, weights and extrapolated rows, from onnx.reference's coefficients)
as static const tables; every mode and coordinate_transformation_mode. QResize
(the QDQ pass's 8-bit Resize): the C emitter's own IR.
"""
from __future__ import annotations

import itertools

import numpy as np

from ...ops.base import get_op
from ...ops.conv_transpose import _geometry
from ...ops.recurrent import _activations
from ...ops.resize import sparse_taps
from ..cwriter import (
    ArrayDecl,
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
    call,
    eq,
    ge,
    gt,
    kernel_dtype,
    le,
    lt,
    ne,
    or_,
    param,
    scaled,
    select,
    sum_of,
)
from .cparse import NotLowerable
from .loopnests import I64, _finish, _float_only, _split, _vector_lanes, nest, prod, scratch_ptr
from .vector import Lane, Splat, VecLoad, VecType

INDEX = Type("index")

# mtvm_tanh_f32's rational function (c_runtime/kernels/generic/mtvm_activation_f32.h)
_TANH_P = (1.37056677e-08, 2.08651527e-05, 3.51127703e-03, 1.33942828e-01, 1.0)
_TANH_Q = (7.92102014e-07, 3.31120042e-04, 2.59368103e-02, 4.67276037e-01, 1.0)


class _Scalar:
    """Scalar code of one float dtype: constants, fresh locals, clip and the
    recurrent activations (as the C emitter's helpers compute them)."""

    def __init__(self, dt: str):
        self.dt, self.n = dt, 0

    def c(self, v) -> Const:
        return Const(float(v), self.dt)

    def let(self, out: list, base: str, value) -> Var:
        """A fresh local holding value (names end in a number: no clash with the nest's)."""
        self.n += 1
        v = Var(f"{base}{self.n}", Type(self.dt))
        out.append(Decl(v, value))
        return v

    def libm(self, name: str, *args) -> Expr:
        return call(name + ("f" if self.dt == "float32" else ""), *args, type=Type(self.dt))

    def clip(self, v: Expr, clip) -> Expr:
        if clip is None:
            return v
        c = self.c(clip)
        return select(lt(v, self.c(-clip)), self.c(-clip), select(gt(v, c), c, v))

    def tanh(self, out: list, x: Var) -> Expr:
        if self.dt != "float32":
            return self.libm("tanh", x)
        # mtvm_tanh_f32: x P(x^2) / Q(x^2), which stays in [-1, 1] on [-8, 8] (every float
        # checked: mtvm_activation_f32.h), and +-1 exactly beyond; NaN stays NaN
        x2 = self.let(out, "tx", x * x)
        p, q = self.c(_TANH_P[0]), self.c(_TANH_Q[0])
        for a, b in zip(_TANH_P[1:], _TANH_Q[1:]):
            p, q = p * x2 + self.c(a), q * x2 + self.c(b)
        t = self.let(out, "tr", x * p / q)
        one = self.c(1)
        return select(ne(x, x), x, select(gt(x, self.c(8)), one,
                                          select(lt(x, self.c(-8)), -one, t)))

    def act(self, out: list, spec, pre: Expr) -> Expr:
        """Activation (name, alpha, beta) of pre (recurrent._ACTS, in the dtype)."""
        name, a, b = spec
        v = self.let(out, "av", pre)
        z, one = self.c(0), self.c(1)
        A, Bc = self.c(a or 0), self.c(b or 0)
        if name == "relu":
            return select(lt(v, z), z, v)
        if name == "tanh":
            return self.tanh(out, v)
        if name == "sigmoid":
            if self.dt == "float32":   # mtvm_sigmoid_f32: (1 + tanh(x / 2)) / 2
                return self.c(0.5) + self.c(0.5) * self.tanh(out, self.let(out, "sh",
                                                                           self.c(0.5) * v))
            return one / (one + self.libm("exp", -v))
        if name == "affine":
            return A * v + Bc
        if name == "leakyrelu":
            return select(ge(v, z), v, A * v)
        if name == "thresholdedrelu":
            return select(gt(v, A), v, z)
        if name == "scaledtanh":
            return A * self.tanh(out, self.let(out, "st", Bc * v))
        if name == "hardsigmoid":
            u = self.let(out, "hs", A * v + Bc)
            return select(lt(u, z), z, select(gt(u, one), one, u))
        if name == "elu":
            return select(ge(v, z), v, A * self.libm("expm1", v))
        if name == "softsign":
            return v / (one + self.libm("fabs", v))
        if name == "softplus":
            return self.libm("log1p", self.libm("exp", v))
        raise NotLowerable(f"activation {name}")


# -- RNN, GRU, LSTM -------------------------------------------------------------------------

CHUNK = 4     # time steps whose input projections scratch holds at once
CHAINS = 8    # independent multiply-adds that keep an x86 core's FMA units busy
SEGMENT = 16  # scratch segments start at multiples of 16 elements


def _segments(op: str, gates: int, H: int, S: int, lbr: bool) -> tuple[dict, int]:
    """Offsets (in elements) of the scratch segments and their total: the input
    projections of a chunk of steps [chunk][gates * H], the gate pre-activations of
    one step [gates * H], the hidden state [H], LSTM's cell state [H], GRU's r * h [H]."""
    GH = gates * H
    sizes = [("xw", min(S, CHUNK) * GH), ("gt", GH), ("hs", H)]
    if op == "LSTM":
        sizes.append(("cs", H))
    if op == "GRU" and not lbr:
        sizes.append(("rh", H))
    offs, pos = {}, 0
    for name, n in sizes:
        offs[name] = pos
        pos += -(-n // SEGMENT) * SEGMENT
    return offs, pos


def _recurrent_scratch(op: str, gates: int):
    def scratch(k, *, hidden_size, layout=0, linear_before_reset=0, **_attrs) -> int:
        x = k.ins[0]
        S = x.shape[1] if layout else x.shape[0]
        _, n = _segments(op, gates, int(hidden_size), S, op == "GRU" and bool(linear_before_reset))
        return n * np.dtype(x.dtype).itemsize
    return scratch


def _blocks(start: int, count: int, width: int, make) -> list:
    """make(n0) for n0 = start + i * width, i < count (a loop when count > 1)."""
    if count > 1:
        nb = Var("nb")
        return [For(nb, count, make(nb * width + start if start else nb * width))]
    return make(Const(start))


def _recurrent(k, op: str, gates: int, *, hidden_size, direction="forward", layout=0,
               activations=None, activation_alpha=None, activation_beta=None, clip=None,
               linear_before_reset=0, input_forget=0, output_sequence=0):
    dt = kernel_dtype(k)
    if dt not in ("float32", "float64"):
        raise NotLowerable(f"{op} on {dt}")
    if k.node.tail:
        raise NotLowerable(f"{op} with a fused tail")
    x, w, r = k.ins[:3]
    bias, seqlens, h0, c0, peep = (list(k.ins) + [None] * 8)[3:8]
    # An initial state known to be zero (PyTorch exports expand a constant 0) is none.
    h0, c0 = (None if b is not None and b.const is not None and not np.any(b.const) else b
              for b in (h0, c0))
    Y, YH, YC = (list(k.outs) + [None] * 3)[:3]
    if op != "LSTM":
        YC = None
    H = int(hidden_size)
    GH = gates * H
    B, S, I = x.shape if layout else (x.shape[1], x.shape[0], x.shape[2])
    dirs = 2 if direction == "bidirectional" else 1
    A = _activations(op, dirs, activations, activation_alpha, activation_beta)
    lbr = op == "GRU" and bool(linear_before_reset)
    offs, _ = _segments(op, gates, H, S, lbr)
    CH = min(S, CHUNK)
    es = np.dtype(dt).itemsize
    E = _Scalar(dt)
    zero, one = E.c(0), E.c(1)
    X, Wp, Rp = param(x), param(w), param(r)
    Bp = param(bias) if bias is not None else None
    Yp = param(Y, output=True) if Y is not None else None
    YHp = param(YH, output=True) if YH is not None else None
    YCp = param(YC, output=True) if YC is not None else None
    bv, j, q = Var("b"), Var("j"), Var("q")
    tt = Var("tt")

    # Scratch: typed pointers to its segments.
    ptr = {name: Var(name, Type(dt, pointer=True)) for name in offs}
    top = [Decl(ptr[name], scratch_ptr(dt, off * es)) for name, off in offs.items()]
    xw, ga, hs = ptr["xw"], ptr["gt"], ptr["hs"]
    cs, rh = ptr.get("cs"), ptr.get("rh")

    # W and R, when constant, re-laid out as panels ([dirs][gates * H * (I or H)]): the
    # weights of a tile's gate rows n0 .. n0 + w - 1 for input q at K n0 + q w + (n - n0),
    # so a tile reads one contiguous run per input (the products record their tiles in
    # `panels`; the tables are built from them at the end).
    mats, panels = {}, {"W": set(), "R": set()}
    for name, buf, K, P in (("W", w, I, Wp), ("R", r, H, Rp)):
        tab = Var(name.lower() + "t", Type(dt)) if buf.const is not None else None
        mats[name] = (tab, K, P, buf)
    L = _vector_lanes(k.target) * 4 // es
    ACCS = 16 if _vector_lanes(k.target) >= 16 else 8   # vector accumulators of a tile
    TILE_ROWS = {"W": 4, "R": 1}   # rows (time steps) of a product's tiles

    dv = Var("d")
    one_loop = dirs == 2 and A[0] == A[1]

    def direction_nest(d) -> For:
        """The loop over the batch of direction d (an int, or the loop variable)."""
        if one_loop:
            rev = eq(dv, Const(1))
        else:
            rev = direction == "reverse" or (direction == "bidirectional" and d == 1)
        acts = A[0 if one_loop else d]
        f_act = acts[0]
        g_act = acts[1] if len(acts) > 1 else None
        h_act = acts[2] if len(acts) > 2 else None

        def at(stride, extra=0):
            """d * stride + extra: the offset of direction d's part."""
            if isinstance(d, int):
                return d * stride + extra if isinstance(extra, int) else \
                    sum_of([d * stride, extra])
            return sum_of([scaled(d, stride), extra])

        def pick(cond, a, b):
            if isinstance(cond, bool):
                return a if cond else b
            return select(cond, a, b)

        def y_at(t, jj):
            if layout:
                return sum_of([scaled(bv, S * dirs * H), scaled(t, dirs * H), at(H), jj])
            return sum_of([scaled(t, dirs * B * H), at(B * H), scaled(bv, H), jj])

        def st_at(jj):
            if layout:
                return sum_of([scaled(bv, dirs * H), at(H), jj])
            return sum_of([at(B * H), scaled(bv, H), jj])

        def x_at(t, qq):
            if layout:
                return sum_of([scaled(bv, S * I), scaled(t, I), qq])
            return sum_of([scaled(t, B * I), scaled(bv, I), qq])

        def bias_init(mode, n, lanes):
            """Wb + Rb ("both"), Wb ("wb") or Rb ("rb") of gate rows n.. (a vector of
            lanes, or one value for lanes None); zero without B."""
            if Bp is None:
                return Splat(zero, lanes) if lanes else zero
            idx = []
            if mode in ("both", "wb"):
                idx.append(sum_of([at(2 * GH), n]))
            if mode in ("both", "rb"):
                idx.append(sum_of([at(2 * GH, GH), n]))
            loads = [VecLoad(Bp, i, lanes) if lanes else Bp[i] for i in idx]
            return loads[0] if len(loads) == 1 else loads[0] + loads[1]

        def product(which, rows, n_lo, n_hi, xv, init, dst) -> list:
            """dst(r, n) = init(r, n, lanes) + sum_q xv(r, q) * M[n][q] for rows r <
            rows and gate rows n in [n_lo, n_hi) of M (W or R of direction d):
            register tiles of rows x a few vectors of gate rows (x86, M constant),
            else of scalars; the tiles of a matrix are the same whatever `rows` (its
            panels). The terms are added in the order of q, but for a single row in
            fewer vectors than the FMA pipeline has room for: then `parts` partial
            sums over interleaved q (q = parts * i + p), added pairwise."""
            tab, K, P, _ = mats[which]
            tile_rows = TILE_ROWS[which]

            def w_at(qq, n0, width, c, lanes):
                """M[n0 + c][qq] (lanes of them with lanes) of the tile at n0, `width` wide."""
                if tab is not None:
                    idx = sum_of([at(K * GH), scaled(n0, K), scaled(qq, width), c])
                    return VecLoad(tab, idx, lanes) if lanes else tab[idx]
                return P[sum_of([at(GH * K), (n0 + c if c else n0) * K, qq])]

            def tile(n0, nm, lanes):
                width = lanes or 1
                vt = VecType(dt, lanes=lanes) if lanes else Type(dt)
                pre = "pv" if lanes else "ps"
                parts = 1
                if lanes and rows == 1 and nm < CHAINS:
                    parts = min(4, -(-CHAINS // nm), K // 2) or 1
                accs = [[[Var(f"{pre}{rr}_{a}_{p}", vt) for a in range(nm)]
                         for rr in range(rows)] for p in range(parts)]
                xs = [Var(f"px{rr}", Type(dt)) for rr in range(rows)]
                cols = [n0 + a * width if a else n0 for a in range(nm)]
                body = [Decl(accs[p][rr][a], init(rr, cols[a], lanes) if p == 0 else
                             Splat(zero, lanes))
                        for p in range(parts) for rr in range(rows) for a in range(nm)]

                def terms(qq, p):
                    out = [Decl(xs[rr], xv(rr, qq)) for rr in range(rows)]
                    for a in range(nm):
                        wv = w_at(qq, n0, nm * width, a * width, lanes)
                        out += [Assign(accs[p][rr][a], xs[rr] * wv, "+=") for rr in range(rows)]
                    return out
                if parts == 1:
                    body.append(For(q, K, terms(q, 0)))
                else:
                    qb = Var("qb")
                    body.append(For(qb, K // parts, [
                        Block(terms(qb * parts + p if p else qb * parts, p))
                        for p in range(parts)]))
                    if K % parts:
                        body.append(For(q, K, terms(q, 0), begin=Const(K // parts * parts)))
                for rr in range(rows):
                    for a in range(nm):
                        total = [accs[p][rr][a] for p in range(parts)]
                        while len(total) > 1:
                            total = [total[i] + total[i + 1] if i + 1 < len(total) else total[i]
                                     for i in range(0, len(total), 2)]
                        if lanes:
                            body += [Assign(dst(rr, cols[a] + i if i else cols[a]),
                                            Lane(total[0], i)) for i in range(lanes)]
                        else:
                            body.append(Assign(dst(rr, cols[a]), total[0]))
                return [Block(body)]

            out = []

            def blocks(start, count, nm, lanes):
                panels[which].add((start, count, nm * (lanes or 1)))
                return _blocks(start, count, nm * (lanes or 1),
                               lambda n0: tile(n0, nm, lanes))
            nvec = (n_hi - n_lo) // L if L and tab is not None else 0
            if nvec:   # blocks of about equal size within the register budget
                most = max(1, ACCS // tile_rows)
                per = -(-nvec // -(-nvec // most))
                for first, count, nv in _split(nvec, per):
                    out += blocks(n_lo + first * L, count, nv, L)
            lo = n_lo + nvec * L
            # Scalar tiles: 16 accumulators for one row (an M-profile FPU has 32
            # registers), 4 x 4 for rows of 4.
            for first, count, nm in _split(n_hi - lo, 16 if tile_rows == 1 else 4):
                out += blocks(lo + first, count, nm, None)
            return out

        # The input projections (W x + biases) of the gate rows: ranges of rows that
        # start from the same biases (GRU with linear_before_reset: Rb_h is added to
        # R_h h inside r * (...), not here).
        proj_ranges = [(0, 2 * H, "both"), (2 * H, GH, "wb")] if lbr else [(0, GH, "both")]

        def projection(s0, m, ln) -> list:
            """xw[i] = W x_t + biases for the steps s0 + i, i < m (rows of 4, then 1)."""
            def rows_at(sr, rows):
                tx = [Var(f"tx{rr}") for rr in range(rows)]
                decls = []
                for rr in range(rows):
                    s = sum_of([s0, sr, rr])
                    decls.append(Decl(tx[rr], pick(rev, ln - 1 - s, s)))
                out = decls
                for n_lo, n_hi, mode in proj_ranges:
                    out += product("W", rows, n_lo, n_hi,
                                   lambda rr, qq: X[x_at(tx[rr], qq)],
                                   lambda rr, n, lanes, mode=mode: bias_init(mode, n, lanes),
                                   lambda rr, n: xw[sum_of([scaled(sr + rr if rr else sr, GH),
                                                            n])])
                return [Block(out)]
            s1 = Var("s1")
            if CH < 4:
                return [For(s1, m, rows_at(s1, 1))]
            sr = Var("sr")
            return [For(sr, m, [If(le(sr + 4, m), rows_at(sr, 4),
                                   [For(s1, m, rows_at(s1, 1), begin=sr)])], step=4)]

        def step(s0, si, ln) -> list:
            """Step s0 + si: its gates from xw row si and R h, then the new state."""
            s = sum_of([s0, si])
            out = [Decl(tt, pick(rev, ln - 1 - s, s))]
            row = scaled(si, GH)

            def from_xw(rr, n, lanes):
                idx = sum_of([row, n])
                return VecLoad(xw, idx, lanes) if lanes else xw[idx]

            def to_gt(rr, n):
                return ga[n]

            def h_of(rr, qq):
                return hs[qq]

            def xw_at(g, jj):
                return xw[sum_of([row, g * H, jj])]

            def store_h(per, hn):
                per.append(Assign(hs[j], hn))
                if Yp is not None:
                    per.append(Assign(Yp[y_at(tt, j)], hn))

            if op == "RNN":
                out += product("R", 1, 0, GH, h_of, from_xw, to_gt)
                per = []
                hn = E.let(per, "hn", E.act(per, f_act, E.clip(ga[j], clip)))
                store_h(per, hn)
                out.append(For(j, H, per))
            elif op == "GRU" and lbr:
                # z, r: W x + R h + biases; h~ = g(W_h x + Wb_h + r * (R_h h + Rb_h)).
                out += product("R", 1, 0, 2 * H, h_of, from_xw, to_gt)
                out += product("R", 1, 2 * H, GH, h_of,
                               lambda rr, n, lanes: bias_init("rb", n, lanes), to_gt)
                per = []
                z = E.let(per, "z", E.act(per, f_act, E.clip(ga[j], clip)))
                rg = E.let(per, "r", E.act(per, f_act, E.clip(ga[sum_of([H, j])], clip)))
                hc = E.let(per, "hc", E.act(per, g_act, E.clip(
                    xw_at(2, j) + rg * ga[sum_of([2 * H, j])], clip)))
                hn = E.let(per, "hn", (one - z) * hc + z * hs[j])
                store_h(per, hn)
                out.append(For(j, H, per))
            elif op == "GRU":
                # z, r: W x + R h + biases; h~ = g(W_h x + R_h (r * h) + Wb_h + Rb_h).
                out += product("R", 1, 0, 2 * H, h_of, from_xw, to_gt)
                per = []
                rg = E.let(per, "r", E.act(per, f_act, E.clip(ga[sum_of([H, j])], clip)))
                per.append(Assign(rh[j], rg * hs[j]))
                out.append(For(j, H, per))
                out += product("R", 1, 2 * H, GH, lambda rr, qq: rh[qq], from_xw, to_gt)
                per = []
                z = E.let(per, "z", E.act(per, f_act, E.clip(ga[j], clip)))
                hc = E.let(per, "hc", E.act(per, g_act, E.clip(ga[sum_of([2 * H, j])], clip)))
                hn = E.let(per, "hn", (one - z) * hc + z * hs[j])
                store_h(per, hn)
                out.append(For(j, H, per))
            else:   # LSTM: gate rows i, o, f, c; peepholes i, o, f
                out += product("R", 1, 0, GH, h_of, from_xw, to_gt)
                per = []

                def peep_of(prow):
                    return param(peep)[sum_of([at(3 * H, prow * H), j])]
                cp = E.let(per, "cp", cs[j])
                ai = ga[j]
                pi = ai + peep_of(0) * cp if peep is not None else ai
                ig = E.let(per, "ig", E.act(per, f_act, E.clip(pi, clip)))
                if input_forget:
                    fg = E.let(per, "fg", one - ig)
                else:
                    af = ga[sum_of([2 * H, j])]
                    pf = af + peep_of(2) * cp if peep is not None else af
                    fg = E.let(per, "fg", E.act(per, f_act, E.clip(pf, clip)))
                gc = E.act(per, g_act, E.clip(ga[sum_of([3 * H, j])], clip))
                cn = E.let(per, "cn", fg * cp + ig * gc)
                ao = ga[sum_of([H, j])]
                po = ao + peep_of(1) * cn if peep is not None else ao
                og = E.let(per, "og", E.act(per, f_act, E.clip(po, clip)))
                hn = E.let(per, "hn", og * E.act(per, h_act, cn))
                per.append(Assign(cs[j], cn))
                store_h(per, hn)
                out.append(For(j, H, per))
            return out

        pair = [For(j, H, [Assign(hs[j], param(h0)[st_at(j)] if h0 is not None else zero)])]
        if op == "LSTM":
            pair.append(For(j, H, [Assign(cs[j], param(c0)[st_at(j)] if c0 is not None
                                          else zero)]))
        si = Var("si")
        if seqlens is not None:   # clamped to [0, S], as the C emitter
            lr, ln = Var("lr", I64), Var("ln")
            pair += [Decl(lr, Cast(I64, param(seqlens)[bv])),
                     Decl(ln, Cast(INDEX, select(lt(lr, Const(0, "int64")), Const(0, "int64"),
                                                 select(gt(lr, Const(S, "int64")),
                                                        Const(S, "int64"), lr))))]
        else:
            ln = Const(S)
        if seqlens is None and S <= CH:
            s0 = Const(0)
            pair += projection(s0, Const(S), ln)
            pair.append(For(si, S, step(s0, si, ln)))
        else:   # chunks of CH steps: their projections, then the steps
            s0, m = Var("s0"), Var("m")
            rest = ln - s0
            pair.append(For(s0, ln, [Decl(m, select(lt(rest, Const(CH)), rest, Const(CH))),
                                     *projection(s0, m, ln), For(si, m, step(s0, si, ln))],
                            step=CH))
        # Y_h, Y_c: the last state (0 for a sequence of length 0, as the C emitter).
        for o, st in ((YHp, hs), (YCp, cs)):
            if o is None:
                continue
            copy = [For(j, H, [Assign(o[st_at(j)], st[j])])]
            if seqlens is not None:
                pair.append(If(gt(ln, Const(0)), copy, [For(j, H, [Assign(o[st_at(j)], zero)])]))
            else:
                pair += copy
        if seqlens is not None and Yp is not None:   # Y is 0 past a sequence's length
            tz = Var("tz")
            pair.append(For(tz, S, [For(j, H, [Assign(Yp[y_at(tz, j)], zero)])], begin=ln))
        return For(bv, B, pair)

    if one_loop:
        body = [For(dv, 2, [direction_nest(dv)])]
    else:
        body = [direction_nest(d) for d in range(dirs)]
    tables = []
    for name, (tab, K, _, buf) in mats.items():
        if tab is None:
            continue
        m = np.asarray(buf.const).reshape(dirs, GH, K)
        tiles = sorted((start + i * width, width) for start, count, width in panels[name]
                       for i in range(count))
        assert [n0 for n0, _ in tiles] == list(itertools.accumulate(
            [0] + [wd for _, wd in tiles[:-1]])) and sum(wd for _, wd in tiles) == GH, tiles
        tables.append(Table(tab, np.concatenate(
            [m[:, n0:n0 + wd, :].transpose(0, 2, 1).reshape(dirs, -1) for n0, wd in tiles],
            axis=1)))
    return tables + top + body


@nest("RNN", scratch=_recurrent_scratch("RNN", 1))
def rnn(k, **attrs):
    return _recurrent(k, "RNN", 1, **attrs)


@nest("GRU", scratch=_recurrent_scratch("GRU", 3))
def gru(k, **attrs):
    return _recurrent(k, "GRU", 3, **attrs)


@nest("LSTM", scratch=_recurrent_scratch("LSTM", 4))
def lstm(k, **attrs):
    return _recurrent(k, "LSTM", 4, **attrs)


# -- ConvTranspose ----------------------------------------------------------------------------

@nest("ConvTranspose")
def conv_transpose(k, **attrs):
    _float_only(k)
    x, w = k.ins[0], k.ins[1]
    bias = k.ins[2] if len(k.ins) > 2 else None
    out, pb, st, dil, ks = _geometry(x.shape, w.shape, attrs)
    D = len(out)
    G = attrs.get("group", 1)
    N, Ci = x.shape[:2]
    Cog = w.shape[1]
    Cig, Co = Ci // G, Cog * G
    ins = list(x.shape[2:])
    dt = kernel_dtype(k)
    X, W, Y = param(x), param(w), param(k.out, output=True)
    plane, in_plane, taps = prod(out), prod(ins), prod(ks)
    o_str = [prod(out[a + 1:]) for a in range(D)]
    i_str = [prod(ins[a + 1:]) for a in range(D)]
    k_str = [prod(ks[a + 1:]) for a in range(D)]
    nv, gv, mv, icv, pv = Var("n"), Var("g"), Var("m"), Var("ic"), Var("p")
    iv = [Var(f"i{a}") for a in range(D)]
    oc = gv * Cog + mv if G > 1 else mv
    ic_abs = gv * Cig + icv if G > 1 else icv
    y_base = (nv * Co + oc) * plane
    x_base = (nv * Ci + ic_abs) * in_plane
    w_base = (ic_abs * Cog + mv) * taps

    def span(a, t):
        """Input range [lo, hi) of axis a whose outputs o = i * stride + t * dilation -
        pad_begin of tap t fall inside [0, out), and that offset."""
        off = t * dil[a] - pb[a]
        lo = max(0, -(off // st[a]))
        hi = min(ins[a], (out[a] - 1 - off) // st[a] + 1) if out[a] - 1 - off >= 0 else 0
        return lo, hi, off

    def offset(base, terms, const):
        e = base + sum_of(terms)
        return e + const if const >= 0 else e - (-const)

    last = D - 1

    def scatter(U: int) -> list:
        """The taps of input channels ic .. ic + U - 1 added to the plane: each output
        loaded and stored once for the U channels, their terms added in channel order."""
        blocks = []
        for lead in itertools.product(*(range(n) for n in ks[:last])):
            spans = [span(a, t) for a, t in enumerate(lead)]
            if any(hi <= lo for lo, hi, _ in spans):
                continue
            kws = [(kw, *span(last, kw)) for kw in range(ks[last])]
            kws = [t for t in kws if t[2] > t[1]]
            if not kws:
                continue
            lead_const = sum(off * o_str[a] for a, (_, _, off) in enumerate(spans))
            y_lead = [scaled(iv[a], st[a] * o_str[a]) for a in range(last)]
            x_at = sum_of([scaled(iv[a], i_str[a]) for a in range(D)])
            w_lead = sum(t * k_str[a] for a, t in enumerate(lead))
            xvs = [Var(f"xv{u}", Type(dt)) for u in range(U)]
            wvs = {(kw, u): Var(f"wv{kw}_{u}", Type(dt)) for kw, *_ in kws for u in range(U)}

            def adds(group):
                """y[...] += w * x of the taps (kw, off) at input index iv, channel by channel."""
                stmts = []
                for kw, off in group:
                    y = Y[offset(y_base, y_lead + [scaled(iv[last], st[last])], lead_const + off)]
                    v = y
                    for u in range(U):
                        v = v + wvs[(kw, u)] * xvs[u]
                    stmts.append(Assign(y, v))
                return stmts

            # Taps of the last axis whose outputs lie within one stride share a loop (x
            # loaded once, their stores interleave into a contiguous run: vectorizable; for
            # a kernel the size of the stride that is all of them), over the inputs where
            # all of them land; each alone where only some do.
            runs = []
            for grp in _stride_groups(kws, st[last]):
                lo_all, hi_all = max(t[1] for t in grp), min(t[2] for t in grp)
                if lo_all < hi_all:
                    runs.append((lo_all, hi_all, [(kw, off) for kw, _, _, off in grp]))
                    for kw, lo, hi, off in grp:
                        runs += [(lo, lo_all, [(kw, off)]), (hi_all, hi, [(kw, off)])]
                else:
                    runs += [(lo, hi, [(kw, off)]) for kw, lo, hi, off in grp]
            loads = [Decl(xvs[u], X[x_base + u * in_plane + x_at] if u else X[x_base + x_at])
                     for u in range(U)]
            inner = [For(iv[last], hi, [*loads, *adds(group)], begin=Const(lo))
                     for lo, hi, group in runs if hi > lo]
            for a in reversed(range(last)):
                inner = [For(iv[a], spans[a][1], inner, begin=Const(spans[a][0]))]
            weights = [Decl(wvs[(kw, u)], W[w_base + (u * Cog * taps + w_lead + kw)])
                       for kw, *_ in kws for u in range(U)]
            blocks.append(Block([*weights, *inner]))
        return blocks

    U = min(4, Cig)
    main = scatter(U)
    init = Const(0, dt) if bias is None else param(bias)[oc]
    per_plane = [For(pv, plane, [Assign(Y[y_base + pv], init)])]
    if main:   # channels in blocks of U, then the last Cig % U one by one
        per_plane.append(For(icv, Cig // U * U, main, step=U))
        if Cig % U:
            per_plane.append(For(icv, Cig, scatter(1), begin=Const(Cig // U * U)))
    per_plane.append(For(pv, plane, _finish(k, Y, y_base + pv, lambda acc: acc, oc)))
    body = [For(mv, Cog, per_plane)]
    if G > 1:
        body = [For(gv, G, body)]
    return [For(nv, N, body)]


def _stride_groups(taps, stride: int) -> list[list]:
    """Taps (kw, lo, hi, offset) in groups whose offsets lie within one stride (in
    order of offset): no two of a group write the same output in different
    iterations of the loop over the input."""
    groups = []
    for t in sorted(taps, key=lambda t: t[3]):
        if groups and t[3] - groups[-1][0][3] < stride:
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


# -- Resize, Upsample -------------------------------------------------------------------------

def _resize(k, roi, scales, sizes, attrs) -> list:
    x = k.ins[0]
    if k.node.tail:
        raise NotLowerable(f"{k.node.op} with a fused tail")
    p, mats = get_op(k.node.op)._plan_and_mats(x.shape, roi, scales, sizes, attrs)
    dt = np.dtype(x.dtype).name
    acc_t = "float64" if dt == "float64" else "float32"
    out_shape = [o for _, o, _, _ in p]
    ist = x.strides
    nearest = attrs.get("mode", "nearest") == "nearest"
    tables, taps, outside = [], {}, []
    loops = [Var(f"i{a}") for a in range(len(out_shape))]
    tv = [Var(f"t{a}") for a in range(len(out_shape))]
    idx_v, w_v, ext_v = {}, {}, {}
    for a, m in enumerate(mats):
        if m is None:
            continue
        T, idx, wt, bad = sparse_taps(m)
        taps[a] = T
        off = idx * ist[a]    # element offsets along axis a
        it = "uint32" if off.max(initial=0) < 2 ** 32 else "uint64"
        idx_v[a] = Var(f"off{a}", Type(it))
        tables.append(ArrayDecl(idx_v[a], [Const(int(v), it) for v in off.ravel()]))
        if not nearest:
            w_v[a] = Var(f"wt{a}", Type(acc_t))
            tables.append(ArrayDecl(w_v[a], [Const(float(v), acc_t) for v in wt.ravel()]))
        if bad.any():
            ext_v[a] = Var(f"ext{a}", Type("uint8"))
            outside.append(a)
            tables.append(ArrayDecl(ext_v[a], [Const(int(b), "uint8") for b in bad]))
    o_idx = sum_of(scaled(v, s) for v, s in zip(loops, _strides(out_shape)))
    Y, X = param(k.out, output=True), param(x)

    def src(tap_of):
        terms = []
        for a, v in enumerate(loops):
            if a in taps:
                terms.append(Cast(INDEX, idx_v[a][sum_of([scaled(v, taps[a]), tap_of(a)])]))
            else:
                terms.append(scaled(v, ist[a]))
        return sum_of(terms)

    if nearest:
        inner = [Assign(Y[o_idx], X[src(lambda a: Const(0))])]
    else:
        acc = Var("acc", Type(acc_t))
        weight = None
        for a in sorted(taps):
            wa = w_v[a][scaled(loops[a], taps[a]) + tv[a]]
            weight = wa if weight is None else weight * wa
        xv = X[src(lambda a: tv[a])]
        xv = xv if dt == acc_t else Cast(Type(acc_t), xv)
        core = [Assign(acc, xv if weight is None else weight * xv, "+=")]
        for a in sorted(taps, reverse=True):
            core = [For(tv[a], taps[a], core)]
        if np.dtype(dt).kind in "iu":
            info = np.iinfo(dt)
            rv = Var("rv", Type("float64"))
            lo_, hi_ = Const(float(info.min), "float64"), Const(float(info.max), "float64")
            store = [Decl(rv, call("rint", Cast(Type("float64"), acc), type=Type("float64"))),
                     Assign(Y[o_idx], select(lt(rv, lo_), lo_, select(gt(rv, hi_), hi_, rv)))]
        elif dt in ("float32", "float64"):
            store = [Assign(Y[o_idx], acc)]
        else:
            raise NotLowerable(f"{k.node.op} on {dt}")
        inner = [Decl(acc, Const(0, acc_t)), *core, *store]
    if outside:
        cond = None
        for a in outside:
            c = ne(ext_v[a][loops[a]], Const(0, "uint8"))
            cond = c if cond is None else or_(cond, c)
        ev = attrs.get("extrapolation_value", 0.0)
        inner = [If(cond, [Assign(Y[o_idx], Const(ev, dt))], inner)]
    for v, n in reversed(list(zip(loops, out_shape))):
        inner = [For(v, n, inner)]
    return tables + inner


def _strides(shape) -> list[int]:
    return [prod(shape[a + 1:]) for a in range(len(shape))]


@nest("Resize")
def resize(k, **attrs):
    a = {key: v for key, v in attrs.items() if not key.startswith("_")}
    return _resize(k, attrs.get("_roi"), attrs.get("_scales"), attrs.get("_sizes"), a)


@nest("Upsample")
def upsample(k, *, scales, mode="nearest"):
    attrs = {"mode": "linear" if mode in ("linear", "bilinear") else mode,
             "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return _resize(k, None, scales, None, attrs)


def _qresize_scratch(k, **attrs):
    from ...ops.quantized.resize import scratch_bytes
    return scratch_bytes(k.ins[0].shape, attrs, k.target)


@nest("QResize", domain="mtvm", scratch=_qresize_scratch)
def qresize(k, **attrs):
    """The C emitter's statements (mtvm/ops/quantized/resize.py builds them in the
    C writer's IR for both backends)."""
    from ...ops.quantized.resize import qresize_nest
    if k.node.tail:
        raise NotLowerable("QResize with a fused tail")
    return qresize_nest(k, **attrs)


__all__: list = []
