"""Linear algebra beyond MatMul/Gemm: Einsum (any explicit or implicit equation,
one loop nest over all its letters) and Det (Gaussian elimination with partial
pivoting, in double)."""
from __future__ import annotations

import numpy as np

from .base import Op, register
from ..codegen.cwriter import (Assign, Cast, Const, Decl, For, If, Type, Var, call, eq, gt, ne,
                               not_, param, render_c, sum_of)
from .indexing import prod, strides_of


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
        dt = k.outs[0].dtype
        var = {c: Var(_v(c)) for c in size}
        value = None
        for term, b in zip(terms, k.ins):
            idx = sum_of([var[c] * s for c, s in zip(term, strides_of(b.shape))])
            value = param(b)[idx] if value is None else value * param(b)[idx]
        ost = strides_of([size[c] for c in rhs])
        acc = Var("acc", Type(dt))
        inner = [Assign(acc, value, "+=")]
        for c in reversed(summed):
            inner = [For(var[c], size[c], inner)]
        stmts = [Decl(acc, Const(0, dt)), *inner,
                 Assign(param(k.outs[0], output=True)[sum_of([var[c] * s for c, s in
                                                              zip(rhs, ost)])], acc)]
        for c in reversed(rhs):
            stmts = [For(var[c], size[c], stmts)]
        return render_c(stmts)

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
        D, DP = Type("float64"), Type("float64", pointer=True)
        a, det, done = Var("a", DP), Var("det", D), Var("done", Type("int32"))
        i0, j, c, r, p = Var("i0"), Var("j"), Var("c"), Var("r"), Var("p")
        t, f = Var("t", Type("float64", const=True)), Var("f", Type("float64", const=True))

        def at(row, col):
            return a[row * n + col]
        swap = For(j, n, [Decl(t, at(c, j)), Assign(at(c, j), at(p, j)), Assign(at(p, j), t)])
        step = [Decl(p, c),
                For(r, n, [If(gt(call("fabs", at(r, c)), call("fabs", at(p, c))),
                              [Assign(p, r)])], begin=c + 1),
                # a zero pivot: the determinant is 0 and the elimination stops there
                If(eq(at(p, c), Const(0.0, "float64")), [Assign(det, Const(0.0, "float64")),
                                                         Assign(done, Const(1))], [
                    If(ne(p, c), [swap, Assign(det, -det)]),
                    Assign(det, at(c, c), "*="),
                    For(r, n, [Decl(f, at(r, c) / at(c, c)),
                               For(j, n, [Assign(at(r, j), f * at(c, j), "-=")], begin=c)],
                        begin=c + 1)])]
        per_matrix = [For(j, n * n, [Assign(a[j], Cast(D, param(x)[i0 * (n * n) + j]))]),
                      Decl(det, Const(1.0, "float64")), Decl(done, Const(0)),
                      For(c, n, [If(not_(done), step)]),
                      Assign(param(k.out, output=True)[i0], Cast(Type(k.out.dtype), det))]
        return render_c([Decl(a, Cast(DP, Var("scratch", Type("uint8", pointer=True)))),
                         For(i0, batch, per_matrix)])
