"""Trustworthy verdicts and measurements: `--validate` compares quantized outputs
in quantization steps against the operators' own semantics (not onnxruntime's
CPU-dependent fused int8 kernels) and names its reference; `--profile N` is
the median of N runs per kernel with the kernel's ONNX nodes, in instructions
under QEMU -icount; a benchmark goes to the device in chunks (a progress bar
can move) without changing its figure; progress bars only on a terminal."""
import io
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm import progress
from mtvm.cli import main as cli
from mtvm.testing import have, models_dir
from mtvm.validate import Step, compare, output_steps, reference_outputs, validate_outputs

MODELS_DIR = models_dir()
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "sensor_mlp.onnx")
INT8_MODELS = sorted(f[:-5] for f in os.listdir(MODELS_DIR) if f.endswith("_int8.onnx")) \
    if os.path.isdir(MODELS_DIR) else []
needs_models = pytest.mark.skipif(not INT8_MODELS, reason=f"no models in {MODELS_DIR}")
needs_qemu = pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                                reason="QEMU or arm-none-eabi-gcc not installed")


def quiet(*_):
    pass


def model_path(name):
    return os.path.join(MODELS_DIR, name + ".onnx")


# -- the comparison -------------------------------------------------------------------------
def test_compare_counts_quantization_steps():
    r = np.array([[-128, 0, 5, 127]], np.int8)
    c = compare(np.array([[-127, 0, 5, 127]], np.int8), r, name="y")
    assert c.ok and c.max_steps == 1 and c.off_by_one == 1 and c.beyond == 0
    assert "in steps of 1: max 1, 1 of 4 element(s) off by one  OK" in c.describe()
    c = compare(np.array([[-126, 1, 5, 127]], np.int8), r, name="y")
    assert not c.ok and c.max_steps == 2 and c.off_by_one == 1 and c.beyond == 1
    assert c.describe().endswith("1 off by more  MISMATCH")
    # a float output behind DequantizeLinear: steps of its (per-axis) scale
    scale = np.array([0.5, 0.01], np.float32)
    ref = np.array([[1.0, 0.02], [2.0, 0.03]], np.float32)
    c = compare(ref + np.array([[0.5, 0.01], [0.0, 0.0]], np.float32), ref, Step(scale, 1))
    assert c.ok and c.max_steps == 1 and c.off_by_one == 2
    c = compare(ref + np.array([[0.0, 0.02], [0.0, 0.0]], np.float32), ref, Step(scale, 1))
    assert not c.ok and c.max_steps == 2
    # floats: 1e-4 of the magnitude; NaN must stay NaN
    f = np.array([1000.0, -3.0, np.nan], np.float32)
    assert compare(f + np.float32([0.05, 0, 0]), f).ok
    assert not compare(f + np.float32([0.5, 0, 0]), f).ok
    bad = compare(np.array([1000.0, -3.0, 0.0], np.float32), f)
    assert not bad.ok and "NaN" in bad.describe()


