"""Operators with state carried along the time axis: LinearAttention (linear,
gated, delta and gated-delta update rules), CausalConvWithState (a
depthwise causal 1-D convolution whose left context is the past state), and
RNN, GRU and LSTM (every attribute: directions, layout, sequence_lens,
activations with alpha/beta, clip, linear_before_reset, peepholes,
input_forget; tests/ops/test_recurrent.py checks them against onnxruntime).

LinearAttention's and CausalConvWithState's references are onnx.reference's
(the spec's own loops); RNN/GRU/LSTM have their own (onnx.reference ignores
sequence_lens, activations and clip). The kernels run one time step at a time,
their state (LinearAttention's [B, H_kv, d_k, d_v], the recurrent hidden and
cell states) in scratch memory.
"""
from __future__ import annotations

import numpy as np

from ..codegen.cwriter import (VOID, Assign, Cast, Comment, Const, Decl, Expr, ExprStmt, For,
                               Function, If, Raw, RawExpr, Return, Type, Var, call, eq,
                               index_type, kernel_dtype, lt, param, render_c, select)
from ..codegen.cwriter import gt as greater
from ..errors import UnsupportedError
from .base import Op, register
from .microkernels import column_tiles

F, CF, FP = Type("float32"), Type("float32", const=True), Type("float32", pointer=True)
SCRATCH = Var("scratch", Type("uint8", pointer=True))


def _f(value) -> Const:
    """A float constant."""
    return Const(float(value), "float32")


def _libm(k, name: str) -> str:
    return name + ("f" if k.ctype == "float" else "")


@register("LinearAttention")
class LinearAttention(Op):
    def reference(self, q, k, v, past_state=None, decay=None, beta=None, **attrs):
        from onnx.reference.ops.op_linear_attention import LinearAttention as R
        return tuple(R._run(None, q, k, v, past_state, decay, beta, **attrs))

    def scratch_bytes(self, k, /, *, q_num_heads, kv_num_heads, **_attrs) -> int:
        """The recurrent state [B, Hk, dk, dv] and one row of dv values, float."""
        q, _, v = k.ins[:3]
        B = q.shape[0]
        dk, dv = q.shape[2] // q_num_heads, v.shape[2] // kv_num_heads
        return (B * kv_num_heads * dk * dv + dv) * 4

    def emit(self, k, *, q_num_heads, kv_num_heads, scale=None, update_rule="gated_delta",
             chunk_size=None):
        q, key, v = k.ins[:3]
        past, decay, beta = (k.ins + [None] * 6)[3:6]
        B, T, _ = q.shape
        Hq, Hk = q_num_heads, kv_num_heads
        dk, dv = q.shape[2] // Hq, v.shape[2] // Hk
        grp = Hq // Hk
        sc = 1.0 / np.sqrt(dk) if not scale else float(scale)
        gating = update_rule in ("gated", "gated_delta")
        delta = update_rule in ("delta", "gated_delta")
        k.scratch_bytes = self.scratch_bytes(k, q_num_heads=Hq, kv_num_heads=Hk)
        n_st = B * Hk * dk * dv
        s_, b_, kh, d, m, g, i = (Var(n) for n in ("s", "b", "kh", "d", "m", "g", "i"))
        st, vt = Var("st", FP), Var("vt", FP)
        ins = [param(t) if t is not None else None for t in k.ins]
        out = param(k.outs[0], output=True)
        at = st[((b_ * Hk + kh) * dk + d) * dv + m]
        row = b_ * T + s_
        lines = [Decl(st, Cast(FP, SCRATCH)), Decl(vt, st + n_st)]
        if past is not None:
            lines.append(For(i, n_st, [Assign(st[i], Cast(F, ins[3][i]))]))
        else:
            lines.append(ExprStmt(call("memset", st, 0, n_st * 4)))
        step = []
        if gating:
            e = Var("e", CF)
            per_d = decay.shape[2] == Hk * dk
            gv = ins[4][row * (Hk * dk) + kh * dk + d] if per_d else ins[4][row * Hk + kh]
            step.append(For(d, dk, [Decl(e, call("expf", Cast(F, gv))),
                                    For(m, dv, [Assign(at, e, "*=")])]))
        kk = Cast(F, ins[1][row * (Hk * dk) + kh * dk + d])
        vv = Cast(F, ins[2][row * (Hk * dv) + kh * dv + m])
        if delta:
            r = Var("r", F)
            bl = beta.shape[2]
            bt = Cast(F, ins[5][row * bl + kh] if bl == Hk else ins[5][row])
            step.append(For(m, dv, [Decl(r, Const(0)), For(d, dk, [Assign(r, at * kk, "+=")]),
                                    Assign(vt[m], bt * (vv - r))]))
        else:
            step.append(For(m, dv, [Assign(vt[m], vv)]))
        acc, h = Var("acc", F), Var("h", index_type(const=True))
        step += [For(d, dk, [For(m, dv, [Assign(at, kk * vt[m], "+=")])]),
                 For(g, grp, [
                     Decl(h, kh * grp + g),
                     For(m, dv, [
                         Decl(acc, Const(0)),
                         For(d, dk, [Assign(acc, Cast(F, ins[0][row * (Hq * dk) + h * dk + d])
                                            * at, "+=")]),
                         Assign(out[row * (Hq * dv) + h * dv + m],
                                Cast(Type(k.outs[0].dtype), _f(sc) * acc))])])]
        lines.append(For(s_, T, [For(b_, B, [For(kh, Hk, step)])]))
        if len(k.outs) > 1 and k.outs[1] is not None:
            lines.append(For(i, n_st, [Assign(param(k.outs[1], output=True)[i],
                                              Cast(Type(k.outs[1].dtype), st[i]))]))
        return render_c(lines)


