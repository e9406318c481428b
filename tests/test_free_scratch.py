"""Knobs that trade scratch for speed taken where the planned arena does not grow
(mtvm/schedules/free_scratch.py): the Arm DSP int8 conv's widened weights above their
4 KiB default on the shared int8 CNNs, at the arena of the build without them; left
off where the layer is the arena's peak, and wherever the user's config sets the knob."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.schedules.generic.qconv_s8 import WIDEN_MAX_BYTES
from mtvm.testing import models_dir

OFF = {"qconv_s8.im2col": {"widen_weights": False}}


def _widened(lib) -> list:
    return [lk for lk in lib.kernels if getattr(lk.kernel, "knobs", {}).get("widen_weights")]


@pytest.mark.parametrize("name", ["vww_mobilenetv1_int8", "ic_resnet8_int8"])
def test_widened_weights_where_the_arena_has_room(name):
    path = os.path.join(models_dir(), f"{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    default = mtvm.compile(path, target="cortex-m4")
    off = mtvm.compile(path, target="cortex-m4", schedule_config=OFF)
    assert not _widened(off)
    # beyond the default's cap: scratch over 4 KiB for the widened weights alone
    big = [lk for lk in _widened(default) if lk.kernel.scratch_bytes > WIDEN_MAX_BYTES]
    assert big, name
    assert default.metadata["workspace_bytes"] <= off.metadata["workspace_bytes"]


def one_big_conv():
    """A 1x1 int8 conv from 64 to 128 channels on a 4x4 input: its weights (8 KiB) are
    the model's largest buffer, so the conv's step is the arena's peak."""
    rng = np.random.default_rng(2)
    w = rng.integers(-127, 128, (128, 64, 1, 1)).astype(np.int8)
    inits = [numpy_helper.from_array(np.asarray(v, t), n) for n, v, t in [
        ("s", 0.05, np.float32), ("z", 3, np.int8), ("ws", 0.01, np.float32),
        ("wz", 0, np.int8), ("ys", 0.2, np.float32), ("yz", -4, np.int8)]]
    inits.append(numpy_helper.from_array(w, "w"))
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["c"]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 64, 4, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def test_no_widening_where_the_layer_is_the_peak():
    lib = mtvm.compile(one_big_conv(), target="cortex-m4")
    assert not _widened(lib)
    forced = mtvm.compile(one_big_conv(), target="cortex-m4",
                          schedule_config={"qconv_s8.im2col": {"widen_weights": True}})
    assert _widened(forced)   # it does apply, and it would grow the arena
    assert forced.metadata["workspace_bytes"] > lib.metadata["workspace_bytes"]


def test_the_users_setting_is_kept():
    path = os.path.join(models_dir(), "vww_mobilenetv1_int8.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    lib = mtvm.compile(path, target="cortex-m4", schedule_config=OFF)
    assert not _widened(lib)
    # other targets: nothing to widen
    assert not _widened(mtvm.compile(path, target="cortex-m3"))
