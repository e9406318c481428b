"""Property-based fuzzing of the loader and the compiler: structured mutations
of sub-graphs of the shipped models go through `mtvm compile`, and each one
must end in a Model Library Format whose C builds with -std=c99 -Wall -Wextra
-Werror, or in one clear `error:` line with exit status 1 -- never a Python
traceback, a hang or unbounded memory.

Design (kept within a few minutes on 2 cores for >= 2,000 models):
- The bases are sub-graphs of the shipped models (../shared/models/*.onnx and
  examples/*.onnx): windows of 1-3 consecutive nodes plus the Constant and
  weight-dequantizing nodes they read, their inputs typed from ONNX shape
  inference. Small graphs compile in ~50 ms; whole models would give ~50x fewer
  cases in the same time and mostly mutate the same weights.
- Hypothesis draws batches of cases (base, list of mutations); a mutation is
  (kind, target, value) indices into tables of hostile values, so a failing
  case is printed as data and replays exactly (the run is derandomized).
- Each batch runs in a pool of worker processes, each under RLIMIT_AS (a hang
  or an out-of-memory is then a reported failure, not a stuck suite) and with
  a per-case alarm; the parent also waits with a time limit.
- The worker checks every compiled model's C with `gcc -fsyntax-only` and the
  -Werror flags (one process, ~40 ms: the front end reports the warnings these
  models hit: unused variables, conversions, bad constants) and builds every
  8th one at -O2 for the warnings that need the optimizer (uninitialized,
  array bounds, loops invoking undefined behaviour).
- MTVM_FUZZ_MODELS sets the number of models (default 2,048); a campaign of
  10,000: MTVM_FUZZ_MODELS=10000 python3 -m pytest tests/test_fuzz_models.py
"""
from __future__ import annotations

import contextlib
import glob
import io
import json
import multiprocessing
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import traceback

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper, shape_inference

from mtvm import testing
from mtvm.frontend.onnx_loader import in_forked_child

N_MODELS = int(os.environ.get("MTVM_FUZZ_MODELS", "2048"))
BATCH = 256                    # cases per hypothesis example (one pool map)
WORKERS = 2
CASE_SECONDS = 30              # per compile (typical: 0.05 s) -- a hang otherwise
MEMORY_BYTES = 3 << 30         # RLIMIT_AS of each worker
O2_EVERY = 8                   # build every 8th compiled model at -O2 too
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror"]

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")

# -- the bases -------------------------------------------------------------------

_WEIGHT_OPS = {"Constant", "DequantizeLinear", "QuantizeLinear", "Identity", "Cast"}


def _model_files() -> list[str]:
    files = sorted(glob.glob(os.path.join(testing.models_dir(), "*.onnx")))
    return files + sorted(glob.glob(os.path.join(EXAMPLES, "*.onnx")))


def _subgraphs(path: str, max_len: int = 3) -> list[tuple[str, bytes]]:
    """Windows of 1..max_len consecutive nodes of the model, each with the
    nodes that compute its weights from initializers (Constant, DQ of a
    constant), as standalone models typed by ONNX shape inference."""
    m = shape_inference.infer_shapes(onnx.load(path))
    g = m.graph
    types = {v.name: v.type for v in list(g.value_info) + list(g.input) + list(g.output)}
    inits = {i.name: i for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}

    def constish(name, depth=0):
        if name in inits or not name:
            return True
        n = producer.get(name)
        return (n is not None and depth < 4 and n.op_type in _WEIGHT_OPS
                and all(constish(i, depth + 1) for i in n.input))

    out = []
    nodes = list(g.node)
    base = os.path.splitext(os.path.basename(path))[0]
    for start, first in enumerate(nodes):
        if first.op_type in _WEIGHT_OPS - {"QuantizeLinear", "DequantizeLinear"}:
            continue
        for length in range(1, max_len + 1):
            window = nodes[start:start + length]
            if len(window) < length:
                break
            chosen, seen = [], set()

            def add_weights(name):
                n = producer.get(name)
                if n is None or id(n) in seen or name in inits:
                    return
                for i in n.input:
                    add_weights(i)
                seen.add(id(n))
                chosen.append(n)

            for n in window:
                for i in n.input:
                    if constish(i):
                        add_weights(i)
            for n in window:
                if id(n) not in seen:
                    seen.add(id(n))
                    chosen.append(n)
            produced = {o for n in chosen for o in n.output}
            used = {i for n in chosen for i in n.input}
            ins, init_list = [], []
            for name in dict.fromkeys(i for n in chosen for i in n.input):
                if not name or name in produced:
                    continue
                if name in inits:
                    init_list.append(inits[name])
                elif name in types and all(d.HasField("dim_value") for d in
                                           types[name].tensor_type.shape.dim):
                    ins.append(helper.make_value_info(name, types[name]))
                else:
                    break
            else:
                outs = [o for n in window for o in n.output
                        if o and (o not in used or o in {x.name for x in g.output})
                        and o in types and types[o].tensor_type.HasField("shape")]
                if not outs:
                    continue
                sg = helper.make_graph(chosen, f"{base}_{start}_{length}", ins,
                                       [helper.make_value_info(o, types[o]) for o in outs],
                                       init_list)
                sm = helper.make_model(sg, opset_imports=list(m.opset_import),
                                       ir_version=m.ir_version)
                out.append((f"{base}[{start}:{start + length}]", sm.SerializeToString()))
    return out


