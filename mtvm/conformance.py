"""The ONNX backend conformance runner.

    python -m mtvm.conformance [--filter REGEX] [--jobs N] [--report docs/operators.md]
                               [--update] [--sanitize] [--suite node,pytorch-converted,...]

Walks the node test cases of the installed `onnx` package
(`onnx.backend.test.case.node.collect_testcases`) and the model directories
under `onnx/backend/test/data/` (pytorch-converted, pytorch-operator, simple,
light), compiles each case with mtvm, runs the generated C on the host and
compares with the stored outputs (the case's rtol/atol, 1e-3/1e-7 by default).

Speed: cases are processed in batches. A batch is one worker subprocess that
compiles its cases to C (each with its own module name, so symbols do not
clash), builds all of them with one C compiler invocation into one shared
library, loads it and runs every case. Batches run `--jobs` at a time. A case
that crashes its worker (a segfault) is recorded as such and the batch's
remaining cases are re-run in a fresh worker, so one crash loses nothing else.

Graph inputs that feed a "shape-like" operand (Reshape's shape, Slice's
starts/ends, TopK's k, ...; the table SHAPE_INPUTS) are bound as compile-time
constants (`mtvm compile --bind`), and such cases are reported as "bound".

--sanitize builds each batch as an executable with -fsanitize=address,undefined
instead and runs every case as its own process.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from .host_runner import HARNESS_PRELUDE, call_run

DATA_SUITES = ("pytorch-converted", "pytorch-operator", "simple", "light")
ALL_SUITES = ("node",) + DATA_SUITES
NODE_TOTAL = 1884

# Input positions of each op that are shapes, axes, counts or parameters the
# compiler needs at compile time: a graph input feeding one of them is bound
# as a constant. (Reduce* take axes as input 1 from opset 13/18.)
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4),
    "ConstantOfShape": (0,), "Range": (0, 1, 2), "TopK": (1,), "Resize": (1, 2, 3),
    "Upsample": (1,), "OneHot": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,),
    "Pad": (1, 2, 3), "CumSum": (1,), "CumProd": (1,), "Dropout": (1, 2), "Trilu": (1,),
    "Clip": (1, 2), "NonMaxSuppression": (2, 3, 4), "DFT": (1, 2), "STFT": (1, 3),
    "HannWindow": (0,), "HammingWindow": (0,), "BlackmanWindow": (0,),
    "MelWeightMatrix": (0, 1, 2, 3, 4), "CenterCropPad": (1,), "Col2Im": (1, 2),
    "MaxUnpool": (2,), "AffineGrid": (1,), "Compress": (1,), "Loop": (0, 1),
    "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
    "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogSum": (1,),
    "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,),
}

# Quantized operators: scales, zero points and weights are initializers in a
# deployed model (mtvm compiles them into integer kernels); the node tests pass
# them as graph inputs, so they are bound too.
SHAPE_INPUTS.update({
    "QLinearMatMul": (1, 2, 3, 4, 5, 6, 7), "QLinearConv": (1, 2, 3, 4, 5, 6, 7, 8),
    "ConvInteger": (1, 2, 3), "MatMulInteger": (1, 2, 3),
})

# Cases whose stored output (from onnx.reference) differs from onnxruntime's, where mtvm
# computes what onnxruntime (and the exporting framework) does: shown with the failure.
REFERENCE_DIFFERS = {
    name: "onnx.reference maps align_corners through scale x length (2.4 for 4 x 0.6) "
          "where the spec, onnxruntime and PyTorch take the integer output length (2): "
          "mtvm computes onnxruntime's values"
    for name in ("test_resize_downsample_scales_linear_align_corners",
                 "test_resize_downsample_scales_cubic_align_corners")}

_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


@dataclass
class Case:
    name: str
    suite: str
    model: bytes                      # serialized ModelProto
    inputs: list                      # [np.ndarray | other] in graph-input order
    outputs: list                     # expected
    rtol: float = 1e-3
    atol: float = 1e-7
    op: str = ""                      # the operator the case tests
    opset: int = 0
    bound: list[str] = field(default_factory=list)
    skip: str = ""                    # out-of-scope reason found before compiling


@dataclass
class Result:
    name: str
    suite: str
    op: str
    opset: int
    status: str                       # pass | fail | unsupported | crash | skip
    reason: str = ""
    bound: bool = False
    dtypes: list[str] = field(default_factory=list)
    seconds: float = 0.0


# -- collecting cases ----------------------------------------------------------------

def _to_array(x):
    import onnx
    from onnx import numpy_helper
    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, np.generic):
        return np.asarray(x)
    return x          # list (sequence), dict (map), None (optional): left as is


def _load_pb(path):
    import onnx
    from onnx import numpy_helper
    data = open(path, "rb").read()
    t = onnx.TensorProto()
    try:
        t.ParseFromString(data)
        if t.data_type or t.dims:
            return numpy_helper.to_array(t)
    except Exception:
        pass
    s = onnx.SequenceProto()
    try:
        s.ParseFromString(data)
        return [numpy_helper.to_array(e) for e in s.tensor_values]
    except Exception:
        return None


def _opset(model) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 0


def _main_op(model, name: str, names_to_op: dict) -> str:
    base = _EXPANDED.sub("", name)
    if base != name and base in names_to_op:
        return names_to_op[base]
    ops = [n.op_type for n in model.graph.node if n.op_type != "Constant"]
    if not ops:
        return "Constant"
    if len(set(ops)) == 1 or len(model.graph.node) <= 2:
        return ops[-1]
    return collections.Counter(ops).most_common(1)[0][0]


def _out_of_scope(model, inputs, outputs) -> str:
    """A one-line reason when the case uses types mtvm leaves out (before compiling)."""
    for vi in list(model.graph.input) + list(model.graph.output):
        t = vi.type
        kind = t.WhichOneof("value")
        if kind == "sequence_type":
            return "sequence types: out of scope for MCU (no dynamic containers)"
        if kind == "optional_type":
            return "optional types: out of scope for MCU"
        if kind == "map_type":
            return "map types: out of scope for MCU"
        if kind == "sparse_tensor_type":
            return "sparse tensors: out of scope"
        if kind == "tensor_type" and t.tensor_type.elem_type == 8:
            return "string tensors: out of scope for MCU"
    for x in list(inputs) + list(outputs):
        if isinstance(x, list):
            return "sequence types: out of scope for MCU (no dynamic containers)"
        if x is None:
            return "optional types: out of scope for MCU"
        if isinstance(x, np.ndarray) and x.dtype == object:
            return "string tensors: out of scope for MCU"
    for n in model.graph.node:
        if n.op_type.startswith("Sequence") or n.op_type in ("SplitToSequence",
                                                             "ConcatFromSequence"):
            return "sequence types: out of scope for MCU (no dynamic containers)"
        if n.op_type.startswith("Optional"):
            return "optional types: out of scope for MCU"
    return ""


def _bound_inputs(model) -> list[str]:
    """Graph inputs that decide a shape-like operand (SHAPE_INPUTS): directly, or
    through the nodes computing it (an expanded function's Range limit, Pad's
    pads...). The walk stops at Shape/Size, whose input's values do not matter."""
    inits = {i.name for i in model.graph.initializer}
    gin = [i.name for i in model.graph.input if i.name not in inits]
    nodes = []

    def flatten(graph):      # subgraphs (If branches) read outer names directly
        for n in graph.node:
            nodes.append(n)
            for a in n.attribute:
                if a.type == a.GRAPH:
                    flatten(a.g)
    flatten(model.graph)
    producer = {o: n for n in nodes for o in n.output}
    todo = [n.input[pos] for n in nodes
            for pos in SHAPE_INPUTS.get(n.op_type, ()) if pos < len(n.input) and n.input[pos]]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        p = producer.get(name)
        if p is not None and p.op_type not in ("Shape", "Size"):
            todo.extend(i for i in p.input if i)
            for a in p.attribute:             # an If's outputs depend on its branches
                if a.type == a.GRAPH:
                    todo.extend(o.name for o in a.g.output)
    return [n for n in gin if n in seen]


