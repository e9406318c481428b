"""`mtvm tune MODEL --board B -o RECORDS`: measure each layer's schedules on the
device, append the records; `mtvm tune --show RECORDS` prints the best per key."""
from __future__ import annotations

import os
import sys

from ..errors import MtvmError
from .options import parse_bind, parse_input_shape


def add_parser(sub) -> None:
    p = sub.add_parser("tune", help="measure each layer's schedules on the device; records "
                       "for --tuning-records",
                       description="Tunes a model on a board: the candidate schedules and knob "
                       "values of every tunable layer are built into profiling builds (one "
                       "candidate per layer per build), run on the device through a session, "
                       "checked against onnxruntime and timed per kernel. One JSON line per "
                       "measured candidate is appended to the records file; compile with "
                       "`--tuning-records FILE`. See docs/tuning.md.")
    p.add_argument("model", nargs="?", help="ONNX file")
    p.add_argument("--board", default="host", help="board to measure on (default: host)")
    p.add_argument("-o", "--output", metavar="FILE.jsonl", help="records file to append to "
                   "(default: MODEL.BOARD.tune.jsonl); candidates it already has for the "
                   "target are not measured again")
    p.add_argument("--trials", type=int, default=32, metavar="N", help="candidates measured "
                   "per layer at most (default 32; builds ~ the largest layer's count)")
    p.add_argument("--time-limit", type=float, metavar="SECONDS", help="start no build "
                   "after this many seconds")
    p.add_argument("--devices", default="1", metavar="N|PORT,PORT,...", help="measure on N "
                   "devices in parallel (emulators or host processes), or on the boards at "
                   "these ports/URLs (rfc2217://host:port, socket://host:port, /dev/ttyACM0)")
    p.add_argument("--port", help="one real board's serial port or URL")
    p.add_argument("--memory-budget", type=int, metavar="BYTES", help="reject builds whose "
                   "arena exceeds BYTES and report the best under it")
    p.add_argument("--runs", type=int, metavar="N", help="profiled runs per build (default: 2 "
                   "under QEMU -icount, else 15)")
    p.add_argument("--known-records", action="append", default=[], metavar="FILE",
                   help="records of other models: candidates measured there are skipped")
    p.add_argument("--workdir", metavar="DIR", help="where the builds go (default: a "
                   "temporary directory, removed at the end)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME:D1,D2,...",
                   help="pin the shape of an input with symbolic dims (repeatable)")
    p.add_argument("--bind", action="append", default=[], metavar="NAME=VALUE.npy",
                   help="make a graph input a compile-time constant (repeatable)")
    p.add_argument("--timeout", type=float, help="seconds to wait for each device reply")
    p.add_argument("--seed", type=int, default=0, help="seed of the search and of random "
                   "inputs (default 0)")
    p.add_argument("--search", choices=["auto", "exhaustive", "annealing", "model"],
                   default="auto", help="per layer: auto (default: exhaustive when its "
                   "untried candidates fit in --trials, else annealing), exhaustive, annealing "
                   "(simulated annealing over the knobs), or model (guided by a cost model "
                   "learned from the measurements so far and the resumed records)")
    p.add_argument("--show", nargs="+", metavar="FILE", help="print the best record per key "
                   "of these records files and exit")
    p.add_argument("--target", help="compile for this target (default: the board's; e.g. "
                   "x86-64-v3 on an AVX-512 host); with --show: only this target's records")
    p.add_argument("--backend", choices=["c", "llvm"], default="c", help="c (default): the "
                   "C schedules, measured in builds on the board; llvm: the LLVM backend's "
                   "loop nests' knobs, measured in this process through LLVM's JIT on "
                   "--board host (no C compiler needed), else as object code in builds on "
                   "the board; then compile with --backend llvm --tuning-records")
    p.add_argument("--no-whole-check", action="store_true", help="on the host board, skip "
                   "the check that ends a tune: the model compiled with the records against "
                   "the defaults, plain builds timed in turns, choices given back while it is "
                   "not faster")
    p.set_defaults(func=run)


def _devices(text: str):
    text = (text or "1").strip()
    if text.isdigit():
        return int(text)
    return [d.strip() for d in text.split(",") if d.strip()]


def run(args) -> int:
    from .. import progress
    from ..tune import records as R
    from ..tune import tune
    if args.show:
        target = args.target
        if target:
            from ..target import Target
            target = Target.parse(target).name
        print(R.show(R.load(args.show), target))
        return 0
    if not args.model:
        raise MtvmError("mtvm tune: give a model (or --show RECORDS)")
    llvm = args.backend == "llvm"
    out = args.output or (os.path.splitext(os.path.basename(args.model))[0]
                          + f".{args.board}{'.llvm' if llvm else ''}.tune.jsonl")
    verbose = getattr(args, "verbose", False)
    res = tune(args.model, board=args.board, records=out, trials=args.trials,
               devices=_devices(args.devices), port=args.port, runs=args.runs,
               time_limit=args.time_limit, memory_budget=args.memory_budget,
               known_records=args.known_records or None, workdir=args.workdir,
               input_shapes=dict(parse_input_shape(s) for s in args.input_shape) or None,
               bind=dict(parse_bind(s) for s in args.bind) or None, seed=args.seed,
               timeout=args.timeout, target=args.target, backend=args.backend,
               search=args.search, whole_model_check=not args.no_whole_check,
               log=(lambda msg: progress.write(f"[tune] {msg}")) if verbose else None)
    print(res.summary())
    print(f"next: mtvm compile {args.model} --board {args.board}"
          f"{' --backend llvm' if llvm else ''} --tuning-records {out}")
    sys.stdout.flush()
    return 0
