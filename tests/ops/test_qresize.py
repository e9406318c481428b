"""QResize: DequantizeLinear -> Resize / Upsample -> QuantizeLinear on the 8-bit
tensors (mtvm/ops/quantized/resize.py), against onnxruntime running the QDQ model,
for every mode, coordinate transformation mode and nearest mode, scales and
sizes, 1-D / 2-D / NHWC, int8 / uint8, equal and different scales; the requantizing
QAffine before a Concat folded into the kernel; the LLVM backend against both.
(Upsample cannot sit between QuantizeLinear and DequantizeLinear: it is
deprecated from opset 10, where they start.)

The kernel computes what DQ -> Resize -> Q computes in float (the same taps,
weights and order), so results agree with onnxruntime to the bit but where a
float contraction or onnxruntime's own order moves a value across a rounding
tie: one step on a few elements at most. (Where onnxruntime's linear kernels
clamp a coordinate to the last input they weigh it twice by 0.5; QResize takes
the same taps, so the U-Net's x2 bilinear layer is bit-exact. Its coordinates
are computed in float32 where mtvm's tables come from onnx.reference in
float64: with weights that are not dyadic, a few sums land on the other side of
a tie, as they do for mtvm's float Resize.)
"""
import zlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.testing import have, run_on_board

rng = np.random.default_rng(11)

TP = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}


@pytest.fixture(autouse=True)
def _seeded(request):
    global rng
    rng = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def qrand(dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def qp(dtype, same):
    """(in scale, in zp, out scale, out zp)."""
    zi = 3 if dtype == np.int8 else 131
    if same:
        return 0.031, zi, 0.031, zi
    return 0.031, zi, 0.047, (-9 if dtype == np.int8 else 120)


def resize_model(shape, dtype=np.int8, same=True, *, scales=None, sizes=None, roi=None,
                 opset=19, concat=None, **attrs):
    """x (8-bit) -> DQ -> Resize -> Q [-> DQ -> Concat with a tensor of another scale -> Q]."""
    si, zi, so, zo = qp(dtype, same)
    t = TP[dtype]
    inits = [numpy_helper.from_array(np.array(si, np.float32), "si"),
             numpy_helper.from_array(np.array(zi, dtype), "zi"),
             numpy_helper.from_array(np.array(so, np.float32), "so"),
             numpy_helper.from_array(np.array(zo, dtype), "zo")]
    names = ["xf", "", "", ""]
    if roi is not None:
        inits.append(numpy_helper.from_array(np.array(roi, np.float32), "roi"))
        names[1] = "roi"
    if scales is not None:
        inits.append(numpy_helper.from_array(np.array(scales, np.float32), "scales"))
        names[2] = "scales"
    if sizes is not None:
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
        names[3] = "sizes"
    while names[-1] == "":
        names.pop()
    rs = helper.make_node("Resize", names, ["yf"], **attrs)
    nodes = [helper.make_node("DequantizeLinear", ["x", "si", "zi"], ["xf"]), rs,
             helper.make_node("QuantizeLinear", ["yf", "so", "zo"], ["y"])]
    ins = [helper.make_tensor_value_info("x", t, list(shape))]
    if concat is not None:   # Concat with a tensor of another scale along axis 1
        cshape, sc, zc = concat
        inits += [numpy_helper.from_array(np.array(sc, np.float32), "sc"),
                  numpy_helper.from_array(np.array(zc, dtype), "zc")]
        ins.append(helper.make_tensor_value_info("b", t, list(cshape)))
        nodes[-1] = helper.make_node("QuantizeLinear", ["yf", "so", "zo"], ["yq"])
        nodes += [helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["yd"]),
                  helper.make_node("DequantizeLinear", ["b", "sc", "zc"], ["bd"]),
                  helper.make_node("Concat", ["yd", "bd"], ["cf"], axis=1),
                  helper.make_node("QuantizeLinear", ["cf", "sc", "zc"], ["y"])]
    g = helper.make_graph(nodes, "qresize", ins, [helper.make_tensor_value_info("y", t, None)],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(m)   # the output's shape


def run_ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def assert_q_close(got, expected, what="", max_frac=0.03):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, \
        (what, got.shape, expected.shape, got.dtype, expected.dtype)
    d = np.abs(got.astype(np.int64) - expected.astype(np.int64))
    assert d.max(initial=0) <= 1, f"{what}: off by {d.max()} steps"
    assert np.count_nonzero(d) <= max(2, max_frac * d.size), \
        f"{what}: {np.count_nonzero(d)} of {d.size} differ"


def check(model, shape, dtype, llvm=False, extra=None, kernels=("QResize",), absent=()):
    feeds = {"x": qrand(dtype, shape)}
    if extra is not None:
        feeds["b"] = qrand(dtype, extra)
    expected = run_ort(model, feeds)
    lib = mtvm.compile(model)
    ops = [n.op for n in lib.graph.nodes]
    for op in kernels:
        assert op in ops, ops
    for op in absent:
        assert op not in ops, ops
    got = lib.run_host(feeds)["y"]
    assert_q_close(got, expected, "c")
    # the kernel is the bit-exact model of its NumPy reference (up to contraction)
    if llvm:
        pytest.importorskip("llvmlite")
        lgot = mtvm.compile(model, backend="llvm").run_host(feeds)["y"]
        assert_q_close(lgot, expected, "llvm")
        # LLVM contracts a * b + c into fused multiply-adds (as gcc does with FMA
        # hardware), the host C build here does not: a tie may round either way
        assert_q_close(lgot, got, "llvm vs c")
    return lib, got, expected


CTMS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
        "half_pixel_symmetric"]
