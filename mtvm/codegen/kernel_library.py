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

import os
import re

from ..datadirs import data_dir
from ..errors import MtvmError
from .specialize import specialize

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def library_dir() -> str:
    return os.path.join(data_dir("c_runtime"), "kernels")


def _path(name: str) -> str | None:
    """A library file by name: looked up in c_runtime/kernels/ and its subdirectories."""
    root = library_dir()
    for d, _, files in sorted(os.walk(root)):
        if name in files:
            return os.path.join(d, name)
    return None


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


def module_files(names: list[str], target) -> dict[str, str]:
    """{MLF path: text} of the library files `names` need, specialized for target."""
    files = {}
    for name in closure(names):
        text = specialize(_read(name), target.macros())
        where = "include" if name.endswith(".h") else "src"
        files[f"codegen/host/{where}/{name}"] = text
    return files


__all__ = ["library_dir", "closure", "module_files"]
