"""Loading ONNX: external data, local functions, symbolic dims, and the
errors a user sees for bad input."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, TensorProto

import mtvm
from mtvm.errors import ModelLoadError, ShapeError, UnsupportedError
from mtvm.testing import assert_close, reference_outputs


def model(nodes, inputs, outputs, inits=(), opset=17, functions=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset),
                                            helper.make_opsetid("local", 1)],
                          functions=list(functions))
    return m


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def test_external_data(tmp_path):
    w = np.arange(4096, dtype=np.float32)
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [4096])], [vi("y", [4096])],
              [numpy_helper.from_array(w, "w")])
    path = tmp_path / "ext.onnx"
    onnx.save(m, path, save_as_external_data=True, location="ext.onnx.data",
              size_threshold=0)
    assert (tmp_path / "ext.onnx.data").exists()
    lib = mtvm.compile(path)
    x = np.ones(4096, np.float32)
    assert_close(lib.run_host({"x": x})["y"], x + w)


def test_local_function_is_inlined():
    f = helper.make_function("local", "AddRelu", ["a", "b"], ["c"],
                             [helper.make_node("Add", ["a", "b"], ["t"]),
                              helper.make_node("Relu", ["t"], ["c"])],
                             [helper.make_opsetid("", 17)])
    m = model([helper.make_node("AddRelu", ["x", "x"], ["y"], domain="local")],
              [vi("x", [3, 4])], [vi("y", [3, 4])], functions=[f])
    lib = mtvm.compile(m)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    assert_close(lib.run_host({"x": x})["y"], np.maximum(2 * x, 0))


def test_symbolic_dims_must_be_pinned():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["batch", 8])], [vi("y", ["batch", 8])])
    with pytest.raises(ShapeError, match=r'input "x" has symbolic shape \[batch,8\]; '
                                         r"pin it with --input-shape x:1,8"):
        mtvm.compile(m)
    lib = mtvm.compile(m, input_shapes={"x": (2, 8)})
    assert lib.metadata["inputs"][0]["shape"] == [2, 8]


def test_pinning_an_unknown_input_is_an_error():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [8])], [vi("y", [8])])
    with pytest.raises(ShapeError, match='"nope", which is not an input'):
        mtvm.compile(m, input_shapes={"nope": (1,)})


def test_unsupported_op_names_model_node_op_opset_and_supported_list():
    m = model([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("Frobnicate", ["r"], ["y"], name="the_frob", domain="com.example")],
              [vi("x", [3, 3])], [vi("y", [3, 3])])
    m.opset_import.append(helper.make_opsetid("com.example", 3))
    with pytest.raises(UnsupportedError) as e:
        mtvm.compile(m)
    msg = str(e.value)
    assert 'node "the_frob" (com.example.Frobnicate, opset 3)' in msg
    assert "Supported:" in msg and "Relu" in msg


def test_runtime_shape_input_needs_bind():
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])],
              [vi("x", [2, 3]), vi("s", [2], TensorProto.INT64)], [vi("y", ["a", "b"])])
    with pytest.raises(UnsupportedError, match="--bind s=VALUE.npy"):
        mtvm.compile(m)
    lib = mtvm.compile(m, bind={"s": np.array([3, 2], np.int64)})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_close(lib.run_host({"x": x})["y"], x.reshape(3, 2))


def test_corrupt_file(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"\x00\x01not a model at all")
    with pytest.raises(ModelLoadError, match="junk.onnx: not a valid ONNX model"):
        mtvm.compile(p)


def test_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match="no such file"):
        mtvm.compile(tmp_path / "absent.onnx")


def test_old_opset_is_converted_and_noted():
    """Opset 9 Upsample (gone since opset 10) and BatchNormalization with the opset-9
    semantics: onnx.version_converter brings them to opset 11 (Resize), same outputs."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")] + [
        numpy_helper.from_array(rng.random(3).astype(np.float32) + 0.5, n)
        for n in ("s", "b", "m", "v")]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["t"]),
             helper.make_node("Upsample", ["t", "scales"], ["y"], mode="nearest")]
    m = helper.make_model(
        helper.make_graph(nodes, "old", [vi("x", [1, 3, 2, 2])], [vi("y", [1, 3, 4, 4])], inits),
        opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 4
    lib = mtvm.compile(m)
    assert any("opset 9 was converted to opset 11" in n for n in lib.metadata["notes"])
    x = rng.random((1, 3, 2, 2)).astype(np.float32)
    y = list(lib.run_host({"x": x}).values())[0]
    s, b, mu, v = (numpy_helper.to_array(i) for i in inits[1:])
    t = (x - mu.reshape(1, 3, 1, 1)) / np.sqrt(v.reshape(1, 3, 1, 1) + 1e-5) \
        * s.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)
    np.testing.assert_allclose(y, t.repeat(2, axis=2).repeat(2, axis=3), rtol=1e-5, atol=1e-6)


def test_initializer_listed_as_input_is_a_constant():
    w = np.full((2,), 3.0, np.float32)
    m = model([helper.make_node("Mul", ["x", "w"], ["y"])], [vi("x", [2]), vi("w", [2])],
              [vi("y", [2])], [numpy_helper.from_array(w, "w")])
    lib = mtvm.compile(m)
    assert [i["name"] for i in lib.metadata["inputs"]] == ["x"]
    x = np.ones(2, np.float32)
    assert_close(lib.run_host({"x": x})["y"], reference_outputs(m, {"x": x, "w": w})[0])


def test_constant_node_and_passthrough_output():
    m = model([helper.make_node("Constant", [], ["c"],
                                value=numpy_helper.from_array(np.float32([1, 2]))),
               helper.make_node("Identity", ["x"], ["y1"])],
              [vi("x", [2])], [vi("y1", [2]), vi("c", [2])])
    lib = mtvm.compile(m)
    out = lib.run_host({"x": np.float32([5, 6])})
    assert_close(list(out.values())[0], np.float32([5, 6]))
    assert_close(list(out.values())[1], np.float32([1, 2]))
