"""Operators with state carried along the time axis: LinearAttention (linear,
gated, delta and gated-delta update rules) and CausalConvWithState (a
depthwise causal 1-D convolution whose left context is the past state).

The references are onnx.reference's (the spec's own loops); the kernels run
one time step at a time, the LinearAttention state [B, H_kv, d_k, d_v] in
scratch memory.
"""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .base import Op, register
from .indexing import body, nest


def _libm(k, name: str) -> str:
    return name + ("f" if k.ctype == "float" else "")


@register("LinearAttention")
class LinearAttention(Op):
    def reference(self, q, k, v, past_state=None, decay=None, beta=None, **attrs):
        from onnx.reference.ops.op_linear_attention import LinearAttention as R
        return tuple(R._run(None, q, k, v, past_state, decay, beta, **attrs))

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
        t = "float"
        k.scratch_bytes = (B * Hk * dk * dv + dv) * 4
        st = "st[((b * {Hk} + kh) * {dk} + d) * {dv} + m]".format(Hk=Hk, dk=dk, dv=dv)
        lines = [f"{t}* st = ({t}*)scratch;", f"{t}* vt = st + {B * Hk * dk * dv};"]
        if past is not None:
            lines.append(f"for (size_t i = 0; i < {B * Hk * dk * dv}; ++i) st[i] = ({t})in3[i];")
        else:
            lines.append(f"memset(st, 0, {B * Hk * dk * dv} * sizeof st[0]);")
        step = []
        if gating:
            per_d = decay.shape[2] == Hk * dk
            g = (f"in4[(b * {T} + s) * {Hk * dk} + kh * {dk} + d]" if per_d else
                 f"in4[(b * {T} + s) * {Hk} + kh]")
            step += [f"for (size_t d = 0; d < {dk}; ++d) {{",
                     f"    const {t} e = expf(({t}){g});",
                     f"    for (size_t m = 0; m < {dv}; ++m) {st} *= e;", "}"]
        kk = f"({t})in1[(b * {T} + s) * {Hk * dk} + kh * {dk} + d]"
        vv = f"({t})in2[(b * {T} + s) * {Hk * dv} + kh * {dv} + m]"
        if delta:
            bl = beta.shape[2]
            bt = (f"({t})in5[(b * {T} + s) * {bl} + kh]" if bl == Hk else
                  f"({t})in5[(b * {T} + s)]")
            step += [f"for (size_t m = 0; m < {dv}; ++m) {{",
                     f"    {t} r = 0;",
                     f"    for (size_t d = 0; d < {dk}; ++d) r += {st} * {kk};",
                     f"    vt[m] = {bt} * ({vv} - r);", "}"]
        else:
            step += [f"for (size_t m = 0; m < {dv}; ++m) vt[m] = {vv};"]
        step += [f"for (size_t d = 0; d < {dk}; ++d) {{",
                 f"    for (size_t m = 0; m < {dv}; ++m) {st} += {kk} * vt[m];", "}",
                 f"for (size_t g = 0; g < {grp}; ++g) {{",
                 f"    const size_t h = kh * {grp} + g;",
                 f"    for (size_t m = 0; m < {dv}; ++m) {{",
                 f"        {t} acc = 0;",
                 f"        for (size_t d = 0; d < {dk}; ++d) "
                 f"acc += ({t})in0[(b * {T} + s) * {Hq * dk} + h * {dk} + d] * {st};",
                 f"        out0[(b * {T} + s) * {Hq * dv} + h * {dv} + m] = "
                 f"({k.ctype})({k.lit(sc, np.float32)} * acc);",
                 "    }", "}"]
        lines += nest([T, B, Hk], ["const size_t s = i0, b = i1, kh = i2;"] + step)
        if len(k.outs) > 1 and k.outs[1] is not None:
            lines.append(f"for (size_t i = 0; i < {B * Hk * dk * dv}; ++i) "
                         f"out1[i] = ({k.outs[1].ctype})st[i];")
        return body(lines)


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
        t = k.ctype
        if K == 1:
            pad = f"in0[(b * {C} + c) * {L} + p]"
        elif past is not None:
            pad = (f"(p < {K - 1} ? in3[(b * {C} + c) * {K - 1} + p] : "
                   f"in0[(b * {C} + c) * {L} + p - {K - 1}])")
        else:
            pad = f"(p < {K - 1} ? {k.lit(0)} : in0[(b * {C} + c) * {L} + p - {K - 1}])"
        inner = ["const size_t b = i0, c = i1, o = i2;",
                 f"{t} acc = {'in2[c]' if bias is not None else k.lit(0)};",
                 f"for (size_t j = 0; j < {K}; ++j) {{",
                 "    const size_t p = o + j;",
                 f"    acc += in1[c * {K} + j] * {pad};", "}"]
        if activation in ("silu", "swish"):
            inner.append(f"acc = acc / ({k.lit(1)} + {_libm(k, 'exp')}(-acc));")
        inner.append(f"out0[(b * {C} + c) * {L} + o] = acc;")
        lines = nest([B, C, L], inner)
        if len(k.outs) > 1 and k.outs[1] is not None and K > 1:
            lines += nest([B, C, K - 1], [
                "const size_t b = i0, c = i1, p = i2 + " + str(L) + ";",
                f"out1[(b * {C} + c) * {K - 1} + i2] = {pad};"])
        return body(lines)


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


