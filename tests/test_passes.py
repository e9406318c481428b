"""Each pass keeps the meaning of the graph: interp(before) == interp(after)."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, TensorProto

from mtvm import passes
from mtvm.frontend import load_onnx
from mtvm.interp import interpret
from mtvm.testing import assert_close

rng = np.random.default_rng(7)


def graph_of(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
                          [numpy_helper.from_array(v, n) for n, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return load_onnx(onnx.shape_inference.infer_shapes(m))


def feeds(g):
    return {i: rng.standard_normal(g.tensors[i].shape).astype(np.float32) for i in g.inputs}


def same_meaning(before, after):
    x = feeds(before)
    for a, b in zip(interpret(before, x).values(), interpret(after, x).values()):
        assert_close(b, a, 1e-5)


def residual_graph():
    w = rng.standard_normal((4, 4, 1, 1)).astype(np.float32)
    return graph_of(
        [helper.make_node("Identity", ["x"], ["x1"]),
         helper.make_node("Conv", ["x1", "w"], ["c"]),
         helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]),
         helper.make_node("Relu", ["bn"], ["r"]),
         helper.make_node("Add", ["r", "x1"], ["sum"]),
         helper.make_node("Reshape", ["sum", "shape"], ["flat"]),
         helper.make_node("Mul", ["k2", "k3"], ["k"]),           # constant subgraph
         helper.make_node("Mul", ["flat", "k"], ["y"]),
         helper.make_node("Exp", ["x"], ["dead"])],              # reaches no output
        [("x", [1, 4, 3, 3])], ["y"],
        [("w", w), ("s", rng.random(4).astype(np.float32) + .5),
         ("b", rng.standard_normal(4).astype(np.float32)),
         ("m", rng.standard_normal(4).astype(np.float32)),
         ("v", rng.random(4).astype(np.float32) + .5),
         ("shape", np.array([1, -1], np.int64)),
         ("k2", np.float32([2.0])), ("k3", np.float32([0.5]))])


def conv_available():
    from mtvm.ops import get_op
    return get_op("Conv") is not None


@pytest.fixture
def g():
    if not conv_available():
        pytest.skip("Conv not registered")
    return residual_graph()


def test_remove_identities(g):
    after = passes.remove_identities(g)
    assert not any(n.op == "Identity" for n in after.nodes)
    same_meaning(g, after)


def test_fold_constants(g):
    after = passes.fold_constants(g)
    assert len(after.nodes) == len(g.nodes) - 1
    assert after.tensors["k"].is_const
    assert not g.tensors["k"].is_const     # the input graph is left as it was
    same_meaning(g, after)


def test_eliminate_dead(g):
    after = passes.eliminate_dead(g)
    assert "dead" not in after.tensors and all(n.op != "Exp" for n in after.nodes)
    same_meaning(g, after)


def test_fold_batchnorm_into_conv(g):
    after = passes.fold_batchnorm(g)
    assert not any(n.op == "BatchNormalization" for n in after.nodes)
    same_meaning(g, after)


def test_standalone_batchnorm_becomes_scale_shift():
    c = 3
    g = graph_of([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                   epsilon=1e-3)],
                 [("x", [2, c, 4])], ["y"],
                 [(n, (rng.random(c) + .5).astype(np.float32)) for n in "sbmv"])
    after = passes.fold_batchnorm(g)
    assert [n.op for n in after.nodes] == ["Mul", "Add"]
    same_meaning(g, after)


def test_aliases(g):
    after = passes.mark_aliases(g)
    assert [n.alias for n in after.nodes if n.op == "Reshape"] == [True]
    same_meaning(g, after)


def test_reshape_to_output_is_not_an_alias():
    g = graph_of([helper.make_node("Relu", ["x"], ["r"]),
                  helper.make_node("Reshape", ["r", "shape"], ["y"])],
                 [("x", [2, 3])], ["y"], [("shape", np.array([6], np.int64))])
    assert not passes.mark_aliases(g).nodes[1].alias


def test_a_transpose_of_unit_axes_only_is_an_alias():
    """[1, 5, 1, 3] -> [1, 1, 5, 3] keeps the bytes' order (a view); [1, 5, 3] -> [1, 3, 5]
    does not, nor the same Transpose writing a graph output."""
    g = graph_of([helper.make_node("Relu", ["x"], ["r"]),
                  helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),
                  helper.make_node("Relu", ["t"], ["y"]),
                  helper.make_node("Transpose", ["r"], ["y2"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", ["r", "shape"], ["r3"]),
                  helper.make_node("Transpose", ["r3"], ["t3"], perm=[0, 2, 1]),
                  helper.make_node("Relu", ["t3"], ["y3"])],
                 [("x", [1, 5, 1, 3])], ["y", "y2", "y3"],
                 [("shape", np.array([1, 5, 3], np.int64))])
    after = passes.mark_aliases(g)
    assert [n.alias for n in after.nodes if n.op == "Transpose"] == [True, False, False]
    same_meaning(g, after)


def test_fusion_of_conv_tail(g):
    before = passes.optimize(g, fuse=False)
    after = passes.fuse_elementwise_tails(before)
    conv = next(n for n in after.nodes if n.op == "Conv")
    assert [t.op for t in conv.tail] == ["Relu", "Add"]
    same_meaning(g, after)


def test_whole_pipeline(g):
    after = passes.optimize(g)
    assert len(after.nodes) <= 3
    same_meaning(g, after)


def test_fusion_respects_multiple_consumers():
    g = graph_of([helper.make_node("Exp", ["x"], ["e"]),
                  helper.make_node("Relu", ["e"], ["y1"]),
                  helper.make_node("Neg", ["e"], ["y2"])],
                 [("x", [5])], ["y1", "y2"])
    after = passes.fuse_elementwise_tails(g)
    assert all(not n.tail for n in after.nodes)
    same_meaning(g, after)


def test_fusion_does_not_broadcast_up():
    # Relu(x) + y where y is larger than x: the Add cannot be a tail of Relu.
    g = graph_of([helper.make_node("Relu", ["x"], ["r"]),
                  helper.make_node("Add", ["r", "z"], ["y"])],
                 [("x", [1, 4]), ("z", [3, 4])], ["y"])
    after = passes.fuse_elementwise_tails(g)
    assert all(not n.tail for n in after.nodes)
    same_meaning(g, after)