@register("CausalConvWithState")
class CausalConvWithState(Op):
    def reference(self, x, w, bias=None, past_state=None, **attrs):
        from onnx.reference.ops.op_causal_conv_with_state import CausalConvWithState as R
        return tuple(R._run(None, x, w, bias, past_state, **attrs))

    def emit(self, k, *, activation="none"):
        x, w = k.ins[0], k.ins[1]
        bias, past = (k.ins + [None] * 4)[2:4]
        B, C, L = x.shape
        K = w.shape[2]
        dt = k.outs[0].dtype
        x_in, w_in = param(x), param(w)
        b_, c, o, j, i2 = (Var(n) for n in ("b", "c", "o", "j", "i2"))
        p = Var("p", index_type(const=True))
        acc = Var("acc", Type(dt))
        zero = Const(0, dt)
        if K == 1:
            pad = x_in[(b_ * C + c) * L + p]
        else:
            later = x_in[(b_ * C + c) * L + p - (K - 1)]
            early = param(past)[(b_ * C + c) * (K - 1) + p] if past is not None else zero
            pad = select(lt(p, K - 1), early, later)
        inner = [Decl(acc, param(bias)[c] if bias is not None else zero),
                 For(j, K, [Decl(p, o + j), Assign(acc, w_in[c * K + j] * pad, "+=")])]
        if activation in ("silu", "swish"):
            inner.append(Assign(acc, acc / (Const(1, dt) + call(_libm(k, "exp"), -acc))))
        inner.append(Assign(param(k.outs[0], output=True)[(b_ * C + c) * L + o], acc))
        lines = [For(b_, B, [For(c, C, [For(o, L, inner)])])]
        if len(k.outs) > 1 and k.outs[1] is not None and K > 1:
            lines.append(For(b_, B, [For(c, C, [For(i2, K - 1, [
                Decl(p, i2 + L),
                Assign(param(k.outs[1], output=True)[(b_ * C + c) * (K - 1) + i2], pad)])])]))
        return render_c(lines)


# -- RNN, GRU, LSTM --------------------------------------------------------------------------

def reference_via_onnx(op_type: str, inputs, attrs: dict, n_outputs: int):
    """Run one node through onnx.reference (the spec's evaluator)."""
    import onnx
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    names = [f"i{j}" if x is not None else "" for j, x in enumerate(inputs)]
    outs = [f"o{j}" for j in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, **attrs)
    g = helper.make_graph([node], "ref", [], [helper.make_tensor_value_info(
        o, onnx.TensorProto.UNDEFINED, None) for o in outs],
        [numpy_helper.from_array(np.asarray(x), n) for n, x in zip(names, inputs) if n])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
    return tuple(ReferenceEvaluator(m).run(None, {}))


# Activation functions of RNN/GRU/LSTM: NumPy form, C form (a C expression of
# the variable `v`), and the defaults of alpha/beta (None: the function takes
# none). Names are matched case-insensitively, as onnxruntime does. Affine,
# ScaledTanh and ThresholdedRelu have no default the spec and onnxruntime agree
# on (onnxruntime uses 0, which makes Affine and ScaledTanh output 0), so their
# alpha/beta must be given.
_ACTS = {
    "relu": (lambda v, a, b: np.maximum(v, 0), "(v < {z} ? {z} : v)", None, None),  # NaN: NaN
    "tanh": (lambda v, a, b: np.tanh(v), "{tanh}(v)", None, None),
    "sigmoid": (lambda v, a, b: 1 / (1 + np.exp(-v)), "{one} / ({one} + {exp}(-v))", None, None),
    "affine": (lambda v, a, b: a * v + b, "{a} * v + {b}", "required", "required"),
    "leakyrelu": (lambda v, a, b: np.where(v >= 0, v, a * v), "(v >= {z} ? v : {a} * v)",
                  0.01, None),
    "thresholdedrelu": (lambda v, a, b: np.where(v > a, v, 0), "(v > {a} ? v : {z})",
                        "required", None),
    "scaledtanh": (lambda v, a, b: a * np.tanh(b * v), "{a} * {tanh}({b} * v)",
                   "required", "required"),
    "hardsigmoid": (lambda v, a, b: np.clip(a * v + b, 0, 1),
                    "({a} * v + {b} < {z} ? {z} : ({a} * v + {b} > {one} ? {one} : "
                    "{a} * v + {b}))", 0.2, 0.5),
    "elu": (lambda v, a, b: np.where(v >= 0, v, a * np.expm1(np.minimum(v, 0))),
            "(v >= {z} ? v : {a} * {expm1}(v))", 1.0, None),
    "softsign": (lambda v, a, b: v / (1 + np.abs(v)), "v / ({one} + {fabs}(v))", None, None),
    # log(1 + e^v), inf past e^v's range, as the Softplus operator and onnxruntime
    "softplus": (lambda v, a, b: np.log1p(np.exp(v)), "{log1p}({exp}(v))", None, None),
}
_DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
# output_sequence (opset 1 only) said whether Y is computed; Y is simply an
# optional output, so it changes nothing here.
_ATTRS = {"hidden_size", "direction", "layout", "activations", "activation_alpha",
          "activation_beta", "clip", "output_sequence"}
