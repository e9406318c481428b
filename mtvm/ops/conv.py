"""Convolution (ONNX Conv), NCHW, 1-D to 3-D, float.

Canonical form (after `canonicalize`): kernel_shape, strides, dilations and
explicit pads are attributes and auto_pad is NOTSET, so the IR dump shows the
real geometry. The reference and `infer` still accept every ONNX form.

The C kernel is a direct convolution: loops over batch, group, output channel
and output position, then the accumulation over input channel and kernel taps.
Padding is never materialized: for each output position the range of kernel
taps that fall inside the input is computed once (`kh_lo`..`kh_hi`), so the
MAC loops have no bounds checks. The sliding-window geometry and the small C
writer below are shared with the pooling operators (mtvm/ops/pool.py).
"""
from __future__ import annotations

import itertools
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace

import numpy as np

from ..codegen.cwriter import (VOID, ArrayDecl, Assign, Block, Cast, Comment, Const, Decl,
                               ExprStmt, For, If, Index, LocalArray, PreIf, Raw, RawExpr, Type,
                               Var, and_, call, eq, ge, gt, lt, render_c, select)
from ..codegen.cwriter import call as c_call   # emitters below have a parameter `call`
from ..codegen.cwriter import tail as tail_stmts
from ..errors import ShapeError, UnsupportedError
from . import conv_winograd
from .base import Op, register
from .microkernels import (MR, avx2_c, band_epi_ukernel, band_ukernel, clamp_bounds,
                           clamp_tail, direct_ukernel, gemm_epi_ukernel, gemm_ukernel,
                           gemm_ukernel_offsets, prelude, pwcv_ukernel, vfp_epi_mode)

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
FLOAT_DTYPES = ("float32", "float64")


# -- sliding-window geometry (shared with pool.py) ---------------------------------

