"""The Arm DSP int8 convolution schedules on the emulated Cortex-M4F (mps2-an386), layer
shapes of our own beside the shared models: one QDQ model of independent branches (an
input, QuantizeLinear, a Conv, QuantizeLinear, an output each), built for the board with
the cortex_m template's flags (-O2 -Werror: the assembly's register operands must be found
for every shape) and run once over the session -- bit-exact with the host build's portable
C and within one output quantization step of onnxruntime. The branches cover the
pointwise kernel of one to four groups of eight channels (mtvm_pw_s8_dsp.h, written over
its input or not, pixels not a multiple of its block; one shift for the layer or one per
channel), the im2col path's widened weights
(mtvm_mm_s16_w16.h: tails of 0-3 taps, an odd last pixel; requantized in the tile from
each pair's parameters, with one shift for the layer or, for scales over 12 octaves, one
per channel, or by the
generated C where the weights have a zero point), per-channel and per-tensor
requantization, and the 3x3 depthwise planes whose rows are word-aligned (stride 1 and 2,
widths with and without a multiple of four)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import mtvm
import mtvm.project as P

from device_utils import need_qemu, quiet

pytestmark = pytest.mark.device

# (name, input C, H, W, output C, kernel, stride, pads, group, per-channel weights (or per
# tensor with a zero point: "zp"; per channel over 12 octaves: "spread"), output zero
# point)
BRANCHES = [
    ("pw8", 8, 12, 12, 48, 1, 1, 0, 1, True, -128),
    ("pw8_spread", 8, 6, 6, 16, 1, 1, 0, 1, "spread", 5),
    ("pw16_inplace", 16, 10, 10, 8, 1, 1, 0, 1, True, -3),
    ("pw24", 24, 9, 9, 5, 1, 1, 0, 1, True, 7),
    ("pw32", 32, 12, 12, 96, 1, 1, 0, 1, True, -128),
    ("stem3x3s2", 3, 16, 16, 16, 3, 2, 1, 1, True, -128),
    ("k45", 5, 7, 7, 6, 3, 1, 1, 1, True, 12),
    ("k54_tensor", 6, 8, 8, 10, 3, 1, 1, 1, False, -9),
    ("k28_pw", 28, 5, 5, 12, 1, 1, 0, 1, False, 0),
    ("k36_wzp", 4, 6, 6, 6, 3, 1, 1, 1, "zp", -2),
    ("k18_spread", 2, 8, 8, 8, 3, 1, 1, 1, "spread", 4),
    ("dw_s1", 8, 20, 20, 8, 3, 1, 1, 8, True, -128),
    ("dw_s2", 12, 16, 16, 12, 3, 2, 1, 12, True, -5),
    ("dw_s1_w10", 8, 10, 10, 8, 3, 1, 1, 8, True, 3),
]


def branches_model(path: str) -> dict:
    """Writes the model; returns its sample inputs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(29)
    nodes, inits, inputs, outputs, feeds = [], [], [], [], {}

    def const(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v), name))
        return name
    for name, c, h, w, oc, k, s, p, g, per_ch, yzp in BRANCHES:
        x = f"x_{name}"
        inputs.append(helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, c, h, w]))
        feeds[x] = rng.standard_normal((1, c, h, w)).astype(np.float32)
        xs = np.float32(0.031)
        nodes += [helper.make_node("QuantizeLinear", [x, const(f"xs_{name}", xs),
                                                      const(f"xz_{name}", np.int8(-4))],
                                   [f"xq_{name}"]),
                  helper.make_node("DequantizeLinear", [f"xq_{name}", f"xs_{name}",
                                                        f"xz_{name}"], [f"xd_{name}"])]
        wq = rng.integers(-127, 128, (oc, c // g, k, k)).astype(np.int8)
        ws = (rng.random(oc) * 0.01 + 0.002).astype(np.float32) if per_ch is True else \
            (0.1 * 2.0 ** -rng.uniform(0, 12, oc)).astype(np.float32) if per_ch == "spread" \
            else np.float32(0.0071)
        wz = np.int8(3 if per_ch == "zp" else 0) if per_ch in (False, "zp") else \
            np.zeros(oc, np.int8)
        nodes.append(helper.make_node("DequantizeLinear",
                                      [const(f"w_{name}", wq), const(f"ws_{name}", ws),
                                       const(f"wz_{name}", wz)], [f"wd_{name}"], axis=0))
        bq = rng.integers(-3000, 3000, oc).astype(np.int32)
        bs = (xs * np.broadcast_to(ws, (oc,))).astype(np.float32)
        nodes.append(helper.make_node("DequantizeLinear",
                                      [const(f"b_{name}", bq), const(f"bs_{name}", bs),
                                       const(f"bz_{name}", np.zeros(oc, np.int32))],
                                      [f"bd_{name}"], axis=0))
        nodes.append(helper.make_node("Conv", [f"xd_{name}", f"wd_{name}", f"bd_{name}"],
                                      [f"c_{name}"], kernel_shape=[k, k], strides=[s, s],
                                      pads=[p] * 4, group=g))
        ys = np.float32(0.05 + 0.01 * len(outputs))
        nodes += [helper.make_node("QuantizeLinear", [f"c_{name}", const(f"ys_{name}", ys),
                                                      const(f"yz_{name}", np.int8(yzp))],
                                   [f"yq_{name}"]),
                  helper.make_node("DequantizeLinear", [f"yq_{name}", f"ys_{name}",
                                                        f"yz_{name}"], [f"y_{name}"])]
        oh = (h + 2 * p - k) // s + 1
        outputs.append(helper.make_tensor_value_info(f"y_{name}", TensorProto.FLOAT,
                                                     [1, oc, oh, oh]))
    graph = helper.make_graph(nodes, "dsp_branches", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return feeds


def test_dsp_int8_conv_branches_on_the_m4(tmp_path):
    need_qemu()
    import onnxruntime as ort
    path = str(tmp_path / "dsp_branches.onnx")
    feeds = branches_model(path)
    xs = [feeds[f"x_{b[0]}"] for b in BRANCHES]
    proj = P.generate(path, board="mps2-an386", out_dir=str(tmp_path / "proj"),
                      progress=quiet)
    kernels = open(proj.path("model", "codegen", "host", "src", "tvmgen_default_kernels.c")).read()
    for name in ("mtvm_pw8_s8_dsp(", "mtvm_pw8_sum_s8_dsp(",
                 "mtvm_pw8_last_s8_dsp(", "mtvm_mm2x2_s16_w16(", "mtvm_mm_s16_widen(",
                 "mtvm_mm2x2_w16_q8(", "mtvm_mm2x2_w16_q8s(", "mtvm_mm_w16_pair_scaled("):
        assert name in kernels, f"{name} not exercised"
    # the pointwise kernels' two requantizations: the layer's one shift (a constant, the
    # weights scaled per channel by kk) and, over 12 octaves of scales, sh per channel
    assert "int32_t kk = " in kernels and "int32_t sh = " in kernels
    proj.build(progress=quiet)
    host = mtvm.compile(path).run_host(xs)
    proj.flash(progress=quiet)
    try:
        with proj.session() as s:
            dev = s.executor.run(xs)
    finally:
        proj.stop()
    ref = dict(zip([o.name for o in ort.InferenceSession(path).get_outputs()],
                   ort.InferenceSession(path).run(None, feeds)))
    for i, b in enumerate(BRANCHES):
        out = f"y_{b[0]}"
        np.testing.assert_array_equal(dev[out], host[out], err_msg=b[0])
        step = 0.05 + 0.01 * i
        assert np.abs(dev[out] - ref[out]).max() <= step * 1.001, f"{b[0]}: more than a step off"
