"""Host latency of mtvm's generated C beside onnxruntime, in the same run.

    python bench/host.py [--models DIR] [--repeat N] [MODEL ...]

For each model of ../shared/models: mtvm's C built with cc -O3 -march=native
(--march x86-64-v3: as on an AVX2 host without AVX-512, on any x86 machine; the
SIMD paths follow the compiler's flags; onnxruntime then runs its AVX2 kernels too,
bench/ort_isa.py) and called in-process, onnxruntime with one thread; median of N runs each,
timed in turns so both see the same load on a shared machine, and the ratio
mtvm/onnxruntime (< 1 means mtvm is faster); the same for the
peer emx-onnx-cgen when it is installed (bench/peer.py). Also the arena,
its lower bound and the constant bytes. Figures, not pass/fail.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
DEFAULT_MODELS = os.path.join(HERE, "..", "..", "shared", "models")


def add_ort_isa_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ort-isa", choices=["native", "avx2"], default=None,
                   help="instruction set onnxruntime may use (default: avx2 with --march "
                   "x86-64-v3, so both sides run AVX2; native otherwise)")


def apply_ort_isa(args) -> str:
    """Limit onnxruntime's kernels to AVX2 when asked (or implied by --march
    x86-64-v3); returns the line for the report. Before onnxruntime is imported."""
    isa = args.ort_isa or ("avx2" if args.march == "x86-64-v3" else "native")
    if isa == "native":
        return "onnxruntime on this machine's own kernels"
    import ort_isa
    return ort_isa.limit_to_avx2()


def interleaved_medians(fns: dict, repeat: int, budget_s: float = 20.0) -> dict:
    """Median seconds of each function, timed in turns (a, b, a, b, ...) so that
    all see the same load on a shared machine."""
    for fn in fns.values():
        fn()  # warm up
    times = {k: [] for k in fns}
    budget = time.perf_counter() + budget_s
    for _ in range(repeat):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
        if time.perf_counter() > budget and len(times[k]) >= 5:
            break
    return {k: float(np.median(v)) for k, v in times.items()}


def median_time(fn, repeat: int) -> float:
    fn()  # warm up
    times = []
    budget = time.perf_counter() + 10.0
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if time.perf_counter() > budget and len(times) >= 5:
            break
    return float(np.median(times))


def bench_peer(path: str, x: np.ndarray, y_like: np.ndarray, repeat: int, row: dict,
               march: str = "native") -> None:
    """emx-onnx-cgen's C beside mtvm's (bench/peer.py), when it is installed."""
    import peer
    if not peer.available():
        row["peer_error"] = "not installed"
        return
    try:
        built = peer.build(path, march=march)
    except Exception as e:          # a peer's failure is a figure, not a crash
        built = f"{type(e).__name__}: {e}"[:80]
    if isinstance(built, str):
        row["peer_error"] = built
        return
    run, _ = built
    xc = np.ascontiguousarray(x, np.float32)
    y = np.zeros(y_like.shape, np.float32)
    run(xc, y)
    row["peer_max_err"] = float(np.abs(y - y_like).max())
    row["peer_ms"] = median_time(lambda: run(xc, y), max(5, repeat // 5)) * 1e3


def bench_model(path: str, repeat: int, peer: bool = True, march: str = "native") -> dict:
    import onnxruntime as ort

    import mtvm
    from mtvm.host_runner import HostModule
    name = os.path.splitext(os.path.basename(path))[0]
    row = {"model": name}
    npz = os.path.splitext(path)[0] + ".npz"
    x = np.load(npz)["in_0"]
    try:
        t = time.perf_counter()
        # an AVX2 build for target x86-64-v3, what `host` resolves to on an AVX2 machine
        # (its Winograd layers are not in target "c"'s portable C)
        lib = mtvm.compile(path, target="x86-64-v3" if march == "x86-64-v3" else "c")
        row["compile_s"] = time.perf_counter() - t
        t = time.perf_counter()
        mod = HostModule(lib, opt="-O3", extra=[f"-march={march}"])
        row["build_s"] = time.perf_counter() - t
    except mtvm.MtvmError as e:
        row["error"] = str(e).splitlines()[0][:100]
        return row
    feeds = {lib.metadata["inputs"][0]["name"]: x}
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ort_feeds = {sess.get_inputs()[0].name: x}
    med = interleaved_medians({"mtvm": lambda: mod.run(feeds),
                               "ort": lambda: sess.run(None, ort_feeds)}, repeat)
    row["mtvm_ms"], row["ort_ms"] = med["mtvm"] * 1e3, med["ort"] * 1e3
    row["ratio"] = row["mtvm_ms"] / row["ort_ms"]
    if peer:
        bench_peer(path, x, np.load(npz)["out_0"], repeat, row, march)
    md = lib.metadata
    row.update(arena=md["workspace_bytes"], lower_bound=md["workspace_lower_bound"],
               consts=md["constant_bytes"], macs=md["total_macs"])
    return row


def geomean(values) -> float:
    return float(np.exp(np.mean(np.log(list(values)))))


def table(rows: list[dict]) -> str:
    head = ["model", "mtvm ms", "ort ms", "mtvm/ort", "emx ms", "emx/ort", "arena B",
            "lower bound B", "const B", "MACs", "compile s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} |" + " |" * (len(head) - 2))
            continue
        if "peer_ms" in r:
            peer = f"{r['peer_ms']:.3f} | {r['peer_ms'] / r['ort_ms']:.1f}"
        else:
            peer = f"{r.get('peer_error', 'skipped')} | -"
        lines.append(f"| {r['model']} | {r['mtvm_ms']:.3f} | {r['ort_ms']:.3f} | "
                     f"{r['ratio']:.2f} | {peer} | {r['arena']:,} | {r['lower_bound']:,} | "
                     f"{r['consts']:,} | {r['macs'] / 1e6:.2f} M | "
                     f"{r['compile_s'] + r['build_s']:.1f} |")
    ok = [r["ratio"] for r in rows if "ratio" in r]
    if ok:
        lines.append(f"\ngeometric mean mtvm/onnxruntime: {geomean(ok):.2f}"
                     f" over {len(ok)} models")
    peer = [r["peer_ms"] / r["ort_ms"] for r in rows if "peer_ms" in r]
    if peer:
        lines.append(f"geometric mean emx-onnx-cgen/onnxruntime: "
                     f"{geomean(peer):.2f} over {len(peer)} models")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="model names (default: all in --models)")
    p.add_argument("--models-dir", default=DEFAULT_MODELS)
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--no-peer", action="store_true", help="skip emx-onnx-cgen")
    p.add_argument("--march", default="native", help="cc -march for mtvm's C (x86-64-v3: "
                   "an AVX2 host; default: this machine)")
    p.add_argument("--json", metavar="FILE", help="also write the rows and the onnxruntime "
                   "line as JSON (bench/run_all.py's AVX2 table)")
    add_ort_isa_option(p)
    args = p.parse_args(argv)
    ort_line = apply_ort_isa(args)
    print(ort_line, file=sys.stderr)
    paths = sorted(glob.glob(os.path.join(args.models_dir, "*.onnx")))
    if args.models:
        paths = [q for q in paths if os.path.splitext(os.path.basename(q))[0] in args.models]
    rows = []
    for path in paths:
        print(f"  {os.path.basename(path)} ...", file=sys.stderr, flush=True)
        rows.append(bench_model(path, args.repeat, peer=not args.no_peer, march=args.march))
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ort_isa": ort_line, "rows": rows}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