QPS = [(np.int8, True), (np.uint8, False), (np.int8, False), (np.uint8, True)]


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("qpi", [0, 1])
def test_modes_and_coordinate_transforms(mode, ctm, qpi):
    """2-D NCHW upsampling by 2 (the U-Net case) and by 1.5 with sizes."""
    dtype, same = QPS[(qpi + CTMS.index(ctm)) % 4]
    shape = (1, 3, 6, 7)
    m = resize_model(shape, dtype, same, scales=[1, 1, 2, 2], mode=mode,
                     coordinate_transformation_mode=ctm)
    check(m, shape, dtype)
    m = resize_model(shape, dtype, same, sizes=[1, 3, 9, 10], mode=mode,
                     coordinate_transformation_mode=ctm)
    check(m, shape, dtype)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"])
@pytest.mark.parametrize("case", ["2d_scales", "1d_sizes_down", "2d_sizes_odd"])
def test_nearest_modes(nearest_mode, case):
    dtype, same = QPS[["round_prefer_floor", "round_prefer_ceil", "floor",
                       "ceil"].index(nearest_mode)]
    if case == "2d_scales":
        shape, kw = (2, 2, 5, 6), dict(scales=[1, 1, 3, 2.5])
    elif case == "1d_sizes_down":
        shape, kw = (1, 4, 17), dict(sizes=[1, 4, 7])
    else:
        shape, kw = (1, 2, 7, 5), dict(sizes=[1, 2, 4, 11])
    for ctm in ("half_pixel", "asymmetric", "align_corners"):
        m = resize_model(shape, dtype, same, mode="nearest", nearest_mode=nearest_mode,
                         coordinate_transformation_mode=ctm, **kw)
        check(m, shape, dtype)


@pytest.mark.parametrize("dtype,same", QPS)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_layouts_1d_nhwc_and_axes(dtype, same, mode):
    """NCW (1-D, last axis), NHWC (scales on H and W), the axes attribute (opset 18)
    and downsampling."""
    cases = [((1, 4, 9), dict(scales=[1, 1, 2])),
             ((1, 3, 16), dict(scales=[1, 1, 0.5])),
             ((1, 5, 6, 8), dict(scales=[1, 2, 2, 1])),
             ((1, 3, 8, 10), dict(scales=[1, 1, 0.5, 0.75])),
             ((2, 3, 4, 5), dict(scales=[2, 3], axes=[2, 3], opset=18)),
             ((1, 3, 4, 5), dict(sizes=[7], axes=[-1], opset=18)),
             ((1, 2, 3, 45), dict(scales=[1, 1, 1, 3]))]   # 3 phases, blocks of 32 periods
    for shape, kw in cases:
        m = resize_model(shape, dtype, same, mode=mode, **kw)
        check(m, shape, dtype)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("dtype,same", QPS[:2])