def _finish(case: Case, model) -> Case:
    case.opset = _opset(model)
    case.skip = _out_of_scope(model, case.inputs, case.outputs)
    if not case.skip:
        case.bound = _bound_inputs(model)
    return case


def _node_testcases():
    """collect_testcases(None), cached on disk per onnx version (it takes ~15 s)."""
    import warnings

    import onnx
    from onnx.backend.test.case.node import collect_testcases

    from .host_runner import cache_dir
    path = os.path.join(cache_dir(), f"onnx-node-cases-{onnx.__version__}.pkl")
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                return pickle.load(f)
        except Exception:  # noqa: BLE001  (a stale or partial cache is rebuilt)
            pass
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        tcs = collect_testcases(None)
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "wb") as f:
        pickle.dump(tcs, f)
    os.replace(tmp, path)
    return tcs


def collect(suites=ALL_SUITES, pattern: str | None = None) -> list[Case]:
    import warnings

    import onnx
    rx = re.compile(pattern) if pattern else None
    cases: list[Case] = []
    if "node" in suites:
        tcs = _node_testcases()
        names_to_op = {}
        for tc in tcs:
            if not _EXPANDED.search(tc.name):
                names_to_op[tc.name] = _main_op(tc.model, tc.name, {})
        for tc in tcs:
            if rx and not rx.search(tc.name):
                continue
            ins, outs = tc.data_sets[0]
            case = Case(tc.name, "node", tc.model.SerializeToString(),
                        [_to_array(x) for x in ins], [_to_array(x) for x in outs],
                        tc.rtol, tc.atol, _main_op(tc.model, tc.name, names_to_op))
            cases.append(_finish(case, tc.model))
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    for suite in DATA_SUITES:
        if suite not in suites:
            continue
        d = os.path.join(root, suite)
        if not os.path.isdir(d):
            continue
        for entry in sorted(os.listdir(d)):
            if suite == "light":
                if not entry.endswith(".onnx"):
                    continue
                name = "test_" + entry[:-5]
                if rx and not rx.search(name):
                    continue
                cases.append(_light_case(os.path.join(d, entry), name))
                continue
            name = entry
            if rx and not rx.search(name):
                continue
            mdir = os.path.join(d, entry)
            model = onnx.load(os.path.join(mdir, "model.onnx"))
            sets = sorted(s for s in os.listdir(mdir) if s.startswith("test_data_set_"))
            ins, outs = [], []
            if sets:
                sd = os.path.join(mdir, sets[0])
                files = sorted(os.listdir(sd), key=lambda f: (f.split("_")[0],
                                                              int(re.sub(r"\D", "", f) or 0)))
                ins = [_load_pb(os.path.join(sd, f)) for f in files if f.startswith("input_")]
                outs = [_load_pb(os.path.join(sd, f)) for f in files if f.startswith("output_")]
            case = Case(name, suite, model.SerializeToString(), ins, outs,
                        op=_main_op(model, name, {}))
            cases.append(_finish(case, model))
    return cases


