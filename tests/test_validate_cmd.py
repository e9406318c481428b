"""`mtvm validate`: a dataset through the compiled model (host build, or a device through
a session) and through the reference, with metrics, top-1, reports and exit codes
(mtvm/dataset_validation.py, mtvm/cli/validate_cmd.py; docs/validation.md).

The samples are a shared model's reference input perturbed with seeded noise."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from mtvm import dataset_validation as dv
from mtvm.cli import main
from mtvm.errors import MtvmError

N = 20


def samples(models_dir, name, path, n=N, seed=0, key="in_0"):
    """n samples around the model's reference input (its .npz), [n, *input shape]."""
    with np.load(os.path.join(models_dir, f"{name}.npz")) as z:
        x = z["in_0"]
    rng = np.random.default_rng(seed)
    xs = x[None] + 0.3 * float(x.std()) * rng.standard_normal((n,) + x.shape)
    np.savez(path, **{key: xs.astype(np.float32)})
    return xs.astype(np.float32)


def run_cli(capsys, *argv):
    rc = main(["validate", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def kws8(models_dir, tmp_path):
    """kws_dscnn_int8, 20 samples and labels."""
    model = os.path.join(models_dir, "kws_dscnn_int8.onnx")
    data = tmp_path / "samples.npz"
    xs = samples(models_dir, "kws_dscnn_int8", data)
    labels = tmp_path / "labels.npy"
    np.save(labels, np.random.default_rng(1).integers(0, 12, N))
    return model, data, xs, labels


def test_int8_host_build_metrics_labels_and_reports(kws8, tmp_path, capsys):
    model, data, xs, labels = kws8
    rc, out, _ = run_cli(capsys, model, "--data", data, "--labels", labels,
                         "--report", tmp_path / "r.json", "--report", tmp_path / "r.html",
                         "--save-outputs", tmp_path / "y.npz")
    assert rc == 0, out
    assert "mtvm host build" in out and "onnxruntime" in out and "PASS" in out
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["passed"] and r["samples"] == N and r["failures"] == []
    (o,) = r["outputs"]
    assert o["name"] == "output" and o["samples"] == N and o["elements"] == N * 12
    # quantized output: compared in steps of its DequantizeLinear's scale, within one
    assert o["compared_as"].startswith("steps of") and o["max_steps"] <= 1
    assert 0 <= o["max_abs"] <= 1.001 / 255 and o["rmse"] <= o["max_abs"]
    assert o["cosine"] > 0.999 and o["min_cosine"] <= o["cosine"] + 1e-12 and o["l2r"] < 0.01
    t = r["top1"]
    assert t["samples"] == N and t["agreement"] >= 0.9
    assert 0 <= t["accuracy"] <= 1 and 0 <= t["reference_accuracy"] <= 1
    assert abs(t["accuracy"] - t["reference_accuracy"]) <= 1 - t["agreement"] + 1e-9
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page and "PASS" in page
    assert "http" not in page                            # self-contained
    with np.load(tmp_path / "y.npz") as z:
        assert z["output"].shape == (N, 1, 12) and z["reference/output"].shape == (N, 1, 12)
        # the saved outputs are the host build's on each sample
        import mtvm
        host = mtvm.compile(model).run_host({"input": xs[3]})["output"]
        np.testing.assert_array_equal(z["output"][3], host)


def test_float_model_metrics_and_a_forced_failure(models_dir, tmp_path, capsys):
    model = os.path.join(models_dir, "har_cnn1d.onnx")
    data = tmp_path / "har.npz"
    samples(models_dir, "har_cnn1d", data, key="input")       # keyed by the input's name
    rc, out, _ = run_cli(capsys, model, "--data", data, "--report", tmp_path / "ok.json")
    assert rc == 0, out
    (o,) = json.loads((tmp_path / "ok.json").read_text())["outputs"]
    assert o["compared_as"] == "float" and o["max_steps"] is None
    assert o["max_abs"] < 1e-4 and o["cosine"] > 0.999999 and o["l2r"] < 1e-4
    assert "top-1 of output: agreement 20/20" in out          # [1, 6] class scores
    # a tolerance tighter than float32 rounding: exit code 1, named in the report
    rc, out, _ = run_cli(capsys, model, "--data", data, "--rtol", "1e-12",
                         "--report", tmp_path / "bad.json")
    if json.loads((tmp_path / "ok.json").read_text())["outputs"][0]["max_abs"] == 0:
        pytest.skip("bit-identical to onnxruntime: no float tolerance can fail")
    assert rc == 1 and "FAIL: output:" in out and "beyond rtol 1e-12" in out
    bad = json.loads((tmp_path / "bad.json").read_text())
    assert not bad["passed"] and bad["outputs"][0]["ok"] is False


def test_int8_against_the_float_model(kws8, models_dir, tmp_path, capsys):
    """--reference: the quantization error, reported (no default tolerance), and a stated
    tolerance that the int8 model cannot meet fails through the real command line."""
    model, data, _, labels = kws8
    ref = os.path.join(models_dir, "kws_dscnn.onnx")
    rc, out, _ = run_cli(capsys, model, "--data", data, "--reference", ref, "--labels", labels,
                         "--report", tmp_path / "r.json")
    assert rc == 0, out
    assert f"{ref} in onnxruntime" in out and "tolerances: none (report only)" in out
    r = json.loads((tmp_path / "r.json").read_text())
    (o,) = r["outputs"]
    assert 0 < o["max_abs"] < 0.1 and o["cosine"] > 0.99        # close, not equal
    assert r["top1"]["agreement"] >= 0.8
    p = subprocess.run([sys.executable, "-m", "mtvm", "validate", model, "--data", str(data),
                        "--reference", ref, "--max-abs", "1e-6"],
                       capture_output=True, text=True)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL: output: max abs error" in p.stdout and "> 1e-06" in p.stdout


def test_directory_of_samples_gives_the_same_result(kws8, tmp_path):
    model, data, xs, _ = kws8
    d = tmp_path / "dir"
    d.mkdir()
    for i in range(5):          # .npy and .npz (keyed by name), one sample each, the batch
        if i % 2:               # axis dropped on some
            np.save(d / f"s{i:02d}.npy", xs[i][0])
        else:
            np.savez(d / f"s{i:02d}.npz", input=xs[i])
    (d / "README.txt").write_text("not a sample")
    host = dv.HostBuild(model)
    from_dir = dv.load_dataset(d, host.inputs)
    from_npz = dv.load_dataset(data, host.inputs)
    assert len(from_dir) == 5 and len(from_npz) == N
    np.testing.assert_array_equal(from_dir.arrays["input"], from_npz.arrays["input"][:5])
    a = dv.validate_dataset(model, from_dir, host)
    b = dv.validate_dataset(model, from_npz, host, limit=5)
    assert a.ok and b.ok and a.samples == b.samples == 5
    for k in a.mtvm_outputs:
        np.testing.assert_array_equal(a.mtvm_outputs[k], b.mtvm_outputs[k])
    assert "PASS" in a.summary() and a.table().splitlines()[0].startswith("output")


def _bad_data(tmp_path, x):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "empty_dir").mkdir()
    np.savez(d / "wrong_key.npz", features=x)
    np.savez(d / "wrong_shape.npz", in_0=x[:, :, :, :40])
    np.savez(d / "wrong_dtype.npz", in_0=x.astype(np.complex64))
    np.savez(d / "quantized.npz", in_0=np.zeros((3, 1, 1, 49, 10), np.int8) + 0.5)
    np.savez(d / "no_samples.npz", in_0=x[:0])
    (d / "not_numpy.npz").write_bytes(b"hello")
    return d


@pytest.mark.parametrize("name, message", [
    ("wrong_key.npz", 'has no array for input "input" (looked for input or in_0); '
                      "its arrays: features"),
    ("wrong_shape.npz", 'input "input": {p} has shape [20, 1, 1, 40, 10]; expected '
                        "[N, 1, 1, 49, 10]"),
    ("wrong_dtype.npz", 'input "input": {p} is complex64, the model takes float32'),
    ("no_samples.npz", "{p} holds no samples"),
    ("not_numpy.npz", "cannot read {p}: not an .npz file"),
    ("empty_dir", "{p} holds no .npy or .npz files"),
    ("missing.npz", "--data {p} not found"),
])
def test_bad_data_is_one_clear_line(kws8, tmp_path, capsys, name, message):
    model, _, xs, _ = kws8
    path = _bad_data(tmp_path, xs) / name
    rc, out, err = run_cli(capsys, model, "--data", path)
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert message.format(p=path) in err, err


def test_bad_labels_and_options(kws8, tmp_path, capsys):
    model, data, _, _ = kws8
    np.save(tmp_path / "few.npy", np.zeros(3, np.int64))
    np.save(tmp_path / "big.npy", np.full(N, 40))
    for argv, message in (
            (["--labels", tmp_path / "few.npy"], "has 3 label(s), the data 20 sample(s)"),
            (["--labels", tmp_path / "big.npy"], 'a label is 40, but output "output" has 12'),
            (["--report", tmp_path / "r.txt"], "expected a path ending in .json or .html"),
            (["--min-agreement", "95"], "--min-agreement is a fraction from 0 to 1"),
            (["--min-accuracy", "0.5"], "a minimum accuracy needs labels")):
        rc, out, err = run_cli(capsys, model, "--data", data, *argv)
        assert rc == 1 and err.count("\n") == 1 and message in err, err


def test_python_api_quantized_data_and_tolerances(kws8):
    """Integer data for a float input is converted; float data for an integer input is not."""
    model, _, xs, _ = kws8
    host = dv.HostBuild(model)
    data = dv.Dataset({"input": np.round(xs[:4] * 10).astype(np.int16)}, "ints")
    res = dv.validate_dataset(model, data, host, tolerances=dv.Tolerances(max_steps=0))
    assert res.ok and res.outputs[0].max_steps == 0
    spec = dv.TensorSpec("q", (1, 4), np.dtype(np.int8))
    with pytest.raises(MtvmError, match="is float32, the model takes int8 .quantize it"):
        dv._stacked(spec, np.zeros((2, 1, 4), np.float32), "x.npz")
    with pytest.raises(MtvmError, match="values 0..300, outside int8"):
        dv._stacked(spec, np.array([[[0, 300, 0, 0]]]), "x.npz")


# -- on a device --------------------------------------------------------------------------
def _need_qemu():
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (apt-get install gcc-arm-none-eabi "
                        "libnewlib-arm-none-eabi qemu-system-arm)")


@pytest.mark.device
def test_vww_int8_on_an386_matches_the_host_build(models_dir, tmp_path, capsys):
    """20 samples of vww_mobilenetv1_int8 on the emulated Cortex-M4 through a session
    (the float model as --reference): bit-identical to the host build, and the
    int8-vs-float top-1 agreement. (One device pass: 110 KB per sample over the
    emulated UART take about 3 s.)"""
    _need_qemu()
    import mtvm
    import mtvm.project as P
    model = os.path.join(models_dir, "vww_mobilenetv1_int8.onnx")
    ref = os.path.join(models_dir, "vww_mobilenetv1.onnx")
    data = tmp_path / "vww.npz"
    xs = samples(models_dir, "vww_mobilenetv1_int8", data)
    proj = P.generate(model, board="mps2-an386", out_dir=str(tmp_path / "proj"),
                      progress=lambda m: None)
    proj.build(progress=lambda m: None)
    rc, out, err = run_cli(capsys, model, "--data", data, "--project", proj.dir,
                           "--reference", ref, "--report", tmp_path / "r.json",
                           "--save-outputs", tmp_path / "device.npz", "--host-exact")
    assert rc == 0, out + err
    assert not proj.running()                  # the session's emulator is stopped
    assert "mtvm on mps2-an386 (session)" in out
    assert f"device vs host build: bit-identical on {N}/{N} samples" in out
    assert "top-1 of output: agreement" in out
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["host_agreement"]["exact"] and r["host_agreement"]["samples"] == N
    assert r["top1"]["samples"] == N and 0.5 <= r["top1"]["agreement"] <= 1
    (o,) = r["outputs"]
    assert o["samples"] == N and o["compared_as"].startswith("steps of")
    assert o["cosine"] > 0.9 and np.isfinite(o["max_abs"])
    assert len(r["device_seconds"]) == N
    # the device's outputs, saved, against a host build run here
    host = mtvm.compile(model)
    with np.load(tmp_path / "device.npz") as z:
        dev = z["output"]
    want = np.stack([host.run_host({"input": x})["output"] for x in xs])
    np.testing.assert_array_equal(dev, want)
    # the same device outputs against onnxruntime on the int8 model: within one step
    same = dv.validate_dataset(model, dv.load_dataset(data, host.metadata["inputs"]),
                               dv.HostBuild(host))
    assert same.ok and same.outputs[0].max_steps <= 1
    np.testing.assert_array_equal(same.mtvm_outputs["output"], dev)


@pytest.mark.device
def test_board_option_builds_a_temporary_project(models_dir, tmp_path, capsys):
    _need_qemu()
    model = os.path.join(models_dir, "kws_dscnn_int8.onnx")
    data = tmp_path / "kws.npz"
    samples(models_dir, "kws_dscnn_int8", data, n=3)
    rc, out, err = run_cli(capsys, model, "--data", data, "--board", "mps2-an386",
                           "--host-exact")
    assert rc == 0, out + err
    assert "mtvm on mps2-an386 (session)" in out and "bit-identical on 3/3 samples" in out
    assert "PASS" in out


def test_two_inputs_two_outputs(tmp_path, capsys):
    """One array per input keyed by name or in_<i>; every output gets its row."""
    import onnx
    from onnx import TensorProto, helper
    io = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["sum"]),
                           helper.make_node("Mul", ["a", "b"], ["prod"])], "two",
                          [io("a", [1, 4]), io("b", [1, 4])], [io("sum", [1, 4]),
                                                               io("prod", [1, 4])])
    model = tmp_path / "two.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", a=rng.standard_normal((6, 1, 4)).astype(np.float32),
             in_1=rng.standard_normal((6, 4)).astype(np.float32))
    rc, out, err = run_cli(capsys, model, "--data", tmp_path / "d.npz", "--report",
                           tmp_path / "r.json")
    assert rc == 0, out + err
    r = json.loads((tmp_path / "r.json").read_text())
    assert [o["name"] for o in r["outputs"]] == ["sum", "prod"]
    assert all(o["samples"] == 6 and o["max_abs"] == 0 for o in r["outputs"])
    np.savez(tmp_path / "uneven.npz", a=np.zeros((6, 1, 4), np.float32),
             b=np.zeros((5, 1, 4), np.float32))
    rc, _, err = run_cli(capsys, model, "--data", tmp_path / "uneven.npz")
    assert rc == 1 and "the inputs have different numbers of samples (a: 6, b: 5)" in err
    np.save(tmp_path / "one.npy", np.zeros((6, 1, 4), np.float32))
    rc, _, err = run_cli(capsys, model, "--data", tmp_path / "one.npy")
    assert rc == 1 and "holds one array; the model has 2 inputs (a, b)" in err