def _dq_model():
    """x (float) -> Q -> DQ (per-axis scale on axis 1) -> Reshape -> y, plus the int8 q."""
    inits = [numpy_helper.from_array(np.array(0.1, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(np.array([0.1, 0.2, 0.4], np.float32), "s3"),
             numpy_helper.from_array(np.zeros(3, np.int8), "z3"),
             numpy_helper.from_array(np.array([3, 2], np.int64), "shape")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s3", "z3"], ["d"], axis=1),
             helper.make_node("Reshape", ["d", "shape"], ["y"])]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "dq", [vi("x", TensorProto.FLOAT, [2, 3])],
                          [vi("y", TensorProto.FLOAT, [3, 2]), vi("d", TensorProto.FLOAT, [2, 3]),
                           vi("q", TensorProto.INT8, [2, 3])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_output_steps_follow_quantization_ops():
    steps = output_steps(_dq_model())
    np.testing.assert_allclose(steps["d"].scale, [0.1, 0.2, 0.4])
    assert steps["d"].axis == 1
    assert float(steps["y"].scale) == pytest.approx(0.4)     # behind a Reshape: coarsest
    assert float(steps["q"].scale) == 1.0                    # integer: one unit
    x = np.random.default_rng(0).uniform(-5, 5, (2, 3)).astype(np.float32)
    ref, checks = validate_outputs(_dq_model(), {"x": x}, dict(zip(
        ["y", "d", "q"], reference_outputs(_dq_model(), {"x": x}).outputs)))
    assert "graph optimizations off" in ref.name and all(c.ok for c in checks)


def test_reference_evaluator_without_onnxruntime(tmp_path):
    """Without onnxruntime the ONNX reference evaluator is the reference, and the
    report says so."""
    path = str(tmp_path / "m.onnx")
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                          [vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    code = ("import sys, numpy as np; sys.modules['onnxruntime'] = None\n"
            "from mtvm.validate import validate_outputs\n"
            "x = np.array([-1, 2, -3, 4], np.float32)\n"
            f"ref, checks = validate_outputs({path!r}, {{'x': x}}, {{'y': np.maximum(x, 0)}})\n"
            "print(ref.name); print(checks[0].describe())")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert f"the ONNX reference evaluator (onnx {onnx.__version__}" in p.stdout
    assert p.stdout.rstrip().endswith("OK")


def test_no_reference_is_one_clear_error():
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Frob", ["x"], ["y"], domain="acme")], "frob",
                          [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("acme", 1)])
    m.ir_version = 8
    with pytest.raises(mtvm.MtvmError, match=r"no reference for validation: onnxruntime .* "
                       r"cannot run the model: .*the ONNX reference evaluator .* cannot either"):
        reference_outputs(m, {"x": np.zeros(2, np.float32)})


@pytest.mark.slow
@needs_models
@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_models_within_one_step_of_the_operators_semantics(name):
    """Every shared int8 model on its stored input: within one step (most are
    bit-exact); onnxruntime's default fused kernels were 1 to 133 steps away."""
    lib = mtvm.compile(model_path(name))
    x = np.load(os.path.join(MODELS_DIR, name + ".npz"))["in_0"]
    got = lib.run_host([x])
    ref, checks = validate_outputs(model_path(name), {"input": x}, got)
    for c in checks:
        print(f"{name}: {c.describe()}")
        assert c.step is not None         # compared in quantization steps
    assert all(c.ok for c in checks), [c.describe() for c in checks]


@needs_models
def test_cli_validate_ad_autoencoder_int8_says_ok_with_step_counts(tmp_path, capsys):
    """The reported case: MISMATCH (8 steps off onnxruntime's fused kernels) before."""
    d = str(tmp_path / "ad8")
    name = "ad_autoencoder_int8"
    assert cli(["project", "generate", model_path(name), "-o", d]) == 0
    assert cli(["project", "build", d]) == 0
    capsys.readouterr()
    for extra in (["--input", os.path.join(MODELS_DIR, name + ".npz")], ["--seed", "3"]):
        assert cli(["run", d, "--validate"] + extra) == 0
        out = capsys.readouterr().out
        import onnxruntime
        assert f"validation against onnxruntime {onnxruntime.__version__} (graph " \
               "optimizations off" in out
        assert re.search(r"output: max abs err [\d.e-]+ \(tolerance 0\.00115\).*in steps of "
                         r"0\.00115: max [01], \d+ of 640 element\(s\) off by one  OK", out), out


# -- profile ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("prof") / "p")
    proj = mtvm.project.generate(EXAMPLE, out_dir=d, profile=True, progress=quiet)
    proj.build(progress=quiet)
    return proj


def test_profile_is_a_median_over_runs_with_node_names(profiled):
    md = profiled.metadata["operators"]
    with profiled.session() as s:
        prof = s.executor.profile(runs=7)
    assert prof.runs == 7 and len(prof.rows) == len(md)
    for r, op in zip(prof.rows, md):
        assert r.nodes == op["nodes"] and r.nodes
        assert r.min_ticks <= r.ticks <= r.max_ticks
    assert prof.rows[1].nodes == ["fc1", "relu1"]
    assert "fc1, relu1" in prof.table() and "MACs/us" in prof.table()


def test_profile_with_warmup_runs_on_the_device(profiled):
    """PROFILE's first byte is a run count: the warm-up runs happen on the device
    back to back with the measured one (the host board's default in `mtvm run
    --profile`); the figures are the last run's, one per kernel."""
    md = profiled.metadata["operators"]
    with profiled.session() as s:
        warm = s.executor.profile(runs=3, warmup=5)
        with pytest.raises(mtvm.MtvmError, match="warmup must be 0..254"):
            s.executor.profile(runs=1, warmup=255)
    assert warm.runs == 3 and len(warm.rows) == len(md)
    assert all(0 < r.min_ticks <= r.ticks <= r.max_ticks for r in warm.rows)


def test_cli_profile_runs(profiled, capsys):
    assert cli(["run", profiled.dir, "--profile", "4"]) == 0
    out = capsys.readouterr().out
    assert "profile: median of 4 run(s) per kernel" in out and "spread" in out
    assert re.search(r"Gemm\+Relu .* fc1, relu1", out)
    with pytest.raises(SystemExit):                                # argparse: >= 1
        cli(["run", profiled.dir, "--profile", "0"])
    assert "the number of runs must be >= 1" in capsys.readouterr().err


# -- progress ---------------------------------------------------------------------------------
def test_progress_only_on_a_terminal(monkeypatch):
    monkeypatch.delenv("MTVM_PROGRESS", raising=False)
    buf = io.StringIO()                 # not a terminal: nothing
    with progress.bar(3, "work", stream=buf, delay=0) as b:
        b.update(3)
    with progress.waiting("booting", stream=buf, delay=0):
        pass
    assert buf.getvalue() == ""
    monkeypatch.setenv("MTVM_PROGRESS", "1")
    with progress.bar(3, "work", unit="run", stream=buf, delay=0) as b:
        b.update(3)
    assert "work:" in buf.getvalue() and "/3 [" in buf.getvalue()
    t = progress.Transfers(stream=buf, delay=0)       # a session's transfer callback
    for done in (1000, 2000, 2500):
        t(done, 2500, "input x")
    assert "input x" in buf.getvalue() and not t.bars


def test_benchmark_in_chunks_on_the_host(profiled):
    """Tiny chunks (one run per TIME request) still give one figure per repeat
    over all its runs."""
    with profiled.session() as s:
        ex = s.executor
        ex.CHUNK_SECONDS = 0.0
        sent = s.stats["requests"]
        res = ex.benchmark(number=5, repeat=2)
        assert s.stats["requests"] - sent >= 1 + 2 * 5        # warmup + one TIME per run
    assert len(res.per_repeat) == 2 and res.number == 5 and res.min > 0


@pytest.mark.device
@needs_qemu
@needs_models
def test_qemu_icount_profile_in_instructions_and_chunked_benchmark_unchanged(tmp_path):
    """Under QEMU -icount every run takes the same number of instructions: a
    benchmark sent in one-run chunks gives the figure of one TIME request, and
    `mtvm run --profile` reports instructions (not MACs per host tick); with
    MTVM_PROGRESS=1 the benchmark shows a progress bar."""
    proj = mtvm.project.generate(model_path("kws_dscnn_int8"), board="mps2-an386",
                                 out_dir=str(tmp_path / "p"),
                                 profile=True, progress=quiet)
    proj.build(progress=quiet)
    with proj.flash(progress=quiet, icount=True):
        with proj.session() as s:
            ex = s.executor
            tps = s.info().ticks_per_second
            one = ex.time(4)
            ex.CHUNK_SECONDS = 0.0
            chunked = ex.benchmark(number=4, repeat=1, warmup=0).median
            # one timer start/stop per chunk: a tick each; a resent request arriving
            # during a run (a loaded host) adds its UART interrupts: allow 0.1 %
            assert abs(chunked - one) * tps <= max(1.0, 1e-3 * one * tps), (chunked, one)
        # the bar at once: a benchmark faster than the default 1 s delay shows none
        env = dict(os.environ, MTVM_PROGRESS="1", MTVM_PROGRESS_DELAY="0")
        p = subprocess.run([sys.executable, "-m", "mtvm", "run", proj.dir, "--profile", "2",
                            "--benchmark", "100", "--repeat", "1"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "profile: median of 2 run(s) per kernel" in p.stdout
    assert "instructions" in p.stdout and "MACs/instr" in p.stdout
    assert "MACs/tick" not in p.stdout and "/f/f.0/Conv" in p.stdout
    m = re.search(r"total ([\d,]+) instructions", p.stdout)
    assert m and 1e6 < int(m.group(1).replace(",", "")) < 1e8
    assert "benchmark 1 x 100" in p.stderr and "run" in p.stderr     # the bar (tqdm)
    assert not proj.running()
