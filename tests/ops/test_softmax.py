"""Softmax, LogSoftmax, Hardmax against onnx.reference: opset 11 (coerce to 2-D
at axis) and opset 13 (one axis), several axes, large inputs (stability)."""
import numpy as np
import pytest

from mtvm.testing import check_model, make_model

rng = np.random.default_rng(4)

# (shape, axis or None for the default)
CASES = [((3, 10), None), ((2, 3, 4), None), ((2, 3, 4), 1), ((2, 3, 4), 0),
         ((2, 3, 4, 5), -2), ((7,), 0), ((2, 1, 5), 1)]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("shape,axis", CASES, ids=str)
def test_softmax_family(op, opset, shape, axis):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    if op == "Hardmax":
        x = np.round(x)   # ties: the first maximum wins
    attrs = {} if axis is None else {"axis": axis}
    model = make_model(op, {"x": x}, attrs, opset=opset)
    if opset < 13:
        check_against_onnxruntime(model, {"x": x})
        return
    sanitize = shape == (2, 3, 4) and axis == 1
    check_model(model, {"x": x}, sanitize=sanitize)


def check_against_onnxruntime(model, inputs):
    """onnx.reference implements only the opset-13 semantics of this family;
    onnxruntime implements the older "coerce to 2-D" one, so it is the oracle."""
    import onnxruntime as ort
    import mtvm
    from mtvm.interp import interpret
    from mtvm.testing import assert_close
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, inputs)[0]
    lib = mtvm.compile(model)
    assert_close(list(lib.run_host(inputs).values())[0], expected, what="C")
    assert_close(list(interpret(lib.graph, inputs).values())[0], expected, what="interp")


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_large_inputs_are_stable(op):
    """exp(500) overflows float32: only x - max(x) keeps this finite. The oracle is
    float64 NumPy (onnx.reference's LogSoftmax gives -inf where exp underflows)."""
    import mtvm
    from mtvm.testing import assert_close
    x = (rng.standard_normal((4, 16)) * 50 + 500).astype(np.float32)
    s = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(s).sum(axis=-1, keepdims=True))
    expected = np.exp(s - lse) if op == "Softmax" else s - lse
    got = list(mtvm.compile(make_model(op, {"x": x}, opset=13)).run_host({"x": x}).values())[0]
    assert np.all(np.isfinite(got))
    assert_close(got, expected.astype(np.float32))


def test_gemm_softmax_is_two_kernels_and_relu_fuses_into_softmax():
    from onnx import helper
    import onnx
    from onnx import numpy_helper
    x = rng.standard_normal((2, 6)).astype(np.float32)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["g"]),
         helper.make_node("Softmax", ["g"], ["s"]),
         helper.make_node("Neg", ["s"], ["y"])], "classifier",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)],
        [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    lib = check_model(onnx.shape_inference.infer_shapes(m), {"x": x})
    assert [n.op for n in lib.graph.nodes] == ["Gemm", "Softmax"]


def test_logsoftmax_of_large_logits_keeps_its_precision():
    """(x - max) - log(sum), not x - (max + log(sum)): logits of 1e6 lost 1e-2 to the
    rounding of max + log(sum); now within float rounding of float64, in C and LLVM."""
    import onnx
    from onnx import TensorProto, helper

    import mtvm
    rng = np.random.default_rng(5)
    for scale in (100.0, 1e4, 1e6):
        x = (rng.standard_normal((2, 20)) * 3 + scale).astype(np.float32)
        g = helper.make_graph([helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)], "ls",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 20])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 20])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        onnx.checker.check_model(m)
        x64 = x.astype(np.float64)
        s = x64 - x64.max(axis=1, keepdims=True)
        exact = s - np.log(np.exp(s).sum(axis=1, keepdims=True))
        for backend in ("c", "llvm"):
            if backend == "llvm":
                pytest.importorskip("llvmlite")
            got = mtvm.compile(m, backend=backend).run_host({"x": x})["y"]
            assert np.abs(got - exact).max() < 1e-5, (scale, backend)
