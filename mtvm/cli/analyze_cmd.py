"""`mtvm analyze MODEL|MLF_DIR|MLF.tar|PROJECT`: per-operator MACs and memory from
metadata.json."""
from __future__ import annotations

import json
import os

from ..errors import MtvmError
from .options import add_board_option, add_compile_options, compile_kwargs


def add_parser(sub) -> None:
    p = sub.add_parser("analyze", help="per-operator MACs and memory of a model or of what "
                       "mtvm compile wrote")
    p.add_argument("model", help="ONNX file, or what mtvm compile wrote (a Model Library "
                   "Format directory or .tar), or a project directory")
    add_board_option(p)
    add_compile_options(p)
    p.set_defaults(func=run)


def _read_tar(path: str) -> dict:
    import tarfile
    try:
        with tarfile.open(path) as tar:
            for name in ("metadata.json", "./metadata.json"):
                try:
                    member = tar.getmember(name)
                except KeyError:
                    continue
                return json.load(tar.extractfile(member))
    except (tarfile.TarError, OSError, ValueError) as e:
        reason = str(e).splitlines()[0].rstrip(":")
        raise MtvmError(f"{path}: not a tar written by mtvm compile ({reason})") from None
    raise MtvmError(f"{path}: no metadata.json in the tar (not written by mtvm compile)")


def load_metadata(args) -> dict:
    """metadata.json of an MLF directory, an MLF .tar or a project, or a compile of
    an ONNX file."""
    if os.path.isdir(args.model):
        for rel in ("metadata.json", os.path.join("model", "metadata.json")):
            path = os.path.join(args.model, rel)
            if os.path.isfile(path):
                try:
                    with open(path) as f:
                        return json.load(f)
                except (OSError, ValueError) as e:
                    raise MtvmError(f"{path}: cannot read it: {e}") from None
        raise MtvmError(f"{args.model}: no metadata.json (not a Model Library Format "
                        "directory or a project)")
    if args.model.endswith(".tar") and os.path.isfile(args.model):
        return _read_tar(args.model)
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
    return "\n".join([fmt(rows[0]), fmt(tuple("-" * w for w in widths))]
                     + [fmt(r) for r in rows[1:]])


def run(args) -> int:
    md = load_metadata(args)
    print(table(md))
    print(f"total {md['total_macs']:,} MACs; arena {md['workspace_bytes']:,} B "
          f"(lower bound {md['workspace_lower_bound']:,} B); constants {md['constant_bytes']:,} B")
    return 0
