"""mtvm/codegen/cwriter.py: every node renders, names and comments are escaped,
parentheses follow C's precedence (checked against gcc on random trees), and a
second renderer -- a Python interpreter of the same objects -- runs the IR the
op emitters build, which shows the IR holds meaning, not C text."""
from __future__ import annotations

import dataclasses
import random
import subprocess

import numpy as np
import pytest

from mtvm.codegen import cwriter as cw
from mtvm.codegen.cwriter import (
    INDEX,
    VOID,
    ArrayDecl,
    Assign,
    Binary,
    Block,
    Call,
    Cast,
    Comment,
    Const,
    Decl,
    ExprStmt,
    For,
    Function,
    If,
    Index,
    Pragma,
    PreIf,
    Raw,
    RawExpr,
    Return,
    Ternary,
    Type,
    Unary,
    Var,
    render_c,
)

F32 = Type("float32")
LOOP_I = Var("i")
X = Var("in0", Type("float32", pointer=True, const=True))
OUT = Var("out0", Type("float32", pointer=True))
V = Var("v", F32)


# -- every node renders ------------------------------------------------------------------------

NODES = [
    (Var("acc", F32), "acc"),
    (Const(3), "3"),
    (Const(0.5, "float32"), "0.5f"),
    (Const(-np.inf, "float32"), "-HUGE_VALF"),
    (Const(7, "int64"), "INT64_C(7)"),
    (Unary("-", V), "-v"),
    (Unary("!", V), "!v"),
    (Binary("*", V, Const(2.0, "float32")), "v * 2.0f"),
    (Call("expf", (V,)), "expf(v)"),
    (Index(X, LOOP_I + 1), "in0[i + 1]"),
    (Cast(Type("int32"), V), "(int32_t)v"),
    (Ternary(cw.lt(V, Const(0, "float32")), Const(0, "float32"), V), "v < 0.0f ? 0.0f : v"),
    (RawExpr("in1[3]"), "in1[3]"),
    (Decl(V, X[LOOP_I]), "float v = in0[i];"),
    (Decl(Var("p", Type("float32", pointer=True, const=True)), X + 4), "const float* p = in0 + 4;"),
    (ArrayDecl(Var("red", cw.index_type(const=True)), (0, 4, 8)),
     "static const size_t red[3] = { 0, 4, 8 };"),
    (cw.Table(Var("wt", Type("float32")), np.array([[0.5, -1.0], [2.0, 0.25]])),
     "static const float wt[4] = { 0.5f, -1.0f, 2.0f, 0.25f };"),
    (cw.LocalArray(Var("tile", F32), 96), "float tile[96];"),
    (Assign(OUT[LOOP_I], V), "out0[i] = v;"),
    (Assign(V, X[LOOP_I], "+="), "v += in0[i];"),
    (ExprStmt(Cast(Type(VOID), OUT)), "(void)out0;"),
    (For(LOOP_I, 8, [Assign(OUT[LOOP_I], V)]),
     "for (size_t i = 0; i < 8; ++i) {\n    out0[i] = v;\n}"),
    (For(LOOP_I, 16, [], begin=4, step=4), "for (size_t i = 4; i < 16; i += 4) {\n}"),
    (For(LOOP_I, 16, [], step=Var("MTVM_F32_NR", Type("int32"))),
     "for (size_t i = 0; i < 16; i += MTVM_F32_NR) {\n}"),
    (If(cw.gt(V, Const(0, "float32")), [Return()], [Assign(V, Const(1, "float32"))]),
     "if (v > 0.0f) {\n    return;\n} else {\n    v = 1.0f;\n}"),
    (If(cw.eq(LOOP_I, 0), [Return(Const(1))], [If(cw.eq(LOOP_I, 1), [Return(Const(2))])]),
     "if (i == 0) {\n    return 1;\n} else if (i == 1) {\n    return 2;\n}"),
    (Block([Decl(LOOP_I, 0)]), "{\n    size_t i = 0;\n}"),
    (Return(Const(0)), "return 0;"),
    (Comment("why this loop"), "/* why this loop */"),
    (Pragma("GCC unroll 4"), "#pragma GCC unroll 4"),
    (PreIf("MTVM_F32_AVX2", [Return(Const(1))], [Return(Const(2))]),
     "#if MTVM_F32_AVX2\nreturn 1;\n#else\nreturn 2;\n#endif"),
    (Raw("v = 2 * v;\nv += 1;"), "v = 2 * v;\nv += 1;"),
]


@pytest.mark.parametrize("node,text", NODES, ids=lambda x: type(x).__name__)
def test_every_node_renders(node, text):
    assert render_c(node) == text


