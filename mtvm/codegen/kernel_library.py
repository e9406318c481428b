"""The kernel library: fixed C (micro-kernels, requantization, gathers) in
real .c/.h files under c_runtime/kernels/, copied into a module as its
kernels need them.

A kernel asks for a file with `k.library("mtvm_gemm_f32.h")`. The module gets
that file, every library header it includes with `#include "..."`, and the
`.c` file of the same name beside a header, all specialized for the target
(codegen.specialize): a Cortex-M module receives no x86 text. Headers go to
codegen/host/include/ (the public include path of an MLF), sources to
codegen/host/src/ (which every project template compiles).

Hot micro-kernels are `static inline` functions in headers, so the compiler
sees them exactly as it saw the same code generated into the kernels file.
"""
from __future__ import annotations

import functools
import os
import re

from ..datadirs import data_dir
from ..errors import MtvmError
from .specialize import specialize

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def library_dir() -> str:
    return os.path.join(data_dir("c_runtime"), "kernels")


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    """{file name: path} of c_runtime/kernels/ and its subdirectories (the first
    of a name wins), walked once per process."""
    out: dict[str, str] = {}
    for d, _, files in sorted(os.walk(library_dir())):
        for name in files:
            out.setdefault(name, os.path.join(d, name))
    return out


def _path(name: str) -> str | None:
    """A library file by name."""
    return _index().get(name)


@functools.lru_cache(maxsize=None)
def _read(name: str) -> str:
    p = _path(name)
    if p is None:
        raise MtvmError(f"kernel library file {name} not found under {library_dir()} "
                        "(a broken installation: reinstall mtvm)")
    with open(p, encoding="utf-8") as f:
        return f.read()


def closure(names: list[str]) -> list[str]:
    """names plus the library headers they include and the .c beside each header,
    in a stable order (dependencies first)."""
    out: list[str] = []

    def visit(name: str) -> None:
        if name in out:
            return
        text = _read(name)
        for inc in _INCLUDE.findall(text):
            if _path(inc) is not None:
                visit(inc)
        out.append(name)
        if name.endswith(".h"):
            c = name[:-2] + ".c"
            if _path(c) is not None:
                visit(c)

    for n in names:
        visit(n)
    return out


def for_target(name: str, target) -> bool:
    """Whether a library file can matter on target: x86/ files only on x86 (and
    the generic target), arm_dsp/ files only on Arm, arm_mve/ files only on Arm cores
    with Helium (MVE), riscv/ files only on RISC-V."""
    family = os.path.basename(os.path.dirname(_path(name) or ""))
    if target.is_generic:
        return True
    return {"x86": target.is_x86, "arm_dsp": target.is_arm,
            "arm_mve": target.is_arm and target.has("mve"),
            "riscv": target.is_riscv}.get(family, True)


def needed(names: list[str], target) -> list[str]:
    """closure(names) without the files of other targets."""
    return [n for n in closure(names) if for_target(n, target)]


def module_files(names: list[str], target) -> dict[str, str]:
    """{MLF path: text} of the library files `names` need, specialized for target."""
    files = {}
    for name in needed(names, target):
        # What the file's own library includes define (MTVM_F32_NR from the
        # prelude, ...) decides its #if too.
        deps = [n for n in closure([name]) if n != name and n.endswith(".h")]
        text = specialize_source(_strip_foreign_includes(_read(name), target), deps, target)
        where = "include" if name.endswith(".h") else "src"
        files[f"codegen/host/{where}/{name}"] = text
    return files


def _strip_foreign_includes(text: str, target) -> str:
    """Drop `#include "x"` of library files that are not shipped for this target."""
    def keep(m):
        name = m.group(1)
        return m.group(0) if _path(name) is None or for_target(name, target) else ""
    return _INCLUDE.sub(keep, text)


_GUARD = re.compile(r"^\s*#\s*ifndef\s+(\w+)\s*\n\s*#\s*define\s+\1\b[^\n]*\n", re.M)


def _unguarded(text: str) -> str:
    """A header without its include guard, so that what it defines counts as
    unconditional when the including source is specialized."""
    m = _GUARD.search(text)
    if not m:
        return text
    end = text.rstrip().rfind("#endif")
    return text[:m.start()] + text[m.end():end]


_SPLIT = "/*@@ mtvm: end of the library headers @@*/"


def specialize_source(text: str, names: list[str], target) -> str:
    """Specialize a generated source that includes library headers: the macros
    the headers define (MTVM_F32_NR, MTVM_INT8_X86, ...) are learned first, so
    the source's own #if on them resolves too."""
    macros = target.macros()
    if not macros:
        return text
    if not names:
        return specialize(text, macros)
    # Every header, those of other targets too: what only they define (e.g.
    # MTVM_INT8_X86 on a Cortex-M) is thereby known to be undefined here.
    headers = [_unguarded(_read(n)) for n in closure(names) if n.endswith(".h")]
    joined = specialize("\n".join(headers + [_SPLIT, text]), macros)
    return joined.split(_SPLIT + "\n", 1)[1]


__all__ = ["library_dir", "closure", "needed", "module_files", "specialize_source"]
