"""`mtvm validate MODEL --data SAMPLES`: the compiled model on a dataset against
onnxruntime (or a float reference model), on the host build or on a device
(docs/validation.md; the logic is mtvm.dataset_validation)."""
from __future__ import annotations

import os
import sys

import numpy as np

from ..errors import MtvmError
from .options import add_compile_options, compile_kwargs


def add_parser(sub) -> None:
    p = sub.add_parser(
        "validate", help="run a dataset through the compiled model and the reference: "
        "errors, cosine, quantization steps, top-1",
        description="Runs every sample through mtvm (the host build, or a device with "
        "--project/--board) and through the reference (onnxruntime with graph optimizations "
        "off, or --reference MODEL) and compares them per output. Exit code 1 when a "
        "tolerance fails. Against the same model the defaults are `mtvm run --validate`'s: "
        "quantized outputs within 1 step, float outputs within --rtol 1e-4 of their "
        "magnitude; against another model only the tolerances given are checked.")
    p.add_argument("model", help="ONNX file (the model mtvm compiles)")
    p.add_argument("--data", "-d", required=True, metavar="PATH",
                   help=".npz with one array per input (keyed by input name or in_0, in_1..) "
                   "with a leading sample axis, an .npy (one input), or a directory of "
                   ".npy/.npz files of one sample each")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project", metavar="DIR", help="run on this generated host-driven "
                       "project's device through a session (an emulated board is started)")
    where.add_argument("--board", help="generate and build a host-driven project for this "
                       "board in a temporary directory and run on it (see `mtvm boards`)")
    p.add_argument("--reference", metavar="MODEL", help="compare with this ONNX model instead "
                   "(e.g. the float model of an int8 one); then only the stated tolerances "
                   "are checked")
    p.add_argument("--labels", metavar="FILE", help="class index per sample (.npy/.npz, [N] or "
                   "one-hot [N, classes]): top-1 accuracy of mtvm and of the reference")
    p.add_argument("--label-output", metavar="NAME", help="the output of class scores for top-1 "
                   "(default: the first output)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N samples")
    p.add_argument("--report", action="append", default=[], metavar="FILE",
                   help="write the results to FILE.json or FILE.html (repeatable)")
    p.add_argument("--save-outputs", metavar="FILE.npz", help="save mtvm's outputs (one array "
                   "per output with the sample axis) and the reference's (reference/<name>)")
    t = p.add_argument_group("tolerances (exit code 1 when one fails)")
    t.add_argument("--max-steps", type=float, metavar="S", help="quantized outputs: at most S "
                   "quantization steps off on every element (default 1 against the same model)")
    t.add_argument("--rtol", type=float, metavar="R", help="float outputs: max abs error <= "
                   "R * max(|reference|, 1) on every sample (default 1e-4 against the same "
                   "model)")
    t.add_argument("--max-abs", type=float, metavar="A", help="max abs error over the dataset")
    t.add_argument("--max-rmse", type=float, metavar="E", help="RMSE over the dataset")
    t.add_argument("--max-l2r", type=float, metavar="E", help="mean relative L2 error")
    t.add_argument("--min-cosine", type=float, metavar="C", help="cosine similarity of every "
                   "sample")
    t.add_argument("--min-agreement", type=float, metavar="F", help="top-1 agreement with the "
                   "reference, a fraction (0.99)")
    t.add_argument("--min-accuracy", type=float, metavar="F", help="mtvm's top-1 accuracy, a "
                   "fraction (needs --labels)")
    t.add_argument("--host-exact", action="store_true", help="on a device: fail unless every "
                   "output is bit-identical to the host build's")
    d = p.add_argument_group("device")
    d.add_argument("--no-host-check", action="store_true", help="on a device: do not also run "
                   "the host build to compare with")
    d.add_argument("--port", help="talk to the device over this port (serial device, pty, "
                   "socket://host:port)")
    d.add_argument("--timeout", type=float, help="seconds to wait for each reply before "
                   "resending (default 1)")
    d.add_argument("--retries", type=int, help="resends before giving up (default 4)")
    add_compile_options(p)
    p.set_defaults(func=run)


def _tolerances(args, same_model: bool):
    from ..dataset_validation import Tolerances
    for name in ("max_steps", "rtol", "max_abs", "max_rmse", "max_l2r"):
        v = getattr(args, name)
        if v is not None and not v >= 0:
            raise MtvmError(f"--{name.replace('_', '-')} must be >= 0, got {v:g}")
    for name in ("min_agreement", "min_accuracy"):
        v = getattr(args, name)
        if v is not None and not 0 <= v <= 1:
            raise MtvmError(f"--{name.replace('_', '-')} is a fraction from 0 to 1, got {v:g}")
    return Tolerances.defaults(same_model, **{
        k: getattr(args, k) for k in ("max_steps", "rtol", "max_abs", "max_rmse", "max_l2r",
                                      "min_cosine", "min_agreement", "min_accuracy")})


def _check_files(args) -> None:
    """Paths that do not exist: one line before anything is compiled."""
    for flag, path in (("model", args.model), ("--reference", args.reference),
                       ("--labels", args.labels), ("--data", args.data)):
        if path and not os.path.exists(path):
            raise MtvmError(f"{flag} {path} not found")
    for path in args.report:
        if not path.endswith((".json", ".html", ".htm")):
            raise MtvmError(f"--report {path}: expected a path ending in .json or .html")
    if args.port and not (args.project or args.board):
        raise MtvmError("--port needs --project DIR or --board NAME (the host build has no port)")
    if args.limit is not None and args.limit < 1:
        raise MtvmError(f"--limit must be >= 1, got {args.limit}")


