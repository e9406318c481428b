"""Gemm and MatMul against onnx.reference: transposes, alpha/beta, C broadcasting,
1-D and batched MatMul, and fusion of the elementwise tail (and BatchNorm)."""
import os
import re
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from mtvm.testing import check_model, cpu_has, have, make_model, run_on_board

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # test_conv's helpers

rng = np.random.default_rng(1)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# (M, K, N, transA, transB, alpha, beta, C shape or None, B constant?)
GEMM = [
    (3, 5, 7, 0, 0, 1.0, 1.0, None, False),
    (4, 6, 8, 0, 1, 1.0, 1.0, (8,), True),       # Linear layer: constant B^T, bias
    (4, 6, 8, 0, 1, 1.0, 1.0, (8,), False),      # B^T read in place
    (5, 3, 6, 1, 0, 0.5, 2.0, (5, 6), False),
    (5, 3, 6, 1, 1, 1.5, 0.25, (5, 1), True),
    (2, 9, 3, 0, 0, 1.0, 1.0, (1, 3), False),
    (1, 16, 10, 0, 1, 1.0, 1.0, (1,), True),
    (3, 4, 5, 0, 0, 2.0, 0.0, (3, 5), False),
    (2, 3, 4, 0, 0, 1.0, -1.0, (), True),
]


@pytest.mark.parametrize("m,kk,n,ta,tb,alpha,beta,cshape,bconst", GEMM, ids=str)
def test_gemm(m, kk, n, ta, tb, alpha, beta, cshape, bconst):
    a = randn(kk, m) if ta else randn(m, kk)
    b = randn(n, kk) if tb else randn(kk, n)
    inputs, consts = {"a": a}, {}
    (consts if bconst else inputs)["b"] = b
    order = ["a", "b"]
    if cshape is not None:
        consts["c"] = randn(*cshape)
        order.append("c")
    attrs = {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta}
    model = make_model("Gemm", inputs, attrs, consts=consts, input_order=order, opset=13)
    feed = {k: v for k, v in inputs.items()}
    check_model(model, feed, sanitize=(m, kk, n) == (5, 3, 6))


@pytest.mark.parametrize("opset", [11, 13])
def test_gemm_c_as_input(opset):
    a, b, c = randn(3, 4), randn(4, 6), randn(6)
    model = make_model("Gemm", {"a": a, "b": b, "c": c}, {"beta": 0.5}, opset=opset)
    check_model(model, {"a": a, "b": b, "c": c})


MATMUL = [((3, 4), (4, 5)), ((4,), (4, 6)), ((3, 4), (4,)), ((5,), (5,)),
          ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 2)),
          ((2, 1, 3, 4), (3, 4, 6)), ((6,), (2, 6, 3)), ((2, 3, 7), (7,))]


@pytest.mark.parametrize("sa,sb", MATMUL, ids=str)
def test_matmul(sa, sb):
    a, b = randn(*sa), randn(*sb)
    check_model(make_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b},
                sanitize=sa == (1, 3, 4))


def test_matmul_constant_weight():
    a, w = randn(2, 8), randn(8, 9)
    check_model(make_model("MatMul", {"a": a}, consts={"w": w}), {"a": a})


def _graph_model(nodes, inputs, inits, out_name="y", opset=15):
    g = helper.make_graph(
        nodes, "fused",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info(out_name, onnx.TensorProto.UNDEFINED, None)],
        [numpy_helper.from_array(v, n) for n, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)
    return onnx.shape_inference.infer_shapes(m)


