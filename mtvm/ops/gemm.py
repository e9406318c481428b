"""Matrix products: Gemm and MatMul.

Both emit the same register-blocked core: for each output row, BLOCK output
columns are accumulated at once over the reduction index k (an accumulator
array of constant length, which gcc keeps in registers and vectorizes when
the B row is contiguous), then scaled, biased, passed through the fused
epilogue and stored. Leftover columns take a scalar loop.

A constant transposed B (PyTorch's Linear weight with transB=1) is stored
pre-transposed at compile time, so the kernel always reads B rows contiguously.
Accumulation is in the output type (float32); integer MatMul is MatMulInteger's
business (not here).
"""
from __future__ import annotations

import numpy as np

from ..codegen.cwriter import ExprStmt, RawExpr, call, render_c
from ..codegen.kernel import epilogue_mode
from ..errors import ShapeError
from .base import Op, register
from .elementwise import broadcast_strides

BLOCK = 4   # output columns accumulated together


def _term(var: str, stride: int) -> str | None:
    if stride == 0:
        return None
    if stride == 1:
        return var
    return f"({var}) * {stride}" if " " in var else f"{var} * {stride}"


def _sum(*terms) -> str:
    """Sum of the non-empty C terms, "" when there are none."""
    return " + ".join(t for t in terms if t)


def _offset(*terms) -> str:
    """Sum of the non-empty C terms, "0" when there are none."""
    return _sum(*terms) or "0"


def emit_matmul_core(k, *, m: int, kk: int, n: int, a_base: str, b_base: str, o_base: str,
                     a_strides: tuple[int, int], b_strides: tuple[int, int],
                     value=lambda acc, i, j: acc, ch=None) -> str:
    """C statements computing out0[o_base + i*n + j] = value(sum_k A[i,k] B[k,j]).

    a_strides / b_strides: element strides of A's (row, col) and B's (row, col)
    from their base offsets (C expressions). `value(acc, i, j)` turns the dot
    product into the stored value (alpha, bias); `ch(i, j)` gives the epilogue
    channel expression (default: the flat index's axis-1 coordinate)."""
    a_row = _term("i", a_strides[0])
    lines = [f"for (size_t i = 0; i < {m}; ++i) {{"]
    body = []

    def a_at(kv):
        return f"in0[{_offset(a_base, a_row, _term(kv, a_strides[1]))}]"

    def b_at(kv, j):
        return f"in1[{_offset(b_base, _term(kv, b_strides[0]), _term(j, b_strides[1]))}]"

    def store(acc, j):
        idx = _offset(o_base, _term("i", n), j)
        out = [f"{k.ctype} v = {value(acc, 'i', j)};"]
        ep = k.epilogue("v", idx, ch("i", j) if ch else None)
        if ep:
            out.append(ep)
        out.append(f"out0[{idx}] = v;")
        return out

    zero = k.lit(0)
    blocked = n // BLOCK * BLOCK
    if blocked:
        body += [f"for (size_t j = 0; j < {blocked}; j += {BLOCK}) {{",
                 f"    {k.ctype} acc[{BLOCK}] = {{ {', '.join([zero] * BLOCK)} }};",
                 f"    for (size_t k = 0; k < {kk}; ++k) {{",
                 f"        const {k.ctype} a = {a_at('k')};",
                 f"        for (size_t q = 0; q < {BLOCK}; ++q) {{",
                 f"            acc[q] += a * {b_at('k', 'j + q')};",
                 "        }",
                 "    }",
                 f"    for (size_t q = 0; q < {BLOCK}; ++q) {{"]
        body += ["        " + s for s in store("acc[q]", "j + q")]
        body += ["    }", "}"]
    if blocked < n:
        body += [f"for (size_t j = {blocked}; j < {n}; ++j) {{",
                 f"    {k.ctype} acc = {zero};",
                 f"    for (size_t k = 0; k < {kk}; ++k) {{",
                 f"        acc += {a_at('k')} * {b_at('k', 'j')};",
                 "    }"]
        body += ["    " + s for s in store("acc", "j")]
        body.append("}")
    lines += ["    " + s for s in body]
    lines.append("}")
    return "\n".join(lines)


# -- Gemm ----------------------------------------------------------------------

