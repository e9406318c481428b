"""Default vs tuned schedules, on the host paired in one run, or on an emulated board.

    python bench/tune.py [--models-dir DIR] [--trials N] [--isa native|avx2] [MODEL ...]
    python bench/tune.py --board mps2-an386 [--devices N] [--backend c|llvm] [MODEL ...]

For each model: `mtvm tune` on the host board (profiling builds measured
through host sessions, records in --records-dir), then two host-driven
projects, the compiler's defaults and the tuned build (`--tuning-records`),
both running at once on one CPU and timed by their device timer in turns
(default, tuned, tuned, default, ...: `number` back-to-back runs per turn,
`rounds` turns each), so both see the same load on a shared machine. The figure of each is
its fastest turn (preemption only adds time: on this 2-core machine at a load
of 6 the median turn of two identical builds differed by up to 40 %, the
fastest by 1 %); the median turn is shown beside it. tuned/default < 1 means
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
import statistics
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


def paired(sessions: dict, inputs: dict, number: int, rounds: int) -> dict:
    """{name: (median, min) seconds per inference over the turns}, timed in turns,
    the first build first in even turns and last in odd ones (whoever runs right
    after the other finds the caches holding the other's weights)."""
    for s in sessions.values():
        s.executor.run(inputs)
        s.executor.benchmark(number=max(1, number // 4), repeat=1)   # warm up
    times = {k: [] for k in sessions}
    for turn in range(rounds):
        items = list(sessions.items())
        for k, s in (items if turn % 2 == 0 else items[::-1]):
            times[k].append(s.executor.benchmark(number=number, repeat=1, warmup=0).median)
    return {k: (statistics.median(v), min(v)) for k, v in times.items()}


def one_core_sessions(projs: dict) -> dict:
    """A session per project, every device process on the same CPU (the last this
    process may use): on a 2-core machine the two cores see different loads
    (interrupts, other jobs), so two identical builds on two cores differ by a
    few percent, the same on one core by the noise only."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if allowed:
        os.sched_setaffinity(0, {max(allowed)})   # the device processes inherit it
    try:
        return {kind: proj.session() for kind, proj in projs.items()}
    finally:
        if allowed:
            os.sched_setaffinity(0, allowed)


def tune_figures(res, t0: float) -> dict:
    """A table row's tuning columns from a TuneResult (t0: when tuning began)."""
    return dict(tune_s=time.monotonic() - t0, builds=res.stats.builds, layers=len(res.layers),
                tunable=sum(len(lay.candidates) > 1 for lay in res.layers),
                improved=sum(1 for lay in res.layers if lay.key in res.best
                             and not res.best[lay.key].is_default),
                measured=res.stats.measured, summary=res.summary())


def bench_model(path: str, target: str, args) -> dict:
    import mtvm
    import mtvm.project as P
    from mtvm.tune.measure import reference_inputs
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
        t = paired(sessions, inputs, args.number, args.rounds)
        row.update(default_s=t["default"][1], tuned_s=t["tuned"][1],
                   default_med=t["default"][0], tuned_med=t["tuned"][0],
                   ratio=1.0 if row["same_c"] else t["tuned"][1] / t["default"][1])
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


def _table(head: str, unit: str, rows, cells, digits: int) -> str:
    """The markdown table of default vs tuned rows; cells(row): the default and tuned
    figure cells."""
    lines = [head, "", "| model | layers (tunable) | builds | tune s | improved layers | "
             f"default {unit} | tuned {unit} | tuned/default | arena default -> tuned B |",
             "|---|---|---|---|---|---|---|---|---|"]
    ratios = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} |" + " |" * 7)
            continue
        ratios.append(r["ratio"])
        same = " (same C)" if r.get("same_c") else ""
        lines.append(f"| {r['model']} | {r['layers']} ({r['tunable']}) | {r['builds']} | "
                     f"{r['tune_s']:.0f} | {r['improved']} | {' | '.join(cells(r))} | "
                     f"{r['ratio']:.{digits}f}{same} | {r['default_arena']:,} -> "
                     f"{r['tuned_arena']:,} |")
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
                  f"run per kernel); latency = fastest of {args.rounds} turns of {args.number} "
                  "runs (median turn in brackets), default and tuned in turns, device timer "
                  "(clock_gettime)", "ms", rows,
                  lambda r: (f"{r['default_s'] * 1e3:.3f} ({r['default_med'] * 1e3:.3f})",
                             f"{r['tuned_s'] * 1e3:.3f} ({r['tuned_med'] * 1e3:.3f})"), 3)


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
