"""Operators with state carried along the time axis: LinearAttention (linear,
gated, delta and gated-delta update rules) and CausalConvWithState (a
depthwise causal 1-D convolution whose left context is the past state).

The references are onnx.reference's (the spec's own loops); the kernels run
one time step at a time, the LinearAttention state [B, H_kv, d_k, d_v] in
scratch memory.
"""
from __future__ import annotations

import numpy as np

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