def _same_io(model_path: str, md: dict, where: str) -> None:
    """The project's model must be the ONNX model's: the same input and output
    names, and the same shapes where the ONNX file gives them."""
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}

    def shapes(values):
        return {v.name: [d.dim_value if d.HasField("dim_value") else None
                         for d in v.type.tensor_type.shape.dim] for v in values
                if v.name not in inits}
    ins, outs = shapes(m.graph.input), shapes(m.graph.output)
    ours = {t["name"]: t["shape"] for t in md["inputs"] + md["outputs"]}
    same = set(t["name"] for t in md["inputs"]) <= set(ins) and \
        [t["name"] for t in md["outputs"]] == list(outs)
    for name, dims in {**ins, **outs}.items():
        got = ours.get(name)
        if got is not None and (len(got) != len(dims) or
                                any(d is not None and d != g for d, g in zip(dims, got))):
            same = False
    if not same:
        fmt = lambda ts: ", ".join(f"{t['name']} {list(t['shape'])}" for t in ts)  # noqa: E731
        raise MtvmError(f"{where} runs a model with inputs {fmt(md['inputs'])} and outputs "
                        f"{fmt(md['outputs'])}, unlike {model_path} (is it the project's "
                        "model?)")


def run(args) -> int:
    from .. import dataset_validation as dv
    from .. import progress as _progress
    _check_files(args)
    tol = _tolerances(args, same_model=args.reference is None)
    kw = compile_kwargs(args)
    args.bound = kw["bind"]            # fed to the reference, which still takes them
    on_device = bool(args.project or args.board)
    if on_device:
        return _on_device(args, dv, _progress, tol, kw)
    host = dv.HostBuild(args.model, **kw)
    data = dv.load_dataset(args.data, host.inputs)
    return _validate(args, dv, data, _labels(args, dv, data), host, tol, None)


def _labels(args, dv, data):
    return dv.load_labels(args.labels, len(data)) if args.labels else None


def _validate(args, dv, data, labels, runner, tol, host, proj=None) -> int:
    result = dv.validate_dataset(args.model, data, runner, reference=args.reference,
                                 labels=labels, tolerances=tol, label_output=args.label_output,
                                 host=host, host_exact=args.host_exact, limit=args.limit,
                                 bound=args.bound)
    if proj is not None and result.device_seconds:
        from .run_cmd import device_clock
        result.timer_note = device_clock(proj)[1]
    print(result.summary())
    for path in args.report:
        print(f"wrote {dv.write_report(result, path)}")
    if args.save_outputs:
        arrays = dict(result.mtvm_outputs)
        arrays.update({f"reference/{k}": v for k, v in result.reference_outputs.items()})
        try:
            os.makedirs(os.path.dirname(os.path.abspath(args.save_outputs)), exist_ok=True)
            np.savez(args.save_outputs, **arrays)
        except OSError as e:
            raise MtvmError(f"cannot write {args.save_outputs}: {e.strerror or e}") from None
        print(f"wrote {args.save_outputs}")
    return 0 if result.ok else 1


def _on_device(args, dv, _progress, tol, kw) -> int:
    import tempfile
    from .. import project
    tmp = None
    quiet = lambda msg: None  # noqa: E731
    try:
        if args.board:
            tmp = tempfile.mkdtemp(prefix="mtvm-validate-")
            opts = dict(kw)
            module_name, profile = opts.pop("module_name"), opts.pop("profile")
            with _progress.waiting(f"generating a project for {args.board}"):
                proj = project.generate(args.model, board=args.board,
                                        out_dir=os.path.join(tmp, "project"),
                                        module_name=module_name, profile=profile,
                                        compile_options=opts, progress=quiet)
        else:
            proj = project.load(args.project)
            recorded = proj.info.get("model_path")
            if recorded and os.path.abspath(recorded) != os.path.abspath(args.model):
                print(f"note: {args.project} was generated from {recorded}", file=sys.stderr)
        if proj.kind != "host-driven":
            raise MtvmError(f"{proj.dir} is a {proj.kind} project: validation needs a "
                            "host-driven one (it runs each sample through a session)")
        _same_io(args.model, proj.metadata, proj.dir)
        # the data is checked before the (slow) build and the session
        data = dv.load_dataset(args.data, proj.metadata["inputs"])
        labels = _labels(args, dv, data)
        if args.board:
            proj.build(progress=quiet)
        host = None
        if not args.no_host_check:
            host_kw = {k: v for k, v in kw.items() if k != "target"}
            host = dv.HostBuild(args.model, **host_kw)
        where = args.port or ("the emulator" if proj.board.get("emulated")
                              else proj.board["name"])
        if args.board and not proj.board.get("emulated") and not args.port:
            proj.flash(progress=quiet)
        with _progress.waiting(f"connecting to {where}"):
            sess = proj.session(port=args.port, timeout=args.timeout, retries=args.retries)
        with sess:
            runner = dv.DeviceRun(sess, f"{proj.board['name']}")
            return _validate(args, dv, data, labels, runner, tol, host, proj)
    finally:
        if tmp is not None:
            import shutil
            try:
                project.load(os.path.join(tmp, "project")).stop()
            except Exception:
                pass
            shutil.rmtree(tmp, ignore_errors=True)
