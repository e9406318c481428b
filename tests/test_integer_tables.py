"""tabulate_integer_cones: integer elementwise kernels over one 8-bit tensor become one
table, with the same bytes out (a quantized GELU, SiLU and x * x, from onnxruntime's
quantizer)."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm import passes
from mtvm.frontend import load_onnx
from mtvm.interp import interpret
from mtvm.passes.integer_tables import tabulate_integer_cones

pytest.importorskip("onnxruntime.quantization")


def _float_model(path):
    """y = x @ W, g = GELU(y) (erf form), out = g sigmoid(g) + g g + y: the cones of y
    and of g become tables, the last Add reads two tensors."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 24)).astype(np.float32) * 0.4
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["y"]),
        helper.make_node("Div", ["y", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["y", "e1"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["g"]),           # GELU(y)
        helper.make_node("Sigmoid", ["g"], ["s"]),
        helper.make_node("Mul", ["g", "s"], ["silu"]),           # SiLU(g)
        helper.make_node("Mul", ["g", "g"], ["sq"]),             # g * g
        helper.make_node("Add", ["silu", "sq"], ["t"]),
        helper.make_node("Add", ["t", "y"], ["out"]),
    ]
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(np.sqrt(2), np.float32), "sqrt2"),
             numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    g = helper.make_graph(nodes, "cones", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 8, 16])], [helper.make_tensor_value_info(
            "out", TensorProto.FLOAT, [1, 8, 24])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    d = tmp_path_factory.mktemp("cones")
    fp32, q = os.path.join(d, "f.onnx"), os.path.join(d, "q.onnx")
    _float_model(fp32)
    rng = np.random.default_rng(5)
    calib = [rng.standard_normal((1, 8, 16)).astype(np.float32) for _ in range(8)]
    from mtvm.testing import quantize_qdq
    return quantize_qdq(fp32, q, "x", calib, calib[0])


def _without_pass(graph):
    for p in passes.PIPELINE:
        if p is not tabulate_integer_cones:
            graph = p(graph)
    return graph


def test_cones_become_one_table_each(quantized):
    g = load_onnx(quantized)
    before, after = _without_pass(g), passes.optimize(g)
    ops_before = [n.op for n in before.nodes]
    ops_after = [n.op for n in after.nodes]
    # GELU: 3 tables and a QMul -> 1 table; g sigmoid(g) + g g: a table, two QMuls and
    # a QAdd -> 1 table; the last QAdd (of two tensors) stays.
    assert ops_before.count("QLut") >= 4 and ops_before.count("QMul") == 3
    assert ops_after.count("QLut") == 2
    assert ops_after.count("QMul") == 0 and ops_after.count("QAdd") == 1
    x = {"x": np.random.default_rng(9).standard_normal((1, 8, 16)).astype(np.float32) * 2}
    for a, b in zip(interpret(before, x).values(), interpret(after, x).values()):
        np.testing.assert_array_equal(a, b)


def test_compiled_cones_match_onnxruntime(quantized):
    data = np.load(quantized[:-5] + ".npz")
    got = mtvm.compile(quantized).run_host([data["in_0"]])
    ref = data["out_0"]
    step = np.abs(np.diff(np.unique(ref))).min()
    assert np.abs(list(got.values())[0] - ref).max() <= step * 1.01
