"""`mtvm tune --backend llvm` (docs/tuning.md, "Tuning the LLVM backend"): the
LLVM nests' knobs, their candidates measured through the JIT with no C
compiler on PATH, records written, resumed and applied, and a record of
another knob changing the IR."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

pytest.importorskip("llvmlite")

import mtvm  # noqa: E402
from mtvm.codegen.cwriter import Assign, Const, param  # noqa: E402
from mtvm.codegen.llvm.loopnests import _vector_lanes  # noqa: E402
from mtvm.errors import MtvmError  # noqa: E402
from mtvm.target import host_target  # noqa: E402
from mtvm.testing import conv_relu_conv  # noqa: E402
from mtvm.tune import jit as J  # noqa: E402
from mtvm.tune import records as R  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
pytestmark = pytest.mark.skipif(not host_target().is_x86, reason="x86 host figures")


def two_convs():
    """Conv+Relu (8 -> 16 channels, 8x8) and a strided conv: on x86 their tiles
    are vectors of 8 or 16 output channels x columns."""
    return conv_relu_conv(8, 5)


def matmul_model():
    rng = np.random.default_rng(6)
    b = rng.standard_normal((24, 40)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "b"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 40])],
        [numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def model(tmp_path):
    path = str(tmp_path / "two_convs.onnx")
    onnx.save(two_convs(), path)
    return path


def _x(shape=(1, 8, 8, 8)):
    return np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def _reference(path, x):
    return ReferenceEvaluator(onnx.load(path)).run(None, {"x": x})[0]


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# -- tuning with no C compiler ---------------------------------------------------------------

NO_CC_SCRIPT = r"""
import json, shutil, sys
assert all(shutil.which(c) is None for c in ("cc", "gcc", "clang")), "a C compiler is on PATH"
import mtvm
from mtvm.cli import main
model, records = sys.argv[1], sys.argv[2]
first = mtvm.tune(model, board="host", backend="llvm", records=records, trials=3, runs=5)
again = mtvm.tune(model, board="host", backend="llvm", records=records, trials=3, runs=5)
code = main(["compile", model, "--backend", "llvm", "--tuning-records", records,
             "-o", sys.argv[3]])
print(json.dumps({"first": [first.stats.builds, first.stats.measured, first.stats.failed],
                  "again": [again.stats.builds, again.stats.skipped, len(again.hits)],
                  "check": first.tuned_check, "layers": len(first.layers),
                  "summary": first.summary(), "code": code}))
