"""The C writer: generated code as objects, rendered to text in one place.

Emitters build a small typed IR of C (expressions, statements, functions)
instead of formatting strings, and `render_c` turns it into text. Rendering
is the only place that knows C's syntax: operator precedence and the
parentheses it needs, the spelling of types and literals, indentation, and
the escaping of every identifier (names.c_name) and comment (names.c_comment).

The classes hold meaning only (a dtype, an operator, a loop's bounds), no C
text, so a second renderer (LLVM IR through llvmlite) can walk the same
objects. Two escape hatches hold C text and are for the boundary with code
still written as strings: `Raw` (statements, e.g. a fused tail from
Kernel.epilogue) and `RawExpr` (an operand handed over as text).

    i = Var("i")
    x = Var("x", Type("float32", pointer=True, const=True))
    body = For(i, Const(16), [Assign(Index(out, i), Call("expf", [Index(x, i)]))])
    render_c(body)   # for (size_t i = 0; i < 16; ++i) {\\n    out0[i] = expf(x[i]);\\n}
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .names import c_comment, c_name

INDENT = "    "

# -- types ---------------------------------------------------------------------------

INDEX = "index"    # the type of sizes and element offsets: size_t in C, an iN in LLVM
VOID = "void"


@dataclass(frozen=True)
class Type:
    """A scalar (a NumPy dtype name, INDEX or VOID) or a pointer to one. `const`
    qualifies the value (the pointee for a pointer); `restrict` the pointer."""
    dtype: str
    pointer: bool = False
    const: bool = False
    restrict: bool = False

    def __post_init__(self):
        if self.dtype not in (INDEX, VOID):
            object.__setattr__(self, "dtype", np.dtype(self.dtype).name)

    @property
    def element(self) -> "Type":
        """The type of what a pointer points at (a loaded value: not const)."""
        return Type(self.dtype)


def index_type(const: bool = False) -> Type:
    return Type(INDEX, const=const)


# -- expressions ---------------------------------------------------------------------

class Expr:
    """Base of expressions. Arithmetic operators build nodes (a Python int
    becomes an INDEX constant); comparisons are functions (lt, eq, ...) since
    == must stay structural equality. str() is the C text, parenthesized
    unless it is a primary expression, so that it can be pasted into C text
    written by code that has not moved to the writer."""

    def __add__(self, o): return Binary("+", self, _expr(o))
    def __radd__(self, o): return Binary("+", _expr(o), self)
    def __sub__(self, o): return Binary("-", self, _expr(o))
    def __rsub__(self, o): return Binary("-", _expr(o), self)
    def __mul__(self, o): return Binary("*", self, _expr(o))
    def __rmul__(self, o): return Binary("*", _expr(o), self)
    def __truediv__(self, o): return Binary("/", self, _expr(o))
    def __rtruediv__(self, o): return Binary("/", _expr(o), self)
    def __mod__(self, o): return Binary("%", self, _expr(o))
    def __neg__(self): return Unary("-", self)
    def __getitem__(self, index): return Index(self, _expr(index))

    def __str__(self):
        text, prec = _expr_text(self)
        return text if prec >= POSTFIX else f"({text})"


def _expr(value) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return Const(int(value))
    raise TypeError(f"not an expression: {value!r} (wrap C text in RawExpr, a number "
                    "in Const with its dtype)")


@dataclass(frozen=True, eq=True)
class Var(Expr):
    """A named value: a local, a parameter, a function. The name is escaped
    with names.c_name when rendered (unchanged when it already is a safe name)."""
    name: str
    type: Type = field(default_factory=index_type)


@dataclass(frozen=True, eq=True)
class Const(Expr):
    """A number of a dtype (INDEX: a plain integer); rendered exactly (c_literal)."""
    value: object
    dtype: str = INDEX

    def __post_init__(self):
        if self.dtype != INDEX:
            object.__setattr__(self, "dtype", np.dtype(self.dtype).name)


@dataclass(frozen=True, eq=True)
class Unary(Expr):
    op: str               # "-", "!", "~"
    operand: Expr


@dataclass(frozen=True, eq=True)
class Binary(Expr):
    op: str               # arithmetic, comparison, logical or bitwise C operator
    left: Expr
    right: Expr


@dataclass(frozen=True, eq=True)
class Call(Expr):
    func: str             # the function's name (escaped like a Var's)
    args: tuple = ()
    type: Type | None = None   # what it returns, when the caller knows

    def __post_init__(self):
        object.__setattr__(self, "args", tuple(_expr(a) for a in self.args))


@dataclass(frozen=True, eq=True)
class Index(Expr):
    """base[index]: a load, or the target of a store."""
    base: Expr
    index: Expr


@dataclass(frozen=True, eq=True)
class Cast(Expr):
    type: Type
    operand: Expr


@dataclass(frozen=True, eq=True)
class Ternary(Expr):
    cond: Expr
    then: Expr
    otherwise: Expr


@dataclass(frozen=True, eq=True)
class RawExpr(Expr):
    """Escape hatch: an operand given as C text by code still writing strings."""
    text: str


def lt(a, b): return Binary("<", _expr(a), _expr(b))
def gt(a, b): return Binary(">", _expr(a), _expr(b))
def le(a, b): return Binary("<=", _expr(a), _expr(b))
def ge(a, b): return Binary(">=", _expr(a), _expr(b))
def eq(a, b): return Binary("==", _expr(a), _expr(b))
def ne(a, b): return Binary("!=", _expr(a), _expr(b))
def and_(a, b): return Binary("&&", _expr(a), _expr(b))
def or_(a, b): return Binary("||", _expr(a), _expr(b))
def not_(a): return Unary("!", _expr(a))


def call(func: str, *args, type: Type | None = None) -> Call:
    return Call(func, args, type)


def select(cond, then, otherwise) -> Ternary:
    return Ternary(_expr(cond), _expr(then), _expr(otherwise))


def operand(value) -> Expr:
    """An expression for `value`: itself, or C text (from code still writing
    strings) as a RawExpr."""
    return RawExpr(value) if isinstance(value, str) else _expr(value)


def sum_of(terms, empty=0) -> Expr:
    """terms[0] + terms[1] + ...: an offset from its parts, zero terms left
    out (`empty` when none remain)."""
    terms = [t for t in map(_expr, terms) if t != Const(0)]
    if not terms:
        return _expr(empty)
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def scaled(var: Expr, stride: int) -> Expr:
    """var * stride, or var alone for a stride of 1."""
    return var if stride == 1 else var * stride


def type_of(e: Expr) -> Type | None:
    """The type of an expression, as far as the IR says (None: RawExpr, an
    untyped call). Comparisons and logic give int32 (C's int)."""
    if isinstance(e, Var):
        return e.type
    if isinstance(e, Const):
        return Type(e.dtype)
    if isinstance(e, Cast):
        return e.type
    if isinstance(e, Call):
        return e.type
    if isinstance(e, Index):
        base = type_of(e.base)
        return base.element if base is not None else None
    if isinstance(e, Unary):
        return Type("int32") if e.op == "!" else type_of(e.operand)
    if isinstance(e, Binary):
        if e.op in _COMPARISON or e.op in ("&&", "||"):
            return Type("int32")
        left, right = type_of(e.left), type_of(e.right)
        return right if left is None or left.dtype == INDEX else left
    if isinstance(e, Ternary):
        return type_of(e.then)
    return None


# -- statements ------------------------------------------------------------------------

class Stmt:
    """Base of statements."""


@dataclass(frozen=True)
class Decl(Stmt):
    """A local variable of var.type, optionally initialized."""
    var: Var
    init: Expr | None = None

    def __post_init__(self):
        if self.init is not None:
            object.__setattr__(self, "init", _expr(self.init))


@dataclass(frozen=True)
class ArrayDecl(Stmt):
    """A constant table: static const <var.type> name[len] = { values }."""
    var: Var
    values: tuple

    def __post_init__(self):
        object.__setattr__(self, "values", tuple(_expr(v) for v in self.values))


@dataclass(frozen=True)
class LocalArray(Stmt):
    """An uninitialized local array: <var.type> name[size]; (a tile a kernel fills)."""
    var: Var
    size: int


@dataclass(frozen=True, eq=False)
class Table(Stmt):
    """A constant table given as an array (weights re-laid out at compile time):
    static const <dtype> name[size] = { data... }; var.type is its element type."""
    var: Var
    data: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "data", np.ascontiguousarray(self.data,
                                                              dtype=self.var.type.dtype).ravel())


