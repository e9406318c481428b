"""Attention (opset 23+): scaled dot-product attention with grouped KV heads,
3-D or 4-D inputs, boolean or additive masks (shorter masks padded), causal
and sliding-window masking, a KV cache (past_key/past_value -> present_*),
per-batch non-padded lengths, softcap and the qk_matmul_output modes; and
RotaryEmbedding (the rotation of query/key halves or interleaved pairs).

The kernel walks (batch, head, query) and keeps one row of scores in scratch
memory (kv_sequence_length values): no [S, S] matrix is ever held. The NumPy
reference is onnx.reference's (it is the spec, with its many corner cases).
"""
from __future__ import annotations

import numpy as np

from .base import Op, register
from .elementwise import broadcast_strides
from .indexing import body, nest, prod


def _dims(q, k, v, q_num_heads, kv_num_heads):
    """(B, Hq, Hkv, Sq, Skv_new, Dq, Dv) of the inputs."""
    if len(q.shape) == 3:
        B, Sq, _ = q.shape
        Hq, Hkv = q_num_heads, kv_num_heads
        return B, Hq, Hkv, Sq, k.shape[1], q.shape[2] // Hq, v.shape[2] // Hkv
    B, Hq, Sq, Dq = q.shape
    return B, Hq, k.shape[1], Sq, k.shape[2], Dq, v.shape[3]


