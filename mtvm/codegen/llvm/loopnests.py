"""Loop nests in the C writer's IR for the ops whose C emitters still write
text: what the LLVM backend lowers for them.

Plain nests, ordered so that the innermost loop runs over contiguous,
independent outputs (LLVM vectorizes it without reassociating any float
sum); the reductions accumulate in the output row, which the fused tail then
finishes element by element. Each function takes the Kernel and the node's
attributes, as Op.ir_body does, and returns statements. When these nests and
the C emitters share one IR, these become the generic schedules.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import MtvmError
from ...ops.conv import conv_geometry
from ...ops.elementwise import broadcast_strides
from ...ops.gemm import _matmul_dims
from ...ops.pool import pool_geometry, tap_counts
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
    Return,
    Table,
    Type,
    Var,
    and_,
    call,
    ge,
    gt,
    kernel_dtype,
    lt,
    not_,
    or_,
    param,
    select,
    sum_of,
    scaled,
    tail,
)
from .cparse import NotLowerable
from .vector import Lane, Splat, VecLoad, VecType

LOOP_NESTS: dict = {}
SCRATCH: dict = {}     # (domain, op) -> scratch_bytes(k, **attrs) of nests that use scratch
I64 = Type("int64")


def nest(*ops: str, domain: str = "", scratch=None):
    """Register a loop nest for ops; scratch(k, **attrs) -> bytes it needs (its
    statements reach them through scratch_ptr)."""
    def wrap(fn):
        for op in ops:
            LOOP_NESTS[(domain, op)] = fn
            if scratch is not None:
                SCRATCH[(domain, op)] = scratch
        return fn
    return wrap


# -- knobs: what `mtvm tune --backend llvm` searches (docs/tuning.md) -------------------------

AUTO = 0   # a knob at AUTO: the nest's own choice for the shape and target (the default)


@dataclass(frozen=True)
class NestKnobs:
    """The knobs of a loop nest, as a C schedule has them (mtvm.schedules.Knob):
    set per nest name or per kernel (by workload_key) in a ScheduleConfig, which
    is what tuning records become. Every default is AUTO: without a config the
    nests make the choices they always made."""
    name: str
    knobs: tuple

    def default_knobs(self, k=None) -> dict:
        return {kn.name: kn.default for kn in self.knobs}


def _knob(name, choices, doc):
    from ...schedules import Knob
    return Knob(name, AUTO, (AUTO, *choices), doc)


CONV_KNOBS = NestKnobs("llvm.conv2d_f32", (
    _knob("tile_cols", (2, 4, 8, 16, 32), "output columns of a scalar register tile "
          "(auto: the x86 vector width, 4 for narrow rows of many channels, 4 elsewhere)"),
    _knob("tile_channels", (1, 2, 4, 8, 16), "output channels of a scalar register tile "
          "(auto: 4, 16 for narrow rows of many channels on x86)"),
    _knob("vec_channels", (1, 2, 3, 4), "vectors of output channels of an x86 vector tile "
          "(auto: 2)"),
    _knob("vec_cols", (1, 2, 3, 4, 6, 8), "output columns of an x86 vector tile (auto: 4)"),
))
MATMUL_KNOBS = NestKnobs("llvm.matmul_f32", (
    _knob("rows", (1, 2, 3, 4, 6, 8), "rows of a register tile (auto: 4)"),
    _knob("vec_cols", (1, 2, 3, 4), "vectors of columns of a tile, with vectors (auto: "
          "2, 8 for one row)"),
    _knob("cols", (1, 2, 4, 8), "scalar columns of a tile (auto: 4, 8 for one row)"),
))
NEST_KNOBS = {("", "Conv"): CONV_KNOBS, ("", "Gemm"): MATMUL_KNOBS, ("", "MatMul"): MATMUL_KNOBS}


def workload_key(k) -> str:
    """The key of kernel k's workload (mtvm.schedules.workload: op, tail, shapes,
    dtypes, attributes, in-place, target) for this backend: the C backend's
    key of the same kernel is another, so records of one never apply to the other."""
    from ...schedules import workload_key as key
    return key(k, backend="llvm")


def nest_knobs(k) -> dict:
    """The knob values of kernel k's nest: AUTO, overridden by k.config (a
    ScheduleConfig) per nest name, then per workload key. Sets k.schedule and
    k.knobs (the metadata and the tuner read them)."""
    from ...schedules import ScheduleConfig
    spec = NEST_KNOBS[(k.node.domain, k.node.op)]
    cfg = ScheduleConfig.resolve(k.config)
    values = spec.default_knobs() if cfg is None else \
        cfg.for_kernel(k, spec, key=workload_key(k))
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise MtvmError(f"{spec.name}: knob {name}={v!r} is not a count (0: auto)")
    k.schedule, k.knobs = spec.name, values
    return values


def scratch_ptr(dtype: str, offset_bytes: int = 0) -> Expr:
    """The kernel's scratch as a pointer to dtype, offset_bytes in (16-byte aligned
    arena: keep offsets multiples of the element size)."""
    base = Var("scratch", Type("uint8", pointer=True))
    return Cast(Type(dtype, pointer=True), base + offset_bytes if offset_bytes else base)


def prod(dims) -> int:
    return int(np.prod(dims, dtype=np.int64))


def _float_only(k) -> None:
    if kernel_dtype(k) not in ("float32", "float64"):
        raise NotLowerable(f"{k.node.op} on {kernel_dtype(k)}")


def _finish(k, out: Var, idx: Expr, value, ch: Expr | None = None) -> list:
    """out[idx] = value(out[idx]) with the fused tail applied."""
    v = Var("v", Type(kernel_dtype(k)))
    return [Decl(v, value(out[idx])), *tail(k, v, idx, ch), Assign(out[idx], v)]


# -- matrix products ------------------------------------------------------------------------

def _product(k, *, m, kk, n, a, b, out, a_base, b_base, o_base, a_strides, b_strides,
             value=lambda acc, i, j: acc, ch=None, knobs=None) -> list:
    """out[o_base + i*n + j] = value(sum_p a[i, p] * b[p, j]) for an [m, kk] x
    [kk, n] product, in register tiles whose accumulators live over the whole
    sum: on x86, up to 4 rows x 2 vectors of columns (a row of b is contiguous:
    one vector load feeds every row of the tile); elsewhere 4 x 4 scalars.
    knobs: MATMUL_KNOBS' values (rows, vec_cols, cols; AUTO: those)."""
    knobs = knobs or {}
    dt = kernel_dtype(k)
    L = _vector_lanes(k.target) if b_strides[1] == 1 else 0
    p = Var("p")

    def a_at(i):
        return a[a_base + scaled(i, a_strides[0]) + scaled(p, a_strides[1])]

    def b_at(j):
        return b[b_base + scaled(p, b_strides[0]) + scaled(j, b_strides[1])]

    def finish(acc, i, j) -> list:
        idx = o_base + i * n + j
        v = Var("v", Type(dt))
        return [Block([Decl(v, value(acc, i, j)), *tail(k, v, idx, None if ch is None else ch(i, j)),
                       Assign(out[idx], v)])]

    def rows_of(first, count, size, var):
        base = (var * size + first if first else var * size) if count > 1 else Const(first)
        return base, [base + r if r else base for r in range(size)]

    def vtile(rows, j0, nvec) -> list:
        vt = VecType(dt, lanes=L)
        acc = [[Var(f"vacc{r}_{v}", vt) for v in range(nvec)] for r in range(len(rows))]
        bv = [Var(f"vb{v}", vt) for v in range(nvec)]
        av = [Var(f"aval{r}", Type(dt)) for r in range(len(rows))]
        body = [Decl(acc[r][v], Splat(Const(0, dt), L)) for r in range(len(rows))
                for v in range(nvec)]
        step = [Decl(bv[v], VecLoad(b, b_base + scaled(p, b_strides[0]) + j0 + v * L, L))
                for v in range(nvec)]
        step += [Decl(av[r], a_at(i)) for r, i in enumerate(rows)]
        step += [Assign(acc[r][v], bv[v] * av[r], "+=") for r in range(len(rows))
                 for v in range(nvec)]
        body.append(For(p, kk, step))
        for r, i in enumerate(rows):
            for v in range(nvec):
                for lane in range(L):
                    body += finish(Lane(acc[r][v], lane), i, j0 + (v * L + lane))
        return [Block(body)]

    def stile(rows, cols) -> list:
        acc = [[Var(f"acc{r}_{c}", Type(dt)) for c in range(len(cols))] for r in range(len(rows))]
        av = [Var(f"aval{r}", Type(dt)) for r in range(len(rows))]
        bv = [Var(f"bval{c}", Type(dt)) for c in range(len(cols))]
        body = [Decl(acc[r][c], Const(0, dt)) for r in range(len(rows)) for c in range(len(cols))]
        step = [Decl(av[r], a_at(i)) for r, i in enumerate(rows)]
        step += [Decl(bv[c], b_at(j)) for c, j in enumerate(cols)]
        step += [Assign(acc[r][c], av[r] * bv[c], "+=") for r in range(len(rows))
                 for c in range(len(cols))]
        body.append(For(p, kk, step))
        for r, i in enumerate(rows):
            for c, j in enumerate(cols):
                body += finish(acc[r][c], i, j)
        return [Block(body)]

    iv, jv = Var("it"), Var("jt")
    out_stmts = []
    for first_m, count_m, mr in _split(m, knobs.get("rows") or 4):
        _, rows = rows_of(first_m, count_m, mr, iv)
        inner = []
        vec_cols = (n // L) * L if L else 0
        if vec_cols:
            # 8 independent accumulators hide the multiply-add latency: fewer rows, more columns
            for first_v, count_v, nvec in _split(vec_cols // L,
                                                 knobs.get("vec_cols") or max(2, 8 // mr)):
                j0 = (jv * (nvec * L) + first_v * L if first_v else jv * (nvec * L)) \
                    if count_v > 1 else Const(first_v * L)
                body = vtile(rows, j0, nvec)
                inner += [For(jv, count_v, body)] if count_v > 1 else body
        # one row (a matrix-vector product): 8 columns, so that 8 sums run at once
        for first_c, count_c, nc in _split(n - vec_cols,
                                           knobs.get("cols") or (8 if mr == 1 else 4)):
            first_c += vec_cols
            _, cols = rows_of(first_c, count_c, nc, jv)
            body = stile(rows, cols)
            inner += [For(jv, count_c, body)] if count_c > 1 else body
        out_stmts += [For(iv, count_m, inner)] if count_m > 1 else inner
    return out_stmts


@nest("Gemm")
def gemm(k, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    _float_only(k)
    knobs = nest_knobs(k)
    a, b = k.ins[0], k.ins[1]
    m, n = k.out.shape
    kk = a.shape[0] if transA else a.shape[1]
    c = k.ins[2] if len(k.ins) > 2 else None
    dt = kernel_dtype(k)

    def value(acc, i, j):
        v = acc if alpha == 1.0 else Const(alpha, dt) * acc
        if c is None or beta == 0.0:
            return v
        cs = broadcast_strides(c.shape, k.out.shape)
        cv = param(c)[sum_of([scaled(i, cs[0]), scaled(j, cs[1])] if cs[0] else [scaled(j, cs[1])]
                             if cs[1] else [])]
        return v + (cv if beta == 1.0 else Const(beta, dt) * cv)
    return _product(k, m=m, kk=kk, n=n, a=param(a), b=param(b), out=param(k.out, output=True),
                    a_base=Const(0), b_base=Const(0), o_base=Const(0),
                    a_strides=(1, m) if transA else (kk, 1),
                    b_strides=(1, kk) if transB else (n, 1), value=value,
                    ch=lambda i, j: j, knobs=knobs)


@nest("MatMul")
def matmul(k):
    _float_only(k)
    knobs = nest_knobs(k)
    a, b = k.ins
    batch, sta, stb, m, kk, n, out_shape = _matmul_dims(a.shape, b.shape)
    loops = [Var(f"b{d}") for d in range(len(batch))]
    o_strides, s = [], m * n
    for d in reversed(batch):
        o_strides.append(s)
        s *= d
    o_strides.reverse()
    a_base = sum_of(scaled(v, st) for v, st in zip(loops, sta) if st)
    b_base = sum_of(scaled(v, st) for v, st in zip(loops, stb) if st)
    o_base = sum_of(scaled(v, st) for v, st in zip(loops, o_strides))
    body = _product(k, m=m, kk=kk, n=n, a=param(a), b=param(b), out=param(k.out, output=True),
                    a_base=a_base, b_base=b_base, o_base=o_base, a_strides=(kk, 1),
                    b_strides=(n, 1), knobs=knobs)
    for v, size in reversed(list(zip(loops, batch))):
        body = [For(v, size, body)]
    return body


# -- convolution --------------------------------------------------------------------------------

def _spatial(shape) -> tuple[int, int]:
    """(H, W) of an NC... shape with one or two spatial axes (1-D: H = 1)."""
    if len(shape) == 3:
        return 1, shape[2]
    if len(shape) == 4:
        return shape[2], shape[3]
    raise NotLowerable(f"{len(shape) - 2}-D windows")


def _tile_shape(target, channels: int, columns: int) -> tuple[int, int]:
    """(output columns, output channels) of a Conv register tile, whose
    accumulators the SLP vectorizer packs into vectors: along a vector of
    columns when a row has that many inside the padding, else (narrow rows,
    many channels) 4 columns x 16 channels; within the target's registers."""
    if target.is_x86:
        lanes = _vector_lanes(target)
        if columns < lanes and channels >= 16:
            return 4, 16
        return lanes, 4
    return 4, 4   # 32 single-precision registers on an M-profile FPU: 16 accumulators


def _vector_lanes(target) -> int:
    """float32 lanes of the target's vectors for explicit vector tiles (0: none:
    the scalar tiles, which LLVM's SLP vectorizer packs where it can)."""
    if target.is_x86:
        return 16 if target.has("avx512f") else 8 if target.has("avx2") else 4
    if target.has("mve.fp"):   # Helium: 128-bit vectors of 4 floats (Cortex-M55/M85)
        return 4
    return 0


def _split(total: int, size: int) -> list[tuple[int, int, int]]:
    """[(first, count, width)]: `count` blocks of `width` from `first`, covering
    [0, total) with full blocks and one remainder block."""
    out = []
    if total // size:
        out.append((0, total // size, size))
    if total % size:
        out.append(((total // size) * size, 1, total % size))
    return out


@nest("Conv")
def conv(k, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None,
         strides=None):
    """Register tiles of `mb` channels x `t` columns: each tile's accumulators
    stay in registers over the whole reduction (input channels, kernel rows and
    columns), each input load feeds mb products. The tiles cover the columns
    where every tap is inside the input row; the few columns at the padded
    edges are computed one by one with bounds checks. The tile shapes are
    CONV_KNOBS' (AUTO: _tile_shape, and 2 vectors x 4 columns on x86)."""
    _float_only(k)
    knobs = nest_knobs(k)
    x, w = k.ins[0], k.ins[1]
    bias = k.ins[2] if len(k.ins) > 2 else None
    axes, group = conv_geometry(x.shape, w.shape, auto_pad=auto_pad, dilations=dilations,
                                group=group, kernel_shape=kernel_shape, pads=pads,
                                strides=strides)
    from ...ops.conv import Axis
    if all(a.kernel == 1 and a.stride == 1 and a.pad_begin == a.pad_end == 0 for a in axes):
        # A pointwise conv: its planes are rows of H*W pixels (one long row of tiles).
        plane = int(np.prod([a.size for a in axes]))
        axes = [Axis("w", plane, plane, 1, 1, 1, 0, 0)]
    if len(axes) > 2:
        raise NotLowerable(f"{len(axes)}-D windows")
    if len(axes) == 1:
        axes = [Axis("h", 1, 1, 1, 1, 1, 0, 0), axes[0]]
    ah, aw = axes
    nb, c, m = x.shape[0], x.shape[1], w.shape[0]
    cg, mg = c // group, m // group
    hh, ww = ah.size, aw.size
    oh_n, ow_n = ah.out, aw.out
    kh_n, kw_n = ah.kernel, aw.kernel
    sw, dw, pw = aw.stride, aw.dilation, aw.pad_begin
    dt = kernel_dtype(k)
    X, W, Y = param(x), param(w), param(k.out, output=True)
    nv, gv, ohv, icv, khv, kwv = (Var(s) for s in ("n", "g", "oh", "ic", "kh", "kw"))
    ih = Var("ih", I64)
    # Columns whose every tap lies inside the input row.
    lo = min(ow_n, -(-pw // sw))
    hi = max(lo, min(ow_n, (ww - 1 + pw - (kw_n - 1) * dw) // sw + 1))
    lanes, mb = _tile_shape(k.target, mg, hi - lo)
    lanes, mb = knobs["tile_cols"] or lanes, knobs["tile_channels"] or mb
    vl = _vector_lanes(k.target)
    if (vl and cg == 1 and mg == 1 and w.const is not None and ah.stride == aw.stride == 1
            and ah.dilation == aw.dilation == 1 and (oh_n, ow_n) == (hh, ww)
            and ah.pad_begin < kh_n and aw.pad_begin < kw_n):
        return _depthwise_planes(k, x, w, bias, nb, c, hh, ww, kh_n, kw_n, ah.pad_begin,
                                 aw.pad_begin, vl)

    def x_chan():
        ic_abs = gv * cg + icv if group > 1 else icv
        return ((nv * c + ic_abs) * hh) * ww

    def oc_of(oc0, j):
        base = gv * mg + oc0 if group > 1 else oc0
        return base + j if j else base

    def row_loop(inner):
        """for kh: ih = oh*sh + kh*dh - ph; if (0 <= ih < H) { inner }"""
        return For(khv, kh_n, [
            Decl(ih, Cast(I64, ohv) * ah.stride + Cast(I64, khv) * ah.dilation
                 - Const(ah.pad_begin, "int64")),
            If(and_(ge(ih, Const(0, "int64")), lt(ih, Const(hh, "int64"))), inner)])

    # The weights re-laid out [group][in channel][kh][kw][out channel]: the mb
    # weights a tap multiplies are adjacent (one vector load), and a constant
    # table replaces the ONNX layout (W is then not a parameter: stored once).
    wt = None
    if w.const is not None:
        wt = Var("wt", Type(dt))
        table = w.const.reshape(group, mg, cg, kh_n, kw_n).transpose(0, 2, 3, 4, 1)

    def w_at(oc0, a, kwe):
        if wt is None:
            return W[((oc_of(oc0, a) * cg + icv) * kh_n + khv) * kw_n + kwe]
        ic_abs = gv * cg + icv if group > 1 else icv
        m_in = oc0 + a if a else oc0
        return wt[((ic_abs * kh_n + khv) * kw_n + kwe) * mg + m_in]

    def tile(oc0, nm: int, ow0, nt: int) -> list:
        acc = [[Var(f"acc{a}_{b}", Type(dt)) for b in range(nt)] for a in range(nm)]
        ws = [Var(f"w{a}", Type(dt)) for a in range(nm)]
        xs = [Var(f"x{b}", Type(dt)) for b in range(nt)]
        out = []
        for a in range(nm):
            init = Const(0, dt) if bias is None else param(bias)[oc_of(oc0, a)]
            out += [Decl(acc[a][b], init) for b in range(nt)]
        xrow = Cast(Type("index"), ih) * ww + x_chan()
        taps = [Decl(ws[a], w_at(oc0, a, kwv)) for a in range(nm)]
        for b in range(nt):
            off = b * sw - pw
            col = scaled(ow0, sw) + kwv * dw
            col = col + off if off >= 0 else col - (-off)
            taps.append(Decl(xs[b], X[xrow + col]))
        taps += [Assign(acc[a][b], ws[a] * xs[b], "+=") for a in range(nm) for b in range(nt)]
        out.append(For(icv, cg, [row_loop([For(kwv, kw_n, taps)])]))
        y_row = lambda a: (nv * m + oc_of(oc0, a)) * (oh_n * ow_n) + ohv * ow_n + ow0  # noqa: E731
        for a in range(nm):
            for b in range(nt):
                idx = y_row(a) + b if b else y_row(a)
                out += [*tail(k, acc[a][b], idx, oc_of(oc0, a)), Assign(Y[idx], acc[a][b])]
        return [Block(out)]

    def edge_column(oc0, nm: int, owe) -> list:
        """One output column next to the padding, all nm channels at once: each
        tap is checked once and its input value feeds nm products."""
        iw, xv = Var("iw", I64), Var("xv", Type(dt))
        acc = [Var(f"acc{a}", Type(dt)) for a in range(nm)]
        out = [Decl(acc[a], Const(0, dt) if bias is None else param(bias)[oc_of(oc0, a)])
               for a in range(nm)]
        hit = [Decl(xv, X[Cast(Type("index"), ih) * ww + x_chan() + Cast(Type("index"), iw)])]
        hit += [Assign(acc[a], w_at(oc0, a, kwv) * xv, "+=") for a in range(nm)]
        inner = [Decl(iw, Cast(I64, owe) * sw + Cast(I64, kwv) * dw - Const(pw, "int64")),
                 If(and_(ge(iw, Const(0, "int64")), lt(iw, Const(ww, "int64"))), hit)]
        out.append(For(icv, cg, [row_loop([For(kwv, kw_n, inner)])]))
        for a in range(nm):
            idx = (nv * m + oc_of(oc0, a)) * (oh_n * ow_n) + ohv * ow_n + owe
            out += [*tail(k, acc[a], idx, oc_of(oc0, a)), Assign(Y[idx], acc[a])]
        return [Block(out)]

    def vtile(oc0, nvec: int, ow0, nt: int, checked: bool = False) -> list:
        """nvec vectors of output channels x nt columns: each tap loads the
        channels' adjacent weights as vectors and multiplies them by one input
        value per column (checked: one edge column, its taps tested)."""
        L = vlanes
        vt = VecType(dt, lanes=L)
        acc = [[Var(f"vacc{a}_{b}", vt) for b in range(nt)] for a in range(nvec)]
        ws = [Var(f"vw{a}", vt) for a in range(nvec)]
        xs = [Var(f"x{b}", Type(dt)) for b in range(nt)]
        out = []
        for a in range(nvec):
            init = Splat(Const(0, dt), L) if bias is None else \
                VecLoad(param(bias), oc_of(oc0, a * L), L)
            out += [Decl(acc[a][b], init) for b in range(nt)]
        ic_abs = gv * cg + icv if group > 1 else icv
        w_row = ((ic_abs * kh_n + khv) * kw_n + kwv) * mg
        taps = [Decl(ws[a], VecLoad(wt, w_row + oc0 + a * L if a else w_row + oc0, L))
                for a in range(nvec)]
        xrow = Cast(Type("index"), ih) * ww + x_chan()
        iw = Var("iw", I64)
        for b in range(nt):
            if checked:
                col = Cast(Type("index"), iw)
            else:
                off = b * sw - pw
                col = scaled(ow0, sw) + kwv * dw
                col = col + off if off >= 0 else col - (-off)
            taps.append(Decl(xs[b], X[xrow + col]))
        taps += [Assign(acc[a][b], ws[a] * xs[b], "+=") for b in range(nt) for a in range(nvec)]
        if checked:
            taps = [Decl(iw, Cast(I64, ow0) * sw + Cast(I64, kwv) * dw - Const(pw, "int64")),
                    If(and_(ge(iw, Const(0, "int64")), lt(iw, Const(ww, "int64"))), taps)]
        out.append(For(icv, cg, [row_loop([For(kwv, kw_n, taps)])]))
        v = Var("v", Type(dt))
        for a in range(nvec):
            for i in range(L):
                oc = oc_of(oc0, a * L + i)
                for b in range(nt):
                    idx = (nv * m + oc) * (oh_n * ow_n) + ohv * ow_n + ow0
                    idx = idx + b if b else idx
                    out.append(Block([Decl(v, Lane(acc[a][b], i)), *tail(k, v, idx, oc),
                                      Assign(Y[idx], v)]))
        return [Block(out)]

    per_block = []   # (oc0 expression maker, channels) -> statements for one output row
    owt, owe = Var("owt"), Var("owe")
    vlanes = _vector_lanes(k.target)
    vector_channels = (mg // vlanes) * vlanes if wt is not None and vlanes else 0
    if vector_channels:
        # Vectors of output channels (x86): blocks of two vectors x 4 columns.
        for first_m, count_m, nvec in _split(vector_channels // vlanes,
                                             knobs["vec_channels"] or 2):
            mbv = Var("vb")
            first = first_m * vlanes
            oc0 = (mbv * (nvec * vlanes) + first if first else mbv * (nvec * vlanes)) \
                if count_m > 1 else Const(first)
            row = []
            for first_t, count_t, nt in _split(hi - lo, knobs["vec_cols"] or 4):
                ow0 = owt * nt + (lo + first_t) if count_t > 1 else Const(lo + first_t)
                body = vtile(oc0, nvec, ow0, nt)
                row += [For(owt, count_t, body)] if count_t > 1 else body
            for e_lo, e_hi in ((0, lo), (hi, ow_n)):
                if e_hi > e_lo:
                    row.append(For(owe, e_hi, vtile(oc0, nvec, owe, 1, checked=True),
                                   begin=Const(e_lo)))
            per_block += [For(mbv, count_m, row)] if count_m > 1 else row
    for first_m, count_m, nm in _split(mg - vector_channels, mb):
        first_m += vector_channels
        mbv = Var("mb")
        oc0 = (mbv * nm + first_m if first_m else mbv * nm) if count_m > 1 else Const(first_m)
        row = []
        for first_t, count_t, nt in _split(hi - lo, lanes):
            ow0 = owt * nt + (lo + first_t) if count_t > 1 else Const(lo + first_t)
            body = tile(oc0, nm, ow0, nt)
            row += [For(owt, count_t, body)] if count_t > 1 else body
        for e_lo, e_hi in ((0, lo), (hi, ow_n)):
            if e_hi > e_lo:
                row.append(For(owe, e_hi, edge_column(oc0, nm, owe), begin=Const(e_lo)))
        per_block += [For(mbv, count_m, row)] if count_m > 1 else row
    body = [For(ohv, oh_n, per_block)]
    if group > 1:
        body = [For(gv, group, body)]
    return ([Table(wt, table)] if wt is not None else []) + [For(nv, nb, body)]


def _depthwise_planes(k, x, w, bias, nb, c, hh, ww, kh_n, kw_n, ph, pw, L) -> list:
    """A stride-1 depthwise conv whose output has its input's size (the usual
    "same" padding), vectorized over each plane's pixels: in the rows whose
    taps all lie inside the plane, tap (kh, kw) of output p reads input
    p + (kh - ph) * W + (kw - pw) -- contiguous in p -- times a 0/1 mask for the
    columns where that tap falls in the padding. The rows at the top and bottom
    edges, and what is left of the middle rows, are computed one by one."""
    dt = kernel_dtype(k)
    X, Y = param(x), param(k.out, output=True)
    wt, masks = Var("wt", Type(dt)), Var("colmask", Type(dt))
    taps = kh_n * kw_n
    plane = hh * ww
    # The vector region: rows whose taps are all inside the plane, trimmed so that
    # every load (a masked one too) stays inside the plane.
    r_lo, r_hi = ph, max(ph, hh - (kh_n - 1 - ph))
    p_lo = r_lo * ww + pw
    p_hi = max(p_lo, min(r_hi * ww, plane - (kh_n - 1 - ph) * ww - (kw_n - 1 - pw)))
    region = p_hi - p_lo
    cols = (p_lo + np.arange(region)) % ww
    mask = np.stack([((cols + kw - pw >= 0) & (cols + kw - pw < ww)).astype(dt)
                     for kw in range(kw_n)])
    table = w.const.reshape(c, taps)
    nv, cv, pb, pv = Var("n"), Var("ch"), Var("pb"), Var("p")
    base = (nv * c + cv) * plane
    vt = VecType(dt, lanes=L)
    acc, v = Var("vacc", vt), Var("v", Type(dt))
    init = Const(0, dt) if bias is None else param(bias)[cv]
    nblocks = region // L
    body = []
    if nblocks:
        p0 = pb * L + p_lo if p_lo else pb * L
        vec = [Decl(acc, Splat(init, L))]
        for kh in range(kh_n):
            for kw in range(kw_n):
                off = (kh - ph) * ww + (kw - pw)
                src = base + p0 + off if off >= 0 else base + p0 - (-off)
                xv = VecLoad(X, src, L)
                if not mask[kw].all():
                    xv = xv * VecLoad(masks, pb * L + kw * region if kw else pb * L, L)
                vec.append(Assign(acc, xv * wt[cv * taps + (kh * kw_n + kw)], "+="))
        for lane in range(L):
            idx = base + p0 + lane if lane else base + p0
            vec.append(Block([Decl(v, Lane(acc, lane)), *tail(k, v, idx, cv),
                              Assign(Y[idx], v)]))
        body.append(For(pb, nblocks, vec))
    # Every other pixel: each tap checked.
    iy, ix = Var("iy", I64), Var("ix", I64)
    one = [Decl(v, init)]
    for kh in range(kh_n):
        for kw in range(kw_n):
            inside = and_(and_(ge(iy, Const(ph - kh, "int64")), lt(iy, Const(hh + ph - kh, "int64"))),
                          and_(ge(ix, Const(pw - kw, "int64")), lt(ix, Const(ww + pw - kw, "int64"))))
            off = (kh - ph) * ww + (kw - pw)
            src = base + pv + off if off >= 0 else base + pv - (-off)
            one.append(If(inside, [Assign(v, X[src] * wt[cv * taps + (kh * kw_n + kw)], "+=")]))
    one = [Decl(iy, Cast(I64, pv / ww)), Decl(ix, Cast(I64, pv % ww)), *one,
           *tail(k, v, base + pv, cv), Assign(Y[base + pv], v)]
    for lo, hi in ((0, p_lo), (p_lo + nblocks * L, p_hi), (p_hi, plane)):
        if hi > lo:
            body.append(For(pv, hi, [Block(one)], begin=Const(lo)))
    tables = [Table(wt, table)] + ([Table(masks, mask)] if not mask.all() else [])
    return tables + [For(nv, nb, [For(cv, c, body)])]


# -- pooling ------------------------------------------------------------------------------------

def _window_pool(k, kind, attrs) -> list:
    """MaxPool (with its Indices output) and AveragePool over any number of
    spatial axes, as the C emitter: every tap checked against the input, NaN
    taken by max (NumPy's rule), the first maximum's flat index, the average
    over the taps inside the input (or the padded input: count_include_pad)."""
    x = k.ins[0]
    dt = kernel_dtype(k)
    is_float = dt in ("float32", "float64")
    if kind == "avg":
        _float_only(k)
    indices = len(k.outs) > 1 and k.outs[1] is not None
    keys = ("kernel_shape", "strides", "dilations", "pads", "auto_pad", "ceil_mode")
    axes = pool_geometry(x.shape, **{a: v for a, v in attrs.items() if a in keys})
    d = len(axes)
    sizes, outs = [a.size for a in axes], [a.out for a in axes]
    in_plane, out_plane = prod(sizes), prod(outs)
    in_strides = [prod(sizes[i + 1:]) for i in range(d)]
    out_strides = [prod(outs[i + 1:]) for i in range(d)]
    idx_strides = ([prod(sizes[:i]) for i in range(d)] if attrs.get("storage_order", 0)
                   else in_strides)
    X, Y = param(x), param(k.out, output=True)
    pv = Var("p")
    ov = [Var(f"o{i}") for i in range(d)]
    tv = [Var(f"t{i}") for i in range(d)]
    iv = [Var(f"i{i}", I64) for i in range(d)]
    acc, xv, arg = Var("acc", Type(dt)), Var("xv", Type(dt)), Var("arg", I64)
    x_off = sum_of(scaled(Cast(Type("index"), v), st) for v, st in zip(iv, in_strides))
    xe = X[pv * in_plane + x_off]
    if kind == "max":
        if is_float:
            init = Const(float("-inf"), dt)
            bigger = or_(gt(xv, acc), call("isnan", xv))
            take = or_(lt(arg, Const(0, "int64")), and_(bigger, not_(call("isnan", acc)))) \
                if indices else bigger
        else:
            init = Const(int(np.iinfo(np.dtype(dt)).min), dt)
            take = or_(gt(xv, acc), lt(arg, Const(0, "int64"))) if indices else gt(xv, acc)
        flat = Cast(I64, pv * in_plane) + sum_of(scaled(v, st) for v, st in zip(iv, idx_strides))
        step = [Decl(xv, xe), If(take, [Assign(acc, xv)] + ([Assign(arg, flat)] if indices else []))]
    else:
        init = Const(0, dt)
        step = [Assign(acc, xe, "+=")]
    body = step
    for a, o, t, i in reversed(list(zip(axes, ov, tv, iv))):
        first = Cast(I64, o) * a.stride + Cast(I64, t) * a.dilation
        body = [For(t, a.kernel, [
            Decl(i, first - Const(a.pad_begin, "int64") if a.pad_begin else first),
            If(and_(ge(i, Const(0, "int64")), lt(i, Const(a.size, "int64"))), body)])]
    out_idx = pv * out_plane + sum_of(scaled(o, st) for o, st in zip(ov, out_strides))
    per_out = [Decl(acc, init)] + ([Decl(arg, Const(-1, "int64"))] if indices else []) + body
    tables = []
    if kind == "max":
        value = acc
    else:
        include = bool(attrs.get("count_include_pad", 0))
        count = None
        for n_, (a, o) in enumerate(zip(axes, ov)):
            t = Var(f"taps{n_}", Type(dt))
            tables.append(ArrayDecl(t, [Const(float(c_), dt) for c_ in tap_counts(a, include)]))
            count = t[o] if count is None else count * t[o]
        value = acc / count
    v = Var("v", Type(dt))
    per_out += [Decl(v, value), *tail(k, v, out_idx, pv % x.shape[1]), Assign(Y[out_idx], v)]
    if indices:
        per_out.append(Assign(param(k.outs[1], output=True)[out_idx], arg))
    loops = per_out
    for o, n_ in reversed(list(zip(ov, outs))):
        loops = [For(o, n_, loops)]
    return tables + [For(pv, x.shape[0] * x.shape[1], loops)]


@nest("MaxPool")
def max_pool(k, **attrs):
    return _window_pool(k, "max", attrs)


@nest("AveragePool")
def average_pool(k, **attrs):
    return _window_pool(k, "avg", attrs)


@nest("GlobalAveragePool", "GlobalMaxPool")
def global_pool(k):
    _float_only(k)
    x = k.ins[0]
    dt = kernel_dtype(k)
    planes, size = x.shape[0] * x.shape[1], prod(x.shape[2:])
    X, Y = param(x), param(k.out, output=True)
    pv, iv = Var("p"), Var("i")
    acc, xv = Var("acc", Type(dt)), Var("xv", Type(dt))
    if k.node.op == "GlobalMaxPool":
        init = Const(float("-inf"), dt)
        step = [Decl(xv, X[pv * size + iv]), Assign(acc, select(gt(xv, acc), xv, acc))]
        value = acc
    else:
        init = Const(0, dt)
        step = [Assign(acc, X[pv * size + iv], "+=")]
        value = acc / Const(float(size), dt)
    v = Var("v", Type(dt))
    return [For(pv, planes, [Decl(acc, init), For(iv, size, step), Decl(v, value),
                             *tail(k, v, pv, pv % x.shape[1]), Assign(Y[pv], v)])]


# -- data movement ------------------------------------------------------------------------------

def _store(k, idx: Expr, value: Expr) -> list:
    """out[idx] = value, through the fused tail when the kernel has one."""
    out = param(k.out, output=True)
    if not k.node.tail:
        return [Assign(out[idx], value)]
    v = Var("v", Type(kernel_dtype(k)))
    return [Decl(v, value), *tail(k, v, idx), Assign(out[idx], v)]


@nest("Transpose")
def transpose(k, *, perm=None):
    x = k.ins[0]
    rank = len(x.shape)
    perm = list(perm) if perm is not None else list(reversed(range(rank)))
    out_shape = k.out.shape
    loops = [Var(f"i{d}") for d in range(rank)]
    src = sum_of(scaled(v, x.strides[perm[d]]) for d, v in enumerate(loops))
    dst = sum_of(scaled(v, st) for v, st in zip(loops, k.out.strides))
    body = _store(k, dst, param(x)[src])
    for v, size in reversed(list(zip(loops, out_shape))):
        body = [For(v, size, body)]
    return body


@nest("Concat")
def concat(k, *, axis):
    out = k.out
    outer = prod(out.shape[:axis])
    inner = prod(out.shape[axis + 1:])
    row = out.shape[axis] * inner
    Y, o, t = param(out, output=True), Var("o"), Var("t")
    body, offset = [], 0
    for b in k.ins:
        if b is None:
            continue
        chunk = b.shape[axis] * inner
        if chunk:
            body.append(For(t, chunk, _store(k, o * row + offset + t, param(b)[o * chunk + t])))
        offset += chunk
    return [For(o, outer, body)] if body else []


@nest("Gather")
def gather(k, *, axis=0):
    x, ind = k.ins
    a = axis + len(x.shape) if axis < 0 else axis
    outer, dim, inner = prod(x.shape[:a]), x.shape[a], prod(x.shape[a + 1:])
    n = ind.size
    o, j, t = Var("o"), Var("j"), Var("t")
    idx = Var("idx", I64)
    X, Y = param(x), param(k.out, output=True)
    body = [Decl(idx, Cast(I64, param(ind)[j]))]
    if np.dtype(ind.dtype).kind != "u":
        body.append(If(lt(idx, Const(0, "int64")), [Assign(idx, Const(dim, "int64"), "+=")]))
    # An index out of range is the model's error: the kernel fails instead of reading past x.
    body.append(If(not_in_range(idx, dim), [Return(Const(1, "int32"))]))
    src = (o * dim + Cast(Type("index"), idx)) * inner + t
    body.append(For(t, inner, _store(k, (o * n + j) * inner + t, X[src])))
    return [For(o, outer, [For(j, n, body)])]


def not_in_range(v: Var, size: int):
    return or_(lt(v, Const(0, "int64")), ge(v, Const(size, "int64")))


__all__ = ["LOOP_NESTS", "NEST_KNOBS", "nest_knobs", "workload_key"]


@nest("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
def copy(k, **_attrs):
    """A view that had to be materialized (a model output): the bytes, copied."""
    i = Var("i")
    return [For(i, k.out.size, _store(k, i, param(k.ins[0])[i]))]


# The other families' nests register themselves when imported.
from . import loopnests_more, loopnests_seq  # noqa: E402,F401