@dataclass(frozen=True)
class Assign(Stmt):
    """target op value, op one of = += -= *= /=; target a Var or an Index (a store)."""
    target: Expr
    value: Expr
    op: str = "="

    def __post_init__(self):
        object.__setattr__(self, "value", _expr(self.value))


@dataclass(frozen=True)
class ExprStmt(Stmt):
    expr: Expr


@dataclass(frozen=True)
class For(Stmt):
    """for var in [begin, end) by step (step > 0: an int, or an expression such as a
    kernel library macro), var declared by the loop."""
    var: Var
    end: Expr
    body: tuple
    begin: Expr = Const(0)
    step: "int | Expr" = 1

    def __post_init__(self):
        object.__setattr__(self, "end", _expr(self.end))
        object.__setattr__(self, "begin", _expr(self.begin))
        object.__setattr__(self, "body", tuple(self.body))


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple
    otherwise: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "cond", _expr(self.cond))
        object.__setattr__(self, "then", tuple(self.then))
        object.__setattr__(self, "otherwise", tuple(self.otherwise))


@dataclass(frozen=True)
class Block(Stmt):
    """A scope of its own (names declared inside end with it)."""
    body: tuple

    def __post_init__(self):
        object.__setattr__(self, "body", tuple(self.body))


@dataclass(frozen=True)
class PreIf(Stmt):
    """A branch the C preprocessor picks: #if cond, then, [#else, otherwise,] #endif.
    cond is a macro expression of the kernel library (MTVM_F32_AVX2, ...), never text
    from a model; the directives sit in column 0, the statements at their level."""
    cond: str
    then: tuple
    otherwise: tuple = ()

    def __post_init__(self):
        if not re.fullmatch(r"[A-Za-z0-9_ ()|&!]+", self.cond):
            raise ValueError(f"a preprocessor condition of macro names: {self.cond!r}")
        object.__setattr__(self, "then", tuple(self.then))
        object.__setattr__(self, "otherwise", tuple(self.otherwise))