def test_host_project_through_a_session(kws8, models_dir, tmp_path, capsys):
    """--project on a host-board project: the native server over its stdin/stdout, the
    same session code as a board; bit-identical to the in-process host build."""
    import mtvm.project as P
    model, data, _, _ = kws8
    proj = P.generate(model, board="host", out_dir=str(tmp_path / "proj"),
                      progress=lambda m: None)
    proj.build(progress=lambda m: None)
    rc, out, err = run_cli(capsys, model, "--data", data, "--project", proj.dir, "--limit", "5",
                           "--host-exact", "--report", tmp_path / "r.json")
    assert rc == 0, out + err
    assert "mtvm on host (session)" in out and "bit-identical on 5/5 samples" in out
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["samples"] == 5 and r["host_agreement"]["exact"] and len(r["device_seconds"]) == 5
    # another model than the project's: refused before anything runs
    other = os.path.join(models_dir, "har_cnn1d.onnx")
    rc, out, err = run_cli(capsys, other, "--data", data, "--project", proj.dir)
    assert rc == 1 and "unlike" in err and "is it the project's model?" in err


def _tie_model(path, unfused: bool = False):
    """Two quantized 1x1 convs. The first one's requantization multiplier is exactly
    1/2 (input scale 0.1, weight scale 2^-6, output scale 0.1 * 2^-5), so an odd
    integer sum lands exactly on an x.5 tie; the second multiplies by 3. The ONNX
    semantics (dequantize, float32 conv, quantize) see 0.1 * k rounded in float32
    and round some ties the other way, 3 steps at the output. unfused: the first
    conv's dequantized input is a graph output too, so onnxruntime's optimizer
    leaves that conv in float32 rather than fusing it into QLinearConv."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper as nh
    s_in = np.float32(0.1)
    s_y1 = np.float32(s_in * np.float32(2.0 ** -5))
    consts = {"s_in": s_in, "z": np.int8(0), "s_y1": s_y1, "one": np.float32(1.0),
              "w1q": np.array([3, -5, -4, -3], np.int8).reshape(1, 4, 1, 1),
              "s_w1": np.float32(2.0 ** -6), "w2q": np.full((1, 1, 1, 1), 3, np.int8)}
    chain = [("QuantizeLinear", ["x", "s_in", "z"], "xq"),
             ("DequantizeLinear", ["xq", "s_in", "z"], "xd"),
             ("DequantizeLinear", ["w1q", "s_w1", "z"], "w1"),
             ("Conv", ["xd", "w1"], "c1"),
             ("QuantizeLinear", ["c1", "s_y1", "z"], "y1q"),
             ("DequantizeLinear", ["y1q", "s_y1", "z"], "y1"),
             ("DequantizeLinear", ["w2q", "one", "z"], "w2"),
             ("Conv", ["y1", "w2"], "c2"),
             ("QuantizeLinear", ["c2", "s_y1", "z"], "yq"),
             ("DequantizeLinear", ["yq", "s_y1", "z"], "y")]
    g = helper.make_graph(
        [helper.make_node(op, ins, [out]) for op, ins, out in chain], "ties",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 64])]
        + ([helper.make_tensor_value_info("xd", TensorProto.FLOAT, [1, 4, 1, 64])]
           if unfused else []),
        [nh.from_array(np.asarray(v), k) for k, v in consts.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return float(s_y1)


def test_float_reference_rounding_ties_pass_by_the_integer_kernels(tmp_path):
    """The float reference rounds exact ties of the integer arithmetic either way,
    and a later layer makes that 3 steps: the sample passes when it is within one
    step of onnxruntime's integer kernels, with a note saying so. A real error
    still fails."""
    model = tmp_path / "ties.onnx"
    step = _tie_model(model)
    x = np.random.default_rng(3).integers(-4, 5, (2, 1, 4, 1, 64)) * np.float32(0.1)
    data = dv.Dataset({"x": x.astype(np.float32)}, "ties")
    build = dv.HostBuild(str(model))
    r = dv.validate_dataset(str(model), data, build)
    (o,) = r.outputs
    assert r.ok, r.summary()
    assert o.max_steps == pytest.approx(3, abs=1e-3) and o.beyond > 0
    assert o.integer_kernel_samples == [0, 1]
    assert "integer kernels" in o.note and "ties" in o.note
    from mtvm.validate import validate_outputs     # `mtvm run --validate`, the tuner
    outs = build.run(data.sample(0))
    _, (c,) = validate_outputs(str(model), data.sample(0), outs)
    assert c.ok and c.max_steps == pytest.approx(3, abs=1e-3) and "integer kernels" in c.note
    outs["y"].flat[0] += 2 * step
    _, (c,) = validate_outputs(str(model), data.sample(0), outs)
    assert not c.ok

    class OneStepMore:           # the host build with one output value 2 steps off
        inputs, outputs, name = build.inputs, build.outputs, "host build, one value +2 steps"

        def run(self, sample):
            outs = build.run(sample)
            outs["y"] = outs["y"].copy()
            outs["y"].flat[0] += 2 * step
            return outs

    r = dv.validate_dataset(str(model), data, OneStepMore())
    assert not r.ok and r.outputs[0].integer_kernel_samples == []
    assert "more than 1 quantization step(s) off" in r.failures[0]


def test_ties_of_layers_onnxruntime_does_not_fuse_pass_by_exact_arithmetic(tmp_path):
    """The same ties in a conv onnxruntime leaves in float32 even with its graph
    optimizations on: its integer kernels are 3 steps off too, the float64
    reference (mtvm.exact_reference) is not, and the samples pass by it."""
    model = tmp_path / "ties.onnx"
    step = _tie_model(model, unfused=True)
    x = np.random.default_rng(3).integers(-4, 5, (2, 1, 4, 1, 64)) * np.float32(0.1)
    data = dv.Dataset({"x": x.astype(np.float32)}, "ties")
    build = dv.HostBuild(str(model))
    from mtvm.validate import IntegerKernels, validate_outputs
    outs = build.run(data.sample(0))
    integer = IntegerKernels(str(model)).run(data.sample(0))
    assert np.abs(outs["y"] - integer[0]).max() / step == pytest.approx(3, abs=1e-3)
    r = dv.validate_dataset(str(model), data, build)
    o = r.outputs[0]
    assert r.ok, r.summary()
    assert o.max_steps == pytest.approx(3, abs=1e-3)
    assert o.integer_kernel_samples == [] and o.exact_arithmetic_samples == [0, 1]
    assert "exact-arithmetic reference in float64 (2 sample(s))" in o.note
    _, checks = validate_outputs(str(model), data.sample(0), outs)
    assert all(c.ok for c in checks) and "exact-arithmetic" in checks[0].note
    outs["y"].flat[0] += 2 * step
    _, checks = validate_outputs(str(model), data.sample(0), outs)
    assert not checks[0].ok


def test_backend_llvm_runs_the_samples_through_the_jit(tmp_path, capsys):
    """`mtvm validate --backend llvm`: the host build is the LLVM backend's object
    code through the JIT (no shared library is built from C: there is no C)."""
    pytest.importorskip("llvmlite")
    model = tmp_path / "ties.onnx"
    _tie_model(model)
    data = tmp_path / "x.npz"
    x = np.random.default_rng(5).integers(-4, 5, (3, 1, 4, 1, 64)) * np.float32(0.1)
    np.savez(data, x=x.astype(np.float32))
    rc, out, err = run_cli(capsys, model, "--data", data, "--backend", "llvm")
    assert rc == 0, out + err
    assert "llvm backend, JIT" in out and "PASS" in out
    import mtvm
    from mtvm.errors import MtvmError
    from mtvm.host_runner import build_shared
    with pytest.raises(MtvmError, match="llvm backend: it runs on the host through"):
        build_shared(mtvm.compile(str(model), backend="llvm"))
