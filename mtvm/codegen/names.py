"""Every string from a model or a user that reaches a generated file goes
through one of these functions. Model names, node names and tensor names are
data: they must never become code, wherever they are written.

  sanitize                                 an ASCII word inside a prefixed identifier
  c_name / c_identifier / unique_names     C identifiers (ASCII, never a keyword
                                           or reserved name, unique, deterministic)
  c_comment                                text inside /* ... */ (C, linker scripts)
  c_string_literal                         a quoted C string literal
  label                                    a short token for template placeholders
                                           (Makefile and C comments, C strings)
  make_word                                a word of a Makefile variable (refused
                                           when unsafe, never escaped)
  ir_name                                  a name in the text IR dump

metadata.json keeps the original names (json.dumps escapes them).
"""
from __future__ import annotations

import hashlib
import json
import re

from ..errors import MtvmError

# C89..C23 keywords, GNU keywords and C++ keywords (the header is included from C++).
KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef
union unsigned void volatile while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic
_Generic _Noreturn _Static_assert _Thread_local _BitInt _Decimal32 _Decimal64 _Decimal128
alignas alignof bool constexpr false nullptr static_assert thread_local true typeof
typeof_unqual asm
and and_eq bitand bitor catch char8_t char16_t char32_t class compl concept consteval
constinit const_cast co_await co_return co_yield decltype delete dynamic_cast explicit
export friend mutable namespace new noexcept not not_eq operator or or_eq private protected
public reinterpret_cast requires static_cast template this throw try typeid typename using
virtual wchar_t xor xor_eq
""".split())

# Object-like macros of the standard headers (a struct member with such a name
# is replaced by the preprocessor wherever that header is included first),
# gcc's predefined macros in GNU mode, and the typedefs of <stdint.h>/<stddef.h>.
RESERVED = frozenset("""
NULL EOF BUFSIZ FILENAME_MAX FOPEN_MAX L_tmpnam TMP_MAX SEEK_SET SEEK_CUR SEEK_END
stdin stdout stderr errno EXIT_SUCCESS EXIT_FAILURE RAND_MAX MB_CUR_MAX MB_LEN_MAX
CHAR_BIT CHAR_MAX CHAR_MIN CLOCKS_PER_SEC HUGE_VAL HUGE_VALF HUGE_VALL INFINITY NAN
I complex imaginary noreturn assert offsetof linux unix i386 main
size_t ptrdiff_t max_align_t wint_t intmax_t uintmax_t intptr_t uintptr_t
""".split())

# Reserved by the C standard for future macros and library names, or by POSIX
# (a `_t` suffix): E<digit|upper> (errno), PRI/SCN (inttypes), LC_, SIG, ..._MAX/_MIN.
_RESERVED_PREFIX = re.compile(
    r"(E[0-9A-Z]|PRI[a-zX]|SCN[a-zX]|LC_[A-Z]|SIG_?[A-Z]|FE_[A-Z]|FP_[A-Z]|M_[A-Z]|MATH_"
    r"|TIME_[A-Z]|ATOMIC_[A-Z]|U?INT\w*_(MAX|MIN|C)$|(SIZE|PTRDIFF|WCHAR|WINT|SIG_ATOMIC)_"
    r"(MAX|MIN)$|FLT_|DBL_|LDBL_|SCHAR_|UCHAR_|SHRT_|USHRT_|INT_|UINT_|LONG_|ULONG_|LLONG_"
    r"|ULLONG_)")

IDENT_MAX = 48          # characters of a sanitized name; longer ones end in a hash
COMMENT_MAX = 160       # characters of a name in a comment (the rest becomes "...")
LABEL_MAX = 64


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _ascii_word(text: str) -> str:
    """ASCII letters, digits and `_`: other ASCII becomes `_`, other characters
    their code point (`é` -> `u00e9`), so names differing in them stay apart."""
    out = []
    for ch in text:
        o = ord(ch)
        if o < 128:
            out.append(ch if ch.isalnum() else "_")
        else:
            out.append(f"u{o:04x}" if o <= 0xFFFF else f"U{o:08x}")
    return "".join(out)


def sanitize(name: str) -> str:
    """An ASCII word for `name`, [A-Za-z][A-Za-z0-9_]*, at most IDENT_MAX
    characters (a longer one keeps its first characters and ends in a hash of
    the whole name). Deterministic. For a part of a prefixed identifier
    (tvmgen_<mod>_..., the module name); a name standing alone is c_name's."""
    s = _ascii_word(str(name))
    if not s or not s[0].isalpha():
        s = "t" + s
    if len(s) > IDENT_MAX:
        s = s[:IDENT_MAX - 9] + "_" + _digest(str(name))
    return s


def c_name(name: str) -> str:
    """sanitize(name) usable on its own (a struct member): never a keyword of C
    or C++, a standard macro or typedef, or a name the C standard or POSIX
    reserves (E..., PRI..., ..._MAX, ..._t)."""
    s = sanitize(name)
    if _RESERVED_PREFIX.match(s):
        s = "t_" + s
    if s in KEYWORDS or s in RESERVED or s.endswith("_t"):
        s += "_"
    return s