@register("Attention")
class Attention(Op):
    def reference(self, *inputs, **attrs):
        from onnx.reference.ops.op_attention import _compute_attention
        names = ["attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
        kw = {n: v for n, v in zip(names, inputs[3:]) if v is not None}
        with np.errstate(all="ignore"):
            outs = _compute_attention(*inputs[:3], **kw, **attrs,
                                      _validate_attention25=False)
        return tuple(outs)

    def infer(self, node, inputs, consts):
        q, k, v = inputs[:3]
        a = node.attrs
        B, Hq, Hkv, Sq, Sk, Dq, Dv = _dims(q, k, v, a.get("q_num_heads"), a.get("kv_num_heads"))
        past = inputs[4] if len(inputs) > 4 and inputs[4] is not None else None
        P = past.shape[2] if past is not None else 0
        dt = np.dtype(q.dtype)
        y = (B, Sq, Hq * Dv) if len(q.shape) == 3 else (B, Hq, Sq, Dv)
        return [(y, dt), ((B, Hkv, P + Sk, Dq), dt), ((B, Hkv, P + Sk, Dv), dt),
                ((B, Hq, Sq, P + Sk), dt)][:len(node.outputs)]

    def scratch_bytes(self, k, /, **attrs) -> int:
        """One row of scores: (past + new) key positions."""
        pk = (k.ins + [None] * 7)[4]
        S = (pk.shape[2] if pk is not None else 0) + _dims(
            *k.ins[:3], attrs.get("q_num_heads"), attrs.get("kv_num_heads"))[4]
        return max(S * np.dtype(k.ins[0].dtype).itemsize, 16)

    def emit(self, k, *, scale=None, is_causal=0, q_num_heads=None, kv_num_heads=None,
             softmax_precision=None, softcap=None, qk_matmul_output_mode=None,
             left_window_size=None, right_window_size=None):
        q, kk, v = k.ins[:3]
        opt = (k.ins + [None] * 7)[3:7]
        mask, pk, pv, nonpad = opt
        B, Hq, Hkv, Sq, Sk, Dq, Dv = _dims(q, kk, v, q_num_heads, kv_num_heads)
        P = pk.shape[2] if pk is not None else 0
        S = P + Sk
        grp = Hq // Hkv
        t = k.ctype
        f = "f" if t == "float" else ""
        three = len(q.shape) == 3
        sc = float(np.sqrt(scale if scale is not None else 1 / np.sqrt(Dq)))
        L = -1 if left_window_size is None else left_window_size
        R = -1 if right_window_size is None else right_window_size
        outs = (k.outs + [None] * 4)[:4]
        y, present_k, present_v, qk_out = outs
        k.scratch_bytes = self.scratch_bytes(k, q_num_heads=q_num_heads,
                                             kv_num_heads=kv_num_heads)
        # Element addresses.
        if three:
            qa = f"(b * {Sq} + i) * {Hq * Dq} + h * {Dq}"
            ka = f"(b * {Sk} + (j - {P})) * {Hkv * Dq} + kh * {Dq}"
            va = f"(b * {Sk} + (j - {P})) * {Hkv * Dv} + kh * {Dv}"
            ya = f"(b * {Sq} + i) * {Hq * Dv} + h * {Dv}"
        else:
            qa = f"((b * {Hq} + h) * {Sq} + i) * {Dq}"
            ka = f"((b * {Hkv} + kh) * {Sk} + (j - {P})) * {Dq}"
            va = f"((b * {Hkv} + kh) * {Sk} + (j - {P})) * {Dv}"
            ya = f"((b * {Hq} + h) * {Sq} + i) * {Dv}"
        pka = f"((b * {Hkv} + kh) * {P} + j) * {Dq}"
        pva = f"((b * {Hkv} + kh) * {P} + j) * {Dv}"
        key = (f"(j < {P} ? &in4[{pka}] : &in1[{ka}])" if P else f"&in1[{ka}]")
        val = (f"(j < {P} ? &in5[{pva}] : &in2[{va}])" if P else f"&in2[{va}]")
        ninf = f"(-HUGE_VAL{'F' if f else ''})"
        lines = [f"{t}* row = ({t}*)scratch;",
                 f"const {t} sc = {k.lit(sc)};",
                 f"for (size_t b = 0; b < {B}; ++b) {{",
                 f"for (size_t h = 0; h < {Hq}; ++h) {{",
                 f"    const size_t kh = h / {grp};",
                 "    (void)kh;",
                 f"    for (size_t i = 0; i < {Sq}; ++i) {{",
                 f"        const {t}* qv = &in0[{qa}];",
                 f"        {t} bias_max = {ninf};",
                 f"        for (size_t j = 0; j < {S}; ++j) {{",
                 f"            const {t}* kv = {key};",
                 f"            {t} dot = {k.lit(0)};",
                 f"            {t} bias = {k.lit(0)};",
                 f"            for (size_t d = 0; d < {Dq}; ++d) {{",
                 "                dot += (qv[d] * sc) * (kv[d] * sc);",
                 "            }"]
        body = []
        if softcap is not None and softcap > 0:
            body.append(f"dot = {k.lit(softcap)} * tanh{f}(dot / {k.lit(softcap)});")
        if mask is not None:
            Lm = mask.shape[-1]
            ms = broadcast_strides(mask.shape, (B, Hq, Sq, Lm))
            terms = " + ".join(f"{var} * {s}" for var, s in zip(("b", "h", "i", "j"), ms) if s)
            addr = terms or "0"
            if mask.dtype == np.bool_:
                body.append(f"if (j >= {Lm} || !in3[{addr}]) bias = {ninf};")
            else:
                body.append(f"bias = j < {Lm} ? ({t})in3[{addr}] : {ninf};")
        if nonpad is not None:
            off = f"((int64_t)in6[b] - {Sq})"
        else:
            off = f"INT64_C({P})"
        if is_causal:
            body.append(f"if ((int64_t)j > (int64_t)i + {off}) bias = {ninf};")
        if L >= 0 or R >= 0:
            body.append(f"{{ const int64_t diff = (int64_t)i + {off} - (int64_t)j;")
            if L >= 0:
                body.append(f"  if (diff > {L}) bias = {ninf};")
            if R >= 0:
                body.append(f"  if (-diff > {R}) bias = {ninf};")
            body.append("}")
        if nonpad is not None:
            body.append(f"if ((int64_t)j >= (int64_t)in6[b]) bias = {ninf};")
        body.append("if (bias > bias_max) bias_max = bias;")
        if qk_out is not None:
            qk_at = f"((b * {Hq} + h) * {Sq} + i) * {S} + j"
            if qk_matmul_output_mode == 2:
                body.append(f"out3[{qk_at}] = dot + bias;")
            elif qk_matmul_output_mode != 3:
                body.append(f"out3[{qk_at}] = dot;")
        body.append("row[j] = dot + bias;")
        lines += ["            " + s for s in body]
        lines += ["        }",
                  f"        {t} m = {ninf};",
                  f"        for (size_t j = 0; j < {S}; ++j) if (row[j] > m) m = row[j];",
                  f"        {t} sum = {k.lit(0)};",
                  f"        for (size_t j = 0; j < {S}; ++j) {{",
                  f"            row[j] = (bias_max == {ninf} || m == {ninf}) ? {k.lit(0)} "
                  f": exp{f}(row[j] - m);",
                  "            sum += row[j];",
                  "        }",
                  f"        if (sum == {k.lit(0)}) sum = {k.lit(1)};"]
        if qk_out is not None and qk_matmul_output_mode == 3:
            lines += [f"        for (size_t j = 0; j < {S}; ++j) "
                      f"out3[((b * {Hq} + h) * {Sq} + i) * {S} + j] = row[j] / sum;"]
        lines += [f"        for (size_t e = 0; e < {Dv}; ++e) {{",
                  f"            {t} acc = {k.lit(0)};",
                  f"            for (size_t j = 0; j < {S}; ++j) {{",
                  f"                const {t}* vv = {val};",
                  "                acc += (row[j] / sum) * vv[e];",
                  "            }",
                  f"            out0[{ya} + e] = acc;",
                  "        }",
                  "    }",
                  "}",
                  "}"]
        for o, src_new, src_past, D in ((present_k, "in1", "in4", Dq),
                                        (present_v, "in2", "in5", Dv)):
            if o is None:
                continue
            if three:
                new = f"{src_new}[(b * {Sk} + (j - {P})) * {Hkv * D} + kh * {D} + d]"
            else:
                new = f"{src_new}[((b * {Hkv} + kh) * {Sk} + (j - {P})) * {D} + d]"
            past = f"{src_past}[((b * {Hkv} + kh) * {P} + j) * {D} + d]"
            src = f"(j < {P} ? {past} : {new})" if P else new
            lines += [f"for (size_t b = 0; b < {B}; ++b)",
                      f"for (size_t kh = 0; kh < {Hkv}; ++kh)",
                      f"for (size_t j = 0; j < {S}; ++j)",
                      f"for (size_t d = 0; d < {D}; ++d)",
                      f"    {o.c}[((b * {Hkv} + kh) * {S} + j) * {D} + d] = {src};"]
        return "\n".join(lines)

    def macs(self, node, inputs, outputs):
        y = outputs[0]
        return int(prod(y.shape)) * 2 * (outputs[1].shape[2] if len(outputs) > 1 else 1)


@register("FlexAttention", domain="ai.onnx.preview")
class FlexAttention(Attention):
    """Without score_mod/prob_mod subgraphs (which the front end rejects) it is
    4-D scaled dot-product attention with grouped KV heads."""

    def reference(self, q, k, v, *, scale=None):
        return super().reference(q, k, v, scale=scale)[:1]

    def infer(self, node, inputs, consts):
        return super().infer(node, inputs, consts)[:1]

    def emit(self, k, *, scale=None):
        return super().emit(k, scale=scale)


@register("RotaryEmbedding")
class RotaryEmbedding(Op):
    def reference(self, x, cos, sin, position_ids=None, **attrs):
        from onnx.reference.ops.op_rotary_embedding import rotary_embedding
        return rotary_embedding(x, cos, sin, position_ids=position_ids, **attrs).astype(x.dtype)

    def emit(self, k, *, interleaved=0, rotary_embedding_dim=0, num_heads=0):
        x = k.ins[0]
        pos = k.ins[3] if len(k.ins) > 3 else None
        if len(x.shape) == 4:
            B, H, S, D = x.shape
            addr = f"((b * {H} + h) * {S} + s) * {D}"
        else:
            B, S, HD = x.shape
            H = num_heads
            D = HD // H
            addr = f"(b * {S} + s) * {HD} + h * {D}"
        R = rotary_embedding_dim or D
        half = R // 2
        cache = f"(size_t)in3[b * {S} + s] * {half}" if pos is not None else \
            f"(b * {S} + s) * {half}"
        if interleaved:
            i1, i2 = "2 * i", "2 * i + 1"
        else:
            i1, i2 = "i", f"i + {half}"
        t = k.ctype
        lines = nest([B, S, H], [
            "const size_t b = i0, s = i1, h = i2;",
            f"const size_t base = {addr};",
            f"const size_t cb = {cache};",
            f"for (size_t i = 0; i < {half}; ++i) {{",
            f"    const {t} c = in1[cb + i], sn = in2[cb + i];",
            f"    const {t} x1 = in0[base + {i1}], x2 = in0[base + {i2}];",
            f"    out0[base + {i1}] = c * x1 - sn * x2;",
            f"    out0[base + {i2}] = sn * x1 + c * x2;",
            "}",
            f"for (size_t d = {R}; d < {D}; ++d) out0[base + d] = in0[base + d];"])
        return body(lines)
