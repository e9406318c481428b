"""Host projects end to end: generation rules, the CLI (`mtvm project`,
`mtvm run`), standalone apps, and the four float models through a host-driven
session against their reference outputs."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import mtvm
from mtvm.cli import main as cli
from mtvm.errors import MtvmError

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "sensor_mlp.onnx")
EXAMPLE_NPZ = os.path.join(ROOT, "examples", "sensor_mlp.npz")
FLOAT_MODELS = ["kws_dscnn", "vww_mobilenetv1", "ic_resnet8", "ad_autoencoder"]


def quiet(msg):
    pass


def within_tolerance(actual, ref):
    tol = 1e-4 * max(float(np.abs(ref).max()), 1.0)
    err = float(np.abs(actual.astype(np.float64) - ref).max())
    assert err <= tol, f"max abs error {err} > {tol}"


def parse_standalone(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        m = re.match(r"^output (\d+) (.+) (\w+)\[([\d,]*)\]:(.*)$", line)
        if m:
            shape = [int(d) for d in m.group(4).split(",") if d]
            vals = np.array([float(v) for v in m.group(5).split()], np.float64)
            out[m.group(2)] = vals.reshape(shape)
    return out


@pytest.fixture(scope="module")
def cli_project(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("cli") / "proj")
    assert cli(["project", "generate", EXAMPLE, "--board", "host", "-o", d, "--profile"]) == 0
    assert cli(["project", "build", d]) == 0
    return d


# -- generation rules ---------------------------------------------------------------------
def test_generate_never_overwrites_without_force(tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    (d / "mine.txt").write_text("precious")
    with pytest.raises(MtvmError, match="not empty.*force"):
        mtvm.project.generate(EXAMPLE, out_dir=d, progress=quiet)
    assert (d / "mine.txt").read_text() == "precious"
    p = mtvm.project.generate(EXAMPLE, out_dir=tmp_path / "q", progress=quiet)
    with pytest.raises(MtvmError, match="not empty"):
        mtvm.project.generate(EXAMPLE, out_dir=p.dir, progress=quiet)
    p2 = mtvm.project.generate(EXAMPLE, out_dir=p.dir, force=True, kind="standalone",
                               progress=quiet)
    assert p2.kind == "standalone"


def test_project_file_and_layout(tmp_path):
    p = mtvm.project.generate(EXAMPLE, out_dir=tmp_path / "p", progress=quiet)
    with open(os.path.join(p.dir, "mtvm_project.json")) as f:
        info = json.load(f)
    assert info["board"] == "host" and info["kind"] == "host-driven"
    assert info["model_path"] == EXAMPLE and info["template"] == "host"
    for rel in ("Makefile", "src/main.c", "src/platform_posix.c", "src/mtvm_model_desc.c",
                "c_runtime/include/mtvm_server.h", "model/metadata.json",
                "model/codegen/host/include/tvmgen_default.h"):
        assert os.path.exists(p.path(rel)), rel
    assert mtvm.project.load(p.dir).metadata["model_name"] == "sensor_mlp"


def test_clear_errors(tmp_path):
    with pytest.raises(MtvmError, match="unknown board"):
        mtvm.project.generate(EXAMPLE, board="nope", out_dir=tmp_path / "a", progress=quiet)
    with pytest.raises(MtvmError, match="kind"):
        mtvm.project.generate(EXAMPLE, kind="weird", out_dir=tmp_path / "b", progress=quiet)
    with pytest.raises(MtvmError, match="not an mtvm project"):
        mtvm.project.load(tmp_path)
    p = mtvm.project.generate(EXAMPLE, out_dir=tmp_path / "c", progress=quiet)
    with pytest.raises(MtvmError, match="not built"):
        p.session()


# -- CLI --------------------------------------------------------------------------------------
def test_cli_run_input_and_validate(cli_project, tmp_path, capsys):
    with np.load(EXAMPLE_NPZ) as z:
        x, ref = z["in_0"], z["out_0"]
    np.save(tmp_path / "x.npy", x)
    x.tofile(tmp_path / "x.bin")
    for spec in (str(tmp_path / "x.npy"), EXAMPLE_NPZ, f"x={tmp_path / 'x.bin'}"):
        out_npz = str(tmp_path / "y.npz")
        assert cli(["run", cli_project, "--input", spec, "--output", out_npz,
                    "--validate"]) == 0
        out = capsys.readouterr().out
        assert "output probs: float32[1, 4]" in out and "OK" in out
        with np.load(out_npz) as y:
            within_tolerance(y["probs"], ref)


def test_cli_rejects_wrong_input_shape(cli_project, tmp_path, capsys):
    np.save(tmp_path / "bad.npy", np.zeros((1, 16, 3), np.float32))
    assert cli(["run", cli_project, "--input", str(tmp_path / "bad.npy")]) == 1
    err = capsys.readouterr().err
    assert 'input "x"' in err and "[1, 3, 16]" in err and "[1, 16, 3]" in err


def test_cli_benchmark_and_profile_print_device_timed_figures(cli_project, capsys):
    assert cli(["run", cli_project, "--benchmark", "20", "--repeat", "2", "--profile"]) == 0
    out = capsys.readouterr().out
    m = re.search(r"benchmark: 2 x 20 runs \(device timer, 1000000000 Hz\): mean ([\d.]+) "
                  r"(us|ms|s), median .* min .* max", out)
    assert m and float(m.group(1)) > 0, out
    assert "profile: median of 10 run(s) per kernel" in out
    for kind in ("Gemm+Relu", "Softmax", "total"):
        assert kind in out
    assert re.search(r"MACs/us", out) and "fc1, relu1" in out     # the kernel's ONNX nodes


def test_cli_profile_needs_a_profiling_build(tmp_path, capsys):
    d = str(tmp_path / "np")
    assert cli(["project", "generate", EXAMPLE, "-o", d]) == 0
    assert cli(["project", "build", d]) == 0
    assert cli(["run", d, "--profile"]) == 1
    assert "--profile" in capsys.readouterr().err


# -- standalone --------------------------------------------------------------------------------
def test_standalone_prints_reference_outputs(tmp_path, capsys):
    d = str(tmp_path / "app")
    assert cli(["project", "generate", EXAMPLE, "--kind", "standalone", "-o", d]) == 0
    assert cli(["project", "build", d]) == 0
    exe = os.path.join(d, "build", "mtvm_app")
    p = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    with np.load(EXAMPLE_NPZ) as z:
        ref = z["out_0"]
    outs = parse_standalone(p.stdout)
    within_tolerance(outs["probs"], ref)
    assert re.search(r"time per inference: \d+ us \(\d+ ticks at 1000000000 Hz\)", p.stdout)
    assert "done (status 0)" in p.stdout
    capsys.readouterr()
    assert cli(["run", d]) == 0                          # `mtvm run` runs a host standalone app
    assert "output 0 probs" in capsys.readouterr().out


def test_standalone_sample_option(tmp_path):
    x = np.full((1, 3, 16), 0.25, np.float32)
    np.savez(tmp_path / "s.npz", x=x)
    p = mtvm.project.generate(EXAMPLE, out_dir=tmp_path / "app", kind="standalone",
                              sample=str(tmp_path / "s.npz"), progress=quiet).build(quiet)
    r = subprocess.run([p.path("build", "mtvm_app")], capture_output=True, text=True)
    ref = mtvm.compile(EXAMPLE).run_host({"x": x})["probs"]
    within_tolerance(parse_standalone(r.stdout)["probs"], ref)


# -- the float models ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_float_model_host_driven_matches_reference(models_dir, tmp_path, name):
    path = os.path.join(models_dir, f"{name}.onnx")
    proj = mtvm.project.generate(path, out_dir=tmp_path / name, progress=quiet).build(quiet)
    with np.load(os.path.join(models_dir, f"{name}.npz")) as z:
        ins = [z[k] for k in sorted(z.files) if k.startswith("in_")]
        refs = [z[k] for k in sorted(z.files) if k.startswith("out_")]
    with proj.session() as sess:
        outs = list(sess.executor.run(ins).values())
        assert sess.executor.time(2) > 0
    assert len(outs) == len(refs)
    for a, r in zip(outs, refs):
        assert a.shape == r.shape
        within_tolerance(a, r)


def test_float_model_standalone_matches_reference(models_dir, tmp_path):
    path = os.path.join(models_dir, "kws_dscnn.onnx")          # sample: kws_dscnn.npz beside it
    proj = mtvm.project.generate(path, out_dir=tmp_path / "kws", kind="standalone",
                                 progress=quiet).build(quiet)
    r = subprocess.run([proj.path("build", "mtvm_app")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0
    with np.load(os.path.join(models_dir, "kws_dscnn.npz")) as z:
        ref = z["out_0"]
    outs = list(parse_standalone(r.stdout).values())
    within_tolerance(outs[0], ref)


def test_quickstart_example(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "quickstart.py"),
                        "--out", str(tmp_path / "qs")], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "output probs" in p.stdout and "benchmark:" in p.stdout and "Softmax" in p.stdout


def two_in_two_out(path):
    """int32 a, b -> (a + b, a * b): several inputs and outputs, integer dtypes."""
    import onnx
    from onnx import TensorProto, helper
    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["sum"], name="add"),
         helper.make_node("Mul", ["a", "b"], ["prod"], name="mul")], "two",
        [vi("a", TensorProto.INT32, [2, 3]), vi("b", TensorProto.INT32, [2, 3])],
        [vi("sum", TensorProto.INT32, [2, 3]), vi("prod", TensorProto.INT32, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_several_int_inputs_outputs_external_workspace(tmp_path, capsys):
    path = two_in_two_out(str(tmp_path / "two.onnx"))
    d = str(tmp_path / "p")
    assert cli(["project", "generate", path, "-o", d, "--external-workspace",
                "--module-name", "two"]) == 0
    assert cli(["project", "build", d]) == 0
    a = np.arange(6, dtype=np.int32).reshape(2, 3) - 2
    b = np.full((2, 3), 7, np.int32)
    np.save(tmp_path / "a.npy", a)
    b.tofile(tmp_path / "b.raw")
    assert cli(["run", d, "-i", f"a={tmp_path / 'a.npy'}", "-i", f"b={tmp_path / 'b.raw'}",
                "-o", str(tmp_path / "y.npz"), "--validate"]) == 0
    with np.load(tmp_path / "y.npz") as y:
        np.testing.assert_array_equal(y["sum"], a + b)
        np.testing.assert_array_equal(y["prod"], a * b)
    capsys.readouterr()
    assert cli(["run", d, "-i", str(tmp_path / "a.npy")]) == 1
    assert "NAME=FILE" in capsys.readouterr().err
    with mtvm.project.load(d).session() as s:
        with pytest.raises(MtvmError, match=r'input "a".*int32\[2, 3\].*int64'):
            s.executor.run({"a": np.full((2, 3), 2**40), "b": b})
        with pytest.raises(MtvmError, match=r'input "b".*float32'):
            s.executor.run({"a": a, "b": b.astype(np.float32)})
        y = s.executor.run({"a": a.astype(np.int64), "b": b})      # int64 that fits: cast
        np.testing.assert_array_equal(y["sum"], a + b)


def test_cli_validate_int8_model_within_one_step(models_dir, tmp_path, capsys):
    d = str(tmp_path / "k8")
    path = os.path.join(models_dir, "kws_dscnn_int8.onnx")
    assert cli(["project", "generate", path, "-o", d]) == 0
    assert cli(["project", "build", d]) == 0
    capsys.readouterr()
    assert cli(["run", d, "--input", os.path.join(models_dir, "kws_dscnn_int8.npz"),
                "--validate"]) == 0
    out = capsys.readouterr().out
    m = re.search(r"max abs err ([\d.e-]+) \(tolerance ([\d.e-]+)\).*OK", out)
    assert m and float(m.group(2)) > 1e-3, out           # one step of 1/255-ish, not 1e-4
