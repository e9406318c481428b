"""--float-io: a model with int8 inputs and outputs (QOperator QLinearConv) run
through a host-driven session with float data; the host quantizes inputs and
dequantizes outputs with the scale and zero point that metadata.json carries."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, TensorProto

import mtvm
from mtvm.cli import main as cli
from mtvm.session import quant_io

X_SCALE, X_ZP, Y_SCALE, Y_ZP = 0.05, -3, 0.1, 5


def qconv_model(path):
    w = np.random.default_rng(0).integers(-20, 20, (4, 3, 3, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(v, n) for n, v in [
        ("xs", np.float32(X_SCALE)), ("xz", np.int8(X_ZP)), ("w", w), ("ws", np.float32(0.02)),
        ("wz", np.int8(0)), ("ys", np.float32(Y_SCALE)), ("yz", np.int8(Y_ZP))]]
    g = helper.make_graph(
        [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                          pads=[1, 1, 1, 1])], "qconv",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 4, 8, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8   # what onnxruntime reads
    onnx.save(m, path)
    return path


def quiet(msg):
    pass


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    d = tmp_path_factory.mktemp("fio")
    p = mtvm.project.generate(str(qconv_model(d / "qconv.onnx")), out_dir=d / "proj",
                              progress=quiet)
    p.build(progress=quiet)
    return p


def test_session_carries_quantization_and_converts_at_the_edges(project):
    x = np.random.default_rng(1).uniform(-3, 3, (1, 3, 8, 8)).astype(np.float32)
    with project.session() as s:
        t_in, t_out = s.info().inputs[0], s.info().outputs[0]
        assert t_in.quantization["zero_point"] == [X_ZP]
        assert t_out.quantization["scale"] == [pytest.approx(Y_SCALE)]
        y_float = s.executor.run({"x": x}, float_io=True)["y"]
        y_int = s.executor.run({"x": quant_io.quantize(x, t_in.quantization, "int8", "x")})["y"]
    assert y_float.dtype == np.float32 and y_int.dtype == np.int8
    np.testing.assert_array_equal(y_float, (y_int.astype(np.float32) - Y_ZP) * np.float32(Y_SCALE))
    # Against onnxruntime on the quantized input: within one output step.
    import onnxruntime as ort
    sess = ort.InferenceSession(project.info["model_path"], providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": quant_io.quantize(x, t_in.quantization, "int8", "x")})[0]
    assert np.abs(y_int.astype(int) - ref.astype(int)).max() <= 1


def test_float_input_without_float_io_is_rejected(project):
    with project.session() as s, pytest.raises(mtvm.MtvmError, match="dtype mismatch"):
        s.executor.run({"x": np.zeros((1, 3, 8, 8), np.float32)})


def test_cli_float_io_validate(project, tmp_path, capsys):
    x = np.random.default_rng(2).uniform(-2, 2, (1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert cli(["run", project.dir, "--float-io", "--input", str(tmp_path / "x.npy"),
                "--validate"]) == 0
    out = capsys.readouterr().out
    assert "scale 0.05 zero point -3" in out and "OK" in out and "MISMATCH" not in out
