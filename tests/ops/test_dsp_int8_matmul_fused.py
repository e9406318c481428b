"""The fused int8 QMatMul of the Arm DSP cores (mtvm/schedules/arm_dsp/matmul_s8.py,
c_runtime/kernels/arm_dsp/mtvm_mm_rq_s8_dsp.h): packed rows times every weight row with
the requantization, the folded bias Add and the stores in one Thumb-2 loop. A model of
our own runs it with four and five rows a block, a last block overlapping the one before,
one, two, four and eight groups of four a step, and with and without the Add (13 and 8 rows); on the emulated
Cortex-M4F (assembly) and Cortex-M33 (its C: Armv8-M cannot give the registers) it equals
the host build of target "c" bit for bit, with the weights widened in scratch (the
default where the arena has the room) and read as int8 (the knob off)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import mtvm
from mtvm.target import Target
from mtvm.testing import have, quantize_qdq, run_on_board

DEPTHS = (12, 32, 64, 24, 8)   # depth 12: one group a step, 32: four, 64: eight, 24: two


@pytest.fixture(scope="module", params=[13, 8], ids=["13rows_v5", "8rows_v4"])
def model(request, tmp_path_factory):
    """13 rows: five a block (the last overlapping); 8 rows: four a block."""
    return _chain_model(tmp_path_factory.mktemp("fused"), request.param, DEPTHS)


def _chain_model(tmp, ROWS, DEPTHS):
    """x [1, ROWS, DEPTHS[0]] through MatMuls of the depths in turn (a bias Add after the
    first two), quantized to QDQ int8."""
    pytest.importorskip("onnxruntime.quantization")
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    nodes, inits, prev = [], [], "x"
    for i, (k, n) in enumerate(zip(DEPTHS, DEPTHS[1:])):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((k, n)) * 0.4).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        prev = f"m{i}"
        if i < 2:   # a bias Add after the first two: folded into their QMatMuls
            inits.append(numpy_helper.from_array(
                (rng.standard_normal(n) * 0.3).astype(np.float32), f"b{i}"))
            nodes.append(helper.make_node("Add", [prev, f"b{i}"], [f"a{i}"]))
            prev = f"a{i}"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "fused", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, ROWS, DEPTHS[0]])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, ROWS, DEPTHS[-1]])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    f32 = str(tmp / "fused_f32.onnx")
    onnx.save(m, f32)
    xs = [rng.standard_normal((1, ROWS, DEPTHS[0])).astype(np.float32) for _ in range(8)]
    return quantize_qdq(f32, str(tmp / "fused_int8.onnx"), "x", xs, xs[0])


def _calls(lib) -> list[str]:
    """The kernels' calls of the fused loop (one out-of-line function per step form of the
    depth and width: mtvm_mm_rq_s8_dsp_<rows>xk<form>x<columns>[_add<post>s<shift>][_w][_p])."""
    src = "\n".join(t for n, t in lib.sources.items() if n.endswith("_kernels.c"))
    return re.findall(r"^\s*(mtvm_mm_rq_s8_dsp_\w+)\(", src, re.M)


NARROW = {"qmatmul_s8.dsp_packed": {"widen_weights": False}}


def test_every_layer_takes_the_fused_kernel_on_dsp_cores(model):
    calls = _calls(mtvm.compile(model, target=Target.resolve("cortex-m4")))
    assert len(calls) == 4, calls
    assert sum("_add1s" in c for c in calls) == 2, calls     # the two with a folded Add
    # the widened weights where their scratch does not grow the arena (some layers here)
    assert any(re.search(r"_w(_p)?$", c) for c in calls), calls
    # rnd | sh in one word of the table where every shift is 6 or more (all layers here)
    assert any(c.endswith("_p") for c in calls), calls
    narrow = _calls(mtvm.compile(model, target=Target.resolve("cortex-m4"),
                                 schedule_config=NARROW))
    assert len(narrow) == 4 and not any(re.search(r"_w(_p)?$", c) for c in narrow), narrow
    assert not _calls(mtvm.compile(model, target=Target.resolve("cortex-m55")))
    assert not _calls(mtvm.compile(model))


@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="QEMU or arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("config", [None, NARROW], ids=["widened", "int8"])
@pytest.mark.parametrize("board,target", [("mps2-an386", "cortex-m4"),
                                          ("mps2-an505", "cortex-m33")])
def test_on_the_board_bit_identical(model, board, target, config, tmp_path):
    with np.load(model[:-5] + ".npz") as z:
        x = z["in_0"]
    lib = mtvm.compile(model, target=Target.resolve(target), schedule_config=config)
    assert _calls(lib)
    dev = run_on_board(lib, [x], tmp_path, board=board)
    host = mtvm.compile(model).run_host([x])
    for (name, a), b in zip(dev.items(), host.values()):
        np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="QEMU or arm-none-eabi-gcc not installed")
def test_depths_of_one_step_form_share_the_loop(tmp_path):
    """Depths 128 and 64 onto 64 columns (eight groups a step both): one copy of the loop,
    the depth its argument, on the board bit for bit the host's."""
    m = _chain_model(tmp_path, 8, (128, 64, 64))
    with np.load(m[:-5] + ".npz") as z:
        x = z["in_0"]
    lib = mtvm.compile(m, target=Target.resolve("cortex-m4"), schedule_config=NARROW)
    calls = _calls(lib)
    assert len(calls) == 2 and calls[0] == calls[1] and "xk8x64" in calls[0], calls
    dev = run_on_board(lib, [x], tmp_path / "proj")
    host = mtvm.compile(m).run_host([x])
    for (name, a), b in zip(dev.items(), host.values()):
        np.testing.assert_array_equal(a, b, err_msg=name)
