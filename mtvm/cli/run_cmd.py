"""`mtvm run DIR`: run a project's model on its device through a session --
outputs, device-timed benchmark, per-operator profile, validation against
onnxruntime."""
from __future__ import annotations

import os
import sys

import numpy as np

from ..errors import MtvmError


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run a project's model on the device (host-driven session)",
                       description="Runs the model ON the device: inputs are sent over the "
                       "session, outputs read back. Times come from the device's timer.")
    p.add_argument("dir", help="project directory (see `mtvm project generate`)")
    p.add_argument("--input", "-i", action="append", default=[], metavar="[NAME=]FILE",
                   help="input data: .npy, .npz (keys: input names or in_0..), or raw bytes "
                   "(any other extension); repeat NAME=FILE for several inputs. "
                   "Default: seeded random inputs")
    p.add_argument("--output", "-o", metavar="FILE.npz", help="save the outputs")
    p.add_argument("--benchmark", type=int, metavar="N", help="time N back-to-back runs on "
                   "the device, --repeat times: mean/median/min/max per inference")
    p.add_argument("--repeat", type=int, default=3, help="benchmark repeats (default 3)")
    p.add_argument("--profile", nargs="?", const=10, type=_run_count, metavar="N",
                   help="per-operator device time, the median of N runs (default 10) per "
                   "kernel, with the ONNX nodes of each kernel (the project must be "
                   "generated with --profile)")
    p.add_argument("--profile-json", metavar="FILE", help="with --profile: also save the "
                   "per-kernel times as JSON (for `mtvm analyze --report DIR --profile-json "
                   "FILE`)")
    p.add_argument("--profile-plot", metavar="FILE.png", help="with --profile: also draw the "
                   "per-kernel times as a bar chart (needs matplotlib: pip install "
                   "mtvm[report])")
    p.add_argument("--validate", action="store_true", help="compare the device's outputs with "
                   "onnxruntime: max abs error, RMSE, cosine similarity")
    p.add_argument("--compare-layers", action="store_true", help="debug: build a copy of the "
                   "project whose every kernel output is readable (DIR/compare-layers), run it "
                   "on the device and compare each layer's output with the host build and "
                   "onnxruntime; names the first layer out of tolerance (docs/analysis.md)")
    p.add_argument("--float-io", action="store_true", help="a quantized model's inputs are "
                   "given as float and quantized here, its outputs dequantized to float "
                   "(scale and zero point from metadata.json)")
    p.add_argument("--port", help="talk to the device over this port instead (serial device, "
                   "pty, socket://host:port, tcp://host:port)")
    p.add_argument("--timeout", type=float, help="seconds to wait for each reply before "
                   "resending (default 1)")
    p.add_argument("--retries", type=int, help="resends before giving up (default 4)")
    p.add_argument("--seed", type=int, default=0, help="seed of random inputs (default 0)")
    p.set_defaults(func=run)


def _run_count(text: str) -> int:
    import argparse
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of runs, got {text!r} (write --profile after the project "
            "directory, or give the count: --profile 10)") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"the number of runs must be >= 1, got {n}")
    return n


# -- inputs -----------------------------------------------------------------------------------
def _load_file(path: str):
    if not os.path.exists(path):
        raise MtvmError(f"input file {path} not found")
    if path.endswith(".npy"):
        return np.load(path)
    if path.endswith(".npz"):
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    with open(path, "rb") as f:
        return f.read()


def _from_raw(spec, data: bytes, path: str) -> np.ndarray:
    if len(data) != spec.size_bytes:
        raise MtvmError(f"input \"{spec.name}\": raw file {path} has {len(data)} bytes, "
                        f"expected {spec.size_bytes} ({spec.dtype}{list(spec.shape)})")
    return np.frombuffer(data, np.dtype(spec.dtype).newbyteorder("<")).reshape(spec.shape)