_OP_ATTRS = {"RNN": _ATTRS, "GRU": _ATTRS | {"linear_before_reset"},
             "LSTM": _ATTRS | {"input_forget"}}


def _activations(op: str, dirs: int, activations, alpha, beta) -> list[list[tuple]]:
    """[direction][f, g, h] -> (name, alpha, beta). alpha/beta are consumed in
    the order of the functions that take them (the spec's and onnxruntime's
    reading of "consumed in the order of activation functions"); values left
    over are ignored, as onnxruntime does."""
    names = list(activations) if activations else _DEFAULT_ACTS[op] * dirs
    per = len(_DEFAULT_ACTS[op])
    if len(names) != per * dirs:
        raise UnsupportedError(
            f"{op} with {dirs} direction(s) needs {per * dirs} activations, got {len(names)} "
            f"({', '.join(map(repr, names))})")
    alphas, betas = list(alpha or []), list(beta or [])
    out = []
    for n in names:
        key = str(n).lower()
        if key not in _ACTS:
            raise UnsupportedError(f"activation {n!r} is not supported; supported: "
                                   + ", ".join(sorted(_ACTS)))
        _, _, da, db = _ACTS[key]
        vals = []
        for default, given, what in ((da, alphas, "alpha"), (db, betas, "beta")):
            if default is None:
                vals.append(None)
            elif given:
                vals.append(float(given.pop(0)))
            elif default == "required":
                raise UnsupportedError(
                    f"activation {n!r} needs its {what} in activation_{what} (its default "
                    "differs between the ONNX spec and onnxruntime); give it explicitly")
            else:
                vals.append(default)
        out.append((key, *vals))
    return [out[d * per:(d + 1) * per] for d in range(dirs)]


def _clamped_lens(seq_lens, B: int, S: int) -> np.ndarray:
    if seq_lens is None:
        return np.full(B, S, np.int64)
    return np.clip(np.asarray(seq_lens).astype(np.int64).reshape(-1), 0, S)


def recurrent_reference(op: str, x, w, r, b=None, sequence_lens=None, initial_h=None,
                        initial_c=None, p=None, *, hidden_size=None, direction="forward",
                        layout=0, activations=None, activation_alpha=None,
                        activation_beta=None, clip=None, linear_before_reset=0, input_forget=0,
                        output_sequence=0):
    """RNN/GRU/LSTM as the spec defines them, with what onnxruntime does where the
    spec is silent: time steps at or past a batch entry's sequence length are not
    run and give zeros in Y; an entry of sequence length 0 gives zeros in Y_h and
    Y_c (not the initial state). Lengths are clamped to [0, seq_length]."""
    if layout:
        x = np.swapaxes(x, 0, 1)
        initial_h = None if initial_h is None else np.swapaxes(initial_h, 0, 1)
        initial_c = None if initial_c is None else np.swapaxes(initial_c, 0, 1)
    S, B, _ = x.shape
    dirs, GH, _ = w.shape
    H = int(hidden_size) if hidden_size else r.shape[-1]
    dt = x.dtype
    A = _activations(op, dirs, activations, activation_alpha, activation_beta)
    lens = _clamped_lens(sequence_lens, B, S)

    def cl(v):
        return v if clip is None else np.clip(v, -clip, clip)

    y = np.zeros((S, dirs, B, H), dt)
    yh = np.zeros((dirs, B, H), dt)
    yc = np.zeros((dirs, B, H), dt)
    for d in range(dirs):
        f = [lambda v, a=a: _ACTS[a[0]][0](v, a[1], a[2]).astype(dt) for a in A[d]]
        rev = direction == "reverse" or (direction == "bidirectional" and d == 1)
        bias = np.zeros(2 * GH, dt) if b is None else b[d]
        wb, rb = bias[:GH], bias[GH:]
        W, R = w[d], r[d]
        h = np.zeros((B, H), dt) if initial_h is None else initial_h[d].astype(dt)
        c = np.zeros((B, H), dt) if initial_c is None else initial_c[d].astype(dt)
        P = np.zeros(3 * H, dt) if p is None else p[d]
        for s in range(S):
            on = s < lens
            tt = np.clip(lens - 1 - s if rev else np.full(B, s), 0, S - 1)
            xt = x[tt, np.arange(B)]
            if op == "RNN":
                hn, cn = f[0](cl(xt @ W.T + h @ R.T + wb + rb)), c
            elif op == "GRU":
                zr = xt @ W[:2 * H].T + h @ R[:2 * H].T + wb[:2 * H] + rb[:2 * H]
                z, rg = f[0](cl(zr[:, :H])), f[0](cl(zr[:, H:]))
                if linear_before_reset:
                    pre = xt @ W[2 * H:].T + rg * (h @ R[2 * H:].T + rb[2 * H:]) + wb[2 * H:]
                else:
                    pre = xt @ W[2 * H:].T + (rg * h) @ R[2 * H:].T + rb[2 * H:] + wb[2 * H:]
                hn, cn = (1 - z) * f[1](cl(pre)) + z * h, c
            else:  # LSTM, gates i, o, f, c; peepholes i, o, f
                g = xt @ W.T + h @ R.T + wb + rb
                i = f[0](cl(g[:, :H] + P[:H] * c))
                fg = 1 - i if input_forget else f[0](cl(g[:, 2 * H:3 * H] + P[2 * H:] * c))
                cn = fg * c + i * f[1](cl(g[:, 3 * H:]))
                o = f[0](cl(g[:, H:2 * H] + P[H:2 * H] * cn))
                hn = o * f[2](cn)
            h = np.where(on[:, None], hn, h).astype(dt)
            c = np.where(on[:, None], cn, c).astype(dt)
            for bi in np.flatnonzero(on):
                y[tt[bi], d, bi] = h[bi]
        yh[d] = np.where((lens > 0)[:, None], h, 0)
        yc[d] = np.where((lens > 0)[:, None], c, 0)
    if layout:
        y, yh, yc = y.transpose(2, 0, 1, 3), yh.swapaxes(0, 1), yc.swapaxes(0, 1)
    return (y, yh, yc) if op == "LSTM" else (y, yh)


