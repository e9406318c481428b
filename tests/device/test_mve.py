"""Helium (MVE) int8 kernels on the Cortex-M55 board `mps3-an547` (QEMU implements MVE):
a small int8 conv net of our own that walks QConv's MVE paths (im2col and depthwise)
through their corner cases (taps not a multiple of 16 or of 4, an odd pixel count, an odd
channel count per group, groups, strides, dilations, asymmetric and window-wide padding,
pointwise layers written in place, tails only), a ConvInteger (int32 outputs: not the
MVE path, which needs the cheap requantization, but the same core's DSP path),
ic_resnet8_int8 and ad_autoencoder_int8 (QMatMul's MVE dot products),
each run through a host-driven session over the emulated UART under -icount and compared
with the host build of target "c" bit for bit; instructions per MAC printed (`pytest -p
no:xdist -s` shows them).

The C unit tests of the kernels themselves: tests/kernels/test_mve_kernels.py."""
import os

import numpy as np
import pytest

import mtvm
import mtvm.project as P
from mtvm.testing import quantize_qdq

from device_utils import MODELS_DIR, need_models, quiet
from test_m33_m0 import check_int8, compiled, need_machine, reference

pytestmark = pytest.mark.device

M55 = "mps3-an547"


def mve_conv_model(tmp_dir: str) -> str:
    """1x3x13x13 -> thirteen int8 convolutions of awkward shapes -> global average pool ->
    Gemm 3, quantized by onnxruntime (QDQ, per-channel int8 weights, int8 activations;
    seeded calibration data), with its onnxruntime outputs beside it. Besides the Gemm's
    output, the activations of the layers marked * are outputs too (every element compared:
    a pooled output would hide pixels swapped within a channel). The layers (kk taps per
    output, nb = kk // 4 blocks, tl = kk % 4 tail taps):
    3x3 pad 1 (kk 27: nb % 4 = 2, tl 3; 169 pixels: odd), *depthwise 3x3 pad 1 (rows of 13:
    whole vectors and a tail), *depthwise 3x3 dilation 6 (window offsets past a byte: the
    int32-lane paths), *depthwise 4x4 pads (2, 2, 1, 1) (16 taps), 3x3
    stride 2 pads (1, 1, 0, 0) (kk 72; 7 channels: odd), *depthwise 3x3 stride 2 pad 1,
    1x1 (kk 7, in place), 3x3 group 2 dilation 2 pad 2 (3 channels per group), 5x5 pad 2
    on a 3x3 plane (every window crosses the border; kk 150), 1x1 stride 2 (kk 10, 4
    pixels), 1x1 (kk 5), *1x1 (kk 5), 1x1 (kk 2: the tail alone)."""
    path = os.path.join(tmp_dir, "mve_convs_int8.onnx")
    if os.path.exists(path):
        return path
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(55)
    layers = [  # (out channels, in channels per group, k, attributes, an output)
        (8, 3, 3, dict(pads=[1, 1, 1, 1]), False),
        (8, 1, 3, dict(group=8, pads=[1, 1, 1, 1]), True),
        (8, 1, 3, dict(group=8, dilations=[6, 6], pads=[6, 6, 6, 6]), True),
        (8, 1, 4, dict(group=8, pads=[2, 2, 1, 1]), True),
        (7, 8, 3, dict(strides=[2, 2], pads=[1, 1, 0, 0]), False),
        (7, 1, 3, dict(group=7, strides=[2, 2], pads=[1, 1, 1, 1]), True),
        (6, 7, 1, {}, False),
        (6, 3, 3, dict(group=2, dilations=[2, 2], pads=[2, 2, 2, 2]), False),
        (10, 6, 5, dict(pads=[2, 2, 2, 2]), False),
        (5, 10, 1, dict(strides=[2, 2]), False),
        (5, 5, 1, {}, False),
        (2, 5, 1, {}, True),
        (4, 2, 1, {}, False)]
    inits, nodes, x, outs = [], [], "input", []
    for i, (oc, cg, k, attrs, out) in enumerate(layers):
        w = rng.standard_normal((oc, cg, k, k)) * (1.5 / np.sqrt(cg * k * k))
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                  numpy_helper.from_array((rng.standard_normal(oc) * 0.1).astype(np.float32),
                                          f"b{i}")]
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], **attrs),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        x = f"r{i}"
        if out:
            outs.append(x)
    inits += [numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "wf"),
              numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "bf")]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["g"]),
              helper.make_node("Flatten", ["g"], ["f"]),
              helper.make_node("Gemm", ["f", "wf", "bf"], ["output"])]
    g = helper.make_graph(nodes, "mve_convs",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                         [1, 3, 13, 13])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3])] +
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                           for o in outs], inits)
    fp32 = os.path.join(tmp_dir, "mve_convs.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), fp32)
    calib = [rng.standard_normal((1, 3, 13, 13)).astype(np.float32) for _ in range(8)]
    xin = rng.standard_normal((1, 3, 13, 13)).astype(np.float32)
    return quantize_qdq(fp32, path, "input", calib, xin, per_channel=True)


def conv_integer_model(tmp_dir: str) -> str:
    """ConvInteger (int8 x int8 -> int32, no requantization: on the M55 QConv's DSP path, the
    MVE one wanting the cheap requantization) 1x5x7x9 -> 6 channels, 3x3 stride (1, 2) pad 1,
    weight zero point 0,
    input zero point 3; its reference output (the ONNX reference evaluator) beside it."""
    path = os.path.join(tmp_dir, "mve_convinteger.onnx")
    if os.path.exists(path):
        return path
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.integers(-128, 128, (6, 5, 3, 3)).astype(np.int8), "w")
    zx = numpy_helper.from_array(np.array(3, np.int8), "zx")
    node = helper.make_node("ConvInteger", ["input", "w", "zx"], ["output"], pads=[1, 1, 1, 1],
                            strides=[1, 2])
    vi = helper.make_tensor_value_info
    g = helper.make_graph([node], "mve_convinteger",
                          [vi("input", TensorProto.INT8, [1, 5, 7, 9])],
                          [vi("output", TensorProto.INT32, [1, 6, 7, 5])], [w, zx])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)
    x = rng.integers(-128, 128, (1, 5, 7, 9)).astype(np.int8)
    y = ReferenceEvaluator(model).run(None, {"input": x})[0]
    np.savez(path[:-5] + ".npz", in_0=x, out_0=y)
    return path


