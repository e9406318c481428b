"""Compile options shared by `mtvm compile`, `mtvm analyze` and `mtvm project generate`."""
from __future__ import annotations

import numpy as np

from ..errors import MtvmError


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """'input:1,3,96,96' -> ('input', (1, 3, 96, 96))."""
    name, sep, dims = text.rpartition(":")
    try:
        if not sep or not name:
            raise ValueError
        return name, tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise MtvmError(f"--input-shape {text!r}: expected NAME:D1,D2,... e.g. input:1,3,96,96")


def parse_bind(text: str) -> tuple[str, np.ndarray]:
    """'shape=shape.npy' -> ('shape', array)."""
    name, sep, path = text.partition("=")
    if not sep or not name:
        raise MtvmError(f"--bind {text!r}: expected NAME=VALUE.npy")
    try:
        return name, np.load(path)
    except OSError as e:
        raise MtvmError(f"--bind {name}: cannot read {path}: {e.strerror or e}")


def parse_workspace_pools(text: str) -> list[tuple[str, int]]:
    """'sram1:32768,sram2:64K' -> [('sram1', 32768), ('sram2', 65536)] (sizes in
    bytes, 0x..., or with a K/M suffix; the names are checked by the compiler)."""
    from ..boards import parse_size
    pools = []
    for part in text.split(","):
        name, sep, size = part.strip().partition(":")
        try:
            if not sep or not name:
                raise ValueError
            pools.append((name, parse_size(size)))
        except (ValueError, MtvmError):
            raise MtvmError(f"--workspace-pools {text!r}: expected NAME:BYTES[,NAME:BYTES...] "
                            "e.g. sram1:32768,sram2:65536") from None
    return pools


def add_board_option(p) -> None:
    """--board for the commands that only compile (project generate has its own)."""
    p.add_argument("--board", help="compile for this board's target (see `mtvm boards`); "
                   "--target overrides it")


def add_compile_options(p) -> None:
    p.add_argument("--target", metavar="TARGET",
                   help="what the C runs on: c (portable, every ISA under #if; the default "
                        "without --board), host, x86-64-v3, x86-64-v4, cortex-m4, ... "
                        "(`mtvm targets` lists them); --board implies the board's")
    p.add_argument("--backend", choices=["c", "llvm"], default="c",
                   help="c (C sources; the default) or llvm (LLVM IR compiled by llvmlite: "
                        "object code in the MLF's codegen/host/lib/, host runs through the "
                        "JIT with no C compiler; docs/llvm.md lists the ops it lowers)")
    p.add_argument("--module-name", default="default",
                   help="C name prefix: tvmgen_<name>_run (default: default)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME:D1,D2,...",
                   help="pin the shape of an input with symbolic dims (repeatable)")
    p.add_argument("--bind", action="append", default=[], metavar="NAME=VALUE.npy",
                   help="make a graph input a compile-time constant (repeatable)")
    p.add_argument("--profile", action="store_true",
                   help="instrument the entry function with per-operator timers")
    p.add_argument("--external-workspace", action="store_true",
                   help="the application passes the arena to tvmgen_<name>_run (with "
                        "--workspace-pools: every pool, in struct tvmgen_<name>_workspace_pools)")
    p.add_argument("--workspace-pools", metavar="NAME:BYTES[,NAME:BYTES...]",
                   help="split the arena over several pools (RAM banks), the hottest buffers "
                        "in the first; each pool is a static array in section "
                        ".mtvm.pool.<NAME>, or passed by the application with "
                        "--external-workspace (docs/compiler.md)")
    p.add_argument("--constants-section", metavar="NAME",
                   help="put the weights' const arrays in this linker section "
                        "(e.g. .qspi_weights)")
    p.add_argument("--no-fuse", action="store_true", help="do not fuse elementwise tails")
    p.add_argument("--no-reorder", action="store_true",
                   help="keep the graph's node order and in-place writes (default: those "
                        "of the lowest peak memory, see docs/performance.md)")
    p.add_argument("--io-in-workspace", action="store_true",
                   help="place the model's inputs and outputs in the arena "
                        "(tvmgen_<name>_map_io gives their addresses)")
    p.add_argument("--output-names", choices=["onnx", "microtvm"], default="onnx",
                   help="members of struct tvmgen_<name>_outputs: onnx (the ONNX output "
                        "names, sanitized; the default) or microtvm (output, or output0, "
                        "output1, ... as microTVM names them)")
    p.add_argument("--tuning-records", action="append", metavar="FILE",
                   help="records of `mtvm tune`: each layer gets its best measured schedule "
                        "and knobs for the target (repeatable; see docs/tuning.md)")


def compile_kwargs(args) -> dict:
    return {
        "module_name": args.module_name,
        "input_shapes": dict(parse_input_shape(s) for s in args.input_shape),
        "bind": dict(parse_bind(s) for s in args.bind),
        "profile": args.profile,
        "external_workspace": args.external_workspace,
        "fuse": not args.no_fuse,
        "io_in_workspace": getattr(args, "io_in_workspace", False),
        "reorder": not getattr(args, "no_reorder", False),
        **({"output_names": o} if (o := getattr(args, "output_names", "onnx")) != "onnx"
           else {}),
        **({"target": t} if (t := target_of(args)) is not None else {}),
        **({"tuning_records": r} if (r := getattr(args, "tuning_records", None)) else {}),
        **({"workspace_pools": parse_workspace_pools(w)}
           if (w := getattr(args, "workspace_pools", None)) else {}),
        **({"constants_section": c} if (c := getattr(args, "constants_section", None)) else {}),
        **({"backend": b} if (b := getattr(args, "backend", "c")) != "c" else {}),
    }


def target_of(args):
    """--target, else the target of --board (when the command has one), else None."""
    from ..target import Target
    if getattr(args, "target", None):
        return Target.parse(args.target)
    if getattr(args, "board", None):
        from ..boards import load_board
        return Target.from_board(load_board(args.board))
    return None
