"""The Arm DSP int8 matrix-vector schedule of batch-1 QMatMul
(mtvm/schedules/arm_dsp/gemv_s8.py) and the DSP cores' depthwise requantization test by the
accumulator's bound (mtvm/ops/quantized/depthwise.py): chosen on DSP cores only (every other
target keeps its C), and on the emulated Cortex-M4F (mps2-an386) bit-exact with the host build
of target "c" -- fully connected layers of our own with awkward sizes (depth and outputs not
multiples of four; batch 1 and 2), the shared ad_autoencoder_int8, fomo_mbv2_int8 (its
stride-2 depthwise and 8-channel pointwise layers: mtvm/schedules/arm_dsp/pointwise_s8.py) and
the other shared int8 models whose M4 code these change, each run through a host-driven
session under -icount (instructions per MAC printed: `pytest -s`)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import mtvm
from mtvm.target import Target
from mtvm.testing import quantize_qdq

from test_dsp_int8_matmul import MODELS, _chosen, _session_run

GEMV = "qmatmul_s8.dsp_gemv"


def fc_int8_model(tmp_dir: str, batch: int) -> str:
    """x [batch, 150] -> Gemm 150x30 -> Relu -> Gemm 30x6 (+ bias): depth 150 (groups of
    eight, one of four, a byte tail), 30 outputs (two rows past the blocks of four; the
    small 30x6 layer keeps the dense kernel); quantized by onnxruntime (QDQ, int8), its outputs beside it."""
    path = os.path.join(tmp_dir, f"fc_b{batch}.onnx")
    if os.path.exists(path):
        return path
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(17)

    def init(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale)
                                       .astype(np.float32), name)
    inits = [init("w1", (150, 30), 0.3), init("b1", (30,), 0.2), init("w2", (30, 6), 0.3),
             init("b2", (6,), 0.2)]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h0"]),
             helper.make_node("Relu", ["h0"], ["h"]),
             helper.make_node("Gemm", ["h", "w2", "b2"], ["y"])]
    graph = helper.make_graph(nodes, "fc", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [batch, 150])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [batch, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    f32 = os.path.join(tmp_dir, f"fc_f32_{batch}.onnx")
    onnx.save(model, f32)
    xs = [rng.standard_normal((batch, 150)).astype(np.float32) for _ in range(8)]
    return quantize_qdq(f32, path, "x", xs, xs[0])


@pytest.fixture(scope="module")
def fc_models(tmp_path_factory):
    pytest.importorskip("onnxruntime.quantization")
    d = str(tmp_path_factory.mktemp("dsp-gemv"))
    return {b: fc_int8_model(d, b) for b in (1, 2)}


@pytest.mark.parametrize("target", ["c", "x86-64-v4", "cortex-m0", "cortex-m3", "cortex-m55",
                                    "rv32imac", "cortex-m4", "cortex-m33"])
def test_the_gemv_schedule_is_chosen_on_dsp_cores_only(fc_models, target):
    tg = Target.resolve(target)
    lib = mtvm.compile(fc_models[1], target=tg)
    src = lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    if tg.is_arm and tg.has("dsp") and not tg.has("mve"):
        assert GEMV in _chosen(lib) and "mtvm_gemv4_s8_s8_dsp" in src
    else:
        assert GEMV not in _chosen(lib) and "mtvm_gemv4" not in src


@pytest.mark.parametrize("target", ["c", "cortex-m3", "cortex-m55", "rv32imac", "cortex-m4"])
def test_stride2_depthwise_takes_the_thumb2_loop_on_dsp_cores_only(target):
    """fomo_mbv2_int8's stride-2 depthwise layers: multipliers with 7 trailing zero bits at
    shifts -5 to -7 (ties ruled out by the accumulator's bound, not by the general test)."""
    path = os.path.join(MODELS, "fomo_mbv2_int8.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    tg = Target.resolve(target)
    src = mtvm.compile(path, target=tg).sources["codegen/host/src/tvmgen_default_kernels.c"]
    assert ("mtvm_dw3x3s2_4_s8_ssat" in src) == (tg.is_arm and tg.has("dsp") and
                                                 not tg.has("mve"))


@pytest.mark.device
@pytest.mark.parametrize("name", ["fc_b1", "fc_b2", "ad_autoencoder_int8", "fomo_mbv2_int8",
                                  "kws_dscnn_int8", "vww_mobilenetv1_int8", "ic_resnet8_int8",
                                  "har_cnn1d_int8", "denoise_unet_int8"])
def test_dsp_gemv_session_matches_the_host_build(name, request, tmp_path):
    if name.startswith("fc_b"):
        path = request.getfixturevalue("fc_models")[int(name[-1])]
    else:
        path = os.path.join(MODELS, f"{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    x, y, note = _session_run(path, str(tmp_path))
    host = list(mtvm.compile(path).run_host([x]).values())[0]
    np.testing.assert_array_equal(y, host)
    print(f"\n{name} on mps2-an386: {note}")