def _light_case(path: str, name: str) -> Case:
    """A light_* model: inputs as onnx.backend.test.runner's generate_dummy_data
    (arange / n), expected output from the stored light_*_output_0.pb."""
    import onnx
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    ins = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                      for d in vi.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        ins.append((np.arange(n).reshape(shape) / n).astype(np.float32))
    outs = [_load_pb(path[:-5] + f"_output_{i}.pb") for i in range(len(model.graph.output))]
    case = Case(name, "light", model.SerializeToString(), ins, outs, op="(model)")
    return _finish(case, model)


# -- one batch, inside a worker process -----------------------------------------------------

def _short(e: BaseException) -> str:
    """One line from an exception: its first line, without the list of supported ops."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    text = re.sub(r"\. Supported: .*", "", text)
    text = re.sub(r"^[^:]*\.onnx: |^[\w.-]+: (?=node)", "", text)
    if not isinstance(e, __import__("mtvm").errors.MtvmError):
        text = f"{type(e).__name__}: {text}"
    return text[:200]


def compare(got: list, expected: list, rtol: float, atol: float) -> str:
    """'' when the outputs match, else a one-line reason."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(got, expected)):
        a, e = np.asarray(a), np.asarray(e)
        if a.dtype != e.dtype:
            return f"output {i}: dtype {a.dtype.name}, expected {e.dtype.name}"
        if a.shape != e.shape:
            return f"output {i}: shape {list(a.shape)}, expected {list(e.shape)}"
        if e.dtype.kind == "f" or e.dtype.name in ("bfloat16", "float4_e2m1fn") \
                or e.dtype.name.startswith("float8"):
            a64, e64 = a.astype(np.float64), e.astype(np.float64)
            bad = ~np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
            if bad.any():
                j = int(np.argmax(bad))
                return (f"output {i}: {int(bad.sum())} of {e.size} values differ "
                        f"(e.g. [{j}] {a64.ravel()[j]:.6g} vs {e64.ravel()[j]:.6g})")
        elif not np.array_equal(a, e):
            bad = a != e
            j = int(np.argmax(bad))
            return (f"output {i}: {int(bad.sum())} of {e.size} values differ "
                    f"(e.g. [{j}] {a.ravel()[j]} vs {e.ravel()[j]})")
    return ""


def _compile_case(case: Case, mod: str, backend: str = "c"):
    """-> (CompiledModel, runtime inputs) for a case; raises on unsupported."""
    import onnx

    import mtvm
    model = onnx.load_from_string(case.model)   # older opsets: the frontend converts
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    values = dict(zip(names, case.inputs))
    bind = {n: values[n] for n in case.bound if n in values}
    cm = mtvm.compile(model, module_name=mod, bind=bind, backend=backend)
    runtime = [values[n] for n in names if n not in bind]
    return cm, runtime


def _dtypes(cm) -> list[str]:
    g = cm.source_graph
    names = set(g.inputs) | set(g.outputs)
    for n in g.nodes:
        names.update(x for x in n.inputs + n.outputs if x)
    return sorted({np.dtype(g.tensors[n].dtype).name for n in names if n in g.tensors})