@register("Gemm")
class Gemm(Op):
    """Y = alpha * A' B' + beta * C, A' = A or A^T (transA), B' likewise (transB);
    C (optional) broadcasts unidirectionally to Y's (M, N)."""
    anchor = True

    def canonicalize(self, node, graph, opset):
        # A constant B^T is stored transposed once, so the kernel reads B rows.
        if node.attrs.get("transB", 0) and len(node.inputs) > 1:
            b = graph.const(node.inputs[1])
            if b is not None and b.ndim == 2:
                name = node.inputs[1] + "_T"
                done = graph.const(name)   # a weight shared by several Gemms
                if done is None or not np.array_equal(done, b.T):
                    name = graph.add_const(name, np.ascontiguousarray(b.T))
                node.inputs[1] = name
                node.attrs["transB"] = 0

    def reference(self, a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
        a = a.T if transA else a
        b = b.T if transB else b
        y = np.asarray(alpha, a.dtype) * (a @ b)
        if c is not None:
            y = y + np.asarray(beta, a.dtype) * c
        return y.astype(a.dtype)

    @staticmethod
    def _dims(node, inputs):
        a, b = inputs[0].shape, inputs[1].shape
        if len(a) != 2 or len(b) != 2:
            raise ShapeError(f"Gemm needs 2-D A and B, got {list(a)} and {list(b)}")
        m, ka = (a[1], a[0]) if node.attrs.get("transA", 0) else a
        kb, n = (b[1], b[0]) if node.attrs.get("transB", 0) else b
        if ka != kb:
            raise ShapeError(f"Gemm: inner dimensions differ ({ka} vs {kb})")
        return m, ka, n

    def infer(self, node, inputs, consts):
        m, _, n = self._dims(node, inputs)
        c = inputs[2] if len(inputs) > 2 else None
        if c is not None and np.broadcast_shapes(c.shape, (m, n)) != (m, n):
            raise ShapeError(f"Gemm: C of shape {list(c.shape)} does not broadcast to "
                             f"{[m, n]}")
        return [((m, n), inputs[0].dtype)]

    def macs(self, node, inputs, outputs):
        m, kk, n = self._dims(node, inputs)
        return m * kk * n

    def emit(self, k, *, alpha=1.0, beta=1.0, transA=0, transB=0):
        a = k.ins[0]
        m, n = k.out.shape
        kk = a.shape[0] if transA else a.shape[1]
        a_strides = (1, m) if transA else (kk, 1)
        b_strides = (1, kk) if transB else (n, 1)
        value = gemm_value(k, alpha=alpha, beta=beta)
        if m == 1 and b_strides == (n, 1) and k.ctype == "float":
            return emit_gemv(k, kk=kk, n=n, value=value)
        return emit_matmul_core(k, m=m, kk=kk, n=n, a_base="", b_base="", o_base="",
                                a_strides=a_strides, b_strides=b_strides, value=value,
                                ch=lambda i, j: j)


def gemm_value(k, *, alpha=1.0, beta=1.0, **_attrs):
    """Gemm's value(acc, i, j): alpha * acc + beta * C[i, j] (C broadcast to Y)."""
    c = k.ins[2] if len(k.ins) > 2 else None
    c_strides = broadcast_strides(c.shape, k.out.shape) if c is not None else None

    def value(acc, i, j):
        v = acc if alpha == 1.0 else f"{k.lit(alpha)} * {acc}"
        if c is None or beta == 0.0:
            return v
        cv = f"{c.c}[{_offset(_term(i, c_strides[0]), _term(j, c_strides[1]))}]"
        return f"{v} + {cv}" if beta == 1.0 else f"{v} + {k.lit(beta)} * {cv}"
    return value


def emit_gemv(k, *, kk: int, n: int, value) -> str:
    """One row of A (a batch-1 fully connected layer) times row-major B: the GEMV
    micro-kernel (mtvm/ops/microkernels.py) over blocks of output columns, each
    weight read once and in order, then alpha/C, the fused epilogue and the store."""
    from .microkernels import gemv_ukernel
    fn = gemv_ukernel(k)
    lines = [f"/* Schedule: GEMV, y[j] = sum_k a[k] * B[k][j] over {kk} k, {n} columns in",
             " * blocks of MTVM_F32_GEMV_COLS (the B rows read in order, each weight once). */",
             f"for (int j0 = 0; j0 < {n}; j0 += MTVM_F32_GEMV_COLS) {{",
             f"    const int nj = {n} - j0 < MTVM_F32_GEMV_COLS ? {n} - j0 : "
             "MTVM_F32_GEMV_COLS;",
             "    float tile[MTVM_F32_GEMV_COLS];",
             f"    {fn}({kk}, in0, in1 + j0, {n}, nj, tile);",
             "    for (int q = 0; q < nj; ++q) {",
             "        const int j = j0 + q;",
             f"        {k.ctype} v = {value('tile[q]', '0', 'j')};"]
    ep = k.epilogue("v", "j", "j")
    if ep:
        lines.append("        " + ep)
    lines += ["        out0[j] = v;", "    }", "}"]
    return "\n".join(lines)


def emit_matmul_tiles(k, *, rows: int, kk: int, n: int, a_strides: tuple[int, int], mr: int,
                      value=lambda acc, i, j: acc, ch=None, a_base: str = "",
                      b_base: str = "", o_base: str = "", plain: bool = False) -> str:
    """out0[o_base + i * n + j] = value(sum_t A[i][t] B[t][j]) for a row-major B
    (in1 + b_base, [kk][n]) through the float GEMM micro-kernel
    (mtvm/ops/microkernels.py): per block of mr rows, A's rows (from in0 +
    a_base) are copied transposed into scratch ([kk][mr], the micro-kernel's
    packed operand), then one mr x MTVM_F32_NR tile per block of B columns, each
    B row read contiguously. `ch(i, j)`: the epilogue's axis-1 channel (None:
    from the flat index). plain: `value` is the sum itself (MatMul), so where the
    tail is at most a clamp AVX2 builds store the tiles from registers
    (microkernels.column_tiles): the copy loop was most of attention's Q K^T, whose
    16 taps give each tile little work (kwt_tiny's, AVX2: 12.7 -> 4.3 us)."""
    from .microkernels import column_tiles, row_blocks
    lines = ["float* at = (float*)scratch;   /* mr rows of A transposed: [k][mr] */"]
    tail = vfp_tail(k, n) if plain else None

    def epi(m0: str):
        return (f"out0 + {_offset(o_base, _term(m0, n), 'q0')}", n) if plain else None

    def vfp(m0: str, r_count: int) -> list[str] | None:
        """Arm FPUs: a whole tile stored from the registers, with the tail's bias along
        the columns and residual (mtvm_f32_gemm_rows_cbias_vfp)."""
        if tail is None or r_count % 4:
            return None
        k.library("mtvm_gemm_f32_vfp.h")
        at_tile = _offset(o_base, _term(m0, n), "q0")
        bias = f"{tail[0]} + q0" if tail[0] else "NULL"
        res = f"{tail[1]} + {at_tile}" if tail[1] else "NULL"
        args = (kk, "at", r_count, f"in1 + {_offset(b_base, 'q0')}", n, bias, res,
                f"out0 + {at_tile}", n, r_count)
        return [render_c(ExprStmt(call("mtvm_f32_gemm_rows_cbias_vfp",
                                       *(RawExpr(str(a)) for a in args))))]

    def block(m0: str, r_count: int) -> list[str]:
        a_at = _offset(a_base, _term(f"({m0} + r)", a_strides[0]), _term("t", a_strides[1]))
        o_at = _offset(o_base, _term("i", n), "j")
        store = [f"const size_t i = {m0} + r, j = q0 + q;",
                 f"{k.ctype} v = {value(f'tile[r * MTVM_F32_NR + q]', 'i', 'j')};"]
        ep = k.epilogue("v", o_at, ch("i", "j") if ch else None, last="j")
        if ep:
            store.append(ep)
        store.append(f"out0[{o_at}] = v;")
        return [f"for (size_t t = 0; t < {kk}; ++t) {{",
                f"    for (size_t r = 0; r < {r_count}; ++r) at[t * {r_count} + r] = in0[{a_at}];",
                "}"] + column_tiles(k, rows=r_count, taps=kk, a="at",
                                    b=f"in1 + {_offset(b_base, 'q0')}", ldb=n, cols=n,
                                    store=store, epi=epi(m0), vfp=vfp(m0, r_count))
    return "\n".join(lines + row_blocks(rows, mr, block))


def vfp_tail(k, n: int) -> tuple[str, str] | None:
    """For a MatMul on an Arm FPU (its whole tiles stored from registers,
    mtvm_f32_gemm_rows_cbias_vfp): the C names of the tail's bias along the output's last
    axis (a Linear layer's) and of its residual (an Add of a tensor of the output's shape),
    "" for either it lacks; None where the tail is anything else (or in that order not)."""
    if not (k.target.is_arm and k.target.fpu) or k.ctype != "float":
        return None
    out_shape = k.graph.tensors[k.node.kernel_outputs[0]].shape
    found, eps = {"bias": "", "res": ""}, iter(k.eps)
    for t in k.node.tail:
        operand = k.graph.tensors[t.inputs[1]] if len(t.inputs) == 2 and t.inputs[1] else None
        if t.op != "Add" or t.domain or operand is None or \
                (operand.data is not None and operand.size == 1):   # a literal in the C
            return None
        buf = next(eps)
        mode = epilogue_mode(out_shape, operand.shape)
        if np.dtype(operand.dtype) != np.float32:
            return None
        if (mode == "last" or (mode == "channel" and len(out_shape) == 2)) and \
                operand.shape[-1] == n and not found["bias"] and not found["res"]:
            found["bias"] = buf.c
        elif mode == "full" and not found["res"]:
            found["res"] = buf.c
        else:
            return None
    return found["bias"], found["res"]


# -- MatMul --------------------------------------------------------------------

def _matmul_dims(sa, sb):
    """(batch shape, batch strides of A, of B, M, K, N, output shape)."""
    if not sa or not sb:
        raise ShapeError("MatMul operands must have rank >= 1")
    a2 = (1,) + tuple(sa) if len(sa) == 1 else tuple(sa)
    b2 = tuple(sb) + (1,) if len(sb) == 1 else tuple(sb)
    m, ka = a2[-2:]
    kb, n = b2[-2:]
    if ka != kb:
        raise ShapeError(f"MatMul: inner dimensions differ ({ka} vs {kb})")
    batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    sta = [s * m * ka for s in broadcast_strides(a2[:-2], batch)] if batch else []
    stb = [s * kb * n for s in broadcast_strides(b2[:-2], batch)] if batch else []
    out = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
    return batch, sta, stb, m, ka, n, out


@register("MatMul")
class MatMul(Op):
    """NumPy matmul: 1-D operands are promoted (and the dim dropped again),
    leading batch dims broadcast."""
    anchor = True

    def reference(self, a, b):
        return np.matmul(a, b).astype(a.dtype)

    def infer(self, node, inputs, consts):
        out = _matmul_dims(inputs[0].shape, inputs[1].shape)[-1]
        return [(out, inputs[0].dtype)]

    def macs(self, node, inputs, outputs):
        batch, _, _, m, kk, n, _ = _matmul_dims(inputs[0].shape, inputs[1].shape)
        return int(np.prod(batch, dtype=np.int64)) * m * kk * n

    def emit(self, k):
        def core(m, kk, n, a_base, b_base, o_base, ch):
            return emit_matmul_core(k, m=m, kk=kk, n=n, a_base=a_base, b_base=b_base,
                                    o_base=o_base, a_strides=(kk, 1), b_strides=(n, 1), ch=ch)
        return emit_batched(k, core)


def emit_batched(k, core) -> str:
    """MatMul's loops over its broadcast batch dims around
    core(m, kk, n, a_base, b_base, o_base, ch) (C statements for one [m, kk] x
    [kk, n] product at those element offsets; ch(i, j): the epilogue channel)."""
    a, b = k.ins
    batch, sta, stb, m, kk, n, out = _matmul_dims(a.shape, b.shape)
    loops, close = [], []
    a_terms, b_terms, o_terms = [], [], []
    o_stride = m * n
    out_strides = []
    for d in reversed(batch):
        out_strides.append(o_stride)
        o_stride *= d
    out_strides.reverse()
    for d, size in enumerate(batch):
        var = f"b{d}"
        pad = "    " * d
        loops.append(f"{pad}for (size_t {var} = 0; {var} < {size}; ++{var}) {{")
        close.insert(0, pad + "}")
        a_terms.append(_term(var, sta[d]))
        b_terms.append(_term(var, stb[d]))
        o_terms.append(_term(var, out_strides[d]))
    # Explicit axis-1 channel of the output where it is a loop variable.
    ch = None
    if len(out) == 2 and len(batch) == 0 and len(a.shape) > 1 and len(b.shape) > 1:
        ch = (lambda i, j: j)
    elif len(out) >= 3 and len(batch) >= 2:
        ch = (lambda i, j: "b1")
    elif len(out) >= 3 and len(batch) == 1:
        ch = (lambda i, j: i)
    body = core(m, kk, n, _sum(*a_terms), _sum(*b_terms), _sum(*o_terms), ch)
    pad = "    " * len(batch)
    body = "\n".join(pad + line for line in body.splitlines())
    return "\n".join(loops + [body] + close)
