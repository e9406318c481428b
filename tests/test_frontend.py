"""Loading ONNX: external data, local functions, symbolic dims, and the
errors a user sees for bad input."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, TensorProto

import mtvm
from mtvm.errors import ModelLoadError, MtvmError, ShapeError, UnsupportedError
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
    assert "`mtvm ops` lists the supported operators" in msg and len(msg) < 200  # short


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


# -- invalid models: what onnxruntime and the ONNX checker reject, mtvm rejects ----------

def _one(op, attrs=None, shape=(2, 3), out_shape=None, inputs=None, t=TensorProto.FLOAT,
         inits=(), name="n0", opset=17):
    ins = inputs or ["x"]
    return model([helper.make_node(op, ins, ["y"], name=name, **(attrs or {}))],
                 [vi("x", list(shape), t)], [vi("y", out_shape, t)], inits, opset=opset)


@pytest.mark.parametrize("op, attrs, out", [
    ("Softmax", {"axis": 100}, [2, 3]),
    ("Softmax", {"axis": -3}, [2, 3]),
    ("LogSoftmax", {"axis": 2}, [2, 3]),
    ("Flatten", {"axis": 3}, [2, 3]),
    ("ReduceSum", {"axes": [0, -2]}, [1, 3]),   # the same axis twice
    ("Concat", {"axis": 2}, [2, 3]),
    ("ArgMax", {"axis": -5}, [2, 3]),
    ("CumSum", None, [2, 3]),
    ("Unsqueeze", {"axes": [3]}, [2, 3, 1]),
    ("Gather", {"axis": 2}, [2, 3]),
])
def test_out_of_range_axis_is_an_error_naming_the_node(op, attrs, out):
    """Either the ONNX checker (strict shape inference) or mtvm's own axis check
    (ops.base.normalize_axes) rejects it; both messages name the node."""
    extra, inits, opset = [], [], 17
    if op in ("ReduceSum", "Unsqueeze"):
        opset = 11
    if op == "CumSum":
        inits = [numpy_helper.from_array(np.array(7, np.int64), "ax")]
        extra = ["ax"]
    if op == "Gather":
        inits = [numpy_helper.from_array(np.array([0], np.int64), "ix")]
        extra = ["ix"]
    t = TensorProto.INT64 if op == "ArgMax" else TensorProto.FLOAT
    m = model([helper.make_node(op, ["x"] + extra, ["y"], name="the_node", **(attrs or {}))],
              [vi("x", [2, 3])], [vi("y", out, t)], inits, opset=opset)
    with pytest.raises(MtvmError, match=r'node "the_node" \(' + op + r"|node name: the_node") as e:
        mtvm.compile(m)
    assert "\n" not in str(e.value)
    assert "axis" in str(e.value) or "axes" in str(e.value) or "rank" in str(e.value)


def test_axis_check_without_the_checker():
    """mtvm's own check, on a graph the ONNX checker does not see (IR built
    by hand): every op with an axis attribute goes through normalize_axes."""
    from mtvm.ir import Graph, Tensor, Node
    from mtvm.frontend.onnx_loader import _add_node
    g = Graph("g", {"x": Tensor("x", (2, 3), np.dtype(np.float32))}, [], ["x"], [])
    with pytest.raises(ShapeError, match=r"axis=100 is out of range for a rank-2 tensor "
                                         r"\(valid: -2..1\)"):
        _add_node(g, Node("Softmax", "s", ["x"], ["y"], {"axis": 100}), 17)
    _add_node(g, Node("Softmax", "s", ["x"], ["y"], {"axis": -1}), 17)
    assert g.nodes[-1].attrs["axis"] == 1


def test_axes_at_the_edges_are_accepted():
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    for op, attrs in [("Softmax", {"axis": -2}), ("Flatten", {"axis": 2}),
                      ("Flatten", {"axis": -2}), ("Softmax", {"axis": 1})]:
        m = onnx.shape_inference.infer_shapes(
            model([helper.make_node(op, ["x"], ["y"], **attrs)], [vi("x", [2, 3])],
                  [vi("y", None, 0)]))
        lib = mtvm.compile(m)
        assert_close(lib.run_host({"x": x})["y"], reference_outputs(m, {"x": x})[0], what=op)


def test_duplicate_node_names_are_an_error():
    m = model([helper.make_node("Relu", ["x"], ["r"], name="dup"),
               helper.make_node("Neg", ["r"], ["y"], name="dup")],
              [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(ModelLoadError, match='node name "dup" is used by nodes 0 .Relu. and 1 '
                                             '.Neg.; node names must be unique'):
        mtvm.compile(m)


def test_auto_pad_contradicting_pads_is_an_error():
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", auto_pad="SAME_UPPER",
                                pads=[1, 1, 1, 1])],
              [vi("x", [1, 1, 5, 5])], [vi("y", [1, 1, 5, 5])], [w])
    with pytest.raises(MtvmError, match=r'node "c" \(Conv.*auto_pad.*pads'):
        mtvm.compile(m)


@pytest.mark.parametrize("declared, what", [
    (vi("y", [2, 3], TensorProto.INT64), "declared int64 but the graph computes float32"),
    (vi("y", [3, 2]), r"declared with shape \[3,2\] but the graph computes \[2, 3\]"),
    (vi("y", [2, 3, 1]), r"declared with shape \[2,3,1\]"),
])
def test_declared_output_type_must_be_what_the_graph_computes(declared, what):
    # A standard op: the checker's strict shape inference sees it first.
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])], [declared])
    with pytest.raises(MtvmError, match=r"Inferred (elem type|shape) .*differ|" + what):
        mtvm.compile(m)
    # A com.microsoft op (no ONNX schema, so no inference): mtvm's own check.
    s, z = (numpy_helper.from_array(np.array(0.1, np.float32), "s"),
            numpy_helper.from_array(np.array(0, np.int8), "z"))
    declared.type.tensor_type.elem_type = TensorProto.INT8 \
        if declared.type.tensor_type.elem_type == TensorProto.FLOAT else TensorProto.UINT8
    what = what.replace("int64", "uint8").replace("float32", "int8")
    m = model([helper.make_node("QLinearLeakyRelu", ["x", "s", "z", "s", "z"], ["y"],
                                domain="com.microsoft", name="q")],
              [vi("x", [2, 3], TensorProto.INT8)], [declared], [s, z])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(ShapeError, match=r'output "y" is ' + what):
        mtvm.compile(m)


def test_declared_symbolic_output_dims_are_fine():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, 3])], [vi("y", ["n", 3])])
    assert mtvm.compile(m).metadata["outputs"][0]["shape"] == [2, 3]


def test_input_shape_contradicting_a_fixed_dim_is_refused():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["batch", 8])],
              [vi("y", ["batch", 8])])
    with pytest.raises(ShapeError, match=r"--input-shape x:2,9 contradicts the model's fixed "
                                         r"shape \[\?,8\]"):
        mtvm.compile(m, input_shapes={"x": (2, 9)})
    assert mtvm.compile(m, input_shapes={"x": (2, 8)}).metadata["inputs"][0]["shape"] == [2, 8]


# -- broken data: one clear error, never a traceback ---------------------------------------

def _dq(scale, zp, axis=None, x_shape=(4, 3)):
    attrs = {} if axis is None else {"axis": axis}
    return model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq",
                                   **attrs)],
                 [vi("x", list(x_shape), TensorProto.INT8)], [vi("y", list(x_shape))],
                 [numpy_helper.from_array(np.asarray(scale, np.float32), "s"),
                  numpy_helper.from_array(np.asarray(zp, np.int8), "z")])


@pytest.mark.parametrize("m, what", [
    (_dq([0.1, 0.2, 0.3], [0, 0, 0], axis=5), r"axis=5 is out of range for a rank-2"),
    (_dq([0.1, 0.2, 0.3], [0, 0, 0], axis=0), "per-axis scale has 3 values but axis 0"),
    (_dq([0.1, 0.2, 0.3], [0, 0], axis=1), r"zero point has shape \[2\] and the scale \[3\]"),
    (_dq(0.1, [0, 0]), r"zero point has shape \[2\]"),
])
def test_bad_quantization_parameters(m, what):
    with pytest.raises(MtvmError, match=r'node "dq" \(DequantizeLinear.*' + what):
        mtvm.compile(m)


def _with_init(t: onnx.TensorProto):
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                 [vi("x", [2])], [vi("y", [2])], [t])


def test_undefined_element_types_are_errors():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])
    for t in (0, 99):
        m.graph.input[0].type.tensor_type.elem_type = t
        with pytest.raises(MtvmError) as e:
            mtvm.compile(m)
        assert "\n" not in str(e.value)
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    w.data_type = 99
    with pytest.raises(MtvmError, match="(element|data) type 99"):
        mtvm.compile(_with_init(w))


def test_initializer_data_not_matching_its_shape():
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    w.raw_data = w.raw_data[:5]
    with pytest.raises(ModelLoadError, match='(initializer|tensor name:) "?w"?.*(does not match|'
                                             'too small)'):
        mtvm.compile(_with_init(w))
    # Past the checker (typed data of the wrong length): mtvm's own reading.
    from mtvm.frontend.onnx_loader import _tensor_value
    w = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    w.dims[0] = 3
    with pytest.raises(ModelLoadError, match='w: its data does not match its element type '
                                             r'FLOAT and shape \[3\]'):
        _tensor_value(w, "w")


def test_string_initializer_is_unsupported():
    w = helper.make_tensor("w", TensorProto.STRING, [2], [b"a", b"b"])
    with pytest.raises(MtvmError, match="string"):
        mtvm.compile(_with_init(w))


def test_absurd_dims_are_refused_quickly():
    import time
    t0 = time.time()
    for shape in ([1, 3, 2**31 - 1, 2**31 - 1], [1, 2**31 - 1]):
        m = model([helper.make_node("GlobalAveragePool" if len(shape) == 4 else "Relu",
                                    ["x"], ["y"], name="big")],
                  [vi("x", shape)], [vi("y", shape[:2] + [1] * (len(shape) - 2))])
        with pytest.raises(ShapeError, match='input "x" has shape .* over the'):
            mtvm.compile(m)
    assert time.time() - t0 < 5


def _bad_utf8(m: onnx.ModelProto, marks: dict) -> onnx.ModelProto:
    data = m.SerializeToString()
    for k, v in marks.items():
        assert len(k) == len(v)
        data = data.replace(k, v)
    return onnx.load_from_string(data)


def test_invalid_utf8_names_compile_to_valid_json_and_distinct_names(tmp_path):
    import json
    m = model([helper.make_node("Relu", ["x"], ["AAAA"], name="NNNN"),
               helper.make_node("Neg", ["x"], ["BBBB"])],
              [vi("x", [2])], [vi("AAAA", [2]), vi("BBBB", [2])])
    m = _bad_utf8(m, {b"AAAA": b"\xff\xfeA\x80", b"BBBB": b"\xff\xfeA\x81",
                      b"NNNN": b"\xc0\xc1N\xf5"})
    lib = mtvm.compile(m)
    lib.export(str(tmp_path / "mlf"))
    md = json.loads((tmp_path / "mlf" / "metadata.json").read_text(encoding="utf-8"))
    names = [o["name"] for o in md["outputs"]]
    assert names == ["\\xff\\xfeA\\x80", "\\xff\\xfeA\\x81"]
    out = lib.run_host({"x": np.float32([1, -2])})
    assert_close(out[names[0]], np.float32([1, 0]))
    assert_close(out[names[1]], np.float32([-1, 2]))


def test_no_outputs_left_gives_c_that_builds_with_werror(tmp_path):
    """An output that is also dropped (every node dead): the entry function
    calls no kernel and must not declare an unused status."""
    import subprocess
    m = model([helper.make_node("Relu", ["x"], ["r"])], [vi("x", [2])], [])
    lib = mtvm.compile(m)
    lib.export(str(tmp_path / "mlf"))
    src = sorted((tmp_path / "mlf/codegen/host/src").glob("*.c"))
    r = subprocess.run(["gcc", "-fsyntax-only", "-std=c99", "-Wall", "-Wextra", "-Werror",
                        "-I", str(tmp_path / "mlf/codegen/host/include")] + [str(s) for s in src],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_scan_opset8_keeps_the_batch_axis():
    body = helper.make_graph([helper.make_node("Add", ["s", "v"], ["s2"]),
                              helper.make_node("Identity", ["s2"], ["o"])], "body",
                             [vi("s", [2]), vi("v", [2])], [vi("s2", [2]), vi("o", [2])])
    m = model([helper.make_node("Scan", ["", "init", "x"], ["y", "z"], num_scan_inputs=1,
                                body=body)],
              [vi("init", [1, 2]), vi("x", [1, 3, 2])], [vi("y", [1, 2]), vi("z", [1, 3, 2])],
              opset=8)
    lib = mtvm.compile(m)
    x = np.arange(6, dtype=np.float32).reshape(1, 3, 2)
    out = lib.run_host({"init": np.zeros((1, 2), np.float32), "x": x})
    assert_close(out["y"], x.sum(axis=1))
    assert_close(out["z"], np.cumsum(x, axis=1))


def test_an_unexpected_exception_is_one_internal_error_line_naming_the_node():
    """A graph the front end would never build (a node reading a tensor that does
    not exist) makes a pass fail: one line naming the node, not a traceback."""
    from mtvm.errors import InternalError
    from mtvm.ir import Graph, Node, Tensor
    f32 = np.dtype(np.float32)
    g = Graph("g", {"x": Tensor("x", (2,), f32), "y": Tensor("y", (2,), f32)},
              [Node("Add", "the_add", ["x", "ghost"], ["y"])], ["x"], ["y"], source="g.onnx")
    with pytest.raises(InternalError) as e:
        mtvm.compile_graph(g)
    msg = str(e.value)
    assert msg.startswith('g.onnx: internal error while compiling at node "the_add" (Add)')
    assert "KeyError" in msg and "please report it" in msg and "\n" not in msg


@pytest.mark.parametrize("opset,op", [(9, "Upsample"), (10, "Resize")])
@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_opset_9_and_10_upsampling_keeps_its_asymmetric_meaning(tmp_path, opset, op, mode):
    """onnx's converter turns Upsample and Resize-10 into Resize-11 without a
    coordinate_transformation_mode (default half_pixel): the loader restores
    asymmetric + floor, so the outputs match onnxruntime's (a whole input step
    off before, in linear mode)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper
    scales = helper.make_tensor("s", TensorProto.FLOAT, [4], [1, 1, 2, 2.5])
    node = helper.make_node(op, ["x", "s"], ["y"], mode=mode)
    m = helper.make_model(helper.make_graph(
        [node], "u", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 6, 10])], [scales]),
        opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    path = str(tmp_path / "up.onnx")
    onnx.save(m, path)
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = mtvm.compile(path).run_host({"x": x})["y"]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_constant_and_folded_outputs_keep_their_onnx_names():
    """An output that is a constant, or a subgraph folded to one, is copied by a kernel
    under its own ONNX name (its source renamed); a graph input that is also an output
    takes "<name>_out<i>" (two tensors cannot share a name)."""
    import mtvm
    from onnx import TensorProto, helper, numpy_helper
    tab = np.arange(12, dtype=np.float32).reshape(4, 3)
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("Gather", ["tab", "i"], ["g"], axis=0)], "outs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, sh)
         for n, sh in (("r", [1, 4]), ("c", [2]), ("g", [3]), ("x", [1, 4]))],
        [numpy_helper.from_array(np.float32([1.5, -2.0]), "c"),
         numpy_helper.from_array(tab, "tab"), numpy_helper.from_array(np.int64(2), "i")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    x = np.array([[-1, 2, -3, 4]], np.float32)
    got = mtvm.compile(m).run_host({"x": x})
    assert list(got) == ["r", "c", "g", "x_out3"]
    np.testing.assert_array_equal(got["c"], [1.5, -2.0])
    np.testing.assert_array_equal(got["g"], tab[2])
    np.testing.assert_array_equal(got["r"], np.maximum(x, 0))
    np.testing.assert_array_equal(got["x_out3"], x)


def test_inputs_and_outputs_declared_without_a_shape():
    """onnxruntime runs a model whose graph outputs (or inputs) carry no shape; the ONNX
    checker requires one: an output takes what shape inference finds, an input its
    --input-shape, and an input without one gets one line saying so."""
    import mtvm
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "noshape",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    x = np.array([[-1, 2, -3, 4]], np.float32)
    np.testing.assert_array_equal(mtvm.compile(m).run_host({"x": x})["y"], np.maximum(x, 0))
    del m.graph.input[0].type.tensor_type.shape.dim[:]
    m.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(mtvm.MtvmError, match='input "x" is declared without a shape -- give it '
                                             'with --input-shape'):
        mtvm.compile(m)
    got = mtvm.compile(m, input_shapes={"x": [1, 4]}).run_host({"x": x})["y"]
    np.testing.assert_array_equal(got, np.maximum(x, 0))
