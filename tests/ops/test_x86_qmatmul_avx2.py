"""QMatMul's and QBatchMatMul's AVX2 schedules (mtvm/schedules/x86/qmatmul_s8.py, the kernel
c_runtime/kernels/x86/mtvm_qmatmul_s8_avx2_x86.h) on x86-64-v3 targets: chosen there (and
not on target c), bit-exact with target c's generic kernel and within one output step of
onnxruntime, over rows that are and are not multiples of four (2 .. 50), depths odd and
even, under and over sixteen (1 .. 70), output channels that are and are not multiples of
eight (1 .. 20), int8 and uint8 activations, per-tensor and per-channel weight scales, a
bias, a fused Relu; QBatchMatMul with both operands computed, zero points on both, batch
broadcast; one case of each under the sanitizers, every case at -O3 too (a host
project's build)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.host_runner import HostModule
from mtvm.testing import cpu_has

pytestmark = pytest.mark.skipif(not cpu_has("avx2"), reason="the host has no AVX2")

SCHEDULE = "qmatmul_s8.avx2_packed"

# (rows, depth, columns, uint8 activations, per-channel weights (Gemm with a bias), Relu)
CASES = [(2, 1, 1, False, False, False), (3, 7, 5, True, True, False),
         (4, 16, 8, False, True, True), (5, 17, 12, False, False, False),
         (9, 33, 20, True, True, True), (50, 64, 16, False, True, False),
         (6, 70, 9, False, True, True)]


def qdq_model(m, kk, n, uint8, per_channel, relu, seed):
    """x [m, kk] float -> QuantizeLinear -> DequantizeLinear -> MatMul by DQ(int8 w [kk, n],
    one scale) or Gemm by DQ(int8 w [n, kk], a scale per row) and DQ(int32 bias) -> [Relu]
    -> QuantizeLinear -> DequantizeLinear; returns (model, sample input, output step)."""
    rng = np.random.default_rng(seed)
    xs, xz = np.float32(0.05), (np.uint8(131) if uint8 else np.int8(-3))
    ys, yz = np.float32(0.02 * np.sqrt(kk)), (np.uint8(120) if uint8 else np.int8(5))
    inits = [numpy_helper.from_array(np.asarray(v), name) for name, v in
             [("xs", xs), ("xz", xz), ("ys", ys), ("yz", yz)]]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
    if per_channel:
        w = rng.integers(-127, 128, (n, kk)).astype(np.int8)
        ws = (rng.random(n) * 0.02 + 0.005).astype(np.float32)
        b = rng.integers(-4000, 4000, n).astype(np.int32)
        inits += [numpy_helper.from_array(a, name) for name, a in
                  [("w", w), ("ws", ws), ("wz", np.zeros(n, np.int8)), ("b", b),
                   ("bs", (xs * ws).astype(np.float32)), ("bz", np.zeros(n, np.int32))]]
        nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
                  helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
                  helper.make_node("Gemm", ["xd", "wd", "bd"], ["y"], transB=1)]
    else:
        w = rng.integers(-127, 128, (kk, n)).astype(np.int8)
        inits += [numpy_helper.from_array(a, name) for name, a in
                  [("w", w), ("ws", np.float32(0.011)), ("wz", np.int8(0))]]
        nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
                  helper.make_node("MatMul", ["xd", "wd"], ["y"])]
    last = "y"
    if relu:
        nodes.append(helper.make_node("Relu", ["y"], ["yr"]))
        last = "yr"
    nodes += [helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"])]
    g = helper.make_graph(nodes, "qmm", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [m, kk])], [helper.make_tensor_value_info(
            "out", TensorProto.FLOAT, [m, n])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = (rng.standard_normal((m, kk)) * 2 + (3 if uint8 else 0)).astype(np.float32)
    return model, x, float(ys)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}x{c[1]}x{c[2]}" for c in CASES])
def test_avx2_qmatmul_matches_generic_and_onnxruntime(case):
    ort = pytest.importorskip("onnxruntime")
    model, x, step = qdq_model(*case, seed=sum(case[:3]))
    lib = mtvm.compile(model, target="x86-64-v3")
    kinds = {o["kind"]: o.get("schedule") for o in lib.metadata["operators"]}
    assert kinds.get("QMatMul") == SCHEDULE, kinds
    generic = mtvm.compile(model, target="c")
    assert all(o.get("schedule") != SCHEDULE for o in generic.metadata["operators"])
    got = lib.run_host({"x": x}, sanitize=case == CASES[4])["out"]
    np.testing.assert_array_equal(got, generic.run_host({"x": x})["out"])
    np.testing.assert_array_equal(HostModule(lib, opt="-O3").run({"x": x})["out"], got)
    ref = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(got - ref).max() <= step * 1.001


BMM = "qbatchmatmul_s8.avx2_packed"
# (a shape, b shape, uint8, zero points (a, b, y))
BMM_CASES = [((2, 5, 7), (2, 7, 9), False, (-3, 5, 2)),
             ((1, 4, 50, 16), (1, 4, 16, 50), False, (0, 0, -4)),
             ((3, 2, 6, 17), (1, 2, 17, 8), True, (131, 120, 128)),
             ((9, 33), (33, 3), False, (7, -9, 0)),
             ((1, 4, 27, 27), (1, 4, 27, 16), False, (-128, 0, -1))]


def bmm_model(a_shape, b_shape, uint8, zps, seed):
    """Two float inputs quantized by the model (their own scales and zero points), MatMul
    of the dequantized values, quantized again: QBatchMatMul with both operands computed."""
    rng = np.random.default_rng(seed)
    dt = np.uint8 if uint8 else np.int8
    za, zb, zy = (dt(v) for v in zps)
    kk = a_shape[-1]
    sa, sb, sy = np.float32(0.04), np.float32(0.03), np.float32(0.004 * np.sqrt(kk) * 8)
    inits = [numpy_helper.from_array(np.asarray(v), name) for name, v in
             [("sa", sa), ("za", za), ("sb", sb), ("zb", zb), ("sy", sy), ("zy", zy)]]
    nodes = [helper.make_node("QuantizeLinear", ["a", "sa", "za"], ["aq"]),
             helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["ad"]),
             helper.make_node("QuantizeLinear", ["b", "sb", "zb"], ["bq"]),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             helper.make_node("MatMul", ["ad", "bd"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["out"])]
    out_shape = list(np.broadcast_shapes(a_shape[:-2], b_shape[:-2])) + \
        [a_shape[-2], b_shape[-1]]
    g = helper.make_graph(nodes, "bmm", [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a_shape)),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b_shape))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    shift = 3 if uint8 else 0
    feeds = {"a": (rng.standard_normal(a_shape) * 2 + shift).astype(np.float32),
             "b": (rng.standard_normal(b_shape) * 2 + shift).astype(np.float32)}
    return model, feeds, float(sy)


@pytest.mark.parametrize("case", BMM_CASES, ids=[f"{c[0]}x{c[1]}" for c in BMM_CASES])
def test_avx2_qbatchmatmul_matches_generic_and_onnxruntime(case):
    ort = pytest.importorskip("onnxruntime")
    model, feeds, step = bmm_model(*case, seed=len(case[0]) + case[0][-1])
    lib = mtvm.compile(model, target="x86-64-v3")
    kinds = {o["kind"]: o.get("schedule") for o in lib.metadata["operators"]}
    assert kinds.get("QBatchMatMul") == BMM, kinds
    generic = mtvm.compile(model, target="c")
    got = lib.run_host(feeds, sanitize=case == BMM_CASES[2])["out"]
    np.testing.assert_array_equal(got, generic.run_host(feeds)["out"])
    # -O3, as a host project builds: gcc once reordered the kernel's int16 stores of a row
    # tail and its int32 loads of the same words (the last case, attention's A V)
    np.testing.assert_array_equal(HostModule(lib, opt="-O3").run(feeds)["out"], got)
    ref = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.abs(got - ref).max() <= step * 1.001