def _act_c(k, name: str, alpha, beta, pre: str) -> str:
    """C expression: activation `name` of the expression `pre` (a static inline
    helper per function and float type, declared once per source file)."""
    t = k.ctype
    tanh = _libm(k, "tanh")
    template = _ACTS[name][1]
    if t == "float":   # the gates' tanh and sigmoid without libm (kernel library)
        k.library("mtvm_activation_f32.h")
        tanh = "mtvm_tanh_f32"
        if name == "sigmoid":
            template = "mtvm_sigmoid_f32(v)"
    expr = template.format(
        z=k.lit(0), one=k.lit(1), a="a", b="b", exp=_libm(k, "exp"), expm1=_libm(k, "expm1"),
        log1p=_libm(k, "log1p"), tanh=tanh, fabs=_libm(k, "fabs"))
    T = Type(kernel_dtype(k))
    fname = f"mtvm_act_{name}_{t[0]}"
    v, a, b = Var("v", T), Var("a", T), Var("b", T)
    fn = k.helper(fname, render_c(Function(
        fname, [v, a, b], [ExprStmt(Cast(Type(VOID), a)), ExprStmt(Cast(Type(VOID), b)),
                           Return(RawExpr(expr))], ret=T, static=True, inline=True)))
    return f"{fn}({pre}, {k.lit(alpha or 0)}, {k.lit(beta or 0)})"


