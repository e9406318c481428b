"""Default vs tuned schedules, on the host paired in one run, or on an emulated board.

    python bench/tune.py [--models-dir DIR] [--trials N] [--isa native|avx2] [MODEL ...]
    python bench/tune.py --board mps2-an386 [--devices N] [--backend c|llvm] [MODEL ...]

For each model: `mtvm tune` on the host board (profiling builds measured
through host sessions, records in --records-dir), then two host-driven
projects, the compiler's defaults and the tuned build (`--tuning-records`),
both running at once on one CPU and timed by their device timer in turns
(default, tuned, tuned, default, ...: at least `number` back-to-back runs and 5 ms
per turn, `rounds` turns each), so both see the same load on a shared machine.
Latency is each build's fastest turn, its median turn beside it; tuned/default is
the median of the ratios of neighbouring turns, with its 95 % sign-test upper bound
(mtvm/tune/whole.py, which the tuner's own whole-model check uses too): on a KVM
guest whose speed came and went by up to 1.7x, two processes of one build differed
by up to 19 % by their fastest turns, 7 % by their median turns, 2.5 % by the median
of the pairs' ratios. tuned/default < 1 means
tuning made it faster; a tuned build whose C is the default's is reported as 1
("same C": the two timed copies differ by the noise only).

--isa native compiles for this machine (`mtvm targets`: x86-64-v4 with
AVX-512 on an AVX-512 host), --isa avx2 for x86-64-v3 (AVX2 + FMA), which
runs on the same machine. Figures, not pass/fail; say which CPU they came
from (the table's first line does).

--board BOARD (an emulated board): `mtvm tune` on it (--devices emulators,
QEMU -icount), then the default and the tuned standalone firmware each run
once under -icount (bench/device.py): whole-model instruction counts, exact.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import platform
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODELS = os.path.join(HERE, "..", "..", "shared", "models")
DEFAULT_RECORDS = os.path.join(HERE, "..", "build", "bench-tune")


def quiet(*_a, **_k):
    pass


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def tune_figures(res, t0: float) -> dict:
    """A table row's tuning columns from a TuneResult (t0: when tuning began)."""
    return dict(tune_s=time.monotonic() - t0, builds=res.stats.builds, layers=len(res.layers),
                tunable=sum(len(lay.candidates) > 1 for lay in res.layers),
                improved=sum(1 for lay in res.layers if lay.key in res.best
                             and not res.best[lay.key].is_default),
                measured=res.stats.measured, summary=res.summary(), check=_check(res.whole))


def _check(whole) -> str:
    """The tuner's whole-model check, a table cell: its tuned/default (fastest turn) and
    the choices it gave back."""
    if whole is None:
        return "-"
    if whole.error:
        return "not made"
    ratio = "defaults only" if whole.tuned_s is None else f"{whole.ratio:.3f}"
    return ratio + (f", {len(whole.dropped)} given back" if whole.dropped else "")


def bench_model(path: str, target: str, args) -> dict:
    import mtvm
    import mtvm.project as P
    from mtvm.tune.measure import reference_inputs
    from mtvm.tune.whole import WholeCheck, one_core_sessions, paired_turns, runs_per_turn
    name = os.path.splitext(os.path.basename(path))[0]
    row = {"model": name}
    rec = os.path.join(args.records_dir, f"{name}.{target}.jsonl")
    os.makedirs(args.records_dir, exist_ok=True)
    t0 = time.monotonic()
    try:
        res = mtvm.tune(path, board="host", records=rec, trials=args.trials, target=target,
                        runs=args.runs)
    except mtvm.MtvmError as e:
        row["error"] = str(e).splitlines()[0][:120]
        return row
    row.update(tune_figures(res, t0))
    work = tempfile.mkdtemp(prefix="mtvm-bench-tune-")
    sessions = {}
    try:
        projs, libs = {}, {}
        for kind, extra in (("default", {}), ("tuned", {"tuning_records": rec})):
            lib = libs[kind] = mtvm.compile(path, target=target, **extra)
            row[f"{kind}_arena"] = lib.metadata["workspace_bytes"]
            projs[kind] = P.generate(lib, board="host", out_dir=os.path.join(work, kind),
                                     progress=quiet).build(progress=quiet)
        inputs = reference_inputs(path, projs["default"].metadata)
        # Tuning that chose only defaults leaves the C as it was: the same program, so
        # tuned/default is 1 (timing two copies would show the noise floor, +-2 %).
        row["same_c"] = libs["default"].sources == libs["tuned"].sources
        sessions.update(one_core_sessions(projs))
        row["number"] = runs_per_turn(sessions, inputs, args.number)
        w = WholeCheck()
        w.take(paired_turns(sessions, row["number"], args.rounds))
        row.update(default_s=w.default_s, tuned_s=w.tuned_s, default_med=w.default_med,
                   tuned_med=w.tuned_med, ratio=1.0 if row["same_c"] else w.ratio,
                   bound=None if row["same_c"] else w.ratio_bound)
    finally:
        for s in sessions.values():
            s.close()
    return row