def test_tf_crop_and_resize(mode, dtype, same):
    """roi with points outside the input: the extrapolation value, quantized."""
    shape = (1, 2, 6, 6)
    m = resize_model(shape, dtype, same, sizes=[1, 2, 8, 9], mode=mode,
                     roi=[0, 0, -0.2, 0.13, 1, 1, 0.9, 1.3], extrapolation_value=0.5,
                     coordinate_transformation_mode="tf_crop_and_resize")
    check(m, shape, dtype)


@pytest.mark.parametrize("dtype,same", QPS[:2])
def test_antialias_and_keep_aspect_ratio(dtype, same):
    shape = (1, 2, 12, 10)
    m = resize_model(shape, dtype, same, scales=[1, 1, 0.5, 0.6], mode="linear", antialias=1,
                     opset=18)
    check(m, shape, dtype)
    m = resize_model(shape, dtype, same, sizes=[5, 9], axes=[2, 3], mode="nearest",
                     keep_aspect_ratio_policy="not_larger", opset=18)
    check(m, shape, dtype)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("dtype,same", QPS)
def test_concat_requantize_is_fused(mode, dtype, same):
    """Resize -> Q -> DQ -> Concat at another scale: the pass's requantizing QAffine
    becomes the kernel's remap table (one kernel)."""
    shape = (1, 4, 5, 6)
    zc = -20 if dtype == np.int8 else 100
    m = resize_model(shape, dtype, same, scales=[1, 1, 2, 2], mode=mode,
                     concat=((1, 3, 10, 12), 0.062, zc))
    check(m, shape, dtype, extra=(1, 3, 10, 12), kernels=("QResize", "Concat"),
          absent=("QAffine", "QuantizeLinear", "DequantizeLinear"))


def test_nearest_same_scale_is_a_copy():
    shape = (1, 3, 4, 4)
    m = resize_model(shape, np.int8, True, scales=[1, 1, 2, 2], mode="nearest")
    lib, got, expected = check(m, shape, np.int8)
    assert np.array_equal(got, expected)
    q = [n for n in lib.graph.nodes if n.op == "QResize"][0]
    assert len(q.inputs) == 1   # no remap table


def test_unet_upsampling_is_exact():
    """The denoising U-Net's layer: bilinear, half_pixel, x2, same scale: bit-exact."""
    shape = (1, 8, 16, 16)
    m = resize_model(shape, np.int8, True, scales=[1, 1, 2, 2], mode="linear",
                     coordinate_transformation_mode="half_pixel")
    _, got, expected = check(m, shape, np.int8)
    assert np.count_nonzero(got != expected) <= 2


LLVM_CASES = [
    ("linear", "half_pixel", (1, 3, 6, 7), dict(scales=[1, 1, 2, 2])),
    ("linear", "align_corners", (1, 3, 6, 7), dict(sizes=[1, 3, 9, 10])),
    ("nearest", "asymmetric", (1, 3, 6, 7), dict(scales=[1, 1, 2, 2])),
    ("nearest", "half_pixel", (1, 4, 17), dict(sizes=[1, 4, 7])),
    ("linear", "pytorch_half_pixel", (1, 5, 6, 8), dict(scales=[1, 2, 2, 1])),
    ("cubic", "half_pixel", (1, 2, 5, 5), dict(scales=[1, 1, 2, 2])),
    ("linear", "half_pixel", (1, 2, 3, 40), dict(scales=[1, 1, 2, 2])),   # blocks of 32
]


@pytest.mark.parametrize("i", range(len(LLVM_CASES)))
@pytest.mark.parametrize("dtype,same", QPS[:2])
def test_llvm_backend(i, dtype, same):
    mode, ctm, shape, kw = LLVM_CASES[i]
    m = resize_model(shape, dtype, same, mode=mode, coordinate_transformation_mode=ctm, **kw)
    check(m, shape, dtype, llvm=True)


def test_llvm_backend_extrapolation_and_fused_concat():
    shape = (1, 2, 6, 6)
    m = resize_model(shape, np.uint8, False, sizes=[1, 2, 8, 9], mode="linear",
                     roi=[0, 0, -0.2, 0.13, 1, 1, 0.9, 1.3], extrapolation_value=0.5,
                     coordinate_transformation_mode="tf_crop_and_resize")
    check(m, shape, np.uint8, llvm=True)
    shape = (1, 4, 5, 6)
    m = resize_model(shape, np.int8, True, scales=[1, 1, 2, 2], mode="linear",
                     concat=((1, 3, 10, 12), 0.062, -20))
    check(m, shape, np.int8, llvm=True, extra=(1, 3, 10, 12), absent=("QAffine",))