@pytest.fixture(scope="module")
def own_models(tmp_path_factory):
    return str(tmp_path_factory.mktemp("mve_models"))


def model_path(name: str, own_dir: str) -> str:
    if name == "mve_convs_int8":
        return mve_conv_model(own_dir)
    if name == "mve_convinteger":
        return conv_integer_model(own_dir)
    need_models()
    return os.path.join(MODELS_DIR, f"{name}.onnx")


def test_the_convs_of_the_test_model_take_the_mve_path(own_models):
    """No tools needed: compiled for the board's target, every conv of the test model takes
    QConv's MVE paths (im2col, depthwise: their kernel library files shipped), none the
    int16 column's."""
    pytest.importorskip("onnxruntime")
    lib = mtvm.compile(model_path("mve_convs_int8", own_models),
                       target=mtvm.target.Target.parse("cortex-m55"))
    src = lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    assert src.count("mtvm_conv_s8_mve(") == 9 and src.count("mtvm_dw_channel_s8_mve(") == 4
    assert src.count("dw_taps[16]") == 3      # the fourth: window offsets past a byte
    assert "mtvm_mm2x2_s16" not in src and "int16_t* col" not in src
    assert "codegen/host/include/mtvm_mm_s8_mve.h" in lib.sources
    assert "codegen/host/include/mtvm_depthwise_s8_mve.h" in lib.sources


# (kws_dscnn_int8, vww_mobilenetv1_int8, kwt_tiny_int8 and kws_crnn_int8 match too, but a
# final softmax or pooling hides most kernel errors, and they add 30 s: the test model's
# every-element outputs are the sensitive check)
@pytest.mark.parametrize("name", ["mve_convs_int8", "mve_convinteger", "ic_resnet8_int8",
                                  "ad_autoencoder_int8"])
def test_int8_session_matches_the_host_build(name, projects_dir, own_models):
    """Build for mps3-an547 (target cortex-m55: the MVE kernels), start QEMU with -icount,
    run the reference input through the session over the UART pty and time one run:
    bit-exact with the host build of target "c"; prints instructions per MAC."""
    need_machine(M55)
    path = model_path(name, own_models)
    out = os.path.join(projects_dir, f"mve-{name}")
    proj = P.generate(path, board=M55, out_dir=out, progress=quiet)
    assert "mve" in proj.metadata["target"]["features"]
    proj.build(progress=quiet)
    x, ref = reference(path)
    proj.template.flash(proj, quiet, icount=True)
    try:
        with proj.session() as s:
            ys = list(s.executor.run([x]).values())
            bench = s.executor.benchmark(number=1, repeat=1)
            assert s.stats["bad_packets"] == 0
    finally:
        proj.stop()
    assert ys[0].shape == ref.shape
    if ys[0].dtype == np.int32:     # ConvInteger: exact
        np.testing.assert_array_equal(ys[0], ref)
        np.testing.assert_array_equal(ys[0], list(compiled(path).run_host([x]).values())[0])
    else:
        check_int8(path, ys[0], x, ref)
    if len(ys) > 1:     # the test model's other outputs: bit-exact with the host build too
        hosts = list(compiled(path).run_host([x]).values())
        assert len(hosts) == len(ys)
        for y, host in zip(ys[1:], hosts[1:]):
            np.testing.assert_array_equal(y, host)
    n = proj.template.instructions_per_inference(bench)
    macs = proj.metadata["total_macs"]
    print(f"\n{name} on {M55}: {n:,} instructions, {macs:,} MACs, "
          f"{n / macs:.2f} instructions/MAC")
