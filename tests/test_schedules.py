"""The schedule registry: per-target schedules, per-kernel knobs."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm import schedules
from mtvm.errors import MtvmError
from mtvm.testing import assert_close, conv_relu_conv, reference_outputs

HERE = os.path.dirname(os.path.abspath(__file__))


def two_convs():
    """Two 3x3 convs of different shapes: two workloads of one schedule."""
    rng = np.random.default_rng(3)
    rng.standard_normal((16, 8, 3, 3))   # the weights conv_relu_conv draws first
    rng.standard_normal((16, 16, 3, 3))
    return conv_relu_conv(40, 3), {"x": rng.standard_normal((1, 8, 40, 40)).astype(np.float32)}


def test_every_schedule_lives_in_its_family_and_declares_its_knobs():
    seen = schedules.all_schedules()
    assert {"conv2d_f32", "conv2d_f32.x86"} <= {s.name for s in seen}
    for s in seen:
        module = type(s).__module__
        assert module.startswith(f"mtvm.schedules.{s.family}."), (s.name, module)
        for knob in s.knobs:
            assert knob.default in knob.choices, (s.name, knob.name)


def test_knobs_are_per_kernel():
    m, x = two_convs()
    # SSE2 (not the host: on an AVX2 or AVX-512 host one layer takes conv2d_f32.x86):
    # both layers on the portable schedule
    lib = mtvm.compile(m, target="x86-64")
    ops = [o for o in lib.metadata["operators"] if o.get("schedule") == "conv2d_f32"]
    assert len(ops) == 2 and ops[0]["workload_key"] != ops[1]["workload_key"]
    assert all(o["knobs"]["kxk"] == "window" for o in ops)
    # The second layer only: im2col instead of the row window.
    cfg = {"workloads": {ops[1]["workload_key"]: {"knobs": {"kxk": "im2col"}}}}
    tuned = mtvm.compile(m, target="x86-64", schedule_config=cfg)
    kinds = [o["knobs"]["kxk"] for o in tuned.metadata["operators"] if o.get("schedule")]
    assert kinds == ["window", "im2col"]
    src = tuned.sources["codegen/host/src/tvmgen_default_kernels.c"]
    base = lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    assert src != base
    assert_close(tuned.run_host(x)["y"], reference_outputs(m, x)[0], what="y")


def test_the_same_layer_gets_the_same_key_in_another_model():
    m, _ = two_convs()
    key = [o for o in mtvm.compile(m).metadata["operators"] if o.get("schedule")][0]
    m.graph.node[2].attribute[1].ints[:] = [1, 1]   # another model, same first layer
    m.graph.output[0].type.tensor_type.shape.dim[2].dim_value = 40
    m.graph.output[0].type.tensor_type.shape.dim[3].dim_value = 40
    other = [o for o in mtvm.compile(m).metadata["operators"] if o.get("schedule")][0]
    assert key["workload_key"] == other["workload_key"]


def test_target_chooses_the_schedule():
    m, _ = two_convs()
    # The 20-column stride-2 layer is one the x86 band kernel takes.
    generic = {o.get("schedule") for o in mtvm.compile(m).metadata["operators"]}
    assert "conv2d_f32.x86" in generic
    for target in ("cortex-m4", "x86-64", "x86-64-v2"):
        chosen = {o.get("schedule") for o in
                  mtvm.compile(m, target=target).metadata["operators"]}
        assert "conv2d_f32.x86" not in chosen and "conv2d_f32" in chosen
    for target in ("x86-64-v3", "x86-64-v4"):
        lib = mtvm.compile(m, target=target)
        assert "conv2d_f32.x86" in {o.get("schedule") for o in lib.metadata["operators"]}
        assert "mtvm_f32_band_" in lib.sources["codegen/host/src/tvmgen_default_kernels.c"]


def test_bad_configs_are_one_line():
    m, _ = two_convs()
    with pytest.raises(MtvmError, match="has no knob.*kxx") as e:
        mtvm.compile(m, schedule_config={"conv2d_f32": {"kxx": 1}})
    assert "\n" not in str(e.value)
    m4 = [o for o in mtvm.compile(m, target="cortex-m4").metadata["operators"]
          if o.get("schedule")][0]
    with pytest.raises(MtvmError, match="does not apply") as e:
        mtvm.compile(m, target="cortex-m4", schedule_config={"workloads": {
            m4["workload_key"]: {"schedule": "conv2d_f32.x86"}}})
    assert "\n" not in str(e.value)


def test_knobs_never_take_a_layer_out_of_its_planned_in_place_schedule():
    """The planner lets a pointwise conv write over its input for the schedule the default
    knobs pick (Conv.inplace_input); a knob that would pick another schedule (here the
    direct conv for fewer than 16 channels) must not make it read what it has overwritten
    (found by `mtvm tune` on fomo_mbv2)."""
    rng = np.random.default_rng(5)
    ws = [rng.standard_normal((8, 8, 1, 1)).astype(np.float32) for _ in range(3)]
    names = ["x", "c0", "c1", "y"]          # the middle conv: neither input nor output
    g = helper.make_graph(
        [helper.make_node("Conv", [names[i], f"w{i}"], [names[i + 1]]) for i in range(3)],
        "pointwise_in_place", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 6, 6])],
        [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(ws)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    for target in ("c", "x86-64-v3", "cortex-m4"):
        lib = mtvm.compile(m, target=target,
                           schedule_config={"conv2d_f32": {"gemm_min_channels": 16}})
        assert any(lk.kernel.inplace is not None for lk in lib.kernels), target
        if target != "cortex-m4":
            assert_close(lib.run_host({"x": x})["y"], reference_outputs(m, {"x": x})[0], what=target)
