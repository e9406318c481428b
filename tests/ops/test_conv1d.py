"""1-D float convolutions go through the 2-D schedules (a 1-D Conv is a 2-D Conv
of height 1): each schedule's kind with the attributes that change its
indexing (stride, dilation, padding, groups), fused tails, against
onnx.reference, on the portable build (under ASan/UBSan) and -march=native."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from mtvm.testing import check_model

rng = np.random.default_rng(7)

# name, X shape, W shape, attributes, schedule comment expected in the C
CASES = [
    ("pointwise", (1, 16, 50), (24, 16, 1), {}, "pointwise GEMM"),
    ("window", (2, 8, 64), (16, 8, 5), {"pads": [2, 2]}, "window rows GEMM"),
    ("window_stride2_dilation2", (1, 12, 71), (16, 12, 3),
     {"strides": [2], "dilations": [2], "pads": [1, 2]}, "window rows GEMM"),
    ("im2col_short", (1, 8, 6), (16, 8, 3), {"pads": [1, 1]}, "im2col GEMM"),
    ("grouped", (1, 16, 40), (32, 4, 3), {"group": 4, "pads": [1, 1]}, "window rows GEMM"),
    ("depthwise", (1, 24, 48), (24, 1, 5), {"group": 24, "pads": [2, 2]}, "depthwise"),
    ("depthwise_stride2", (1, 16, 33), (16, 1, 3), {"group": 16, "strides": [2],
                                                     "pads": [1, 1]}, "depthwise"),
    ("same_upper", (1, 8, 30), (16, 8, 4), {"auto_pad": "SAME_UPPER", "strides": [3]},
     "window rows GEMM"),
]


def _model(x_shape, w_shape, attrs):
    """Conv (bias) + Relu: the Relu is the Conv kernel's fused tail."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) * 0.3).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(
        nodes, "conv1d", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m), {"x": x}


@pytest.mark.parametrize("target", ["c", "host"])
@pytest.mark.parametrize("name,x_shape,w_shape,attrs,kind", CASES, ids=[c[0] for c in CASES])
def test_conv1d_takes_the_2d_schedules(name, x_shape, w_shape, attrs, kind, target):
    m, feed = _model(x_shape, w_shape, attrs)
    lib = check_model(m, feed, target=target, sanitize=target == "c")
    assert [n.op for n in lib.graph.nodes] == ["Conv"]          # the Relu is fused
    assert lib.metadata["operators"][0]["schedule"].startswith("conv2d_f32")
    src = "".join(v for k, v in lib.sources.items() if k.endswith("_kernels.c"))
    assert f"Schedule: {kind}" in src, "a 1-D Conv fell back to the direct loop nest"
