"""Conv against onnx.reference: 1-D/2-D/3-D, groups, depthwise, dilation, strides,
pads, every auto_pad mode; fusion of bias/activation/residual tails."""
import re

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import mtvm
from mtvm.testing import check_model, cpu_has, make_model

rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# (id, x shape, w shape, attributes, with bias, run under ASan/UBSan too)
CASES = [
    ("1d", (1, 3, 10), (4, 3, 3), {}, True, False),
    ("1d_stride2_pad", (1, 3, 11), (4, 3, 3), {"strides": [2], "pads": [1, 1]}, True, True),
    ("1d_dilation_asym_pad", (2, 2, 9), (3, 2, 3), {"dilations": [2], "pads": [2, 1]}, True,
     False),
    ("1d_same_upper_s2", (1, 2, 10), (2, 2, 4), {"auto_pad": "SAME_UPPER", "strides": [2]},
     False, False),
    ("1d_same_lower_s2", (1, 2, 10), (2, 2, 4), {"auto_pad": "SAME_LOWER", "strides": [2]},
     True, True),
    ("1d_group_dilation_stride3", (1, 4, 17), (6, 2, 3),
     {"group": 2, "dilations": [2], "strides": [3], "pads": [0, 3]}, False, False),
    ("2d_valid_3x3", (1, 3, 8, 8), (4, 3, 3, 3), {}, True, False),
    ("2d_same_pad1", (1, 3, 8, 7), (5, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True, True),
    ("2d_stride2_pad1", (1, 4, 9, 8), (4, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]},
     True, False),
    ("2d_asym_pads", (1, 2, 7, 6), (3, 2, 3, 3), {"pads": [0, 1, 2, 0]}, True, True),
    ("2d_dilation2", (1, 2, 9, 9), (3, 2, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]},
     True, False),
    ("2d_dilation_stride_mixed", (1, 3, 10, 11), (2, 3, 3, 2),
     {"dilations": [2, 3], "strides": [1, 2], "pads": [1, 0, 3, 2]}, True, True),
    ("2d_group2", (1, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, True, False),
    ("2d_group3_mult2", (1, 6, 5, 7), (6, 2, 2, 3), {"group": 3}, False, False),
    ("2d_depthwise", (1, 4, 8, 8), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}, True,
     True),
    ("2d_depthwise_mult2_s2", (1, 3, 9, 9), (6, 1, 3, 3),
     {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}, True, False),
    ("2d_pointwise_nobias", (1, 8, 5, 5), (6, 8, 1, 1), {}, False, False),
    ("2d_same_upper_s2", (1, 2, 7, 8), (3, 2, 3, 3), {"auto_pad": "SAME_UPPER",
                                                     "strides": [2, 2]}, True, True),
    ("2d_same_lower_s2", (1, 2, 7, 8), (3, 2, 3, 3), {"auto_pad": "SAME_LOWER",
                                                     "strides": [2, 2]}, True, False),
    ("2d_same_upper_dilation", (1, 2, 8, 8), (2, 2, 3, 3), {"auto_pad": "SAME_UPPER",
                                                           "dilations": [2, 2]}, True, False),
    ("2d_same_lower_even_kernel", (1, 2, 6, 6), (2, 2, 2, 4), {"auto_pad": "SAME_LOWER"}, True,
     False),
    ("2d_valid_s2", (1, 3, 9, 10), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]},
     True, False),
    ("2d_kernel_shape_attr", (1, 2, 6, 6), (3, 2, 3, 2), {"kernel_shape": [3, 2]}, True, False),
    ("2d_batch2", (2, 3, 6, 5), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True, True),
    ("2d_1x5_row", (1, 2, 4, 9), (3, 2, 1, 5), {"pads": [0, 2, 0, 2]}, True, False),
    ("2d_pads_beyond_kernel", (1, 2, 4, 4), (2, 2, 2, 2), {"pads": [3, 2, 2, 3]}, True, True),
    ("2d_kernel_larger_than_input", (1, 2, 3, 3), (2, 2, 5, 5), {"pads": [2, 2, 2, 2]}, True,
     False),
    ("2d_full_window_1x1_out", (1, 3, 5, 4), (4, 3, 5, 4), {}, True, False),
    ("2d_one_output_column_padded", (1, 2, 4, 3), (2, 2, 3, 3), {"pads": [1, 1, 1, 1],
                                                                 "strides": [1, 3]}, True, True),
    ("3d", (1, 2, 4, 5, 4), (3, 2, 2, 3, 2), {"pads": [1, 1, 0, 0, 1, 1], "strides": [1, 2, 1]},
     True, True),
    ("3d_depthwise_dilation", (1, 2, 5, 5, 5), (2, 1, 2, 2, 2),
     {"group": 2, "dilations": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0]}, False, False),
    # The float schedules (mtvm/ops/conv.py DEFAULT_KNOBS, mtvm/schedules/*/conv_f32.py): pointwise GEMM with full and
    # partial tiles and a channel remainder, im2col GEMM with padding/stride/dilation/
    # groups, depthwise with border columns, rows from the zero row, strides.
    ("sched_pointwise", (1, 8, 5, 5), (16, 8, 1, 1), {}, True, True),
    ("sched_pointwise_rows_left", (2, 12, 7, 3), (10, 12, 1, 1), {}, False, True),
    ("sched_im2col_s2_pad", (1, 3, 9, 9), (10, 3, 3, 3),
     {"strides": [2, 2], "pads": [1, 1, 1, 1]}, True, True),
    ("sched_im2col_dilation_asym", (2, 4, 11, 5), (9, 4, 3, 2),
     {"pads": [2, 1, 0, 1], "dilations": [2, 1]}, True, True),
    ("sched_im2col_1x1_s2", (1, 16, 6, 6), (32, 16, 1, 1), {"strides": [2, 2]}, True, True),
    ("sched_im2col_group2", (1, 4, 6, 6), (16, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]},
     False, True),
    ("sched_window_pad", (1, 5, 9, 10), (10, 5, 3, 3), {"pads": [1, 1, 1, 1]}, True, True),
    ("sched_window_s2_asym", (1, 3, 13, 21), (9, 3, 3, 3),
     {"strides": [2, 2], "pads": [0, 1, 2, 0]}, True, True),
    ("sched_window_dilation_s3", (2, 4, 11, 30), (9, 4, 3, 2),
     {"pads": [2, 1, 0, 1], "dilations": [2, 3], "strides": [1, 3]}, False, True),
    ("sched_window_1x1_s2", (1, 16, 6, 17), (32, 16, 1, 1), {"strides": [2, 2]}, True, True),
    ("sched_window_group2", (1, 4, 6, 9), (16, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]},
     False, True),
    ("sched_depthwise", (1, 6, 7, 7), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}, True,
     True),
    ("sched_depthwise_s2", (1, 6, 9, 9), (6, 1, 3, 3),
     {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}, True, True),
    ("sched_depthwise_valid", (1, 20, 7, 3), (20, 1, 3, 3), {"group": 20}, False, True),
    ("sched_depthwise_3x3_out", (1, 8, 3, 3), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]},
     True, True),
    ("sched_depthwise_5x5_dilated", (1, 5, 12, 12), (5, 1, 5, 5),
     {"group": 5, "pads": [4, 2, 4, 2], "dilations": [2, 1]}, True, True),
    ("sched_depthwise_1d_dilated_border", (1, 5, 30), (5, 1, 5),
     {"group": 5, "pads": [8, 7], "dilations": [4]}, True, True),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs,bias,sanitize",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_conv(x_shape, w_shape, attrs, bias, sanitize):
    x, w = randn(*x_shape), randn(*w_shape)
    consts = {"w": w}
    if bias:
        consts["b"] = randn(w_shape[0])
    m = make_model("Conv", {"x": x}, attrs, consts=consts)
    check_model(m, {"x": x}, sanitize=sanitize)


