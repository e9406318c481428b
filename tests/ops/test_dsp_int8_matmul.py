"""The Arm DSP int8 schedules of QMatMul, QBatchMatMul, QAdd and QMul
(mtvm/schedules/arm_dsp/matmul_s8.py, elementwise_s8.py): chosen on DSP cores only (every
other target keeps its C), and on the emulated Cortex-M4F (mps2-an386) bit-exact with the
host build of target "c" -- a small attention block of our own with awkward sizes (rows,
depth and columns not multiples of four) and the shared kwt_tiny_int8 and kws_crnn_int8,
each run through a host-driven session under -icount (instructions per MAC printed:
`pytest -s`); and QBatchMatMul's fused form on the M4 and the M33."""
from __future__ import annotations

import os

import numpy as np
import pytest

import mtvm
from mtvm.target import Target
from mtvm.testing import quantize_qdq

MODELS = os.environ.get("MTVM_MODELS", os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                                      "shared", "models"))
DSP_SCHEDULES = {"qmatmul_s8.dsp_packed", "qbatchmatmul_s8.dsp_packed", "qadd_s8.dsp_smlal",
                 "qmul_s8.dsp_rows"}


def attention_int8_model(tmp_dir: str, uint8: bool = False) -> str:
    """x [1, 11, 18] -> Linear 18x22 (+bias) -> q; q q^T -> Softmax -> times q -> + q
    -> * q -> * 0.75 -> Linear 22x7 + 0.5: QMatMul (11 rows, depth 18, 22 and 7 columns),
    QBatchMatMul (depth 22 and 11; 11 and 22 columns), both with a last packed block
    that overlaps the one before (rows or columns not a multiple of the block), QSoftmax, QAdd (a bias row, same shapes), QMul (same shapes), the Add and Mul
    of a scalar (tables: QLut); quantized by
    onnxruntime (QDQ, int8; with `uint8`, uint8 activations and weights: asymmetric weights,
    whose zero points QMatMul subtracts with the rows' sums), its outputs beside it."""
    path = os.path.join(tmp_dir, f"attention_{'uint8' if uint8 else 'int8'}.onnx")
    if os.path.exists(path):
        return path
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(13)

    def init(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale)
                                       .astype(np.float32), name)
    inits = [init("w1", (18, 22), 0.3), init("b1", (22,), 0.2), init("w2", (22, 7), 0.3),
             numpy_helper.from_array(np.array(0.5, np.float32), "half"),
             numpy_helper.from_array(np.array(0.75, np.float32), "three4")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]),
             helper.make_node("Add", ["m1", "b1"], ["q"]),
             helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "qt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "q"], ["o"]),
             helper.make_node("Add", ["o", "q"], ["r"]),
             helper.make_node("Mul", ["r", "q"], ["g0"]),
             helper.make_node("Mul", ["g0", "three4"], ["g"]),
             helper.make_node("MatMul", ["g", "w2"], ["y0"]),
             helper.make_node("Add", ["y0", "half"], ["y"])]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 11, 18])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 11, 7])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    f32 = os.path.join(tmp_dir, f"attention_f32_{int(uint8)}.onnx")
    onnx.save(model, f32)
    xs = [(rng.standard_normal((1, 11, 18)) + (0.7 if uint8 else 0)).astype(np.float32)
          for _ in range(8)]
    return quantize_qdq(f32, path, "x", xs, xs[0], uint8=uint8)


@pytest.fixture(scope="module")
def attention_model(tmp_path_factory):
    pytest.importorskip("onnxruntime.quantization")
    return attention_int8_model(str(tmp_path_factory.mktemp("dsp-attention")))


@pytest.fixture(scope="module")
def attention_model_u8(tmp_path_factory):
    pytest.importorskip("onnxruntime.quantization")
    return attention_int8_model(str(tmp_path_factory.mktemp("dsp-attention-u8")), uint8=True)


def _chosen(lib) -> set[str]:
    return {getattr(lk.kernel, "schedule", None) for lk in lib.kernels} - {None}


@pytest.mark.parametrize("target", ["c", "x86-64-v4", "cortex-m0", "cortex-m3", "cortex-m55",
                                    "rv32imac", "cortex-m4", "cortex-m33"])
