"""Reductions against onnx.reference: every op, axes as attribute (opset 13) and
as input (opset 18), keepdims, negative axes, reduce-all, noop_with_empty_axes."""
import numpy as np
import pytest

from mtvm.testing import check_model, make_model

rng = np.random.default_rng(2)

OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
       "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]

# (shape, axes or None, keepdims)
CASES = [((2, 3, 4, 5), [2, 3], 1), ((2, 3, 4), [1], 0), ((3, 4), None, 1),
         ((2, 3, 4), [0, 2], 0), ((4, 1, 6), [-1], 1), ((5, 3), [-2, -1], 0)]


def data(op, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    if op == "ReduceLogSum":
        x = np.abs(x) + 0.1
    if op == "ReduceProd":
        x = (np.sign(x) * (0.8 + 0.4 * np.abs(x) / (1 + np.abs(x)))).astype(np.float32)
    return x.astype(np.float32)


def reduce_model(op, x, axes, keepdims, opset, noop=None):
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    axes_as_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
    consts, order = {}, ["x"]
    if axes is not None:
        if axes_as_input:
            consts["axes"] = np.array(axes, np.int64)
            order.append("axes")
        else:
            attrs["axes"] = axes
    return make_model(op, {"x": x}, attrs, consts=consts, input_order=order, opset=opset)


# Every case at opset 18 (axes as input); two at 13 (attribute; ReduceSum: input).
RUNS = [(18, c) for c in CASES] + [(13, CASES[0]), (13, CASES[3])]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset,case", RUNS, ids=str)
def test_reduce(op, opset, case):
    shape, axes, keepdims = case
    x = data(op, shape)
    sanitize = shape == (2, 3, 4) and keepdims == 0 and axes == [1]
    check_model(reduce_model(op, x, axes, keepdims, opset), {"x": x}, sanitize=sanitize)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceL2", "ReduceMax"])
def test_noop_with_empty_axes(op):
    x = data(op, (3, 4))
    check_model(reduce_model(op, x, None, 1, 18, noop=1), {"x": x})
    check_model(reduce_model(op, x, [], 0, 18, noop=0), {"x": x})


def test_reduce_mean_fuses_tail():
    from onnx import helper
    import onnx
    x = data("ReduceMean", (2, 8, 3, 3))
    g = helper.make_graph(
        [helper.make_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=0),
         helper.make_node("Relu", ["m"], ["y"])], "gap",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    lib = check_model(onnx.shape_inference.infer_shapes(m), {"x": x})
    assert len(lib.graph.nodes) == 1


def test_runtime_axes_is_an_error():
    import mtvm
    import onnx
    from onnx import helper
    from mtvm.errors import UnsupportedError
    g = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"])], "runtime_axes",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("axes", onnx.TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    with pytest.raises(UnsupportedError, match="must be a constant"):
        mtvm.compile(m)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.bool_])
def test_reduce_max_min_integer_and_bool(op, dtype):
    x = rng.integers(-100, 100, (3, 5)).astype(dtype)
    opset = 20 if dtype == np.bool_ else 18   # bool from opset 20 (the checker says so)
    check_model(reduce_model(op, x, [1], 1, opset), {"x": x})


# -- every row length 1..300 at -O3 -Werror ----------------------------------------------------

LENGTHS = range(1, 301)
# ReduceSum/Mean (and LogSum, the same sum) take the eight-lane loop over a contiguous
# row (16 and longer, a scalar tail when the length is not a multiple of 8); the others
# one loop.
LANE_OPS = ["ReduceSum", "ReduceMean"]
LOOP_OPS = [op for op in OPS if op not in LANE_OPS]


def lengths_model(ops):
    """One model: for each length n an input x<n> of shape [1, n] and one node per op
    reducing axis 1 (one row: gcc sees the whole reduction's trip count)."""
    import onnx
    from onnx import helper, numpy_helper
    nodes = [helper.make_node(op, [f"x{n}", "axes"], [f"{op}_{n}"], keepdims=0)
             for n in LENGTHS for op in ops]
    g = helper.make_graph(
        nodes, "reduce_lengths",
        [helper.make_tensor_value_info(f"x{n}", onnx.TensorProto.FLOAT, [1, n])
         for n in LENGTHS],
        [helper.make_tensor_value_info(nd.output[0], onnx.TensorProto.UNDEFINED, None)
         for nd in nodes],
        [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


@pytest.mark.parametrize("ops", [LANE_OPS, pytest.param(LOOP_OPS, marks=pytest.mark.slow)],
                         ids=["lanes", "loops"])
def test_reduce_every_row_length(ops):
    """Every row length 1..300, built with -O3 -Werror, against onnx.reference. gcc 12
    refused the eight-lane sum of a length that is a multiple of 8 and >= 64 (a dead
    tail loop: "iteration ... invokes undefined behavior"), and ReduceLogSumExp over
    one element declared `x` twice in one scope."""
    import mtvm
    from mtvm.host_runner import HostModule
    from mtvm.testing import assert_close, reference_outputs
    m = lengths_model(ops)
    # Data in [0.9, 1.1]: a product of 300 stays in range, LogSum's sum is positive.
    xs = {f"x{n}": (0.9 + 0.2 * rng.random((1, n))).astype(np.float32) for n in LENGTHS}
    lib = mtvm.compile(m, reorder=False)   # 300 * ops independent nodes: keep their order
    got = HostModule(lib, opt="-O3").run(xs)
    expected = reference_outputs(m, xs)
    for out, e in zip(m.graph.output, expected):
        assert_close(got[out.name], e, what=out.name)