@dataclass(frozen=True)
class Return(Stmt):
    value: Expr | None = None


@dataclass(frozen=True)
class Comment(Stmt):
    """Text for the reader (escaped: a node name in it can never end the comment)."""
    text: str


@dataclass(frozen=True)
class Pragma(Stmt):
    """#pragma <text>: one line of printable ASCII, never from a model."""
    text: str


@dataclass(frozen=True)
class Raw(Stmt):
    """Escape hatch: C statements as text, from code still writing strings
    (Kernel.epilogue's fused tails). Use sparingly: no other renderer can read it."""
    text: str


@dataclass(frozen=True)
class Function:
    """ret name(params) { body }; params are Vars (their type says const,
    pointer, restrict)."""
    name: str
    params: tuple
    body: tuple
    ret: Type = Type(VOID)
    static: bool = False
    inline: bool = False

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "body", tuple(self.body))


# -- rendering to C ---------------------------------------------------------------------------

_PREC = {"||": 4, "&&": 5, "|": 6, "^": 7, "&": 8, "==": 9, "!=": 9,
         "<": 10, ">": 10, "<=": 10, ">=": 10, "<<": 11, ">>": 11,
         "+": 12, "-": 12, "*": 13, "/": 13, "%": 13}
_COMPARISON = {"==", "!=", "<", ">", "<=", ">="}
TERNARY, UNARY, POSTFIX, PRIMARY = 3, 14, 15, 16
_ASSIGN_OPS = {"=", "+=", "-=", "*=", "/="}
_UNARY_OPS = {"-", "!", "~"}


def c_type(t: Type) -> str:
    """C spelling of a type: `const float* restrict`, `size_t`, `const int8_t`."""
    from ..ops.base import CTYPES   # here: mtvm.ops imports every op, and they import this
    base = {INDEX: "size_t", VOID: "void"}.get(t.dtype) or CTYPES[t.dtype]
    text = f"const {base}" if t.const else base
    if t.pointer:
        text += "* restrict" if t.restrict else "*"
    return text


def _declare(var: Var) -> str:
    return f"{c_type(var.type)} {c_name(var.name)}"


def _const_text(e: Const) -> str:
    from ..ops.base import c_literal
    if e.dtype == INDEX:
        return str(int(e.value))
    return c_literal(e.value, e.dtype)


_IDENT = re.compile(r"[A-Za-z_]\w*")
_NUMBER = re.compile(r"\d[\w.]*([eE][-+]?\d+[fF]?)?")


def _raw_prec(text: str) -> int:
    """Precedence of C text: primary for a name or number, postfix for a
    load or call of one (its brackets closing at the end), else lowest."""
    text = text.strip()
    if _IDENT.fullmatch(text) or _NUMBER.fullmatch(text):
        return PRIMARY
    head = _IDENT.match(text)
    if head and text[head.end():head.end() + 1] in ("[", "(") and _closes_at_end(text, head.end()):
        return POSTFIX
    if text.startswith("-") and _raw_prec(text[1:]) >= POSTFIX:
        return UNARY
    return 0