def test_the_dsp_schedules_are_chosen_on_dsp_cores_only(attention_model, target):
    """Which schedules compute the int8 model on each target (the C of other targets is
    theirs: none of these applies)."""
    tg = Target.resolve(target)
    lib = mtvm.compile(attention_model, target=tg)
    chosen = _chosen(lib) & DSP_SCHEDULES
    src = lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    if tg.is_arm and tg.has("dsp") and not tg.has("mve"):
        assert chosen == DSP_SCHEDULES
        assert "mtvm_packv_s8_dsp" in src and "mtvm_qadd_s8_dsp" in src
        # 11 rows, 11 and 22 columns: the last block overlaps, one copy of its code each;
        # the scores (11 columns) in QBatchMatMul's fused form, two chunks of 6 columns
        # (their scratch within the packed columns'), the last chunk overlapping too
        assert src.count("overlapping the one before") == 3 and "j0 = j < 16 ? j : 16" in src
        assert src.count("mtvm_mm_rq_cols_s8(") == 1 and "_4x24x6l11_w" in src
        # the scalar Add and Mul: tables (passes.quantize.scalar_operand_lut), no QAdd/QMul
        assert [lk.kernel.node.op for lk in lib.kernels].count("QLut") == 2
    else:
        assert not chosen
        assert "_dsp(" not in src.replace("mtvm_cvtr_f32_dsp", "")


def _session_run(path, tmp_dir):
    """(outputs, instructions) of one run through a host-driven session on mps2-an386."""
    import shutil

    import mtvm.project as P
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    proj = P.generate(path, board="mps2-an386", out_dir=os.path.join(tmp_dir, "proj"),
                      progress=lambda m: None)
    proj.build(progress=lambda m: None)
    proj.template.flash(proj, lambda m: None, icount=True)
    with np.load(path[:-5] + ".npz") as z:
        x = z["in_0"]
    try:
        with proj.session() as s:
            y = list(s.executor.run([x]).values())[0]
            bench = s.executor.benchmark(number=1, repeat=1)
            assert s.stats["bad_packets"] == 0
        note = proj.template.timing(proj, bench)
    finally:
        proj.stop()
    return x, y, note


@pytest.mark.device
@pytest.mark.parametrize("name", ["attention_int8", "attention_uint8", "kwt_tiny_int8",
                                  "kws_crnn_int8"])
def test_dsp_int8_session_matches_the_host_build(name, request, tmp_path):
    if name.startswith("attention"):
        path = request.getfixturevalue("attention_model_u8" if name.endswith("uint8")
                                       else "attention_model")
    else:
        path = os.path.join(MODELS, f"{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    x, y, note = _session_run(path, str(tmp_path))
    host = list(mtvm.compile(path).run_host([x]).values())[0]
    np.testing.assert_array_equal(y, host)
    print(f"\n{name} on mps2-an386: {note}")


@pytest.mark.parametrize("target", ["c", "cortex-m3", "cortex-m55", "x86-64-v3", "cortex-m4"])
def test_the_recurrent_vfp16_gemv_is_chosen_on_dsp_cores_with_an_fpu_only(target):
    """kws_crnn_int8's GRU (float between DequantizeLinear and QuantizeLinear): the
    sixteen-column VFP GEMV (mtvm/schedules/arm_dsp/recurrent_f32.py) on the M4F only."""
    path = os.path.join(MODELS, "kws_crnn_int8.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    tg = Target.resolve(target)
    chosen = _chosen(mtvm.compile(path, target=tg))
    want = "gru_f32.gemv_vfp16" if tg.is_arm and tg.has("dsp") and not tg.has("mve") \
        else "gru_f32.gemv"
    assert want in chosen and not ({"gru_f32.gemv", "gru_f32.gemv_vfp16"} - {want}) & chosen


FUSED = {"qbatchmatmul_s8.dsp_packed": {"fused_chunks": 1}}


@pytest.mark.device
@pytest.mark.parametrize("board,target", [("mps2-an386", "cortex-m4"),
                                          ("mps2-an505", "cortex-m33")])
def test_fused_batch_matmul_on_the_board_bit_identical(attention_model, board, target,
                                                       tmp_path):
    """QBatchMatMul's fused form (b's columns widened less their zero point, a's rows
    through the fused QMatMul loop: knob `fused`, taken by default only where the planned
    arena does not grow), forced: the attention scores at a depth of 22 with zero points
    on both sides, on the M4 (assembly) and the M33 (its C) as the host build computes."""
    from mtvm.testing import have, run_on_board
    if not (have("qemu-system-arm") and have("arm-none-eabi-gcc")):
        pytest.skip("QEMU or arm-none-eabi-gcc not installed")
    lib = mtvm.compile(attention_model, target=Target.resolve(target), schedule_config=FUSED)
    src = lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    assert "mtvm_mm_rq_cols_s8(" in src
    with np.load(attention_model[:-5] + ".npz") as z:
        x = z["in_0"]
    dev = run_on_board(lib, [x], tmp_path, board=board)
    host = mtvm.compile(attention_model).run_host([x])
    for (name, a), b in zip(dev.items(), host.values()):
        np.testing.assert_array_equal(a, b, err_msg=name)
