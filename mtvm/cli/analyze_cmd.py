"""`mtvm analyze MODEL|MLF_DIR`: per-operator MACs and memory from metadata.json."""
from __future__ import annotations

import json
import os

from ..errors import MtvmError
from .options import add_compile_options, compile_kwargs


def add_parser(sub) -> None:
    p = sub.add_parser("analyze", help="per-operator MACs and memory of a model or MLF directory")
    p.add_argument("model", help="ONNX file, or a directory written by mtvm compile")
    add_compile_options(p)
    p.set_defaults(func=run)


def load_metadata(args) -> dict:
    if os.path.isdir(args.model):
        path = os.path.join(args.model, "metadata.json")
        if not os.path.exists(path):
            raise MtvmError(f"{args.model}: no metadata.json (not a Model Library Format dir)")
        with open(path) as f:
            return json.load(f)
    from .. import compile as mtvm_compile
    return mtvm_compile(args.model, **compile_kwargs(args)).metadata


def table(md: dict) -> str:
    rows = [("#", "kernel", "MACs", "out bytes", "live bytes")]
    for o in md["operators"]:
        rows.append((str(o["index"]), o["kind"], f"{o['macs']:,}", f"{o['output_bytes']:,}",
                     f"{o['live_bytes']:,}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    fmt = lambda r: "  ".join(c.rjust(w) if i != 1 else c.ljust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt(rows[0]), fmt(tuple("-" * w for w in widths))] + [fmt(r) for r in rows[1:]])


def run(args) -> int:
    md = load_metadata(args)
    print(table(md))
    print(f"total {md['total_macs']:,} MACs; arena {md['workspace_bytes']:,} B "
          f"(lower bound {md['workspace_lower_bound']:,} B); constants {md['constant_bytes']:,} B")
    return 0