def _closes_at_end(text: str, start: int) -> bool:
    depth = 0
    for i in range(start, len(text)):
        depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i == len(text) - 1 or (text[i + 1] in "[(" and _closes_at_end(text, i + 1))
    return False


def _paren(e: Expr, need) -> str:
    text, prec = _expr_text(e)
    return f"({text})" if need(prec) else text


def _warned(parent: str, child: Expr) -> bool:
    """Parentheses C does not need but gcc -Wparentheses asks for (and a reader)."""
    if isinstance(child, Unary):   # `!a < b` reads as `!(a < b)`
        return child.op == "!" and parent in _COMPARISON
    if not isinstance(child, Binary):
        return False
    if parent == "||":
        return child.op == "&&"
    if parent in ("&", "|", "^"):
        return child.op != parent
    if parent in ("<<", ">>"):
        return child.op in ("+", "-")
    if "%" in (parent, child.op) and parent != child.op:   # `i / 12 % 3` reads badly
        return _PREC[parent] == _PREC[child.op]
    return parent in _COMPARISON and child.op in _COMPARISON


def _expr_text(e: Expr) -> tuple[str, int]:
    """(C text, precedence of its outermost operator)."""
    if isinstance(e, Var):
        return c_name(e.name), PRIMARY
    if isinstance(e, Const):
        text = _const_text(e)
        return text, (UNARY if text.startswith("-") else POSTFIX)
    if isinstance(e, RawExpr):
        return e.text, _raw_prec(e.text)
    if isinstance(e, Index):
        return f"{_paren(e.base, lambda p: p < POSTFIX)}[{_expr_text(e.index)[0]}]", POSTFIX
    if isinstance(e, Call):
        args = ", ".join(_expr_text(a)[0] for a in e.args)
        return f"{c_name(e.func)}({args})", POSTFIX
    if isinstance(e, Unary):
        if e.op not in _UNARY_OPS:
            raise ValueError(f"unknown unary operator {e.op!r}")
        text, prec = _expr_text(e.operand)
        if prec < UNARY or text[:1] in "-+!~":   # `- -x` must not become `--x`
            text = f"({text})"
        return f"{e.op}{text}", UNARY
    if isinstance(e, Cast):
        return f"({c_type(e.type)}){_paren(e.operand, lambda p: p < UNARY)}", UNARY
    if isinstance(e, Binary):
        if e.op not in _PREC:
            raise ValueError(f"unknown binary operator {e.op!r}")
        p = _PREC[e.op]
        right_grouped = _expr_text(e.right)[1] <= p
        # (a + b) + (c + d): a pairwise sum reads as one, though C needs only the right ( )
        left = _paren(e.left, lambda c: c < p or _warned(e.op, e.left)
                      or (right_grouped and c == p and _PREC.get(getattr(e.right, "op", "")) == p))
        right = _paren(e.right, lambda c: c <= p or _warned(e.op, e.right))
        return f"{left} {e.op} {right}", p
    if isinstance(e, Ternary):
        cond = _paren(e.cond, lambda c: c < _PREC["=="])
        then = _paren(e.then, lambda c: c <= TERNARY)
        other = _paren(e.otherwise, lambda c: c <= TERNARY)
        return f"{cond} ? {then} : {other}", TERNARY
    raise TypeError(f"not an expression node: {e!r}")


def _block_lines(body, level: int) -> list[str]:
    return [line for s in body for line in _stmt_lines(s, level)]


def _for_head(s: For) -> str:
    v = c_name(s.var.name)
    by = s.step if isinstance(s.step, int) else _expr_text(_expr(s.step))[0]   # (a macro)
    step = f"++{v}" if s.step == 1 else f"{v} += {by}"
    begin = _expr_text(s.begin)[0]
    end = _expr_text(s.end)[0]
    return f"for ({_declare(s.var)} = {begin}; {v} < {end}; {step})"


def _table_line(pad: str, var: Var, values: list[str]) -> str:
    """static <type> name[n] = { values };"""
    return f"{pad}static {_declare(var)}[{len(values)}] = {{ {', '.join(values)} }};"