@pytest.mark.parametrize("opset", [11, 13, 22])
def test_conv_opsets(opset):
    x, w, b = randn(1, 2, 6, 6), randn(3, 2, 3, 3), randn(3)
    m = make_model("Conv", {"x": x}, {"pads": [1, 0, 0, 1]}, consts={"w": w, "b": b},
                   opset=opset)
    check_model(m, {"x": x})


def test_conv_float64():
    x, w, b = (randn(*s).astype(np.float64) for s in [(1, 2, 6, 5), (3, 2, 3, 3), (3,)])
    m = make_model("Conv", {"x": x}, {"pads": [1, 1, 1, 1], "strides": [2, 1]},
                   consts={"w": w, "b": b})
    check_model(m, {"x": x})


@pytest.mark.parametrize("name,x_shape,w_shape,attrs,schedule", [
    ("pointwise", (1, 8, 5, 5), (16, 8, 1, 1), {}, "pointwise GEMM"),
    ("window", (1, 3, 9, 9), (10, 3, 3, 3), {"pads": [1, 1, 1, 1]}, "window rows GEMM"),
    ("im2col", (1, 3, 9, 5), (10, 3, 3, 3), {"pads": [1, 1, 1, 1]}, "im2col GEMM"),
    ("depthwise", (1, 6, 7, 7), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}, "depthwise"),
    # a dilated 1-D window's padding: 8 border columns a side (1-D allows 16)
    ("depthwise_1d_wide_border", (1, 6, 48), (6, 1, 5),
     {"group": 6, "dilations": [4], "pads": [8, 8]}, "depthwise"),
    ("direct", (1, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, None),
])
def test_conv_schedule_choice_and_native_build(name, x_shape, w_shape, attrs, schedule):
    """Each schedule is chosen where it applies and is right when built with the
    host's SIMD (cc -O3 -march=native: the AVX-512 or AVX2 micro-kernel on x86)."""
    from mtvm.host_runner import HostModule
    from mtvm.testing import assert_close, reference_outputs
    x, w = randn(*x_shape), randn(*w_shape)
    m = make_model("Conv", {"x": x}, attrs, consts={"w": w, "b": randn(w_shape[0])})
    lib = mtvm.compile(m)
    src = kernel_source(lib)
    assert (f"Schedule: {schedule}" in src) if schedule else ("Schedule:" not in src)
    import platform
    builds = [["-march=native"]]
    if platform.machine() in ("x86_64", "AMD64"):
        builds.append(["-mavx2", "-mfma"])     # the AVX2 path on an AVX-512 host too
    for extra in builds:
        got = HostModule(lib, opt="-O3", extra=extra).run({"x": x})
        assert_close(list(got.values())[0], reference_outputs(m, {"x": x})[0], what=str(extra))


def test_conv_weights_as_runtime_input():
    x, w = randn(1, 2, 5, 5), randn(3, 2, 3, 3)
    m = make_model("Conv", {"x": x, "w": w}, {"strides": [2, 2]})
    check_model(m, {"x": x, "w": w})


def test_conv_canonical_attrs_and_macs():
    x, w = randn(1, 4, 7, 8), randn(6, 2, 3, 3)
    m = make_model("Conv", {"x": x}, {"auto_pad": "SAME_LOWER", "strides": [2, 2], "group": 2},
                   consts={"w": w})
    lib = mtvm.compile(m)
    node = lib.graph.nodes[0]
    assert "auto_pad" not in node.attrs
    assert node.attrs["pads"] == [1, 1, 1, 0] and node.attrs["kernel_shape"] == [3, 3]
    assert lib.metadata["operators"][0]["macs"] == 6 * 4 * 4 * 2 * 9


def kernel_source(lib) -> str:
    return next(t for p, t in lib.sources.items() if p.endswith("_kernels.c"))


def test_generated_c_has_no_per_mac_bounds_checks():
    """Padding is handled by the tap range per output position: the MAC loop is
    free of conditionals, and without dilation there is no division or modulo."""
    x, w = randn(1, 3, 8, 8), randn(4, 3, 3, 3)
    m = make_model("Conv", {"x": x}, {"pads": [1, 1, 1, 1]}, consts={"w": w})
    src = kernel_source(mtvm.compile(m))
    body = src[src.index("int32_t tvmgen_default_000_conv("):]
    assert "kh_lo" in body and "kw_hi" in body
    assert not re.search(r"[^/*]/[^/*]|%", body.split("*/", 2)[-1])
    mac = re.search(r"for \(int kw[^\n]*\n([^\n]*)\n", body).group(1)
    assert "acc +=" in mac and "if" not in mac and "?" not in mac
    assert max(len(line) for line in src.splitlines()) <= 100


# -- fusion --------------------------------------------------------------------------

def graph_model(nodes, inputs, consts, outputs=("y",)):
    g = helper.make_graph(
        nodes, "fused",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(a, n) for n, a in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def test_fusion_conv_bias_add_relu():
    x, w = randn(1, 3, 6, 6), randn(4, 3, 3, 3)
    shift = randn(1, 4, 1, 1)
    m = graph_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                     helper.make_node("Add", ["c", "shift"], ["a"]),
                     helper.make_node("Relu", ["a"], ["y"])],
                    {"x": x}, {"w": w, "shift": shift})
    lib = check_model(m, {"x": x}, sanitize=True)
    assert len(lib.graph.nodes) == 1
    assert [t.op for t in lib.graph.nodes[0].tail] == ["Add", "Relu"]
    assert "in2[m]" not in kernel_source(lib)       # no Conv bias: the tail reads ep0[m]
    assert "ep0[m]" in kernel_source(lib)


def test_fusion_residual_add():
    x, w, b = randn(1, 4, 5, 5), randn(4, 4, 3, 3), randn(4)
    r = randn(1, 4, 5, 5)
    m = graph_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                     helper.make_node("Add", ["r", "c"], ["s"]),
                     helper.make_node("Clip", ["s", "lo", "hi"], ["y"])],
                    {"x": x, "r": r}, {"w": w, "b": b, "lo": np.float32(0),
                                       "hi": np.float32(6)})
    lib = check_model(m, {"x": x, "r": r}, sanitize=True)
    assert len(lib.graph.nodes) == 1
    assert [t.op for t in lib.graph.nodes[0].tail] == ["Add", "Clip"]
    assert "ep0[y_idx]" in kernel_source(lib)


