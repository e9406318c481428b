"""Text features: TfIdfVectorizer over integer token ids (n-gram pools as
constant tables)."""
from __future__ import annotations

from ..errors import UnsupportedError
from .base import Op, register
from .indexing import body, nest


@register("TfIdfVectorizer")
class TfIdfVectorizer(Op):
    """n-gram counts over integer tokens (pool_int64s); TF, IDF or TFIDF."""

    def check(self, node, inputs):
        if node.attrs.get("pool_strings"):
            raise UnsupportedError("TfIdfVectorizer on strings is not supported")

    def reference(self, x, **attrs):
        from .recurrent import reference_via_onnx
        return reference_via_onnx("TfIdfVectorizer", [x], attrs, 1)[0]

    def _grams(self, attrs):
        """[(size, tokens, output index, weight)] of the pool grams in [min, max]."""
        pool = list(attrs.get("pool_int64s") or [])
        counts = list(attrs["ngram_counts"]) + [len(pool)]
        idx = list(attrs["ngram_indexes"])
        w = list(attrs.get("weights") or [1.0] * len(idx))
        lo, hi = attrs["min_gram_length"], attrs["max_gram_length"]
        out, gid = [], 0
        for n in range(1, len(counts)):
            seg = pool[counts[n - 1]:counts[n]]
            for j in range(0, len(seg), n):
                if lo <= n <= hi:
                    out.append((n, seg[j:j + n], idx[gid], w[gid]))
                gid += 1
        return out

    def emit(self, k, **attrs):
        x = k.ins[0]
        rows, L = (1, x.size) if len(x.shape) <= 1 else (x.shape[0], x.shape[1])
        O = k.out.shape[-1]
        grams = self._grams(attrs)
        maxskip = attrs["max_skip_count"]
        mode = attrs["mode"]
        lines = [f"memset(out0, 0, {k.out.size} * sizeof out0[0]);"]
        for n, toks, oi, w in grams:
            ds = [1] if n == 1 else list(range(1, maxskip + 2))
            match = " && ".join(f"in0[r * {L} + s + {j} * d] == {t}" for j, t in enumerate(toks))
            lines += nest([rows], [
                "const size_t r = i0;",
                f"for (size_t d = {ds[0]}; d <= {ds[-1]}; ++d) {{",
                f"    for (size_t s = 0; s + {n - 1} * d < {L}; ++s) {{",
                f"        if ({match}) out0[r * {O} + {oi}] += {k.lit(1)};",
                "    }", "}"])
        if mode != "TF":
            wt = [1.0] * O
            for n, toks, oi, w in grams:
                wt[oi] = w
            lines.append(f"static const {k.ctype} wt[{O}] = {{ "
                         f"{', '.join(k.lit(v) for v in wt)} }};")
            op = "out0[i] > 0 ? wt[i % {O}] : {z}" if mode == "IDF" else "out0[i] * wt[i % {O}]"
            lines.append(f"for (size_t i = 0; i < {k.out.size}; ++i) out0[i] = "
                         + op.format(O=O, z=k.lit(0)) + ";")
        return body(lines)
