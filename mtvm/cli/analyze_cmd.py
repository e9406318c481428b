"""`mtvm analyze MODEL|MLF_DIR|MLF.tar|PROJECT`: per-operator MACs and memory from
metadata.json; `--report DIR` adds an HTML page with figures (mtvm.report,
needs matplotlib: `pip install mtvm[report]`)."""
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
    p.add_argument("--report", metavar="DIR", help="also write DIR/report.html (self-contained: "
                   "memory timeline, flash/RAM budgets against --board, per-layer table, "
                   "execution order) and its figures as PNG; needs matplotlib "
                   "(pip install mtvm[report])")
    p.add_argument("--profile-json", metavar="FILE", help="with --report: per-layer device "
                   "time from `mtvm run DIR --profile N --profile-json FILE`")
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
    return _load(args)[0]


def _mlf_dir(path: str) -> str | None:
    for rel in ("", "model"):
        if os.path.isfile(os.path.join(path, rel, "metadata.json")):
            return os.path.join(path, rel)
    return None


def _load(args):
    """(metadata, the CompiledModel or None: an ONNX file is compiled here)."""
    if os.path.isdir(args.model):
        for rel in ("metadata.json", os.path.join("model", "metadata.json")):
            path = os.path.join(args.model, rel)
            if os.path.isfile(path):
                try:
                    with open(path) as f:
                        return json.load(f), None
                except (OSError, ValueError) as e:
                    raise MtvmError(f"{path}: cannot read it: {e}") from None
        raise MtvmError(f"{args.model}: no metadata.json (not a Model Library Format "
                        "directory or a project)")
    if args.model.endswith(".tar") and os.path.isfile(args.model):
        return _read_tar(args.model), None
    from .. import compile as mtvm_compile
    lib = mtvm_compile(args.model, **compile_kwargs(args))
    return lib.metadata, lib


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
    report_dir = getattr(args, "report", None)
    if report_dir:
        from ..report import load_profile, require_matplotlib
        require_matplotlib()            # one line before any work when it is missing
        profile = load_profile(args.profile_json) if args.profile_json else None
    elif getattr(args, "profile_json", None):
        raise MtvmError("--profile-json is read by --report: give --report DIR too")
    md, lib = _load(args)
    print(table(md))
    print(f"total {md['total_macs']:,} MACs; arena {md['workspace_bytes']:,} B "
          f"(lower bound {md['workspace_lower_bound']:,} B); constants {md['constant_bytes']:,} B")
    if report_dir:
        from ..boards import load_board
        from ..report import write_report
        board = load_board(args.board) if args.board else None
        mlf = _mlf_dir(args.model) if os.path.isdir(args.model) else None
        if lib is None:
            print("(the memory timeline from metadata.json's live bytes: give the ONNX model "
                  "for the timeline by tensor and the parameters per layer)")
        if profile is None and getattr(args, "tuning_records", None):
            # no profile: the layers' times as `mtvm tune` measured them
            from ..report.data import profile_from_records
            profile = profile_from_records(md, args.tuning_records)
        path = write_report(report_dir, md, lib=lib, board=board, profile=profile, mlf_dir=mlf)
        print(f"wrote {path}")
    return 0
