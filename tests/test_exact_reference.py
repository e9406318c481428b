"""mtvm.exact_reference: a quantized model in float64 with the ONNX reference
evaluator, against onnxruntime (graph optimizations off) on models without ties,
and where it must keep float32 (quantizing float32 graph inputs)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper as nh

from mtvm.exact_reference import ExactReference
from mtvm.validate import ort_session

RNG = np.random.default_rng(11)


def _model(nodes, inputs, outputs, consts, opset=17):
    g = helper.make_graph(nodes, "exact", inputs, outputs,
                          [nh.from_array(np.asarray(v), k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 21 else 10
    return m


def _ort(m, feeds):
    return ort_session(m).run(None, feeds)


def test_per_channel_conv_with_constants_and_casts_within_one_step_of_onnxruntime():
    """Per-channel weights, an int32 bias, a float32 Constant, a Cast to float and
    a float op on the graph input before quantizing (given the input as float64)."""
    c_in, c_out = 3, 5
    consts = {
        "s_x": np.float32(0.02), "z_x": np.int8(3),
        "w": RNG.integers(-127, 128, (c_out, c_in, 3, 3)).astype(np.int8),
        "s_w": RNG.uniform(0.002, 0.01, c_out).astype(np.float32),
        "z_w": np.zeros(c_out, np.int8),
        "b": RNG.integers(-500, 500, c_out).astype(np.int32),
        "s_y": np.float32(0.05), "z_y": np.int8(-7)}
    consts["s_b"] = (consts["s_x"] * consts["s_w"]).astype(np.float32)
    consts["z_b"] = np.zeros(c_out, np.int32)
    nodes = [
        helper.make_node("Constant", [], ["half"], value_float=0.5),
        helper.make_node("Mul", ["x", "half"], ["xh"]),
        helper.make_node("QuantizeLinear", ["xh", "s_x", "z_x"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s_x", "z_x"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "s_w", "z_w"], ["wd"], axis=0),
        helper.make_node("DequantizeLinear", ["b", "s_b", "z_b"], ["bd"], axis=0),
        helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["c", "s_y", "z_y"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "s_y", "z_y"], ["yd"]),
        helper.make_node("Cast", ["yd"], ["y"], to=TensorProto.FLOAT)]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c_in, 8, 8])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c_out, 8, 8]),
                helper.make_tensor_value_info("yq", TensorProto.INT8, [1, c_out, 8, 8])],
               consts)
    x = RNG.uniform(-4, 4, (1, c_in, 8, 8)).astype(np.float32)
    y, yq = ExactReference(m).run({"x": x})
    ref_y, ref_yq = _ort(m, {"x": x})
    assert y.dtype == np.float64 and yq.dtype == np.int8
    assert np.abs(yq.astype(int) - ref_yq).max() <= 1
    assert np.abs(y - ref_y).max() <= 0.05 * 1.0001
    assert (yq == ref_yq).mean() > 0.99          # ties are rare on random data


def test_float32_graph_input_is_quantized_in_float32():
    """Quantizing float32 data is defined in float32: on inputs drawn near x.5
    steps, float64 division rounds some the other way; the reference does not."""
    s = np.float32(0.1)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4096])],
               [helper.make_tensor_value_info("q", TensorProto.INT8, [4096])],
               {"s": s, "z": np.int8(0)})
    k = RNG.integers(-100, 100, 4096)
    x = ((k + 0.5) * s).astype(np.float32)
    wide = np.clip(np.rint(x.astype(np.float64) / np.float64(s)), -128, 127)
    (q,) = ExactReference(m).run({"x": x})
    (ref,) = _ort(m, {"x": x})
    assert (wide != ref).any()                  # the test can tell the two apart
    np.testing.assert_array_equal(q, ref)


def test_blocked_dequantize_matches_onnxruntime():
    """Opset 21 blocked quantization: a scale per block of 4 along axis 0."""
    w = RNG.integers(-127, 128, (8, 3)).astype(np.int8)
    s_w = RNG.uniform(0.01, 0.1, (2, 3)).astype(np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s_w"], ["wd"], axis=0, block_size=4),
             helper.make_node("MatMul", ["x", "wd"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
               {"w": w, "s_w": s_w}, opset=21)
    x = RNG.uniform(-1, 1, (2, 8)).astype(np.float32)
    (y,) = ExactReference(m).run({"x": x})
    (ref,) = _ort(m, {"x": x})
    np.testing.assert_allclose(y, ref, rtol=1e-5)


def test_what_the_evaluator_cannot_run_settles_nothing(tmp_path):
    """An op of an unknown domain, a missing input, an unreadable file: None."""
    node = helper.make_node("Mystery", ["x"], ["y"], domain="example.custom")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("example.custom", 1)])
    assert ExactReference(m).run({"x": np.zeros(2, np.float32)}) is None
    q = _model([helper.make_node("QuantizeLinear", ["x", "s"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
               [helper.make_tensor_value_info("y", TensorProto.UINT8, [2])], {"s": np.float32(1)})
    assert ExactReference(q).run({}) is None
    np.testing.assert_array_equal(ExactReference(q).run({"x": np.float32([1.4, 300])})[0],
                                  [1, 255])
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    assert ExactReference(str(bad)).run({"x": np.zeros(2, np.float32)}) is None


@pytest.mark.parametrize("dtype", [TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16])
def test_saturates_to_the_zero_points_type(dtype):
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
               [helper.make_tensor_value_info("q", dtype, [5])],
               {"s": np.float32(0.5), "z": np.asarray(1, np_dtype)}, opset=21)
    x = np.float32([-1e6, -1.25, 0.25, 3.75, 1e6])
    (q,) = ExactReference(m).run({"x": x})
    (ref,) = _ort(m, {"x": x})
    assert q.dtype == np_dtype
    np.testing.assert_array_equal(q, ref)
