"""The Arm VFP epilogue kernels of the float GEMM convolutions (mtvm_f32_gemm_rows_<mode>_vfp
and the window form mtvm_f32_gemm_rows_<mode>_off_vfp, c_runtime/kernels/arm_dsp/
mtvm_gemm_f32_vfp.h): the bias and a fused Relu or Relu6 applied
to the 4 x 4 block in registers, on the floats' bits where the block holds no NaN and by
exact float compares where it does. On mps2-an386 the pointwise (in place and not) and
im2col convolutions with no tail, Relu, Relu6 and a Clip the kernel does not take, built
for the Cortex-M4F, equal the same model's C for target "c" built for the same board (its
tile stored, then the C epilogue): the same values (the same fused multiply-adds, then
one add of the bias; +0.0 for -0.0 compares equal), NaN, +inf and -inf where it has them,
and both within tolerance of the host's build."""
from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import helper

import mtvm
from mtvm.target import Target
from mtvm.testing import have, run_on_board

from test_nan import assert_same_specials, graph_model, special

TAILS = {"none": [], "relu": [("Relu", [])], "relu6": [("Clip", ["zero", "six"])],
         "clip_neg": [("Clip", ["neg", "six"])]}


def _model(specials: bool):
    """x [1, 8, 6, 10] (NaN and infinities where `specials`) through four convs per tail
    kind: 1x1 8 -> 12 channels, 1x1 in place 8 -> 8, 3x3 8 -> 8 (im2col) and 1x1 on the
    3x3's output, so that a block mixes NaN with finite sums."""
    x = special((1, 8, 6, 10), nan=[3, 77, 250] if specials else [],
                pinf=[40, 300] if specials else [], ninf=[41, 123] if specials else [],
                seed=21)
    r = np.random.default_rng(22)
    consts = {"zero": np.float32(0), "six": np.float32(6), "neg": np.float32(-1)}
    nodes, outs = [], []
    for tag, tail in TAILS.items():
        for i, (oc, kk, pads) in enumerate(((12, 1, 0), (8, 1, 0), (8, 3, 1))):
            w, b = f"w{tag}{i}", f"b{tag}{i}"
            consts[w] = r.standard_normal((oc, 8, kk, kk)).astype(np.float32)
            consts[b] = r.standard_normal(oc).astype(np.float32)
            y = f"c{tag}{i}"
            nodes.append(helper.make_node("Conv", ["x", w, b], [y], pads=[pads] * 4))
            for op, extra in tail:
                nodes.append(helper.make_node(op, [y, *extra], [y + "t"]))
                y += "t"
            outs.append(y)
    return graph_model(nodes, {"x": x}, outs, consts, opset=18), x


def _dscnn_block(specials: bool):
    """A depthwise-separable block on a 13 x 3 map (kws_dscnn's): depthwise 3x3 + Relu, the
    pointwise conv + Relu6 in place over it (its input copied four positions at a time:
    the 39 positions end in a partial tile, computed whole on Arm), a depthwise again."""
    x = special((1, 16, 13, 3), nan=[5, 300] if specials else [],
                pinf=[77] if specials else [], ninf=[401] if specials else [], seed=23)
    r = np.random.default_rng(24)
    consts = {"dw": r.standard_normal((16, 1, 3, 3)).astype(np.float32),
              "db": r.standard_normal(16).astype(np.float32),
              "pw": r.standard_normal((16, 16, 1, 1)).astype(np.float32),
              "pb": r.standard_normal(16).astype(np.float32),
              "zero": np.float32(0), "six": np.float32(6)}
    nodes = [helper.make_node("Conv", ["x", "dw", "db"], ["d"], group=16, pads=[1] * 4),
             helper.make_node("Relu", ["d"], ["dr"]),
             helper.make_node("Conv", ["dr", "pw", "pb"], ["p"]),
             helper.make_node("Clip", ["p", "zero", "six"], ["pc"]),
             helper.make_node("Conv", ["pc", "dw", "db"], ["y"], group=16, pads=[1] * 4)]
    return graph_model(nodes, {"x": x}, ["y"], consts, opset=18), x


@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="needs qemu-system-arm and arm-none-eabi-gcc")
@pytest.mark.parametrize("specials", [False, True], ids=["finite", "nan_inf"])
def test_in_place_pointwise_partial_tile(specials, tmp_path):
    m, x = _dscnn_block(specials)
    lib = mtvm.compile(m, target=Target.resolve("cortex-m4"))
    src = "\n".join(t for n, t in lib.sources.items() if n.endswith("_kernels.c"))
    assert "pointwise GEMM in place" in src and "xt, MTVM_F32_NR, MTVM_F32_NR, tile)" in src
    dev = run_on_board(lib, {"x": x}, tmp_path / "vfp")
    tile = run_on_board(mtvm.compile(m), {"x": x}, tmp_path / "tile")
    host = mtvm.compile(m).run_host({"x": x})
    assert_same_specials(dev["y"], host["y"], "y on mps2-an386")
    np.testing.assert_array_equal(dev["y"], tile["y"])


