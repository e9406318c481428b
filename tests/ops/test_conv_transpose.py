"""ConvTranspose against onnx.reference (onnxruntime where the reference cannot: an
output_shape): the stride-sized schedule (kernel == stride: one pointwise GEMM per phase)
over 1-D and 2-D shapes, channel counts around the micro-kernel's block, with and without
bias and a fused Relu, on the portable build (ASan/UBSan) and -march=native; strided ones
with a larger kernel, padding, output_padding, output_shape or auto_pad as convolutions
over their phases (mtvm/passes/conv_transpose.py), grouped ones as grouped phase
convolutions; the rest (dilation, a phase without taps) keep the gather form."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import mtvm
from mtvm.testing import check_model, reference_outputs

rng = np.random.default_rng(3)


def _model(x_shape, w_shape, attrs, bias: bool, relu: bool):
    x = rng.standard_normal(x_shape).astype(np.float32)
    inits = [numpy_helper.from_array((rng.standard_normal(w_shape) * 0.3).astype(np.float32),
                                     "w")]
    names = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(   # one per output channel: Co/group x group
            rng.standard_normal(w_shape[1] * attrs.get("group", 1)).astype(np.float32), "b"))
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
    ((1, 9, 3, 37), (9, 11, 2, 2), {"strides": [2, 2]}, True, True),    # rows of 16, 16, 5
    ((2, 5, 4, 18), (5, 8, 3, 2), {"strides": [3, 2]}, False, True),
    ((1, 1, 9), (1, 9, 2), {"strides": [2]}, True, True),                # 1-D
    ((2, 6, 11), (6, 4, 4), {"strides": [4]}, False, True),
]
PHASES = [
    ((1, 8, 6, 6), (8, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                  "output_padding": [1, 1]}),    # the usual 2x up-conv
    ((1, 4, 5, 5), (4, 6, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),    # odd output
    ((1, 5, 7, 5), (5, 6, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 3, 5, 4), (3, 2, 3, 5), {"strides": [2, 3], "pads": [0, 1, 2, 1]}),
    ((1, 4, 5, 5), (4, 6, 2, 2), {"strides": [2, 2], "output_padding": [1, 1]}),
    ((1, 4, 9), (4, 3, 5), {"strides": [2], "pads": [2, 2], "output_padding": [1]}),  # 1-D
    ((1, 6, 5, 5), (6, 6, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 6, 5, 5), (6, 6, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 6, 5, 5), (6, 2, 3, 3), {"strides": [2, 2], "output_shape": [10, 10]}),
    ((1, 6, 5, 5), (6, 2, 3, 3), {"strides": [2, 2], "output_shape": [10, 10],
                                  "auto_pad": "SAME_UPPER"}),
]
GATHER = [
    ((1, 4, 6), (4, 3, 3), {"strides": [1], "dilations": [2]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "dilations": [2, 2]}),
    ((1, 2, 4, 4), (2, 3, 1, 1), {"strides": [2, 2]}),     # phases without a tap
]
GROUPED = [
    ((1, 4, 4, 4), (4, 1, 3, 3), {"strides": [2, 2], "group": 4}),     # depthwise
    ((1, 8, 7, 6), (8, 2, 4, 4), {"strides": [2, 2], "group": 4, "pads": [1, 2, 2, 1]}),
    ((1, 6, 5, 5), (6, 3, 3, 3), {"strides": [2, 2], "group": 2, "pads": [1, 1, 1, 1],
                                  "output_padding": [1, 1]}),
    ((2, 6, 9), (6, 1, 5), {"strides": [2], "group": 3, "pads": [2, 1]}),          # 1-D
]


@pytest.mark.parametrize("target", ["c", "host"])
@pytest.mark.parametrize("x_shape,w_shape,attrs,bias,relu", STRIDE_SIZED)
def test_stride_sized_conv_transpose_is_one_gemm_per_phase(x_shape, w_shape, attrs, bias,
                                                            relu, target):
    m, feed = _model(x_shape, w_shape, attrs, bias, relu)
    lib = check_model(m, feed, target=target, sanitize=target == "c")
    assert [n.op for n in lib.graph.nodes] == ["ConvTranspose"]
    assert lib.metadata["operators"][0]["schedule"] == "conv_transpose_f32.phase_gemm"


@pytest.mark.parametrize("x_shape,w_shape,attrs,bias,relu",
                         [c for c in STRIDE_SIZED if len(c[0]) == 4])
def test_stride_sized_conv_transpose_rows_on_host_simd(x_shape, w_shape, attrs, bias, relu):
    """The 2-D phase GEMMs of hosts (a row's tiles, one per column phase, stored
    interleaved) built for this host's SIMD and for AVX2, against onnx.reference."""
    import platform

    from mtvm.host_runner import HostModule
    from mtvm.testing import assert_close, reference_outputs
    m, feed = _model(x_shape, w_shape, attrs, bias, relu)
    lib = mtvm.compile(m, target="c")
    expected = reference_outputs(m, feed)[0]
    builds = [["-march=native"]] + ([["-march=x86-64-v3"]] if platform.machine() in
                                    ("x86_64", "AMD64") else [])
    for extra in builds:
        got = HostModule(lib, opt="-O3", extra=extra).run(feed)
        assert_close(list(got.values())[0], expected, what=str(extra))