def c_identifier(name: str, used: set) -> str:
    """c_name(name), made unique against `used` (lower-case names already
    taken, updated here): a collision gets a suffix _1, _2, ... Unique without
    regard to case, since names also appear upper-cased in #define names."""
    base = s = c_name(name)
    k = 1
    while s.lower() in used:
        s = f"{base}_{k}"
        k += 1
    used.add(s.lower())
    return s


def unique_names(names: list[str], reserved=()) -> list[str]:
    """Sanitized and de-duplicated in order (a_b and a.b must not collide)."""
    used = {r.lower() for r in reserved}
    return [c_identifier(n, used) for n in names]


# Names the header derives from the module (TVMGEN_<MOD>_WORKSPACE_SIZE, ...),
# which an input or output named like them would redefine.
INTERFACE_RESERVED = ("workspace",)


OUTPUT_NAMES = ("onnx", "microtvm")


def interface_names(inputs: list[str], outputs: list[str],
                    output_names: str = "onnx") -> tuple[list[str], list[str]]:
    """C names of the model's inputs and outputs: the struct members and the
    TVMGEN_<MOD>_<NAME>_SIZE macros. One namespace for both lists.

    output_names="onnx": outputs named after their ONNX names (sanitized);
    "microtvm": as microTVM names the outputs of a model whose front end gives
    no names (ONNX, Relay): `output` for one, `output0`, `output1`, ... for
    several. Those are taken first, so an input with such a name gets a suffix."""
    if output_names not in OUTPUT_NAMES:
        raise MtvmError(f"output_names {output_names!r}: use one of {', '.join(OUTPUT_NAMES)}")
    used = {r.lower() for r in INTERFACE_RESERVED}
    if output_names == "microtvm":
        outs = ["output"] if len(outputs) == 1 else [f"output{i}" for i in range(len(outputs))]
        used |= set(outs)
        return [c_identifier(n, used) for n in inputs], outs
    return [c_identifier(n, used) for n in inputs], [c_identifier(n, used) for n in outputs]


def _escape(ch: str) -> str:
    o = ord(ch)
    if o < 0x100:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"


def c_comment(text, limit: int = COMMENT_MAX) -> str:
    """`text` as the inside of a C comment: printable ASCII kept, anything else
    (newlines, control and non-ASCII characters, a backslash, a quote) written
    as a \\xNN / \\uNNNN escape, and `*/`, `/*`, `??` (trigraphs) broken by
    escaping one of their characters; it neither starts nor ends with `*` or
    `?` and never ends with a backslash. So it cannot end the comment, splice a
    line or start a nested comment between `/* ` and ` */` (or any neighbours
    other than `*` and `/`). Longer than `limit` characters: cut, ending in "...".
    """
    text = str(text)
    out: list[str] = []
    size = 0
    last = len(text) - 1
    for i, ch in enumerate(text):
        prev = out[-1][-1] if out else ""
        nxt = text[i + 1] if i < last else ""
        risky = (ch in "*?" and (i == 0 or i == last)) \
            or (ch == "*" and "/" in (prev, nxt)) or (ch == "/" and "*" in (prev, nxt)) \
            or (ch == "?" and prev == "?")
        piece = ch if " " <= ch <= "~" and ch not in "\\\"" and not risky else _escape(ch)
        if size + len(piece) > limit:
            out.append("...")
            break
        out.append(piece)
        size += len(piece)
    return "".join(out)


def c_string_literal(text) -> str:
    """A C string literal (with its quotes) holding the UTF-8 bytes of `text`:
    printable ASCII except `"`, `\\` and `?` as is, those three escaped (\\?
    keeps trigraphs out), every other byte as a three-digit octal escape (which
    cannot run into the next character). ASCII only."""
    data = text if isinstance(text, bytes) else str(text).encode("utf-8", "surrogatepass")
    out = ['"']
    for b in data:
        ch = chr(b)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def label(text, limit: int = LABEL_MAX, default: str = "model") -> str:
    """A short token for a template placeholder that lands in several places
    at once (a Makefile comment, a C comment, a C string): ASCII letters,
    digits and `_ . + -`, anything else `_`; at most `limit` characters."""
    s = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_.+-") else "_"
                for ch in str(text))
    if len(s) > limit:
        s = s[:limit - 9] + "_" + _digest(str(text))
    return s or default


_MAKE_WORD = re.compile(r"[A-Za-z0-9_=+,.:/@%-]+")


def make_word(text, what: str) -> str:
    """A word of a Makefile variable (a flag, a program name), refused unless
    it is made of letters, digits and `_ = + , . : / @ % -`: `$` (expansion),
    `#` (a comment), quotes, spaces, backslashes and newlines would change
    the Makefile or the shell command it runs."""
    s = str(text)
    if not _MAKE_WORD.fullmatch(s):
        raise MtvmError(f"{what}: {s!r} cannot go into a Makefile safely (it may hold only "
                        "letters, digits and _ = + , . : / @ % -); change it")
    return s


def make_words(words, what: str) -> str:
    """make_word of each word, joined by spaces (a string is split on spaces)."""
    if isinstance(words, str):
        words = words.split()
    return " ".join(make_word(w, what) for w in words)


_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+\-]+")


def ir_name(text) -> str:
    """A name in the text IR dump: as is when plain, otherwise quoted with
    escapes (ASCII only), so a name can never forge a line of the dump."""
    s = str(text)
    return s if _PLAIN.fullmatch(s) else json.dumps(s)
