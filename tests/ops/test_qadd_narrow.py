"""QAdd's 32-bit schedule (mtvm/schedules/generic/qadd_s8.py): on every pair of int8 (and
uint8) input values, for same-shape operands and for a row broadcast (a bias), the same
outputs as the op's own 64-bit loop, within one step of onnxruntime; chosen on the host, x86,
RISC-V and M0 targets, the Arm DSP schedule kept on the Cortex-M4."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.schedules import get_schedule

NAME = "qadd_s8.narrow"


def add_model(uint8: bool, broadcast: bool, scales):
    """DQ(a) + DQ(b) -> Q over [256, 256] (every pair of byte values) or [256, 256] + a
    [256] row; the inputs are float, quantized by the model. Returns (model, feeds)."""
    sa, sb, sy = (np.float32(s) for s in scales)
    dt, lo = (np.uint8, 0) if uint8 else (np.int8, -128)
    za, zb, zy = (dt(v) for v in ((130, 120, 128) if uint8 else (-3, 7, 2)))
    codes = np.arange(lo, lo + 256)
    a = np.repeat(codes[:, None], 256, axis=1)
    b = np.repeat(codes[None, :], 256, axis=0)
    feeds = {"a": ((a - za) * sa).astype(np.float32)}
    b_shape = [256] if broadcast else [256, 256]
    feeds["b"] = ((b[0] if broadcast else b) - zb).astype(np.float32) * sb
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in
             [("sa", sa), ("za", za), ("sb", sb), ("zb", zb), ("sy", sy), ("zy", zy)]]
    nodes = [helper.make_node("QuantizeLinear", ["a", "sa", "za"], ["aq"]),
             helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["ad"]),
             helper.make_node("QuantizeLinear", ["b", "sb", "zb"], ["bq"]),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             helper.make_node("Add", ["ad", "bd"], ["s"]),
             helper.make_node("QuantizeLinear", ["s", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    g = helper.make_graph(nodes, "qadd", [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, [256, 256]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, b_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 256])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, feeds


@pytest.mark.parametrize("uint8", [False, True])
@pytest.mark.parametrize("broadcast", [False, True])
@pytest.mark.parametrize("scales", [(0.031, 0.017, 0.043), (0.02, 0.11, 0.05)])
def test_narrow_qadd_equals_the_64_bit_loop_on_every_pair(uint8, broadcast, scales,
                                                         monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    model, feeds = add_model(uint8, broadcast, scales)
    lib = mtvm.compile(model)
    assert [o.get("schedule") for o in lib.metadata["operators"] if o["kind"] == "QAdd"] \
        == [NAME]
    got = lib.run_host(feeds)["y"]
    ref = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.abs(got - ref).max() <= scales[2] * 1.001
    monkeypatch.setattr(type(get_schedule(NAME)), "applies", lambda self, k, **a: False)
    loop = mtvm.compile(model)
    assert all(o.get("schedule") != NAME for o in loop.metadata["operators"])
    np.testing.assert_array_equal(got, loop.run_host(feeds)["y"])


def test_chosen_where_no_target_schedule_is():
    model, _ = add_model(False, True, (0.031, 0.017, 0.043))
    for target, expected in [("c", NAME), ("x86-64-v3", NAME), ("rv32imac", NAME),
                             ("cortex-m0plus", NAME), ("cortex-m4", "qadd_s8.dsp_smlal")]:
        lib = mtvm.compile(model, target=target)
        assert [o.get("schedule") for o in lib.metadata["operators"]
                if o["kind"] == "QAdd"] == [expected], target
