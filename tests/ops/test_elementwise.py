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