def test_fusion_depthwise_then_pointwise_relu():
    """A MobileNet block: depthwise 3x3 + Relu, pointwise 1x1 + Relu: two kernels."""
    x = randn(1, 4, 6, 6)
    dw, db, pw = randn(4, 1, 3, 3), randn(4), randn(8, 4, 1, 1)
    m = graph_model([helper.make_node("Conv", ["x", "dw", "db"], ["d"], group=4,
                                      pads=[1, 1, 1, 1], strides=[2, 2]),
                     helper.make_node("Relu", ["d"], ["dr"]),
                     helper.make_node("Conv", ["dr", "pw"], ["p"]),
                     helper.make_node("Relu", ["p"], ["y"])],
                    {"x": x}, {"dw": dw, "db": db, "pw": pw})
    lib = check_model(m, {"x": x})
    assert [(n.op, [t.op for t in n.tail]) for n in lib.graph.nodes] == \
        [("Conv", ["Relu"]), ("Conv", ["Relu"])]


def test_mobilenet_block_runs_in_place():
    """Depthwise and pointwise convs whose input dies there write over it: the
    arena holds one activation (plus scratch), and the result is unchanged
    (ASan/UBSan too). The other kernels keep `restrict`."""
    x = randn(1, 3, 12, 12)
    stem, dw, pw, db, pb = randn(16, 3, 3, 3), randn(16, 1, 3, 3), randn(24, 16, 1, 1), \
        randn(16), randn(24)
    m = graph_model([helper.make_node("Conv", ["x", "stem"], ["s"], pads=[1, 1, 1, 1]),
                     helper.make_node("Relu", ["s"], ["sr"]),
                     helper.make_node("Conv", ["sr", "dw", "db"], ["d"], group=16,
                                      pads=[1, 1, 1, 1], strides=[2, 2]),
                     helper.make_node("Relu", ["d"], ["dr"]),
                     helper.make_node("Conv", ["dr", "pw", "pb"], ["p"]),
                     helper.make_node("Relu", ["p"], ["pr"]),
                     helper.make_node("Conv", ["pr", "pw2"], ["y"])],
                    {"x": x}, {"stem": stem, "dw": dw, "db": db, "pw": pw, "pb": pb,
                               "pw2": randn(8, 24, 1, 1)})
    lib = check_model(m, {"x": x}, sanitize=True)
    plan = lib.plan
    assert plan.root("dr") == plan.root("sr") and plan.root("pr") == plan.root("sr")
    assert plan.arena_bytes == plan.lower_bound
    # the depthwise conv's step holds its input and scratch, not its output too (the
    # stem's step may be the peak, with the x86 band's gathered rows)
    assert plan.live_bytes[1] < 16 * 12 * 12 * 4 + 16 * 6 * 6 * 4
    src = kernel_source(lib)
    assert "in place (out0 == in0)" in src.lower() or "In place (out0 == in0)" in src
    assert src.count("const float* in0,") == 2 and "const float* restrict in0," in src


