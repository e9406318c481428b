"""Linear algebra beyond MatMul/Gemm: Einsum (any explicit or implicit equation,
one loop nest over all its letters) and Det (Gaussian elimination with partial
pivoting, in double)."""
from __future__ import annotations

import numpy as np

from .base import Op, register
from .indexing import body, nest, prod, strides_of


@register("Einsum")
class Einsum(Op):
    """Any equation (an ellipsis becomes letters): loops over the output
    letters, an inner loop nest over the summed letters."""

    def reference(self, *xs, equation):
        wide = [x.astype(np.float32) if x.dtype.kind not in "fiub" else x for x in xs]
        return np.einsum(equation, *wide).astype(xs[0].dtype)

    @staticmethod
    def _expand(equation: str, ranks) -> str:
        """Equation with each "..." spelled out as upper-case letters."""
        eq = equation.replace(" ", "")
        if "..." not in eq:
            return eq
        lhs, arrow, rhs = eq.partition("->")
        terms = lhs.split(",")
        nell = max(r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t)
        letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:nell]
        out_terms = []
        for t, r in zip(terms, ranks):
            n = r - len(t.replace("...", ""))
            out_terms.append(t.replace("...", letters[nell - n:]))
        if arrow:
            rhs = rhs.replace("...", letters)
        else:
            rest = "".join(sorted(c for c in set("".join(out_terms)) if c.islower()
                                  and "".join(out_terms).count(c) == 1))
            rhs = letters + rest
        return ",".join(out_terms) + "->" + rhs

    @classmethod
    def plan(cls, equation, shapes) -> tuple[list[str], str, dict, list[str]]:
        """(input terms, output term, size of each letter, summed letters) of an
        equation over operands of these shapes (the implicit output: the letters
        used once, sorted)."""
        eq = cls._expand(equation, [len(s) for s in shapes])
        lhs, arrow, rhs = eq.partition("->")
        terms = lhs.split(",")
        if not arrow:
            letters = sorted(set(lhs.replace(",", "")))
            rhs = "".join(c for c in letters if lhs.count(c) == 1)
        size = {}
        for term, shape in zip(terms, shapes):
            for c, n in zip(term, shape):
                size[c] = n
        summed = [c for c in dict.fromkeys(lhs.replace(",", "")) if c not in rhs]
        return terms, rhs, size, summed

    def emit(self, k, *, equation):
        terms, rhs, size, summed = self.plan(equation, [b.shape for b in k.ins])
        t = k.ctype
        prods = []
        for j, (term, b) in enumerate(zip(terms, k.ins)):
            st = strides_of(b.shape)
            idx = " + ".join(f"{_v(c)} * {s}" for c, s in zip(term, st)) or "0"
            prods.append(f"in{j}[{idx}]")
        ost = strides_of([size[c] for c in rhs])
        oidx = " + ".join(f"{_v(c)} * {s}" for c, s in zip(rhs, ost)) or "0"
        inner = [f"acc += {' * '.join(prods)};"]
        for c in reversed(summed):
            inner = [f"for (size_t {_v(c)} = 0; {_v(c)} < {size[c]}; ++{_v(c)}) {{"] + \
                ["    " + s for s in inner] + ["}"]
        lines_in = [f"{t} acc = {k.lit(0)};"] + inner + [f"out0[{oidx}] = acc;"]
        for c in reversed(rhs):
            lines_in = [f"for (size_t {_v(c)} = 0; {_v(c)} < {size[c]}; ++{_v(c)}) {{"] + \
                ["    " + s for s in lines_in] + ["}"]
        return body(lines_in)

    def macs(self, node, inputs, outputs):
        return 0


def _v(c: str) -> str:
    return f"i_{c}" if c.islower() else f"I_{c}"


@register("Det")
class Det(Op):
    """Determinant by Gaussian elimination with partial pivoting (double)."""

    def reference(self, x):
        return np.linalg.det(x.astype(np.float64)).astype(x.dtype)

    def scratch_bytes(self, k, /) -> int:
        """One matrix in double, eliminated in place."""
        return k.ins[0].shape[-1] ** 2 * 8

    def emit(self, k):
        x = k.ins[0]
        n = x.shape[-1]
        batch = prod(x.shape[:-2])
        k.scratch_bytes = self.scratch_bytes(k)
        lines = ["double* a = (double*)scratch;"]
        lines += nest([batch], [
            f"for (size_t j = 0; j < {n * n}; ++j) a[j] = (double)in0[i0 * {n * n} + j];",
            "double det = 1.0;",
            f"for (size_t c = 0; c < {n}; ++c) {{",
            "    size_t p = c;",
            f"    for (size_t r = c + 1; r < {n}; ++r) "
            f"if (fabs(a[r * {n} + c]) > fabs(a[p * {n} + c])) p = r;",
            f"    if (a[p * {n} + c] == 0.0) {{ det = 0.0; break; }}",
            "    if (p != c) {",
            f"        for (size_t j = 0; j < {n}; ++j) {{ const double t = a[c * {n} + j]; "
            f"a[c * {n} + j] = a[p * {n} + j]; a[p * {n} + j] = t; }}",
            "        det = -det;",
            "    }",
            f"    det *= a[c * {n} + c];",
            f"    for (size_t r = c + 1; r < {n}; ++r) {{",
            f"        const double f = a[r * {n} + c] / a[c * {n} + c];",
            f"        for (size_t j = c; j < {n}; ++j) a[r * {n} + j] -= f * a[c * {n} + j];",
            "    }",
            "}",
            f"out0[i0] = ({k.ctype})det;"])
        return body(lines)
