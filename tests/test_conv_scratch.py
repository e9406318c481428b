"""The float Conv schedules' scratch is a pure function (ConvF32.scratch_bytes):
equal to what their emitters ask for on every path and target, and memory
planning gets it without emitting any C (issue 12)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm import passes, schedules
from mtvm.codegen.c_codegen import kernel_scratch, make_kernel
from mtvm.codegen.weight_layout import lay_out_weights
from mtvm.compiler import materialize_outputs
from mtvm.frontend import load_onnx
from mtvm.memory.planner import inplace_steps
from mtvm.ops import conv
from mtvm.ops.base import get_op
from mtvm.schedules import ScheduleConfig
from mtvm.schedules.generic.conv_f32 import ConvF32, geometry, lifted
from mtvm.target import Target

TARGETS = ("c", "x86-64-v3", "x86-64-v4", "cortex-m4", "cortex-m55", "cortex-m0", "rv32imac")

# (id, x shape, w shape, Conv attributes): between them every path of
# conv.conv_plan -- depthwise (rows, flat, AVX-512 direct), pointwise (and in
# place), window, im2col, the AVX-512 band and direct variants, AVX2's Winograd,
# the direct conv -- in 1-D and 2-D.
CASES = [
    ("pointwise", (1, 16, 8, 8), (16, 16, 1, 1), {}),
    ("pointwise_small_plane", (1, 16, 4, 4), (24, 16, 1, 1), {}),
    ("pointwise_batch2", (2, 8, 5, 5), (12, 8, 1, 1), {}),
    ("pointwise_stride2", (1, 8, 9, 9), (8, 8, 1, 1), {"strides": [2, 2]}),
    ("dw3x3_same", (1, 8, 10, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
    ("dw3x3_s2", (1, 8, 11, 11), (8, 1, 3, 3), {"group": 8, "strides": [2, 2],
                                                "pads": [1, 1, 1, 1]}),
    ("dw3x3_mixed_strides", (1, 4, 9, 12), (4, 1, 3, 3), {"group": 4, "strides": [1, 2],
                                                          "pads": [1, 1, 1, 1]}),
    ("dw5x5_dilation2", (1, 6, 14, 14), (6, 1, 5, 5), {"group": 6, "dilations": [2, 2],
                                                       "pads": [4, 4, 4, 4]}),
    ("dw3x3_valid", (2, 4, 7, 9), (4, 1, 3, 3), {"group": 4}),
    ("dw1x1_tiny_plane", (1, 4, 2, 3), (4, 1, 1, 1), {"group": 4}),   # direct > flat
    ("dw_big_plane", (1, 2, 70, 70), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ("window_3x3", (1, 8, 12, 12), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("window_wide", (1, 8, 34, 34), (8, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("avx_direct_same", (1, 8, 20, 20), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("im2col_narrow", (1, 8, 6, 6), (16, 8, 3, 3), {}),
    ("kxk_s2", (1, 8, 17, 17), (16, 8, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("kxk_dilation2", (1, 8, 14, 14), (8, 8, 3, 3), {"dilations": [2, 2],
                                                     "pads": [2, 2, 2, 2]}),
    ("kxk_asym_pads_1x5", (1, 4, 9, 20), (8, 4, 1, 5), {"pads": [0, 2, 1, 1]}),
    ("kxk_5x1_s2x1", (2, 4, 16, 10), (8, 4, 5, 1), {"strides": [2, 1], "pads": [2, 0, 2, 0]}),
    ("group2", (1, 16, 10, 10), (32, 8, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ("group4_direct", (1, 16, 8, 8), (16, 4, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ("few_channels_direct", (1, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("many_channels_band", (1, 64, 8, 8), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("1d_window", (1, 8, 40), (16, 8, 5), {"pads": [2, 2]}),
    ("1d_s2_dilation2", (1, 8, 33), (8, 8, 3), {"strides": [2], "dilations": [2],
                                                "pads": [2, 1]}),
    ("1d_narrow", (1, 8, 6), (16, 8, 3), {}),
    ("1d_avx_direct", (1, 8, 24), (8, 8, 3), {"pads": [1, 1]}),
    ("1d_pointwise", (1, 16, 20), (8, 16, 1), {}),
    ("1d_depthwise", (1, 8, 30), (8, 1, 3), {"group": 8, "pads": [1, 1]}),
    ("1d_depthwise_s2", (1, 8, 31), (8, 1, 5), {"group": 8, "strides": [2], "pads": [2, 2]}),
]

# Knob sets that move layers to other paths or sizes (per schedule name; the
# band/direct knobs are only the x86 schedule's).
KNOBS = {
    "defaults": {},
    "im2col_wide32": {
        "conv2d_f32": {"kxk": "im2col", "pointwise_inplace_cols": 32, "im2col_max_bytes": 4096,
                       "im2col_cols": 64, "depthwise_direct_max_plane": 1024},
        "conv2d_f32.x86": {"kxk": "im2col", "pointwise_inplace_cols": 32,
                           "band_max_bytes": 16384, "band_cols": 64,
                           "direct_below_cols": 48, "direct_min_taps": 0,
                           "depthwise_direct_max_plane": 1024}},
    "narrow_windows": {
        "conv2d_f32": {"window_min_cols": 4, "gemm_min_channels": 4, "depthwise_max_border": 2},
        "conv2d_f32.x86": {"window_min_cols": 4, "gemm_min_channels": 4,
                           "band_below_cols": 64, "band_cols": 16, "direct_min_cols": 8,
                           "direct_min_taps": 0}},
}


def conv_model(x_shape, w_shape, attrs, bias: bool, tail: bool):
    """pre = Relu(x); y = Conv(pre, w[, b]) [then Relu, fused];
    z = GlobalAveragePool(y): the Conv
    reads an activation for the last time and writes one, so the planner may let
    it write over its input."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(w_shape).astype(np.float32), "w")]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(w_shape[0]).astype(np.float32),
                                             "b"))
    nodes = [helper.make_node("Relu", ["x"], ["pre"]),
             helper.make_node("Conv", ["pre", "w"] + (["b"] if bias else []),
                              ["c"], **attrs)]
    nodes.append(helper.make_node("Relu", ["c"], ["y"]) if tail else
                 helper.make_node("Identity", ["c"], ["y"]))
    nodes.append(helper.make_node("GlobalAveragePool", ["y"], ["z"]))
    g = helper.make_graph(nodes, "conv_scratch",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("z", TensorProto.UNDEFINED, None)], inits)
    return typed(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def typed(m):
    m.ir_version = min(m.ir_version, 10)
    return onnx.shape_inference.infer_shapes(m)


def lowered_graph(model):
    """The graph lowering sees (the passes of mtvm.compiler._compile_graph)."""
    return materialize_outputs(passes.optimize(load_onnx(model), fuse=True))


def snapshot(k):
    return [(b.name, b.shape) if b is not None else None for b in k.ins + k.outs]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_pure_scratch_is_what_emission_asks_for(case):
    _, x_shape, w_shape, attrs = case
    for bias, tail in ((True, False), (False, True)):
        g = lowered_graph(conv_model(x_shape, w_shape, attrs, bias, tail))
        (step,) = [i for i, n in enumerate(g.nodes) if n.op == "Conv"]
        node = g.nodes[step]
        if tail:
            assert [t.op for t in node.tail] == ["Relu"]
        # Written over its input too, where the op allows it (depthwise, pointwise).
        inplaces = [None] + ([{step: 0}] if get_op("Conv").inplace_input(node, g) == 0 else [])
        for target in TARGETS:
            for knobs, cfg in KNOBS.items():
                for inplace in inplaces:
                    what = f"{target}, {knobs}, bias {bias}, tail {tail}, in place {inplace}"
                    k = make_kernel(g, step, "m", inplace, Target.resolve(target),
                                    ScheduleConfig(knobs=cfg))
                    sched = schedules.choose(k)
                    assert sched is not None and sched.op == "Conv", what
                    before = snapshot(k)
                    planned = sched.scratch_bytes(k, **node.attrs)
                    assert isinstance(planned, int) and planned >= 0, what
                    assert snapshot(k) == before, f"{what}: scratch_bytes changed the kernel"
                    assert k.scratch_bytes == 0
                    lay_out_weights(k, sched, node.attrs)   # as lowering does, then emit
                    assert sched.scratch_bytes(k, **node.attrs) == planned, what
                    sched.emit(k, **node.attrs)
                    assert k.scratch_bytes == planned, f"{what} ({sched.name})"


def test_the_sweep_takes_every_path():
    """The cases above reach every plan conv_plan makes (or the sweep proves less)."""
    seen = set()
    for _, x_shape, w_shape, attrs in CASES:
        g = lowered_graph(conv_model(x_shape, w_shape, attrs, True, False))
        (step,) = [i for i, n in enumerate(g.nodes) if n.op == "Conv"]
        node = g.nodes[step]
        inplace = get_op("Conv").inplace_input(node, g)
        for cfg, isa in ((cfg, isa) for cfg in KNOBS.values()
                         for isa in ("x86-64-v4", "x86-64-v3")):
            for ip in (None, {step: 0}) if inplace == 0 else (None,):
                k = make_kernel(g, step, "m", ip, Target.resolve(isa),
                                ScheduleConfig(knobs=cfg))
                sched = schedules.choose(k)
                axes, group = geometry(k, node.attrs)
                x, wt, _, axes = lifted(k, axes)
                kind, variant = conv.conv_plan(k, x, wt, axes, group, sched.simd)
                if kind == "depthwise":
                    direct, flat = conv.depthwise_variants(k, axes)
                    kind += "+direct" if direct else "+flat" if flat else "+rows"
                seen.add((kind, variant))
    # x86 variants: (AVX-512 body, AVX2 body)
    assert {("pointwise", None), ("pointwise_inplace", None), ("window", None),
            ("im2col", None), ("window", ("band", "band")), ("im2col", ("band", "band")),
            ("window", ("direct", "band")), ("window", (None, "winograd")),
            ("window", ("direct", "winograd")), ("direct", None), ("depthwise+direct", None), ("depthwise+flat", None),
            ("depthwise+rows", None)} <= seen, seen


def three_convs():
    """Depthwise (in place), pointwise (in place), 3x3 window with a residual Add."""
    rng = np.random.default_rng(1)
    w = {"w0": rng.standard_normal((8, 1, 3, 3)), "w1": rng.standard_normal((16, 8, 1, 1)),
         "w2": rng.standard_normal((16, 16, 3, 3)), "w3": rng.standard_normal((16, 16, 1, 1))}
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]),
         helper.make_node("Conv", ["a", "w0"], ["b"], group=8, pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["b", "w1"], ["c"]),
         helper.make_node("Relu", ["c"], ["d"]),
         helper.make_node("Conv", ["d", "w2"], ["e"], pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("Conv", ["e", "w3"], ["f"]),
         helper.make_node("Add", ["f", "e"], ["y"])],
        "three_convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
        [numpy_helper.from_array(v.astype(np.float32), n) for n, v in w.items()])
    return typed(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("target", ["c", "x86-64-v4", "cortex-m4"])
def test_memory_planning_never_emits(monkeypatch, target):
    m = three_convs()
    g = lowered_graph(m)
    planned_inplace = inplace_steps(g)

    def refuse(self, k, /, **attrs):
        raise AssertionError("memory planning emitted a Conv kernel")
    monkeypatch.setattr(ConvF32, "emit", refuse)
    monkeypatch.setattr(type(get_op("Conv")), "emit", refuse)
    scratch = kernel_scratch(g, "m", planned_inplace, Target.resolve(target))
    assert any(scratch.values())
    monkeypatch.undo()

    # A whole compile emits each Conv once, when lowering (which checks the emitted
    # scratch against the planned one).
    emitted = []
    real = ConvF32.emit

    def counting(self, k, /, **attrs):
        emitted.append(k.fname)
        return real(self, k, **attrs)
    monkeypatch.setattr(ConvF32, "emit", counting)
    lib = mtvm.compile(m, target=target)
    convs = [lk.kernel.fname for lk in lib.kernels if lk.kernel.node.op == "Conv"]
    assert sorted(emitted) == sorted(convs) and len(convs) == 4
    assert any(lk.kernel.inplace is not None for lk in lib.kernels)
