"""The QAdd of a constant row after a QMatMul folded into the QMatMul's stores
(mtvm/passes/matmul_bias.py; ops/quantized/common.py post_add_lines): the constants give
the QAdd's own integers for every value (checked here over random scales, zero points,
rows and clamps), and whole QDQ Linear layers -- MatMul, then Add of an int8 bias on
either side, with and without a Relu, int8 and uint8, per-tensor and per-channel
weights, one row (the Arm DSP GEMV) and several (the packed kernels) -- compute the same
bytes folded as unfolded: on target c, on x86-64-v3 (the AVX2 kernel) and under the
sanitizers on the host, and on the emulated Cortex-M4 (tests/ops/test_dsp_int8_matmul.py
runs the folded attention model there; the device test below the GEMV and packed forms
with a Relu)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm import passes
from mtvm.frontend import load_onnx
from mtvm.interp import interpret
from mtvm.ops.base import get_op
from mtvm.ops.quantized.elementwise import add_multipliers
from mtvm.passes.matmul_bias import post_add_table
from mtvm.testing import cpu_has


def test_post_add_table_gives_the_qadds_integers_for_every_value():
    rng = np.random.default_rng(5)
    qadd = get_op("QAdd", "mtvm")
    found = 0
    trials = 150
    for t in range(trials):
        uint8 = t % 3 == 0
        lo, hi = (0, 255) if uint8 else (-128, 127)
        sa, sb, sy = (float(v) for v in np.exp(rng.uniform(-6, -1, 3)))
        ia, ib, n = add_multipliers(sa / sy, sb / sy)
        za, zb, zy = (int(v) for v in rng.integers(lo, hi + 1, 3))
        act = (lo, hi) if t % 4 else ((zy, hi) if zy < hi else (lo, hi))   # a Relu's clamp
        attrs = dict(a_zp=za, b_zp=zb, y_zp=zy, a_mult=ia, b_mult=ib, shift=n,
                     act_min=act[0], act_max=act[1])
        v_lo = lo if t % 5 else za                       # the matmul's own Relu
        values = np.arange(v_lo, hi + 1, dtype=np.int64)
        row = rng.integers(lo, hi + 1, 9).astype(np.int64)
        pos = t % 2
        got = post_add_table(values, row, pos, attrs)
        if got is None:
            continue
        found += 1
        table, shift = got
        dt = np.uint8 if uint8 else np.int8
        for j in range(row.size):
            ins = [values.astype(dt), np.full(values.shape, row[j], dt)]
            want = qadd.reference(*(ins if pos == 0 else ins[::-1]), **attrs)
            v = (int(table[j, 0]) + values * int(table[j, 1])) >> shift
            assert np.abs(table[j]).max() < 2 ** 31
            np.testing.assert_array_equal(np.clip(v, act[0], act[1]), want.astype(np.int64),
                                          err_msg=f"trial {t} column {j}")
    assert found >= 0.9 * trials, found


def linear_bias_model(m: int, kk: int, n: int, *, uint8=False, per_channel=False,
                      relu=False, bias_first=False, bias_shape=None, seed=0):
    """x [1, m, kk] -> Q/DQ -> MatMul by DQ(w [kk, n]) -> Q/DQ -> Add(DQ(int8 bias row))
    -> [Relu] -> Q/DQ: the QDQ form of a PyTorch Linear on a 3-D input."""
    rng = np.random.default_rng(seed)
    dt = np.uint8 if uint8 else np.int8
    zx, zm, zb, zy = ((131, 120, 128, 118) if uint8 else (-3, 4, 0, -7))
    k1 = kk ** 0.5
    sx, sm, sb, sy = 0.05, 0.03 * k1, 0.02, 0.035 * k1
    inits = [numpy_helper.from_array(np.asarray(v, t), name) for name, v, t in [
        ("sx", sx, np.float32), ("zx", zx, dt), ("sm", sm, np.float32), ("zm", zm, dt),
        ("sb", sb, np.float32), ("zb", zb, dt), ("sy", sy, np.float32), ("zy", zy, dt)]]
    if uint8:
        w = rng.integers(0, 256, (kk, n)).astype(np.uint8)
        wz = np.uint8(128)
    else:
        w = rng.integers(-127, 128, (kk, n)).astype(np.int8)
        wz = np.zeros(n, np.int8) if per_channel else np.int8(0)
    ws = (rng.random(n) * 0.02 + 0.004).astype(np.float32) if per_channel else np.float32(0.01)
    b = rng.integers(0 if uint8 else -128, 256 if uint8 else 128,
                     bias_shape or (n,)).astype(dt)
    inits += [numpy_helper.from_array(np.asarray(a), name) for name, a in
              [("w", w), ("ws", ws), ("wz", wz), ("b", b)]]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"],
                              **({"axis": 1} if per_channel else {})),
             helper.make_node("MatMul", ["xd", "wd"], ["mm"]),
             helper.make_node("QuantizeLinear", ["mm", "sm", "zm"], ["mq"]),
             helper.make_node("DequantizeLinear", ["mq", "sm", "zm"], ["md"]),
             helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bd"]),
             helper.make_node("Add", ["bd", "md"] if bias_first else ["md", "bd"], ["y0"])]
    last = "y0"
    if relu:
        nodes.append(helper.make_node("Relu", ["y0"], ["y1"]))
        last = "y1"
    nodes += [helper.make_node("QuantizeLinear", [last, "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "linear_bias", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, m, kk])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    x = rng.standard_normal((1, m, kk)).astype(np.float32) * 2
    return model, x, sy


# (rows, depth, columns, uint8, per-channel weights, Relu, bias first, bias shape)
CASES = [(1, 40, 36, False, True, False, False, None),     # one row: the DSP GEMV
         (1, 9, 5, True, False, True, True, None),
         (6, 32, 32, False, True, True, False, None),      # the DSP packed kernel
         (11, 18, 22, False, False, False, True, (1, 1, 22)),
         (5, 17, 12, True, False, False, False, None),
         (4, 64, 24, False, True, False, False, (1, 24)),
         (3, 7, 9, False, False, True, False, None)]


def _unfolded(model, x):
    """The integers of the graph without the fold (the LLVM backend's passes), run by the
    ops' references."""
    g = passes.optimize(load_onnx(model), backend="llvm")
    assert any(nd.op == "QAdd" for nd in g.nodes)
    return list(interpret(g, {g.inputs[0]: x}).values())[0]


def _folded(lib) -> None:
    ops = [lk.kernel.node for lk in lib.kernels]
    assert not any(nd.op == "QAdd" for nd in ops), [nd.op for nd in ops]
    assert any(nd.op == "QMatMul" and "post_shift" in nd.attrs for nd in ops)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:3])) +
                         "".join(f"-{k}" for k, on in zip(("u8", "pc", "relu", "bfirst"), c[3:7])
                                 if on) + ("-bshape" if c[7] else ""))