def load_inputs(specs, args_inputs: list[str]) -> dict:
    """{input name: array} from --input options (checked later by the executor)."""
    out = {}
    names = [s.name for s in specs]
    by_name = {s.name: s for s in specs}
    for item in args_inputs:
        name, sep, path = item.partition("=")
        if not sep or name not in by_name:
            name, path = None, item
        data = _load_file(path)
        if isinstance(data, dict):
            for i, s in enumerate(specs):
                for key in (s.name, f"in_{i}"):
                    if key in data:
                        out[s.name] = data[key]
                        break
            if not any(k in data for s_i, s in enumerate(specs) for k in (s.name, f"in_{s_i}")):
                raise MtvmError(f"{path} has none of the model's inputs ({', '.join(names)}); "
                                f"its arrays: {', '.join(data)}")
            continue
        if name is None:
            missing = [s for s in specs if s.name not in out]
            if len(specs) != 1 and len(missing) != 1:
                raise MtvmError(f"the model has {len(specs)} inputs ({', '.join(names)}); "
                                f"give them as --input NAME=FILE or in one .npz")
            name = (missing or specs)[0].name
        spec = by_name[name]
        out[name] = _from_raw(spec, data, path) if isinstance(data, bytes) else data
    return out


def float_specs(specs) -> list:
    """With --float-io the quantized inputs are read (and made up) as float32."""
    import dataclasses
    from ..session.quant_io import is_quantized
    return [dataclasses.replace(s, dtype="float32", size_bytes=4 * int(np.prod(s.shape)))
            if is_quantized(s) else s for s in specs]