def _stmt_lines(s, level: int) -> list[str]:
    pad = INDENT * level
    if isinstance(s, Decl):
        init = "" if s.init is None else f" = {_expr_text(s.init)[0]}"
        return [f"{pad}{_declare(s.var)}{init};"]
    if isinstance(s, ArrayDecl):
        return [_table_line(pad, s.var, [_expr_text(v)[0] for v in s.values])]
    if isinstance(s, LocalArray):
        return [f"{pad}{_declare(s.var)}[{int(s.size)}];"]
    if isinstance(s, Table):
        from ..ops.base import c_literal
        values = [c_literal(v, s.data.dtype) for v in s.data] or ["0"]
        return [_table_line(pad, Var(s.var.name, Type(s.var.type.dtype, const=True)), values)]
    if isinstance(s, Assign):
        if s.op not in _ASSIGN_OPS:
            raise ValueError(f"unknown assignment operator {s.op!r}")
        target = _paren(s.target, lambda p: p < POSTFIX)
        return [f"{pad}{target} {s.op} {_expr_text(s.value)[0]};"]
    if isinstance(s, ExprStmt):
        return [f"{pad}{_expr_text(s.expr)[0]};"]
    if isinstance(s, For):
        return [f"{pad}{_for_head(s)} {{", *_block_lines(s.body, level + 1), pad + "}"]
    if isinstance(s, If):
        lines = [f"{pad}if ({_expr_text(s.cond)[0]}) {{", *_block_lines(s.then, level + 1)]
        if len(s.otherwise) == 1 and isinstance(s.otherwise[0], If):
            chained = _stmt_lines(s.otherwise[0], level)
            return lines + [f"{pad}}} else {chained[0].lstrip()}"] + chained[1:]
        if s.otherwise:
            lines += [pad + "} else {", *_block_lines(s.otherwise, level + 1)]
        return lines + [pad + "}"]
    if isinstance(s, Block):
        return [pad + "{", *_block_lines(s.body, level + 1), pad + "}"]
    if isinstance(s, PreIf):
        otherwise = ["#else", *_block_lines(s.otherwise, level)] if s.otherwise else []
        return [f"#if {s.cond}", *_block_lines(s.then, level), *otherwise, "#endif"]
    if isinstance(s, Return):
        return [pad + ("return;" if s.value is None else f"return {_expr_text(s.value)[0]};")]
    if isinstance(s, Comment):
        return [f"{pad}/* {c_comment(s.text)} */"]
    if isinstance(s, Pragma):
        if not re.fullmatch(r"[ -~]+", s.text):
            raise ValueError(f"a pragma is one line of printable ASCII: {s.text!r}")
        return [f"#pragma {s.text}"]
    if isinstance(s, Raw):
        return [pad + line if line.strip() else "" for line in s.text.splitlines()]
    raise TypeError(f"not a statement: {s!r}")


def _function_lines(f: Function, level: int) -> list[str]:
    pad = INDENT * level
    quals = ("static " if f.static else "") + ("inline " if f.inline else "")
    params = ", ".join(_declare(p) for p in f.params) or "void"
    return [f"{pad}{quals}{c_type(f.ret)} {c_name(f.name)}({params}) {{",
            *_block_lines(f.body, level + 1), pad + "}"]


def render_c(node, level: int = 0) -> str:
    """C text of an expression, a statement, a list of statements or a
    function, indented `level` steps of four spaces (statements)."""
    if isinstance(node, Expr):
        return _expr_text(node)[0]
    if isinstance(node, Function):
        return "\n".join(_function_lines(node, level))
    if isinstance(node, (list, tuple)):
        return "\n".join(_block_lines(node, level))
    return "\n".join(_stmt_lines(node, level))


# -- for kernel emitters (mtvm.codegen.kernel.Kernel) ------------------------------------------

def kernel_dtype(k) -> str:
    """dtype of the kernel's computation: its first output's, as Kernel.ctype."""
    first = next((o for o in k.node.outputs if o), k.node.outputs[0])
    return np.dtype(k.graph.tensors[first].dtype).name


def kernel_lit(k, value) -> Const:
    """A constant in the kernel's dtype (Kernel.lit as an expression)."""
    return Const(value, kernel_dtype(k))


def param(buf, output: bool = False) -> Var:
    """The kernel parameter of a Buf: `const T* in0` (or `T* out0`). Kernel.params
    adds `restrict` where the buffers cannot alias."""
    return Var(buf.c, Type(buf.dtype, pointer=True, const=not output))


def tail(k, acc: Var, idx: Expr, ch: Expr | None = None) -> list[Stmt]:
    """The kernel's fused elementwise tail applied to `acc`, the value of output
    element `idx` (axis-1 coordinate `ch`). Kernel.epilogue still writes C
    text, so this is a Raw statement (none without a tail)."""
    text = k.epilogue(render_c(acc), render_c(idx), None if ch is None else render_c(ch))
    return [Raw(text)] if text else []
