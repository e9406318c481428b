"""Cortex-M and RISC-V figures of mtvm's C under QEMU: instructions per inference and per
MAC, flash, static RAM, stack high-water, arena vs its lower bound.

    python bench/device.py [--board mps2-an386] [--models-dir DIR] [MODEL ...]
    python bench/device.py --board riscv32-virt kws_dscnn_int8     # or sifive_e

For each model of ../shared/models a standalone project is generated for the
board (the model's own sample input), built with arm-none-eabi-gcc (the
template's -O2) and run to its end under QEMU with `-icount shift=0`: every
instruction takes 1 ns of virtual time, so the SysTick time the app prints
per inference (ticks at the board's clock) converts to instructions, exactly
and reproducibly (no dependence on the host's load). The factor is measured, not
assumed: after the model the app times a loop of a known instruction count
(2,000,000: SUBS + BNE) with the same timer and prints it. The app also prints the
stack high-water mark (the reset handler paints the stack reserve). Flash and
static RAM come from the build's size report. Figures, not pass/fail.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODELS = os.path.join(HERE, "..", "..", "shared", "models")
DEFAULT_WORK = os.path.join(HERE, "..", "build", "bench-device")

TIME_RE = re.compile(r"time per inference: \d+ us \((\d+) ticks at (\d+) Hz\)")
STACK_RE = re.compile(r"stack: (\d+) of (\d+) bytes used")
CALIBRATION_RE = re.compile(r"timer calibration: (\d+) instructions in (\d+) ticks at (\d+) Hz")


def quiet(*_a, **_k):
    pass


def bench_model(path: str, board: str, work: str, backend: str = "c",
                tuning_records: str | None = None) -> dict:
    import mtvm
    import mtvm.project as P
    name = os.path.splitext(os.path.basename(path))[0]
    row = {"model": name}
    npz = os.path.splitext(path)[0] + ".npz"
    out = os.path.join(work, f"{name}-{board}")
    try:
        t = time.perf_counter()
        # Compiled for the board's own target, as `mtvm project generate --board` does
        # (its DSP, MVE or RV32 schedules: the portable C of target "c" lacks the ones
        # that are not #if branches of a shared kernel)
        from mtvm.boards import load_board
        from mtvm.target import Target
        tg = Target.from_board(load_board(board))
        lib = mtvm.compile(path, target=tg, backend=backend, tuning_records=tuning_records)
        proj = P.generate(lib, board=board, out_dir=out, kind="standalone", sample=npz,
                          force=True, progress=quiet)
        proj.build(progress=quiet)
        row["build_s"] = time.perf_counter() - t
        r = proj.template.run_standalone(proj, icount=True)
    except mtvm.MtvmError as e:
        row["error"] = str(e).strip().splitlines()[0][:120]
        return row
    m = TIME_RE.search(r.stdout or "")
    if r.returncode != 0 or m is None:
        row["error"] = f"status {r.returncode}: {(r.stdout or '')[-200:]!r}"
        return row
    ticks = int(m.group(1))
    cal = CALIBRATION_RE.search(r.stdout)
    if cal is None:
        row["error"] = "no timer calibration line in the output"
        return row
    row["instr_per_tick"] = int(cal.group(1)) / int(cal.group(2))
    row["instructions"] = ticks * row["instr_per_tick"]
    s = STACK_RE.search(r.stdout)
    row["stack"] = int(s.group(1)) if s else None
    with open(os.path.join(out, "build", "size.json")) as f:
        size = json.load(f)
    md = lib.metadata
    row.update(macs=md["total_macs"], arena=md["workspace_bytes"],
               lower_bound=md["workspace_lower_bound"], flash=size.get("flash_used"),
               ram=size.get("ram_used"), weights=size.get("weights"))
    row["per_mac"] = row["instructions"] / max(row["macs"], 1)
    return row


def table(rows: list[dict], board: str) -> str:
    head = ["model", "MACs", "instructions", "instr/MAC", "flash B", "static RAM B", "stack B",
            "arena B", "lower bound B"]
    cal = sorted({round(r["instr_per_tick"], 3) for r in rows if "instr_per_tick" in r})
    from mtvm.boards import load_board
    riscv = load_board(board).data.get("template") == "riscv"
    cc = "riscv64-unknown-elf-gcc" if riscv else "arm-none-eabi-gcc"
    predict = "(minstret under icount: 1)" if riscv else \
        "(icount shift=0 and a 25 MHz SysTick predict 40)"
    lines = [f"{board}, QEMU -icount shift=0, {cc} -O2; timer calibrated by a loop "
             f"of 2,000,000 instructions run on the board after the model: "
             f"{', '.join(f'{c:g}' for c in cal) or '-'} instructions per tick {predict}",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} |" + " |" * (len(head) - 2))
            continue
        lines.append(f"| {r['model']} | {r['macs'] / 1e6:.2f} M | {r['instructions'] / 1e6:.2f} M"
                     f" | {r['per_mac']:.2f} | {r['flash']:,} | {r['ram']:,} | "
                     f"{r['stack'] if r['stack'] is not None else '-'} | {r['arena']:,} | "
                     f"{r['lower_bound']:,} |")
    return "\n".join(lines)


def board_parser(description: str, work: str) -> argparse.ArgumentParser:
    """The options of the on-board benches (this one, peer_device.py)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("models", nargs="*", help="model names (default: all in --models-dir)")
    p.add_argument("--models-dir", default=DEFAULT_MODELS)
    p.add_argument("--board", default="mps2-an386")
    p.add_argument("--work", default=work, help="where the projects are generated")
    return p


def model_paths(args) -> list[str]:
    """The .onnx files of --models-dir, only those named when models are given."""
    paths = sorted(glob.glob(os.path.join(args.models_dir, "*.onnx")))
    if args.models:
        paths = [q for q in paths if os.path.splitext(os.path.basename(q))[0] in args.models]
    return paths


def report(text: str, out: str | None) -> None:
    """Prints the report, and writes it to `out` too when given."""
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def main(argv=None) -> int:
    args = board_parser(__doc__.splitlines()[0], DEFAULT_WORK).parse_args(argv)
    paths = model_paths(args)
    rows = []
    for path in paths:
        print(f"  {os.path.basename(path)} on {args.board} ...", file=sys.stderr, flush=True)
        rows.append(bench_model(path, args.board, args.work))
    print(table(rows, args.board))
    return 0


if __name__ == "__main__":
    sys.exit(main())