def random_inputs(specs, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for s in specs:
        dt = np.dtype(s.dtype)
        if dt.kind == "f":
            out[s.name] = rng.standard_normal(s.shape).astype(dt)
        elif dt.kind == "b":
            out[s.name] = rng.integers(0, 2, s.shape).astype(dt)
        else:
            lo, hi = max(np.iinfo(dt).min, -128), min(np.iinfo(dt).max, 127)
            out[s.name] = rng.integers(lo, hi + 1, s.shape).astype(dt)
    return out


# -- reports ----------------------------------------------------------------------------------
def print_outputs(outputs: dict) -> None:
    for name, a in outputs.items():
        text = np.array2string(a.ravel(), threshold=24, precision=6, max_line_width=100)
        print(f"output {name}: {a.dtype}{list(a.shape)}")
        print(f"  {text}")


def dequantize_steps(model_path: str) -> dict:
    """{output name: quantization step} for the float outputs made by
    DequantizeLinear (int8 models; the coarsest step of a per-axis scale)."""
    from ..validate import output_steps
    return {k: float(np.max(v.scale)) for k, v in output_steps(model_path).items()
            if not v.integer}


def run_standalone(proj) -> int:
    hook = getattr(proj.template, "run_standalone", None)
    if hook is None:
        raise MtvmError(f"{proj.dir} is a standalone project for board {proj.board['name']}: "
                        "it runs untethered (flash it and read its UART); generate a "
                        "host-driven project for `mtvm run`")
    p = hook(proj)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    return p.returncode


def run(args) -> int:
    from .. import project
    from ..session.executor import fmt_seconds
    proj = project.load(args.dir)
    for flag, given in (("--profile-json", args.profile_json),
                        ("--profile-plot", args.profile_plot)):
        if given and not args.profile:
            raise MtvmError(f"{flag} saves what --profile measures: give --profile too")
    if args.profile_plot:
        from ..report import require_matplotlib
        require_matplotlib()        # before the device runs, not after
    if args.compare_layers:         # its debug build is host-driven, whatever DIR's kind
        return compare_layers(proj, args)
    if proj.kind == "standalone":
        refused = [flag for flag, given in (("--input", args.input), ("-o", args.output),
                                            ("--validate", args.validate),
                                            ("--benchmark", args.benchmark),
                                            ("--profile", args.profile)) if given]
        if refused:
            raise MtvmError(f"{args.dir} is a standalone project: it runs its embedded sample "
                            f"and prints its own outputs, so {', '.join(refused)} cannot apply "
                            "(generate a host-driven project for them)")
        return run_standalone(proj)
    from .. import progress as _progress
    progress = _progress.Transfers()      # inputs/outputs over a slow link
    where = args.port or ("the emulator" if proj.board.get("emulated") else proj.board["name"])
    with _progress.waiting(f"connecting to {where}"):     # a port opening, a board booting
        sess = proj.session(port=args.port, timeout=args.timeout, retries=args.retries,
                            progress=progress)
    with sess:
        info = sess.info()
        print(info)
        ex = sess.executor
        status = 0
        want_run = bool(args.input or args.output or args.validate
                        or not (args.benchmark or args.profile))
        if want_run:
            specs = float_specs(info.inputs) if args.float_io else info.inputs
            if args.input:
                inputs = load_inputs(specs, args.input)
                missing = [s.name for s in info.inputs if s.name not in inputs]
                if missing:
                    raise MtvmError(f"no data for input(s) {', '.join(missing)}")
            else:
                inputs = random_inputs(specs, args.seed)
                print(f"(no --input: random inputs, seed {args.seed})")
            outputs = ex.run(inputs, float_io=args.float_io)
            tps = info.ticks_per_second
            print(f"ran on {info.board} in {fmt_seconds(ex.last_run_ticks / tps)} "
                  f"({ex.last_run_ticks} ticks at {tps} Hz, device timer)")
            print_outputs(outputs)
            if args.output:
                np.savez(args.output, **outputs)
                print(f"wrote {args.output}")
            if args.validate:
                status |= validate(proj, inputs, outputs,
                                   info.inputs + info.outputs if args.float_io else None)
        if args.benchmark:
            res = ex.benchmark(number=args.benchmark, repeat=args.repeat)
            print(f"benchmark: {res}")
            timing = getattr(proj.template, "timing", None)
            if timing is not None:
                note = timing(proj, res)   # the hook may convert the result (QEMU icount)
                if note:
                    print(f"  timer: {note}")
        if args.profile:
            from ..session.executor import profile_warmup
            prof = ex.profile(runs=args.profile, warmup=profile_warmup(proj.board))
            print_profile(proj, prof)
            if args.profile_json:
                save_profile(prof, args.profile_json)
            if args.profile_plot:
                from ..report import plot_profile
                from ..report.data import profile_json
                plot_profile(proj.metadata, profile_json(prof), args.profile_plot)
                print(f"wrote {args.profile_plot}")
        return status


def compare_layers(proj, args) -> int:
    from types import SimpleNamespace
    from .. import compare_layers as cl
    others = [flag for flag, given in (("-o", args.output), ("--validate", args.validate),
                                       ("--benchmark", args.benchmark),
                                       ("--profile", args.profile),
                                       ("--float-io", args.float_io)) if given]
    if others:
        raise MtvmError(f"--compare-layers runs its own debug build: {', '.join(others)} "
                        "cannot go with it")
    specs = [SimpleNamespace(name=t["name"], dtype=t["dtype"], shape=tuple(t["shape"]),
                             size_bytes=t["size_bytes"]) for t in proj.metadata["inputs"]]
    if args.input:
        inputs = load_inputs(specs, args.input)
        missing = [s.name for s in specs if s.name not in inputs]
        if missing:
            raise MtvmError(f"no data for input(s) {', '.join(missing)}")
        inputs = {s.name: _as_input(s, inputs[s.name]) for s in specs}
    else:
        inputs = random_inputs(specs, args.seed)
        print(f"(no --input: random inputs, seed {args.seed})")
    return cl.run(proj, inputs, port=args.port, timeout=args.timeout, retries=args.retries)


def _as_input(spec, data) -> np.ndarray:
    """data as the input's dtype and shape: float to float, integers to float or
    to an integer type that holds their values, dims of size 1 as the executor
    accepts them; float for an integer input, or another size, is refused."""
    a, dt = np.asarray(data), np.dtype(spec.dtype)
    ok = a.dtype == dt or (dt.kind == "f" and a.dtype.kind in "fiu")
    if not ok and dt.kind in "iu" and a.dtype.kind in "iu":
        info = np.iinfo(dt)
        ok = a.size == 0 or (int(a.min()) >= info.min and int(a.max()) <= info.max)
    if not ok:
        raise MtvmError(f"input \"{spec.name}\": {a.dtype}{list(a.shape)} given, the model "
                        f"takes {dt}{list(spec.shape)}")
    if a.size != int(np.prod(spec.shape)):
        raise MtvmError(f"input \"{spec.name}\": shape {list(a.shape)} given, the model takes "
                        f"{list(spec.shape)}")
    return a.astype(dt, copy=False).reshape(spec.shape)


def save_profile(prof, path: str) -> None:
    import json
    from ..report.data import profile_json
    with open(path, "w", encoding="utf-8") as f:
        json.dump(profile_json(prof), f, indent=1)
    print(f"wrote {path}")


def device_clock(proj) -> tuple[float | None, str]:
    """(instructions per second of device time, or None; a note on what the
    device's times mean). Under QEMU with -icount shift=0 every instruction
    takes 1 ns of virtual time, so times convert to instructions exactly;
    without icount the emulated timer follows the host's clock."""
    if not proj.board.get("emulated"):
        return None, ""
    state = proj.template_data.get("qemu_state")
    inst = None
    if state:
        from ..firmware import qemu
        try:
            inst = qemu.load_state(proj.path(state))
        except Exception:
            inst = None
    if inst is not None and getattr(inst, "icount", False) and inst.alive():
        return 1e9, ("QEMU -icount shift=0: 1 instruction = 1 ns of virtual time, so times "
                     "are instruction counts")
    return None, ("QEMU without icount: the timer follows the host's clock, so times and "
                  "rates mean nothing for the board; flash with MTVM_QEMU_ICOUNT=1 "
                  "(`mtvm project flash`) to count instructions")


def print_profile(proj, prof) -> None:
    from ..session.executor import fmt_seconds
    ips, note = device_clock(proj)
    prof.instructions_per_second = ips
    prof.time_is_host_clock = bool(note) and ips is None
    tps = prof.ticks_per_second
    total = (f"{prof.instructions(prof.total_ticks):,} instructions" if ips and tps else
             fmt_seconds(prof.total_ticks / tps) if tps else f"{prof.total_ticks} ticks")
    print(f"profile: median of {prof.runs} run(s) per kernel ({tps} Hz ticks, total {total}; "
          "spread = (max - min) / median):")
    print(prof.table())
    if note:
        print(f"  timer: {note}")


def validate(proj, inputs: dict, outputs: dict, float_io_specs=None) -> int:
    """Device outputs vs a reference run of the ONNX model on the same inputs
    (mtvm.validate: onnxruntime without graph optimizations, or the ONNX
    reference evaluator). Quantized outputs are compared in quantization steps
    and pass within one step; with --float-io (float_io_specs: the tensors)
    the reference gets the quantized inputs and its outputs are dequantized
    like the device's."""
    from ..session import quant_io
    from ..validate import validate_outputs
    float_io = {s.name: s.quantization for s in float_io_specs or []
                if quant_io.is_quantized(s)}
    model_path = proj.info.get("model_path")
    if not model_path or not os.path.exists(model_path):
        raise MtvmError(f"--validate needs the ONNX model; {model_path or 'no path'} recorded in "
                        f"{proj.dir}/mtvm_project.json is not there")
    ref, checks = validate_outputs(model_path, inputs, outputs, float_io)
    print(f"validation against {ref.name}:")
    for c in checks:
        print(f"  {c.describe()}")
    return 0 if all(c.ok for c in checks) else 1