def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def resolve_pads(in_sizes, kernel, strides, dilations, pads, auto_pad) -> list[int]:
    """Explicit pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...] for any auto_pad.
    SAME_*: output size ceil(in / stride); the odd pixel goes to the end (UPPER)
    or the beginning (LOWER)."""
    rank = len(in_sizes)
    if auto_pad not in AUTO_PADS:
        raise UnsupportedError(f"auto_pad={auto_pad!r} is not one of {', '.join(AUTO_PADS)}")
    if auto_pad == "NOTSET":
        pads = list(pads) if pads is not None else [0] * (2 * rank)
        if len(pads) != 2 * rank:
            raise ShapeError(f"pads has {len(pads)} values, expected {2 * rank}")
        return [int(p) for p in pads]
    if auto_pad == "VALID":
        return [0] * (2 * rank)
    begin, end = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
        total = max(0, (ceil_div(size, s) - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else big)
        end.append(big if auto_pad == "SAME_UPPER" else small)
    return begin + end


def out_size(size: int, k: int, s: int, d: int, pb: int, pe: int, ceil_mode: int = 0) -> int:
    """Output length of one axis. With ceil_mode, a last window that would start
    in the end padding is dropped (ONNX / PyTorch rule)."""
    span = size + pb + pe - ((k - 1) * d + 1)
    if span < 0:
        raise ShapeError(f"kernel extent {(k - 1) * d + 1} exceeds the padded input ({size}"
                         f" + {pb} + {pe})")
    if not ceil_mode:
        return span // s + 1
    n = ceil_div(span, s) + 1
    if (n - 1) * s >= size + pb:
        n -= 1
    return n


@dataclass
class Axis:
    """One spatial axis of a sliding window: input i = o * stride - pad_begin + k * dilation."""
    name: str            # 'h', 'w', 'd': C variables oh, ih0, kh, kh_lo, ...
    size: int            # input length
    out: int             # output length
    kernel: int
    stride: int
    dilation: int
    pad_begin: int
    pad_end: int

    @property
    def clips_begin(self) -> bool:
        """Some window starts before the input."""
        return self.pad_begin > 0

    @property
    def clips_end(self) -> bool:
        """Some window reaches past the input's end."""
        return self.last_tap >= self.size

    @property
    def last_tap(self) -> int:
        return (self.out - 1) * self.stride - self.pad_begin + (self.kernel - 1) * self.dilation


def make_axes(in_sizes, kernel, strides, dilations, pads, ceil_mode: int = 0) -> list[Axis]:
    rank = len(in_sizes)
    names = {1: "w", 2: "hw", 3: "dhw"}.get(rank) or [f"{i}" for i in range(rank)]
    axes = []
    for i in range(rank):
        pb, pe = pads[i], pads[rank + i]
        o = out_size(in_sizes[i], kernel[i], strides[i], dilations[i], pb, pe, ceil_mode)
        axes.append(Axis(names[i], in_sizes[i], o, kernel[i], strides[i], dilations[i], pb, pe))
    return axes


def window_attrs(x_shape, kernel, strides, dilations, pads, auto_pad):
    """Defaults filled in: (kernel, strides, dilations, explicit pads)."""
    rank = len(x_shape) - 2
    kernel = [int(k) for k in kernel]
    strides = [int(s) for s in strides] if strides is not None else [1] * rank
    dilations = [int(d) for d in dilations] if dilations is not None else [1] * rank
    if not len(kernel) == len(strides) == len(dilations) == rank:
        raise ShapeError(f"kernel_shape {kernel}, strides {strides} and dilations {dilations}"
                         f" must each have {rank} values for input {list(x_shape)}")
    if min(kernel + strides + dilations, default=1) < 1:
        raise ShapeError("kernel_shape, strides and dilations must be >= 1")
    pads = resolve_pads(x_shape[2:], kernel, strides, dilations, pads, auto_pad)
    if min(pads, default=0) < 0:
        raise ShapeError(f"pads {pads} must be >= 0")
    return kernel, strides, dilations, pads


def window_views(x: np.ndarray, axes: list[Axis], fill):
    """(tap, view) for every kernel tap: view[..., o1, o2, ...] is the input value
    that tap reads for each output position (`fill` where it reads padding)."""
    widths = [(0, 0)] * (x.ndim - len(axes))
    for a in axes:
        extra = max(0, a.last_tap + 1 - (a.size + a.pad_end))   # ceil_mode overhang
        widths.append((a.pad_begin, a.pad_end + extra))
    padded = np.pad(x, widths, constant_values=fill)
    lead = (slice(None),) * (x.ndim - len(axes))
    for tap in itertools.product(*[range(a.kernel) for a in axes]):
        idx = tuple(slice(k * a.dilation, k * a.dilation + (a.out - 1) * a.stride + 1, a.stride)
                    for k, a in zip(tap, axes))
        yield tap, padded[lead + idx]


# -- writing C ------------------------------------------------------------------------

def lin(*terms, const: int = 0) -> str:
    """C expression sum(value * coef) + const. A value is a C variable/expression or
    an int (an elided loop's 0); zero terms vanish and unit coefficients are dropped."""
    parts = []
    for value, coef in terms:
        if isinstance(value, int):
            const += value * coef
            continue
        if coef == 0:
            continue
        if coef != 1 and not value.isidentifier():
            value = f"({value})"
        parts.append(value if coef == 1 else f"{value} * {coef}")
    text = " + ".join(parts)
    if const:
        text = f"{text} {'+' if const > 0 else '-'} {abs(const)}" if text else str(const)
    return text or "0"


class CWriter:
    """Indented C lines with `for` loops as context managers. A loop of one trip is
    elided: its variable becomes the int 0, which `lin` folds away."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0

    def line(self, text: str) -> None:
        for part in text.splitlines() or [""]:
            self.lines.append("    " * self.depth + part if part else "")

    @contextmanager
    def loop(self, var: str, count, comment: str = "", start=0):
        """for (int var = start; var < count; ++var); count/start are ints or C exprs."""
        if isinstance(count, int) and isinstance(start, int) and count - start == 1:
            yield start
            return
        note = f"  /* {comment} */" if comment else ""
        self.line(f"for (int {var} = {start}; {var} < {count}; ++{var}) {{{note}")
        self.depth += 1
        yield var
        self.depth -= 1
        self.line("}")

    @contextmanager
    def block(self, head: str, comment: str = ""):
        """head { ... }: an if, a loop of another form, or a bare scope (head "")."""
        note = f"  /* {comment} */" if comment else ""
        self.line(f"{head + ' ' if head else ''}{{{note}")
        self.depth += 1
        yield
        self.depth -= 1
        self.line("}")

    def text(self) -> str:
        return "\n".join(self.lines)


def window_bounds(w: CWriter, a: Axis, o):
    """Declare the window origin and the valid tap range [lo, hi) of axis `a` at
    output coordinate `o` (a loop variable, or 0 when the axis has one output).
    Returns (i0, lo, hi), each an int or a C variable name. Division appears
    only with dilation > 1, by a literal, once per output position."""
    d, k, size = a.dilation, a.kernel, a.size
    if isinstance(o, int):                       # one output: fold in Python
        i0 = o * a.stride - a.pad_begin
        lo = max(0, ceil_div(-i0, d))
        hi = min(k, max(0, ceil_div(size - i0, d)))
        return i0, lo, hi
    i0 = lin((o, a.stride), const=-a.pad_begin)
    if not i0.isidentifier():                   # stride 1, no padding: i0 is o itself
        w.line(f"const int i{a.name}0 = {i0};")
        i0 = f"i{a.name}0"
    lo, hi = 0, k
    if a.clips_begin:
        lo = f"k{a.name}_lo"
        first = f"-{i0}" if d == 1 else f"(-{i0} + {d - 1}) / {d}"
        w.line(f"const int {lo} = {i0} < 0 ? {first} : 0;")
    if a.clips_end:
        hi = f"k{a.name}_hi"
        avail = f"{size} - {i0}" if d == 1 else f"({size} - {i0} + {d - 1}) / {d}"
        w.line(f"const int {hi} = {i0} + {(k - 1) * d} < {size} ? {k} : {avail};")
    return i0, lo, hi


def tap_loops(w: CWriter, axes, windows, x_base: str, x_ctype: str, body) -> None:
    """Nested loops over the valid kernel taps. For each non-innermost axis a row
    (plane, ...) pointer into the input is declared; `body(x_elem, taps, positions)`
    returns the statement(s) for one tap: x_elem is the C expression of the input
    value, positions its input coordinate along each axis."""
    names = ["row", "plane", "cube"]
    ptr, taps, positions = x_base, [], []
    with ExitStack() as loops:
        for i, (a, (i0, lo, hi)) in enumerate(zip(axes, windows)):
            kv = loops.enter_context(w.loop(f"k{a.name}", hi, start=lo))
            taps.append(kv)
            pos = lin((i0, 1), (kv, a.dilation))
            positions.append(pos)
            if i + 1 == len(axes):
                w.line(body(f"{ptr}[{pos}]", taps, positions))
                break
            inner = int(np.prod([b.size for b in axes[i + 1:]]))
            level = len(axes) - 2 - i
            new = f"x_{names[level]}" if level < len(names) else f"x_{i}"
            w.line(f"const {x_ctype}* {new} = {ptr} + {lin((pos, inner))};")
            ptr = new


def check_float(what: str, inputs) -> None:
    for t in inputs:
        if t is not None and np.dtype(t.dtype).name not in FLOAT_DTYPES:
            raise UnsupportedError(f"{what}: dtype {np.dtype(t.dtype).name} is not supported "
                                   f"(float32 and float64 only; quantized models use the "
                                   f"QLinear/integer operators)")


# -- Conv ----------------------------------------------------------------------------

def conv_geometry(x_shape, w_shape, *, auto_pad="NOTSET", dilations=None, group=1,
                  kernel_shape=None, pads=None, strides=None):
    """Validated Conv geometry: (axes, group)."""
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        raise ShapeError(f"X {list(x_shape)} and W {list(w_shape)} must have the same rank >= 3")
    kernel = list(kernel_shape) if kernel_shape is not None else list(w_shape[2:])
    if list(kernel) != list(w_shape[2:]):
        raise ShapeError(f"kernel_shape {list(kernel)} does not match W {list(w_shape)}")
    c, m = x_shape[1], w_shape[0]
    if group < 1 or c % group or m % group or w_shape[1] * group != c:
        raise ShapeError(f"group={group}: X has {c} channels and W {list(w_shape)}; need "
                         f"W[1] * group == {c} and W[0] divisible by group")
    kernel, strides, dilations, pads = window_attrs(x_shape, kernel, strides, dilations,
                                                    pads, auto_pad)
    return make_axes(x_shape[2:], kernel, strides, dilations, pads), group


def _fmt(values) -> str:
    return "x".join(str(v) for v in values)


@register("Conv")
class Conv(Op):
    anchor = True
    # Every schedule stores each output right after its fused tail read the tail's
    # operands at that index: a residual operand's buffer can take the output.
    epilogue_inplace = True

    def canonicalize(self, node, graph, opset):
        x, w = (graph.tensors[n] for n in node.inputs[:2])
        if len(x.shape) < 3 or len(w.shape) < 3:
            return  # `infer` reports the bad rank
        a = node.attrs
        kernel = a.get("kernel_shape", list(w.shape[2:]))
        kernel, strides, dilations, pads = window_attrs(
            x.shape, kernel, a.get("strides"), a.get("dilations"), a.get("pads"),
            a.get("auto_pad", "NOTSET"))
        a.update(kernel_shape=kernel, strides=strides, dilations=dilations, pads=pads)
        a.pop("auto_pad", None)

    def check(self, node, inputs):
        check_float("Conv", inputs)

    def reference(self, x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1,
                  kernel_shape=None, pads=None, strides=None):
        axes, group = conv_geometry(x.shape, w.shape, auto_pad=auto_pad, dilations=dilations,
                                    group=group, kernel_shape=kernel_shape, pads=pads,
                                    strides=strides)
        n, c, m = x.shape[0], x.shape[1], w.shape[0]
        cg, mg = c // group, m // group
        outs = [a.out for a in axes]
        wg = w.astype(np.float64).reshape(group, mg, cg, *w.shape[2:])
        y = np.zeros((n, group, mg, *outs))
        for tap, view in window_views(x.astype(np.float64), axes, 0.0):
            xg = view.reshape(n, group, cg, -1)
            y += np.einsum("ngcp,gmc->ngmp", xg, wg[(..., *tap)]).reshape(y.shape)
        y = y.reshape(n, m, *outs)
        if b is not None:
            y += np.asarray(b, np.float64).reshape((1, m) + (1,) * len(axes))
        return y.astype(x.dtype)

    def infer(self, node, inputs, consts):
        x, w = inputs[0], inputs[1]
        b = inputs[2] if len(inputs) > 2 else None
        axes, _ = conv_geometry(x.shape, w.shape, **node.attrs)
        if b is not None and tuple(b.shape) != (w.shape[0],):
            raise ShapeError(f"bias B {list(b.shape)} must have shape [{w.shape[0]}]")
        return [((x.shape[0], w.shape[0], *[a.out for a in axes]), x.dtype)]

    def macs(self, node, inputs, outputs):
        w = inputs[1]
        return int(outputs[0].size * np.prod(w.shape[1:], dtype=np.int64))

    def inplace_input(self, node, graph):
        """The depthwise and pointwise schedules can write over their input (they
        copy what they still need to scratch first): see emit_conv_depthwise and
        emit_conv_pointwise."""
        x, wt = graph.tensors[node.inputs[0]], graph.tensors[node.inputs[1]]
        y = graph.tensors[node.outputs[0]]
        if wt.data is None or len(x.shape) != 4:
            return None
        axes, group = conv_geometry(x.shape, wt.shape, **node.attrs)
        kind = schedule_of(x, wt, axes, group)
        if kind == "depthwise" and axes[0].out * axes[1].out <= axes[0].size * axes[1].size:
            return 0
        if kind == "pointwise" and x.shape[0] == 1 and group == 1:
            return 0
        return None

    def scratch_bytes(self, k, /, *, auto_pad="NOTSET", dilations=None, group=1,
                      kernel_shape=None, pads=None, strides=None) -> int:
        """What emit() asks for (conv_scratch_bytes); without a schedule (no float
        constant weights) that is the direct conv: none."""
        x, wt = k.ins[0], k.ins[1]
        axes, group = conv_geometry(x.shape, wt.shape, auto_pad=auto_pad, dilations=dilations,
                                    group=group, kernel_shape=kernel_shape, pads=pads,
                                    strides=strides)
        return conv_scratch_bytes(k, x, wt, axes, group)

    def emit(self, k, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
             pads=None, strides=None):
        x, wt = k.ins[0], k.ins[1]
        bias = k.ins[2] if len(k.ins) > 2 else None
        axes, group = conv_geometry(x.shape, wt.shape, auto_pad=auto_pad, dilations=dilations,
                                    group=group, kernel_shape=kernel_shape, pads=pads,
                                    strides=strides)
        return emit_conv_scheduled(k, x, wt, bias, axes, group)


def conv_comment(x, wt, y, axes, group) -> str:
    pads = [a.pad_begin for a in axes] + [a.pad_end for a in axes]
    return (f"/* Conv {len(axes)}-D: x {_fmt(x.shape)} * w {_fmt(wt.shape)} -> y {_fmt(y.shape)};"
            f"\n * stride {_fmt(a.stride for a in axes)}, dilation "
            f"{_fmt(a.dilation for a in axes)}, pads {pads}, group {group} */")


def emit_conv(k, x, wt, bias, axes, group) -> str:
    """Direct convolution: one output value per innermost output position, the
    MACs over input channel and the valid kernel taps, then the fused epilogue."""
    w = CWriter()
    y = k.out
    ct = k.ctype
    n_batch, c_in, m_out = x.shape[0], x.shape[1], wt.shape[0]
    cg, mg = c_in // group, m_out // group
    in_plane = int(np.prod(x.shape[2:], dtype=np.int64))
    out_plane = int(np.prod(y.shape[2:], dtype=np.int64))
    taps = int(np.prod(wt.shape[2:], dtype=np.int64))
    w.line(conv_comment(x, wt, y, axes, group))
    depthwise = cg == 1 and mg == 1 and group > 1
    with w.loop("n", n_batch, "batch") as n, \
            w.loop("g", group, "group = channel (depthwise)" if depthwise else "group") as g, \
            w.loop("mg" if group > 1 else "m", mg, "output channel") as mv:
        m = mv
        if group > 1 and not isinstance(mv, int):
            w.line(f"const int m = {lin((g, mg), (mv, 1))};")
            m = "m"
        elif group > 1:
            m = g
        if bias is not None:
            w.line(f"const {ct} b = {bias.c}[{lin((m, 1))}];")
        emit_conv_positions(w, k, axes, 0, [], dict(
            n=n, g=g, m=m, cg=cg, c_in=c_in, m_out=m_out, in_plane=in_plane,
            out_plane=out_plane, taps=taps, x=x.c, wt=wt.c, ct=ct,
            init="b" if bias is not None else k.lit(0)))
    return w.text()


def emit_conv_positions(w, k, axes, i, windows, p):
    """Loop over output axis i (recursively); at the innermost, one output value."""
    if i < len(axes):
        a = axes[i]
        with w.loop(f"o{a.name}", a.out) as o:
            windows.append((o, window_bounds(w, a, o)))
            emit_conv_positions(w, k, axes, i + 1, windows, p)
            windows.pop()
        return
    ct = p["ct"]
    out_terms = [(p["n"], p["m_out"] * p["out_plane"]), (p["m"], p["out_plane"])]
    stride = p["out_plane"]
    for a, (o, _) in zip(axes, windows):
        stride //= a.out
        out_terms.append((o, stride))
    w.line(f"const int y_idx = {lin(*out_terms)};")
    w.line(f"{ct} acc = {p['init']};")
    with w.loop("c", p["cg"], "input channel of the group") as c:
        chan = lin((p["n"], p["c_in"]), (p["g"], p["cg"]), (c, 1))
        w.line(f"const {ct}* x_c = {p['x']} + {lin((chan, p['in_plane']))};")
        w.line(f"const {ct}* w_c = {p['wt']} + "
               f"{lin((p['m'], p['cg'] * p['taps']), (c, p['taps']))};")
        bounds = [b for _, b in windows]
        tap_loops(w, axes, bounds, "x_c", ct,
                  lambda xe, kv, _: f"acc += {xe} * w_c[{weight_index(axes, kv)}];")
    store_acc(w, k, lin((p["m"], 1)))


def weight_index(axes, taps) -> str:
    strides, s = [], 1
    for a in reversed(axes):
        strides.append(s)
        s *= a.kernel
    return lin(*zip(taps, reversed(strides)))


# -- Schedules ------------------------------------------------------------------------
#
# A float32 2-D Conv with constant weights takes one of three schedules; the
# direct convolution above is the fallback for everything else (1-D/3-D,
# float64, weights computed at run time, fewer than `gemm_min_channels`
# output channels per group, depthwise kernels too large to unroll).
#
#   depthwise   group == channels == outputs: per channel the KHxKW weights
#               are held in registers; per output row the KH input rows are
#               taken from the input or from a zero row (vertical padding), the
#               interior columns run in a loop with all taps written out (gcc
#               vectorizes it on the host), the border columns have only their
#               taps inside the row, decided at compile time.
#   pointwise   1x1, stride 1, no padding: a GEMM y[m][p] = sum_c w[m][c] x[c][p]
#               straight on the input, register-blocked MR channels x NR
#               positions (mtvm/ops/microkernels.py).
#   im2col      any other KxK: blocks of output positions are gathered into
#               scratch planned in the arena (col[tap][position], 0 in the
#               padding), then the same GEMM micro-kernel over all taps.
#
# Weights of the GEMM schedules are re-packed at compile time in the order the
# micro-kernel reads them: per group, per block of MR output channels,
# [tap][MR]. The per-target part (NR, SIMD) is chosen by the C preprocessor
# (c_runtime/kernels/generic/mtvm_f32_prelude.h).

# The knobs of the float Conv schedules and their defaults. They are per kernel:
# the schedules registered in mtvm/schedules/generic/conv_f32.py and
# mtvm/schedules/x86/conv_f32.py put the values chosen for a kernel (defaults,
# overridden by a ScheduleConfig per schedule or per layer) in k.knobs, and
# every function below reads them from there (knobs_of).
DEFAULT_KNOBS = {
    "gemm_mr": MR,                 # output channels per register block (weight packing)
    "gemm_min_channels": 8,        # fewer output channels per group: direct conv
    "im2col_cols": 16,             # output positions per im2col block, at least
    "im2col_max_bytes": 8192,      # grow the block up to this scratch (or the plane)
    "kxk": "window",               # other KxK convs: "window" rows or "im2col"
    "window_min_cols": 8,          # narrower outputs: im2col (fills whole tiles)
    "pointwise_inplace_cols": 16,  # 32: two-vector tiles on AVX-512 (2x scratch; the
                                   #   default where AVX-512 may run: ConvF32.default_knobs)
    "pwcv_max_plane": 144,         # AVX-512 pointwise over output channels on planes up
                                   #   to this many positions that fill the position
                                   #   tiles poorly (pwcv_applies); 0: never
    # x86 only (other targets keep window/im2col, chosen by the preprocessor):
    "direct_min_cols": 17,         # stride 1, output size = input size, outputs of
    "direct_below_cols": 32,       #   17..31 columns: direct (no scratch; AVX-512, band
                                   #   on AVX2); at 16 the band's two rows a tile beat
                                   #   it (ic_resnet8 -17 %)
    "direct_min_taps": 400,        #   and at least this many taps (C/group x KH x KW):
                                   #   the direct kernel's masks and offsets per tile
                                   #   outweigh few channels' FMAs (Zen 5, 3x3: 12, 16
                                   #   and 32 channels 1.3-1.5x faster by band, 48 and
                                   #   64 1.05-1.3x slower)
    "band_below_cols": 32,         # other KxK outputs narrower than this: band
    "band_cols": 0,                # output positions per band, at least one row; 0: the
                                   #   rows that fill the tiles best (band_rows)
    "band_max_bytes": 65536,       # band scratch cap (fewer rows per band)
    "winograd": 1,                 # 1: 3x3 stride-1 one-group layers by Winograd
                                   #   F(4x4, 3x3) (ops/conv_winograd.py; AVX2 code)
    "winograd_min_cols": 16,       #   on outputs this wide at least (8 x 8 with 64
                                   #   channels: 1.6x slower than band; 16 x 16: 1.45x
                                   #   faster, 32 x 32 1.7x; ic_resnet8, AVX2)
    "winograd_tiles": 32,          # its block: about this many 4x4 tiles
    "depthwise_max_taps": 25,      # larger depthwise kernels: direct conv
    "depthwise_max_border": 4,     # border columns written out per side, at most
    "depthwise_avx2_min_cols": 32, # AVX2, 3x3 stride 1: the direct kernel on rows this
                                   # wide at least (conv.depthwise_avx2)
    "depthwise_cv8_max_plane": 128,  # AVX2: planes up to this, eight channels at a time
                                   # (conv.depthwise_cv8)
    "depthwise_direct_max_plane": 4096,  # AVX-512, stride 1, same size, planes up to
                                   # this: direct (its mask table grows with the plane)
}


# The knobs only the x86 variants read (schedules/x86/conv_f32.py declares them).
X86_KNOBS = ("direct_min_cols", "direct_below_cols", "direct_min_taps", "band_below_cols",
             "band_cols", "band_max_bytes", "winograd", "winograd_min_cols", "winograd_tiles")


def knobs_of(k) -> dict:
    """The float Conv knob values of kernel k (DEFAULT_KNOBS overridden by k.knobs)."""
    return {**DEFAULT_KNOBS, **(getattr(k, "knobs", None) or {})}


def schedule_of(x, wt, axes, group, s: dict = DEFAULT_KNOBS) -> str:
    """'depthwise', 'pointwise', 'window', 'im2col' or 'direct' (the table above)
    with knob values s. x, wt: anything with .shape and .dtype; wt's value is
    needed (constant)."""
    c_in, m_out = x.shape[1], wt.shape[0]
    mg = m_out // group
    const = getattr(wt, "const", getattr(wt, "data", None)) is not None
    if not (np.dtype(x.dtype) == np.float32 and const and len(axes) == 2):
        return "direct"
    if group == c_in == m_out and group > 1:
        cols = depthwise_columns(axes[1])
        # a 1-D window's border column is one row of taps: four times as many written
        # out (a dilated 1-D layer's padding: 5 taps at dilation 4 leave 8 columns a
        # side, whose loop nest ran 3 GMAC/s on the AVX-512 host)
        border = s["depthwise_max_border"] * (4 if wt.shape[2] == 1 and axes[0].size == 1
                                              else 1)
        if wt.shape[2] * wt.shape[3] <= s["depthwise_max_taps"] and \
                max(len(cols[0]), len(cols[2])) <= border:
            return "depthwise"
    if mg < s["gemm_min_channels"]:
        return "direct"
    if wt.shape[2] == wt.shape[3] == 1 and \
            all(a.stride == 1 and a.pad_begin == a.pad_end == 0 for a in axes):
        return "pointwise"
    if s["kxk"] == "im2col" or axes[1].out < s["window_min_cols"]:
        return "im2col"
    return "window"


def x86_variant(x, wt, axes, group, s: dict) -> tuple[str | None, str | None] | None:
    """The x86 micro-kernels a Conv gets besides its portable schedule, with knob
    values s: (AVX-512 body, AVX2 body), each "direct" (AVX-512 only), "band",
    "winograd" (AVX2 only) or None (the portable schedule there); None when both
    are (schedules/x86/conv_f32.py)."""
    kind = schedule_of(x, wt, axes, group, s)
    if kind not in ("window", "im2col"):
        return None
    avx512 = None
    if s["direct_min_cols"] <= axes[1].out < s["direct_below_cols"] and \
            wt.shape[2] * wt.shape[3] <= 64 and all(a.stride == 1 and a.out == a.size
                                                    for a in axes) and \
            x.shape[1] // group * wt.shape[2] * wt.shape[3] >= s["direct_min_taps"]:
        avx512 = "direct"
    elif axes[1].out < s["band_below_cols"]:
        avx512 = "band"
    avx2 = "band" if avx512 else None
    # Winograd on AVX2 only: AVX-512's direct and band kernels, at twice the width,
    # beat its 8-lane code (ic_resnet8's 16 x 16 layer 26.5 against 43 us). With fewer
    # than 3 input channels its per-output transform costs more than the 9 MACs a
    # channel it saves (denoise_unet's 1 -> 16 layer 18 -> 27 us).
    if s["winograd"] and axes[1].out >= s["winograd_min_cols"] and x.shape[1] >= 3 and \
            conv_winograd.applies(x, wt, axes, group):
        avx2 = "winograd"
    return (avx512, avx2) if avx512 or avx2 else None


def conv_plan(k, x, wt, axes, group, simd: bool = True) -> tuple[str, tuple | None]:
    """(schedule, x86 variant) that emit_conv_scheduled emits for kernel k: the
    schedule is schedule_of's, or "pointwise_inplace" for a pointwise Conv written
    over its input; the variant is x86_variant's (with simd, and bodies for k's
    target) or None. Emission and the pure scratch size (conv_scratch_bytes) both
    follow this one plan."""
    s = knobs_of(k)
    # Written over its input (k.inplace): the planner allowed that for the schedule the
    # default knobs pick (inplace_input), so that one it is, whatever the knobs say.
    kind = schedule_of(x, wt, axes, group, s if k.inplace is None else DEFAULT_KNOBS)
    if kind == "depthwise":
        return kind, None
    if kind == "pointwise" and k.inplace is not None:
        return "pointwise_inplace", None
    variant = x86_variant(x, wt, axes, group, s) if simd else None
    return kind, variant if variant is not None and x86_bodies(k, variant) else None


def x86_bodies(k, variant: tuple) -> list[tuple[str, str]]:
    """(preprocessor condition, body) pairs an x86 variant (x86_variant's pair) is
    emitted as, in #if / #elif order before the portable #else: "direct" is
    AVX-512's (its masked loads want 16-lane masks) and "winograd" AVX2's (x86
    targets only); a body both share is emitted once. For a known x86 target only
    the one it builds (the rest would be preprocessed away, and their scratch would
    be counted for nothing)."""
    avx512, avx2 = variant
    if avx2 == "winograd" and k.target.is_generic:
        # not in portable C: its scratch (36 transformed values per tile and input
        # channel) would count in the arena of every target built from it
        avx2 = "band" if avx512 else None
        if avx2 is None:
            return []
    if avx512 == avx2:
        both = [("MTVM_F32_AVX512 || MTVM_F32_AVX2", avx2)]
    else:
        both = [(cond, body) for cond, body in (("MTVM_F32_AVX512", avx512),
                                                ("MTVM_F32_AVX2", avx2)) if body]
    if k.target.is_generic:
        return both
    isa = "AVX512" if k.target.has("avx512f") else "AVX2"
    return [(cond, body) for cond, body in both if isa in cond]


def conv_scratch_bytes(k, x, wt, axes, group, simd: bool = True) -> int:
    """The arena scratch emit_conv_scheduled will ask for (k.scratch_bytes), without
    emitting: memory planning needs it before any C exists. The same plan
    (conv_plan), and each path's bytes from the helper its emitter uses; where the
    preprocessor picks one of several bodies (depthwise, the x86 variants),
    the larger of theirs."""
    kind, variant = conv_plan(k, x, wt, axes, group, simd)
    if kind == "depthwise":
        return depthwise_scratch_bytes(k, wt, axes)
    if kind == "pointwise_inplace":
        return pointwise_inplace_bytes(k, x)
    if kind not in ("window", "im2col"):   # pointwise (reads its input), direct: none
        return 0
    ah, aw = axes
    cg, kh_n, kw_n = x.shape[1] // group, wt.shape[2], wt.shape[3]
    s = knobs_of(k)
    if kind == "window":
        portable = window_bytes(aw, cg, kh_n, kw_n)
    else:
        portable = im2col_bytes(cg * kh_n * kw_n, ah.out * aw.out, s)
    bodies = [body for _, body in x86_bodies(k, variant)] if variant is not None else []
    if "winograd" in bodies:
        return max(conv_winograd.scratch_bytes(cg, axes, s, clamp_tail(k) is None), portable)
    if "band" in bodies:
        return max(band_bytes(ah, aw, cg, kh_n, kw_n, s), portable)
    return portable           # the "direct" body has no scratch


def emit_conv_scheduled(k, x, wt, bias, axes, group, simd: bool = True) -> str:
    """Emit the Conv with its schedule (see the table above); with simd, also its
    x86 variant (x86_variant) under its #if (x86_bodies)."""
    kind, variant = conv_plan(k, x, wt, axes, group, simd)
    if kind == "depthwise":
        return emit_conv_depthwise(k, x, wt, bias, axes, depthwise_columns(axes[1]))
    if kind == "pointwise_inplace":
        return emit_conv_pointwise_inplace(k, x, wt, bias, axes)
    if variant is not None:
        return emit_conv_simd_or(k, x, wt, bias, axes, group, kind, x86_bodies(k, variant))
    if kind in ("pointwise", "im2col"):
        return emit_conv_gemm(k, x, wt, bias, axes, group)
    if kind == "window":
        return emit_conv_window(k, x, wt, bias, axes, group)
    return emit_conv(k, x, wt, bias, axes, group)


def store_acc(w, k, channel: str) -> None:
    """C lines: the fused tail (epilogue) on `acc`, then out0[y_idx] = acc."""
    ep = k.epilogue("acc", "y_idx", channel)
    if ep:
        w.line(ep)
    w.line("out0[y_idx] = acc;")


def _unsigned_lt(expr: str, bound: int) -> str:
    """0 <= expr < bound in one comparison."""
    return f"(unsigned)({expr}) < {bound}u"


# -- depthwise ------------------------------------------------------------------------

def depthwise_columns(a: Axis):
    """(left border columns, (lo, hi) interior range, right border columns) of axis a:
    a column is interior when every tap of its window is inside the input."""
    lo = min(a.out, ceil_div(a.pad_begin, a.stride))
    last = a.size - 1 + a.pad_begin - (a.kernel - 1) * a.dilation   # ow * stride <= last
    hi = max(lo, min(a.out, last // a.stride + 1 if last >= 0 else 0))
    return list(range(lo)), (lo, hi), list(range(hi, a.out))


def depthwise_variants(k, axes) -> tuple[bool, bool]:
    """(direct, flat): whether emit_conv_depthwise emits, besides the row schedule,
    the AVX-512 direct one (stride 1, output size = input size, planes up to
    depthwise_direct_max_plane) and the flat one of SIMD hosts (equal strides)."""
    ah, aw = axes
    direct = all(a.stride == 1 and a.out == a.size for a in axes) and \
        ah.size * aw.size <= knobs_of(k)["depthwise_direct_max_plane"]
    return direct, ah.stride == aw.stride


def _depthwise_avx2_ok(k) -> bool:
    """What both AVX2 depthwise kernels need: C that may be built for AVX2 (an x86
    target with it, or target c) but not an AVX-512 target (its #if branch comes
    first), and a tail that is at most a clamp (the kernels store from registers)."""
    return avx2_c(k) and not k.target.has("avx512f") and clamp_tail(k) is not None


def depthwise_avx2(k, wt, axes) -> bool:
    """Whether emit_conv_depthwise emits the AVX2 3x3 stride-1 kernel
    (x86/mtvm_dw3x3_f32_avx2.h): 3x3, stride 1, no dilation, rows of
    depthwise_avx2_min_cols outputs or more (narrower ones keep the flat schedule,
    whose vectors run across rows), where _depthwise_avx2_ok."""
    aw = axes[1]
    return _depthwise_avx2_ok(k) and tuple(wt.shape[2:]) == (3, 3) and \
        aw.out >= knobs_of(k)["depthwise_avx2_min_cols"] and \
        all(a.stride == 1 and a.dilation == 1 for a in axes)


def depthwise_cv8(k, wt, axes) -> bool:
    """Whether emit_conv_depthwise's AVX2 branch is the small-plane kernel eight
    channels at a time (x86/mtvm_dw_f32_cv8_avx2.h): any window of up to 49 taps,
    stride and dilation, planes of at most depthwise_cv8_max_plane input pixels,
    where _depthwise_avx2_ok and the 3x3 kernel (depthwise_avx2) does not take it."""
    return _depthwise_avx2_ok(k) and not depthwise_avx2(k, wt, axes) and \
        _cv8_window_and_plane(k, wt, axes)


def _cv8_window_and_plane(k, wt, axes) -> bool:
    """What the small-plane kernel takes: windows of up to 49 taps, planes of at most
    depthwise_cv8_max_plane input pixels."""
    ah, aw = axes
    return wt.shape[2] * wt.shape[3] <= 49 and \
        ah.size * aw.size <= knobs_of(k)["depthwise_cv8_max_plane"]


def depthwise_cv8_avx512(k, wt, axes) -> bool:
    """Whether emit_conv_depthwise's AVX-512 branch is the small-plane kernel too (the
    AVX2 code, which an AVX-512 host runs): where the direct kernel does not apply
    (a stride, or an output smaller than the input: the flat loop then runs a
    copy-in, a loop and a copy-out per channel) or its plane is one 16-lane tile.
    Per layer on Zen 5, 3x3 with a clamp: 88 channels of 8 x 8 at stride 2 7.2 ->
    5.4 us, 176 of 4 x 4 at stride 1 7.5 -> 5.4 us; but 96 of 8 x 8 at stride 1
    5.5 -> 6.5 us, where the direct kernel's tiles are whole."""
    ah, aw = axes
    direct = depthwise_variants(k, axes)[0]
    return (k.target.is_generic or k.target.has("avx512f")) and \
        clamp_tail(k) is not None and _cv8_window_and_plane(k, wt, axes) and \
        (not direct or ah.out * aw.out <= 16)


def depthwise_cv8_block(axes, kh_n: int, kw_n: int) -> tuple[int, int]:
    """(hp, wp): the bordered input block every tap of every output falls in."""
    return tuple(max(a.pad_begin + a.size, (a.out - 1) * a.stride + (kn - 1) * a.dilation + 1)
                 for a, kn in zip(axes, (kh_n, kw_n)))


def depthwise_cv8_bytes(axes, kh_n: int, kw_n: int) -> int:
    """mtvm_dw_f32_cv8_floats: the block, then the outputs in whole groups of 8."""
    hp, wp = depthwise_cv8_block(axes, kh_n, kw_n)
    return 4 * 8 * (hp * wp + ceil_div(axes[0].out * axes[1].out, 8) * 8)


def depthwise_avx2_bytes(k, axes) -> int:
    """The AVX2 kernel's scratch: a zero row for the vertical padding and, in place, a
    copy of the channel's plane (its output rows overwrite input rows still read)."""
    ah, aw = axes
    return 4 * aw.size + (4 * ah.size * aw.size if k.inplace is not None else 0)


def depthwise_scratch_bytes(k, wt, axes) -> int:
    """emit_conv_depthwise's scratch: the largest of the schedules it emits (the
    preprocessor keeps one). direct implies flat (stride 1 both ways)."""
    direct, flat = depthwise_variants(k, axes)
    sizes = [depthwise_rows_bytes(k, axes)]
    if flat:
        sizes.append(depthwise_flat_bytes(axes, wt.shape[2], wt.shape[3]))
    if direct:
        sizes.append(depthwise_direct_bytes(axes))
    if depthwise_avx2(k, wt, axes):
        sizes.append(depthwise_avx2_bytes(k, axes))
    if depthwise_cv8(k, wt, axes) or depthwise_cv8_avx512(k, wt, axes):
        sizes.append(depthwise_cv8_bytes(axes, wt.shape[2], wt.shape[3]))
    return max(sizes)


def emit_conv_depthwise(k, x, wt, bias, axes, cols) -> str:
    """Up to four schedules, chosen by the C preprocessor: on AVX-512 the small-plane
    kernel (depthwise_cv8_avx512) or the direct one, on AVX2 the 3x3 stride-1 kernel
    (depthwise_avx2) or the small-plane one (depthwise_cv8), on other SIMD hosts
    (MTVM_F32_NR > 4) the flat one (when both strides are equal), else the row one.
    Where AVX-512 and AVX2 take the same kernel it is written once, under both."""
    w = CWriter()
    prelude(k)
    w.line(conv_comment(x, wt, k.out, axes, x.shape[1]))
    direct, flat = depthwise_variants(k, axes)
    on_avx512 = _depthwise_cv8 if depthwise_cv8_avx512(k, wt, axes) else \
        _depthwise_direct if direct else None
    on_avx2 = _depthwise_avx2 if depthwise_avx2(k, wt, axes) else \
        _depthwise_cv8 if depthwise_cv8(k, wt, axes) else None
    choices = [("MTVM_F32_AVX512", on_avx512), ("MTVM_F32_AVX2", on_avx2),
               ("MTVM_F32_NR > 4", _depthwise_flat if flat else None)]
    if on_avx512 is not None and on_avx512 is on_avx2:
        choices[:2] = [("MTVM_F32_AVX512 || MTVM_F32_AVX2", on_avx512)]
    sizes, branches = [], 0
    for cond, emit in choices:
        if emit is not None:
            w.lines.append(f"#{'el' if branches else ''}if {cond}")
            sizes.append(emit(k, w, x, wt, bias, axes))
            branches += 1
    if branches:
        w.lines.append("#else")
    rows_bytes = _depthwise_rows(k, w, x, wt, bias, axes, cols)
    if branches:
        if not rows_bytes:
            w.line("(void)scratch;  /* only the SIMD schedule uses scratch */")
        w.lines.append("#endif")
    k.scratch_bytes = max(sizes + [rows_bytes])
    return w.text()


def _depthwise_avx2(k, w, x, wt, bias, axes) -> int:
    """AVX2, 3x3 stride 1: per channel one call of the kernel, which reads the plane
    (in place: its copy in scratch) and stores the clamped outputs itself."""
    ah, aw = axes
    n_batch, chans = x.shape[0], x.shape[1]
    in_plane, out_plane = ah.size * aw.size, ah.out * aw.out
    lo, hi = clamp_tail(k)
    k.library("mtvm_dw3x3_f32_avx2.h")
    fp, cfp = Type("float32", pointer=True), Type("float32", pointer=True, const=True)
    n, c = Var("n", Type("int32")), Var("c", Type("int32"))
    zero, copy, x_c = Var("zero", fp), Var("plane", fp), Var("x_c", cfp)
    inplace = k.inplace is not None
    w.line("/* Schedule (AVX2): depthwise 3x3 stride 1, read from the plane, stored clamped"
           " (x86/mtvm_dw3x3_f32_avx2.h)"
           + ("; in place, each channel read from its copy in scratch" if inplace else "")
           + ". */")
    body = [Decl(x_c, Var(x.c, cfp) + n * (chans * in_plane) + c * in_plane)]
    if inplace:
        body += [ExprStmt(c_call("memcpy", copy, x_c, RawExpr(f"{in_plane} * sizeof(float)")))]
    bias_c = Var(bias.c, cfp)[c] if bias is not None else RawExpr("0.0f")
    body.append(ExprStmt(c_call(
        "mtvm_dw3x3s1_f32_avx2", copy if inplace else x_c, ah.size, aw.size, ah.pad_begin,
        aw.pad_begin, Var(wt.c, cfp) + c * 9, bias_c, RawExpr(lo), RawExpr(hi),
        Var("out0", fp) + n * (chans * out_plane) + c * out_plane, ah.out, aw.out, zero)))
    stmts = [Decl(zero, RawExpr("(float*)scratch")),
             ExprStmt(c_call("memset", zero, 0, RawExpr(f"{aw.size} * sizeof(float)")))]
    if inplace:
        stmts.append(Decl(copy, zero + aw.size))
    stmts.append(For(n, n_batch, [For(c, chans, body)]))
    w.line(render_c(stmts))
    return depthwise_avx2_bytes(k, axes)


def _depthwise_cv8(k, w, x, wt, bias, axes) -> int:
    """Small planes on AVX2 (and AVX-512) hosts: per group of eight channels one call
    of the kernel, which transposes them into scratch, computes a lane per channel and
    stores the clamped outputs back into their planes (in place too: a group is read
    before it is written)."""
    ah, aw = axes
    n_batch, chans = x.shape[0], x.shape[1]
    kh_n, kw_n = wt.shape[2], wt.shape[3]
    hp, wp = depthwise_cv8_block(axes, kh_n, kw_n)
    in_plane, out_plane = ah.size * aw.size, ah.out * aw.out
    lo, hi = clamp_tail(k)
    k.library("mtvm_dw_f32_cv8_avx2.h")
    fp, cfp = Type("float32", pointer=True), Type("float32", pointer=True, const=True)
    n, g = Var("n", Type("int32")), Var("g", Type("int32"))
    nc = Var("nc", Type("int32", const=True))
    w.line(f"/* Schedule (x86): depthwise, eight channels at a time (a lane each) through a "
           f"bordered\n * {hp}x{wp} block in scratch (x86/mtvm_dw_f32_cv8_avx2.h). */")
    first = (n * chans + g * 8)
    body = [Decl(nc, select(lt(chans - g * 8, 8), chans - g * 8, 8)),
            ExprStmt(c_call(
                "mtvm_dw_f32_cv8_avx2", Var(x.c, cfp) + first * in_plane, in_plane, ah.size,
                aw.size, kh_n, kw_n, ah.stride, aw.stride, ah.dilation, aw.dilation,
                ah.pad_begin, aw.pad_begin, hp, wp, Var(wt.c, cfp) + g * (8 * kh_n * kw_n),
                Var(bias.c, cfp) + g * 8 if bias is not None else RawExpr("NULL"), nc,
                RawExpr(lo), RawExpr(hi), Var("out0", fp) + first * out_plane, out_plane,
                ah.out, aw.out, RawExpr("(float*)scratch")))]
    w.line(render_c([For(n, n_batch, [For(g, ceil_div(chans, 8), body)])]))
    return depthwise_cv8_bytes(axes, kh_n, kw_n)


def _depthwise_direct(k, w, x, wt, bias, axes) -> int:
    """AVX-512, stride 1, output size = input size: per channel, tiles of 16 flat
    positions p = oh * W + ow read straight from the input, tap (kh, kw) at p +
    (kh * dh - ph) * W + kw * dw - pw, the lanes whose tap is padding masked off
    (a table of masks per tile and tap made at compile time: no copy, no border
    code); the channel's result goes to scratch, then bias, epilogue and store (in
    place, the channel's output overwrites only its own input, once it is read)."""
    ah, aw = axes
    n_batch, chans = x.shape[0], x.shape[1]
    kh_n, kw_n = wt.shape[2], wt.shape[3]
    plane = ah.size * aw.size
    tiles = ceil_div(plane, 16)
    p = np.arange(tiles * 16)
    oh, ow = p // aw.size, p % aw.size
    masks, offs = [], []
    for kh in range(kh_n):
        for kw in range(kw_n):
            dy, dx = kh * ah.dilation - ah.pad_begin, kw * aw.dilation - aw.pad_begin
            ok = (p < plane) & (oh + dy >= 0) & (oh + dy < ah.size) & (ow + dx >= 0) & \
                (ow + dx < aw.size)
            masks.append((ok.reshape(tiles, 16) << np.arange(16)).sum(axis=1))
            offs.append(dy * aw.size + dx)
    table = np.stack(masks, axis=1)           # [tile][tap]
    # Interior tiles [t_lo, t_hi): every lane a position, every tap's 16 loads
    # inside the plane, so each tap's mask is its column's (kernel row 0's).
    inside = [16 * t + 16 <= plane and all(0 <= 16 * t + o and 16 * t + o + 16 <= plane
                                             for o in offs) and
              all((table[t, i * kw_n:(i + 1) * kw_n] == table[t, :kw_n]).all()
                  for i in range(kh_n)) for t in range(tiles)]
    t_lo = inside.index(True) if any(inside) else 0
    t_hi = t_lo
    while t_hi < tiles and inside[t_hi]:
        t_hi += 1
    dys = [kh * ah.dilation - ah.pad_begin for kh in range(kh_n)]
    dxs = [kw * aw.dilation - aw.pad_begin for kw in range(kw_n)]
    s_lo, s_hi = _direct_stream_tiles(dys, dxs, aw.size, plane, t_lo, t_hi)
    w.line(f"/* Schedule (AVX-512): depthwise direct. Per channel, tiles of 16 positions\n"
           f" * p = oh * {aw.size} + ow read straight from the input, each tap at a constant "
           f"offset,\n * masked where it is padding (dw_mask[tile][tap]); result to scratch, "
           f"then stored. */")
    w.line(f"static const uint16_t dw_mask[{tiles}][{kh_n * kw_n}] = {{")
    for t in range(tiles):
        w.line("    {" + ", ".join(f"0x{int(v):04x}" for v in table[t]) + "},")
    w.line("};")
    w.line("float* tmp = (float*)scratch;")
    with w.loop("n", n_batch, "batch") as n, w.loop("c", chans, "channel") as c:
        w.line(f"const float* x_c = {x.c} + {lin((n, chans * plane), (c, plane))};")
        _depthwise_weights(w, wt, bias, c, kh_n, kw_n)
        for i in range(kh_n):
            w.line("const __m512 " + ", ".join(f"v{i}_{j} = _mm512_set1_ps(w{i}_{j})"
                                               for j in range(kw_n)) + ";")
        def at(i, j):
            o = offs[i * kw_n + j]
            return f"xt {'-' if o < 0 else '+'} {abs(o)}"
        with w.block(f"for (int t = 0; t < {tiles}; ++t)", "tiles of 16 positions"):
            if s_hi > s_lo:
                _direct_stream(w, dys, dxs, aw.size, s_lo, s_hi)
            if t_hi > t_lo:
                # Interior tiles: plain loads (a masked one costs an extra uop on the FMA
                # ports), the column masks (the same for every kernel row) on the FMAs.
                with w.block(f"if (t >= {t_lo} && t < {t_hi})", "every load inside the plane"):
                    _tile_masks(w, kw_n, True)
                    _direct_tile(w, kh_n, kw_n, lambda i, j: f"_mm512_loadu_ps({at(i, j)})",
                                 True)
            with w.block("else" if t_hi > t_lo else ""):
                _tile_masks(w, kw_n, False)
                _direct_tile(w, kh_n, kw_n, lambda i, j:
                             f"_mm512_maskz_loadu_ps(mk[{i * kw_n + j}], {at(i, j)})", False)
        w.line(f"const int y_c = {lin((n, chans * plane), (c, plane))};")
        with w.loop("q", plane, "bias added above; epilogue, store") as q:
            w.line(f"const int y_idx = {lin(('y_c', 1), (q, 1))};")
            w.line(f"float acc = tmp[{q}];")
            store_acc(w, k, lin((c, 1)))
    return depthwise_direct_bytes(axes)


# Fewest interior tiles worth streaming: the run loads its first vectors before it.
DIRECT_STREAM_MIN_TILES = 3


def _direct_stream_tiles(dys, dxs, width: int, plane: int, t_lo: int, t_hi: int):
    """The interior tiles [s_lo, s_hi) that the depthwise direct schedule streams
    (_direct_stream): for each kernel row (dy) the vector at the tile's position + dy *
    width, the one after it and, if a tap looks left, the one before, all inside the
    plane (no load leaves the tensor); every column shift |dx| < 16. (0, 0) where
    fewer than DIRECT_STREAM_MIN_TILES tiles qualify."""
    if max(abs(d) for d in dxs) >= 16 or not any(dxs):   # one column: nothing to share
        return 0, 0
    before = 16 if min(dxs) < 0 else 0
    run = [t for t in range(t_lo, t_hi)
           if all(16 * t + dy * width - before >= 0 and 16 * t + dy * width + 32 <= plane
                  for dy in dys)]
    if len(run) < DIRECT_STREAM_MIN_TILES:
        return 0, 0
    return run[0], run[-1] + 1    # the conditions hold on an interval of t


def _tile_masks(w, kw_n: int, columns: bool, at: bool = True) -> None:
    """The depthwise direct tile's mask row mk; columns: its column masks m0.. too; at:
    its first input, xt."""
    w.line("const uint16_t* mk = dw_mask[t];" + (" const float* xt = x_c + t * 16;" if at else ""))
    if columns:
        w.line("const __mmask16 " + ", ".join(f"m{j} = mk[{j}]" for j in range(kw_n)) + ";")


def _direct_tile(w, kh_n: int, kw_n: int, tap, masked: bool) -> None:
    """One tile of the depthwise direct schedule into tmp: an accumulator per kernel row
    (shorter dependency chains), tap(i, j) the C of tap (i, j)'s 16 inputs; masked: the
    FMAs take the column masks m0.. (interior tiles), else the loads were masked."""
    w.line(f"__m512 {', '.join(f'a{i}' for i in range(kh_n))};")
    for i in range(kh_n):
        for j in range(kw_n):
            prev = ("_mm512_set1_ps(b)" if i == 0 else "_mm512_setzero_ps()") \
                if j == 0 else f"a{i}"
            fma = f"_mm512_mask3_fmadd_ps(v{i}_{j}, {tap(i, j)}, {prev}, m{j})" if masked \
                else f"_mm512_fmadd_ps(v{i}_{j}, {tap(i, j)}, {prev})"
            w.line(f"a{i} = {fma};")
    sums = "a0"
    for i in range(1, kh_n):
        sums = f"_mm512_add_ps({sums}, a{i})"
    total = " + ".join(f"a{i}" for i in range(kh_n))
    w.line(f"_mm512_storeu_ps(tmp + t * 16, {sums});  /* {total} */")


def _direct_stream(w, dys, dxs, width: int, s_lo: int, s_hi: int) -> None:
    """The depthwise direct schedule's streamed interior tiles, written at the top of
    its tile loop: from tile s_lo to s_hi, per kernel row the tile's vector (c), the
    one before (p) and the one after (n), the row's taps being c shifted by dx lanes
    (valignd) -- one load per kernel row a tile where the plain interior tiles load
    every tap, each 64-byte load unaligned and so crossing a cache line: dscnn's 64
    channels of 24 x 20, 3x3, 7.3 -> 5.2 us a layer on Zen 5. The same FMAs in the
    same order: the same bits. The run ends before the last tile (the last kernel row
    looks down, pad_end >= 0, and the vector after a tile must be in the plane), so the
    loop's own code takes tile s_hi."""
    def shifted(i, j):
        dx = dxs[j]
        if dx == 0:
            return f"c{i}"
        hi, lo, n = (f"c{i}", f"p{i}", 16 + dx) if dx < 0 else (f"n{i}", f"c{i}", dx)
        return (f"_mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512({hi}), "
                f"_mm512_castps_si512({lo}), {n}))")

    def vectors(decl, *names):
        """Declare the rows' vectors name0.. at extra floats from the tile's position."""
        at = {(name, i): lin(("x_c", 1), ("t", 16), const=dy * width + extra)
              for name, extra in names for i, dy in enumerate(dys)}
        loads = [f"{name}{i} = _mm512_loadu_ps({a})" for (name, i), a in at.items()]
        w.line(f"{decl} {', '.join(loads)};")

    before = min(dxs) < 0
    moves = [(f"p{i}", f"c{i}") for i in range(len(dys)) if before] + \
        [(f"c{i}", f"n{i}") for i in range(len(dys))]
    with w.block(f"if (t == {s_lo})", f"tiles {s_lo}..{s_hi - 1} streamed: one load per "
                 f"kernel row a tile, the taps shifted"):
        vectors("__m512", ("c", 0), *([("p", -16)] if before else []))
        with w.block(f"for (; t < {s_hi}; ++t)"):
            _tile_masks(w, len(dxs), True, at=False)
            vectors("const __m512", ("n", 16))
            _direct_tile(w, len(dys), len(dxs), shifted, True)
            w.line(" ".join(f"{a} = {b};" for a, b in moves))   # the next tile's rows


def depthwise_direct_bytes(axes) -> int:
    """_depthwise_direct's scratch: one channel's result, in whole tiles of 16."""
    return 4 * 16 * ceil_div(axes[0].size * axes[1].size, 16)


def _depthwise_weights(w, wt, bias, c, kh_n, kw_n):
    w.line(f"const float* w_c = {wt.c} + {lin((c, kh_n * kw_n))};")
    for i in range(kh_n):
        w.line("const float " + ", ".join(f"w{i}_{j} = w_c[{i * kw_n + j}]"
                                           for j in range(kw_n)) + ";")
    init = f"{bias.c}[{lin((c, 1))}]" if bias is not None else "0.0f"
    w.line(f"const float b = {init};")


def phase_copy(w, dst: str, src: str, size: int, pad: int, s: int, phase: int,
               zero_rest: bool = False) -> None:
    """Copy row `src` (size floats) into `dst` padded by `pad` and split into s
    phases of `phase` floats: padded column c goes to dst[c % s * phase + c / s],
    one strided loop per phase (no division per element). zero_rest: also zero
    the floats of each phase the copy does not write (its padding), rather than
    the caller clearing the whole row first: gcc -march=x86-64-v3 makes that
    memset a `rep stosq`, which cost a stride-2 window schedule 16 % of its time."""
    for b in range(s):
        iw0 = (b - pad) % s
        count = ceil_div(size - iw0, s) if iw0 < size else 0
        at = b * phase + ((iw0 + pad) // s if count else 0)
        if zero_rest and at > b * phase:
            w.line(f"memset({dst} + {b * phase}, 0, {at - b * phase} * sizeof(float));")
        if count:
            w.line(f"for (int j = 0; j < {count}; ++j) {dst}[{lin(('j', 1), const=at)}]"
                   f" = {src}[{lin(('j', s), const=iw0)}];  /* phase {b} */")
        end = (b + 1) * phase
        if zero_rest and at + count < end:
            w.line(f"memset({dst} + {at + count}, 0, {end - at - count} * sizeof(float));")


def _depthwise_flat(k, w, x, wt, bias, axes) -> int:
    """Per channel: the input plane copied into a zero-bordered plane (scratch),
    split into stride x stride phase planes (padded row r, column c go to phase
    (r % s, c % s) at (r / s, c / s)), so that every tap reads consecutive floats
    for consecutive output columns; then ONE loop over flat positions
    f = oh * Wq + ow (the columns past the output width computed and dropped),
    every tap at a constant offset, which gcc vectorizes however narrow the rows
    are; then bias, epilogue and store."""
    ah, aw = axes
    s = aw.stride
    n_batch, chans = x.shape[0], x.shape[1]
    kh_n, kw_n = wt.shape[2], wt.shape[3]
    hp, wp, hq, wq, flat = depthwise_flat_layout(axes, kh_n, kw_n)
    phase = hq * wq
    planes = s * s * phase
    in_plane, out_plane = ah.size * aw.size, ah.out * aw.out
    split = f"\n * split into {s}x{s} stride phases of {hq}x{wq}," if s > 1 else ""
    w.line(f"/* Schedule (SIMD hosts): depthwise, flat. Per channel the plane is copied into\n"
           f" * a zero-bordered {hp}x{wp} plane,{split} then one loop over the {flat} flat\n"
           f" * positions f = oh * {wq} + ow computes all {kh_n * kw_n} taps (columns ow >= "
           f"{aw.out} are\n * dropped); in place, a channel's output only overwrites channels "
           "up to it. */")
    w.line("float* pad = (float*)scratch;")
    w.line(f"float* tmp = pad + {planes};")
    w.line(f"memset(pad, 0, {planes} * sizeof(float));  /* the borders stay 0 */")
    with w.loop("n", n_batch, "batch") as n, w.loop("c", chans, "channel") as c:
        w.line(f"const float* x_c = {x.c} + {lin((n, chans * in_plane), (c, in_plane))};")
        with w.loop("ih", ah.size, "input rows into the plane") as ih:
            src = f"x_c + {lin((ih, aw.size))}"
            if s == 1:
                w.line(f"memcpy(pad + {lin((ih, wp), const=ah.pad_begin * wp + aw.pad_begin)}, "
                       f"{src}, {aw.size} * sizeof(float));")
            else:
                r = lin((ih, 1), const=ah.pad_begin)
                w.line(f"float* row = pad + ({r}) % {s} * {s * phase} + ({r}) / {s} * {wq};")
                w.line(f"const float* x_row = {src};")
                phase_copy(w, "row", "x_row", aw.size, aw.pad_begin, s, phase)
        _depthwise_weights(w, wt, bias, c, kh_n, kw_n)
        w.line(f"for (int f = 0; f < {flat}; ++f) {{  /* vectorized by gcc */")
        w.depth += 1
        w.line("float acc = b;")
        for i in range(kh_n):
            for j in range(kw_n):
                ri, cj = i * ah.dilation, j * aw.dilation
                off = ((ri % s) * s + cj % s) * phase + (ri // s) * wq + cj // s
                w.line(f"acc = MTVM_FMAF(w{i}_{j}, pad[{lin(('f', 1), const=off)}], acc);")
        w.line("tmp[f] = acc;")
        w.depth -= 1
        w.line("}")
        with w.loop("oh", ah.out, "output row") as oh:
            w.line(f"const int y_row = {lin((n, chans * out_plane), (c, out_plane), (oh, aw.out))};")
            w.line(f"const float* t_row = tmp + {lin((oh, wq))};")
            with w.loop("ow", aw.out, "output column") as ow:
                w.line(f"const int y_idx = {lin(('y_row', 1), (ow, 1))};")
                w.line(f"float acc = t_row[{lin((ow, 1))}];")
                store_acc(w, k, lin((c, 1)))
    return depthwise_flat_bytes(axes, kh_n, kw_n)


def depthwise_flat_layout(axes, kh_n: int, kw_n: int):
    """_depthwise_flat's plane: (hp, wp) the zero-bordered plane every tap of every
    output fits in, (hq, wq) one of its stride x stride phase planes, and `flat`
    the flat positions f = oh * wq + ow computed (the last is the last output)."""
    ah, aw = axes
    s = aw.stride
    wp = max(aw.pad_begin + aw.size, (aw.out - 1) * s + (kw_n - 1) * aw.dilation + 1)
    hp = max(ah.pad_begin + ah.size, (ah.out - 1) * s + (kh_n - 1) * ah.dilation + 1)
    wq, hq = ceil_div(wp, s), ceil_div(hp, s)
    return hp, wp, hq, wq, (ah.out - 1) * wq + aw.out


def depthwise_flat_bytes(axes, kh_n: int, kw_n: int) -> int:
    """_depthwise_flat's scratch: the s * s phase planes, then the flat results."""
    _, _, hq, wq, flat = depthwise_flat_layout(axes, kh_n, kw_n)
    return 4 * (axes[1].stride ** 2 * hq * wq + flat)


def depthwise_rows_bytes(k, axes) -> int:
    """_depthwise_rows' scratch: in place, a copy of one input channel and, with vertical
    padding, a zero row after it; else none."""
    if k.inplace is None:
        return 0
    ah, aw = axes
    return 4 * (ah.size + (1 if ah.clips_begin or ah.clips_end else 0)) * aw.size


def _depthwise_rows(k, w, x, wt, bias, axes, cols) -> int:
    ah, aw = axes
    n_batch, chans = x.shape[0], x.shape[1]
    kh_n, kw_n = wt.shape[2], wt.shape[3]
    in_plane, out_plane = ah.size * aw.size, ah.out * aw.out
    left, (lo, hi), right = cols
    scratch = depthwise_rows_bytes(k, axes)
    w.line("/* Schedule: depthwise. Per channel the weights live in registers; per output\n"
           " * row the window rows come from the input or a zero row (vertical padding);\n"
           f" * columns {lo}..{hi - 1} have every tap inside the row (a loop gcc vectorizes),"
           f"\n * the {len(left) + len(right)} border column(s) only their inside taps. */")
    clip_rows = ah.clips_begin or ah.clips_end
    # Scalar FPUs (Cortex-M, RISC-V), strided windows: interior columns two a step, the
    # values their windows share loaded once (fomo_mbv2's stride-2 3x3 layers -6 % on the
    # M4). At stride 1 the pair's 12 values, 9 weights and 2 sums spill on the M4's FPU
    # (+3 %), and SIMD hosts keep the loop gcc vectorizes.
    pair_columns = (k.target.is_arm or k.target.is_riscv) and aw.stride >= 2 and \
        aw.stride < (kw_n - 1) * aw.dilation + 1
    if clip_rows and k.inplace is None:
        w.line(f"static const float zero_row[{aw.size}] = {{ 0.0f }};")
    if k.inplace is not None:
        w.line("/* In place (out0 == in0): each input channel is copied to scratch before\n"
               " * its output, which overwrites only this and earlier channels, is written. */")
        if clip_rows:
            # the zero row in scratch too: every row pointer is then based on the restrict
            # scratch, which out0's stores cannot reach, and gcc keeps the window's loads
            # in registers across columns (a static row could be any store's target)
            w.line(f"float* zero_row = memset((float*)scratch + {in_plane}, 0, {4 * aw.size});")
    with w.loop("n", n_batch, "batch") as n, w.loop("c", chans, "channel") as c:
        src = f"{x.c} + {lin((n, chans * in_plane), (c, in_plane))}"
        if k.inplace is not None:
            k.library("mtvm_copy.h")
            w.line("float* x_c = (float*)scratch;")
            w.line(f"mtvm_copy(x_c, {src}, {in_plane} * sizeof(float));")
        else:
            w.line(f"const float* x_c = {src};")
        _depthwise_weights(w, wt, bias, c, kh_n, kw_n)
        used = set(range(kw_n)) if lo < hi else {
            j for ow in list(left) + list(right) for j in range(kw_n)
            if 0 <= ow * aw.stride - aw.pad_begin + j * aw.dilation < aw.size}
        if len(used) < kw_n:   # only border columns, which some taps never reach
            w.line(" ".join(f"(void)w{i}_{j};" for i in range(kh_n) for j in range(kw_n)
                            if j not in used))
        with w.loop("oh", ah.out, "output row") as oh:
            ih0 = lin((oh, ah.stride), const=-ah.pad_begin)
            w.line(f"const int ih0 = {ih0};")
            for i in range(kh_n):
                ih = lin(("ih0", 1), const=i * ah.dilation)
                if clip_rows:
                    w.line(f"const float* r{i} = {_unsigned_lt(ih, ah.size)} ? "
                           f"x_c + {lin((ih, aw.size))} : zero_row;")
                else:
                    w.line(f"const float* r{i} = x_c + {lin((ih, aw.size))};")
            w.line(f"const int y_row = {lin((n, chans * out_plane), (c, out_plane), (oh, aw.out))};")

            def column(ow, taps):
                iw = ow * aw.stride - aw.pad_begin if isinstance(ow, int) else \
                    lin((ow, aw.stride), const=-aw.pad_begin)
                terms = [f"acc = MTVM_FMAF(w{i}_{j}, r{i}[{lin((iw, 1), const=j * aw.dilation)}],"
                         f" acc);" for i in range(kh_n) for j in taps]
                w.line("float acc = b;")
                for t in terms:
                    w.line(t)
                w.line(f"const int y_idx = {lin(('y_row', 1), (ow, 1))};")
                store_acc(w, k, lin((c, 1)))

            def border(ow):
                taps = [j for j in range(kw_n)
                        if 0 <= ow * aw.stride - aw.pad_begin + j * aw.dilation < aw.size]
                w.line(f"{{  /* border column {ow} */")
                w.depth += 1
                column(ow, taps)
                w.depth -= 1
                w.line("}")

            def pairs():
                """Two interior columns a step, each value the two windows share loaded
                once (at stride 2 and a 3-wide window, 15 loads for 18 taps): the same
                multiply-adds in the same order as column()."""
                f32, i32 = Type("float32"), Type("int32", const=True)
                ow = Var("ow", Type("int32"))
                iw = lin(("ow", aw.stride), const=-aw.pad_begin)
                offs = sorted({j * aw.dilation + d for j in range(kw_n) for d in (0, aw.stride)})
                v = {(i, o): Var(f"v{i}_{o}", Type("float32", const=True))
                     for i in range(kh_n) for o in offs}
                body = [Comment("interior columns, two a step: the values both windows "
                                "read loaded once")]
                body += [Decl(v[i, o], Index(Var(f"r{i}"), RawExpr(lin((iw, 1), const=o))))
                         for i in range(kh_n) for o in offs]
                sums = [Var(f"acc{q}", f32) for q in range(2)]
                for q, d in enumerate((0, aw.stride)):
                    body.append(Decl(sums[q], Var("b")))
                    body += [Assign(sums[q], c_call("MTVM_FMAF", Var(f"w{i}_{j}"),
                                                    v[i, j * aw.dilation + d], sums[q]))
                             for i in range(kh_n) for j in range(kw_n)]
                acc, y_idx = Var("acc", f32), Var("y_idx", i32)
                for q in range(2):
                    body.append(Block([Decl(acc, sums[q]),
                                       Decl(y_idx, RawExpr(lin(("y_row", 1), ("ow", 1), const=q))),
                                       *tail_stmts(k, acc, y_idx, RawExpr(lin((c, 1)))),
                                       Assign(Index(Var("out0"), y_idx), acc)]))
                npairs = (hi - lo) // 2
                w.line(render_c(For(ow, lo + 2 * npairs, body, begin=lo, step=2)))
                if (hi - lo) % 2:
                    border(hi - 1)        # the last interior column: all its taps inside

            for ow in left:
                border(ow)
            if hi > lo and pair_columns:
                pairs()
            elif hi > lo:
                w.line(f"for (int ow = {lo}; ow < {hi}; ++ow) {{  /* interior columns */")
                w.depth += 1
                column("ow", range(kw_n))
                w.depth -= 1
                w.line("}")
            for ow in right:
                border(ow)
    return scratch


# -- GEMM schedules (pointwise, im2col) -----------------------------------------------

# The plans whose kernels read the weights laid out by packed_weights (the float Conv
# schedules' weight_layout); depthwise and direct read them as the model has them.
PACKED_PLANS = ("pointwise", "pointwise_inplace", "im2col", "window")


def packed_weights(w: np.ndarray, group: int, mr: int) -> np.ndarray:
    """W[m][c][kh][kw] -> per group, per block of mr output channels, [tap][mr]; the
    block of channels g*mg + m0.. starts at element (g*mg + m0) * taps."""
    m_out = w.shape[0]
    mg = m_out // group
    w3 = np.asarray(w, np.float32).reshape(group, mg, -1)
    blocks = [w3[g, m0:m0 + mr].T.ravel() for g in range(group) for m0 in range(0, mg, mr)]
    return np.ascontiguousarray(np.concatenate(blocks))


def laid_out_weights(k, mr: int):
    """The kernel's weights as packed_weights laid them out for block size mr (by the
    weight-layout step, mtvm.codegen.weight_layout, before emission)."""
    wp = k.ins[1]
    assert 1 in k.plain_ins and wp.shape == (k.plain(1).size,), \
        f"{k.fname}: the conv's weights were not laid out (weight_layout) for mr={mr}"
    return wp


def im2col_block(taps: int, positions: int, s: dict = DEFAULT_KNOBS) -> int:
    """Output positions per im2col block: a multiple of 16 (the widest NR)."""
    nb = max(s["im2col_cols"], s["im2col_max_bytes"] // (4 * taps) // 16 * 16)
    return min(nb, ceil_div(positions, 16) * 16)


def im2col_bytes(taps: int, positions: int, s: dict = DEFAULT_KNOBS) -> int:
    """emit_conv_gemm's im2col scratch: col[tap][j] for one block of positions."""
    return 4 * taps * im2col_block(taps, positions, s)


def emit_conv_gemm(k, x, wt, bias, axes, group, header: bool = True) -> str:
    ah, aw = axes
    y = k.out
    w = CWriter()
    n_batch, c_in, m_out = x.shape[0], x.shape[1], wt.shape[0]
    cg, mg = c_in // group, m_out // group
    kh_n, kw_n = wt.shape[2], wt.shape[3]
    taps = cg * kh_n * kw_n
    in_plane, out_plane = ah.size * aw.size, ah.out * aw.out
    mr = knobs_of(k)["gemm_mr"]
    pointwise = kh_n == kw_n == 1 and all(a.stride == 1 and a.pad_begin == a.pad_end == 0
                                          for a in axes)
    wp = laid_out_weights(k, mr)
    if header:
        w.line(conv_comment(x, wt, y, axes, group))
    isas = pwcv_isas(k, x, wt, group) if pointwise else []
    pwcv = "avx512" in isas   # (then the AVX-512 band below is not emitted)
    if pointwise:
        w.line(f"/* Schedule: pointwise GEMM, y[m][p] = sum_c w[m][c] x[c][p] over the {taps}"
               f"\n * input channels; register blocks of {mr} output channels x MTVM_F32_NR"
               f"\n * positions; weights packed [channel block][c][{mr}]. */")
        if isas:
            w.line(pwcv_comment(isas))
    else:
        nb = im2col_block(taps, out_plane, knobs_of(k))
        k.scratch_bytes = im2col_bytes(taps, out_plane, knobs_of(k))
        w.line(f"/* Schedule: im2col GEMM. Blocks of {nb} output positions are gathered into\n"
               f" * scratch col[t][j], t = (c, kh, kw) ({taps} taps, 0 in the padding), then\n"
               f" * register blocks of {mr} output channels x MTVM_F32_NR positions run the\n"
               f" * micro-kernel over all taps; weights packed [channel block][t][{mr}]. */")
        w.line("float* col = (float*)scratch;")
    for n, g in _batch_group_loops(w, n_batch, group):
        w.line(f"const float* x_g = {x.c} + {lin((n, c_in * in_plane), (g, cg * in_plane))};")
        p = dict(n=n, g=g, mg=mg, m_out=m_out, out_plane=out_plane, taps=taps, wp=wp.c)
        if pointwise:
            outer, w = w, (CWriter() if isas else w)   # the position tiles: isas' #else
            blocks = _channel_blocks(mg, mr)
            for m0, rows, count in blocks:
                with channel_block(w, count, rows) as mb:
                    m0e = lin((mb, rows), const=m0)
                    w.line(f"const float* w_blk = {wp.c} + {lin((g, mg * taps), (m0e, taps))};")
                    # AVX-512 (unless the channel-vector tiles took it): tiles of 32
                    # positions, two vectors per row (the one-vector kernel is bound by its
                    # loads): the band micro-kernel with the input channels as its
                    # "channels", one tap each.
                    if not pwcv:
                        w.lines.append("#if MTVM_F32_AVX512")
                        w.line(render_c(ArrayDecl(Var("tap0", Type("int32", const=True)), (0,))))
                        _position_tiles(w, k, bias, p, rows, m0e, out_plane, "32",
                                        f"{band_ukernel(k, rows)}({taps}, {in_plane}, 1, tap0, "
                                        "w_blk, x_g + p, np, tile);",
                                        f"{taps}, {in_plane}, 1, tap0, w_blk, x_g + p", band=True)
                        w.lines.append("#else")
                    _position_tiles(w, k, bias, p, rows, m0e, out_plane, "MTVM_F32_NR",
                                    f"{gemm_ukernel(k, rows)}({taps}, w_blk, x_g + p, "
                                    f"{in_plane}, np, tile);",
                                    f"{taps}, w_blk, x_g + p, {in_plane}")
                    if not pwcv:
                        w.lines.append("#endif")
            if isas:
                other, w = w.text(), outer
                w.line(render_c(_pwcv_branches(
                    k, bias, p, taps, m_out, wp, lambda pos: Var("x_g") + pos,
                    lambda n: in_plane, out_plane, isas, other)))
            continue
        w.line(f"for (int p0 = 0; p0 < {out_plane}; p0 += {nb}) {{  /* blocks of positions */")
        w.depth += 1
        _emit_im2col(w, ah, aw, cg, kh_n, kw_n, nb, in_plane, out_plane)
        for m0, rows, count in _channel_blocks(mg, mr):
            with channel_block(w, count, rows) as mb:
                m0e = lin((mb, rows), const=m0)
                w.line(f"const float* w_blk = {wp.c} + {lin((g, mg * taps), (m0e, taps))};")
                w.line(f"for (int j = 0; j < {nb} && p0 + j < {out_plane}; "
                       "j += MTVM_F32_NR) {")
                w.depth += 1
                w.line(f"const int np = {out_plane} - p0 - j < MTVM_F32_NR ? "
                       f"{out_plane} - p0 - j : MTVM_F32_NR;")
                w.line("/* full tiles: col holds zeros past the last position */")
                _tile_or_epi(w, k, bias, p, rows, m0e, "p0 + j",
                             f"{gemm_ukernel(k, rows)}({taps}, w_blk, col + j, {nb}, "
                             "MTVM_F32_NR, tile);", f"{taps}, w_blk, col + j, {nb}")
                w.depth -= 1
                w.line("}")
        w.depth -= 1
        w.line("}")
    return w.text()


# The channel-vector pointwise (mtvm_pwcv_f32_x86.h) per x86 ISA: its #if, positions a
# tile at most (the accumulators: 2 x 12 of AVX-512's 32 zmm registers, 2 x 6 of AVX2's 16
# ymm), output channels a block (two vectors), the position tiles' width beyond one vector
# of positions (the two-vector band of AVX-512, MTVM_F32_NR 16 on AVX2), and the least
# gain, taps x (1 / position_fill - 1), that pays for its transposes and (in place) its
# copies (per layer on the Zen 5 host: AVX2 gained from 29 up -- 88 -> 176 on 6 x 6, 9.97
# -> 8.97 us -- and lost at 17: 72 -> 72 on 13 x 3, 3.54 -> 3.73).
PWCV_ISAS = {"avx512": ("MTVM_F32_AVX512", 12, 32, 32, 16),
             "avx2": ("MTVM_F32_AVX2", 6, 16, 16, 24)}
PWCV_MIN_GAIN_TILE = 64   # a tail other than a clamp stores each output from a tile in C


def position_fill(plane: int, isa: str = "avx512") -> float:
    """The share of lanes the position tiles of a pointwise GEMM compute on: one vector
    of 16 positions on planes up to 16, else the ISA's wider tiles (AVX-512: 32)."""
    width = 16 if plane <= 16 else PWCV_ISAS[isa][3]
    return plane / (ceil_div(plane, width) * width)


def cv_applies(k, group: int, mg: int, taps: int, positions: int, isa: str = "avx512",
               mr: int | None = None) -> bool:
    """Whether tiles of `positions` consecutive output positions with `taps` taps an
    output are computed over output channels on `isa` (mtvm_pwcv_f32_x86.h): one group,
    whole blocks of 8 output channels (mg) packed as gemm_mr 8 (mr: that value if not
    k's), where the ISA's code may run, at most pwcv_max_plane positions that the position
    tiles fill poorly, where the FMAs saved pay for the transposes (PWCV_ISAS)."""
    s = knobs_of(k)
    runs = k.target.is_generic or (k.target.has("avx512f") if isa == "avx512" else
                                   k.target.has("avx2", "fma") and not k.target.has("avx512f"))
    if not (group == 1 and (mr or s["gemm_mr"]) == 8 and mg % 8 == 0 and runs and
            positions <= s["pwcv_max_plane"]):
        return False
    gain = taps * (1 / position_fill(positions, isa) - 1)
    return gain >= (PWCV_ISAS[isa][4] if clamp_tail(k) is not None else PWCV_MIN_GAIN_TILE)


def pwcv_applies(k, x, wt, group, isa: str = "avx512", mr: int | None = None) -> bool:
    """cv_applies for a pointwise Conv's plane: a MobileNet's last layers (3 x 3 to
    10 x 10 planes, 48 input channels or more). Per layer on the Zen 5 host, AVX-512:
    88 -> 176 on 5 x 5 3.83 -> 3.36 us, 88 -> 88 on 10 x 10 7.11 -> 6.83; 16 -> 96 on
    9 x 11 slower (1.41 -> 1.55: the gain rule leaves it)."""
    return cv_applies(k, group, wt.shape[0], x.shape[1], int(np.prod(x.shape[2:])), isa, mr)


def pwcv_isas(k, x, wt, group) -> list[str]:
    """The ISAs whose #if branch runs the channel-vector pointwise (pwcv_applies)."""
    return [isa for isa in PWCV_ISAS if pwcv_applies(k, x, wt, group, isa)]


def pwcv_comment(isas) -> str:
    names = " and ".join({"avx512": "AVX-512", "avx2": "AVX2"}[i] for i in isas)
    return (f"/* {names}: the plane's few positions in tiles, each vector output channels\n"
            " * (mtvm_pwcv_f32_x86.h): the position tiles would leave most lanes idle. */")


def pwcv_tiles(plane: int, most: int = PWCV_ISAS["avx512"][1]) -> tuple[int, int, int]:
    """(positions a tile, full tiles, positions of the last, shorter one or 0): as few
    tiles as `most` positions a tile allow, each of the size that even split gives
    (rounded up), the remainder in one last tile (100 at most 12: 8 of 12 and one of 4)."""
    per = ceil_div(plane, ceil_div(plane, most))
    return per, plane // per, plane % per


def _cv_tiles(k, bias, p, taps, m_out, wp, isa, positions, operands, y_pos,
              copy=None) -> list:
    """Statements of the GEMM over output channels on `isa` (mtvm_pwcv_f32_x86.h) for
    `positions` consecutive output positions: per tile of them (pwcv_tiles), blocks of two
    vectors of output channels (the last one shorter) by mtvm_f32_pwcv[8]_<n>, its epilogue
    in registers where the tail is a clamp (clamp_tail), else its tile stored through the
    fused tail. operands(pos, n, a): the kernel's arguments up to its input (a: the
    block's packed weights); y_pos(pos): the tile's first flat output position (C);
    copy(pos, n): statements run first per tile (the in-place copy)."""
    _, most, block, _, _ = PWCV_ISAS[isa]
    per, full, last = pwcv_tiles(positions, most)
    clamp = clamp_tail(k)
    plane = p["out_plane"]
    i32, ci32, f32 = Type("int32"), Type("int32", const=True), Type("float32")
    mb, nm, r, m = Var("mb", i32), Var("nm", ci32), Var("r", i32), Var("m", ci32)

    def tile(pos, n) -> list:
        fn = pwcv_ukernel(k, n, clamp is not None, isa)
        args = operands(pos, n, Var(wp.c) + mb * taps)
        y = RawExpr(lin((p["n"], m_out * plane), ("mb", plane), (y_pos(pos), 1)))
        body = [Decl(nm, select(lt(Const(m_out) - mb, block), Const(m_out) - mb, block))]
        if clamp is not None:
            b = Var(bias.c) + mb if bias is not None else RawExpr("NULL")
            body.append(ExprStmt(call(fn, *args, b, RawExpr(clamp[0]), RawExpr(clamp[1]),
                                      Var("out0") + y, plane)))
        else:
            t, q, acc, idx = Var("tile", f32), Var("q", i32), Var("acc", f32), Var("y_idx", ci32)
            row = RawExpr(lin((p["n"], m_out * plane), ("m", plane), (y_pos(pos), 1)))
            value = Index(t, q * block + r)
            if bias is not None:
                value = value + Index(Var(bias.c), m)
            body += [LocalArray(t, n * block), ExprStmt(call(fn, *args, t)),
                     For(r, nm, [Decl(m, mb + r), For(q, n, [
                         Decl(idx, row + q), Decl(acc, value),
                         *tail_stmts(k, acc, idx, m), Assign(Index(Var("out0"), idx), acc)])])]
        return (copy(pos, n) if copy is not None else []) + \
            [For(mb, m_out, body, step=block)]
    out = []
    if full:
        out.append(For(Var("p", i32), full * per, tile(Var("p", i32), per), step=per))
    if last:
        out.append(Block(tile(Const(full * per), last)))
    return out


def _pwcv(k, bias, p, taps, m_out, wp, x_at, ldx, plane, isa, copy=None) -> list:
    """The pointwise GEMM over output channels (_cv_tiles) of a plane: x_at(pos) a tile's
    first input, ldx(n) floats between its input channels."""
    tap0 = Var("tap0", Type("int32", const=True))
    if isa == "avx512":
        def operands(pos, n, a):
            return [taps, 1, ldx(n), tap0, a, 8 * taps, Var("nm"), x_at(pos)]
    else:
        def operands(pos, n, a):
            return [taps, a, 8 * taps, Var("nm"), x_at(pos), ldx(n)]
    stmts = _cv_tiles(k, bias, p, taps, m_out, wp, isa, plane, operands,
                      lambda pos: render_c(pos), copy)
    return ([ArrayDecl(tap0, (0,))] if isa == "avx512" else []) + stmts


def _pwcv_branches(k, bias, p, taps, m_out, wp, x_at, ldx, plane, isas, other: str,
                   copy=None) -> list:
    """#if per ISA of isas (nested: each #else the next), each _pwcv, the last #else
    `other` (the position tiles' C)."""
    out = [Raw(other)]
    for isa in reversed(isas):
        out = [PreIf(PWCV_ISAS[isa][0], _pwcv(k, bias, p, taps, m_out, wp, x_at, ldx, plane,
                                              isa, copy), out)]
    return out


def _position_tiles(w, k, bias, p, rows, m0e, positions, width, call, epi_args=None,
                    band=False):
    """The pointwise GEMM's loop over tiles of `width` positions p."""
    w.line(f"for (int p = 0; p < {positions}; p += {width}) {{  /* positions */")
    w.depth += 1
    w.line(f"const int np = {positions} - p < {width} ? {positions} - p : {width};")
    _tile_or_epi(w, k, bias, p, rows, m0e, "p", call, epi_args, width, band=band)
    w.depth -= 1
    w.line("}")


def _batch_group_loops(w, n_batch: int, group: int):
    """Yields once, inside the batch and group loops, their variables."""
    with w.loop("n", n_batch, "batch") as n, w.loop("g", group, "group") as g:
        yield n, g


@contextmanager
def channel_block(w, count: int, rows: int):
    """The loop over `count` blocks of `rows` output channels (a braced block when
    it has one trip, so its declarations stay local)."""
    if count == 1:
        w.line(f"{{  /* a block of {rows} output channels */")
        w.depth += 1
        yield 0
        w.depth -= 1
        w.line("}")
        return
    with w.loop("mb", count, f"blocks of {rows} output channels") as mb:
        yield mb


def _channel_blocks(mg: int, mr: int):
    """(first channel, rows, number of blocks): the full blocks of mr, then the rest."""
    out = []
    if mg // mr:
        out.append((0, mr, mg // mr))
    if mg % mr:
        out.append((mg // mr * mr, mg % mr, 1))
    return out


def _tile_or_epi(w, k, bias, p, rows, m0e, pos, gemm_call, epi_args, width="MTVM_F32_NR",
                 offsets=False, band=False):
    """The rows x np tile at position `pos`: gemm_call (C, into `tile`) then bias, tail
    and store (_store_tile). Where the tail allows it (clamp_tail), an epilogue kernel
    instead, its arguments `epi_args` (C: the kernel's up to `n`) storing to out0 itself:
    with band, the band's (the caller's code is x86's); else, on AVX2 only, the GEMM's
    (taps, a, b, then ldb or with offsets the tap table)."""
    x86 = band or avx2_c(k)
    clamp = clamp_tail(k) if epi_args is not None and x86 else None
    if clamp is None:
        vfp = None if epi_args is None or band else \
            _vfp_epilogue(k, bias, p, rows, m0e, pos, epi_args, width, offsets)
        tile = w if vfp is None else CWriter()
        tile.line(f"float tile[{rows} * {width}];")
        tile.line(gemm_call)
        _store_tile(tile, k, bias, p, rows, m0e, pos, width)
        if vfp is not None:   # Arm FPUs: full tiles in registers, partial ones the tile
            other = [Raw(tile.text())]
            w.lines += render_c([PreIf("defined(MTVM_GEMM_F32_VFP)",
                                       [If(eq(Var("np"), 4), vfp, [Block(other)])], other)],
                                w.depth).splitlines()
        return
    m = lin((p["g"], p["mg"]), (m0e, 1))
    y0 = lin((p["n"], p["m_out"] * p["out_plane"]), (m, p["out_plane"]))
    b = f"{bias.c} + {m}" if bias is not None else "NULL"
    args = [epi_args, "np", b, *clamp, f"out0 + {y0} + {pos}", p["out_plane"]]
    name = band_epi_ukernel(k, rows) if band else gemm_epi_ukernel(k, rows, offsets)
    epi = render_c([ExprStmt(call(name, *(RawExpr(str(a)) for a in args)))])
    if band:
        w.line(epi)
        return
    other = CWriter()
    _tile_or_epi(other, k, bias, p, rows, m0e, pos, gemm_call, None, width)
    w.lines += render_c([PreIf("MTVM_F32_AVX2", [Raw(epi)], [Raw("\n".join(other.lines))])],
                        w.depth).splitlines()


VFP_INLINE_TAPS = 16   # up to this many taps the VFP epilogue kernel is inlined (see below)


def _vfp_epilogue(k, bias, p, rows, m0e, pos, epi_args, width, offsets=False) -> list | None:
    """Statements computing a full tile of rows x 4 positions with the Arm VFP epilogue
    kernel (mtvm_f32_gemm_rows_<mode>[_off]_vfp: four rows a block, the bias and a Relu or
    Relu6 in registers, the rows stored from them); epi_args: taps, a, b and ldb or the
    offsets. None where it does not apply: not an Arm target with an FPU, no bias, rows
    not a multiple of 4, a tail other than a Relu or a Clip from 0 (vfp_epi_mode)."""
    mode = vfp_epi_mode(k)
    if mode is None or bias is None or rows % 4 or width != "MTVM_F32_NR" or \
            not (k.target.is_arm and k.target.fpu):
        return None
    taps, a, b, ldb = (e.strip() for e in epi_args.split(",", 3))
    k.library("mtvm_gemm_f32_vfp.h")
    m = lin((p["g"], p["mg"]), (m0e, 1))
    y0 = lin((p["n"], p["m_out"] * p["out_plane"]), (m, p["out_plane"]))
    if str(taps).isdigit() and int(taps) <= VFP_INLINE_TAPS:
        # few taps: each 4-row block inlined (mtvm_f32_gemm_4x4[_off]_epi_vfp; out of
        # line in -Os builds), its constants folded: the out-of-line call's 30-odd
        # instructions a tile were 5 % of an 8-tap layer (mbv2_v11's 8 -> 48 expansion
        # 1.035 M against 0.98 M; 7.4 KB more code in that model)
        block = f"mtvm_f32_gemm_4x4{'_off' if offsets else ''}_epi_vfp"
        const = f"MTVM_F32_EPI_{mode[0].upper()}"
        return [ExprStmt(c_call(block, *(RawExpr(str(e)) for e in (
            taps, f"{a} + {4 * g}", rows, b, ldb, f"{bias.c} + {m} + {4 * g}", const,
            mode[1], f"out0 + {y0} + {pos} + {4 * g * p['out_plane']}", p["out_plane"]))))
            for g in range(rows // 4)]
    name = f"mtvm_f32_gemm_rows_{mode[0]}{'_off' if offsets else ''}_vfp"
    return [ExprStmt(c_call(name, *(RawExpr(str(e)) for e in (
        taps, a, rows, b, ldb, f"{bias.c} + {m}", mode[1], f"out0 + {y0} + {pos}",
        p["out_plane"], rows))))]


def _store_tile(w, k, bias, p, rows, m0e, pos, width="MTVM_F32_NR"):
    """Bias, fused epilogue and store of the rows x np tile (rows `width` floats
    apart) at position `pos`."""
    with w.loop("r", rows, "rows of the tile") as r:
        m = lin((p["g"], p["mg"]), (m0e, 1), (r, 1))
        w.line(f"const int m = {m};")
        w.line(f"const int y_row = {lin((p['n'], p['m_out'] * p['out_plane']), ('m', p['out_plane']))}"
               f" + {pos};")
        if bias is not None:
            w.line(f"const float b = {bias.c}[m];")
        if k.target.is_arm and width == "MTVM_F32_NR":
            # a whole row of the tile (MTVM_F32_NR is 4 on Arm) written out: the loop's
            # compare, branch and index were a fifth of the epilogue (fomo_mbv2's 8 -> 48
            # expansion on the M4); gcc -O2 does not unroll it
            w.line(render_c(_tile_row_arm(k, bias is not None, r)))
        else:
            w.line("for (int q = 0; q < np; ++q) {")
            w.depth += 1
            w.line("const int y_idx = y_row + q;")
            tile = "tile[q]" if r == 0 else f"tile[{r} * {width} + q]"
            w.line(f"float acc = {tile}{' + b' if bias is not None else ''};")
            store_acc(w, k, "m")
            w.depth -= 1
            w.line("}")


def _tile_row_arm(k, with_bias: bool, r) -> If:
    """Row r of a 4-wide tile (Arm's MTVM_F32_NR): a whole row's four values written
    out, a partial one in a loop; each value plus the bias b, the fused tail, stored at
    out0[y_row + q]."""
    f32, i32 = Type("float32"), Type("int32", const=True)
    acc, y_idx, q = Var("acc", f32), Var("y_idx", i32), Var("q", Type("int32"))
    out, tile = Var("out0", Type("float32", pointer=True)), Var("tile", f32)

    def value(qe):
        at = tile[RawExpr(lin((r, 4), const=qe) if isinstance(qe, int) else
                          lin((r, 4), ("q", 1)))]
        return [Decl(y_idx, Var("y_row") + qe), Decl(acc, at + Var("b") if with_bias else at),
                *tail_stmts(k, acc, y_idx, Var("m")), Assign(Index(out, y_idx), acc)]
    return If(eq(Var("np"), 4), [Block(value(qv)) for qv in range(4)],
              [For(q, Var("np"), value(q))])


def _emit_im2col(w, ah, aw, cg, kh_n, kw_n, nb, in_plane, out_plane):
    """col[t * nb + j] = input value of tap t = (c, kh, kw) at output position p0 + j."""
    taps = cg * kh_n * kw_n
    w.line(f"/* im2col of positions p0..p0+{nb - 1}; past the last position: zeros */")
    w.line(f"int oh = p0 / {aw.out}, ow = p0 % {aw.out};")
    w.line(f"for (int j = 0; j < {nb}; ++j) {{")
    w.depth += 1
    w.line("float* col_j = col + j;")
    w.line(f"if (p0 + j >= {out_plane}) {{")
    w.line(f"    for (int t = 0; t < {taps}; ++t) col_j[t * {nb}] = 0.0f;")
    w.line("    continue;")
    w.line("}")
    w.line(f"const int ih0 = {lin(('oh', ah.stride), const=-ah.pad_begin)}, "
           f"iw0 = {lin(('ow', aw.stride), const=-aw.pad_begin)};")
    with w.loop("c", cg, "input channel") as c:
        w.line(f"const float* x_c = x_g + {lin((c, in_plane))};")
        w.line(f"float* col_c = col_j + {lin((c, kh_n * kw_n * nb))};")
        with w.loop("kh", kh_n, "kernel row") as kh:
            ih = lin(("ih0", 1), (kh, ah.dilation))
            clip = ah.clips_begin or ah.clips_end
            if clip:
                w.line(f"if ({_unsigned_lt(ih, ah.size)}) {{")
                w.depth += 1
            w.line(f"const float* x_row = x_c + {lin((ih, aw.size))};")
            with w.loop("kw", kw_n, "kernel column") as kw:
                iw = lin(("iw0", 1), (kw, aw.dilation))
                dst = f"col_c[{lin((kh, kw_n * nb), (kw, nb))}]"
                if aw.clips_begin or aw.clips_end:
                    w.line(f"{dst} =\n    {_unsigned_lt(iw, aw.size)} ? x_row[{iw}] : 0.0f;")
                else:
                    w.line(f"{dst} = x_row[{iw}];")
            if clip:
                w.depth -= 1
                w.line("} else {  /* a padding row */")
                w.depth += 1
                with w.loop("kw", kw_n) as kw:
                    w.line(f"col_c[{lin((kh, kw_n * nb), (kw, nb))}] = 0.0f;")
                w.depth -= 1
                w.line("}")
    w.line(f"if (++ow == {aw.out}) {{ ow = 0; ++oh; }}")
    w.depth -= 1
    w.line("}")


# -- window rows ----------------------------------------------------------------------

def window_row_layout(aw: Axis, kw_n: int):
    """Scratch layout of one zero-padded input row, split into `stride` phases so that
    every tap reads consecutive floats for consecutive output columns: padded
    position i goes to phase i % stride, index i // stride.
    Returns (phase length, row length, offset of tap kw within the row)."""
    s, d = aw.stride, aw.dilation
    span = max(aw.size + aw.pad_begin, (aw.out - 1) * s + (kw_n - 1) * d + 1)
    plen = ceil_div(span, s)
    return plen, s * plen, [(kw * d) % s * plen + (kw * d) // s for kw in range(kw_n)]


def window_bytes(aw: Axis, cg: int, kh_n: int, kw_n: int) -> int:
    """emit_conv_window's scratch: the cg * kh_n input rows of one output row's
    window, each laid out as window_row_layout says."""
    return 4 * cg * kh_n * window_row_layout(aw, kw_n)[1]


def kernel_const(k, name: str, value: np.ndarray):
    """A compile-time table the kernel reads (emitted with the weights): its Buf."""
    const = k.graph.add_const(name, value)
    buf = replace(k.ins[1], c=f"in{len(k.ins)}", name=const, shape=value.shape,
                  dtype=value.dtype, const=value)
    k.ins.append(buf)
    return buf


def emit_conv_window(k, x, wt, bias, axes, group, header: bool = True) -> str:
    ah, aw = axes
    y = k.out
    w = CWriter()
    n_batch, c_in, m_out = x.shape[0], x.shape[1], wt.shape[0]
    cg, mg = c_in // group, m_out // group
    kh_n, kw_n = wt.shape[2], wt.shape[3]
    taps = cg * kh_n * kw_n
    in_plane, out_plane = ah.size * aw.size, ah.out * aw.out
    mr = knobs_of(k)["gemm_mr"]
    plen, row_len, kw_off = window_row_layout(aw, kw_n)
    rows = cg * kh_n
    k.scratch_bytes = window_bytes(aw, cg, kh_n, kw_n)
    wp = laid_out_weights(k, mr)
    off = np.array([r * row_len + kw_off[j] for r in range(rows) for j in range(kw_n)],
                   np.int32)
    ob = kernel_const(k, f"{wt.name}_tap_offsets", off)
    if header:
        w.line(conv_comment(x, wt, y, axes, group))
    phases = f", split into {aw.stride} stride phases" if aw.stride > 1 else ""
    w.line(f"/* Schedule: window rows GEMM. Per output row, the {rows} input rows of its\n"
           f" * window (c, kh) are copied to scratch zero-padded to {row_len} floats{phases};\n"
           f" * then register blocks of {mr} output channels x MTVM_F32_NR columns run the\n"
           f" * micro-kernel over the {taps} taps, tap t reading win + {ob.c}[t] (a table made\n"
           f" * at compile time); weights packed [channel block][t][{mr}]. */")
    w.line("float* win = (float*)scratch;")
    for n, g in _batch_group_loops(w, n_batch, group):
        w.line(f"const float* x_g = {x.c} + {lin((n, c_in * in_plane), (g, cg * in_plane))};")
        p = dict(n=n, g=g, mg=mg, m_out=m_out, out_plane=out_plane)
        with w.loop("oh", ah.out, "output row") as oh:
            w.line(f"const int ih0 = {lin((oh, ah.stride), const=-ah.pad_begin)};")
            with w.loop("c", cg, "input channel") as c, w.loop("kh", kh_n, "kernel row") as kh:
                w.line(f"float* dst = win + {lin((c, kh_n * row_len), (kh, row_len))};")
                ih = lin(("ih0", 1), (kh, ah.dilation))
                clip = ah.clips_begin or ah.clips_end
                if clip:
                    w.line(f"if ({_unsigned_lt(ih, ah.size)}) {{")
                    w.depth += 1
                src = f"x_g + {lin((c, in_plane), (ih, aw.size))}"
                if aw.stride == 1:
                    pb, pe = aw.pad_begin, row_len - aw.pad_begin - aw.size
                    if pb:
                        w.line(f"memset(dst, 0, {pb} * sizeof(float));")
                    w.line(f"memcpy(dst + {pb}, {src}, {aw.size} * sizeof(float));")
                    if pe:
                        w.line(f"memset(dst + {pb + aw.size}, 0, {pe} * sizeof(float));")
                else:
                    w.line(f"const float* x_row = {src};")
                    phase_copy(w, "dst", "x_row", aw.size, aw.pad_begin, aw.stride, plen,
                               zero_rest=True)
                if clip:
                    w.depth -= 1
                    w.line("} else {  /* a padding row */")
                    w.line(f"    memset(dst, 0, {row_len} * sizeof(float));")
                    w.line("}")
            for m0, rows_b, count in _channel_blocks(mg, mr):
                with channel_block(w, count, rows_b) as mb:
                    m0e = lin((mb, rows_b), const=m0)
                    w.line(f"const float* w_blk = {wp.c} + {lin((g, mg * taps), (m0e, taps))};")
                    nr_call = (f"{gemm_ukernel_offsets(k, rows_b)}({taps}, w_blk, win + ow, "
                               f"{ob.c}, np, tile);")
                    epi = f"{taps}, w_blk, win + ow, {ob.c}"
                    if aw.out <= 16:
                        _window_columns(w, k, bias, p, rows_b, m0e, oh, aw.out, "MTVM_F32_NR",
                                        nr_call, epi)
                        continue
                    # AVX-512: 32 columns per tile, two vectors per row (the one-vector
                    # kernel is bound by its loads): the band micro-kernel over one
                    # "channel" whose taps are the window's.
                    w.lines.append("#if MTVM_F32_AVX512")
                    _window_columns(w, k, bias, p, rows_b, m0e, oh, aw.out, "32",
                                    f"{band_ukernel(k, rows_b)}(1, 0, {taps}, {ob.c}, w_blk, "
                                    "win + ow, np, tile);",
                                    f"1, 0, {taps}, {ob.c}, w_blk, win + ow", band=True)
                    w.lines.append("#else")
                    _window_columns(w, k, bias, p, rows_b, m0e, oh, aw.out, "MTVM_F32_NR",
                                    nr_call, epi)
                    w.lines.append("#endif")
    return w.text()


def _window_columns(w, k, bias, p, rows, m0e, oh, ow_n, width, call, epi_args=None,
                    band=False):
    """The window schedule's loop over tiles of `width` columns of output row oh. On Arm
    FPUs, where the row is at least a tile wide and the fused tail reads nothing
    (clamp_bounds), the last tile is the row's last `width` columns, overlapping the one
    before -- the columns it computes again get the same bits (each column's own sum) -- so
    that every tile is whole: a partial one takes the C micro-kernel and the tile's loop (a
    10-column row on the Cortex-M4F: its last two columns at 13 instructions a MAC,
    against 1.2). On x86 a partial tile is a masked vector, no slower than a whole one."""
    w.line(f"for (int ow = 0; ow < {ow_n}; ow += {width}) {{  /* columns */")
    w.depth += 1
    if k.target.is_arm and k.target.fpu and width == "MTVM_F32_NR" and \
            clamp_bounds(k) is not None:
        ow, wd = Var("ow"), RawExpr(width)
        w.line(render_c(If(and_(gt(ow + wd, ow_n), ge(Const(ow_n), wd)),
                           [Comment("the last tile overlaps"), Assign(ow, Const(ow_n) - wd)])))
    w.line(f"const int np = {ow_n} - ow < {width} ? {ow_n} - ow : {width};")
    _tile_or_epi(w, k, bias, p, rows, m0e, lin((oh, ow_n), ("ow", 1)), call, epi_args, width,
                 offsets=True, band=band)
    w.depth -= 1
    w.line("}")


# -- band (x86 hosts: AVX-512, AVX2) ------------------------------------------------
#
# Narrow outputs (fewer than 16 columns) fill only part of a 16-lane tile in the
# window schedule (an 8-column row: half), and the one-vector micro-kernel is
# bound by its loads. The band schedule takes a band of output rows as one flat
# run of positions p = i * OW + ow (so 4 rows of 8 make 32 lanes, two full
# vectors), gathers per (input channel, kw) the input rows the band needs,
# shifted by kw and sampled at the column stride, into scratch, and runs the
# two-vector micro-kernel (microkernels.band_ukernel): tap (c, kh, kw) reads
# col + c * cs + off[kh][kw] + p, every kh of one phase sharing the same rows.

def band_layout(ah: Axis, aw: Axis, kh_n: int, kw_n: int, rows: int):
    """Scratch layout of one input channel for a band of `rows` output rows:
    per kw, per vertical stride phase f used by some kh, rows + q_max(f) gathered
    input rows of OW floats (input row (oh0 + r) * s + f - pad, column
    ow * sw - padw + kw * dw). Returns (floats per kw block, floats per channel,
    offset of tap (kh, kw) in tap order, {phase: (first float, rows)})."""
    s, d, ow_n = ah.stride, ah.dilation, aw.out
    phases = {}
    for kh in range(kh_n):
        f, q = kh * d % s, kh * d // s
        phases[f] = max(phases.get(f, 0), q)
    layout, at = {}, 0
    for f in sorted(phases):
        layout[f] = (at, rows + phases[f])
        at += (rows + phases[f]) * ow_n
    off = [kw * at + layout[kh * d % s][0] + kh * d // s * ow_n
           for kh in range(kh_n) for kw in range(kw_n)]
    return at, kw_n * at, off, layout


BAND_TILE = 32        # positions per band micro-kernel call: two 16-float vectors
BAND_MAX_TILES = 5    # the automatic band size looks this far (160 positions)


def band_vectors(oh_n: int, ow_n: int, rows: int) -> float:
    """Vector units the band micro-kernel spends per output position when the plane is
    cut into bands of `rows` rows: a whole tile is two, a partial one two when it holds
    more than 16 positions, else one -- counted 1.25, as a one-vector tile is bound by
    its broadcasts. A 20-column row alone fills 20 of 32 lanes; 8 rows, five whole
    tiles."""
    total = 0.0
    for r0 in range(0, oh_n, rows):
        full, rem = divmod(min(rows, oh_n - r0) * ow_n, BAND_TILE)
        total += 2 * full + (0 if rem == 0 else 1.25 if rem <= BAND_TILE // 2 else 2)
    return total / (oh_n * ow_n)


def band_rows(ah: Axis, aw: Axis, cg: int, kh_n: int, kw_n: int,
              s: dict = DEFAULT_KNOBS) -> int:
    """Output rows per band. band_cols > 0: that many positions (at least a row);
    0 (the default): from the fewest rows filling a tile up to BAND_MAX_TILES tiles,
    the fewest rows whose tiles waste no more than 2 % beyond the least waste
    (band_vectors). Fewer rows where the scratch would pass band_max_bytes."""
    def fits(rows):
        return 4 * cg * band_layout(ah, aw, kh_n, kw_n, rows)[1] <= s["band_max_bytes"]

    if s["band_cols"]:
        rows = max(1, min(ah.out, s["band_cols"] // aw.out))
    else:
        least = max(1, min(ah.out, BAND_TILE // aw.out))
        most = max(least, min(ah.out, BAND_MAX_TILES * BAND_TILE // aw.out))
        cost = {r: band_vectors(ah.out, aw.out, r)
                for r in range(least, most + 1) if r == least or fits(r)}
        low = min(cost.values())
        rows = min(r for r, c in cost.items() if c <= low * 1.02)
    while rows > 1 and not fits(rows):
        rows -= 1
    return rows


def band_bytes(ah: Axis, aw: Axis, cg: int, kh_n: int, kw_n: int,
               s: dict = DEFAULT_KNOBS) -> int:
    """_conv_band's scratch: cg channels of a band of band_rows rows (band_layout)."""
    rows = band_rows(ah, aw, cg, kh_n, kw_n, s)
    return 4 * cg * band_layout(ah, aw, kh_n, kw_n, rows)[1]


def _band_gather_row(w, aw: Axis, kw_n: int, ks: int) -> None:
    """dst[kw * ks + ow] = x_row[ow * sw - padw + kw * dw] (0 outside the row), with
    each kw's valid columns [lo, hi) known at compile time."""
    for kw in range(kw_n):
        first = kw * aw.dilation - aw.pad_begin          # input column of ow = 0
        lo = min(aw.out, max(0, ceil_div(-first, aw.stride)))
        hi = max(lo, min(aw.out, (aw.size - 1 - first) // aw.stride + 1)) \
            if aw.size - 1 - first >= 0 else lo
        at = kw * ks
        if lo:
            w.line(f"memset(dst + {at}, 0, {lo} * sizeof(float));")
        if hi > lo:
            src = lin((lo, aw.stride), const=first)
            if aw.stride == 1:
                w.line(f"memcpy(dst + {at + lo}, x_row + {src}, {hi - lo} * sizeof(float));")
            else:
                w.line(f"for (int j = 0; j < {hi - lo}; ++j) dst[{lin(('j', 1), const=at + lo)}]"
                       f" = x_row[{lin(('j', aw.stride), const=int(src))}];")
        if aw.out > hi:
            w.line(f"memset(dst + {at + hi}, 0, {aw.out - hi} * sizeof(float));")


def _conv_band(k, w, x, wp, bias, axes, group, kh_n, kw_n, avx512: bool = True) -> int:
    """The band schedule's body (packed weights wp as for window/im2col); returns
    its scratch bytes. avx512: whether the body may run on AVX-512 (its #if), where the
    tiles may go over output channels (cv_applies)."""
    ah, aw = axes
    n_batch, c_in, m_out = x.shape[0], x.shape[1], k.out.shape[1]
    cg, mg = c_in // group, m_out // group
    taps = cg * kh_n * kw_n
    in_plane, out_plane = ah.size * aw.size, ah.out * aw.out
    mr = knobs_of(k)["gemm_mr"]
    rows = band_rows(ah, aw, cg, kh_n, kw_n, knobs_of(k))
    ks, cs, off, layout = band_layout(ah, aw, kh_n, kw_n, rows)
    band = rows * aw.out
    w.line(f"/* Schedule (x86): band GEMM. Bands of {rows} output rows ({band} flat\n"
           f" * positions p = i * {aw.out} + ow); per input channel and kw the band's input rows\n"
           f" * are gathered into scratch ({cs} floats per channel, 0 in the padding), then\n"
           f" * register blocks of {mr} output channels x 32 positions run the micro-kernel,\n"
           f" * tap (c, kh, kw) reading col + c * {cs} + band_off[kh * {kw_n} + kw] + p. */")
    w.line(f"static const int32_t band_off[{kh_n * kw_n}] = {{"
           f"{', '.join(str(o) for o in off)}}};")
    w.line("float* col = (float*)scratch;")
    clip_top = ah.pad_begin > 0
    last_oh0 = (ah.out - 1) // rows * rows
    clip_bottom = any((last_oh0 + n - 1) * ah.stride + f - ah.pad_begin >= ah.size
                      for f, (_, n) in layout.items())
    for n, g in _batch_group_loops(w, n_batch, group):
        w.line(f"const float* x_g = {x.c} + {lin((n, c_in * in_plane), (g, cg * in_plane))};")
        p = dict(n=n, g=g, mg=mg, m_out=m_out, out_plane=out_plane)
        w.line(f"for (int oh0 = 0; oh0 < {ah.out}; oh0 += {rows}) {{  /* bands of rows */")
        w.depth += 1
        if ah.out % rows:
            w.line(f"const int nb = ({ah.out} - oh0 < {rows} ? {ah.out} - oh0 : {rows})"
                   f" * {aw.out};")
        else:
            w.line(f"const int nb = {band};")
        with w.loop("c", cg, "gather: input channel") as c:
            w.line(f"const float* x_c = x_g + {lin((c, in_plane))};")
            for f, (at, nrows) in layout.items():
                with w.loop("r", nrows, f"input rows of phase {f}" if ah.stride > 1
                            else "input rows") as r:
                    ih = lin(("oh0", ah.stride), (r, ah.stride), const=f - ah.pad_begin)
                    w.line(f"const int ih = {ih};")
                    w.line(f"float* dst = col + {lin((c, cs), (r, aw.out), const=at)};")
                    if clip_top or clip_bottom:
                        w.line(f"if ({_unsigned_lt('ih', ah.size)}) {{")
                        w.depth += 1
                    w.line(f"const float* x_row = x_c + ih * {aw.size};")
                    _band_gather_row(w, aw, kw_n, ks)
                    if clip_top or clip_bottom:
                        w.depth -= 1
                        w.line("} else {  /* a padding row */")
                        w.depth += 1
                        for kw in range(kw_n):
                            w.line(f"memset(dst + {kw * ks}, 0, {aw.out} * sizeof(float));")
                        w.depth -= 1
                        w.line("}")
        # AVX-512: the band's tiles over output channels where its 32-position tiles fill
        # poorly (a ResNet's 3x3 layers on 10 x 10, 7 x 7, 5 x 5 planes)
        cv = avx512 and cv_applies(k, group, mg, taps, band)
        outer = w
        if cv:
            w = CWriter()   # the position tiles below: the #else of the AVX-512 branch
        for m0, rows_b, count in _channel_blocks(mg, mr):
            with channel_block(w, count, rows_b) as mb:
                m0e = lin((mb, rows_b), const=m0)
                w.line(f"const float* w_blk = {wp.c} + {lin((g, mg * taps), (m0e, taps))};")
                w.line("for (int j = 0; j < nb; j += 32) {  /* tiles of 32 positions */")
                w.depth += 1
                w.line("const int np = nb - j < 32 ? nb - j : 32;")
                args = f"{cg}, {cs}, {kh_n * kw_n}, band_off, w_blk, col + j"
                _tile_or_epi(w, k, bias, p, rows_b, m0e, lin(("oh0", aw.out), ("j", 1)),
                             f"{band_ukernel(k, rows_b)}({args}, np, tile);", args, "32",
                             band=True)
                w.depth -= 1
                w.line("}")
        if cv:   # AVX-512: the band's positions in tiles, output channels in the vectors
            tiles, w = w.text(), outer

            def operands(pos, n, a):
                return [cg, kh_n * kw_n, cs, Var("band_off"), a, 8 * taps, Var("nm"),
                        Var("col") + pos]

            def cv_tiles(positions):
                return _cv_tiles(k, bias, p, taps, mg, wp, "avx512", positions, operands,
                                 lambda pos: lin(("oh0", aw.out), (render_c(pos), 1)))
            last = ah.out % rows * aw.out
            body = [ExprStmt(Cast(Type(VOID), Var("nb"))), *cv_tiles(band)] if not last else \
                [If(eq(Var("nb"), band), cv_tiles(band), cv_tiles(last))]
            w.line(render_c(PreIf("MTVM_F32_AVX512", body, [Raw(tiles)])))
        w.depth -= 1
        w.line("}")
    return band_bytes(ah, aw, cg, kh_n, kw_n, knobs_of(k))


def _conv_direct(k, w, x, wp, bias, axes, group, kh_n, kw_n) -> int:
    """The direct schedule's body (no scratch): per block of output channels, tiles
    of 32 flat positions of the plane (microkernels.direct_ukernel)."""
    ah, aw = axes
    n_batch, c_in, m_out = x.shape[0], x.shape[1], k.out.shape[1]
    cg, mg = c_in // group, m_out // group
    taps = cg * kh_n * kw_n
    plane = ah.size * aw.size
    mr = knobs_of(k)["gemm_mr"]
    w.line(f"/* Schedule (AVX-512): direct GEMM on the flat plane. Per block of {mr} output\n"
           f" * channels, tiles of 32 positions p = oh * {aw.size} + ow (any rows): tap (c, kh, kw)"
           f"\n * reads the input at p + (kh * {ah.dilation} - {ah.pad_begin}) * {aw.size} + "
           f"kw * {aw.dilation} - {aw.pad_begin},\n * masked where it is padding; no copy. */")
    geometry = (f"{cg}, {plane}, {aw.size}, {kh_n}, {kw_n}, {ah.dilation}, {aw.dilation}, "
                f"{ah.pad_begin}, {aw.pad_begin}")
    for n, g in _batch_group_loops(w, n_batch, group):
        w.line(f"const float* x_g = {x.c} + {lin((n, c_in * plane), (g, cg * plane))};")
        p = dict(n=n, g=g, mg=mg, m_out=m_out, out_plane=plane)
        for m0, rows, count in _channel_blocks(mg, mr):
            with channel_block(w, count, rows) as mb:
                m0e = lin((mb, rows), const=m0)
                w.line(f"const float* w_blk = {wp.c} + {lin((g, mg * taps), (m0e, taps))};")
                w.line(f"for (int p0 = 0; p0 < {plane}; p0 += 32) {{  /* tiles of positions */")
                w.depth += 1
                w.line(f"const int np = {plane} - p0 < 32 ? {plane} - p0 : 32;")
                w.line(f"float tile[{rows} * 32];")
                w.line(f"{direct_ukernel(k, rows)}({geometry},\n    w_blk, x_g, p0, np, tile);")
                _store_tile(w, k, bias, p, rows, m0e, "p0", "32")
                w.depth -= 1
                w.line("}")
    return 0


def emit_conv_simd_or(k, x, wt, bias, axes, group, kind, bodies) -> str:
    """x86 builds: each (condition, body) of `bodies` (x86_bodies: "band", "direct"
    or "winograd") under its #if / #elif; every other target: `kind` ("window" or
    "im2col") unchanged, as the #else. Chosen by the preprocessor; the scratch is
    sized for the largest. Each branch marks the tables it does not read as used
    (the kernel's parameters are the union): the packed weights and tap table
    where Winograd reads its own weights, Winograd's where another branch runs."""
    kh_n, kw_n = wt.shape[2], wt.shape[3]
    emit = emit_conv_window if kind == "window" else emit_conv_gemm
    other = emit(k, x, wt, bias, axes, group, header=False)   # packs the weights
    sizes = [k.scratch_bytes]
    portable = [buf.c for buf in k.ins[1:] if buf.const is not None
                and (bias is None or buf.c != bias.c)]
    branches = []
    for cond, body in bodies:
        w = CWriter()
        before = len(k.ins)
        if body == "winograd":
            sizes.append(conv_winograd.emit_body(k, w, x, wt, bias, axes, knobs_of(k),
                                                 clamp_tail(k)))
        elif body == "direct":
            sizes.append(_conv_direct(k, w, x, k.ins[1], bias, axes, group, kh_n, kw_n))
        else:
            sizes.append(_conv_band(k, w, x, k.ins[1], bias, axes, group, kh_n, kw_n,
                                    avx512="AVX512" in cond))
        if not sizes[-1]:
            w.line("(void)scratch;")
        own = [buf.c for buf in k.ins[before:]]
        if own:      # Winograd's transformed weights: the portable tables go unread
            w.line(_unread(portable))
        elif kind == "window":
            w.line(f"(void){portable[-1]};  /* the window schedule's tap table */")
        branches.append((cond, w.lines, own))
    added = [c for _, _, own in branches for c in own]
    w = CWriter()
    w.line(conv_comment(x, wt, k.out, axes, group))
    for i, (cond, lines, own) in enumerate(branches):
        w.lines.append(f"#{'el' if i else ''}if {cond}")
        unread = [c for c in added if c not in own]
        if unread:
            w.line(_unread(unread))
        w.lines += lines
    w.lines.append("#else")
    if added:
        w.line(_unread(added))
    w.lines += other.splitlines()
    w.lines.append("#endif")
    k.scratch_bytes = max(sizes)
    return w.text()


def _unread(names) -> str:
    """C marking the kernel parameters `names` as used (another branch reads them)."""
    return render_c([ExprStmt(Cast(Type(VOID), Var(c))) for c in names])


def pointwise_inplace_cols(k, x) -> int:
    """Positions per tile of emit_conv_pointwise_inplace, at most. AVX-512 with
    pointwise_inplace_cols 32: tiles of 32 positions, two vectors per row (the
    one-vector kernel is bound by its loads); else MTVM_F32_NR (at most 16)."""
    plane = int(np.prod(x.shape[2:]))
    return 32 if knobs_of(k)["pointwise_inplace_cols"] == 32 and plane > 16 else 16


def pointwise_inplace_bytes(k, x) -> int:
    """emit_conv_pointwise_inplace's scratch: the input columns of its widest tile
    (32 doubles it, which can raise the arena)."""
    return 4 * x.shape[1] * pointwise_inplace_cols(k, x)


def emit_conv_pointwise_inplace(k, x, wt, bias, axes) -> str:
    """Pointwise GEMM writing over its input (batch 1, one group): per tile of
    positions, the input columns are copied to scratch first, then every output
    channel of those positions is computed from the copy (an output value only
    overwrites input values of its own position)."""
    y = k.out
    w = CWriter()
    c_in, m_out = x.shape[1], wt.shape[0]
    plane = int(np.prod(x.shape[2:]))
    mr = knobs_of(k)["gemm_mr"]
    wide = pointwise_inplace_cols(k, x) == 32
    k.scratch_bytes = pointwise_inplace_bytes(k, x)
    wp = laid_out_weights(k, mr)
    w.line(conv_comment(x, wt, y, axes, 1))
    cols = "32 (AVX-512) or MTVM_F32_NR" if wide else "MTVM_F32_NR"
    w.line(f"/* Schedule: pointwise GEMM in place (out0 == in0): per tile of {cols}"
           f"\n * positions the {c_in} input columns are copied to scratch xt, then register"
           f"\n * blocks of {mr} output channels run the micro-kernel on the copy. */")
    w.line("float* xt = (float*)scratch;")
    p = dict(n=0, g=0, mg=m_out, m_out=m_out, out_plane=plane)

    def tiles(width, call):
        w.line(f"for (int p = 0; p < {plane}; p += {width}) {{  /* tiles of positions */")
        w.depth += 1
        w.line(f"const int np = {plane} - p < {width} ? {plane} - p : {width};")
        with w.loop("c", c_in, "copy the tile's input columns") as c:
            if k.target.is_arm and k.target.fpu:
                # gcc makes the loop over np a call to newlib's memmove, which dominated
                # fomo_mbv2's projections on the M4 (689 K -> 427 K instructions): a column
                # of four (MTVM_F32_NR there) one VLDMIA/VSTMIA pair, others mtvm_copy
                k.library("mtvm_copy.h")
                dst = RawExpr(f"xt + {lin((c, 1))} * {width}")
                src = RawExpr(f"{x.c} + {lin((c, plane))} + p")
                w.line(render_c(If(eq(RawExpr("np * sizeof(float)"), 16),
                                   [ExprStmt(c_call("mtvm_copy16", dst, src))],
                                   [ExprStmt(c_call("mtvm_copy", dst, src,
                                                    RawExpr("(size_t)np * sizeof(float)")))])))
            else:
                w.line(f"for (int q = 0; q < np; ++q) xt[{lin((c, 1))} * {width} + q] = "
                       f"{x.c}[{lin((c, plane))} + p + q];")
        for m0, rows, count in _channel_blocks(m_out, mr):
            with channel_block(w, count, rows) as mb:
                m0e = lin((mb, rows), const=m0)
                a = f"{wp.c} + {lin((m0e, c_in))}"
                wide_ = width != "MTVM_F32_NR"   # the band, over 32 positions
                epi = f"{c_in}, 32, 1, tap0, {a}, xt" if wide_ else f"{c_in}, {a}, xt, {width}"
                _tile_or_epi(w, k, bias, p, rows, m0e, "p", call(rows, a), epi, width,
                             band=wide_)
        w.depth -= 1
        w.line("}")
    isas = pwcv_isas(k, x, wt, 1)
    outer = w
    if isas:
        w.line(pwcv_comment(isas))
        w = CWriter()   # the position tiles below: the #else of isas' branches
    if wide and "avx512" not in isas:
        w.lines.append("#if MTVM_F32_AVX512")
        w.line("static const int32_t tap0[1] = { 0 };")
        tiles("32", lambda rows, a: f"{band_ukernel(k, rows)}({c_in}, 32, 1, tap0, {a}, xt, "
                                    "np, tile);")
        w.lines.append("#else")
    # On Arm (4 positions a tile) the last, partial tile is computed whole: xt holds 4
    # columns a channel (past np whatever the copy left there, the tile before's or, in
    # a plane of fewer than 4 positions, unwritten scratch: computed, never stored), and
    # the 4 x 4 assembly block runs where the partial tile's C loops took 4x the
    # instructions -- a 13 x 3 map's 39 positions end in one (kws_dscnn-like layers)
    n = "MTVM_F32_NR" if k.target.is_arm else "np"
    tiles("MTVM_F32_NR", lambda rows, a: f"{gemm_ukernel(k, rows)}({c_in}, {a}, xt, "
                                         f"MTVM_F32_NR, {n}, tile);")
    if wide and "avx512" not in isas:
        w.lines.append("#endif")
    if isas:
        i32 = Type("int32")
        c, q = Var("c", i32), Var("q", i32)

        def copy(pos, n):   # the tile's input columns into xt, [c][n]
            return [Comment("copy the tile's input columns"), For(c, c_in, [For(q, n, [
                Assign(Index(Var("xt"), c * n + q), Index(Var(x.c), c * plane + pos + q))])])]
        outer.line(render_c(_pwcv_branches(k, bias, p, c_in, m_out, wp, lambda pos: Var("xt"),
                                           lambda n: n, plane, isas, w.text(), copy)))
    return outer.text()
