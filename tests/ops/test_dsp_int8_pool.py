"""The pools' Arm DSP schedules (mtvm/schedules/arm_dsp/pool_s8.py). QMaxPool: unpadded
2-wide windows at stride 2 -- 1-D MaxPool 2, 1x2 and 2x2 in 2-D, over rows of even and odd
widths and planes of odd heights. QAvgPool: column means (a plane's whole height, one
column: ReduceMean over a transformer's tokens) and plane means (the window a whole plane:
GlobalAveragePool). Each chosen on DSP cores only and for no
other window; on the emulated Cortex-M4 (one firmware, every form, int8 and uint8) the
bytes of the host build of target c."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.target import Target

SCHEDULE = "qmaxpool_s8.dsp_pairs"

# (input shape, kernel, strides, pads): the schedule's windows first, then three it leaves
POOLS = [((1, 5, 38), [2], [2], [0, 0]),            # 1-D, even rows: one run
         ((1, 3, 19), [2], [2], [0, 0]),            # odd rows: row by row
         ((1, 3, 6, 10), [2, 2], [2, 2], [0, 0, 0, 0]),
         ((1, 2, 7, 9), [2, 2], [2, 2], [0, 0, 0, 0]),
         ((1, 4, 3, 8), [1, 2], [1, 2], [0, 0, 0, 0]),
         ((1, 3, 16), [2], [2], [1, 1]),            # padded
         ((1, 3, 16), [3], [2], [0, 0]),            # 3 wide
         ((1, 2, 6, 6), [2, 2], [1, 1], [0, 0, 0, 0])]   # stride 1
TAKEN = 5


def qdq_models(name, shapes, op, dt, s, z, so=None, zo=None, seed=4):
    """Per input shape i: x{i} quantized (s, z) and dequantized, op(i, d{i}, m{i}) (the float
    node from d{i} to m{i}), m{i} quantized (so, zo; s, z by default) and dequantized into
    y{i}. Returns the model and random inputs."""
    so, zo = (s, z) if so is None else (so, zo)
    inits = [numpy_helper.from_array(np.float32(v), n) for n, v in (("s", s), ("so", so))] + \
        [numpy_helper.from_array(np.asarray(v, dt), n) for n, v in (("z", z), ("zo", zo))]
    nodes, ins, outs = [], [], []
    for i, shape in enumerate(shapes):
        nodes += [helper.make_node("QuantizeLinear", [f"x{i}", "s", "z"], [f"q{i}"]),
                  helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"d{i}"]),
                  op(i, f"d{i}", f"m{i}"),
                  helper.make_node("QuantizeLinear", [f"m{i}", "so", "zo"], [f"mq{i}"]),
                  helper.make_node("DequantizeLinear", [f"mq{i}", "so", "zo"], [f"y{i}"])]
        ins.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, list(shape)))
        outs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None))
    model = helper.make_model(helper.make_graph(nodes, name, ins, outs, inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    rng = np.random.default_rng(seed)
    return model, [(rng.standard_normal(shape) * 3).astype(np.float32) for shape in shapes]


def pool_model(uint8: bool):
    def maxpool(i, d, m):
        _, ks, st, pads = POOLS[i]
        return helper.make_node("MaxPool", [d], [m], kernel_shape=ks, strides=st, pads=pads)
    return qdq_models("pools", [p[0] for p in POOLS], maxpool, np.uint8 if uint8 else np.int8,
                      0.04, 17 if uint8 else -9)


def _chosen(lib, op="QMaxPool") -> list:
    return [getattr(lk.kernel, "schedule", None) for lk in lib.kernels
            if lk.kernel.node.op == op]


@pytest.mark.parametrize("target", ["c", "cortex-m3", "cortex-m4", "cortex-m33",
                                    "cortex-m55", "x86-64-v3"])
def test_the_pair_schedule_takes_the_two_wide_windows_on_dsp_cores(target):
    model, _ = pool_model(False)
    lib = mtvm.compile(model, target=target)
    chosen = _chosen(lib)
    assert len(chosen) == len(POOLS)
    tg = Target.resolve(target)
    if tg.is_arm_dsp:
        assert chosen[:TAKEN] == [SCHEDULE] * TAKEN
        assert SCHEDULE not in chosen[TAKEN:]
    else:
        assert SCHEDULE not in chosen


@pytest.mark.device
@pytest.mark.parametrize("uint8", [False, True])
def test_pair_pools_on_the_cortex_m4_give_the_host_bytes(uint8, tmp_path):
    from mtvm.testing import have, run_on_board
    if not (have("arm-none-eabi-gcc") and have("qemu-system-arm")):
        pytest.skip("no Arm toolchain or QEMU")
    model, xs = pool_model(uint8)
    lib = mtvm.compile(model, target="cortex-m4")
    assert _chosen(lib)[:TAKEN] == [SCHEDULE] * TAKEN
    dev = run_on_board(lib, {f"x{i}": x for i, x in enumerate(xs)}, str(tmp_path / "m4"))
    host = mtvm.compile(model, target="c").run_host(xs)
    assert dev.keys() == host.keys()
    for name, d in dev.items():
        np.testing.assert_array_equal(d, host[name], err_msg=name)


# QAvgPool's column means (qavgpool_s8.dsp_columns): ReduceMean over a transformer's tokens
# ([1, T, D], axis 1), then the windows it leaves: D not a multiple of 4, more than 255 rows
COLUMNS = "qavgpool_s8.dsp_columns"
MEANS = [(1, 49, 32), (1, 7, 8), (2, 128, 12), (1, 9, 6), (1, 300, 8)]
MEANS_TAKEN = 3


def mean_model(uint8: bool):
    def mean(i, d, m):
        return helper.make_node("ReduceMean", [d], [m], axes=[1], keepdims=0)
    return qdq_models("means", MEANS, mean, np.uint8 if uint8 else np.int8, 0.05,
                      131 if uint8 else 3, 0.011, 120 if uint8 else -7, seed=5)


@pytest.mark.parametrize("target", ["c", "cortex-m3", "cortex-m4", "x86-64-v3"])
def test_column_means_take_the_column_sums_on_dsp_cores(target):
    model, _ = mean_model(False)
    chosen = _chosen(mtvm.compile(model, target=target), "QAvgPool")
    assert len(chosen) == len(MEANS)
    if Target.resolve(target).is_arm_dsp:
        assert chosen == [COLUMNS] * MEANS_TAKEN + [None] * (len(MEANS) - MEANS_TAKEN)
    else:
        assert COLUMNS not in chosen


@pytest.mark.device
@pytest.mark.parametrize("uint8", [False, True])
def test_column_means_on_the_cortex_m4_give_the_host_bytes(uint8, tmp_path):
    """Every form on the board (int8 and uint8; 128 rows: the uint8 lanes. limit) equals
    the host build of target c bit for bit, and the float reference within one step."""
    from mtvm.testing import have, run_on_board
    if not (have("arm-none-eabi-gcc") and have("qemu-system-arm")):
        pytest.skip("no Arm toolchain or QEMU")
    model, xs = mean_model(uint8)
    lib = mtvm.compile(model, target="cortex-m4")
    assert _chosen(lib, "QAvgPool")[:MEANS_TAKEN] == [COLUMNS] * MEANS_TAKEN
    dev = run_on_board(lib, {f"x{i}": x for i, x in enumerate(xs)}, str(tmp_path / "m4"))
    host = mtvm.compile(model, target="c").run_host(xs)
    assert dev.keys() == host.keys()
    for i, (name, d) in enumerate(dev.items()):
        np.testing.assert_array_equal(d, host[name], err_msg=name)
        q = np.clip(np.round(xs[i] / 0.05) + (131 if uint8 else 3), *((0, 255) if uint8
                                                                      else (-128, 127)))
        mean = (q - (131 if uint8 else 3)).mean(axis=1) * 0.05
        zo, (lo, hi) = (120, (0, 255)) if uint8 else (-7, (-128, 127))
        mean = np.clip(mean, (lo - zo) * 0.011, (hi - zo) * 0.011)   # the output's range
        assert np.max(np.abs(d - mean)) <= 0.011 * 1.01, name


# QAvgPool over whole planes (qavgpool_s8.dsp_plane): GlobalAveragePool over 2-D and 1-D
# planes of odd sizes (unaligned plane starts, a tail of 1-3 bytes), an AveragePool whose
# window is the plane; then windows it leaves: padded, smaller than the plane
PLANE = "qavgpool_s8.dsp_plane"
PLANES = [((1, 32, 13, 3), None), ((2, 5, 7, 9), None), ((1, 6, 37), None), ((1, 3, 1, 2), None),
          ((1, 4, 5, 6), ([5, 6], [0, 0, 0, 0])), ((1, 4, 4, 4), ([5, 5], [1, 1, 0, 0])),
          ((1, 4, 6, 6), ([3, 3], [0, 0, 0, 0]))]
PLANES_TAKEN = 5


def plane_model(uint8: bool):
    def mean(i, d, m):
        window = PLANES[i][1]
        if window is None:
            return helper.make_node("GlobalAveragePool", [d], [m])
        return helper.make_node("AveragePool", [d], [m], kernel_shape=window[0], pads=window[1])
    return qdq_models("planes", [p[0] for p in PLANES], mean, np.uint8 if uint8 else np.int8,
                      0.05, 129 if uint8 else 5, 0.013, 118 if uint8 else -3, seed=6)


@pytest.mark.parametrize("target", ["c", "cortex-m3", "cortex-m4", "cortex-m7", "x86-64-v3"])
def test_plane_means_take_the_byte_sums_on_dsp_cores(target):
    chosen = _chosen(mtvm.compile(plane_model(False)[0], target=target), "QAvgPool")
    assert len(chosen) == len(PLANES)
    if Target.resolve(target).is_arm_dsp:
        assert chosen[:PLANES_TAKEN] == [PLANE] * PLANES_TAKEN
        assert PLANE not in chosen[PLANES_TAKEN:]
    else:
        assert PLANE not in chosen


@pytest.mark.device
@pytest.mark.parametrize("uint8", [False, True])
def test_plane_means_on_the_cortex_m4_give_the_host_bytes(uint8, tmp_path):
    """Every form on the board equals the host build of target c bit for bit, and
    onnxruntime within one output step."""
    from mtvm.testing import have, run_on_board
    if not (have("arm-none-eabi-gcc") and have("qemu-system-arm")):
        pytest.skip("no Arm toolchain or QEMU")
    import onnxruntime as ort
    model, xs = plane_model(uint8)
    lib = mtvm.compile(model, target="cortex-m4")
    assert _chosen(lib, "QAvgPool")[:PLANES_TAKEN] == [PLANE] * PLANES_TAKEN
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    dev = run_on_board(lib, feeds, str(tmp_path / "m4"))
    host = mtvm.compile(model, target="c").run_host(xs)
    ref = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, feeds)
    assert dev.keys() == host.keys()
    for i, (name, d) in enumerate(dev.items()):
        np.testing.assert_array_equal(d, host[name], err_msg=name)
        assert np.max(np.abs(d - ref[i].reshape(d.shape))) <= 0.013 * 1.01, name
