"""The LLVM backend beside the C backend and onnxruntime, in the same run.

    python bench/llvm.py [--models DIR] [--repeat N] [--march x86-64-v3] [--device]
                         [--compile-time] [--out FILE.md] [MODEL ...]

Host: each model compiled twice for this machine -- the C backend built with
cc -O3 -march=native (as bench/host.py), the LLVM backend through llvmlite's
JIT (-O3, the same target) -- and onnxruntime with one thread, timed in turns
(medians); ratios LLVM/C and LLVM/onnxruntime, and the geometric mean of
LLVM/C (issue 17's goal: at most 1.2). Models with an op the LLVM backend does
not lower yet are listed with the node it stops at.
--device: QEMU -icount instructions per inference on mps2-an386 (Cortex-M4) for
both backends (bench/device.py's standalone app), and their ratio.
--compile-time: light_resnet50 (bench/compile_time.py's model) compiled to a
runnable form by each backend: C -> cc -O3 shared library, LLVM -> object code.
Figures, not pass/fail; the machine and ISA head the table.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import DEFAULT_MODELS, interleaved_medians  # noqa: E402
from device import report  # noqa: E402


def bench_host(path: str, repeat: int, march: str) -> dict:
    import onnxruntime as ort

    import mtvm
    from mtvm.host_runner import HostModule
    name = os.path.splitext(os.path.basename(path))[0]
    row = {"model": name}
    x = np.load(os.path.splitext(path)[0] + ".npz")["in_0"]
    target = "host" if march == "native" else march
    try:
        t = time.perf_counter()
        llvm_lib = mtvm.compile(path, backend="llvm", target=target)
        llvm_lib.run_host({llvm_lib.metadata["inputs"][0]["name"]: x})   # JIT-compiles
        row["llvm_build_s"] = time.perf_counter() - t
    except mtvm.MtvmError as e:
        row["error"] = str(e).splitlines()[0].split(": ", 1)[-1][:110]
        return row
    c_lib = mtvm.compile(path, target=target)
    c_mod = HostModule(c_lib, opt="-O3", extra=[f"-march={march}"])
    feeds = {c_lib.metadata["inputs"][0]["name"]: x}
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ort_feeds = {sess.get_inputs()[0].name: x}
    med = interleaved_medians({"c": lambda: c_mod.run(feeds),
                               "llvm": lambda: llvm_lib.run_host(feeds),
                               "ort": lambda: sess.run(None, ort_feeds)}, repeat)
    row.update(c_ms=med["c"] * 1e3, llvm_ms=med["llvm"] * 1e3, ort_ms=med["ort"] * 1e3)
    row["llvm_vs_c"] = med["llvm"] / med["c"]
    row["llvm_vs_ort"] = med["llvm"] / med["ort"]
    ref = np.load(os.path.splitext(path)[0] + ".npz")["out_0"]
    got = list(llvm_lib.run_host(feeds).values())[0]
    row["max_rel_err"] = float(np.abs(got - ref).max() / (np.abs(ref).max() or 1.0))
    row["arena"] = llvm_lib.metadata["workspace_bytes"]
    row["c_arena"] = c_lib.metadata["workspace_bytes"]
    return row


def bench_device(path: str, board: str, work: str) -> dict:
    import device
    row = {}
    for backend in ("c", "llvm"):
        r = device.bench_model(path, board, os.path.join(work, backend), backend=backend)
        if "error" in r:
            row[f"{backend}_error"] = r["error"]
            continue
        row[f"{backend}_instructions"] = r["instructions"]
        row[f"{backend}_flash"] = r["flash"]
    if "c_instructions" in row and "llvm_instructions" in row:
        row["llvm_vs_c_instr"] = row["llvm_instructions"] / row["c_instructions"]
    return row


def compile_time(path: str) -> dict:
    import mtvm
    from mtvm.host_runner import build_shared
    with tempfile.TemporaryDirectory() as cache:
        os.environ["MTVM_CACHE_DIR"] = cache
        t0 = time.perf_counter()
        lib = mtvm.compile(path)
        build_shared(lib, opt="-O3", extra=["-march=native"])
        t1 = time.perf_counter()
        llvm_lib = mtvm.compile(path, backend="llvm")
        llvm_lib.object_code()
        t2 = time.perf_counter()
    return {"c_s": t1 - t0, "llvm_s": t2 - t1}


def table(rows: list[dict], device_board: str | None) -> str:
    head = "| model | C ms | LLVM ms | onnxruntime ms | LLVM/C | LLVM/onnxruntime | max rel err |"
    if device_board:
        head += f" {device_board} instr C | LLVM | LLVM/C |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    ratios = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | not lowered: {r['error']} |")
            continue
        ratios.append(r["llvm_vs_c"])
        line = (f"| {r['model']} | {r['c_ms']:.3f} | {r['llvm_ms']:.3f} | {r['ort_ms']:.3f} | "
                f"{r['llvm_vs_c']:.2f} | {r['llvm_vs_ort']:.2f} | {r['max_rel_err']:.1e} |")
        if device_board:
            if "llvm_vs_c_instr" in r:
                line += (f" {r['c_instructions'] / 1e6:.2f} M | {r['llvm_instructions'] / 1e6:.2f} M"
                         f" | {r['llvm_vs_c_instr']:.2f} |")
            else:
                line += f" {r.get('llvm_error') or r.get('c_error')} | | |"
        lines.append(line)
    if ratios:
        geo = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
        lines.append(f"\nGeometric mean LLVM/C on the host over {len(ratios)} models: "
                     f"**{geo:.2f}** (goal: at most 1.2).")
    return "\n".join(lines)


def main(argv=None) -> int:
    from run_all import machine
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--models", dest="models_dir", default=DEFAULT_MODELS)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--march", default="native")
    ap.add_argument("--device", action="store_true", help="also mps2-an386 instructions")
    ap.add_argument("--compile-time", action="store_true")
    ap.add_argument("--out", help="write the Markdown here too")
    args = ap.parse_args(argv)
    paths = [os.path.join(args.models_dir, f"{m}.onnx") for m in args.models] or \
        sorted(glob.glob(os.path.join(args.models_dir, "*.onnx")))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for p in paths:
            row = bench_host(p, args.repeat, args.march)
            if args.device and "error" not in row:
                row.update(bench_device(p, "mps2-an386", os.path.join(work, row["model"])))
            rows.append(row)
            print(row, file=sys.stderr, flush=True)
    text = machine(args.march) + "\n\n" + table(rows, "mps2-an386" if args.device else None)
    if args.compile_time:
        from compile_time import default_model
        model = default_model()
        if model:
            ct = compile_time(model)
            text += (f"\n\nCompile time of light_resnet50 to a runnable form: C backend (ONNX -> "
                     f"C -> cc -O3 shared library) {ct['c_s']:.1f} s, LLVM backend (ONNX -> "
                     f"LLVM IR -> -O3 object code) {ct['llvm_s']:.1f} s.")
    report(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
