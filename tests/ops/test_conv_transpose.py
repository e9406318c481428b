"""ConvTranspose against onnx.reference: the stride-sized schedule (kernel ==
stride: one pointwise GEMM per phase) over 1-D and 2-D shapes, channel counts
around the micro-kernel's block, with and without bias and a fused Relu, on the
portable build (ASan/UBSan) and -march=native; other geometries keep the
gather form."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from mtvm.testing import check_model

rng = np.random.default_rng(3)


def _model(x_shape, w_shape, attrs, bias: bool, relu: bool):
    x = rng.standard_normal(x_shape).astype(np.float32)
    inits = [numpy_helper.from_array((rng.standard_normal(w_shape) * 0.3).astype(np.float32),
                                     "w")]
    names = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(
            rng.standard_normal(w_shape[1]).astype(np.float32), "b"))
        names.append("b")
    nodes = [helper.make_node("ConvTranspose", names, ["c" if relu else "y"], **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    g = helper.make_graph(
        nodes, "convtranspose",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m), {"x": x}


# X shape, W shape ([Ci][Co][k...]), attributes, bias, fused Relu
STRIDE_SIZED = [
    ((1, 16, 5, 7), (16, 8, 2, 2), {"strides": [2, 2]}, True, True),     # U-Net up-conv
    ((2, 3, 4, 4), (3, 13, 3, 3), {"strides": [3, 3]}, False, False),
    ((1, 17, 3, 6), (17, 5, 2, 3), {"strides": [2, 3]}, True, False),
    ((1, 1, 9), (1, 9, 2), {"strides": [2]}, True, True),                # 1-D
    ((2, 6, 11), (6, 4, 4), {"strides": [4]}, False, True),
]
GATHER = [
    ((1, 4, 5, 5), (4, 6, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 5, 5), (4, 6, 2, 2), {"strides": [2, 2], "output_padding": [1, 1]}),
    ((1, 4, 6), (4, 3, 3), {"strides": [1], "dilations": [2]}),
]


@pytest.mark.parametrize("target", ["c", "host"])
@pytest.mark.parametrize("x_shape,w_shape,attrs,bias,relu", STRIDE_SIZED)
def test_stride_sized_conv_transpose_is_one_gemm_per_phase(x_shape, w_shape, attrs, bias,
                                                            relu, target):
    m, feed = _model(x_shape, w_shape, attrs, bias, relu)
    lib = check_model(m, feed, target=target, sanitize=target == "c")
    assert [n.op for n in lib.graph.nodes] == ["ConvTranspose"]
    assert lib.metadata["operators"][0]["schedule"] == "conv_transpose_f32.phase_gemm"


@pytest.mark.parametrize("x_shape,w_shape,attrs", GATHER)
def test_other_conv_transposes_keep_the_gather_form(x_shape, w_shape, attrs):
    m, feed = _model(x_shape, w_shape, attrs, True, True)
    lib = check_model(m, feed, sanitize=True)
    assert not lib.metadata["operators"][0].get("schedule")
