"""`mtvm compile MODEL -o OUT`: ONNX -> Model Library Format (directory or .tar)."""
from __future__ import annotations

import os
import sys

from .options import add_board_option, add_compile_options, compile_kwargs


def add_parser(sub) -> None:
    p = sub.add_parser("compile", help="compile an ONNX model to a Model Library Format "
                       "directory or .tar")
    p.add_argument("model", help="ONNX file")
    p.add_argument("-o", "--output", help="output directory, or a path ending in .tar")
    p.add_argument("--dump-ir", action="store_true", help="print the optimized IR")
    p.add_argument("--force", action="store_true", help="overwrite a non-empty output")
    p.add_argument("--memory", action="store_true",
                   help="print each kernel's MACs, output and live bytes (as mtvm analyze)")
    add_board_option(p)
    add_compile_options(p)
    p.set_defaults(func=run)


def summary(lib) -> str:
    md = lib.metadata
    kib = lambda n: f"{n / 1024:.1f} KiB"  # noqa: E731
    target = md.get("target", {}).get("name", "c")
    lines = [f"model {md['model_name']}: {len(md['operators'])} kernels, "
             f"{md['total_macs'] / 1e6:.2f} M MACs, target {target}",
             f"  arena {kib(md['workspace_bytes'])} (lower bound "
             f"{kib(md['workspace_lower_bound'])}{_without_reorder(md, kib)}), "
             f"constants {kib(md['constant_bytes'])}"
             + (", inputs/outputs in the arena" if md.get("io_in_workspace") else "")]
    for kind in ("inputs", "outputs"):
        for t in md[kind]:
            lines.append(f"  {kind[:-1]:6} {t['name']}: {t['dtype']}{t['shape']}")
    for note in md.get("notes", []):
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def _without_reorder(md, kib) -> str:
    before = md.get("workspace_lower_bound_original_order", md["workspace_lower_bound"])
    if before == md["workspace_lower_bound"]:
        return ""
    return f"; {kib(before)} with --no-reorder"


def run(args) -> int:
    from .. import compile as mtvm_compile
    if args.output:      # a path that cannot be written: one line, before compiling
        from ..project.paths import check_output
        check_output(args.output, "output", is_file=args.output.endswith(".tar"))
    lib = mtvm_compile(args.model, **compile_kwargs(args))
    if args.dump_ir:
        sys.stdout.write(lib.ir_text)
    if args.output:
        lib.export(args.output, force=args.force)
    if getattr(args, "memory", False):
        from .analyze_cmd import table
        print(table(lib.metadata))
    print(summary(lib))
    if args.output:
        print(f"wrote {os.path.abspath(args.output)}")
    elif not args.dump_ir:
        print("(nothing written: pass -o DIR or -o FILE.tar)")
    return 0