def test_reference_matches_the_kernel():
    """The op's NumPy reference is the kernel's model: equal outputs on the graph."""
    from mtvm.interp import interpret
    shape = (1, 3, 6, 7)
    m = resize_model(shape, np.uint8, False, scales=[1, 1, 2, 2], mode="linear",
                     coordinate_transformation_mode="align_corners")
    lib = mtvm.compile(m)
    x = qrand(np.uint8, shape)
    ref = interpret(lib.graph, {"x": x})
    ref = ref["y"] if isinstance(ref, dict) else ref[0]
    assert_q_close(lib.run_host({"x": x})["y"], ref, "reference", max_frac=0.005)


@pytest.mark.parametrize("i", [0, 2, 4, 6])
def test_direct_path_of_scalar_targets(i, monkeypatch):
    """Cortex-M / RISC-V read the taps' bytes directly (no scratch rows): that path,
    compiled for the host, on the same cases (C and LLVM)."""
    import mtvm.ops.quantized.resize as R
    monkeypatch.setattr(R, "row_plan", lambda shape, a, target: None)
    mode, ctm, shape, kw = LLVM_CASES[i]
    m = resize_model(shape, np.int8, i % 4 == 0, mode=mode, coordinate_transformation_mode=ctm,
                     **kw)
    lib, _, _ = check(m, shape, np.int8, llvm=True)
    assert "scratch" not in lib.sources["codegen/host/src/tvmgen_default_kernels.c"].split(
        "qresize(")[1].split(")")[0]


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("ctm", ["align_corners", "tf_crop_and_resize", "half_pixel"])
def test_scales_whose_product_is_not_whole(mode, ctm):
    """Output lengths floor(9 x 1.7) = 15 and floor(29 x 0.5) = 14: align_corners and
    tf_crop_and_resize map through those integer lengths ((in - 1) / (out - 1)), as the
    spec and onnxruntime do (onnx.reference takes scale x in, 15.3 and 14.5): the float
    Resize within float tolerance, QResize within a step."""
    shape, scales = (1, 2, 9, 29), [1, 1, 1.7, 0.5]
    roi = [0, 0, 0.1, 0.2, 1, 1, 0.8, 0.9] if ctm == "tf_crop_and_resize" else None
    kw = dict(mode=mode, coordinate_transformation_mode=ctm)
    if ctm == "tf_crop_and_resize":
        kw["extrapolation_value"] = 0.5
    check(resize_model(shape, np.int8, False, scales=scales, roi=roi, **kw), shape, np.int8)
    # the float model: the same Resize alone
    inits = [numpy_helper.from_array(np.array(scales, np.float32), "scales")]
    names = ["x", "", "scales"]
    if roi is not None:
        inits.append(numpy_helper.from_array(np.array(roi, np.float32), "roi"))
        names[1] = "roi"
    g = helper.make_graph([helper.make_node("Resize", names, ["y"], **kw)], "resize",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = onnx.shape_inference.infer_shapes(
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]))
    x = rng.standard_normal(shape).astype(np.float32)
    expected = run_ort(m, {"x": x})
    got = mtvm.compile(m).run_host({"x": x})["y"]
    assert got.shape == expected.shape == (1, 2, 15, 14)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 3, 1.5], [1, 1, 0.5, 0.75]])
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"])
def test_tf_half_pixel_for_nn(scales, nearest_mode):
    """Resize-11's tf_half_pixel_for_nn (tf2onnx's nearest upsampling; onnx.reference
    rejects it): source (x + 0.5) / scale, against onnxruntime, float and int8."""
    shape = (1, 2, 6, 7)
    kw = dict(mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn",
              nearest_mode=nearest_mode)
    inits = [numpy_helper.from_array(np.zeros(0, np.float32), "roi"),
             numpy_helper.from_array(np.array(scales, np.float32), "scales")]
    g = helper.make_graph([helper.make_node("Resize", ["x", "roi", "scales"], ["y"], **kw)],
                          "resize",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = onnx.shape_inference.infer_shapes(
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]))
    m.ir_version = 7
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(mtvm.compile(m).run_host({"x": x})["y"], run_ort(m, {"x": x}))
    check(resize_model(shape, np.int8, True, scales=scales, roi=[], opset=11, **kw), shape,
          np.int8)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("ctm", ["half_pixel", "asymmetric", "align_corners"])