def test_every_node_class_is_covered():
    classes = {c for c in vars(cw).values() if isinstance(c, type)
               and issubclass(c, (cw.Expr, cw.Stmt)) and c not in (cw.Expr, cw.Stmt)}
    assert classes <= {type(n) for n, _ in NODES}


def test_function_and_indentation():
    f = Function("tvmgen_m_relu", [X, Var("out0", Type("float32", pointer=True, restrict=True))],
                 [For(LOOP_I, 4, [Decl(V, X[LOOP_I]), If(cw.lt(V, Const(0, "float32")),
                                               [Assign(V, Const(0, "float32"))]),
                             Assign(OUT[LOOP_I], V)]), Return(Const(0, "int32"))],
                 ret=Type("int32"), static=True)
    assert render_c(f) == """\
static int32_t tvmgen_m_relu(const float* in0, float* restrict out0) {
    for (size_t i = 0; i < 4; ++i) {
        float v = in0[i];
        if (v < 0.0f) {
            v = 0.0f;
        }
        out0[i] = v;
    }
    return 0;
}"""
    assert render_c(Function("f", [], [])) == "void f(void) {\n}"
    assert render_c([Decl(V), Assign(V, Const(1.0, "float32"))], level=2) == \
        "        float v;\n        v = 1.0f;"


# -- escaping --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["int", "x */ y", "a\nb", "é", "size_t", "0abc", "NULL", "" ])
def test_hostile_names_become_safe_identifiers(name):
    text = render_c(Decl(Var(name, F32), Const(0, "float32")))
    ident = text[len("float "):-len(" = 0.0f;")]
    assert ident.isidentifier() and ident.isascii()
    assert ident not in ("int", "size_t", "NULL")


def test_plain_names_are_kept():
    for name in ("i", "in0", "out0", "acc", "base", "inv_std", "mtvm_exp_f32", "isnan", "s7"):
        assert render_c(Var(name)) == name
        assert render_c(Call(name, (LOOP_I,))) == f"{name}(i)"


@pytest.mark.parametrize("text", ["end */ int x = 1; /*", "line\nbreak", "tri??/graph",
                                  "*", "a/*b", "back\\"])
def test_comments_cannot_escape(text):
    out = render_c(Comment(text))
    inner = out[3:-3]
    assert out.startswith("/* ") and out.endswith(" */")
    assert "*/" not in inner and "/*" not in inner and "\n" not in out and "??" not in inner


def test_pragma_is_one_line():
    with pytest.raises(ValueError):
        render_c(Pragma("once\nint evil;"))


def test_preprocessor_branches_keep_their_level():
    """The directives in column 0, the statements indented as their block's."""
    loop = For(LOOP_I, 4, [PreIf("MTVM_F32_AVX2", [Return(Const(1))])])
    assert render_c(loop) == ("for (size_t i = 0; i < 4; ++i) {\n#if MTVM_F32_AVX2\n"
                              "    return 1;\n#endif\n}")


@pytest.mark.parametrize("cond", ["A\nint evil;", "A /* */", "A; int x", ""])
def test_preprocessor_condition_is_macro_names(cond):
    with pytest.raises(ValueError):
        PreIf(cond, [])


# The only strings outside the escape hatches (Raw, RawExpr), the comment and the pragma:
# names (escaped when rendered), operators and dtypes.
NAME_FIELDS = {(Var, "name"), (Call, "func"), (Unary, "op"), (Binary, "op"), (Assign, "op"),
               (Type, "dtype"), (Const, "dtype")}


def _strings(node):
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        for item in (v if isinstance(v, tuple) else (v,)):
            if isinstance(item, str):
                yield type(node), f.name
            elif dataclasses.is_dataclass(item):
                yield from _strings(item)


def test_no_c_text_in_ordinary_nodes():
    for node, _ in NODES:
        if not isinstance(node, (Raw, RawExpr, Comment, Pragma, PreIf)):
            assert set(_strings(node)) <= NAME_FIELDS, node
    with pytest.raises(TypeError):
        V + "1.0f"   # C text must be wrapped explicitly (RawExpr)


# -- precedence ---------------------------------------------------------------------------------

A, B, C = Var("a", F32), Var("b", F32), Var("c", F32)