def _against_onnxruntime(m, feed, **compile_opts):
    """For what onnx.reference gets wrong or rejects (groups, an output_shape)."""
    import onnxruntime as ort
    lib = mtvm.compile(m, **compile_opts)
    expected = ort.InferenceSession(m.SerializeToString()).run(None, feed)[0]
    for sanitize in (False, True):
        got = list(lib.run_host(feed, sanitize=sanitize).values())[0]
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    return lib


@pytest.mark.parametrize("x_shape,w_shape,attrs", GATHER)
def test_other_conv_transposes_keep_the_gather_form(x_shape, w_shape, attrs):
    m, feed = _model(x_shape, w_shape, attrs, True, True)
    lib = _against_onnxruntime(m, feed) if "group" in attrs else \
        check_model(m, feed, sanitize=True)
    assert [n.op for n in lib.graph.nodes] == ["ConvTranspose"]
    assert not lib.metadata["operators"][0].get("schedule")


@pytest.mark.parametrize("target", ["c", "host"])
@pytest.mark.parametrize("x_shape,w_shape,attrs", PHASES)
def test_strided_conv_transposes_are_convolutions_over_their_phases(x_shape, w_shape, attrs,
                                                                    target):
    for bias, relu in ((True, False), (False, True)):
        m, feed = _model(x_shape, w_shape, attrs, bias, relu)
        if "output_shape" in attrs:    # onnx.reference's col2im rejects it
            lib = _against_onnxruntime(m, feed, target=target)
        else:
            lib = check_model(m, feed, target=target, sanitize=target == "c")
        ops = [n.op for n in lib.graph.nodes]
        assert "ConvTranspose" not in ops and ops.count("Conv") == int(
            np.prod(attrs["strides"])), ops


@pytest.mark.parametrize("x_shape,w_shape,attrs", GROUPED)
def test_grouped_conv_transposes_are_grouped_convolutions_over_their_phases(x_shape, w_shape,
                                                                           attrs):
    """Each phase a Conv with the ConvTranspose's groups (group g's input channels feed its
    own outputs in both), against onnxruntime (onnx.reference mishandles groups)."""
    for bias, relu in ((True, False), (False, True)):
        m, feed = _model(x_shape, w_shape, attrs, bias, relu)
        lib = _against_onnxruntime(m, feed)
        convs = [n for n in lib.graph.nodes if n.op == "Conv"]
        assert "ConvTranspose" not in [n.op for n in lib.graph.nodes]
        assert len(convs) == int(np.prod(attrs["strides"]))
        assert all(n.attrs["group"] == attrs["group"] for n in convs)


def test_phase_convolutions_run_through_the_llvm_backend():
    m, feed = _model(*PHASES[0], True, True)
    lib = mtvm.compile(m, backend="llvm")
    np.testing.assert_allclose(list(lib.run_host(feed).values())[0],
                               reference_outputs(m, feed)[0], rtol=1e-4, atol=1e-5)


def test_a_bias_of_the_wrong_size_is_one_clear_error():
    m, _ = _model((1, 4, 4, 4), (4, 1, 3, 3), {"strides": [2, 2], "group": 4}, False, False)
    m.graph.initializer.append(numpy_helper.from_array(np.zeros(1, np.float32), "b"))
    m.graph.node[0].input.append("b")
    with pytest.raises(mtvm.MtvmError, match="one value per output channel"):
        mtvm.compile(m)
