"""Count the lines of C that live inside Python string literals.

    python tools/count_c_in_strings.py [ROOT=mtvm] [--max N] [--files]

A line of a string literal counts as C when, stripped, it
  * is a preprocessor directive (#if, #define, #include, ...),
  * ends with `;`, `{` or `}` (or `{` / `}` alone), or
  * is a C comment line (starts with `/*`, `*` or `//`) inside a string that
    has another C line.
Docstrings (the first statement of a module, class or function) are not
counted; f-strings are (their C is C with holes), judged by their literal text
(a line that only ends with a {placeholder} is not C). "Fixed" lines are those of
plain (non-f) strings: C with nothing filled in, which belongs in a .c/.h file.
Issue 12 measured about 2,600 lines (404 fixed) before the kernel library.
"""
from __future__ import annotations

import argparse
import ast
import io
import os
import re
import sys
import tokenize

_DIRECTIVE = re.compile(r"^#\s*(if|ifdef|ifndef|elif|else|endif|define|undef|include|pragma|error)\b")
_COMMENT = re.compile(r"^(/\*|\*|//)")


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def _literal_text(line: str) -> str:
    """An f-string line as the text it produces around its placeholders."""
    line = line.replace("{{", "\0").replace("}}", "\1")
    line = re.sub(r"\{[^{}]*\}", "", line)
    return line.replace("\0", "{").replace("\1", "}")


def is_c_line(text: str) -> bool:
    s = text.strip()
    return bool(s) and (bool(_DIRECTIVE.match(s)) or s.endswith((";", "{", "}")))


def count_source(source: str) -> tuple[int, int]:
    """(C lines, of which fixed) in one Python source."""
    docs = _docstring_lines(ast.parse(source))
    total = fixed = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.STRING or tok.start[0] in docs:
            continue
        prefix = re.match(r"^[A-Za-z]*", tok.string).group(0).lower()
        lines = tok.string.splitlines() or [tok.string]
        # strip the quotes off the first and last line
        body = [re.sub(r'^[A-Za-z]*("""|\'\'\'|"|\')', "", lines[0])] + lines[1:]
        body[-1] = re.sub(r'("""|\'\'\'|"|\')$', "", body[-1])
        if "f" in prefix:    # judge the literal text: drop {placeholders}, undouble {{ }}
            body = [_literal_text(b) for b in body]
        c = [b for b in body if is_c_line(b)]
        if c:
            c += [b for b in body if not is_c_line(b) and _COMMENT.match(b.strip())]
        total += len(c)
        if "f" not in prefix:
            fixed += len(c)
    return total, fixed


def count_tree(root: str) -> dict[str, tuple[int, int]]:
    out = {}
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".py"):
                p = os.path.join(d, f)
                with open(p, encoding="utf-8") as fh:
                    n, fx = count_source(fh.read())
                if n:
                    out[os.path.relpath(p, os.path.dirname(os.path.abspath(root)))] = (n, fx)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), "..",
                                                            "mtvm"))
    ap.add_argument("--max", type=int, help="exit 1 when the total exceeds this")
    ap.add_argument("--files", action="store_true", help="the per-file table")
    args = ap.parse_args(argv)
    counts = count_tree(args.root)
    total = sum(n for n, _ in counts.values())
    fixed = sum(f for _, f in counts.values())
    if args.files:
        for path, (n, fx) in sorted(counts.items(), key=lambda kv: -kv[1][0]):
            print(f"{n:6d} {fx:6d}  {path}")
    print(f"C lines in Python strings: {total} ({fixed} fixed, {total - fixed} in f-strings)")
    if args.max is not None and total > args.max:
        print(f"over the budget of {args.max}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