def test_gemm_add_relu_fuses():
    x = randn(3, 8)
    inits = {"w": randn(10, 8), "bias": randn(10)}
    nodes = [helper.make_node("Gemm", ["x", "w"], ["g"], transB=1),
             helper.make_node("Add", ["g", "bias"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    lib = check_model(_graph_model(nodes, {"x": x}, inits), {"x": x}, sanitize=True)
    assert len(lib.graph.nodes) == 1
    assert [t.op for t in lib.graph.nodes[0].tail] == ["Add", "Relu"]


def test_matmul_add_fuses_full_operand():
    x, r = randn(2, 3, 4), randn(2, 3, 5)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "r"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    lib = check_model(_graph_model(nodes, {"x": x, "r": r}, {"w": randn(4, 5)}),
                      {"x": x, "r": r})
    assert len(lib.graph.nodes) == 1


def test_shared_transposed_weight_is_stored_once():
    x = randn(2, 8)
    nodes = [helper.make_node("Gemm", ["x", "w"], ["a"], transB=1),
             helper.make_node("Gemm", ["x", "w"], ["b"], transB=1),
             helper.make_node("Add", ["a", "b"], ["y"])]
    lib = check_model(_graph_model(nodes, {"x": x}, {"w": randn(5, 8)}), {"x": x})
    consts = "".join(v for k, v in lib.sources.items() if k.endswith("_constants.c"))
    assert consts.count("const union") == 1


def test_gemm_batchnorm_relu_folds():
    x = randn(4, 6)
    inits = {"w": randn(6, 5), "c": randn(5), "s": randn(5), "t": randn(5),
             "mu": randn(5), "var": np.abs(randn(5)) + 0.5}
    nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["g"], alpha=0.7),
             helper.make_node("BatchNormalization", ["g", "s", "t", "mu", "var"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    lib = check_model(_graph_model(nodes, {"x": x}, inits), {"x": x})
    assert len(lib.graph.nodes) == 1
    assert lib.graph.nodes[0].op == "Gemm"
    assert "BatchNormalization" not in lib.graph.dump()


def test_gemm_macs_and_c_source():
    a = randn(2, 8)
    lib = check_model(make_model("Gemm", {"a": a}, {"transB": 1},
                                 consts={"b": randn(12, 8), "c": randn(12)}), {"a": a})
    assert lib.metadata["operators"][0]["macs"] == 2 * 8 * 12
    assert lib.metadata["operators"][0]["schedule"] == "gemm_f32.tiled"
    src = "".join(v for k, v in lib.sources.items() if k.endswith("_kernels.c"))
    kernel = src[src.index("tvmgen_default_000_gemm("):]   # after the micro-kernel helpers
    body = re.sub(r"/\*.*?\*/", "", kernel.split("{", 1)[1], flags=re.S)
    assert "mtvm_f32_gemm_2xNR(8, at, in1 + q0, 12, nq, tile)" in body
    assert "/" not in body and "%" not in body      # no index arithmetic per element


def test_matmul_macs():
    a, b = randn(2, 3, 4), randn(2, 4, 5)
    lib = check_model(make_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b})
    assert lib.metadata["total_macs"] == 2 * 3 * 4 * 5


@pytest.mark.parametrize("kk,n", [(33, 70), (640, 128), (7, 5), (1, 1)])
def test_gemv_schedule_batch_one(kk, n):
    """A batch-1 Gemm with row-major B runs the GEMV micro-kernel: right with the
    portable build (and ASan/UBSan) and with the host's SIMD (AVX-512 or AVX2)."""
    import platform
    import mtvm
    from mtvm.host_runner import HostModule
    from mtvm.testing import assert_close, reference_outputs
    a = randn(1, kk)
    model = make_model("Gemm", {"a": a}, {"transB": 1, "alpha": 0.5},
                       consts={"b": randn(n, kk), "c": randn(n)})
    lib = check_model(model, {"a": a}, sanitize=True)
    assert "Schedule: GEMV" in "".join(v for k, v in lib.sources.items()
                                      if k.endswith("_kernels.c"))
    builds = [["-march=native"]]
    if platform.machine() in ("x86_64", "AMD64"):
        builds.append(["-mavx2", "-mfma"])
    expected = reference_outputs(model, {"a": a})[0]
    for extra in builds:
        got = HostModule(lib, opt="-O3", extra=extra).run({"a": a})
        assert_close(list(got.values())[0], expected, what=str(extra))


# -- the tiled schedule (constant B through the float GEMM micro-kernel) -------------

# rows of A: one (GEMV), below / at / over one and two mr = 8 blocks; K and N
# around the micro-kernel widths (4 scalar, 8 AVX2, 16 AVX-512 columns).
TILED = [(1, 5, 7), (2, 1, 1), (7, 3, 16), (8, 16, 5), (9, 33, 37), (17, 8, 64)]


@pytest.mark.parametrize("target", ["c", "host"])
@pytest.mark.parametrize("m,kk,n", TILED)
def test_matmul_with_constant_b_is_tiled_and_matches(m, kk, n, target):
    a = randn(m, kk)
    lib = check_model(make_model("MatMul", {"a": a}, consts={"b": randn(kk, n)}), {"a": a},
                      target=target, sanitize=target == "c")
    assert lib.metadata["operators"][0]["schedule"] == "matmul_f32.tiled"


@pytest.mark.parametrize("target", ["c", "host"])
@pytest.mark.parametrize("trans_a,alpha,beta,c_shape", [
    (0, 1.0, 1.0, (37,)), (1, 1.0, 1.0, (9, 37)), (0, 0.5, 2.0, (9, 1)), (1, 2.0, 0.0, ()),
    (0, 1.0, 1.0, None)])
def test_gemm_with_constant_b_is_tiled_and_matches(trans_a, alpha, beta, c_shape, target):
    a = randn(33, 9) if trans_a else randn(9, 33)
    consts = {"b": randn(37, 33)}
    if c_shape is not None:
        consts["c"] = randn(*c_shape)
    lib = check_model(make_model("Gemm", {"a": a}, {"transA": trans_a, "transB": 1,
                                                    "alpha": alpha, "beta": beta},
                                 consts=consts), {"a": a}, target=target)
    assert lib.metadata["operators"][0]["schedule"] == "gemm_f32.tiled"


@pytest.mark.parametrize("a_shape", [(2, 5, 12), (3, 1, 4, 12), (12,)])
def test_batched_matmul_folds_rows_and_fuses_a_last_axis_bias(a_shape):
    """A transformer's Linear: [..., K] x [K, N] + bias[N], then an activation:
    the batch dims fold into the rows, the bias (varying along the last axis
    only) and the Relu run in the kernel's epilogue."""
    a = randn(*a_shape)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"]),
             helper.make_node("Add", ["m", "bias"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    lib = check_model(_graph_model(nodes, {"a": a}, {"w": randn(12, 10), "bias": randn(10)}),
                      {"a": a}, sanitize=True)
    assert [n.op for n in lib.graph.nodes] == ["MatMul"]
    assert lib.metadata["operators"][0]["schedule"] == "matmul_f32.tiled"


@pytest.mark.parametrize("target", ["c", "host"])
@pytest.mark.parametrize("a_shape,b_shape", [
    ((4, 6), (6, 5)), ((2, 3, 9, 16), (2, 3, 16, 9)), ((2, 3, 1, 16), (2, 3, 16, 17)),
    ((3, 10, 8), (8, 4)), ((2, 1, 5, 3), (1, 4, 3, 6)), ((7,), (7, 3)), ((5, 7), (7,))])
def test_matmul_of_two_computed_operands_is_tiled(a_shape, b_shape, target):
    """Attention's Q K^T and P V: both operands computed, batch dims broadcast,
    one tiled product per batch entry."""
    a, b = randn(*a_shape), randn(*b_shape)
    lib = check_model(make_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b},
                      target=target, sanitize=target == "c")
    assert lib.metadata["operators"][0]["schedule"] == "matmul_f32.tiled"


def test_a_double_matmul_keeps_the_loop_kernel():
    a, b = randn(4, 6).astype(np.float64), randn(6, 5).astype(np.float64)
    lib = check_model(make_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b})
    assert not lib.metadata["operators"][0].get("schedule")


# (A shape, B shape, tail): attention's products (both operands computed, batched; a
# tile of 16 taps, rows and columns with remainders) and a 2-D one, with no tail, a
# Relu or a Clip: AVX2 builds store the tiles from registers.
EPI_CASES = [((1, 4, 50, 16), (1, 4, 16, 50), None),
             ((2, 13, 7), (2, 7, 37), "Relu"),
             ((19, 24), (24, 21), "Clip")]


@pytest.mark.skipif(not cpu_has("avx2"), reason="the AVX2 epilogue kernel needs an AVX2 host")
@pytest.mark.parametrize("a_shape,b_shape,tail", EPI_CASES)
def test_matmul_tiles_with_the_epilogue_kernel(a_shape, b_shape, tail, monkeypatch):
    """MatMul tiles through the AVX2 epilogue kernel (mtvm_f32_gemm_<mr>xNR_epi) where
    the tail is at most a clamp, built for AVX2 plainly and under ASan/UBSan, against
    onnx.reference."""
    import mtvm
    from test_conv import _check_avx2_and_sanitized
    a, b = randn(*a_shape), randn(*b_shape)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["c" if tail else "y"])]
    inits = []
    if tail == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif tail == "Clip":
        inits = [numpy_helper.from_array(np.array(v, np.float32), n)
                 for n, v in (("lo", -0.5), ("hi", 0.75))]
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    g = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info(
        n, onnx.TensorProto.FLOAT, x.shape) for n, x in (("a", a), ("b", b))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    lib = mtvm.compile(m)
    src = next(t for p, t in lib.sources.items() if p.endswith("_kernels.c"))
    assert re.search(r"mtvm_f32_gemm_\dxNR_epi\(", src), src[:800]
    _check_avx2_and_sanitized(m, lib, {"a": a, "b": b}, monkeypatch)


@pytest.mark.device
@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="needs qemu-system-arm and arm-none-eabi-gcc")
def test_matmul_whole_tiles_from_vfp_registers_on_mps2_an386(tmp_path):
    """On an Arm FPU a MatMul's whole 4 x 4 blocks are stored from the registers, with a
    Linear layer's bias along the last axis and a residual Add after it added there
    (mtvm_f32_gemm_rows_cbias_vfp): rows of 8- and 4-row blocks with a remainder, columns
    with a partial tile; a 2-D product (the bias then along axis 1), a batched one with a
    bias and a residual, attention's product of two computed operands (no tail), a residual
    alone; a bias along the rows keeps the tile. The same bits as target "c" built for the
    board (sum from 0, then the adds in order), within tolerance of the host build."""
    import mtvm
    from mtvm.target import Target
    feeds = {"a2": randn(13, 24), "a3": randn(2, 9, 16), "q": randn(1, 2, 9, 8),
             "k": randn(1, 2, 8, 9), "r": randn(13, 10)}
    consts = {"w2": randn(24, 10), "b2": randn(10), "w3": randn(16, 6), "b3": randn(6),
              "bcol": randn(13, 1)}
    nodes = [helper.make_node("MatMul", ["a2", "w2"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["y2"]),            # bias along axis 1
             helper.make_node("MatMul", ["a3", "w3"], ["m3"]),
             helper.make_node("Add", ["m3", "b3"], ["y3"]),            # along the last axis
             helper.make_node("MatMul", ["q", "k"], ["y4"]),           # no tail
             helper.make_node("MatMul", ["a2", "w2"], ["m5"]),
             helper.make_node("Add", ["m5", "bcol"], ["y5"]),          # along the rows
             helper.make_node("MatMul", ["a2", "w2"], ["m6"]),
             helper.make_node("Add", ["m6", "r"], ["y6"]),             # a residual
             helper.make_node("MatMul", ["a3", "w3"], ["m7"]),
             helper.make_node("Add", ["m7", "b3"], ["s7"]),
             helper.make_node("Add", ["s7", "r3"], ["y7"])]            # bias, then residual
    feeds["r3"] = randn(2, 9, 6)
    from test_nan import graph_model
    outs = ["y2", "y3", "y4", "y5", "y6", "y7"]
    m = graph_model(nodes, feeds, outs, consts)
    lib = mtvm.compile(m, target=Target.resolve("cortex-m4"))
    src = next(t for p, t in lib.sources.items() if p.endswith("_kernels.c"))
    calls = re.findall(r"mtvm_f32_gemm_rows_cbias_vfp\([^;]*;", src)
    assert len([c for c in calls if "NULL, NULL" in c]) >= 1              # y4
    assert len([c for c in calls if "ep0 + q0, NULL" in c]) >= 2          # y2, y3
    assert len([c for c in calls if re.search(r"NULL, ep0 \+ ", c)]) >= 1  # y6
    assert len([c for c in calls if re.search(r"ep0 \+ q0, ep1 \+ ", c)]) >= 1  # y7
    dev = run_on_board(lib, feeds, tmp_path / "vfp")
    tile = run_on_board(mtvm.compile(m), feeds, tmp_path / "tile")
    ref = mtvm.compile(m).run_host(feeds)
    for name in outs:
        np.testing.assert_array_equal(dev[name], tile[name], err_msg=name)
        np.testing.assert_allclose(dev[name], ref[name], rtol=1e-4, atol=1e-4, err_msg=name)
