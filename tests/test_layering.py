"""The package's layering: op modules say what operators mean and how to emit
them; they never import a pass (the passes import the ops)."""
from __future__ import annotations

import ast
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "mtvm")


def imports_of(path: str, package: str) -> set[str]:
    """Absolute module names a file imports (relative imports resolved)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def test_no_op_module_imports_a_pass():
    bad = []
    for d, _, files in os.walk(os.path.join(ROOT, "ops")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                rel = os.path.relpath(path, os.path.join(ROOT, ".."))[:-3].replace(os.sep, ".")
                package = rel.rsplit(".", 1)[0]
                if any(m == "mtvm.passes" or m.startswith("mtvm.passes.")
                       for m in imports_of(path, package)):
                    bad.append(rel)
    assert not bad, f"op modules importing mtvm.passes: {bad}"


def test_schedules_do_not_import_passes_or_the_compiler():
    for d, _, files in os.walk(os.path.join(ROOT, "schedules")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                rel = os.path.relpath(path, os.path.join(ROOT, ".."))[:-3].replace(os.sep, ".")
                mods = imports_of(path, rel.rsplit(".", 1)[0])
                assert not any(m.startswith(("mtvm.passes", "mtvm.compiler")) for m in mods), rel
