"""C expressions and assignments given as text, read back into the C writer's IR.

Code that has not moved to the C writer hands its operands and fused tails
over as text (cwriter.RawExpr, cwriter.Raw). The LLVM backend cannot lower
text, so it reads it back: the text is a C expression (or a few assignments)
written by mtvm itself over names the kernel declares, literals spelled by
ops.base.c_literal, casts to the C types of ops.base.CTYPES and calls of libm
functions. Anything else raises NotLowerable, and the kernel has no LLVM form.
"""
from __future__ import annotations

import re

from ..cwriter import (
    INDEX,
    Assign,
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    Index,
    Ternary,
    Type,
    Unary,
    Var,
)


class NotLowerable(Exception):
    """A kernel (or a part of it) the LLVM backend cannot lower."""


# C type spelling -> the IR's dtype (ops.base.CTYPES read backwards; bool is uint8).
C_TYPES = {"float": "float32", "double": "float64", "int8_t": "int8", "int16_t": "int16",
           "int32_t": "int32", "int64_t": "int64", "uint8_t": "uint8", "uint16_t": "uint16",
           "uint32_t": "uint32", "uint64_t": "uint64", "size_t": INDEX, "int": "int32",
           "unsigned": "uint32", "long": "int64"}

# Named constants c_literal spells, and <math.h>/<stdint.h> macros.
_NAMED = {"NAN": Const(float("nan"), "float32"), "HUGE_VALF": Const(float("inf"), "float32"),
          "HUGE_VAL": Const(float("inf"), "float64"), "INFINITY": Const(float("inf"), "float32"),
          "INT32_MIN": Const(-(1 << 31), "int32"), "INT32_MAX": Const((1 << 31) - 1, "int32"),
          "INT64_MIN": Const(-(1 << 63), "int64"), "INT64_MAX": Const((1 << 63) - 1, "int64"),
          "INT8_MIN": Const(-128, "int32"), "INT8_MAX": Const(127, "int32"),
          "INT16_MIN": Const(-32768, "int32"), "INT16_MAX": Const(32767, "int32"),
          "UINT8_MAX": Const(255, "int32"), "UINT16_MAX": Const(65535, "int32"),
          "UINT32_MAX": Const(0xFFFFFFFF, "uint32"), "FLT_MAX": Const(3.4028234663852886e38,
                                                                      "float32")}

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>(?:0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)[uUlLfF]*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op>\+=|-=|\*=|/=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>!~&|^?:()\[\],;=])
""", re.VERBOSE)

# binary operator -> precedence (higher binds tighter), as in C
_BINARY = {"||": 4, "&&": 5, "|": 6, "^": 7, "&": 8, "==": 9, "!=": 9, "<": 10, ">": 10,
           "<=": 10, ">=": 10, "<<": 11, ">>": 11, "+": 12, "-": 12, "*": 13, "/": 13, "%": 13}


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise NotLowerable(f"cannot read C text at {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    return out


def _number(text: str) -> Const:
    body = text.rstrip("uUlLfF")
    suffix = text[len(body):].lower()
    if re.fullmatch(r"0[xX][0-9a-fA-F]+|\d+", body):
        value = int(body, 0)
        if "u" in suffix:
            return Const(value, "uint64" if "l" in suffix or value > 0xFFFFFFFF else "uint32")
        return Const(value, "int64" if "l" in suffix or value > 0x7FFFFFFF else "int32")
    return Const(float(body), "float32" if "f" in suffix else "float64")


class _Parser:
    def __init__(self, text: str):
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, k: int = 0) -> tuple[str, str] | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        t = self.peek()
        if t is None or (value is not None and t[1] != value):
            raise NotLowerable(f"expected {value or 'more'}, got {t and t[1]!r}")
        self.i += 1
        return t

    def at(self, value: str) -> bool:
        t = self.peek()
        return t is not None and t[0] == "op" and t[1] == value

    # expression := ternary
    def expr(self) -> Expr:
        cond = self.binary(0)
        if self.at("?"):
            self.take("?")
            then = self.expr()
            self.take(":")
            return Ternary(cond, then, self.expr())
        return cond

    def binary(self, min_prec: int) -> Expr:
        left = self.unary()
        while True:
            t = self.peek()
            if t is None or t[0] != "op" or t[1] not in _BINARY or _BINARY[t[1]] <= min_prec:
                return left
            self.take()
            left = Binary(t[1], left, self.binary(_BINARY[t[1]]))

    def unary(self) -> Expr:
        t = self.peek()
        if t is None:
            raise NotLowerable("C text ends in the middle of an expression")
        if t[0] == "op" and t[1] in ("-", "!", "~", "+"):
            self.take()
            operand = self.unary()
            return operand if t[1] == "+" else Unary(t[1], operand)
        if t[0] == "op" and t[1] == "(":
            nxt = self.peek(1)
            if nxt is not None and nxt[0] == "name" and nxt[1] in C_TYPES and \
                    self.peek(2) is not None and self.peek(2)[1] in (")", "*"):
                self.take("(")
                dtype = C_TYPES[self.take()[1]]
                pointer = self.at("*")
                if pointer:
                    self.take("*")
                self.take(")")
                return Cast(Type(dtype, pointer=pointer), self.unary())
        return self.postfix(self.primary())

    def primary(self) -> Expr:
        kind, text = self.take()
        if kind == "num":
            return _number(text)
        if kind == "name":
            if text in ("INT64_C", "UINT64_C"):
                self.take("(")
                value = self.expr()
                self.take(")")
                if not isinstance(value, Const):
                    raise NotLowerable(f"{text} of a non-constant")
                return Const(int(value.value), "int64" if text == "INT64_C" else "uint64")
            if text in _NAMED:
                return _NAMED[text]
            if self.at("("):
                self.take("(")
                args = []
                while not self.at(")"):
                    args.append(self.expr())
                    if not self.at(")"):
                        self.take(",")
                self.take(")")
                return Call(text, tuple(args))
            return Var(text)
        if text == "(":
            e = self.expr()
            self.take(")")
            return e
        raise NotLowerable(f"unexpected {text!r} in C text")

    def postfix(self, e: Expr) -> Expr:
        while self.at("["):
            self.take("[")
            e = Index(e, self.expr())
            self.take("]")
        return e

    def done(self) -> bool:
        return self.i >= len(self.toks)


def parse_expr(text: str) -> Expr:
    """The IR of one C expression (names as untyped Vars: the lowering knows them)."""
    p = _Parser(text)
    e = p.expr()
    if not p.done():
        raise NotLowerable(f"trailing C text after an expression: {text!r}")
    return e


def parse_assignments(text: str) -> list[Assign]:
    """The IR of `a = expr; b += expr; ...` (what Kernel.epilogue writes)."""
    p = _Parser(text)
    out = []
    while not p.done():
        target = p.postfix(p.primary())
        kind, op = p.take()
        if op not in ("=", "+=", "-=", "*=", "/="):
            raise NotLowerable(f"not an assignment: {text!r}")
        out.append(Assign(target, p.expr(), op))
        p.take(";")
    return out


__all__ = ["NotLowerable", "parse_expr", "parse_assignments", "C_TYPES"]