@pytest.mark.parametrize("expr,text", [
    ((A + B) * C, "(a + b) * c"),
    (A + B * C, "a + b * c"),
    (A - (B - C), "a - (b - c)"),
    (A - B - C, "a - b - c"),
    (A / (B * C), "a / (b * c)"),
    ((A + B) + (B + C), "(a + b) + (b + c)"),     # a pairwise sum reads as one
    (-(A + B), "-(a + b)"),
    (-Unary("-", A), "-(-a)"),
    (-Const(-1.0, "float32"), "-(-1.0f)"),
    (A * Const(-2.0, "float32"), "a * -2.0f"),
    ((LOOP_I / 12) % 3, "(i / 12) % 3"),
    (cw.or_(cw.and_(A, B), C), "(a && b) || c"),
    (cw.eq(cw.lt(A, B), C), "(a < b) == c"),
    (Ternary(cw.or_(cw.gt(A, B), Call("isnan", (A,))), A, B), "(a > b || isnan(a)) ? a : b"),
    (Ternary(cw.lt(A, B), A, Ternary(cw.gt(A, C), C, A)), "a < b ? a : (a > c ? c : a)"),
    (A * Ternary(cw.lt(A, B), A, B), "a * (a < b ? a : b)"),
    (Cast(Type("int32"), A + B), "(int32_t)(a + b)"),
    (Index(X + 4, LOOP_I), "(in0 + 4)[i]"),
])
def test_parentheses(expr, text):
    assert render_c(expr) == text


def test_str_is_safe_to_paste_into_c_text():
    assert str(A + B) == "(a + b)"
    assert str(X[LOOP_I]) == "in0[i]"
    assert f"2 * {A + B}" == "2 * (a + b)"


def _random_tree(rng: random.Random, depth: int):
    if depth == 0 or rng.random() < 0.2:
        return Const(rng.randint(-9, 9), "int64")
    kind = rng.choice("bbbbbut")
    if kind == "u":
        return Unary(rng.choice("-!"), _random_tree(rng, depth - 1))
    if kind == "t":
        return Ternary(*(_random_tree(rng, depth - 1) for _ in range(3)))
    op = rng.choice(["+", "-", "*", "<", ">", "<=", ">=", "==", "!=", "&&", "||"])
    return Binary(op, _random_tree(rng, depth - 1), _random_tree(rng, depth - 1))


def test_random_trees_mean_the_same_in_c(tmp_path):
    """gcc (-Wall -Wextra -Werror: no parentheses warning either) computes what the
    tree means, as the interpreter below evaluates it."""
    rng = random.Random(12)
    trees = [_random_tree(rng, 4) for _ in range(300)]
    src = ["#include <stdint.h>", "#include <stdio.h>", "int main(void) {"]
    src += [f'    printf("%lld\\n", (long long)({render_c(t)}));' for t in trees]
    src += ["    return 0;", "}"]
    (tmp_path / "t.c").write_text("\n".join(src) + "\n")
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wno-overflow",
                    "-o", str(tmp_path / "t"), str(tmp_path / "t.c")], check=True)
    got = subprocess.run([str(tmp_path / "t")], check=True, capture_output=True,
                         text=True).stdout.split()
    assert [int(g) for g in got] == [Interpreter({}).value(t) for t in trees]


# -- a second renderer: the IR interpreted in Python ----------------------------------------------

