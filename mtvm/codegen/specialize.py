"""Specialize C for one target: resolve the preprocessor conditions the target
decides, as unifdef(1) does.

The kernel library headers and a few generated kernels keep their ISA
variants under `#if defined(__AVX2__)`, `#if defined(__ARM_FEATURE_DSP)`, ...
so that one source (target "c") builds everywhere. For a known target those
conditions are facts (Target.macros()): a branch the target can never take is
dropped, a branch it always takes loses its `#if`, and a condition that also
depends on something else (`!defined(MTVM_NO_SIMD)`, `__GNUC__`) is kept with
only the undecided part. Object-like `#define NAME <integer>` lines that end
up unconditional are learned too, so `#if MTVM_F32_AVX512` after the block
that sets MTVM_F32_AVX512 resolves as well.

The output is what the C compiler would have compiled for that target, minus
the text it would have skipped: the same code, no foreign ISA.
"""
from __future__ import annotations

import re

# Tri-state values: True, False, or a residual C condition (str).
_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)[uUlL]*|(defined)|([A-Za-z_]\w*)"
                    r"|(&&|\|\||==|!=|<=|>=|<<|>>|[()!<>&|^+\-*/%]))")
_ARITH = {"&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
          "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
          "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b}


class _Unknown(Exception):
    """The expression uses syntax this evaluator does not model: keep it as is."""


class _Expr:
    """A tiny recursive-descent evaluator of #if expressions over known macros."""

    def __init__(self, text: str, known: dict):
        self.toks = self._lex(text)
        self.i = 0
        self.known = known

    @staticmethod
    def _lex(text: str) -> list[tuple[str, str]]:
        out, pos = [], 0
        text = re.sub(r"/\*.*?\*/", " ", text)
        text = text.split("//", 1)[0].strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise _Unknown(text)
            pos = m.end()
            num, dfn, ident, op = m.groups()
            out.append(("num", num) if num is not None else ("defined", dfn) if dfn
                       else ("id", ident) if ident else ("op", op))
        return out

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if tok[0] is None or (value is not None and tok[1] != value):
            raise _Unknown(value)
        self.i += 1
        return tok

    def parse(self):
        v = self.or_()
        if self.i != len(self.toks):
            raise _Unknown("trailing")
        return v

    def _logical(self, op: str, operand, combine):
        """operand (op operand)*, folded left with combine (tri-state)."""
        v = operand()
        while self.peek() == ("op", op):
            self.take()
            v = combine(v, operand())
        return v

    def or_(self):
        return self._logical("||", self.and_, _or)

    def and_(self):
        return self._logical("&&", self.cmp, _and)

    def arith(self):
        """One chain of a single arithmetic or bitwise operator (a & b & c); mixed
        operators (precedence) are not modelled."""
        a = self.unary()
        op = None
        while self.peek()[0] == "op" and self.peek()[1] in _ARITH:
            if op is not None and self.peek()[1] != op:
                raise _Unknown("mixed operators")
            op = self.take()[1]
            b = self.unary()
            if _is_int(a) and _is_int(b):
                a = _ARITH[op](a, b)
            else:
                a = f"{_text(a)} {op} {_text(b)}"
        return a

    def cmp(self):
        a = self.arith()
        tok = self.peek()
        if tok[0] == "op" and tok[1] in ("==", "!=", "<", ">", "<=", ">="):
            self.take()
            b = self.arith()
            if _is_int(a) and _is_int(b):
                return bool({"==": a == b, "!=": a != b, "<": a < b, ">": a > b,
                             "<=": a <= b, ">=": a >= b}[tok[1]])
            return f"{_text(a)} {tok[1]} {_text(b)}"
        return _truth(a)

    def unary(self):
        tok = self.peek()
        if tok == ("op", "!"):
            self.take()
            return _not(_truth(self.unary()))
        if tok == ("op", "("):
            self.take()
            v = self.or_()
            self.take(")")
            return v if not isinstance(v, str) else f"({v})"
        if tok[0] == "defined":
            self.take()
            paren = self.peek() == ("op", "(")
            if paren:
                self.take()
            name = self.take()[1]
            if paren:
                self.take(")")
            if name in self.known:
                return self.known[name] is not None
            return f"defined({name})"
        if tok[0] == "num":
            self.take()
            return int(tok[1], 0)
        if tok[0] == "id":
            self.take()
            if self.peek() == ("op", "("):
                raise _Unknown("function-like macro")
            if tok[1] in self.known:
                v = self.known[tok[1]]
                return 0 if v is None else int(v)
            return tok[1]
        raise _Unknown(str(tok))


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _text(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _truth(v):
    if isinstance(v, bool) or isinstance(v, str):
        return v
    return bool(v)


def _not(v):
    if isinstance(v, bool):
        return not v
    return f"!{v}" if re.fullmatch(r"defined\(\w+\)|\(.*\)|\w+", v) else f"!({v})"


def _logic(a, b, absorbing: bool, op: str):
    """a op b in tri-state: `absorbing` decides alone (False for &&, True for
    ||), its opposite leaves the other operand."""
    if a is absorbing or b is absorbing:
        return absorbing
    if a is (not absorbing):
        return b
    if b is (not absorbing):
        return a
    return f"{a} {op} {b}"


def _and(a, b):
    return _logic(a, b, False, "&&")


def _or(a, b):
    return _logic(a, b, True, "||")


def evaluate(condition: str, known: dict):
    """True, False, or the condition with the known part removed (a str)."""
    try:
        return _Expr(condition, known).parse()
    except _Unknown:
        return condition.strip()


_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif|define|undef)\b(.*)$")


class _Frame:
    """One #if ... #endif being rewritten."""

    def __init__(self, parent_active: bool):
        self.parent_active = parent_active
        self.taken = False          # a branch known true has been seen: the rest are dead
        self.emitted_if = False     # a directive of this chain has been written out
        self.active = False         # lines of the current branch are kept
        self.guarded = False        # the current branch is under a kept directive


def specialize(text: str, macros: dict) -> str:
    """`text` with the conditions `macros` decides resolved (see the module doc).
    macros: name -> value or None (known undefined). An empty dict returns text."""
    if not macros:
        return text
    known = dict(macros)
    # Macros this text #defines only in branches the target never takes (e.g.
    # MTVM_INT8_X86 on a Cortex-M): undefined on this target. `seen` holds the
    # names defined in kept text, which a later test must leave to the compiler.
    dropped: set[str] = set()
    seen: set[str] = set()
    out: list[str] = []
    stack: list[_Frame] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        # A directive continued over several lines is one logical line.
        while line.rstrip().endswith("\\") and i + 1 < len(lines) and _DIRECTIVE.match(line):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i].lstrip()
        i += 1
        active = stack[-1].active if stack else True
        m = _DIRECTIVE.match(line)
        if not m:
            if active:
                out.append(line)
            continue
        kind, rest = m.group(1), m.group(2)
        now = {**{n: None for n in dropped - seen}, **known}
        if kind in ("if", "ifdef", "ifndef"):
            f = _Frame(active)
            stack.append(f)
            if not active:
                continue
            cond = (rest if kind == "if" else
                    f"defined({rest.split()[0]})" if kind == "ifdef" else
                    f"!defined({rest.split()[0]})")
            _branch(f, evaluate(cond, now), out, "if", line, cond)
        elif kind in ("elif", "else"):     # #else is an #elif that always holds
            f = stack[-1]
            if not f.parent_active:
                continue
            if f.taken:
                f.active = False
                continue
            _branch(f, True if kind == "else" else evaluate(rest, now), out, "elif", line, rest)
        elif kind == "endif":
            f = stack.pop()
            if f.parent_active and f.emitted_if:
                out.append("#endif")
        else:   # define / undef
            head = rest.split()[0] if rest.split() else ""      # NAME or NAME(args)
            name = head.split("(")[0]
            if kind == "define" and name:
                (seen if active else dropped).add(name)
            if active:
                out.append(line)
                unconditional = all(not fr.emitted_if for fr in stack)
                if kind == "define" and unconditional and name and name == head:
                    value = rest.strip()[len(name):].strip()
                    if re.fullmatch(r"\d+", value):
                        known.setdefault(name, int(value))
                elif kind == "undef" and unconditional and name in known:
                    known[name] = None
    return "\n".join(out)


def _branch(f: _Frame, value, out: list[str], kind: str, line: str, cond: str) -> None:
    """Start a branch of frame f whose condition evaluated to `value`; an
    undecided condition keeps its original line when nothing was resolved."""
    if value is False:
        f.active = False
        return
    if value is True:
        f.taken = True
        f.active = True
        if f.emitted_if:
            out.append("#else")
        return
    f.active = True
    same_kind = (kind == "elif") == f.emitted_if
    unchanged = value == " ".join(cond.split()) or value == cond.strip()
    out.append(line.strip() if same_kind and unchanged else
               f"#{'elif' if f.emitted_if else 'if'} {value}")
    f.emitted_if = True


__all__ = ["specialize", "evaluate"]
