"""Pooling against onnx.reference (and onnxruntime where the reference is wrong):
kernel/stride/pads/dilations, ceil_mode, count_include_pad, auto_pad, global."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import mtvm
from mtvm.interp import interpret
from mtvm.errors import ModelLoadError, ShapeError
from mtvm.testing import assert_close, check_model, make_model

rng = np.random.default_rng(1)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# (id, x shape, attributes, opset, run under ASan/UBSan too)
MAXPOOL = [
    ("2d_k2s2", (1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}, 17, False),
    ("2d_k3s2_pad1", (1, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                    "pads": [1, 1, 1, 1]}, 17, True),
    ("2d_k3s1_pad1", (2, 2, 5, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 12, False),
    ("2d_asym_pads", (1, 2, 7, 7), {"kernel_shape": [3, 2], "strides": [2, 1],
                                    "pads": [0, 1, 2, 0]}, 17, True),
    ("2d_ceil", (1, 2, 6, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
     17, True),
    ("2d_ceil_pad", (1, 2, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                                   "pads": [1, 1, 1, 1]}, 17, False),
    ("2d_dilation", (1, 2, 9, 9), {"kernel_shape": [3, 3], "dilations": [2, 2],
                                   "pads": [2, 1, 2, 1]}, 17, True),
    ("2d_dilation_stride", (1, 1, 10, 9), {"kernel_shape": [2, 3], "dilations": [3, 2],
                                           "strides": [2, 2], "pads": [1, 0, 1, 2]}, 17, False),
    ("2d_same_upper_s2", (1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                        "auto_pad": "SAME_UPPER"}, 17, False),
    ("2d_same_upper_s2_dilation", (1, 2, 7, 8), {"kernel_shape": [2, 3], "strides": [2, 2],
                                                 "dilations": [2, 2], "auto_pad": "SAME_UPPER"},
     17, False),
    ("2d_same_upper_s1", (1, 2, 6, 5), {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"},
     17, False),
    ("2d_same_lower_s1", (1, 2, 6, 5), {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER"},
     17, False),
    ("2d_valid_s2", (1, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                   "auto_pad": "VALID"}, 17, False),
    ("2d_storage_order", (1, 2, 6, 6), {"kernel_shape": [2, 2], "strides": [2, 2],
                                        "storage_order": 1}, 11, False),
    ("1d_k3s2_pad", (1, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, 17,
     False),
    ("1d_ceil", (2, 2, 10), {"kernel_shape": [2], "strides": [3], "ceil_mode": 1}, 17, False),
    ("3d_k2s2", (1, 2, 4, 5, 6), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2],
                                  "pads": [0, 1, 0, 0, 0, 1]}, 17, False),
    ("1x1_output", (1, 2, 3, 3), {"kernel_shape": [3, 3]}, 17, False),
]

AVGPOOL = [
    ("2d_k2s2", (1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}, 17, False),
    ("2d_k3s1_pad_exclude", (1, 2, 6, 5), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 17,
     True),
    ("2d_k3s1_pad_include", (1, 2, 6, 5), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                           "count_include_pad": 1}, 17, True),
    ("2d_asym_pads_include", (1, 2, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 1],
                                            "pads": [2, 0, 0, 1], "count_include_pad": 1},
     17, False),
    ("2d_ceil_exclude", (1, 2, 8, 7), {"kernel_shape": [3, 3], "strides": [2, 2],
                                       "pads": [1, 1, 1, 1], "ceil_mode": 1}, 17, True),
    ("2d_ceil_include", (1, 2, 8, 7), {"kernel_shape": [3, 3], "strides": [2, 2],
                                       "pads": [1, 1, 1, 1], "ceil_mode": 1,
                                       "count_include_pad": 1}, 17, True),
    ("2d_ceil_nopad", (1, 2, 7, 6), {"kernel_shape": [2, 2], "strides": [2, 2],
                                     "ceil_mode": 1}, 11, False),
    ("2d_same_upper_s2", (1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                        "auto_pad": "SAME_UPPER"}, 17, False),
    ("2d_same_lower_include", (1, 2, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 2],
                                             "auto_pad": "SAME_LOWER",
                                             "count_include_pad": 1}, 17, False),
    ("2d_valid", (1, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 3],
                                "auto_pad": "VALID"}, 17, False),
    ("2d_dilation_opset19", (1, 2, 9, 9), {"kernel_shape": [3, 3], "dilations": [2, 2],
                                           "pads": [1, 1, 1, 1]}, 19, True),
    ("1d_k3s2_pad", (1, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 0]}, 17,
     False),
    ("1d_include_ceil", (2, 2, 10), {"kernel_shape": [3], "strides": [2], "pads": [1, 1],
                                     "count_include_pad": 1, "ceil_mode": 1}, 17, False),
    ("3d_k2s2", (1, 2, 4, 5, 6), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2],
                                  "pads": [0, 1, 0, 0, 0, 1]}, 17, False),
]


def run_case(op, shape, attrs, opset, sanitize):
    x = randn(*shape)
    check_model(make_model(op, {"x": x}, attrs, opset=opset), {"x": x}, sanitize=sanitize)


@pytest.mark.parametrize("shape,attrs,opset,sanitize", [c[1:] for c in MAXPOOL],
                         ids=[c[0] for c in MAXPOOL])
def test_maxpool(shape, attrs, opset, sanitize):
    run_case("MaxPool", shape, attrs, opset, sanitize)


@pytest.mark.parametrize("shape,attrs,opset,sanitize", [c[1:] for c in AVGPOOL],
                         ids=[c[0] for c in AVGPOOL])
def test_averagepool(shape, attrs, opset, sanitize):
    run_case("AveragePool", shape, attrs, opset, sanitize)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
# planes of 16+ positions average in interleaved partial sums (with a tail: 30, 310, 17;
# without: 64)
@pytest.mark.parametrize("shape", [(1, 4, 7), (2, 3, 5, 6), (1, 2, 3, 4, 2), (1, 3, 1, 1),
                                   (1, 3, 31, 10), (2, 2, 8, 8), (1, 2, 17)])
def test_global_pool(op, shape):
    x = randn(*shape)
    m = make_model(op, {"x": x})
    if op == "GlobalMaxPool" and len(shape) != 4:
        # onnx.reference 1.23 reduces axes (rank-2, rank-1) here: right for 4-D only.
        check_with_onnxruntime(m, x)
        return
    check_model(m, {"x": x}, sanitize=shape in ((2, 3, 5, 6), (1, 3, 31, 10)))


def check_with_onnxruntime(m, x):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"x": x})[0]
    lib = mtvm.compile(m)
    assert_close(lib.run_host({"x": x})["y0"], expected, what=m.graph.name)
    assert_close(interpret(lib.graph, {"x": x})["y0"], expected, what="interp")


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_pool_float64(op):
    x = randn(1, 2, 7, 6).astype(np.float64)
    m = make_model(op, {"x": x}, {"kernel_shape": [3, 3], "strides": [2, 2],
                                  "pads": [1, 1, 1, 1], "ceil_mode": 1})
    check_model(m, {"x": x})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_maxpool_integer(dtype):
    """Max pooling is comparisons only: the integer types work as they are (QDQ models)."""
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (1, 3, 7, 6), endpoint=True).astype(dtype)
    m = make_model("MaxPool", {"x": x}, {"kernel_shape": [3, 3], "strides": [2, 2],
                                         "pads": [1, 1, 1, 1], "ceil_mode": 1})
    check_model(m, {"x": x}, sanitize=dtype == np.int8)
    # GlobalMaxPool: float types only in ONNX; the checker (so mtvm) rejects int8.
    with pytest.raises(ModelLoadError, match="unsupported type"):
        mtvm.compile(make_model("GlobalMaxPool", {"x": x}))


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3], "strides": [3], "ceil_mode": 1},
    {"kernel_shape": [3], "strides": [3], "ceil_mode": 1, "count_include_pad": 1},
    {"kernel_shape": [4], "strides": [3], "ceil_mode": 1, "pads": [1, 0],
     "count_include_pad": 1},
], ids=["exclude", "include", "include_pad"])
def test_averagepool_ceil_overhang_vs_onnxruntime(attrs):
    """A ceil_mode window hanging two or more elements past the end: onnx.reference
    1.23 shifts the windows there, so this case is checked against onnxruntime."""
    x = randn(2, 3, 7)
    check_with_onnxruntime(make_model("AveragePool", {"x": x}, attrs), x)


@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 6, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 7, 6), {"kernel_shape": [2, 3], "strides": [2, 1], "dilations": [2, 1],
                    "pads": [1, 0, 0, 1], "ceil_mode": 1, "storage_order": 1}),
    ((1, 2, 4, 3, 5), {"kernel_shape": [2, 2, 3], "pads": [1, 0, 1, 0, 1, 1],
                       "storage_order": 1}),
], ids=["2d_rowmajor", "2d_colmajor_ceil_dilation", "3d_colmajor"])
def test_maxpool_indices(shape, attrs):
    """The Indices output, against onnxruntime (onnx.reference computes no indices for
    unit strides). Integer-valued input makes ties: the first maximum wins."""
    ort = pytest.importorskip("onnxruntime")
    x = rng.integers(-3, 3, shape).astype(np.float32)
    m = make_model("MaxPool", {"x": x}, attrs, n_outputs=2)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"x": x})
    lib = mtvm.compile(m)
    runs = [lib.run_host({"x": x})]
    if len(shape) == 4 and "storage_order" not in attrs:
        runs.append(lib.run_host({"x": x}, sanitize=True))
    runs.append(interpret(lib.graph, {"x": x}))
    for got in runs:
        for a, e in zip(got.values(), expected):
            assert_close(a, e, what="MaxPool with Indices")


def test_pool_pads_as_large_as_kernel_rejected():
    x = randn(1, 1, 4, 4)
    m = make_model("AveragePool", {"x": x}, {"kernel_shape": [2, 2], "pads": [2, 0, 0, 0]})
    with pytest.raises(ShapeError, match="smaller than the kernel extent"):
        mtvm.compile(m)


def test_pool_fuses_tail():
    """MaxPool -> Add(residual) -> Relu and GlobalAveragePool -> Mul(per-channel)
    each become one kernel."""
    x, r = randn(1, 3, 8, 8), randn(1, 3, 4, 4)
    scale = randn(1, 3, 1, 1)
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["p", "r"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"]),
             helper.make_node("GlobalAveragePool", ["y"], ["g"]),
             helper.make_node("Mul", ["g", "scale"], ["z"])]
    g = helper.make_graph(
        nodes, "pools",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape),
         helper.make_tensor_value_info("r", onnx.TensorProto.FLOAT, r.shape)],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(scale, "scale")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m)
    lib = check_model(m, {"x": x, "r": r}, sanitize=True)
    assert [(n.op, [t.op for t in n.tail]) for n in lib.graph.nodes] == \
        [("MaxPool", ["Add", "Relu"]), ("GlobalAveragePool", ["Mul"])]