_ACT = {"Sigmoid": "{one} / ({one} + {exp}(-({x})))", "Tanh": "{tanh}({x})",
        "Relu": "(({x}) > {zero} ? ({x}) : {zero})"}


def _act(k, name: str, x: str) -> str:
    if name not in _ACT:
        raise UnsupportedError(f"recurrent activation {name} is not supported")
    return _ACT[name].format(x=x, one=k.lit(1), zero=k.lit(0), exp=_libm(k, "exp"),
                             tanh=_libm(k, "tanh"))


class _Recurrent(Op):
    gates = 1
    default_acts = ["Tanh"]

    def reference(self, *inputs, **attrs):
        n = 3 if self.name == "LSTM" else 2
        return reference_via_onnx(self.name, list(inputs), attrs, n)

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

    def check(self, node, inputs):
        for a in node.attrs.get("activations", []):
            if a not in _ACT:
                raise UnsupportedError(f"{node.op}: activation {a} is not supported")
        if node.attrs.get("clip") is not None or node.attrs.get("input_forget"):
            raise UnsupportedError(f"{node.op}: clip / input_forget are not supported")

    def emit(self, k, *, hidden_size, direction="forward", layout=0, activations=None,
             activation_alpha=None, activation_beta=None, clip=None, linear_before_reset=0,
             input_forget=0):
        x, w, r = k.ins[:3]
        opt = (k.ins + [None] * 8)[3:8]
        bias, seqlens, h0, c0, peep = opt
        G, H = self.gates, hidden_size
        lstm = self.name == "LSTM"
        if layout:
            B, S, I = x.shape
        else:
            S, B, I = x.shape
        dirs = 2 if direction == "bidirectional" else 1
        acts = list(activations or self.default_acts * dirs)
        t = k.ctype
        k.scratch_bytes = (dirs * B * H * (2 if lstm else 1) + G * H + H) * np.dtype(
            x.dtype).itemsize
        xa = (f"(b * {S} + tt) * {I}" if layout else f"(tt * {B} + b) * {I}")
        y_at = (f"((b * {S} + tt) * {dirs} + d) * {H}" if layout else
                f"((tt * {dirs} + d) * {B} + b) * {H}")
        yh_at = (f"(b * {dirs} + d) * {H}" if layout else f"(d * {B} + b) * {H}")
        y, yh, yc = (k.outs + [None] * 3)[:3]
        lines = [f"{t}* hs = ({t}*)scratch;                 /* [dirs][B][H] */",
                 f"{t}* cs = hs + {dirs * B * H};          /* LSTM cell state */" if lstm else
                 "",
                 f"{t}* gt = hs + {dirs * B * H * (2 if lstm else 1)};   /* gates of one step */",
                 f"{t}* rh = gt + {G * H};                  /* GRU: R_h * h */"
                 if self.name == "GRU" else ""]
        lines = [s for s in lines if s]
        init = f"in5[(d * {B} + b) * {H} + j]" if h0 is not None else k.lit(0)
        lines += nest([dirs, B, H], ["const size_t d = i0, b = i1, j = i2;",
                                     f"hs[(d * {B} + b) * {H} + j] = {init};"] + (
            [f"cs[(d * {B} + b) * {H} + j] = "
             f"{f'in6[(d * {B} + b) * {H} + j]' if c0 is not None else k.lit(0)};"]
            if lstm else []))
        if y is not None:
            lines.append(f"memset(out0, 0, {y.size} * sizeof out0[0]);")
        hb = f"hs[(d * {B} + b) * {H} + "
        step = ["const size_t d = i0, s = i1, b = i2;",
                f"const size_t len = {f'(size_t)in4[b]' if seqlens is not None else S};",
                "if (s >= len) continue;",
                f"const size_t tt = d == {1 if direction == 'bidirectional' else 0} && "
                f"{1 if direction != 'forward' else 0} ? len - 1 - s : s;",
                f"for (size_t g = 0; g < {G * H}; ++g) {{",
                f"    {t} acc = {f'in3[d * {2 * G * H} + g] + in3[d * {2 * G * H} + {G * H} + g]' if bias is not None else k.lit(0)};",
                f"    for (size_t i = 0; i < {I}; ++i) acc += in0[{xa} + i] * "
                f"in1[(d * {G * H} + g) * {I} + i];"]
        if self.name == "GRU":
            # The h gate's recurrent part is kept apart (linear_before_reset).
            step += [f"    {t} rr = {k.lit(0)};",
                     f"    for (size_t q = 0; q < {H}; ++q) rr += {hb}q] * "
                     f"in2[(d * {G * H} + g) * {H} + q];",
                     f"    if (g < {2 * H}) acc += rr;",
                     f"    else rh[g - {2 * H}] = rr;",
                     "    gt[g] = acc;", "}"]
        else:
            step += [f"    for (size_t q = 0; q < {H}; ++q) acc += {hb}q] * "
                     f"in2[(d * {G * H} + g) * {H} + q];",
                     "    gt[g] = acc;", "}"]
        A = [[acts[dd * (len(acts) // dirs) + j] for j in range(len(acts) // dirs)]
             for dd in range(dirs)]

        def act(j: int, e: str) -> str:
            if dirs == 1 or A[0][j] == A[1][j]:
                return _act(k, A[0][j], e)
            return f"(d == 0 ? {_act(k, A[0][j], e)} : {_act(k, A[1][j], e)})"

        upd = [f"for (size_t j = 0; j < {H}; ++j) {{"]
        if self.name == "RNN":
            upd += [f"    {hb}j] = {act(0, 'gt[j]')};"]
        elif self.name == "GRU":
            rb = (f"in3[d * {2 * G * H} + {G * H} + {2 * H} + j]" if bias is not None else
                  k.lit(0))
            upd += [f"    const {t} z = {act(0, 'gt[j]')};",
                    f"    const {t} r = {act(0, f'gt[{H} + j]')};"]
            if linear_before_reset:
                upd += [f"    const {t} hh = {act(1, f'gt[{2 * H} + j] + r * (rh[j] + {rb})')};"]
            else:
                # (r * h) * R_h: needs the whole r vector first: computed below.
                upd = None
            if upd is not None:
                upd += [f"    {hb}j] = ({k.lit(1)} - z) * hh + z * {hb}j];"]
        else:  # LSTM, gates i, o, f, c
            pi = f"in7[d * {3 * H} + j] * " if peep is not None else None
            pf = f"in7[d * {3 * H} + {2 * H} + j] * " if peep is not None else None
            po = f"in7[d * {3 * H} + {H} + j] * " if peep is not None else None
            cb = f"cs[(d * {B} + b) * {H} + j]"
            upd += [f"    const {t} ig = {act(0, f'gt[j]' + (f' + {pi}{cb}' if pi else ''))};",
                    f"    const {t} fg = {act(0, f'gt[{2 * H} + j]' + (f' + {pf}{cb}' if pf else ''))};",
                    f"    const {t} cg = {act(1, f'gt[{3 * H} + j]')};",
                    f"    {cb} = fg * {cb} + ig * cg;",
                    f"    const {t} og = {act(0, f'gt[{H} + j]' + (f' + {po}{cb}' if po else ''))};",
                    f"    {hb}j] = og * {act(2, cb)};"]
        if upd is None:
            # GRU, linear_before_reset = 0: h~ = g(W_h x + R_h (r * h) + biases).
            wbh = (f"in3[d * {2 * G * H} + {2 * H} + j] + in3[d * {2 * G * H} + {G * H} + "
                   f"{2 * H} + j]" if bias is not None else k.lit(0))
            upd = [f"for (size_t j = 0; j < {H}; ++j) rh[j] = {act(0, f'gt[{H} + j]')} * {hb}j];",
                   f"for (size_t j = 0; j < {H}; ++j) {{",
                   f"    {t} acc = {wbh};",
                   f"    for (size_t i = 0; i < {I}; ++i) acc += in0[{xa} + i] * "
                   f"in1[(d * {G * H} + {2 * H} + j) * {I} + i];",
                   f"    for (size_t q = 0; q < {H}; ++q) acc += rh[q] * "
                   f"in2[(d * {G * H} + {2 * H} + j) * {H} + q];",
                   f"    gt[{2 * H} + j] = acc;", "}",
                   f"for (size_t j = 0; j < {H}; ++j) {{",
                   f"    const {t} z = {act(0, 'gt[j]')};",
                   f"    {hb}j] = ({k.lit(1)} - z) * {act(1, f'gt[{2 * H} + j]')} + z * {hb}j];"]
        upd.append("}")
        step += upd
        if y is not None:
            step.append(f"for (size_t j = 0; j < {H}; ++j) out0[{y_at} + j] = {hb}j];")
        lines += nest([dirs, S, B], step)
        for o, src in ((yh, "hs"), (yc, "cs")):
            if o is not None:
                lines += nest([dirs, B, H], ["const size_t d = i0, b = i1, j = i2;",
                                             f"{o.c}[{yh_at} + j] = {src}[(d * {B} + b) * {H} + j];"])
        return body(lines)


@register("RNN")
class RNN(_Recurrent):
    gates = 1
    default_acts = ["Tanh"]


@register("GRU")
class GRU(_Recurrent):
    gates = 3
    default_acts = ["Sigmoid", "Tanh"]


@register("LSTM")
class LSTM(_Recurrent):
    gates = 4
    default_acts = ["Sigmoid", "Tanh", "Tanh"]