class Interpreter:
    """Runs statements on NumPy arrays: a renderer that never sees C text (a Raw
    node, the escape hatch, is refused). Pointers are array views."""

    FUNCS = {"expf": np.exp, "exp": np.exp, "mtvm_exp_f32": np.exp, "logf": np.log,
             "sqrtf": np.sqrt, "fabsf": np.abs, "isnan": np.isnan, "isfinite": np.isfinite}

    def __init__(self, env: dict):
        self.env = dict(env)

    def value(self, e):
        if isinstance(e, Var):
            return self.env[e.name]
        if isinstance(e, Const):
            return int(e.value) if e.dtype in (INDEX, "int64") else np.dtype(e.dtype).type(e.value)
        if isinstance(e, Index):
            return self.value(e.base)[self.value(e.index)]
        if isinstance(e, Call):
            return self.FUNCS[e.func](*(self.value(a) for a in e.args))
        if isinstance(e, Cast):
            return np.dtype(e.type.dtype).type(self.value(e.operand))
        if isinstance(e, Unary):
            x = self.value(e.operand)
            return -x if e.op == "-" else int(not x)
        if isinstance(e, Ternary):
            return self.value(e.then) if self.value(e.cond) else self.value(e.otherwise)
        if isinstance(e, Binary):
            return self.binary(e)
        raise TypeError(f"the interpreter cannot read {type(e).__name__}")

    def binary(self, e):
        if e.op in ("&&", "||"):
            left = bool(self.value(e.left))
            if left == (e.op == "||"):
                return int(left)
            return int(bool(self.value(e.right)))
        a, b = self.value(e.left), self.value(e.right)
        if isinstance(a, np.ndarray):   # pointer + offset
            return a[b:]
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
               "/": lambda: a // b if isinstance(a, int) and isinstance(b, int) else a / b,
               "%": lambda: a % b, "<": lambda: int(a < b), ">": lambda: int(a > b),
               "<=": lambda: int(a <= b), ">=": lambda: int(a >= b),
               "==": lambda: int(a == b), "!=": lambda: int(a != b)}
        return ops[e.op]()

    def run(self, stmts):
        for s in stmts:
            self.step(s)

    def step(self, s):
        if isinstance(s, Decl):
            self.env[s.var.name] = None if s.init is None else self.value(s.init)
        elif isinstance(s, Assign):
            self.assign(s)
        elif isinstance(s, For):
            i = self.value(s.begin)
            while i < self.value(s.end):
                self.env[s.var.name] = i
                self.run(s.body)
                i += s.step
        elif isinstance(s, If):
            self.run(s.then if self.value(s.cond) else s.otherwise)
        elif isinstance(s, (Block,)):
            self.run(s.body)
        elif isinstance(s, ArrayDecl):
            self.env[s.var.name] = [self.value(v) for v in s.values]
        elif not isinstance(s, (Comment, ExprStmt)):
            raise TypeError(f"the interpreter cannot run {type(s).__name__}")

    def assign(self, s):
        new = self.value(s.value)
        if s.op != "=":   # += -= *= /=
            new = self._combine(s.op[0], self.value(s.target), new)
        if isinstance(s.target, Index):
            self.value(s.target.base)[self.value(s.target.index)] = new
        else:
            self.env[s.target.name] = new

    @staticmethod
    def _combine(op, a, b):
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[op]


def _kernel(op, x, attrs, opset=17):
    """The Kernel of a one-node model (as the compiler builds it)."""
    from mtvm.codegen.c_codegen import make_kernel
    from mtvm.frontend.onnx_loader import load_onnx
    from mtvm.testing import make_model
    g = load_onnx(make_model(op, {"x": x}, attrs, opset=opset))
    return g, make_kernel(g, 0, "m")


def _interpret(stmts, k, x):
    out = np.zeros(k.out.size, x.dtype)
    Interpreter({k.ins[0].c: x.ravel(), k.out.c: out}).run(stmts)
    return out.reshape(k.out.shape)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("shape,axis", [((3, 10), -1), ((2, 5, 3), 1)])
def test_interpreter_runs_the_softmax_family_ir(op, shape, axis):
    from mtvm.ops import get_op
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    g, k = _kernel(op, x, {"axis": axis}, opset=13)
    impl = get_op(op)
    got = _interpret(impl.loops(k, **k.node.attrs), k, x)
    np.testing.assert_allclose(got, impl.reference(x, **k.node.attrs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceLogSumExp", "ReduceL2"])
def test_interpreter_runs_the_reduction_ir(op):
    from mtvm.ops import get_op
    x = np.random.default_rng(4).standard_normal((2, 3, 40)).astype(np.float32)
    g, k = _kernel(op, x, {"axes": [2], "keepdims": 0}, opset=13) if op != "ReduceSum" else \
        _kernel_reduce_sum(x)
    impl = get_op(op)
    attrs = k.node.attrs
    stmts = impl.loops(k, attrs.get("axes"), attrs.get("noop_with_empty_axes", 0))
    np.testing.assert_allclose(_interpret(stmts, k, x), impl.reference(x, **attrs), rtol=1e-5)


def _kernel_reduce_sum(x):
    """ReduceSum takes its axes as an input from opset 13."""
    from mtvm.codegen.c_codegen import make_kernel
    from mtvm.frontend.onnx_loader import load_onnx
    from mtvm.testing import make_model
    g = load_onnx(make_model("ReduceSum", {"x": x}, {"keepdims": 0},
                             consts={"axes": np.array([2], np.int64)}, opset=13))
    return g, make_kernel(g, 0, "m")


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "HardSwish", "Abs"])
def test_interpreter_runs_the_elementwise_ir(op):
    from mtvm.ops import get_op
    from mtvm.ops.elementwise import elementwise_body
    x = np.random.default_rng(5).standard_normal((4, 6)).astype(np.float32)
    g, k = _kernel(op, x, {})
    impl = get_op(op)
    got = _interpret(elementwise_body(impl, k, {}), k, x)
    np.testing.assert_allclose(got, impl.reference(x), rtol=1e-6)


def test_the_interpreter_refuses_raw_c():
    with pytest.raises(TypeError):
        Interpreter({}).run([Raw("v = 1;")])