@pytest.mark.parametrize("target", ["c", "x86-64-v3"])
def test_folded_linear_layers_give_the_unfolded_bytes(case, target, tmp_path):
    if target == "x86-64-v3" and not cpu_has("avx2"):
        pytest.skip("the host has no AVX2")
    m, kk, n, uint8, pc, relu, bfirst, bshape = case
    if uint8 and pc:
        pytest.skip("uint8 weights take one zero point")
    model, x, sy = linear_bias_model(m, kk, n, uint8=uint8, per_channel=pc, relu=relu,
                                     bias_first=bfirst, bias_shape=bshape, seed=m * kk + n)
    path = str(tmp_path / "linear_bias.onnx")
    import onnx
    onnx.save(model, path)
    lib = mtvm.compile(path, target=target)
    _folded(lib)
    if target == "x86-64-v3" and m >= 2 and not uint8:
        assert any(getattr(lk.kernel, "schedule", None) == "qmatmul_s8.avx2_packed"
                   for lk in lib.kernels)
    y = list(lib.run_host([x]).values())[0]
    want = _unfolded(model, x)
    # the graph's output is the dequantized value: equal bytes give equal floats
    np.testing.assert_array_equal(y, want)
    if case is CASES[2]:
        ys = list(lib.run_host([x], sanitize=True).values())[0]
        np.testing.assert_array_equal(ys, want)


