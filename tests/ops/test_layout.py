"""Transpose, Concat, Pad against onnx.reference: permutations, negative axes,
N inputs, every Pad mode with pads as inputs (opset 11) and with axes (opset 18)."""
import numpy as np
import pytest

from mtvm.testing import check_model, make_model

rng = np.random.default_rng(5)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


TRANSPOSE = [((2, 3), None), ((2, 3, 4), None), ((2, 3, 4, 5), [0, 2, 3, 1]),
             ((2, 3, 4, 5), [0, 3, 1, 2]), ((1, 3, 1, 4), [2, 3, 0, 1]), ((2, 3, 4), [0, 1, 2]),
             ((3, 4, 5), [1, 0, 2])]


@pytest.mark.parametrize("shape,perm", TRANSPOSE, ids=str)
def test_transpose(shape, perm):
    x = randn(*shape)
    attrs = {} if perm is None else {"perm": perm}
    check_model(make_model("Transpose", {"x": x}, attrs), {"x": x},
                sanitize=perm == [0, 3, 1, 2])


def test_transpose_int8():
    x = rng.integers(-100, 100, (2, 3, 4)).astype(np.int8)
    check_model(make_model("Transpose", {"x": x}, {"perm": [2, 0, 1]}), {"x": x})


CONCAT = [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 5)], 1), ([(2, 3), (2, 1), (2, 4)], -1),
          ([(1, 2, 3, 3), (1, 5, 3, 3)], 1), ([(2, 2, 3), (2, 2, 3), (2, 2, 3)], -2),
          ([(4,), (0,), (3,)], 0), ([(2, 3)], 1)]


@pytest.mark.parametrize("shapes,axis", CONCAT, ids=str)
@pytest.mark.parametrize("opset", [11, 13])
def test_concat(shapes, axis, opset):
    inputs = {f"x{i}": randn(*s) for i, s in enumerate(shapes)}
    check_model(make_model("Concat", inputs, {"axis": axis}, opset=opset), inputs,
                sanitize=len(shapes) == 3 and opset == 13)


def test_concat_with_constant():
    x = randn(2, 3)
    check_model(make_model("Concat", {"x": x}, {"axis": 0}, consts={"c": randn(1, 3)}), {"x": x})


PADS = [((3, 4), [1, 2, 0, 1]), ((1, 2, 4, 5), [0, 0, 1, 2, 0, 0, 2, 1]),
        ((2, 3, 4), [0, 1, 2, 1, 0, 3]), ((5,), [3, 2]), ((3, 4), [0, 0, 0, 0])]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("shape,pads", PADS, ids=str)
def test_pad_opset11(mode, shape, pads):
    x = randn(*shape)
    consts = {"pads": np.array(pads, np.int64)}
    order = ["x", "pads"]
    if mode == "constant":
        consts["value"] = np.array(1.5, np.float32)
        order.append("value")
    model = make_model("Pad", {"x": x}, {"mode": mode}, consts=consts, input_order=order,
                       opset=11)
    check_model(model, {"x": x}, sanitize=shape == (2, 3, 4) and mode == "reflect")


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("axes,pads", [([1, 2], [1, 2, 2, 1]), ([-1], [0, 3]), ([0], [1, 1])],
                         ids=str)
def test_pad_opset19_axes(mode, axes, pads):
    x = randn(2, 4, 5)
    consts = {"pads": np.array(pads, np.int64), "axes": np.array(axes, np.int64)}
    model = make_model("Pad", {"x": x}, {"mode": mode}, consts=consts,
                       input_order=["x", "pads", "", "axes"], opset=19 if mode == "wrap" else 18)
    check_model(model, {"x": x}, sanitize=mode == "wrap" and axes == [1, 2])


def test_pad_runtime_constant_value():
    x, value = randn(2, 3), np.array(-2.5, np.float32)
    model = make_model("Pad", {"x": x, "value": value}, {"mode": "constant"},
                       consts={"pads": np.array([1, 0, 0, 2], np.int64)},
                       input_order=["x", "pads", "value"], opset=13)
    check_model(model, {"x": x, "value": value})


def test_pad_default_value_and_fused_relu():
    import onnx
    from onnx import helper, numpy_helper
    x = randn(1, 2, 3, 3)
    g = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["p"]), helper.make_node("Relu", ["p"], ["y"])],
        "pad_relu", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)],
        [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    lib = check_model(onnx.shape_inference.infer_shapes(m), {"x": x})
    assert len(lib.graph.nodes) == 1


@pytest.mark.parametrize("mode,opset,pads", [
    ("constant", 13, [0, -1, 2, -1, 1, 0, -2, 2]), ("edge", 13, [1, -1, 0, 4, 0, 1, -2, 3]),
    ("reflect", 13, [0, -1, 1, 1, 1, 0, -2, 2]), ("wrap", 19, [0, -1, 2, 1, 1, 0, -2, 3])])
def test_pad_negative_crops(mode, opset, pads):
    """onnx.reference (np.pad) rejects negative pads; onnxruntime crops first."""
    import onnxruntime as ort
    import mtvm
    from mtvm.testing import assert_close
    x = randn(2, 3, 4, 5)
    model = make_model("Pad", {"x": x}, {"mode": mode},
                       consts={"pads": np.array(pads, np.int64)}, opset=opset)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    lib = mtvm.compile(model)
    assert_close(list(lib.run_host({"x": x}, sanitize=mode == "wrap").values())[0],
                 sess.run(None, {"x": x})[0], what=mode)


def test_pad_reflect_too_wide_is_an_error():
    import mtvm
    from mtvm.errors import UnsupportedError
    x = randn(2, 3)
    model = make_model("Pad", {"x": x}, {"mode": "reflect"},
                       consts={"pads": np.array([0, 3, 0, 0], np.int64)}, opset=13)
    with pytest.raises(UnsupportedError, match="reflect"):
        mtvm.compile(model)
