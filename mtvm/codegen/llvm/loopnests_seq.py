"""LLVM-backend loop nests of the recurrent and upsampling ops: RNN, GRU, LSTM,
ConvTranspose, Resize and Upsample (the C writer's IR, as loopnests.py).

RNN / GRU / LSTM: every attribute the C emitter (mtvm/ops/recurrent.py)
supports -- directions, layout, sequence_lens, initial states, peepholes,
input_forget, linear_before_reset, clip, activations with alpha/beta -- with
no scratch memory: each direction and batch entry runs its whole sequence in
turn, and the state lives in the outputs. Y holds the hidden states (step t
reads h_{t-1} from Y at the previous time index and writes h_t at its own:
the double buffer a step needs, since every h_t[j] depends on all of
h_{t-1}); every gate value is computed per element j (the gates of j in one
pass over W and R) and used at once. What a step needs beyond that:
  - LSTM's cell state (updated element by element in place): in Y_c, else in
    Y_h (overwritten by the last h at the end), else in Y at the next step's
    time index (still free; the last step's c is not needed then).
  - GRU without linear_before_reset, r * h_{t-1} (all of it, before any h_t[j]):
    in Y_h, else in Y at the next step's time index; the last step of a
    sequence has none free, and recomputes r per element instead (about H/3
    times a step's work, for that one step).
Without Y the hidden state has no room for its double buffer: NotLowerable
(with scratch memory, 2 x H values would do, H more for LSTM's c without Y_c
or GRU's r * h). The gates' tanh and sigmoid in float are the kernel
library's (mtvm_activation_f32.h: a rational tanh, no libm), as in C. The
dot products keep a few partial sums over consecutive columns (as many as
the target's float vector has lanes, at most 16 accumulators per loop): LLVM
vectorizes them without reassociating a sum, and the chains of dependent
adds get shorter. Both directions share one run-time loop when their
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
as static const tables; every mode and coordinate_transformation_mode.
"""
from __future__ import annotations

import itertools

import numpy as np

from ...ops.base import get_op
from ...ops.conv_transpose import _geometry
from ...ops.recurrent import _activations
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
    Type,
    Var,
    call,
    eq,
    ge,
    gt,
    kernel_dtype,
    lt,
    ne,
    or_,
    param,
    scaled,
    select,
    sum_of,
)
from .cparse import NotLowerable
from .loopnests import I64, _finish, _float_only, nest, prod

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
        # mtvm_tanh_f32: c P(c^2) / Q(c^2) with c = x clamped to [-9, 9]; NaN stays NaN
        c = self.let(out, "tc", select(gt(x, self.c(9)), self.c(9),
                                       select(lt(x, self.c(-9)), self.c(-9), x)))
        x2 = self.let(out, "tx", c * c)
        p, q = self.c(_TANH_P[0]), self.c(_TANH_Q[0])
        for a, b in zip(_TANH_P[1:], _TANH_Q[1:]):
            p, q = p * x2 + self.c(a), q * x2 + self.c(b)
        t = self.let(out, "tr", c * p / q)
        one = self.c(1)
        return select(ne(x, x), x, select(gt(t, one), one, select(lt(t, -one), -one, t)))

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

def _lanes(target, dt: str) -> int:
    """Partial sums a dot product keeps (one per SIMD lane: LLVM's SLP vectorizer
    makes them one vector): the float vector width of the target, 1 without SIMD."""
    feats = getattr(target, "features", frozenset())
    if getattr(target, "is_x86", False):
        width = 64 if "avx512f" in feats else 32 if "avx" in feats else 16
    elif "mve.fp" in feats:
        width = 16
    else:
        return 1
    return width // np.dtype(dt).itemsize


CHAINS = 16