@pytest.mark.parametrize("target", ["c", "x86-64-v3",
                                    pytest.param("cortex-m4", marks=pytest.mark.device)])
def test_a_slope_per_column_gives_the_same_bytes(target, tmp_path):
    """The [N][2] form of the constants (a slope of its own per column, where nudging one
    column's slope was what made it exact): the fold's graph with its [N] table rewritten
    as pairs, compiled and run (on the M4: the DSP packed kernel on mps2-an386)."""
    if target == "x86-64-v3" and not cpu_has("avx2"):
        pytest.skip("the host has no AVX2")
    from mtvm.compiler import compile_graph
    model, x, _ = linear_bias_model(6, 32, 20, per_channel=True, relu=True, seed=3)
    g = passes.optimize(load_onnx(model))
    (mm,) = [nd for nd in g.nodes if nd.op == "QMatMul"]
    c = g.tensors[mm.inputs[6]].data
    assert c.shape == (21,)
    mm.inputs[6] = g.add_const("pairs", np.stack([c[:-1], np.full_like(c[:-1], c[-1])], axis=1))
    lib = compile_graph(g, target=target)
    (k,) = [lk.kernel for lk in lib.kernels if lk.kernel.node.op == "QMatMul"]
    assert k.ins[6].shape == (20, 2) or target == "x86-64-v3"
    if target == "cortex-m4":
        from mtvm.testing import have, run_on_board
        if not (have("arm-none-eabi-gcc") and have("qemu-system-arm")):
            pytest.skip("no Arm toolchain or QEMU")
        y = list(run_on_board(lib, {"x": x}, str(tmp_path / "m4")).values())[0]
    else:
        y = list(lib.run_host([x]).values())[0]
    np.testing.assert_array_equal(y, _unfolded(model, x))


def test_the_fold_keeps_the_add_where_it_is_not_a_row(tmp_path):
    """An Add of a full-size constant (not a row broadcast over the leading axes) and the
    LLVM backend's graph keep their QAdd."""
    model, x, _ = linear_bias_model(4, 8, 6, bias_shape=(1, 4, 6))
    path = str(tmp_path / "full.onnx")
    import onnx
    onnx.save(model, path)
    lib = mtvm.compile(path, target="c")
    assert any(lk.kernel.node.op == "QAdd" for lk in lib.kernels)
    np.testing.assert_array_equal(list(lib.run_host([x]).values())[0], _unfolded(model, x))


@pytest.mark.device
def test_folded_linear_layers_on_the_cortex_m4(tmp_path):
    """The DSP GEMV (one row) and packed (six rows) QMatMul with a folded bias and a Relu on
    mps2-an386: the bytes of the unfolded graph."""
    import shutil

    import onnx

    import mtvm.project as P
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    for case in (CASES[0], CASES[2]):
        m, kk, n, uint8, pc, relu, bfirst, bshape = case
        model, x, _ = linear_bias_model(m, kk, n, uint8=uint8, per_channel=pc, relu=relu,
                                        bias_first=bfirst, bias_shape=bshape, seed=m)
        d = tmp_path / f"m{m}"
        d.mkdir()
        path = str(d / "linear_bias.onnx")
        onnx.save(model, path)
        lib = mtvm.compile(path, target="cortex-m4")
        _folded(lib)
        want_schedule = "qmatmul_s8.dsp_gemv" if m == 1 else "qmatmul_s8.dsp_packed"
        assert any(getattr(lk.kernel, "schedule", None) == want_schedule for lk in lib.kernels)
        proj = P.generate(path, board="mps2-an386", out_dir=str(d / "proj"),
                          progress=lambda msg: None)
        proj.build(progress=lambda msg: None)
        proj.template.flash(proj, lambda msg: None, icount=True)
        try:
            with proj.session() as s:
                y = list(s.executor.run([x]).values())[0]
        finally:
            proj.stop()
        np.testing.assert_array_equal(y, _unfolded(model, x))