@pytest.mark.parametrize("kernel", [3, 1])
def test_residual_add_writes_over_its_operand(kernel):
    """A ResNet block: the second conv's fused residual Add reads the block input
    for the last time, so the block output takes over its buffer (each element is
    read by the tail just before it is stored)."""
    x = randn(1, 8, 10, 10)
    pads = [kernel // 2] * 4
    m = graph_model([helper.make_node("Conv", ["x", "w0"], ["s0"], pads=[1, 1, 1, 1]),
                     helper.make_node("Relu", ["s0"], ["s"]),
                     helper.make_node("Conv", ["s", "w1"], ["t0"], pads=pads),
                     helper.make_node("Relu", ["t0"], ["t"]),
                     helper.make_node("Conv", ["t", "w2", "b2"], ["u"], pads=pads),
                     helper.make_node("Add", ["u", "s"], ["v"]),
                     helper.make_node("Relu", ["v"], ["vr"]),
                     helper.make_node("Conv", ["vr", "w3"], ["y"])],
                    {"x": x}, {"w0": randn(8, 8, 3, 3), "w1": randn(8, 8, kernel, kernel),
                               "w2": randn(8, 8, kernel, kernel), "b2": randn(8),
                               "w3": randn(4, 8, 1, 1)})
    lib = check_model(m, {"x": x}, sanitize=True)
    last = lib.graph.nodes[-2]
    assert [t.op for t in last.tail] == ["Add", "Relu"]
    # (a pointwise conv may write over its own dying input instead)
    expect = [lib.plan.root("s")] + ([lib.plan.root("t")] if kernel == 1 else [])
    assert lib.plan.root(last.kernel_outputs[0]) in expect
    assert lib.plan.arena_bytes == lib.plan.lower_bound


# -- band and direct schedules (x86 hosts) ---------------------------------------------

def _has_avx512() -> bool:
    return cpu_has("avx512f")


# (id, x shape, w shape, attributes): outputs narrower than 16 columns (window or
# im2col elsewhere): full and partial bands, one-vector tiles, channel remainders,
# strides with vertical phases, dilation, padding wider than the kernel, groups.
BAND_CASES = [
    ("8x8_pad1", (1, 16, 8, 8), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("odd_7x5_rows_left", (1, 5, 7, 5), (10, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("15_cols_30_positions", (1, 3, 5, 15), (9, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("one_column", (1, 4, 6, 3), (8, 4, 3, 3), {"pads": [1, 1, 1, 1], "strides": [1, 3]}),
    ("s2_asym_pads", (2, 3, 13, 11), (12, 3, 3, 3), {"strides": [2, 2], "pads": [0, 1, 2, 0]}),
    ("1x1_s2", (1, 16, 16, 16), (32, 16, 1, 1), {"strides": [2, 2]}),
    ("s2_dilation2_phases", (1, 4, 15, 12), (8, 4, 3, 3),
     {"strides": [2, 2], "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ("s3_dilation_mixed", (1, 4, 14, 20), (9, 4, 3, 2),
     {"pads": [2, 1, 0, 1], "dilations": [2, 3], "strides": [3, 2]}),
    ("pads_beyond_kernel", (1, 2, 4, 4), (8, 2, 2, 2), {"pads": [3, 2, 2, 3]}),
    ("kernel_larger_than_input", (1, 2, 3, 3), (8, 2, 5, 5), {"pads": [2, 2, 2, 2]}),
    ("group2", (1, 4, 6, 6), (16, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ("group3_remainder", (1, 6, 7, 9), (30, 2, 3, 1), {"group": 3, "pads": [1, 0, 1, 0]}),
    # rows chosen to fill the tiles (band_rows): a keyword-spotting stem's 20 columns
    # in bands of 8 rows; 11 rows of 12 columns in bands of 5 rows, 1 row left
    ("kws_stem_20_cols", (1, 1, 49, 40), (8, 1, 10, 4), {"strides": [2, 2], "pads": [4, 1, 4, 1]}),
    ("12_cols_ragged_band", (1, 4, 11, 12), (9, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
]


# Stride 1, output size = input size, 16..31 columns: the direct schedule (masked
# taps in the padding, tiles of 32 positions across rows, a partial last tile).
DIRECT_CASES = [
    ("16x18_pad1", (1, 8, 16, 18), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("17x19_rows_left", (1, 5, 17, 19), (10, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("5x5_pad2_31_cols", (2, 3, 6, 31), (9, 3, 5, 5), {"pads": [2, 2, 2, 2]}),
    ("even_kernel_asym", (1, 4, 7, 20), (8, 4, 2, 4), {"pads": [0, 1, 1, 2]}),
    ("dilation2", (1, 4, 9, 18), (8, 4, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ("group2", (1, 4, 6, 18), (16, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ("48_channels_default", (1, 48, 5, 18), (8, 48, 3, 3), {"pads": [1, 1, 1, 1]}),
]
# Depthwise, stride 1, output size = input size: depthwise direct (a mask per tile
# and tap, interior tiles with plain loads, partial last tiles).
DEPTHWISE_DIRECT_CASES = [
    ("3x3_7x7", (1, 6, 7, 7), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
    ("one_partial_tile", (2, 4, 5, 3), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ("5x5_16x16", (1, 3, 16, 16), (3, 1, 5, 5), {"group": 3, "pads": [2, 2, 2, 2]}),
    ("dilation2_asym", (1, 4, 9, 11), (4, 1, 3, 2),
     {"group": 4, "pads": [2, 1, 2, 0], "dilations": [2, 1]}),
    ("20x21_many_interior_tiles", (1, 3, 20, 21), (3, 1, 3, 3),
     {"group": 3, "pads": [1, 1, 1, 1]}),
    # interior tiles streamed (one load per kernel row, taps shifted): dilation 2, and
    # taps that only look right (no vector before the tile)
    ("dilation2_streamed", (1, 3, 24, 20), (3, 1, 3, 3),
     {"group": 3, "pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ("right_only_streamed", (1, 2, 20, 24), (2, 1, 3, 3), {"group": 2, "pads": [1, 0, 1, 2]}),
]
# The depthwise direct cases with at least 3 interior tiles whose loads, and the
# vectors before and after them, stay in the plane.
STREAMED = {"5x5_16x16", "20x21_many_interior_tiles", "dilation2_streamed",
            "right_only_streamed"}
SIMD_CASES = [c + ("band GEMM",) for c in BAND_CASES] + \
    [c + ("direct GEMM",) for c in DIRECT_CASES] + \
    [c + ("depthwise direct",) for c in DEPTHWISE_DIRECT_CASES]


@pytest.mark.skipif(not cpu_has("avx2"), reason="band and direct are compiled for x86 only")
@pytest.mark.parametrize("case_id,x_shape,w_shape,attrs,schedule", SIMD_CASES,
                         ids=[f"{c[4].split()[0]}_{c[0]}" for c in SIMD_CASES])
def test_conv_band_direct(case_id, x_shape, w_shape, attrs, schedule, monkeypatch):
    """The band, direct and depthwise direct schedules with a fused residual Add +
    Relu, against onnx.reference, then under ASan/UBSan: built for AVX-512 (where
    the host has it) and for AVX2 (-march=x86-64-v3: the band, also for the direct
    cases; depthwise direct is AVX-512's only); the portable path of the same
    source too."""
    x, w, b = randn(*x_shape), randn(*w_shape), randn(w_shape[0])
    y_shape = mtvm.compile(make_model("Conv", {"x": x}, attrs, consts={"w": w})
                           ).metadata["outputs"][0]["shape"]
    r = randn(*y_shape)
    m = graph_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs),
                     helper.make_node("Add", ["c", "r"], ["s"]),
                     helper.make_node("Relu", ["s"], ["y"])],
                    {"x": x, "r": r}, {"w": w, "b": b})
    # the direct kernel is the default from 400 taps (direct_min_taps); the smaller
    # cases ask for it
    few = schedule == "direct GEMM" and case_id != "48_channels_default"
    lib = mtvm.compile(m, schedule_config={"conv2d_f32.x86": {"direct_min_taps": 0}}
                       if few else None)
    src = kernel_source(lib)
    isa = "x86" if schedule == "band GEMM" else "AVX-512"
    assert f"Schedule ({isa}): {schedule}" in src
    if schedule == "depthwise direct":
        assert ("streamed: one load per kernel row" in src) == (case_id in STREAMED), case_id
    inputs = {"x": x, "r": r}
    if schedule != "depthwise direct":
        assert "Schedule (x86): band GEMM" in src     # what an AVX2 build runs
        _check_avx2_and_sanitized(m, lib, inputs, monkeypatch)
    if _has_avx512():
        _check_native_and_sanitized(m, lib, inputs, monkeypatch)


def conv_with_tail(x, w, attrs, tail):
    """(model, inputs): y = Conv(x, w, b) then the tail: "Relu", "nobias" (a Relu and no
    bias), "Clip" (constant bounds), "Add" (a residual input r) or None."""
    consts = {"w": w} if tail == "nobias" else {"w": w, "b": randn(w.shape[0])}
    nodes = [helper.make_node("Conv", ["x", *consts], ["c" if tail else "y"], **attrs)]
    inputs = {"x": x}
    if tail in ("Relu", "nobias"):
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif tail == "Clip":
        consts.update(lo=np.array(-0.4, np.float32), hi=np.array(0.6, np.float32))
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    elif tail == "Add":
        y_shape = mtvm.compile(make_model("Conv", {"x": x}, attrs, consts={"w": w})
                               ).metadata["outputs"][0]["shape"]
        inputs["r"] = randn(*y_shape)
        nodes.append(helper.make_node("Add", ["c", "r"], ["y"]))
    return graph_model(nodes, inputs, consts), inputs


# -- Winograd F(4x4, 3x3) (AVX2 builds; ops/conv_winograd.py) --------------------------

# (id, x shape, output channels, attributes, tail, winograd_tiles): partial last tile
# rows and columns, tile rows narrower and wider than a vector of 8 tiles, channel
# blocks of 4 with single channels left, padding above the kernel's and asymmetric,
# none, batches, blocks of one to all tile rows; each tail form (the kernel's clamp,
# or the tail applied on the way out).
WINOGRAD_CASES = [
    ("stem_3ch_16x16", (1, 3, 16, 16), 16, {"pads": [1, 1, 1, 1]}, "Relu", 32),
    ("partial_tiles_17x19", (1, 5, 17, 19), 10, {"pads": [1, 1, 1, 1]}, "Add", 32),
    ("two_chunks_asym_batch2", (2, 4, 20, 37), 9, {"pads": [0, 2, 1, 1]}, "Clip", 16),
    ("no_pad_62_cols", (1, 8, 30, 64), 8, {}, None, 64),
    ("pads_2_one_block", (1, 16, 12, 16), 11, {"pads": [2, 2, 2, 2]}, "nobias", 1000),
    ("one_row_blocks", (1, 6, 9, 33), 12, {"pads": [1, 0, 1, 2]}, "Add", 1),
]


@pytest.mark.skipif(not cpu_has("avx2"), reason="the Winograd kernel needs an AVX2 host")
@pytest.mark.parametrize("x_shape,m_out,attrs,tail,tiles", [c[1:] for c in WINOGRAD_CASES],
                         ids=[c[0] for c in WINOGRAD_CASES])
def test_conv_winograd(x_shape, m_out, attrs, tail, tiles, monkeypatch):
    """3x3 stride-1 layers by Winograd F(4x4, 3x3) on target x86-64-v3, built for AVX2
    (-march=x86-64-v3) plain and under ASan/UBSan, against onnx.reference within the
    float tolerance; its block size (winograd_tiles, a tuner's knob) set per case; the
    portable branch of the same source (what -march=native runs on AVX-512) too."""
    m, inputs = conv_with_tail(randn(*x_shape), randn(m_out, x_shape[1], 3, 3), attrs, tail)
    lib = mtvm.compile(m, target="x86-64-v3",
                       schedule_config={"conv2d_f32.x86": {"winograd_tiles": tiles}})
    assert len(lib.graph.nodes) == 1          # the tail fused
    src = kernel_source(lib)
    assert "Schedule (x86): Winograd F(4x4, 3x3)" in src
    # not in portable C (target "c"), whose arena would carry its scratch everywhere
    assert "Winograd" not in kernel_source(mtvm.compile(m))
    # the kernel stores a clamp's outputs itself; any other tail runs on the way out
    assert ("INFINITY, wino_y" in src) == (tail == "Add"), src[:600]
    _check_avx2_and_sanitized(m, lib, inputs, monkeypatch)
    if _has_avx512():
        _check_native_and_sanitized(m, lib, inputs, monkeypatch)


# -- the AVX2 depthwise kernels: 3x3 stride 1 on wide rows (x86/mtvm_dw3x3_f32_avx2.h),
# small planes eight channels at a time (x86/mtvm_dw_f32_cv8_avx2.h) ---------------------

DW3X3 = "Schedule (AVX2): depthwise 3x3 stride 1"
CV8 = "Schedule (x86): depthwise, eight channels at a time"
# (id, x shape, kernel, attributes, tail, in place, schedule). 3x3: rows of 32 outputs
# and more with the two-vector, one-vector and masked steps, rows not a multiple of 8,
# zero rows above and below, padding of 0, 1 and 2, asymmetric, a batch. Small planes:
# channel groups with a remainder (5, 13 channels), windows of 3x3, 5x5, 3x1, 1x1,
# strides 1, 2 and mixed, dilation 2, planes of one pixel to 128, a batch.
DW_AVX2_CASES = [
    ("48x48_relu_in_place", (1, 4, 48, 48), (3, 3), {"pads": [1, 1, 1, 1]}, "Relu", True,
     DW3X3),
    ("35x33_clip", (1, 3, 5, 33), (3, 3), {"pads": [1, 1, 1, 1]}, "Clip", False, DW3X3),
    ("valid_34_no_tail", (2, 2, 6, 36), (3, 3), {}, None, False, DW3X3),
    ("asym_pads_2", (1, 3, 7, 41), (3, 3), {"pads": [2, 0, 1, 2]}, "Relu", False, DW3X3),
    ("cv8_25x5_in_place", (1, 13, 25, 5), (3, 3), {"pads": [1, 1, 1, 1]}, "Relu", True, CV8),
    ("cv8_6x6_s2_clip", (2, 5, 6, 6), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]},
     "Clip", False, CV8),
    ("cv8_5x5_dilation2", (1, 16, 9, 7), (5, 5), {"pads": [4, 3, 4, 2],
                                                  "dilations": [2, 2]}, None, False, CV8),
    ("cv8_3x1_mixed_strides", (1, 9, 11, 10), (3, 1), {"pads": [1, 0, 1, 0],
                                                       "strides": [1, 2]}, "Relu", False, CV8),
    ("cv8_one_pixel", (1, 8, 1, 1), (3, 3), {"pads": [1, 1, 1, 1]}, "Relu", False, CV8),
    ("cv8_1x1", (1, 6, 4, 4), (1, 1), {}, "Relu", False, CV8),
]


@pytest.mark.skipif(not cpu_has("avx2"), reason="the AVX2 kernels need an AVX2 host")
@pytest.mark.parametrize("case_id,x_shape,kernel,attrs,tail,inplace,schedule", DW_AVX2_CASES,
                         ids=[c[0] for c in DW_AVX2_CASES])
def test_conv_depthwise_avx2(case_id, x_shape, kernel, attrs, tail, inplace, schedule,
                             monkeypatch):
    """Depthwise convs on AVX2's kernels where the tail is at most a clamp, built for AVX2
    plainly and under ASan/UBSan, against onnx.reference; in place where a Relu before
    them lets them write over their input. With a residual Add they keep the flat
    schedule."""
    c = x_shape[1]
    x, w, b = randn(*x_shape), randn(c, 1, *kernel), randn(c)
    consts = {"w": w, "b": b}
    out = "d" if inplace else "y"
    nodes = [helper.make_node("Relu", ["x"], ["xr"]),
             helper.make_node("Conv", ["xr", "w", "b"], ["c" if tail else out], group=c,
                              **attrs)]
    if tail == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], [out]))
    elif tail == "Clip":
        consts.update(lo=np.array(-0.4, np.float32), hi=np.array(0.6, np.float32))
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], [out]))
    if inplace:   # its input and output intermediates: it may write over its input
        consts["pw"] = randn(2, c, 1, 1)
        nodes.append(helper.make_node("Conv", ["d", "pw"], ["y"]))
    m = graph_model(nodes, {"x": x}, consts)
    lib = mtvm.compile(m)
    src = kernel_source(lib)
    assert schedule in src
    if schedule == DW3X3:   # written over its input: the kernel reads a copy
        assert ("in place, each channel read from its copy" in src) == \
            ("In place (out0 == in0)" in src)
    if inplace:
        assert "In place (out0 == in0)" in src
    _check_avx2_and_sanitized(m, lib, {"x": x}, monkeypatch)
    # AVX-512 hosts run the small-plane kernel too, where the direct kernel does not
    # apply (a stride, a smaller output) or its plane is one tile
    both = "#if MTVM_F32_AVX512 || MTVM_F32_AVX2" in src
    assert both == (schedule == CV8 and case_id != "cv8_25x5_in_place"), case_id
    if both and _has_avx512():
        _check_native_and_sanitized(m, lib, {"x": x}, monkeypatch)
    y_shape = mtvm.compile(make_model("Conv", {"x": x}, dict(attrs, group=c), consts={"w": w})
                           ).metadata["outputs"][0]["shape"]
    m2 = graph_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], group=c, **attrs),
                      helper.make_node("Add", ["c", "r"], ["y"])], {"x": x, "r": randn(*y_shape)},
                     {"w": w, "b": b})
    lib2 = mtvm.compile(m2)
    src2 = kernel_source(lib2)
    assert len(lib2.graph.nodes) == 1 and DW3X3 not in src2 and CV8 not in src2


def test_conv_winograd_weights_and_transforms():
    """The transforms are F(4x4, 3x3)'s: A^T [(G g G^T) * (B^T d B)] A is the 3x3
    correlation of a 6x6 patch d, and transformed_weights packs U per xi in blocks
    of four output channels [c][4], then single channels."""
    from mtvm.ops import conv_winograd as cw
    g, d = rng.standard_normal((3, 3)), rng.standard_normal((6, 6))
    y = cw.AT @ ((cw.G @ g @ cw.G.T) * (cw.BT @ d @ cw.BT.T)) @ cw.AT.T
    direct = np.array([[np.sum(d[i:i + 3, j:j + 3] * g) for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(y, direct, rtol=1e-12, atol=1e-12)
    w = rng.standard_normal((6, 5, 3, 3)).astype(np.float32)
    packed = cw.transformed_weights(w).reshape(36, -1)
    u = np.einsum("ak,mckl,bl->abmc", cw.G, w.astype(np.float64), cw.G).reshape(36, 6, 5)
    np.testing.assert_allclose(packed[:, :20].reshape(36, 5, 4),
                               u[:, :4].transpose(0, 2, 1), rtol=1e-6)
    np.testing.assert_allclose(packed[:, 20:25], u[:, 4], rtol=1e-6)
    np.testing.assert_allclose(packed[:, 25:], u[:, 5], rtol=1e-6)


# (gemm_mr, output channels, input, kernel, attrs, tail): pointwise, window and band
# layers whose register blocks take every height of one to sixteen rows, so that each
# split of the AVX2 kernel's passes (MTVM_F32_Y_PASSES_: up to six rows a pass) runs,
# with full and partial tiles of columns; with a Relu, a Clip or no tail the x86 builds
# run the epilogue kernels (MTVM_DEFINE_F32_GEMM_EPI, MTVM_DEFINE_F32_BAND_EPI), with a
# residual Add the tile.
GEMM_HEIGHT_CASES = [
    (12, 23, (1, 5, 5, 7), (1, 1), {}, "Relu"),                            # 12, 11
    (16, 31, (1, 4, 4, 9), (1, 1), {}, None),                              # 16, 15
    (14, 27, (1, 3, 9, 11), (3, 3), {"pads": [1, 1, 1, 1]}, "Clip"),       # 14, 13 (window)
    (10, 19, (1, 4, 3, 20), (3, 3), {"pads": [1, 1, 1, 1], "strides": [1, 2]},
     "Relu"),                                                              # 10, 9
    (7, 13, (1, 6, 8, 8), (3, 3), {"pads": [1, 1, 1, 1]}, "Relu"),         # 7, 6 (band)
    (6, 13, (1, 6, 8, 8), (3, 3), {"pads": [1, 1, 1, 1]}, "Add"),          # 6, 1 (band)
    (5, 9, (1, 3, 7, 5), (1, 1), {}, "Clip"),                              # 5, 4
    (3, 8, (1, 2, 4, 6), (3, 3), {"pads": [1, 1, 1, 1]}, None),            # 3, 2
    (8, 9, (1, 2, 6, 6), (1, 1), {}, "Add"),                               # 8, 1
    (8, 16, (1, 9, 5, 40), (1, 1), {}, "nobias"),                          # 8: 40 = 16+16+8
]


@pytest.mark.skipif(not cpu_has("avx2"), reason="the AVX2 kernel needs an AVX2 host")
@pytest.mark.parametrize("mr,m_out,x_shape,kernel,attrs,tail", GEMM_HEIGHT_CASES)
def test_conv_gemm_heights_avx2(mr, m_out, x_shape, kernel, attrs, tail, monkeypatch):
    """The float GEMM tile at every height, and its epilogue kernels, built for AVX2
    (-march=x86-64-v3) plain and under ASan/UBSan, and for AVX-512 where the host has it,
    against onnx.reference; gemm_mr (a tuner's knob) set per case."""
    m, inputs = conv_with_tail(randn(*x_shape), randn(m_out, x_shape[1], *kernel), attrs, tail)
    lib = mtvm.compile(m, schedule_config={"conv2d_f32": {"gemm_mr": mr},
                                           "conv2d_f32.x86": {"gemm_mr": mr}})
    assert len(lib.graph.nodes) == 1          # the tail fused
    src = kernel_source(lib)
    rest = m_out % mr
    for rows in (mr, rest) if rest else (mr,):
        assert re.search(rf"mtvm_f32_(gemm|band)_{rows}x", src), (rows, src[:400])
    # the epilogue kernel, unless the tail is not a clamp (narrow KxK layers take the
    # band on x86, their window form's kernel is the other targets' fallback)
    assert ("_epi(" in src) == (tail != "Add"), src[:600]
    _check_avx2_and_sanitized(m, lib, inputs, monkeypatch)
    if _has_avx512():
        _check_native_and_sanitized(m, lib, inputs, monkeypatch)


def _check_avx2_and_sanitized(m, lib, inputs, monkeypatch):
    """Built as for an AVX2 host (-march=x86-64-v3), plain and under ASan/UBSan, against
    onnx.reference."""
    from mtvm import host_runner
    from mtvm.host_runner import HostModule
    from mtvm.testing import assert_close, reference_outputs
    expected = reference_outputs(m, inputs)[0]
    avx2 = ["-march=x86-64-v3"]
    got = HostModule(lib, opt="-O3", extra=avx2).run(inputs)
    assert_close(list(got.values())[0], expected, what="AVX2")
    flags = host_runner.SANITIZE_FLAGS
    monkeypatch.setattr(host_runner, "SANITIZE_FLAGS", flags + avx2)
    got = lib.run_host(inputs, sanitize=True)
    assert_close(list(got.values())[0], expected, what="sanitized, AVX2")
    monkeypatch.setattr(host_runner, "SANITIZE_FLAGS", flags)


def _check_native_and_sanitized(m, lib, inputs, monkeypatch):
    """Built for the host's SIMD (-march=native: AVX-512 here) and portable, against
    onnx.reference; then -march=native under ASan/UBSan."""
    from mtvm import host_runner
    from mtvm.host_runner import HostModule
    from mtvm.testing import assert_close, reference_outputs
    expected = reference_outputs(m, inputs)[0]
    for extra in (["-march=native"], []):
        got = HostModule(lib, opt="-O3", extra=extra).run(inputs)
        assert_close(list(got.values())[0], expected, what=str(extra))
    monkeypatch.setattr(host_runner, "SANITIZE_FLAGS",
                        host_runner.SANITIZE_FLAGS + ["-march=native"])
    got = lib.run_host(inputs, sanitize=True)
    assert_close(list(got.values())[0], expected, what="sanitized, -march=native")


@pytest.mark.skipif(not _has_avx512(), reason="two-vector tiles are compiled for AVX-512 only")
@pytest.mark.parametrize("plane", [(3, 3), (6, 6), (8, 8), (5, 7)])
@pytest.mark.parametrize("inplace_cols", [16, 32])
def test_conv_pointwise_two_vector_tiles(plane, inplace_cols, monkeypatch):
    """Pointwise GEMM with 32-position tiles on AVX-512 (one vector, 32 + a partial
    tile, full tiles, a channel remainder), on a model input and in place (after a
    Relu whose output dies there, before a Softmax), with pointwise_inplace_cols 16
    and 32."""
    x = randn(1, 12, *plane)
    m = graph_model([helper.make_node("Conv", ["x", "w0", "b0"], ["c0"]),
                     helper.make_node("Relu", ["c0"], ["r0"]),
                     helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"]),
                     helper.make_node("Softmax", ["c1"], ["y"], axis=1)],
                    {"x": x}, {"w0": randn(20, 12, 1, 1), "b0": randn(20),
                               "w1": randn(12, 20, 1, 1), "b1": randn(12)})
    lib = mtvm.compile(m, schedule_config={"conv2d_f32": {"pointwise_inplace_cols": inplace_cols}})
    src = kernel_source(lib)
    assert "pointwise GEMM in place" in src and "mtvm_f32_band_8x32" in src
    _check_native_and_sanitized(m, lib, {"x": x}, monkeypatch)


# (plane, output channels, input channels, tail, in place): one tile (9), three of 12 (36),
# tiles of 9 and a last one of 7 (25), one position, a 2 x 13 plane; 8 channels (one
# half vector), 24, 40 (32 + 8), 48, 56 (32 + 24); Relu, Clip, none (the epilogue kernel)
# and a residual Add (the tile through the fused tail).
PWCV_CASES = [
    ((3, 3), 48, 32, "relu", False),
    ((3, 3), 56, 40, "relu", True),
    ((6, 6), 40, 48, "clip", True),
    ((6, 6), 24, 48, "none", False),
    ((5, 5), 8, 64, "relu", False),
    ((1, 1), 40, 24, "relu", True),
    ((2, 13), 48, 96, "clip", False),
    ((3, 3), 48, 96, "add", False),
    ((6, 6), 32, 96, "add", True),
]


def _tail_nodes(tail, src, dst, consts, res_shape) -> list:
    """The fused tail of a case, src -> dst: a Relu, a Clip to [0, 6] or a residual Add
    (its operand of res_shape added to consts); none for "none"."""
    if tail == "relu":
        return [helper.make_node("Relu", [src], [dst])]
    if tail == "clip":
        consts.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
        return [helper.make_node("Clip", [src, "lo", "hi"], [dst])]
    if tail == "add":
        consts["res"] = randn(*res_shape)
        return [helper.make_node("Add", [src, "res"], [dst])]
    return []


@pytest.mark.skipif(not _has_avx512(), reason="the kernel is compiled for AVX-512 only")
@pytest.mark.parametrize("plane, m_out, c_in, tail, inplace", PWCV_CASES)
def test_conv_pointwise_channel_vectors(plane, m_out, c_in, tail, inplace, monkeypatch):
    """Pointwise convs of small planes vectorized over output channels on AVX-512
    (mtvm_pwcv_f32_x86.h): every tiling of the positions, every channel remainder,
    the epilogue in registers and the tile through the fused tail, on a model input
    and in place (after a Relu whose output dies there); against onnx.reference,
    built for AVX-512, portable and under ASan/UBSan."""
    x = randn(1, c_in, *plane)
    consts = {"w0": randn(c_in, c_in, 1, 1), "b0": randn(c_in),
              "w1": randn(m_out, c_in, 1, 1), "b1": randn(m_out)}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"]),
             helper.make_node("Relu", ["c0"], ["r0"])] if inplace else []
    src_in = "r0" if inplace else "x"
    nodes.append(helper.make_node("Conv", [src_in, "w1", "b1"], ["c1"]))
    nodes += _tail_nodes(tail, "c1", "t", consts, (1, m_out, *plane))
    last = "c1" if tail == "none" else "t"
    nodes.append(helper.make_node("Softmax", [last], ["y"], axis=1))
    m = graph_model(nodes, {"x": x}, consts)
    lib = mtvm.compile(m)
    src = kernel_source(lib)
    epi = "" if tail == "add" else "_epi"
    assert re.search(r"mtvm_f32_pwcv_\d+%s\(" % epi, src)
    assert ("pointwise GEMM in place" in src) == inplace
    _check_native_and_sanitized(m, lib, {"x": x}, monkeypatch)
    # AVX2: target c's AVX2 branch where the rule takes it there too, and an AVX2 target
    # (its pointwise layers keep blocks of 8 channels for it)
    for target in ("c", "x86-64-v3"):
        lib = mtvm.compile(m, target=target)
        avx2 = re.search(r"mtvm_f32_pwcv8_\d+%s\(" % epi, kernel_source(lib))
        if avx2 or target == "c":
            _check_avx2_and_sanitized(m, lib, {"x": x}, monkeypatch)
    off = kernel_source(mtvm.compile(m, schedule_config={"conv2d_f32": {"pwcv_max_plane": 0}}))
    assert "mtvm_f32_pwcv" not in off


# (x shape, output channels, kernel, attributes, tail): KxK layers whose band tiles of 32
# positions fill poorly: bands of 25, 9 (stride 2) and 20 positions, bands of 30 then a
# last one of 10, a channel remainder, dilation, a 5 x 5 window; the epilogue kernel and
# a residual Add.
BAND_CV_CASES = [
    ((1, 16, 5, 5), 32, (3, 3), {"pads": [1, 1, 1, 1]}, "relu"),         # a band of 25
    ((1, 8, 6, 6), 24, (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, "none"),  # 9
    ((1, 16, 2, 10), 40, (3, 3), {"pads": [1, 1, 1, 1]}, "relu"),        # 20, 32 + 8
    ((1, 64, 10, 10), 16, (3, 3), {"pads": [1, 1, 1, 1]}, "relu"),       # 3 rows, then 1
    ((1, 32, 5, 5), 16, (3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, "add"),
    ((1, 4, 4, 5), 8, (5, 5), {"pads": [2, 2, 2, 2]}, "clip"),
]


@pytest.mark.skipif(not _has_avx512(), reason="the kernel is compiled for AVX-512 only")
@pytest.mark.parametrize("x_shape, m_out, kernel, attrs, tail", BAND_CV_CASES)
def test_conv_band_channel_vectors(x_shape, m_out, kernel, attrs, tail, monkeypatch):
    """KxK convs on small planes: the band's AVX-512 tiles over output channels
    (cv_applies) against onnx.reference, built for AVX-512, portable, for AVX2 and
    under ASan/UBSan."""
    x = randn(*x_shape)
    consts = {"w": randn(m_out, x_shape[1], *kernel), "b": randn(m_out)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs)]
    # (the add case keeps the plane's size)
    nodes += _tail_nodes(tail, "c", "y", consts, (1, m_out, *x_shape[2:]))
    if tail == "none":
        nodes[0].output[0] = "y"
    m = graph_model(nodes, {"x": x}, consts)
    lib = mtvm.compile(m)
    src = kernel_source(lib)
    assert "band GEMM" in src and re.search(
        r"mtvm_f32_pwcv_\d+%s\(\d+, \d+, \d+, band_off" % ("" if tail == "add" else "_epi"),
        src)
    _check_native_and_sanitized(m, lib, {"x": x}, monkeypatch)
    _check_avx2_and_sanitized(m, lib, {"x": x}, monkeypatch)


def test_pwcv_tiles_and_choice():
    """The positions split evenly into tiles of at most 12; the channel-vector kernel
    only where the FMAs it saves pay for its transposes."""
    from mtvm.ops.conv import position_fill, pwcv_tiles
    assert pwcv_tiles(9) == (9, 1, 0)
    assert pwcv_tiles(36) == (12, 3, 0)
    assert pwcv_tiles(25) == (9, 2, 7)
    assert pwcv_tiles(1) == (1, 1, 0)
    assert position_fill(9) == 9 / 16 and position_fill(36) == 36 / 64
    assert position_fill(64) == 1.0
    for c_in, plane, used in [(16, (9, 11), False),   # 16 -> 96 on 9 x 11: slower
                              (88, (5, 5), True), (176, (3, 3), True), (64, (8, 8), False)]:
        x = randn(1, c_in, *plane)
        m = make_model("Conv", {"x": x}, {}, consts={"w": randn(32, c_in, 1, 1),
                                                     "b": randn(32)})
        assert ("mtvm_f32_pwcv_" in kernel_source(mtvm.compile(m))) == used, (c_in, plane)


@pytest.mark.parametrize("oh, ow, cg, rows", [
    (24, 20, 1, 8),    # one 20-column row fills 20 of 32 lanes; 8 rows, five whole tiles
    (8, 8, 64, 4),     # rows that fill a tile exactly: as many as fill one
    (16, 16, 16, 2),
    (11, 12, 4, 5),    # 60 positions twice and 12 (2 rows: 24 of 32 lanes)
    (24, 20, 64, 2),   # 64 channels: the scratch cap leaves 2 rows
])
def test_band_rows_fill_the_tiles(oh, ow, cg, rows):
    from mtvm.ops.conv import Axis, band_rows
    ah, aw = Axis("h", oh, oh, 3, 1, 1, 1, 1), Axis("w", ow, ow, 3, 1, 1, 1, 1)
    assert band_rows(ah, aw, cg, 3, 3) == rows
    # the knob set: that many positions, whatever they waste
    assert band_rows(ah, aw, cg, 3, 3, {"band_cols": 32, "band_max_bytes": 1 << 30}) == \
        max(1, min(oh, 32 // ow))


@pytest.mark.skipif(not cpu_has("avx2"), reason="the band schedule is compiled for x86 only")
def test_conv_band_scratch_cap(monkeypatch):
    """band_max_bytes smaller than a full band: fewer rows per band, same result."""
    from mtvm.host_runner import HostModule
    from mtvm.testing import assert_close, reference_outputs
    x, w = randn(1, 16, 8, 8), randn(8, 16, 3, 3)
    m = make_model("Conv", {"x": x}, {"pads": [1, 1, 1, 1]}, consts={"w": w})
    lib = mtvm.compile(m, schedule_config={"conv2d_f32.x86": {"band_max_bytes":
                                                              16 * 4 * 3 * 5 * 8}})
    assert "Bands of 3 output rows" in kernel_source(lib)
    for march in ("native", "x86-64-v3"):
        got = HostModule(lib, opt="-O3", extra=[f"-march={march}"]).run({"x": x})
        assert_close(list(got.values())[0], reference_outputs(m, {"x": x})[0], what=march)


@pytest.mark.skipif(not _has_avx512(), reason="depthwise direct is compiled for AVX-512 only")
def test_conv_depthwise_direct_in_place(monkeypatch):
    """Depthwise direct writing over its input (after a conv whose output dies
    there): each channel is read whole before its output overwrites it."""
    x = randn(1, 3, 9, 10)
    m = graph_model([helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
                     helper.make_node("Conv", ["c0", "dw", "db"], ["d"], group=8,
                                      pads=[1, 1, 1, 1]),
                     helper.make_node("Relu", ["d"], ["r"]),
                     helper.make_node("Softmax", ["r"], ["y"], axis=1)],
                    {"x": x}, {"w0": randn(8, 3, 3, 3), "dw": randn(8, 1, 3, 3),
                               "db": randn(8)})
    lib = mtvm.compile(m)
    src = kernel_source(lib)
    assert "depthwise direct" in src and lib.plan.root("r") == lib.plan.root("c0")
    _check_native_and_sanitized(m, lib, {"x": x}, monkeypatch)


def _heads_model():
    """A decoder's / detector's heads: 24 -> 4 1x1 + Relu, 24 -> 1 3x3 (pad 1) + bias,
    12 -> 3 1x1 on a 1-D input of 33: fewer than 8 output channels each."""
    x, x1 = randn(1, 24, 9, 11), randn(1, 12, 33)
    m = graph_model([helper.make_node("Conv", ["x", "w4", "b4"], ["c"]),
                     helper.make_node("Relu", ["c"], ["y"]),
                     helper.make_node("Conv", ["x", "w1", "b1"], ["z"], pads=[1, 1, 1, 1]),
                     helper.make_node("Conv", ["x1", "w3"], ["u"])],
                    {"x": x, "x1": x1},
                    {"w4": randn(4, 24, 1, 1), "b4": randn(4), "w1": randn(1, 24, 3, 3),
                     "b1": randn(1), "w3": randn(3, 12, 1)}, outputs=("y", "z", "u"))
    return m, {"x": x, "x1": x1}


@pytest.mark.parametrize("target,gemm", [("cortex-m4", True), ("cortex-m7", True),
                                         ("host", False), ("c", False)])
def test_few_output_channels_take_the_gemm_on_arm(target, gemm):
    """ConvF32.default_knobs: on Arm the GEMM schedules for any channel count (a short
    last block of rows), the direct loop nest elsewhere (where it was measured)."""
    m, feeds = _heads_model()
    lib = mtvm.compile(m, target=target)
    src = kernel_source(lib)
    assert (src.count("mtvm_f32_gemm_") >= 3) == gemm, target
    if target == "c":
        check_model(m, feeds, sanitize=True)


@pytest.mark.device
def test_few_output_channels_on_the_m4_match_the_reference(tmp_path):
    """The heads' GEMM (rows 4, 1 and 3 of a block) on the emulated Cortex-M4F, through a
    session, against onnx.reference."""
    import shutil

    import mtvm.project as P
    from mtvm.testing import reference_outputs
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    m, feeds = _heads_model()
    path = str(tmp_path / "heads.onnx")
    onnx.save(m, path)
    proj = P.generate(path, board="mps2-an386", out_dir=str(tmp_path / "proj"),
                      progress=lambda msg: None)
    proj.build(progress=lambda msg: None)
    proj.template.flash(proj, lambda msg: None)
    try:
        with proj.session() as s:
            got = list(s.executor.run([feeds["x"], feeds["x1"]]).values())
    finally:
        proj.stop()
    for g, e in zip(got, reference_outputs(m, feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