_BASES: list[tuple[str, bytes]] | None = None


def bases() -> list[tuple[str, bytes]]:
    global _BASES
    if _BASES is None:
        _BASES = [b for f in _model_files() for b in _subgraphs(f)]
    return _BASES


# -- the mutations ---------------------------------------------------------------

INTS = [0, 1, 2, 3, -1, -2, -3, 4, 7, 100, -100, 2**31 - 1, -2**31, 2**62, 5, 16]
DIMS = [0, 1, 2, 3, -1, 7, 2**31 - 1, 2**20, None, 64]
ELEM_TYPES = [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 19, 21, 23, 99]
AUTO_PADS = ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "BOGUS", ""]
OPSETS = [1, 6, 7, 9, 10, 11, 12, 13, 16, 17, 18, 19, 21, 22, 23, 99]
FLOATS = [0.0, -1.0, 1e-30, 1e30, float("nan"), float("inf"), 0.5, 3.0]
# Hostile names: comment breakers, C keywords, non-ASCII, empty, very long,
# and invalid UTF-8 (spliced into the serialized bytes: protobuf refuses it).
NAMES = ["*/ int evil; /*", "int", "a b", "é中文", "", "x" * 300, "\\", '"quote"',
         "\x00nul", "default", "__BAD_UTF8_0__", "__BAD_UTF8_1__", "0start", "a-b.c/d"]
BAD_UTF8 = {"__BAD_UTF8_0__": b"\xff\xfe\xfd\x80\x81\x82\x83\x84\x85\xc0\xc1\xf5\xf6\xf7",
            "__BAD_UTF8_1__": b"ok\xed\xa0\x80surrogat\xe9"}
assert all(len(k.encode()) == len(v) for k, v in BAD_UTF8.items())
ATTRS = ["axis", "axes", "strides", "pads", "kernel_shape", "group", "auto_pad", "dilations",
         "perm", "keepdims", "ceil_mode", "count_include_pad", "transA", "transB",
         "direction", "hidden_size", "block_size", "saturate", "alpha", "to", "mode"]

KINDS = ["attr_int", "attr_ints", "attr_ints_len", "attr_str", "attr_add", "attr_del",
         "elem_type", "dim", "rank", "init_data", "init_type", "init_string",
         "quant_param", "rename_tensor", "rename_node", "dup_node_name", "drop_node",
         "dup_node", "drop_input", "extra_input", "drop_output", "dup_output",
         "output_is_input", "opset", "swap_inputs", "output_type", "output_dims",
         "init_float", "domain"]

mutation = st.tuples(st.sampled_from(KINDS), st.integers(0, 1 << 16), st.integers(0, 1 << 16))
# retype: the outputs' declared types are re-inferred after the mutations (so a
# mutated attribute or input type reaches the compiler instead of the checker).
case = st.tuples(st.integers(0, 1 << 30), st.lists(mutation, min_size=1, max_size=3),
                 st.booleans())


def _pick(seq, i):
    return seq[i % len(seq)] if seq else None


