"""Everything bench/ measures, in one run, into one markdown file.

    python bench/run_all.py [--repeat N] [--no-device] [--no-peer] [--no-avx2]
                            [--no-compile-time] [MODEL ...]

Host latency (mtvm vs onnxruntime vs emx-onnx-cgen, bench/host.py) on this machine's
ISA and, where it has AVX-512, again as an AVX2 host (mtvm's C with -march=x86-64-v3,
onnxruntime limited to AVX2 in a child process: bench/ort_isa.py), the Cortex-M4
figures under QEMU icount (bench/device.py) and emx-onnx-cgen's beside them
(bench/peer_device.py) for every model of ../shared/models, the limits of issue 13
checked against those tables (bench/bounds.py), and the compile time of
light_resnet50 (bench/compile_time.py); prints the tables and writes them, with the
date, the machine and the compilers, to bench/results/<date>.md.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bounds  # noqa: E402
import compile_time  # noqa: E402
import device  # noqa: E402
import host  # noqa: E402
import ort_isa  # noqa: E402
import peer  # noqa: E402
import peer_device  # noqa: E402


def _first_line(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "not found"


def machine(march: str = "native", ort_isa: str = "") -> str:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import onnxruntime
    return "\n".join([
        f"- machine: {cpu}, {os.cpu_count()} logical cores (shared with other jobs: medians of "
        "repeated runs), " + platform.platform(),
        f"- host ISA: {_isa()}; mtvm's C built with -march={march}"
        + (" (the AVX2 level: AVX-512 paths off, as on an AVX2-only host)"
           if march == "x86-64-v3" else ""),
        f"- host compiler: {_first_line(['cc', '--version'])} (-O3 -march={march}, one thread)",
        f"- onnxruntime {onnxruntime.__version__} (one intra-op and inter-op thread)"
        + (f"; {ort_isa}" if ort_isa else ""),
        f"- peer: emx-onnx-cgen {_version('emx-onnx-cgen')} (its default options, built like "
        "mtvm's C)",
        f"- device compiler: {_first_line(['arm-none-eabi-gcc', '--version'])}",
        f"- emulator: {_first_line(['qemu-system-arm', '--version'])}",
    ])


def _isa() -> str:
    from mtvm.target import host_target
    t = host_target()
    return f"{t.name} ({t.describe()})"


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return "not installed"


def avx2_rows(paths: list[str], args) -> tuple[str, list[dict]]:
    """bench/host.py as an AVX2 host, in a child process: onnxruntime's AVX2 limit
    (CPUID faulting) holds for a whole process and must come before its import."""
    import json
    import tempfile
    with tempfile.TemporaryDirectory(prefix="mtvm-bench-avx2-") as tmp:
        out = os.path.join(tmp, "rows.json")
        names = [os.path.splitext(os.path.basename(q))[0] for q in paths]
        cmd = [sys.executable, os.path.join(HERE, "host.py"), "--march", "x86-64-v3",
               "--models-dir", args.models_dir, "--repeat", str(args.repeat), "--json", out,
               *(["--no-peer"] if args.no_peer else []), *names]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            data = json.load(f)
    return data["ort_isa"], data["rows"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*")
    p.add_argument("--models-dir", default=host.DEFAULT_MODELS)
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--board", default="mps2-an386")
    p.add_argument("--no-device", action="store_true")
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--no-compile-time", action="store_true")
    p.add_argument("--no-avx2", action="store_true", help="skip the AVX2 host table (taken "
                   "by default where the machine has AVX-512 and -march is native)")
    p.add_argument("--out", default=None, help="markdown file (default bench/results/<date>.md)")
    p.add_argument("--march", default="native", help="cc -march for mtvm's host C (x86-64-v3: "
                   "an AVX2 host)")
    host.add_ort_isa_option(p)
    args = p.parse_args(argv)
    ort_line = host.apply_ort_isa(args)
    import glob
    paths = sorted(glob.glob(os.path.join(args.models_dir, "*.onnx")))
    if args.models:
        paths = [q for q in paths if os.path.splitext(os.path.basename(q))[0] in args.models]
    now = datetime.datetime.now(datetime.timezone.utc)
    host_rows = []
    for path in paths:
        print(f"  host: {os.path.basename(path)} ...", file=sys.stderr, flush=True)
        host_rows.append(host.bench_model(path, args.repeat, peer=not args.no_peer,
                                          march=args.march))
    parts = [f"# mtvm benchmark, {now:%Y-%m-%d %H:%M} UTC", "", machine(args.march, ort_line), "",
             "## Host latency (ratio < 1: faster than onnxruntime)", "", host.table(host_rows)]
    checks = bounds.host_lines(host_rows, args.march) + bounds.arena_lines(host_rows, args.march)
    if args.march == "native" and "avx512f" in ort_isa.cpu_flags() and not args.no_avx2:
        print("  host, as an AVX2 host (a child process) ...", file=sys.stderr, flush=True)
        avx2_ort, rows = avx2_rows(paths, args)
        parts += ["", "## Host latency as an AVX2 host (-march=x86-64-v3)", "",
                  f"mtvm's C built with -march=x86-64-v3 (its AVX-512 paths off); {avx2_ort}.",
                  "", host.table(rows)]
        checks += bounds.host_lines(rows, "AVX2") + bounds.arena_lines(rows, "AVX2")
    if not args.no_device:
        kinds = bounds.kinds_of(paths)
        dev_rows = []
        for path in paths:
            print(f"  {args.board}: {os.path.basename(path)} ...", file=sys.stderr, flush=True)
            dev_rows.append(device.bench_model(path, args.board, device.DEFAULT_WORK))
        parts += ["", f"## Cortex-M ({args.board})", "", device.table(dev_rows, args.board)]
        checks += bounds.device_lines(dev_rows, kinds, args.board)
        if not args.no_peer and peer.available():
            peer_rows = []
            for path in paths:
                print(f"  {args.board}, beside emx-onnx-cgen: {os.path.basename(path)} ...",
                      file=sys.stderr, flush=True)
                peer_rows.append(peer_device.bench_model(path, args.board,
                                                         peer_device.DEFAULT_WORK))
            parts += ["", f"## Cortex-M ({args.board}) beside emx-onnx-cgen", "",
                      peer_device.table(peer_rows, args.board)]
            checks += bounds.peer_lines(peer_rows, kinds, args.board)
    parts += ["", "## The limits of issue 13", "", *checks]
    big = compile_time.default_model()
    if big and not args.no_compile_time:
        print("  compile time: light_resnet50 ...", file=sys.stderr, flush=True)
        parts += ["", "## Compile time", "", compile_time.markdown(compile_time.measure(big))]
    text = "\n".join(parts) + "\n"
    print(text)
    out = args.out or os.path.join(HERE, "results", f"{now:%Y-%m-%d}.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