class _Recurrent(Op):
    """RNN, GRU and LSTM: one kernel runs every direction, time step and batch
    entry in turn; the hidden (and cell) state of each direction and batch entry
    lives in scratch memory, with the gates of the current step."""
    gates = 1

    def canonicalize(self, node, graph, opset):
        # hidden_size is optional in the schema: it is R's last dimension.
        if "hidden_size" not in node.attrs and len(node.inputs) > 2 and node.inputs[2]:
            shape = graph.tensors[node.inputs[2]].shape
            if len(shape) == 3:
                node.attrs["hidden_size"] = int(shape[2])

    def reference(self, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None,
                  p=None, **attrs):
        with np.errstate(over="ignore"):   # exp overflows to inf where sigmoid & co. want it
            return recurrent_reference(self.name, x, w, r, b, sequence_lens, initial_h,
                                       initial_c, p, **attrs)

    def infer(self, node, inputs, consts):
        x = inputs[0]
        a = node.attrs
        layout = a.get("layout", 0)
        S, B = (x.shape[0], x.shape[1]) if not layout else (x.shape[1], x.shape[0])
        H = a["hidden_size"]
        dirs = 2 if a.get("direction", "forward") == "bidirectional" else 1
        dt = np.dtype(x.dtype)
        y = (S, dirs, B, H) if not layout else (B, S, dirs, H)
        yh = (dirs, B, H) if not layout else (B, dirs, H)
        return [(y, dt), (yh, dt), (yh, dt)][:len(node.outputs)]

    def macs(self, node, inputs, outputs):
        x, w, r = inputs[:3]
        return int(np.prod(x.shape[:2], dtype=np.int64)) * w.shape[0] * w.shape[1] * (
            w.shape[2] + r.shape[2])

    def check(self, node, inputs):
        a, op = node.attrs, self.name
        unknown = sorted(set(a) - _OP_ATTRS[op])
        if unknown:
            raise UnsupportedError(f"attribute(s) {', '.join(unknown)} are not {op} attributes")
        n_in, n_out = (8, 3) if op == "LSTM" else (6, 2)
        if len(inputs) < 3 or any(i is None for i in inputs[:3]) or len(inputs) > n_in:
            raise UnsupportedError(f"{op} takes X, W, R and up to {n_in - 3} optional inputs, "
                                   f"got {len(inputs)} inputs")
        if len(node.outputs) > n_out:
            raise UnsupportedError(f"{op} has at most {n_out} outputs, got {len(node.outputs)}")
        direction = a.get("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise UnsupportedError(f"direction {direction!r} is not forward, reverse or "
                                   "bidirectional")
        layout = a.get("layout", 0)
        if layout not in (0, 1):
            raise UnsupportedError(f"layout {layout} is not 0 or 1")
        if a.get("linear_before_reset", 0) not in (0, 1) or a.get("input_forget", 0) not in (0, 1):
            raise UnsupportedError("linear_before_reset and input_forget must be 0 or 1")
        clip = a.get("clip")
        if clip is not None and not clip > 0:
            raise UnsupportedError(f"clip must be a positive number, got {clip}")
        x, w, r = inputs[:3]
        opt = list(inputs[3:]) + [None] * (n_in - len(inputs))
        if np.dtype(x.dtype).kind != "f":
            raise UnsupportedError(f"X of dtype {np.dtype(x.dtype).name}: only floating-point "
                                   "X is supported")
        dirs = 2 if direction == "bidirectional" else 1
        H = a.get("hidden_size")
        if len(x.shape) != 3 or not isinstance(H, int) or H < 1:
            raise UnsupportedError(f"X must be 3-D and hidden_size a positive integer "
                                   f"(X {list(x.shape)}, hidden_size {H})")
        S, B, I = (x.shape[1], x.shape[0], x.shape[2]) if layout else x.shape
        if 0 in x.shape:
            raise UnsupportedError(f"X has shape {list(x.shape)}: an empty sequence, batch or "
                                   "input is not supported")
        state = (B, dirs, H) if layout else (dirs, B, H)
        want = [("W", w, (dirs, self.gates * H, I)), ("R", r, (dirs, self.gates * H, H)),
                ("B", opt[0], (dirs, 2 * self.gates * H)), ("sequence_lens", opt[1], (B,)),
                ("initial_h", opt[2], state)]
        if op == "LSTM":
            want += [("initial_c", opt[3], state), ("P", opt[4], (dirs, 3 * H))]
        for what, t, shape in want:
            if t is None:
                continue
            if tuple(t.shape) != shape:
                raise UnsupportedError(
                    f"{what} has shape {list(t.shape)}, expected {list(shape)} (X "
                    f"{list(x.shape)}, hidden_size {H}, direction {direction}, layout {layout})")
            if what != "sequence_lens" and np.dtype(t.dtype) != np.dtype(x.dtype):
                raise UnsupportedError(f"{what} is {np.dtype(t.dtype).name} and X is "
                                       f"{np.dtype(x.dtype).name}: they must be the same")
        lens = opt[1]
        if lens is not None:
            if np.dtype(lens.dtype) != np.int32:
                raise UnsupportedError(f"sequence_lens is {np.dtype(lens.dtype).name}, "
                                       "it must be int32")
            if lens.data is not None and np.any((lens.data < 0) | (lens.data > S)):
                raise UnsupportedError(
                    f"sequence_lens {lens.data.tolist()} are not all in [0, {S}] "
                    "(X's sequence length)")
        _activations(op, dirs, a.get("activations"), a.get("activation_alpha"),
                     a.get("activation_beta"))

    def scratch_bytes(self, k, /, *, hidden_size, direction="forward", layout=0, gemv=None,
                      project=None, gemv_init=None, **_attrs) -> int:
        """The hidden states [dirs][B][H] (and the cell states for LSTM), one row of
        gate pre-activations [gates * H] and one of H (and with gemv but not gemv_init one
        more row of gates * H, R h's; with project, `steps` rows of W x [steps][gates * H]
        and the steps' inputs [I][steps])."""
        x = k.ins[0]
        B = x.shape[0] if layout else x.shape[1]
        ns = (2 if direction == "bidirectional" else 1) * B * hidden_size
        states = ns * (2 if self.name == "LSTM" else 1)
        rows = (2 if gemv and not gemv_init else 1) * self.gates * hidden_size + hidden_size
        steps = self.projected_steps(k, gemv, project, layout)
        if steps:
            rows += steps * (self.gates * hidden_size + x.shape[2])
        return (states + rows) * np.dtype(x.dtype).itemsize

    # Narrower inputs keep W x a GEMV per step: with so few taps the GEMM's tile costs
    # more than it saves (lstm_forecast, 8 inputs: 0.98x on AVX-512, 1.17x on AVX2).
    PROJECT_MIN_INPUTS = 16

    @classmethod
    def projected_steps(cls, k, gemv, project, layout) -> int:
        """How many time steps the input projection W x is batched over (0: per step).
        Batch 1 without sequence_lens only (every step runs), PROJECT_MIN_INPUTS inputs
        or more."""
        x = k.ins[0]
        seqlens = k.ins[4] if len(k.ins) > 4 else None
        B = x.shape[0] if layout else x.shape[1]
        if not (gemv and project) or B != 1 or seqlens is not None or \
                x.shape[2] < cls.PROJECT_MIN_INPUTS:
            return 0
        return project[1]

    def emit(self, k, *, hidden_size, direction="forward", layout=0, activations=None,
             activation_alpha=None, activation_beta=None, clip=None, linear_before_reset=0,
             input_forget=0, output_sequence=0, gemv=None, project=None, gemv_init=None,
             gemv_packed=False, act_arrays=None):
        """gemv: None, the dot products as plain loops over W and R as the model
        gives them ([dirs][gates * H][I or H]); or the name of a C function
        gemv(taps, x, b, ldb, n, out) (out[q] = sum_t x[t] b[t * ldb + q], q < n)
        for W and R stored transposed ([dirs][I or H][gates * H], the recurrent
        GEMV schedule of mtvm/schedules/generic/recurrent_f32.py), with one more
        row of gates * H in scratch for R h.

        project: None, or (f, steps) with gemv: the input projection W x of `steps` time
        steps at a time as one matrix product, f the float GEMM micro-kernel of `steps`
        rows (mtvm.ops.microkernels.gemm_ukernel), each step then copying its row. Only
        R h stays a GEMV per step (batch 1 without sequence_lens; else per step).

        gemv_init: with gemv and without project, for RNN, LSTM and GRU with
        linear_before_reset, a C function gemv_init(taps, x, b, ldb, n, init, out) (out[q] =
        init[q] + the same sum; init may be out): the gates as W x started from the bias,
        then R h added in place -- no pass of their own over the gate rows. The bias input
        then holds Wb + Rb ([dirs][gates * H], summed by the schedule: summed_bias) instead
        of the two; GRU's [dirs][4H] keeps Wb_h and Rb_h apart (Wb + Rb of z and r, Wb_h,
        Rb_h): its R_h h starts from Rb_h in a row of its own, which r then multiplies.

        gemv_packed: with gemv and without project, W and R [dirs][I or H][gates * H] hold
        each direction's columns in the packed layout of mtvm_f32_gemv16_packed_vfp
        (mtvm/schedules/arm_dsp/recurrent_f32.py, packed16): gemv(taps, x, w, n, out) and
        gemv_init(taps, x, w, n, init, out) without ldb, the columns from c of a direction
        at taps * c (GRU without linear_before_reset: R's columns 2H.. packed apart).

        act_arrays: None, or {activation name: C function f(v, n)} applying it in place to
        n values (mtvm_sigmoid_f32_inplace, ...): the gate rows' activations as one call
        per row range where every direction's is one of these and there is no clip; the
        same values as the activation applied value by value."""
        x, w, r = k.ins[:3]
        bias, seqlens, h0, c0, peep = (k.ins + [None] * 8)[3:8]
        op, H, GH = self.name, hidden_size, self.gates * hidden_size
        lstm = op == "LSTM"
        B, S, I = x.shape if layout else (x.shape[1], x.shape[0], x.shape[2])
        dirs = 2 if direction == "bidirectional" else 1
        A = _activations(op, dirs, activations, activation_alpha, activation_beta)
        dt = x.dtype
        T, TP = Type(dt), Type(dt, pointer=True)
        y, yh, yc = (k.outs + [None] * 3)[:3]
        ns = dirs * B * H                                   # one state: [dirs][B][H]
        k.scratch_bytes = self.scratch_bytes(k, hidden_size=H, direction=direction, layout=layout,
                                             gemv=gemv, project=project, gemv_init=gemv_init)
        steps = self.projected_steps(k, gemv, project, layout)
        assert not gemv_init or (gemv and not steps and (op != "GRU" or linear_before_reset)), \
            "gemv_init: RNN, LSTM, GRU with linear_before_reset"
        assert not gemv_packed or (gemv and not steps), "gemv_packed: GEMVs per step"
        X, W, R = param(x), param(w), param(r)
        bias_v = param(bias) if bias is not None else None
        d, s_, b_, j, g, q = (Var(n) for n in ("d", "s", "b", "j", "g", "q"))
        tt, length = Var("tt", index_type(const=True)), Var("len", index_type(const=True))
        hs, cs, gt, rh, gr = (Var(n, TP) for n in ("hs", "cs", "gt", "rh", "gr"))
        h, c, acc = Var("h", TP), Var("c", TP), Var("acc", T)
        zero, one = Const(0, dt), Const(1, dt)
        # Offsets of element (d, b, time tt, j) in X, Y and the states' inputs/outputs.
        xa = (b_ * S + tt) * I if layout else (tt * B + b_) * I
        y_at = ((b_ * S + tt) * dirs + d) * H + j if layout else ((tt * dirs + d) * B + b_) * H + j
        st_at = (b_ * dirs + d) * H + j if layout else (d * B + b_) * H + j
        state_at = (d * B + b_) * H + j

        def mat(m, taps, column=0):   # direction d's matrix m from its column `column`
            at = m + d * (taps * GH)
            return at + (taps * column if gemv_packed else column) if column else at

        def gemv_call(f, taps, vec, m, n, *rest):   # the GEMV f over n columns of m
            return call(f, taps, vec, m, n, *rest) if gemv_packed else \
                call(f, taps, vec, m, GH, n, *rest)

        def wb(row):   # input bias Wb of gate row `row`
            return bias_v[d * (2 * GH) + row] if bias is not None else zero

        def rb(row):   # recurrent bias Rb of gate row `row`
            return bias_v[d * (2 * GH) + GH + row] if bias is not None else zero

        def dot(mat, n, row, vec):   # acc += mat[d][row][:] . vec
            return For(q, n, [Assign(acc, mat[(d * GH + row) * n + q] * vec, "+=")])

        if clip is not None:
            t = k.ctype
            v_, c_ = Var("v", T), Var("c", T)
            clip_fn = k.helper(f"mtvm_clip_{t[0]}", render_c(Function(
                f"mtvm_clip_{t[0]}", [v_, c_], [Return(select(lt(v_, -c_), -c_,
                                                              select(greater(v_, c_), c_, v_)))],
                ret=T, static=True, inline=True)))

        def act_array(n: int, at: Expr, count: int):
            """Activation n in place over `count` values from `at`, where act_arrays has it
            (the same for every direction, no clip); else None."""
            names = {A[dd][n][0] for dd in range(dirs)}
            f = (act_arrays or {}).get(names.pop()) if len(names) == 1 and clip is None \
                else None
            return ExprStmt(call(f, at, count)) if f else None

        def act(n: int, pre: Expr, clipped: bool = True) -> Expr:
            """Activation n (f, g, h) of direction d of `pre` (clipped: a gate's input)."""
            text = render_c(pre)
            if clip is not None and clipped:
                text = f"{clip_fn}({text}, {k.lit(clip)})"
            e = [_act_c(k, *A[dd][n], text) for dd in range(dirs)]
            return RawExpr(e[0]) if len(set(e)) == 1 else select(eq(d, 0), RawExpr(e[0]),
                                                                 RawExpr(e[1]))

        lines = [Comment("hidden state [dirs][B][H]"), Decl(hs, Cast(TP, SCRATCH))]
        if lstm:
            lines += [Comment("cell state [dirs][B][H]"), Decl(cs, hs + ns)]
        lines += [Comment("gates of one step"), Decl(gt, hs + ns * (2 if lstm else 1))]
        if op == "GRU" and not (gemv and linear_before_reset):
            lines += [Comment("r * h, or R_h h + Rb_h"), Decl(rh, gt + GH)]
        if gemv and not gemv_init:
            lines += [Comment("R h of one step"), Decl(gr, gt + (GH + H))]
        elif gemv_init and op == "GRU":
            lines += [Comment("R_h h + Rb_h of one step"), Decl(gr, gt + GH)]
        xw, xp = Var("xw", TP), Var("xp", TP)
        if steps:
            lines += [Comment(f"W x of {steps} steps [{steps}][{GH}], their inputs [{I}][{steps}]"),
                      Decl(xw, gr + GH), Decl(xp, xw + steps * GH),
                      ExprStmt(call("memset", xp, 0, I * steps * np.dtype(dt).itemsize))]
        init = [Assign(hs[state_at], param(h0)[st_at] if h0 is not None else zero)]
        if lstm:
            init.append(Assign(cs[state_at], param(c0)[st_at] if c0 is not None else zero))
        lines.append(For(d, dirs, [For(b_, B, [For(j, H, init)])]))
        if y is not None:   # steps past a sequence's length stay 0
            lines.append(ExprStmt(call("memset", param(y, output=True), 0,
                                  y.size * np.dtype(y.dtype).itemsize)))
        if seqlens is not None:   # clamped to [0, S]: never reads outside X
            sl = param(seqlens)[b_]
            len_value = select(lt(sl, 0), 0, select(greater(sl, S), S, Cast(index_type(), sl)))
        else:
            len_value = Const(S)
        back = length - 1 - s_
        tt_value = {"forward": s_, "reverse": back,
                    "bidirectional": select(eq(d, 1), back, s_)}[direction]
        step = [Decl(tt, tt_value), Decl(h, hs + (d * B + b_) * H)]
        if lstm:
            step.append(Decl(c, cs + (d * B + b_) * H))
        # Gate rows with the whole recurrent term (all but GRU's h gate): W x + R h + biases.
        full = 2 * H if op == "GRU" else GH
        if gemv:
            # gt = W x (every gate row), gr = R h (GRU without linear_before_reset:
            # z and r only; its h gate multiplies R_h by r * h below).
            if gemv_init:
                # gt = (Wb + Rb) + W x, then gt += R h in place: no pass over the gate rows
                # (GRU: z and r; its h gate takes R_h h + Rb_h apart, into gr)
                bs = GH + (H if op == "GRU" else 0)   # the summed bias row of a direction
                wx = gemv_call(gemv_init, I, X + xa, mat(W, I), GH, bias_v + d * bs,
                               gt) if bias is not None else \
                    gemv_call(gemv, I, X + xa, mat(W, I), GH, gt)
                step += [ExprStmt(wx), ExprStmt(gemv_call(gemv_init, H, h, mat(R, H), full,
                                                          gt, gt))]
                if op == "GRU":
                    rhh = gemv_call(gemv_init, H, h, mat(R, H, 2 * H), H,
                                    bias_v + (d * bs + GH), gr) if bias is not None else \
                        gemv_call(gemv, H, h, mat(R, H, 2 * H), H, gr)
                    step.append(ExprStmt(rhh))
            else:
                nr = 2 * H if op == "GRU" and not linear_before_reset else GH
                gsum = gr[g] + wb(g) + rb(g) if bias is not None else gr[g]
                wx = (call("memcpy", gt, xw + (s_ - Var("s0")) * GH,
                           GH * np.dtype(dt).itemsize)
                      if steps else gemv_call(gemv, I, X + xa, mat(W, I), GH, gt))
                step += [ExprStmt(wx),
                         ExprStmt(gemv_call(gemv, H, h, mat(R, H), nr, gr)),
                         For(g, full, [Assign(gt[g], gsum, "+=")])]
        else:
            step.append(For(g, full, [Decl(acc, wb(g) + rb(g)), dot(W, I, g, X[xa + q]),
                                      dot(R, H, g, h[q]), Assign(gt[g], acc)]))
        if op == "RNN":
            arr = act_array(0, gt, H)
            step += [arr, For(j, H, [Assign(h[j], gt[j])])] if arr else \
                [For(j, H, [Assign(h[j], act(0, gt[j]))])]
        elif op == "GRU":
            # z, r = f(...); h~ = g(...) into gt[2H..3H); h = (1 - z) h~ + z h.
            step.append(act_array(0, gt, 2 * H) or For(j, 2 * H, [Assign(gt[j], act(0, gt[j]))]))
            hrow = 2 * H + j
            if gemv_init:
                # h~ = g((Wb_h + W_h x) + r * (Rb_h + R_h h)): the bias already in both
                hbody = [Decl(acc, gt[hrow] + gt[H + j] * gr[j])]
            elif gemv and linear_before_reset:
                # h~ = g(W_h x + Wb_h + r * (R_h h + Rb_h)): gt and gr hold the products.
                hbody = [Decl(acc, gt[hrow] + wb(hrow) + gt[H + j] * (gr[hrow] + rb(hrow)))]
            elif gemv:
                # h~ = g(W_h x + R_h (r * h) + Wb_h + Rb_h)
                step += [For(j, H, [Assign(rh[j], gt[H + j] * h[j])]),
                         ExprStmt(gemv_call(gemv, H, rh, mat(R, H, 2 * H), H, gr + 2 * H))]
                hbody = [Decl(acc, gt[hrow] + gr[hrow] + wb(hrow) + rb(hrow))]
            elif linear_before_reset:
                # h~ = g(W_h x + Wb_h + r * (R_h h + Rb_h)): Rb_h only inside the product.
                step.append(For(j, H, [Decl(acc, rb(hrow)), dot(R, H, hrow, h[q]),
                                       Assign(rh[j], acc)]))
                hbody = [Decl(acc, wb(hrow) + gt[H + j] * rh[j]), dot(W, I, hrow, X[xa + q])]
            else:
                # h~ = g(W_h x + R_h (r * h) + Wb_h + Rb_h)
                step.append(For(j, H, [Assign(rh[j], gt[H + j] * h[j])]))
                hbody = [Decl(acc, wb(hrow) + rb(hrow)), dot(W, I, hrow, X[xa + q]),
                         dot(R, H, hrow, rh[q])]
            harr = act_array(1, gt + 2 * H, H)
            step += [For(j, H, hbody + [Assign(gt[hrow], acc)]), harr] if harr else \
                [For(j, H, hbody + [Assign(gt[hrow], act(1, acc))])]
            step.append(For(j, H, [Assign(h[j], (one - gt[j]) * gt[hrow] + gt[j] * h[j])]))
        else:
            # LSTM, gate rows i, o, f, c; peepholes P i, o, f. c = f c + i g(.);
            # o sees the new c; h = o h(c).
            def pre(gate, peep_row=None):
                e = gt[gate * H + j]
                if peep is not None and peep_row is not None:
                    e = e + param(peep)[d * (3 * H) + peep_row * H + j] * c[j]
                return e
            ig, fg = Var("ig", Type(dt, const=True)), Var("fg", Type(dt, const=True))
            arrays = [act_array(0, gt, 3 * H), act_array(1, gt + 3 * H, H),
                      act_array(2, gt + 3 * H, H)]
            if peep is None and not input_forget and all(arrays):
                # i, o, f = f(...) and g(c row) in place; c = f c + i g, kept in the c row
                # for h(c) in place; h = o h(c)
                step += arrays[:2] + [
                    For(j, H, [Assign(c[j], gt[2 * H + j] * c[j] + gt[j] * gt[3 * H + j]),
                               Assign(gt[3 * H + j], c[j])]),
                    arrays[2], For(j, H, [Assign(h[j], gt[H + j] * gt[3 * H + j])])]
            else:
                step.append(For(j, H, [
                    Decl(ig, act(0, pre(0, 0))),
                    Decl(fg, one - ig if input_forget else act(0, pre(2, 2))),
                    Assign(c[j], fg * c[j] + ig * act(1, pre(3))),
                    Assign(h[j], act(0, pre(1, 1)) * act(2, c[j], clipped=False))]))
        if y is not None:
            step.append(For(j, H, [Assign(param(y, output=True)[y_at], h[j])]))
        if steps:
            # Per block of `steps` steps from s0: their inputs packed [I][steps] (the GEMM's
            # weights side), xw[r][g] = sum_i x_{s0 + r}[i] W[d][i][g] in tiles of
            # MTVM_F32_NR gate rows, then the steps, each copying its row into gt.
            s0, n_, r_, i_ = Var("s0"), Var("n", index_type(const=True)), Var("r"), Var("i")
            # (len: every step runs; only the reversed directions' tt reads it)
            own_len = [Decl(length, S)] if direction != "forward" else []
            pack = For(r_, n_, [Decl(s_, s0 + r_), *own_len, Decl(tt, tt_value),
                                For(i_, I, [Assign(xp[i_ * steps + r_], X[tt * I + i_])])])
            q0, q_, nr_ = Var("q0"), Var("q"), RawExpr("MTVM_F32_NR")
            tile = Var("tile", TP)
            tiles = column_tiles(k, rows=steps, taps=I, a=render_c(xp),
                                 b=render_c(W + d * (I * GH) + q0), ldb=GH, cols=GH,
                                 store=[render_c(Assign(xw[r_ * GH + q0 + q_],
                                                        tile[r_ * nr_ + q_]))])
            block = [Decl(n_, select(lt(S - s0, steps), S - s0, steps)), pack,
                     Raw("\n".join(tiles)),
                     For(s_, s0 + n_, [For(b_, B, [*own_len, *step])], begin=s0)]
            lines.append(For(d, dirs, [For(s0, S, block, step=steps)]))
        else:
            lines.append(For(d, dirs, [For(s_, S, [For(b_, B, [
                Decl(length, len_value), If(lt(s_, length), step)])])]))
        for o, src in ((yh, hs), (yc, cs)):
            if o is None:
                continue
            value = src[state_at]
            if seqlens is not None:   # length 0 gives 0, as in onnxruntime
                value = select(greater(param(seqlens)[b_], 0), value, zero)
            lines.append(For(d, dirs, [For(b_, B, [For(j, H, [
                Assign(param(o, output=True)[st_at], value)])])]))
        return render_c(lines)


@register("RNN")
class RNN(_Recurrent):
    gates = 1


@register("GRU")
class GRU(_Recurrent):
    gates = 3


@register("LSTM")
class LSTM(_Recurrent):
    gates = 4