def bench_board_model(path: str, args) -> dict:
    """Tuned on an emulated board, then the whole model's instructions, default and tuned."""
    import mtvm
    import device
    name = os.path.splitext(os.path.basename(path))[0]
    row = {"model": name}
    rec = os.path.join(args.records_dir, f"{name}.{args.board}.{args.backend}.jsonl")
    os.makedirs(args.records_dir, exist_ok=True)
    t0 = time.monotonic()
    try:
        res = mtvm.tune(path, board=args.board, records=rec, trials=args.trials,
                        devices=args.devices, backend=args.backend, runs=args.runs)
    except mtvm.MtvmError as e:
        row["error"] = str(e).splitlines()[0][:120]
        return row
    row.update(tune_figures(res, t0))
    work = tempfile.mkdtemp(prefix="mtvm-bench-tune-")
    for kind, records in (("default", None), ("tuned", rec)):
        r = device.bench_model(path, args.board, os.path.join(work, kind), args.backend,
                               tuning_records=records)
        if "error" in r:
            row["error"] = f"{kind}: {r['error']}"
            return row
        row[f"{kind}_instr"], row[f"{kind}_arena"] = r["instructions"], r["arena"]
    row["ratio"] = row["tuned_instr"] / row["default_instr"]
    return row


def bound(row) -> str:
    return f" (< {row['bound']:.3f})" if row.get("bound") is not None else ""


def _table(head: str, unit: str, rows, cells, digits: int, check: bool = False) -> str:
    """The markdown table of default vs tuned rows; cells(row): the default and tuned
    figure cells; check: a column with the tuner's whole-model check."""
    lines = [head, "", "| model | layers (tunable) | builds | tune s | improved layers | "
             f"default {unit} | tuned {unit} | tuned/default | arena default -> tuned B |"
             + (" tuner's check |" if check else ""),
             "|---|---|---|---|---|---|---|---|---|" + ("---|" if check else "")]
    ratios = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} |" + " |" * (7 + check))
            continue
        ratios.append(r["ratio"])
        same = " (same C)" if r.get("same_c") else ""
        lines.append(f"| {r['model']} | {r['layers']} ({r['tunable']}) | {r['builds']} | "
                     f"{r['tune_s']:.0f} | {r['improved']} | {' | '.join(cells(r))} | "
                     f"{r['ratio']:.{digits}f}{same}{bound(r)} | {r['default_arena']:,} -> "
                     f"{r['tuned_arena']:,} |" + (f" {r.get('check', '-')} |" if check else ""))
    if ratios:
        gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        lines.append(f"\ngeometric mean tuned/default: {gm:.{digits}f} over {len(ratios)} "
                     f"model(s); worst {max(ratios):.{digits}f}")
    return "\n".join(lines)


def board_table(rows, args) -> str:
    return _table(f"board {args.board} (QEMU -icount shift=0), backend {args.backend}; mtvm "
                  f"tune --trials {args.trials} --devices {args.devices}; whole-model "
                  "instructions of the default and the tuned standalone firmware (one run "
                  "each: exact)", "instr", rows,
                  lambda r: (f"{r['default_instr']:,.0f}", f"{r['tuned_instr']:,.0f}"), 4)


def table(rows, target, args) -> str:
    return _table(f"host: {cpu_name()}, target {target} (--isa {args.isa}); mtvm tune "
                  f"--trials {args.trials}, {args.runs or 15} profiled runs per build (fastest "
                  f"run per kernel); default and tuned timed in {args.rounds} turns each of at "
                  f"least {args.number} runs and 5 ms, ABBA, device timer (clock_gettime): "
                  "latency = the fastest turn (the median turn in brackets); tuned/default = "
                  "the median of the ratios of neighbouring turns (its 95 % sign-test upper "
                  "bound in brackets); the tuner's whole-model check (mtvm/tune/whole.py) in "
                  "the last column", "ms", rows,
                  lambda r: (f"{r['default_s'] * 1e3:.3f} ({r['default_med'] * 1e3:.3f})",
                             f"{r['tuned_s'] * 1e3:.3f} ({r['tuned_med'] * 1e3:.3f})"), 3,
                  check=True)


def model_paths(args) -> list[str]:
    paths = sorted(glob.glob(os.path.join(args.models_dir, "*.onnx")))
    if args.models:
        paths = [q for q in paths if os.path.splitext(os.path.basename(q))[0] in args.models]
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="model names (default: all in --models-dir)")
    p.add_argument("--models-dir", default=DEFAULT_MODELS)
    p.add_argument("--records-dir", default=DEFAULT_RECORDS)
    p.add_argument("--isa", choices=["native", "avx2"], default="native")
    p.add_argument("--trials", type=int, default=16)
    p.add_argument("--runs", type=int, help="profiled runs per tuning build (default 15)")
    p.add_argument("--number", type=int, default=20, help="runs per timed turn")
    p.add_argument("--rounds", type=int, default=30, help="timed turns of each build")
    p.add_argument("--show", action="store_true", help="print each tuning summary too")
    p.add_argument("--board", default="host", help="an emulated board to tune on instead "
                   "of the host (e.g. mps2-an386): instruction counts")
    p.add_argument("--devices", type=int, default=1, help="emulators measuring in parallel "
                   "(--board)")
    p.add_argument("--backend", choices=["c", "llvm"], default="c", help="(--board)")
    args = p.parse_args(argv)
    if args.board != "host":
        rows = []
        for path in model_paths(args):
            print(f"  {os.path.basename(path)} ({args.board}) ...", file=sys.stderr, flush=True)
            rows.append(bench_board_model(path, args))
            if args.show and "summary" in rows[-1]:
                print(rows[-1]["summary"], file=sys.stderr)
            print(board_table(rows[-1:], args).splitlines()[-1], file=sys.stderr, flush=True)
        print(board_table(rows, args))
        return 0
    from mtvm.target import Target
    target = Target.parse("host" if args.isa == "native" else "x86-64-v3").name
    rows = []
    for path in model_paths(args):
        print(f"  {os.path.basename(path)} ({target}) ...", file=sys.stderr, flush=True)
        rows.append(bench_model(path, target, args))
        if args.show and "summary" in rows[-1]:
            print(rows[-1]["summary"], file=sys.stderr)
    print(table(rows, target, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