def _write_sources(cm, root: str) -> list[str]:
    srcs = []
    for rel, text in cm.sources.items():
        full = os.path.join(root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
        if rel.endswith(".c"):
            srcs.append(full)
    return srcs


def _build_objects(entries: dict, tmp: str, flags: list[str]) -> dict[str, str]:
    """Compile every entry's sources with one compiler invocation; returns
    {mod: error} for those that do not compile (their objects are dropped)."""
    from .host_runner import _cc
    srcs, owner = [], {}
    for mod, (cm, _) in entries.items():
        root = os.path.join(tmp, mod)
        for s in _write_sources(cm, root):
            srcs.append(s)
            owner[s] = mod
    errors: dict[str, str] = {}
    if not srcs:
        return errors
    objdir = os.path.join(tmp, "obj")
    os.makedirs(objdir, exist_ok=True)
    incs = []
    for mod in entries:
        incs += ["-I", os.path.join(tmp, mod, "codegen/host/include")]
    p = subprocess.run([_cc(), "-c"] + flags + incs + [os.path.abspath(s) for s in srcs],
                       capture_output=True, text=True, cwd=objdir)
    if p.returncode != 0:
        for line in p.stderr.splitlines():
            m = re.match(r"(/[^:]+\.c):\d+:\d+: error: (.*)", line)
            if m and m.group(1) in owner and owner[m.group(1)] not in errors:
                errors[owner[m.group(1)]] = "C compile error: " + m.group(2)[:160]
        if not errors:   # could not attribute the failure: build one module at a time
            for mod in entries:
                mine = [s for s in srcs if owner[s] == mod]
                q = subprocess.run([_cc(), "-c"] + flags + incs + mine, capture_output=True,
                                   text=True, cwd=objdir)
                if q.returncode != 0:
                    first = next((ln for ln in q.stderr.splitlines() if "error" in ln),
                                 q.stderr.strip()[:160])
                    errors[mod] = "C compile error: " + first[-160:]
    return errors


def _objects(entries: dict, tmp: str) -> list[str]:
    objs = []
    for mod, (cm, _) in entries.items():
        for rel in cm.sources:
            if rel.endswith(".c"):
                objs.append(os.path.join(tmp, "obj", os.path.basename(rel)[:-2] + ".o"))
    return objs


def _cdef(cm) -> str:
    from .host_runner import _cdef as host_cdef
    return host_cdef(cm)


HARNESS_HEAD = "/* Conformance harness: argv[1] selects the case; then input files, " \
    "output files. */" + HARNESS_PRELUDE


def _harness(entries: dict) -> str:
    parts = [HARNESS_HEAD]
    calls = []
    for mod, (cm, _) in entries.items():
        md = cm.metadata
        parts.append(f'#include "tvmgen_{mod}.h"')
        body = [f"static int run_{mod}(char** argv) {{",
                f"    struct tvmgen_{mod}_inputs in;", f"    struct tvmgen_{mod}_outputs out;",
                "    int a = 0;", "    int32_t status;"]
        body += [f"    in.{s['c_name']} = load(argv[a++], {s['size_bytes']});"
                 for s in md["inputs"]]
        body += [f"    out.{s['c_name']} = calloc({max(s['size_bytes'], 1)}, 1);"
                 for s in md["outputs"]]
        body += [f"    status = tvmgen_{mod}_run(&in, &out);",
                 "    if (status != 0) { fprintf(stderr, \"status %d\\n\", (int)status); "
                 "return 3; }"]
        body += [f"    save(argv[a++], out.{s['c_name']}, {s['size_bytes']});"
                 for s in md["outputs"]]
        body += [f"    free(in.{s['c_name']});" for s in md["inputs"]]
        body += [f"    free(out.{s['c_name']});" for s in md["outputs"]]
        body += ["    (void)a;", "    return 0;", "}"]
        parts.append("\n".join(body))
        calls.append(f'    if (!strcmp(argv[1], "{mod}")) return run_{mod}(argv + 2);')
    parts.append("int main(int argc, char** argv) {\n    if (argc < 2) return 1;\n"
                 + "\n".join(calls) + "\n    return 1;\n}\n")
    return "\n".join(parts)


def _ensure_arrays(cm, runtime):
    from .host_runner import normalize_inputs
    return normalize_inputs(cm, runtime)


def _emitter(log):
    """emit(result): one JSON line to the batch's log, flushed (a crash loses none)."""
    def emit(res: Result):
        log.write(json.dumps(res.__dict__) + "\n")
        log.flush()
    return emit


def _compiled(case: Case, mod: str, backend: str, emit):
    """(CompiledModel, runtime inputs, its Result so far, start time) of a case
    that compiles; None when its result is already emitted (out of scope, or
    the compile failed: the reason recorded)."""
    t0 = time.time()
    res = Result(case.name, case.suite, case.op, case.opset, "unsupported",
                 bound=bool(case.bound))
    if case.skip:
        res.status, res.reason = "skip", case.skip
        emit(res)
        return None
    try:
        with np.errstate(all="ignore"):
            cm, runtime = _compile_case(case, mod, backend)
        res.dtypes = _dtypes(cm)
        return cm, runtime, res, t0
    except Exception as e:   # noqa: BLE001  (every failure is a recorded result)
        res.reason = _short(e)
        if os.environ.get("MTVM_CONFORMANCE_TRACE"):
            traceback.print_exc()
        res.seconds = time.time() - t0
        emit(res)
        return None


def run_batch(cases: list[Case], tmp: str, log, sanitize: bool = False) -> None:
    """Compile, build and run `cases`; one JSON line per case to `log` (a
    'start' line is written before each case is run, so a crash is attributable)."""
    import warnings
    warnings.simplefilter("ignore")
    from .host_runner import WARN_FLAGS, SANITIZE_FLAGS, _cc

    emit = _emitter(log)
    entries, meta = {}, {}
    for i, case in enumerate(cases):
        mod = f"c{i:03d}"
        compiled = _compiled(case, mod, "c", emit)
        if compiled is not None:
            cm, runtime, res, t0 = compiled
            entries[mod] = (cm, runtime)
            meta[mod] = (case, res, t0)
    if not entries:
        return
    if sanitize:
        flags = ["-O1"] + SANITIZE_FLAGS + WARN_FLAGS[1:] + ["-std=c11"]
    else:
        flags = ["-O1", "-fPIC"] + WARN_FLAGS
    errors = _build_objects(entries, tmp, flags)
    for mod, err in errors.items():
        case, res, t0 = meta[mod]
        res.status, res.reason = "fail", err
        emit(res)
        del entries[mod]
    if not entries:
        return
    objs = _objects(entries, tmp)
    if sanitize:
        harness = os.path.join(tmp, "harness.c")
        with open(harness, "w") as f:
            f.write(_harness(entries))
        incs = [x for mod in entries for x in ("-I", os.path.join(tmp, mod,
                                                                  "codegen/host/include"))]
        exe = os.path.join(tmp, "batch_test")
        p = subprocess.run([_cc()] + flags + incs + [harness] + objs + ["-o", exe, "-lm"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("linking the sanitized batch failed: " + p.stderr[-2000:])
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    else:
        so = os.path.join(tmp, "batch.so")
        p = subprocess.run([_cc(), "-shared", "-o", so] + objs + ["-lm"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("linking the batch failed: " + p.stderr[-2000:])
        import cffi
    for mod, (cm, runtime) in entries.items():
        case, res, t0 = meta[mod]
        log.write(json.dumps({"start": case.name}) + "\n")
        log.flush()
        try:
            arrays = _ensure_arrays(cm, runtime)
            if sanitize:
                got = _run_exe(exe, mod, cm, arrays, tmp, env)
            else:
                ffi = cffi.FFI()
                ffi.cdef(_cdef(cm))
                lib = ffi.dlopen(so)
                got = _run_lib(ffi, lib, cm, arrays)
            reason = compare(got, case.outputs, case.rtol, case.atol)
            res.status, res.reason = ("fail", reason) if reason else ("pass", "")
        except Exception as e:   # noqa: BLE001
            res.status, res.reason = "fail", _short(e)
        res.seconds = time.time() - t0
        emit(res)


def run_batch_llvm(cases: list[Case], log) -> None:
    """The LLVM backend: compile each case with backend="llvm" and run it in
    this process through LLVM's JIT (no C compiler); one JSON line per case."""
    import warnings
    warnings.simplefilter("ignore")

    emit = _emitter(log)
    for i, case in enumerate(cases):
        compiled = _compiled(case, f"c{i:03d}", "llvm", emit)
        if compiled is None:
            continue
        cm, runtime, res, t0 = compiled
        log.write(json.dumps({"start": case.name}) + "\n")
        log.flush()
        try:
            outs = cm.run_host(_ensure_arrays(cm, runtime))
            got = _as_onnx_dtypes(cm, [outs[o["name"]] for o in cm.metadata["outputs"]])
            reason = compare(got, case.outputs, case.rtol, case.atol)
            res.status, res.reason = ("fail", reason) if reason else ("pass", "")
        except Exception as e:   # noqa: BLE001
            res.status, res.reason = "fail", _short(e)
        res.seconds = time.time() - t0
        emit(res)


def _run_lib(ffi, lib, cm, arrays) -> list:
    return _as_onnx_dtypes(cm, call_run(ffi, lib, cm, arrays))


def _as_onnx_dtypes(cm, outs) -> list:
    """Outputs in the dtype the ONNX graph declares (bool is stored as uint8)."""
    res = []
    for name, a in zip(cm.source_graph.outputs, outs):
        dt = np.dtype(cm.source_graph.tensors[name].dtype)
        res.append(a.view(dt) if a.dtype != dt and a.dtype.itemsize == dt.itemsize else a)
    return res


def _run_exe(exe, mod, cm, arrays, tmp, env) -> list:
    md = cm.metadata
    argv = [exe, mod]
    for i, a in enumerate(arrays):
        p = os.path.join(tmp, f"{mod}_in{i}.bin")
        a.tofile(p)
        argv.append(p)
    outs = [os.path.join(tmp, f"{mod}_out{i}.bin") for i in range(len(md["outputs"]))]
    p = subprocess.run(argv + outs, capture_output=True, text=True, env=env, timeout=120)
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.splitlines() if "runtime error" in ln or "ERROR" in ln]
        raise RuntimeError(f"sanitizer/exit {p.returncode}: "
                           + (lines[0] if lines else p.stderr.strip()[-200:]))
    got = [np.fromfile(path, s["dtype"]).reshape(s["shape"])
           for s, path in zip(md["outputs"], outs)]
    return _as_onnx_dtypes(cm, got)


def worker_main(batch_path: str, log_path: str, sanitize: bool, backend: str = "c") -> int:
    with open(batch_path, "rb") as f:
        cases = pickle.load(f)
    tmp = tempfile.mkdtemp(prefix="mtvm-conf-")
    try:
        with open(log_path, "a") as log:
            if backend == "llvm":
                run_batch_llvm(cases, log)
            else:
                run_batch(cases, tmp, log, sanitize)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


# -- driving the batches ----------------------------------------------------------------

def _read_log(path: str):
    done, started = {}, None
    if not os.path.exists(path):
        return done, started
    with open(path) as f:
        for line in f:
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "start" in d:
                started = d["start"]
            else:
                done[d["name"]] = Result(**d)
                if started == d["name"]:
                    started = None
    return done, started


def run_cases_isolated(cases: list[Case], workdir: str, sanitize: bool = False,
                       timeout: float = 600, backend: str = "c") -> list[Result]:
    """Run `cases` in worker subprocesses until each has a result; a case that
    kills its worker is recorded as a crash and the others are re-run."""
    results: dict[str, Result] = {}
    todo = list(cases)
    attempt = 0
    while todo:
        attempt += 1
        fd, batch = tempfile.mkstemp(suffix=".pkl", dir=workdir)
        log = batch[:-4] + ".jsonl"
        with os.fdopen(fd, "wb") as f:
            pickle.dump(todo, f)
        cmd = [sys.executable, "-m", "mtvm.conformance", "--worker", batch, log]
        if sanitize:
            cmd.append("--sanitize")
        if backend != "c":
            cmd += ["--backend", backend]
        err = ""
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            rc = p.returncode
            err = p.stderr
        except subprocess.TimeoutExpired:
            rc = "timeout"
        done, started = _read_log(log)
        results.update(done)
        rest = [c for c in todo if c.name not in results]
        if rest and rc != 0:
            victim = started or rest[0].name
            if started is None:
                # Died before running anything (compile / link stage).
                tail = err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
                if len(rest) > 1:   # isolate the culprit: one case at a time
                    for c in rest:
                        results.update({r.name: r for r in
                                        run_cases_isolated([c], workdir, sanitize, timeout,
                                                           backend)})
                    rest = []
                    continue
                reason = f"worker died before running ({tail[:150]})"
            else:
                reason = ("timed out" if rc == "timeout" else
                          f"crashed the process (signal {-rc})" if isinstance(rc, int) and rc < 0
                          else f"worker exited with {rc}")
            c = next(c for c in rest if c.name == victim)
            results[victim] = Result(c.name, c.suite, c.op, c.opset, "crash", reason,
                                     bound=bool(c.bound))
            rest = [c for c in rest if c.name != victim]
        elif rest:
            for c in rest:
                results[c.name] = Result(c.name, c.suite, c.op, c.opset, "crash",
                                         "no result from worker", bound=bool(c.bound))
            rest = []
        todo = rest
        for pth in (batch, log):
            if os.path.exists(pth):
                os.remove(pth)
    return [results[c.name] for c in cases if c.name in results]


def _batches(cases: list[Case], size: int) -> list[list[Case]]:
    small = [c for c in cases if c.suite != "light"]
    big = [c for c in cases if c.suite == "light"]
    out = [small[i:i + size] for i in range(0, len(small), size)]
    out += [big[i:i + 2] for i in range(0, len(big), 2)]
    return out


def run_all(cases: list[Case], jobs: int = 2, batch_size: int = 40, sanitize: bool = False,
            progress=None, backend: str = "c") -> list[Result]:
    workdir = tempfile.mkdtemp(prefix="mtvm-conformance-")
    try:
        batches = _batches(cases, batch_size)
        results: list[Result] = []
        with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
            futs = [pool.submit(run_cases_isolated, b, workdir, sanitize, 600, backend)
                    for b in batches]
            for f in futs:
                rs = f.result()
                results.extend(rs)
                if progress:
                    progress(len(results), len(cases))
        order = {c.name: i for i, c in enumerate(cases)}
        return sorted(results, key=lambda r: order.get(r.name, 0))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- the report -----------------------------------------------------------------------------

def _fmt_list(xs) -> str:
    return ", ".join(str(x) for x in xs) if xs else "-"


def report(results: list[Result], wall: float | None = None,
           llvm: list[Result] | None = None) -> str:
    """The Markdown report; `llvm`: the node cases' results with --backend llvm
    (a column per op and a total beside the C backend's)."""
    node = [r for r in results if r.suite == "node"]
    npass = sum(r.status == "pass" for r in node)
    llvm_pass = {r.name for r in llvm or [] if r.status == "pass"}
    lines = ["# Operator coverage", "",
             "Generated by `python -m mtvm.conformance --report docs/operators.md` from the "
             "ONNX backend test suite of the installed `onnx` package: each case is compiled "
             "by mtvm, its C built and run on the host, and its outputs compared with the "
             "stored ones (rtol 1e-3, atol 1e-7). Do not edit by hand.", ""]
    lines.append(f"**{npass} of {NODE_TOTAL} node cases pass** "
                 f"({len(node)} run; {sum(r.bound for r in node if r.status == 'pass')} of the "
                 "passing ones with shape inputs bound as constants).")
    for suite in DATA_SUITES:
        rs = [r for r in results if r.suite == suite]
        if rs:
            lines.append(f"- `{suite}`: {sum(r.status == 'pass' for r in rs)} of {len(rs)} pass")
    if llvm is not None:
        lines.append(f"- with the LLVM backend (`--backend llvm`, run through LLVM's JIT, "
                     f"docs/llvm.md): **{len(llvm_pass)} of {NODE_TOTAL} node cases pass**, "
                     f"{sum(r.status in ('fail', 'crash') for r in llvm)} fail")
    if wall is not None:
        lines.append(f"- wall time of the run: {wall:.0f} s")
    lines += ["", DTYPE_NOTE, "", SCOPE_NOTE, "", "## Summary", "",
              "Node cases grouped by the operator they test (an `_expanded` case counts "
              "for the operator whose function it expands)"
              + ("; LLVM: the cases of the op that pass with --backend llvm." if llvm else "."),
              "",
              "| op | pass | fail | out of scope | opsets (passing) | dtypes (passing) |"
              + (" LLVM |" if llvm is not None else ""),
              "|---|---|---|---|---|---|" + ("---|" if llvm is not None else "")]
    by_op: dict[str, list[Result]] = collections.OrderedDict()
    for r in sorted(node, key=lambda r: r.op):
        by_op.setdefault(r.op, []).append(r)
    for op, rs in by_op.items():
        ok = [r for r in rs if r.status == "pass"]
        out = [r for r in rs if r.status == "skip"]
        opsets = sorted({r.opset for r in ok})
        dts = sorted({d for r in ok for d in r.dtypes})
        lines.append(f"| {op} | {len(ok)} | {len(rs) - len(ok) - len(out)} | {len(out)} | "
                     f"{_fmt_list(opsets)} | {_fmt_list(dts)} |"
                     + (f" {sum(r.name in llvm_pass for r in rs)} |" if llvm is not None else ""))
    lines += ["", "## Cases that do not pass", "",
              "One line per case: the reason (compile error, mismatch, or why it is out of "
              "scope). `[bound]` marks cases compiled with shape inputs bound as constants.", ""]
    for op, rs in by_op.items():
        bad = [r for r in rs if r.status != "pass"]
        if not bad:
            continue
        lines.append(f"### {op}")
        lines.append("")
        for r in bad:
            tag = " [bound]" if r.bound else ""
            note = f" ({REFERENCE_DIFFERS[r.name]})" if r.name in REFERENCE_DIFFERS else ""
            lines.append(f"- `{r.name}`{tag}: {r.status}: {r.reason}{note}")
        lines.append("")
    for suite in DATA_SUITES:
        rs = [r for r in results if r.suite == suite]
        bad = [r for r in rs if r.status != "pass"]
        if not rs:
            continue
        lines += [f"## `{suite}` models", "",
                  f"{len(rs) - len(bad)} of {len(rs)} pass."]
        if bad:
            lines.append("")
            lines += [f"- `{r.name}`: {r.status}: {r.reason}" for r in bad]
        lines.append("")
    bound = [r for r in node if r.bound and r.status == "pass"]
    if bound:
        lines += ["## Passing cases with bound inputs", "",
                  "Their shape-like graph inputs were compiled in as constants "
                  "(`mtvm compile --bind name=value.npy`).", "",
                  ", ".join(f"`{r.name}`" for r in bound), ""]
    return "\n".join(lines).rstrip() + "\n"


DTYPE_NOTE = """\
## Dtypes

- float32, float64 (as `double`), int8/16/32/64, uint8/16/32/64 and bool (as
  `uint8_t` holding 0 or 1) map to C types directly.
- float16, bfloat16, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0fnu) and
  float4e2m1 are stored as their bits (`uint16_t` / `uint8_t`) and *computed in
  float32*: the `widen_half` pass (mtvm/passes/widen.py) turns every such tensor
  inside the graph into float32 and puts a Cast at the graph's inputs and
  outputs, so only Cast (mtvm/ops/cast.py, round-to-nearest-even conversions)
  ever touches the narrow types. A model therefore runs at float32 precision;
  where the reference computes in bfloat16 step by step, results can differ by
  an ulp of bfloat16 (the bf16 Attention cases below).
- int4/uint4/int2/uint2 are held one element per byte (the low bits, as
  NumPy/ml_dtypes hold them), not packed; Cast converts them with wrap-around.
- Strings: not supported (out of scope for an MCU)."""

SCOPE_NOTE = """\
## Static shapes and what is out of scope

- Shape-like operands (Reshape's shape, Slice's starts/ends, TopK's k, Resize's
  scales/sizes, OneHot's depth, Range, ConstantOfShape, ...) must be known at
  compile time: constants, values computed from static shapes (Shape, Size and
  anything folded from them), or graph inputs bound with
  `mtvm compile --bind name=value.npy`. The runner binds the graph inputs that
  decide such operands (its SHAPE_INPUTS table) and marks those cases `[bound]`.
- Data-dependent output shapes: NonZero and Unique are rejected with an
  UnsupportedError ("the output shape depends on run-time values") unless their
  input is a compile-time value, in which case they fold to constants; Compress
  needs a compile-time condition (then it is a static gather).
  NonMaxSuppression is not supported: its output has one row per selected box,
  and a padded static-maximum variant would not match ONNX's output shape.
- Control flow: an `If` whose condition is known at compile time is inlined;
  on a run-time condition both branches are computed and `Where` selects.
  `Scan` over a static sequence length and `Loop` with a compile-time trip
  count and condition are unrolled; other loops are not supported.
- Sequences, optionals, maps and string tensors: out of scope (a static,
  malloc-free program has no dynamic containers). Random operators (Bernoulli,
  RandomUniformLike, Dropout in training mode), training operators
  (ai.onnx.preview.training) and ImageDecoder are out of scope too."""


def write_expected(results: list[Result], path: str) -> None:
    names = sorted(r.name for r in results if r.status == "pass")
    with open(path, "w") as f:
        f.write("# Cases that pass (written by python -m mtvm.conformance --update).\n")
        f.write("\n".join(names) + "\n")


def read_expected(path: str) -> list[str]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


EXPECTED_PASS = os.path.join(os.path.dirname(__file__), "..", "tests", "conformance",
                             "expected_pass.txt")
# The node cases the LLVM backend passes (python -m mtvm.conformance --suite node
# --backend llvm --update).
EXPECTED_PASS_LLVM = os.path.join(os.path.dirname(EXPECTED_PASS), "expected_pass_llvm.txt")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mtvm.conformance", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--filter", help="regular expression on case names")
    ap.add_argument("--suite", default=",".join(ALL_SUITES),
                    help=f"comma-separated among {', '.join(ALL_SUITES)}")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=40)
    ap.add_argument("--report", help="write the Markdown report (docs/operators.md)")
    ap.add_argument("--update", action="store_true",
                    help="write tests/conformance/expected_pass.txt (expected_pass_llvm.txt "
                         "with --backend llvm)")
    ap.add_argument("--sanitize", action="store_true",
                    help="build with -fsanitize=address,undefined (one process per case)")
    ap.add_argument("--json", help="write all results as JSON")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    ap.add_argument("--backend", choices=["c", "llvm"], default="c",
                    help="compile with this backend (llvm: run through LLVM's JIT)")
    ap.add_argument("--with-llvm", action="store_true",
                    help="also run the node cases with --backend llvm: their counts in the "
                         "report")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args.worker[0], args.worker[1], args.sanitize, args.backend)
    t0 = time.time()
    cases = collect(tuple(args.suite.split(",")), args.filter)
    print(f"{len(cases)} cases collected in {time.time() - t0:.1f} s", file=sys.stderr)

    def progress(n, total):
        print(f"\r{n}/{total} ({time.time() - t0:.0f} s)", end="", file=sys.stderr, flush=True)

    results = run_all(cases, args.jobs, args.batch_size, args.sanitize, progress,
                      backend=args.backend)
    wall = time.time() - t0
    print(file=sys.stderr)
    counts = collections.Counter(r.status for r in results)
    for r in results:
        if args.verbose or (r.status != "pass" and args.filter):
            print(f"{r.status:11s} {r.name}: {r.reason}")
    node = [r for r in results if r.suite == "node"]
    print(f"{sum(r.status == 'pass' for r in node)} of {NODE_TOTAL} node cases pass; "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; {wall:.0f} s")
    for suite in DATA_SUITES:
        rs = [r for r in results if r.suite == suite]
        if rs:
            print(f"{suite}: {sum(r.status == 'pass' for r in rs)} of {len(rs)} pass")
    llvm = None
    if args.with_llvm:
        llvm = run_all([c for c in cases if c.suite == "node"], args.jobs, args.batch_size,
                       backend="llvm")
        print(f"LLVM backend: {sum(r.status == 'pass' for r in llvm)} of {NODE_TOTAL} node "
              "cases pass", file=sys.stderr)
    if args.report:
        with open(args.report, "w") as f:
            f.write(report(results, wall, llvm))
    if args.update:
        write_expected(results, EXPECTED_PASS_LLVM if args.backend == "llvm" else EXPECTED_PASS)
        if llvm is not None:
            write_expected(llvm, EXPECTED_PASS_LLVM)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.__dict__ for r in results], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