def test_linear_resize_of_an_8bit_tensor_truncates(dtype, ctm):
    """Resize straight on an 8-bit tensor (onnxruntime's QOperator models keep it so):
    the interpolated sum truncated toward zero, as onnxruntime casts its float result
    (rounding put 42 % of the outputs one step above it)."""
    shape = (1, 2, 5, 6)
    t = TP[dtype]
    g = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                          coordinate_transformation_mode=ctm)], "resize8",
        [helper.make_tensor_value_info("x", t, list(shape))],
        [helper.make_tensor_value_info("y", t, [1, 2, 10, 12])],
        [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    x = qrand(dtype, shape)
    got = mtvm.compile(m).run_host({"x": x})["y"]
    expected = run_ort(m, {"x": x})
    if ctm == "align_corners":   # float32 coordinates a hair apart: truncation can flip
        assert_q_close(got, expected, ctm)
    else:
        np.testing.assert_array_equal(got, expected)


# (mode, ctm, shape, sizing, integer path expected): weights that are multiples of 2^-m
# (x2 / x4 bilinear, x2 asymmetric) take it; align_corners' (n - 1) / (2 n - 1) do not
INT_CASES = [
    ("linear", "half_pixel", (1, 3, 6, 7), dict(scales=[1, 1, 2, 2]), True),
    ("linear", "half_pixel", (1, 2, 5, 6), dict(scales=[1, 1, 4, 4]), True),
    ("linear", "asymmetric", (1, 3, 6, 7), dict(scales=[1, 1, 2, 2]), True),
    ("linear", "half_pixel", (1, 4, 9), dict(scales=[1, 1, 2]), True),
    ("linear", "pytorch_half_pixel", (1, 5, 6, 8), dict(scales=[1, 2, 2, 1]), True),
    ("linear", "align_corners", (1, 3, 6, 7), dict(scales=[1, 1, 2, 2]), False),
]


@pytest.mark.parametrize("i", range(len(INT_CASES)))
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_integer_path_is_the_float_computation(i, dtype, monkeypatch):
    """Where the taps' bytes are read directly (Cortex-M, RISC-V; the host as one here) and
    the weights are dyadic with one scale in and out, QResize sums in int32 and takes the
    float computation only at the ties: bit-exact with the reference (the float DQ ->
    Resize -> Q) on inputs of a narrow range, where ties are frequent, and within a step
    of onnxruntime."""
    from mtvm.interp import interpret
    import mtvm.ops.quantized.resize as R
    monkeypatch.setattr(R, "scalar_fpu", lambda target: True)   # the host as a scalar core
    mode, ctm, shape, kw, integer = INT_CASES[i]
    m = resize_model(shape, dtype, True, mode=mode, coordinate_transformation_mode=ctm, **kw)
    lib = mtvm.compile(m)
    src = lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    assert ("int32_t S" in src) == integer
    zp = qp(dtype, True)[1]
    for lo, hi in ((zp - 6, zp + 7), (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max) + 1)):
        x = rng.integers(lo, hi, shape).astype(dtype)
        got = lib.run_host({"x": x})["y"]
        np.testing.assert_array_equal(got, interpret(lib.graph, {"x": x})["y"])
        assert_q_close(got, run_ort(m, {"x": x}), "onnxruntime")


@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="needs qemu-system-arm and arm-none-eabi-gcc")
def test_integer_path_on_mps2_an386(tmp_path):
    """The U-Net's x2 bilinear layer on the Cortex-M4 (the integer path with its float
    ties): bit-exact with the host build and the reference."""
    from mtvm.interp import interpret
    shape = (1, 4, 6, 8)
    m = resize_model(shape, np.int8, True, scales=[1, 1, 2, 2], mode="linear",
                     coordinate_transformation_mode="half_pixel")
    lib = mtvm.compile(m, target="cortex-m4")
    assert "int32_t S" in lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    x = rng.integers(-3, 10, shape).astype(np.int8)
    dev = run_on_board(lib, {"x": x}, tmp_path / "proj")["y"]
    np.testing.assert_array_equal(dev, interpret(lib.graph, {"x": x})["y"])
    np.testing.assert_array_equal(dev, mtvm.compile(m).run_host({"x": x})["y"])
