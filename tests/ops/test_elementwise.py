"""Elementwise operators against onnx.reference, several shapes and attributes."""
import numpy as np
import pytest

from mtvm.testing import check_model, make_model

rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


UNARY = [("Relu", {}), ("Sigmoid", {}), ("Tanh", {}), ("Exp", {}), ("Neg", {}), ("Abs", {}),
         ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.3}), ("HardSigmoid", {}),
         ("HardSigmoid", {"alpha": 0.5, "beta": 0.2}), ("HardSwish", {}), ("Floor", {}),
         ("Ceil", {}), ("Sin", {}), ("Cos", {})]


@pytest.mark.parametrize("op,attrs", UNARY, ids=lambda v: str(v))
@pytest.mark.parametrize("shape", [(7,), (2, 3, 4, 5)])
def test_unary(op, attrs, shape):
    check_model(make_model(op, {"x": randn(*shape) * 3}, attrs), {"x": randn(*shape) * 3})


@pytest.mark.parametrize("op", ["Sqrt", "Log", "Reciprocal"])
def test_unary_positive(op):
    x = np.abs(randn(3, 5)) + 0.1
    check_model(make_model(op, {"x": x}), {"x": x})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
@pytest.mark.parametrize("sa,sb", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3, 1), (2, 1, 5)),
                                   ((2, 3, 4, 5), (3, 1, 1)), ((), (3, 2))])
def test_binary_broadcast(op, sa, sb):
    a, b = randn(*sa), randn(*sb)
    if op == "Div":
        b = np.where(np.abs(b) < 0.2, 1.0, b).astype(np.float32)
    check_model(make_model(op, {"a": a, "b": b}), {"a": a, "b": b}, sanitize=sa == (1, 3, 1))


def test_binary_with_constant_operand():
    a, b = randn(2, 4, 3), randn(4, 1)
    check_model(make_model("Mul", {"a": a}, consts={"b": b}), {"a": a})


@pytest.mark.parametrize("opset,kwargs", [(11, {}), (11, {"lo": -0.5}), (13, {"lo": -0.5, "hi": 0.7}),
                                          (13, {"hi": 0.25})])
def test_clip(opset, kwargs):
    x = randn(3, 8)
    consts = {}
    order = ["x", "", ""]
    if "lo" in kwargs:
        consts["lo"] = np.float32(kwargs["lo"])
        order[1] = "lo"
    if "hi" in kwargs:
        consts["hi"] = np.float32(kwargs["hi"])
        order[2] = "hi"
    while order and not order[-1]:
        order.pop()
    m = make_model("Clip", {"x": x}, consts=consts, input_order=order, opset=opset)
    check_model(m, {"x": x}, sanitize=opset == 13)


def test_pow():
    a = np.abs(randn(2, 3)) + 0.5
    b = randn(3)
    check_model(make_model("Pow", {"a": a, "b": b}), {"a": a, "b": b})


def test_softplus_of_large_inputs_is_the_input():
    """log(1 + e^x) as x + log1p(e^-x) for x > 0: e^x overflowed above 88.7 (inf where
    onnxruntime gives x); small, negative and special values as before."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    import mtvm
    x = np.array([[-1e4, -100, -20, -1, 0, 1e-30, 1, 20, 88, 89, 100, 1e4, np.inf, -np.inf,
                   np.nan]], np.float32)
    g = helper.make_graph([helper.make_node("Softplus", ["x"], ["y"])], "sp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    for backend in ("c", "llvm"):
        if backend == "llvm":
            pytest.importorskip("llvmlite")
        got = mtvm.compile(m, backend=backend).run_host({"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