def _dot(out: list, E: "_Scalar", n: int, inner: Var, vec, terms, lanes: int) -> None:
    """acc += sum_{c < n} mat(c) * vec(c) for each (acc, mat) of terms, vec(c) read
    once for all. With lanes > 1 (and n >= 2 lanes): `lanes` partial sums per acc over
    consecutive columns (vectorizable: contiguous loads, no reassociation needed),
    added pairwise at the end, then the last n % lanes columns."""
    def plain(begin):
        E.n += 1
        v = Var(f"vq{E.n}", Type(E.dt))
        body = [Decl(v, vec(inner))] + [Assign(a, mat(inner) * v, "+=") for a, mat in terms]
        out.append(For(inner, n, body, begin=Const(begin)))

    lanes = min(lanes, 8, 1 << max(0, (CHAINS // len(terms)).bit_length() - 1))
    if lanes <= 1 or n < 2 * lanes:
        plain(0)
        return
    parts = [[E.let(out, "ps", E.c(0)) for _ in range(lanes)] for _ in terms]
    qb = Var(inner.name + "b")
    body = []
    for c in range(lanes):
        col = qb * lanes + c if c else qb * lanes
        E.n += 1
        v = Var(f"vq{E.n}", Type(E.dt))
        body.append(Decl(v, vec(col)))
        body += [Assign(ps[c], mat(col) * v, "+=") for (_, mat), ps in zip(terms, parts)]
    out.append(For(qb, n // lanes, body))
    for (a, _), ps in zip(terms, parts):
        while len(ps) > 1:
            ps = [ps[i] + ps[i + 1] if i + 1 < len(ps) else ps[i] for i in range(0, len(ps), 2)]
        out.append(Assign(a, ps[0], "+="))
    if n % lanes:
        plain(n // lanes * lanes)


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
    # An initial state known to be zero (PyTorch exports expand a constant 0) is none:
    # the first step then skips R h.
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
    if Y is None:
        raise NotLowerable(
            f"{op} without its output Y needs scratch memory: the hidden state's double "
            f"buffer (2 x {H} values) has room only in Y")
    E = _Scalar(dt)
    zero, one = E.c(0), E.c(1)
    lanes = _lanes(k.target, dt)
    X, Wp, Rp = param(x), param(w), param(r)
    Bp = param(bias) if bias is not None else None
    Yp = param(Y, output=True)
    YHp = param(YH, output=True) if YH is not None else None
    YCp = param(YC, output=True) if YC is not None else None
    bv, sv, j, q = Var("b"), Var("s"), Var("j"), Var("q")
    tt, tp = Var("tt"), Var("tp")

    # Both directions in one run-time loop when their activations agree (half the
    # code), else one nest per direction.
    dv = Var("d")
    one_loop = dirs == 2 and A[0] == A[1]
    def direction_nest(d) -> For:
        """The loop over the batch of direction d (an int, or the loop variable)."""
        if one_loop:
            rev = eq(dv, Const(1))
        else:
            rev = direction == "reverse" or (direction == "bidirectional" and d == 1)
        f_act, g_act = A[0 if one_loop else d][0], A[0 if one_loop else d][1:2]
        h_act = A[0 if one_loop else d][2:3]
        g_act, h_act = (g_act or [None])[0], (h_act or [None])[0]

        def at(stride, extra=0):
            """d * stride + extra: the offset of direction d's part."""
            if isinstance(d, int):
                return d * stride + extra
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

        def bias_of(g, jj, wx=True, rh=True):
            """Wb + Rb of gate g, row jj (zero without B)."""
            terms = []
            if Bp is not None and wx:
                terms.append(Bp[sum_of([at(2 * GH, g * H), jj])])
            if Bp is not None and rh:
                terms.append(Bp[sum_of([at(2 * GH, GH + g * H), jj])])
            if not terms:
                return zero
            return terms[0] if len(terms) == 1 else terms[0] + terms[1]

        def peep_of(row, jj):
            return param(peep)[sum_of([at(3 * H, row * H), jj])]

        def dots(out, specs, row, t, inner=q):
            """Accumulators of gate rows `row`: spec (gate, with W x, h vector (a function
            of the column, or None), initial value); acc = init + W x + R h."""
            accs = [E.let(out, "acc", init) for _, _, _, init in specs]
            xs = [(a, g) for a, (g, wx, _, _) in zip(accs, specs) if wx]
            if xs:
                _dot(out, E, I, inner, lambda c: X[x_at(t, c)], [
                    (a, lambda c, g=g: Wp[sum_of([at(GH * I, g * H * I), scaled(row, I), c])])
                    for a, g in xs], lanes)
            vecs = []
            for a, (g, _, hv, _) in zip(accs, specs):
                if hv is None:
                    continue
                for entry in vecs:
                    if entry[0] is hv:
                        entry[1].append((a, g))
                        break
                else:
                    vecs.append((hv, [(a, g)]))
            for hv, pairs in vecs:
                _dot(out, E, H, inner, hv, [
                    (a, lambda c, g=g: Rp[sum_of([at(GH * H, g * H * H), scaled(row, H), c])])
                    for a, g in pairs], lanes)
            return accs

        def step(first: bool, ln):
            out = []
            s = Const(0) if first else sv
            out.append(Decl(tt, pick(rev, ln - 1 - s, s)))
            if first:
                hp = (lambda qq: param(h0)[st_at(qq)]) if h0 is not None else None
            else:
                out.append(Decl(tp, pick(rev, tt + 1, tt - 1)))
                hp = lambda qq: Yp[y_at(tp, qq)]   # noqa: E731
            has_next = lt(s + 1, ln)
            tn = pick(rev, tt - 1, tt + 1)      # the next step's time index (if has_next)

            def h_prev(jj):
                return hp(jj) if hp is not None else zero

            if op == "RNN":
                per = []
                (acc,) = dots(per, [(0, True, hp, bias_of(0, j))], j, tt)
                per.append(Assign(Yp[y_at(tt, j)], E.act(per, f_act, E.clip(acc, clip))))
                out.append(For(j, H, per))
            elif op == "GRU" and linear_before_reset:
                per = []
                az, ar, ahx, ahr = dots(per, [(0, True, hp, bias_of(0, j)),
                                              (1, True, hp, bias_of(1, j)),
                                              (2, True, None, bias_of(2, j, rh=False)),
                                              (2, False, hp, bias_of(2, j, wx=False))], j, tt)
                z = E.let(per, "z", E.act(per, f_act, E.clip(az, clip)))
                rg = E.let(per, "r", E.act(per, f_act, E.clip(ar, clip)))
                hc = E.let(per, "hc", E.act(per, g_act, E.clip(ahx + rg * ahr, clip)))
                per.append(Assign(Yp[y_at(tt, j)], (one - z) * hc + z * h_prev(j)))
                out.append(For(j, H, per))
            elif op == "GRU":
                def r_gate(o, row, inner):
                    (ar,) = dots(o, [(1, True, hp, bias_of(1, row))], row, tt, inner=inner)
                    return E.let(o, "r", E.act(o, f_act, E.clip(ar, clip)))

                def pass2(rh_mode, rh=None):
                    """h_t[j] for every j; r * h_{t-1} from rh (stored), computed per
                    element (recompute), or zero (h_{t-1} = 0)."""
                    per = []
                    specs = [(0, True, hp, bias_of(0, j)),
                             (2, True, rh if rh_mode == "stored" else None, bias_of(2, j))]
                    az, ah = dots(per, specs, j, tt)
                    if rh_mode == "recompute":
                        o = []
                        rg = r_gate(o, q, Var("q2"))
                        o.append(Assign(ah, Rp[sum_of([at(GH * H, 2 * H * H), scaled(j, H), q])]
                                        * (rg * hp(q)), "+="))
                        per.append(For(q, H, o))
                    z = E.let(per, "z", E.act(per, f_act, E.clip(az, clip)))
                    hc = E.let(per, "hc", E.act(per, g_act, E.clip(ah, clip)))
                    per.append(Assign(Yp[y_at(tt, j)], (one - z) * hc + z * h_prev(j)))
                    return [For(j, H, per)]

                def stored(rh):
                    jr = Var("jr")
                    o = []
                    rg = r_gate(o, jr, q)
                    o.append(Assign(rh(jr), rg * hp(jr)))
                    return [For(jr, H, o)] + pass2("stored", rh)

                if hp is None:
                    out += pass2("zero")
                elif YHp is not None:
                    out += stored(lambda qq: YHp[st_at(qq)])
                else:
                    out.append(If(has_next, stored(lambda qq: Yp[y_at(tn, qq)]),
                                  pass2("recompute")))
            else:   # LSTM: gates i, o, f, c; peepholes i, o, f
                per = []
                if YCp is not None:
                    cell = lambda jj: YCp[st_at(jj)]   # noqa: E731
                elif YHp is not None:
                    cell = lambda jj: YHp[st_at(jj)]   # noqa: E731
                else:
                    cell = None   # in Y at the next step's time index
                if first:
                    c_prev = param(c0)[st_at(j)] if c0 is not None else zero
                else:
                    c_prev = cell(j) if cell is not None else Yp[y_at(tt, j)]
                cp = E.let(per, "cp", c_prev)
                specs = [(0, True, hp, bias_of(0, j)), (1, True, hp, bias_of(1, j)),
                         (3, True, hp, bias_of(3, j))]
                if not input_forget:
                    specs.append((2, True, hp, bias_of(2, j)))
                ai, ao, ac, *af = dots(per, specs, j, tt)
                pi = ai + peep_of(0, j) * cp if peep is not None else ai
                ig = E.let(per, "ig", E.act(per, f_act, E.clip(pi, clip)))
                if input_forget:
                    fg = E.let(per, "fg", one - ig)
                else:
                    pf = af[0] + peep_of(2, j) * cp if peep is not None else af[0]
                    fg = E.let(per, "fg", E.act(per, f_act, E.clip(pf, clip)))
                gc = E.act(per, g_act, E.clip(ac, clip))
                cn = E.let(per, "cn", fg * cp + ig * gc)
                po = ao + peep_of(1, j) * cn if peep is not None else ao
                og = E.let(per, "og", E.act(per, f_act, E.clip(po, clip)))
                hn = E.let(per, "hn", og * E.act(per, h_act, cn))
                if cell is not None:
                    per.append(Assign(cell(j), cn))
                else:
                    per.append(If(has_next, [Assign(Yp[y_at(tn, j)], cn)]))
                per.append(Assign(Yp[y_at(tt, j)], hn))
                out.append(For(j, H, per))
            return out

        pair = []
        if seqlens is not None:   # clamped to [0, S], as the C emitter
            lr, ln = Var("lr", I64), Var("ln")
            pair += [Decl(lr, Cast(I64, param(seqlens)[bv])),
                     Decl(ln, Cast(INDEX, select(lt(lr, Const(0, "int64")), Const(0, "int64"),
                                                 select(gt(lr, Const(S, "int64")),
                                                        Const(S, "int64"), lr))))]
            pair.append(If(gt(ln, Const(0)), [*step(True, ln),
                                              For(sv, ln, step(False, ln), begin=Const(1))]))
        else:
            ln = Const(S)
            pair += step(True, ln)
            if S > 1:
                pair.append(For(sv, S, step(False, ln), begin=Const(1)))
        # Y_h: the last h (0 for a sequence of length 0); Y_c holds the last c, but is 0
        # for a sequence of length 0.
        last = pick(rev, Const(0), ln - 1)
        if YHp is not None:
            copy = [For(j, H, [Assign(YHp[st_at(j)], Yp[y_at(last, j)])])]
            if seqlens is not None:
                pair.append(If(gt(ln, Const(0)), copy, [For(j, H, [Assign(YHp[st_at(j)], zero)])]))
            else:
                pair += copy
        if seqlens is not None:
            if YCp is not None:
                pair.append(If(eq(ln, Const(0)), [For(j, H, [Assign(YCp[st_at(j)], zero)])]))
            tz = Var("tz")
            pair.append(For(tz, S, [For(j, H, [Assign(Yp[y_at(tz, j)], zero)])], begin=ln))
        return For(bv, B, pair)

    if one_loop:
        return [For(dv, 2, [direction_nest(dv)])]
    return [direction_nest(d) for d in range(dirs)]


@nest("RNN")
def rnn(k, **attrs):
    return _recurrent(k, "RNN", 1, **attrs)


@nest("GRU")
def gru(k, **attrs):
    return _recurrent(k, "GRU", 3, **attrs)


@nest("LSTM")
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
        bad = np.isnan(m).any(axis=1)
        mm = np.nan_to_num(m)
        T = max(int((mm[o] != 0).sum()) for o in range(mm.shape[0])) or 1
        idx = np.zeros((mm.shape[0], T), np.int64)
        wt = np.zeros((mm.shape[0], T))
        for o in range(mm.shape[0]):
            nz = np.nonzero(mm[o])[0]
            idx[o, :len(nz)] = nz
            wt[o, :len(nz)] = mm[o, nz]
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


__all__: list = []