"""


def test_tune_llvm_on_host_with_no_c_compiler_records_resume_and_apply(model, tmp_path):
    """PATH holds only python: the candidates are emitted, compiled by llvmlite,
    run and timed in the process; a second run measures nothing new; `mtvm
    compile --backend llvm --tuning-records` applies the records."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(sys.executable, bindir / "python3")
    env = {"PATH": str(bindir), "HOME": str(tmp_path), "PYTHONPATH": os.path.abspath(ROOT),
           "MTVM_PROGRESS": "0"}
    records, tar = tmp_path / "x.jsonl", tmp_path / "x.tar"
    p = subprocess.run([str(bindir / "python3"), "-c", NO_CC_SCRIPT, model, str(records),
                        str(tar)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["code"] == 0 and got["check"] == "ok" and got["layers"] == 2
    builds, measured, failed = got["first"]
    assert builds == 2 and measured >= 2 and failed == 0, got["summary"]
    # resumed: what the first run measured is skipped (the second run goes on with what is
    # left of each layer, 3 trials more), nothing is measured twice
    assert got["again"][1] >= measured and got["again"][2] == 2
    assert "backend llvm" in got["summary"] and "tuned model against the reference: ok" \
        in got["summary"]

    recs = _lines(records)
    cm = mtvm.compile(model, backend="llvm")
    keys = {o["workload_key"] for o in cm.metadata["operators"]}
    assert {r["key"] for r in recs} == keys
    for r in recs:
        assert r["backend"] == "llvm" and r["status"] == "ok" and r["unit"] == "ns"
        assert r["schedule"] == "llvm.conv2d_f32" and r["figure"] > 0
        assert r["target"] == cm.target.name and r["board"] == "host"
    # the default is measured in every module, beside its candidates
    searched = [(r["key"], R.ident(r)) for r in recs if not r["default"]]
    assert len(searched) == len(set(searched)) >= measured
    assert sum(r["default"] for r in recs) == builds + got["again"][0]

    # applied: the records' best knobs in the kernels, the outputs still right
    tuned = mtvm.compile(model, backend="llvm", tuning_records=str(records))
    best = R.best(recs, cm.target.name, backend="llvm")
    for op in tuned.metadata["operators"]:
        b = best[op["workload_key"]]
        want = cm.metadata["operators"][op["index"]]["knobs"] if b.is_default \
            else b.record["knobs"]
        assert op["knobs"] == want
    x = _x()
    np.testing.assert_allclose(tuned.run_host({"x": x})["y"], _reference(model, x),
                               rtol=1e-4, atol=1e-4)
    assert tar.exists() and tar.stat().st_size > 0


# -- records apply to the IR ------------------------------------------------------------------

def _record(key, target, knobs, figure, default, schedule="llvm.conv2d_f32", backend="llvm"):
    rec = R.make(key=key, target=target, board="host", op="Conv", layer="", schedule=schedule,
                 knobs=knobs, default=default, status="ok", figure=figure, unit="ns",
                 spread=0.0, runs=5, statistic="min", ticks_per_second=10 ** 9)
    if backend:
        rec["backend"] = backend
    return rec


def test_a_record_with_another_knob_changes_the_ir_and_only_that_layer(model, tmp_path):
    cm = mtvm.compile(model, backend="llvm")
    op0, op1 = cm.metadata["operators"]
    assert op0["knobs"] == {"tile_cols": 0, "tile_channels": 0, "vec_channels": 0,
                            "vec_cols": 0}
    # one column per vector tile instead of 4 (the first conv: 6 columns inside the padding)
    knobs = dict(op0["knobs"], vec_cols=1)
    path = tmp_path / "r.jsonl"
    with open(path, "w") as f:
        for rec in (_record(op0["workload_key"], cm.target.name, op0["knobs"], 2000.0, True),
                    _record(op0["workload_key"], cm.target.name, knobs, 1000.0, False)):
            f.write(json.dumps(rec) + "\n")
    tuned = mtvm.compile(model, backend="llvm", tuning_records=str(path))
    t0, t1 = tuned.metadata["operators"]
    assert t0["knobs"] == knobs and t1["knobs"] == op1["knobs"]
    assert _vector_lanes(cm.target) in (8, 16)     # x86: vector tiles of output channels

    def body(ir, fname):
        start = ir.index(f'@"{fname}"(') if f'@"{fname}"(' in ir else ir.index(f"@{fname}(")
        return ir[start:ir.index("\n}\n", start)]
    d0, n0 = body(cm.llvm_ir, op0["function"]), body(tuned.llvm_ir, t0["function"])
    # the default's tile has 4 columns of accumulators; the record's one
    assert '"vacc0_3"' in d0 and '"vacc0_1"' not in n0 and '"vacc0_0"' in n0
    assert body(cm.llvm_ir, op1["function"]) == body(tuned.llvm_ir, t1["function"])
    x = _x()
    np.testing.assert_allclose(tuned.run_host({"x": x})["y"], _reference(model, x),
                               rtol=1e-4, atol=1e-4)

    # the same record without "backend" is the C backend's: not applied here, and the
    # LLVM record does nothing to a C compile (its key and schedule are the LLVM nest's)
    c_path = tmp_path / "c.jsonl"
    with open(c_path, "w") as f:
        for line in _lines(path):
            del line["backend"]
            f.write(json.dumps(line) + "\n")
    assert mtvm.compile(model, backend="llvm", tuning_records=str(c_path)).llvm_ir == \
        cm.llvm_ir
    c = mtvm.compile(model, target=cm.target, tuning_records=str(path))
    assert c.sources == mtvm.compile(model, target=cm.target).sources


def test_matmul_rows_and_columns_are_knobs_and_every_candidate_is_right(tmp_path):
    path = str(tmp_path / "mm.onnx")
    onnx.save(matmul_model(), path)
    cm = mtvm.compile(path, backend="llvm")
    layers, sites = J.llvm_layers(cm)
    (lay,) = layers
    assert lay.default.schedule == "llvm.matmul_f32" and lay.complete
    assert len(lay.candidates) > 3
    described = [c.describe(lay.default) for c in lay.candidates]
    assert described[0] == "default" and any(d.startswith("rows=") for d in described)
    out = J.Batch(sites[lay.key], lay.candidates[:6]).run(runs=2)
    assert all(o.status == "ok" and o.figure > 0 for o in out.values()), out
    # rows=2 through a schedule config: two-row tiles (6 rows: 3 of them, no remainder)
    two = mtvm.compile(path, backend="llvm",
                       schedule_config={"llvm.matmul_f32": {"rows": 2}})
    assert two.metadata["operators"][0]["knobs"]["rows"] == 2
    assert two.llvm_ir != cm.llvm_ir and '"vacc1_0"' in two.llvm_ir and \
        '"vacc2_0"' not in two.llvm_ir and '"vacc3_0"' in cm.llvm_ir
    x = _x((6, 24))
    np.testing.assert_allclose(two.run_host({"x": x})["y"], _reference(path, x), rtol=1e-4,
                               atol=1e-4)


def test_a_wrong_candidate_is_recorded_and_never_chosen(model, tmp_path, monkeypatch):
    """A candidate whose kernel writes a wrong value is caught by the check
    against the NumPy reference before it is timed."""
    real = J.emit

    def broken(site, knobs):
        ik = real(site, knobs)
        if knobs.get("vec_cols") == 1:    # out[0] = 12345 after the nest
            ik.body = ik.body + [Assign(param(ik.kernel.out, output=True)[Const(0)],
                                        Const(12345.0, "float32"))]
        return ik
    monkeypatch.setattr(J, "emit", broken)
    records = tmp_path / "w.jsonl"
    res = mtvm.tune(model, board="host", backend="llvm", records=str(records), trials=2,
                    runs=3, progress=False)
    recs = _lines(records)
    bad = [r for r in recs if r["knobs"].get("vec_cols") == 1]
    assert bad and all(r["status"] == "wrong_output" and r["figure"] is None for r in bad)
    assert "max error" in bad[0]["error"]
    assert res.stats.failed == len(bad)
    for b in res.best.values():
        assert b.record["knobs"].get("vec_cols") != 1


def test_llvm_tuning_refuses_what_it_cannot_do_in_one_line(model, tmp_path):
    rec = str(tmp_path / "r.jsonl")
    with pytest.raises(MtvmError, match="memory-budget"):
        mtvm.tune(model, backend="llvm", records=rec, memory_budget=1000)
    with pytest.raises(MtvmError, match="JIT in this process.*devices"):
        mtvm.tune(model, backend="llvm", records=rec, devices=2)
    with pytest.raises(MtvmError, match="conv2d_f32 is not a knob set of this backend"):
        mtvm.compile(model, backend="llvm", schedule_config={"conv2d_f32": {"mr": 2}})
    with pytest.raises(MtvmError, match="has no knob"):
        mtvm.compile(model, backend="llvm", schedule_config={"llvm.conv2d_f32": {"mr": 2}})
    assert not os.path.exists(rec)