def _vfp_calls(lib) -> int:
    """Calls of the epilogue kernel in the generated kernels (not its header)."""
    return sum(len(re.findall(r"mtvm_f32_gemm_(rows_\w+_vfp|4x4_(off_)?epi_vfp)\(", text))
               for name, text in lib.sources.items() if name.endswith("_kernels.c"))


def test_the_epilogue_kernel_is_emitted_for_arm_fpus_only():
    m, _ = _model(False)
    assert _vfp_calls(mtvm.compile(m, target=Target.resolve("cortex-m4"))) > 0
    for target in ("c", "cortex-m0", "x86-64-v3"):
        assert _vfp_calls(mtvm.compile(m, target=Target.resolve(target))) == 0, target


@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="needs qemu-system-arm and arm-none-eabi-gcc")
@pytest.mark.parametrize("specials", [False, True], ids=["finite", "nan_inf"])
def test_on_mps2_an386_as_the_tile_path(specials, tmp_path):
    m, x = _model(specials)
    host = mtvm.compile(m).run_host({"x": x})
    lib = mtvm.compile(m, target=Target.resolve("cortex-m4"))
    assert _vfp_calls(lib) > 0
    src = "\n".join(t for n, t in lib.sources.items() if n.endswith("_kernels.c"))
    # the 1x1 convs (8 taps) inline their blocks, the 3x3 ones (72 taps, window rows) call
    # the out-of-line functions, every mode
    for mode in ("NONE", "RELU", "RELU_HI"):
        assert f"MTVM_F32_EPI_{mode}," in src, mode
    for form in ("none_off", "relu_off", "relu_hi_off"):
        assert f"mtvm_f32_gemm_rows_{form}_vfp(" in src, form
    dev = run_on_board(lib, {"x": x}, tmp_path / "vfp")
    tile = run_on_board(mtvm.compile(m), {"x": x}, tmp_path / "tile")
    for name, want in host.items():
        assert_same_specials(dev[name], want, f"{name} on mps2-an386")
        np.testing.assert_array_equal(dev[name], tile[name], err_msg=name)


def _window_widths_model():
    """3x3 and 10x4 stride-2 convs (window rows) onto rows of 10, 9, 13 and 10 columns, with
    a Relu, and one with a residual Add tail (which reads memory: no overlap)."""
    r = np.random.default_rng(25)
    consts, nodes, outs, feeds = {}, [], [], {}
    for i, (h, wd, kh, kw, s, p) in enumerate(((6, 10, 3, 3, 1, 1), (6, 9, 3, 3, 1, 1),
                                                (5, 13, 3, 3, 1, 1), (40, 20, 10, 4, 2, 1))):
        x = f"x{i}"
        feeds[x] = r.standard_normal((1, 4, h, wd)).astype(np.float32)
        consts[f"w{i}"] = r.standard_normal((8, 4, kh, kw)).astype(np.float32)
        consts[f"b{i}"] = r.standard_normal(8).astype(np.float32)
        pads = [4, p, 4, p] if kh == 10 else [p] * 4
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=pads,
                                   strides=[s, s]),
                  helper.make_node("Relu", [f"c{i}"], [f"y{i}"])]
        outs.append(f"y{i}")
    # the residual tail: conv of x0 (8 channels out onto 6 x 10) + y0
    consts["wr"] = r.standard_normal((8, 4, 3, 3)).astype(np.float32)
    nodes += [helper.make_node("Conv", ["x0", "wr"], ["cr"], pads=[1] * 4),
              helper.make_node("Add", ["cr", "y0"], ["yr"])]
    outs.append("yr")
    return graph_model(nodes, feeds, outs, consts, opset=18), feeds


@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="needs qemu-system-arm and arm-none-eabi-gcc")
def test_window_rows_last_tile_overlaps_where_the_tail_reads_nothing(tmp_path):
    """Rows of 10, 9 and 13 columns end in a whole tile overlapping the one before (the
    columns computed twice get the same bits: each column's own sum); the conv with a
    residual Add keeps its partial tile. On mps2-an386 against the host build, and the
    same bits as target "c" built for the board."""
    m, feeds = _window_widths_model()
    lib = mtvm.compile(m, target=Target.resolve("cortex-m4"))
    src = "\n".join(t for n, t in lib.sources.items() if n.endswith("_kernels.c"))
    assert src.count("Schedule: window rows GEMM") == 5
    assert src.count("/* the last tile overlaps */") == 4   # not in the Add's loop
    dev = run_on_board(lib, feeds, tmp_path / "vfp")
    tile = run_on_board(mtvm.compile(m), feeds, tmp_path / "tile")
    host = mtvm.compile(m).run_host(feeds)
    for name, want in host.items():
        assert_same_specials(dev[name], want, f"{name} on mps2-an386")
        np.testing.assert_array_equal(dev[name], tile[name], err_msg=name)