def _tensor_types(g):
    """The ValueInfos of graph inputs and outputs (those with tensor types)."""
    return [v for v in list(g.input) + list(g.output) if v.type.HasField("tensor_type")]


def _rename_everywhere(g, old: str, new: str) -> None:
    for n in g.node:
        for lst in (n.input, n.output):
            for k, x in enumerate(lst):
                if x == old:
                    lst[k] = new
    for lst in (g.input, g.output, g.value_info, g.initializer):
        for v in lst:
            if v.name == old:
                v.name = new


def mutate(m: onnx.ModelProto, kind: str, a: int, b: int) -> None:
    g = m.graph
    nodes = list(g.node)
    node = _pick(nodes, a)
    if kind.startswith("attr_") and node is not None:
        attrs = list(node.attribute)
        if kind == "attr_int":
            ints = [x for x in attrs if x.type == onnx.AttributeProto.INT]
            if ints:
                _pick(ints, b).i = _pick(INTS, b >> 4)
            else:
                floats = [x for x in attrs if x.type == onnx.AttributeProto.FLOAT]
                if floats:
                    _pick(floats, b).f = _pick(FLOATS, b >> 4)
        elif kind in ("attr_ints", "attr_ints_len"):
            lists = [x for x in attrs if x.type == onnx.AttributeProto.INTS]
            if lists:
                x = _pick(lists, b)
                if kind == "attr_ints" and x.ints:
                    x.ints[(b >> 4) % len(x.ints)] = _pick(INTS, b >> 8)
                elif (b >> 4) % 2 and x.ints:
                    del x.ints[-1]
                else:
                    x.ints.append(_pick(INTS, b >> 8))
        elif kind == "attr_str":
            strs = [x for x in attrs if x.type == onnx.AttributeProto.STRING]
            if strs:
                _pick(strs, b).s = _pick(AUTO_PADS, b >> 4).encode()
        elif kind == "attr_add":
            name = _pick(ATTRS, b)
            if all(x.name != name for x in attrs):
                v = (_pick(AUTO_PADS, b >> 5) if name in ("auto_pad", "direction", "mode") else
                     [_pick(INTS, b >> 5)] * (1 + (b >> 9) % 3)
                     if name in ("axes", "strides", "pads", "kernel_shape", "dilations", "perm")
                     else _pick(INTS, b >> 5))
                node.attribute.append(helper.make_attribute(name, v))
        elif kind == "attr_del" and attrs:
            node.attribute.remove(_pick(attrs, b))
    elif kind in ("elem_type", "dim", "rank", "output_type", "output_dims"):
        vis = _tensor_types(g)
        if kind.startswith("output_"):
            vis = [v for v in g.output if v.type.HasField("tensor_type")]
        v = _pick(vis, a)
        if v is None:
            return
        tt = v.type.tensor_type
        if kind in ("elem_type", "output_type"):
            tt.elem_type = _pick(ELEM_TYPES, b)
        elif kind in ("dim", "output_dims") and tt.shape.dim:
            d = tt.shape.dim[(b >> 4) % len(tt.shape.dim)]
            value = _pick(DIMS, b)
            d.Clear()
            if value is None:
                d.dim_param = "N"
            else:
                d.dim_value = value
        elif kind == "rank":
            if b % 2 and tt.shape.dim:
                del tt.shape.dim[-1]
            else:
                tt.shape.dim.add().dim_value = _pick(DIMS[:4], b >> 1) or 1
    elif kind.startswith("init_") or kind == "quant_param":
        inits = list(g.initializer)
        if kind == "quant_param":
            inits = [i for i in inits if "scale" in i.name or "zero_point" in i.name] or inits
        t = _pick(inits, a)
        if t is None:
            return
        if kind == "init_data":
            raw = t.raw_data or numpy_helper.from_array(numpy_helper.to_array(t)).raw_data
            t.ClearField("raw_data")
            del t.float_data[:], t.int32_data[:], t.int64_data[:], t.double_data[:]
            cut = [0, 1, 3, len(raw) // 2, len(raw) + 1, len(raw) + 4][b % 6]
            t.raw_data = (raw + bytes(8))[:cut]
        elif kind == "init_type":
            t.data_type = _pick(ELEM_TYPES, b)
        elif kind == "init_string":
            shape = list(t.dims)
            t.CopyFrom(helper.make_tensor(t.name, TensorProto.STRING, shape,
                                          [b"s"] * int(np.prod(shape, dtype=np.int64))))
        elif kind == "init_float":
            arr = numpy_helper.to_array(t)
            if arr.size:
                flat = arr.astype(np.float64).ravel()
                flat[b % arr.size] = _pick(FLOATS, b >> 3)
                with np.errstate(all="ignore"):
                    t.CopyFrom(numpy_helper.from_array(flat.astype(arr.dtype).reshape(arr.shape),
                                                       t.name))
        elif kind == "quant_param":
            arr = numpy_helper.to_array(t)
            choice = b % 5
            if choice == 0:      # wrong length
                new = np.resize(arr, (arr.size + 1 + (b >> 3) % 3,))
            elif choice == 1:    # scalar -> per-axis of length 2
                new = np.resize(arr, (2,))
            elif choice == 2:    # 2-D
                new = np.resize(arr, (2, 2))
            elif choice == 3:    # another element type
                new = arr.astype(np.int32 if arr.dtype.kind == "f" else np.float32)
            else:                # a zero / negative / nan scale, or a zero point out of range
                new = arr.copy()
                if new.size:
                    new.ravel()[0] = _pick([0, -1, float("nan"), 300], b >> 3) \
                        if arr.dtype.kind == "f" else _pick([0, 255, -1], b >> 3)
            with np.errstate(all="ignore"):
                t.CopyFrom(numpy_helper.from_array(np.asarray(new).astype(new.dtype), t.name))
    elif kind == "rename_tensor":
        names = [n for n in dict.fromkeys([v.name for v in g.input] + [o for n in nodes
                                                                        for o in n.output])]
        old = _pick(names, a)
        if old:
            _rename_everywhere(g, old, _pick(NAMES, b))
    elif kind == "rename_node" and node is not None:
        node.name = _pick(NAMES, b)
    elif kind == "dup_node_name" and len(nodes) > 1:
        node.name = "same"
        _pick(nodes, a + 1 + b).name = "same"
    elif kind == "drop_node" and node is not None:
        g.node.remove(node)
    elif kind == "dup_node" and node is not None:
        g.node.insert(b % (len(nodes) + 1), node)
    elif kind == "drop_input" and node is not None and node.input:
        k = b % len(node.input)
        if b % 2:
            del node.input[k]
        else:
            node.input[k] = ""
    elif kind == "extra_input" and node is not None:
        node.input.append(_pick([i for n in nodes for i in n.input] or ["x"], b))
    elif kind == "drop_output":
        if b % 2 and len(g.output) > 0:
            del g.output[a % len(g.output)]
        elif node is not None and node.output:
            node.output[b % len(node.output)] = ""
    elif kind == "dup_output" and g.output:
        g.output.append(_pick(list(g.output), a))
    elif kind == "output_is_input" and g.input:
        g.output.append(_pick(list(g.input), a))
    elif kind == "opset":
        m.opset_import[0].version = _pick(OPSETS, b)
    elif kind == "swap_inputs" and node is not None and len(node.input) > 1:
        i, j = a % len(node.input), b % len(node.input)
        node.input[i], node.input[j] = node.input[j], node.input[i]
    elif kind == "domain" and node is not None:
        node.domain = _pick(["", "ai.onnx", "com.microsoft", "bogus"], b)


def _retype_outputs(m: onnx.ModelProto) -> None:
    """Each output declared as ONNX shape inference types it (where it can)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    outs = {o.name for o in probe.graph.output}
    del probe.graph.value_info[:]
    for o in probe.graph.output:
        o.type.tensor_type.ClearField("shape")
        o.type.tensor_type.elem_type = 0
    inferred = shape_inference.infer_shapes(probe)
    types = {v.name: v.type for v in list(inferred.graph.value_info) + list(inferred.graph.output)
             if v.name in outs and v.type.tensor_type.elem_type
             and v.type.tensor_type.HasField("shape")}
    for o in m.graph.output:
        if o.name in types:
            o.type.CopyFrom(types[o.name])


def _retyped(m: onnx.ModelProto) -> onnx.ModelProto:
    """_retype_outputs in a forked child: ONNX's C++ shape inference can abort
    the process (a failed assertion) on a mutated model; then m stays as it is."""
    def produce() -> bytes:
        _retype_outputs(m)
        return m.SerializeToString()
    data, _ = in_forked_child(produce)
    if data:
        out = onnx.ModelProto()
        out.ParseFromString(data)
        return out
    return m


def build_case(index: int, muts, retype: bool = False) -> tuple[str, bytes]:
    label, data = bases()[index % len(bases())]
    m = onnx.ModelProto()
    m.ParseFromString(data)
    for kind, a, b in muts:
        try:
            mutate(m, kind, a, b)
        except (ValueError, TypeError, IndexError, OverflowError, KeyError,
                NotImplementedError):
            pass   # not applicable to what earlier mutations left (e.g. unreadable data)
    if retype:
        m = _retyped(m)
    data = m.SerializeToString()
    for key, bad in BAD_UTF8.items():
        data = data.replace(key.encode(), bad)
    return f"{label} + {list(muts)}{' + retype' if retype else ''}", data


# -- the worker ------------------------------------------------------------------

class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def _init_worker():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    signal.signal(signal.SIGALRM, _alarm)


def _gcc(args, cwd) -> str | None:
    r = subprocess.run(["gcc"] + args, cwd=cwd, capture_output=True, text=True,
                       errors="replace", timeout=120)
    return None if r.returncode == 0 else (r.stderr.strip() or f"gcc exit {r.returncode}")


def run_case(job) -> tuple[str, str, str]:
    """(verdict, label, detail); verdict is ok, error (a clean MtvmError line),
    or a failure: traceback, hang, oom, werror, json, message."""
    n, (index, muts, retype), workdir = job
    from mtvm.cli import main
    label, data = build_case(index, muts, retype)
    d = os.path.join(workdir, f"c{n}")
    os.makedirs(d)
    with open(os.path.join(d, "case.txt"), "w") as f:   # left behind if the worker dies
        f.write(label)
    path = os.path.join(d, "model.onnx")
    with open(path, "wb") as f:
        f.write(data)
    out, err = io.StringIO(), io.StringIO()
    signal.alarm(CASE_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["compile", path, "-o", os.path.join(d, "mlf"), "--module-name", f"c{n}"])
    except _Hang:
        return "hang", label, f"no result in {CASE_SECONDS} s"
    except MemoryError:
        return "oom", label, f"MemoryError under RLIMIT_AS={MEMORY_BYTES}"
    except BaseException:
        return "traceback", label, traceback.format_exc(limit=-6)
    finally:
        signal.alarm(0)
    try:
        if rc != 0:
            msg = err.getvalue().rstrip("\n")
            if rc != 1 or "\n" in msg or not msg.startswith("error: "):
                return "message", label, f"exit {rc}, stderr {msg!r}"
            return "error", label, msg
        mlf = os.path.join(d, "mlf")
        try:
            with open(os.path.join(mlf, "metadata.json"), encoding="utf-8") as f:
                json.load(f)
        except (ValueError, OSError) as e:
            return "json", label, f"metadata.json: {e}"
        srcs = sorted(glob.glob(os.path.join(mlf, "codegen/host/src/*.c")))
        inc = ["-I", os.path.join(mlf, "codegen/host/include")]
        bad = _gcc(["-fsyntax-only"] + CFLAGS + inc + srcs, d)
        if bad is None and n % O2_EVERY == 0:
            bad = _gcc(["-c", "-O2"] + CFLAGS + inc + srcs, d)
        if bad is not None:
            return "werror", label, bad[:2000]
        return "ok", label, ""
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_cases(cases, workdir, pool) -> list[tuple[str, str, str]]:
    jobs = [(n, c, workdir) for n, c in enumerate(cases)]
    try:
        return pool.map_async(run_case, jobs, chunksize=4).get(timeout=60 + len(jobs))
    except multiprocessing.TimeoutError:
        # A worker died (a crash in C code: an abort, a segfault) or hung where the
        # alarm cannot interrupt it: the cases it was running left their directory.
        left = []
        for case_txt in glob.glob(os.path.join(workdir, "c*", "case.txt")):
            with open(case_txt) as f:
                left.append(f.read())
        raise AssertionError("worker crashed or hung on:\n" + "\n".join(left)) from None


FAILURES = ("traceback", "hang", "oom", "werror", "json", "message")
STATS: dict[str, int] = {}


@pytest.fixture(scope="module")
def pool():
    if not os.path.isdir(testing.models_dir()):
        pytest.skip(f"{testing.models_dir()} not found (set MTVM_MODELS_DIR)")
    bases()   # built before forking: the workers share them
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(WORKERS, initializer=_init_worker, maxtasksperchild=500) as p:
        yield p
    print(f"\nfuzzed models: {STATS}")


@pytest.mark.slow    # ~1.5-3 min on 2 cores for 2,048 models
@settings(max_examples=max(1, -(-N_MODELS // BATCH)), deadline=None, derandomize=True,
          database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(batch=st.lists(case, min_size=BATCH, max_size=BATCH))
def test_mutated_models_compile_or_fail_cleanly(pool, batch):
    with tempfile.TemporaryDirectory() as workdir:
        results = run_cases(batch, workdir, pool)
    for verdict, _, _ in results:
        STATS[verdict] = STATS.get(verdict, 0) + 1
    bad = [r for r in results if r[0] in FAILURES]
    assert not bad, "\n\n".join(f"[{v}] {label}\n{detail}" for v, label, detail in bad[:5])


def test_the_bases_compile(pool):
    """A sample of the unmutated sub-graphs compiles (else the mutations would
    test little): none fails badly, nearly all compile."""
    sample = list(range(0, len(bases()), max(1, len(bases()) // 96)))
    with tempfile.TemporaryDirectory() as workdir:
        results = run_cases([(i, [], False) for i in sample], workdir, pool)
    bad = [r for r in results if r[0] != "ok"]
    assert len(bases()) > 1000
    assert len(bad) <= len(sample) // 20, "\n\n".join(f"[{v}] {label}\n{detail}"
                                                        for v, label, detail in bad[:5])


# Cases earlier campaigns found (base sub-graph, mutations, retype), replayed as
# they were: each failed before its fix.
FOUND = [
    # depthwise 3x3 with stride 16 on 6 columns: unused weight taps (-Werror)
    ("vww_mobilenetv1[63:65]", [("attr_ints", 37402, 28571), ("output_type", 48893, 59420),
                                ("rename_node", 41302, 64912)], True),
    # a graph output dropped: no kernel, an unused `status` (-Werror)
    ("vww_mobilenetv1_int8[131:132]", [("attr_del", 52410, 60477),
                                       ("drop_output", 32755, 64227)], False),
    # per-axis DequantizeLinear with its axis deleted (default 1): IndexError in per_axis
    ("kwt_tiny_int8[211:214]", [("attr_ints", 17262, 21124), ("attr_del", 12566, 59426)],
     False),
    # a wrong-length zero point / scale: ValueError from NumPy broadcasting
    ("ad_autoencoder_int8[11:12]", [("quant_param", 40083, 59990)], False),
    # initializer raw data one element too long: ValueError in numpy_helper.to_array
    ("sensor_mlp[3:6]", [("init_data", 46249, 54467)], False),
    # a STRING initializer read as a scale
    ("kwt_tiny_int8[356:357]", [("init_string", 55442, 23393)], False),
    # element type 99 on an initializer: KeyError
    ("vww_mobilenetv1_int8[107:110]", [("attr_ints_len", 14782, 59881),
                                       ("init_type", 54661, 48867)], False),
    # a Slice of an input with a dim of -1: onnx's checker aborts the process
    ("kwt_tiny[137:138]", [("dup_output", 39518, 25292), ("dim", 8853, 24364)], False),
    # invalid UTF-8 in names: a TypeError in sanitize, bytes in json.dumps
    ("kws_crnn_int8[44:45]", [("rename_node", 24658, 55442), ("rename_tensor", 35312, 28752)],
     False),
]


def test_found_cases_stay_fixed(pool):
    index = {label: i for i, (label, _) in enumerate(bases())}
    cases = [(index[label], muts, retype) for label, muts, retype in FOUND if label in index]
    assert len(cases) == len(FOUND)
    with tempfile.TemporaryDirectory() as workdir:
        results = run_cases(cases, workdir, pool)
    bad = [r for r in results if r[0] in FAILURES]
    assert not bad, "\n\n".join(f"[{v}] {label}\n{detail}" for v, label, detail in bad)
