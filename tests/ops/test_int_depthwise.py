"""The int8/uint8 depthwise kernel (QConv folded=0, mtvm/ops/quantized/depthwise.py) in
all its variants: 2x2 and 4-pixel blocks, stride 2, dilation, padding or not,
odd sizes, uint8 with weight zero points, depth multiplier > 1, in place,
clamped outputs and multipliers whose products can tie. The C equals
QConv.reference (the IR interpreter) exactly on the host, under ASan/UBSan, and
on the emulated Cortex-M4 (the DSP path)."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.interp import interpret
from mtvm.testing import have, run_on_board

# name, dtype, (C, H, W), depth multiplier, (kh, kw), strides, pads, dilations
VARIANTS = [
    ("s1_pad_even", np.int8, (3, 8, 8), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("s1_pad_odd", np.int8, (2, 7, 11), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("s1_nopad", np.int8, (2, 9, 10), 1, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
    ("s1_narrow", np.int8, (2, 5, 3), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("s1_one_col", np.int8, (2, 4, 1), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("s1_one_row", np.int8, (2, 1, 9), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("s1_asym_pad", np.int8, (2, 6, 7), 1, (3, 3), (1, 1), (0, 2, 2, 0), (1, 1)),
    ("s2_same", np.int8, (3, 12, 12), 1, (3, 3), (2, 2), (0, 0, 1, 1), (1, 1)),
    ("s2_pad_odd", np.int8, (2, 11, 13), 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ("s2_nopad", np.int8, (2, 9, 11), 1, (3, 3), (2, 2), (0, 0, 0, 0), (1, 1)),
    ("s2_narrow", np.int8, (3, 9, 5), 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),   # 3 wide
    ("s2_x_only", np.int8, (2, 6, 14), 1, (3, 3), (1, 2), (1, 1, 1, 1), (1, 1)),
    ("s2_y_only", np.int8, (2, 9, 9), 1, (3, 3), (2, 1), (1, 1, 1, 1), (1, 1)),
    ("dil2", np.int8, (2, 10, 10), 1, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
    ("dil_y", np.int8, (2, 10, 9), 1, (3, 3), (1, 1), (2, 1, 2, 1), (2, 1)),
    ("k5x3", np.int8, (2, 8, 9), 1, (5, 3), (1, 1), (2, 1, 2, 1), (1, 1)),
    ("k1x3", np.int8, (2, 5, 9), 1, (1, 3), (1, 1), (0, 1, 0, 1), (1, 1)),
    ("k2x3", np.int8, (2, 6, 9), 1, (2, 3), (1, 1), (1, 1, 0, 1), (1, 1)),
    ("k4x4", np.int8, (2, 7, 8), 1, (4, 4), (1, 1), (1, 1, 2, 2), (1, 1)),
    ("k10x1", np.int8, (2, 12, 5), 1, (10, 1), (2, 1), (4, 0, 5, 0), (1, 1)),
    ("s2_k5x3", np.int8, (2, 13, 12), 1, (5, 3), (2, 2), (2, 1, 2, 1), (1, 1)),
    ("s2_dil2", np.int8, (2, 13, 14), 1, (3, 3), (2, 2), (2, 1, 2, 1), (2, 1)),
    ("s1_wide", np.int8, (1, 4, 1400), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("s2_wide", np.int8, (1, 5, 2100), 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ("mult2", np.int8, (2, 7, 9), 2, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("u8_s1", np.uint8, (3, 9, 10), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("u8_s2", np.uint8, (2, 11, 10), 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ("u8_mult3", np.uint8, (2, 6, 7), 3, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
]


class Builder:
    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs, self.outputs, self.feeds = [], [], [], [], {}

    def c(self, name, v):
        self.inits.append(numpy_helper.from_array(np.asarray(v), name))
        return name

    def input(self, name, dtype, shape, n=1):
        lo, hi = (-128, 128) if dtype == np.int8 else (0, 256)
        self.feeds[name] = self.rng.integers(lo, hi, (n,) + shape).astype(dtype)
        self.inputs.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), (n,) + shape))
        return name

    def output(self, name, dtype):
        self.outputs.append(helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None))

    def weights(self, name, dtype, oc, kh, kw):
        rng = self.rng
        if dtype == np.int8:
            w = rng.integers(-127, 128, (oc, 1, kh, kw)).astype(np.int8)
            return w, (rng.random(oc) * 0.02 + 0.004).astype(np.float32), np.zeros(oc, np.int8)
        w = rng.integers(0, 256, (oc, 1, kh, kw)).astype(np.uint8)
        return w, (rng.random(oc) * 0.004 + 0.001).astype(np.float32), \
            rng.integers(100, 156, oc).astype(np.uint8)

    def qlinearconv(self, x, name, dtype, c, mult, k, strides, pads, dil, sx=0.05, zx=None,
                    sy=None, zy=None, w=None):
        zx = (np.int8(-3) if dtype == np.int8 else np.uint8(131)) if zx is None else zx
        zy = (np.int8(5) if dtype == np.int8 else np.uint8(118)) if zy is None else zy
        sy = np.float32(0.06) if sy is None else sy
        wq, ws, wz = self.weights(name, dtype, c * mult, *k) if w is None else w
        bias = self.rng.integers(-3000, 3000, c * mult).astype(np.int32)
        self.nodes.append(helper.make_node(
            "QLinearConv", [x, self.c(name + "_sx", np.float32(sx)), self.c(name + "_zx", zx),
                            self.c(name + "_w", wq), self.c(name + "_ws", ws),
                            self.c(name + "_wz", wz), self.c(name + "_sy", np.float32(sy)),
                            self.c(name + "_zy", zy), self.c(name + "_b", bias)],
            [name], group=c, kernel_shape=list(k), strides=list(strides), pads=list(pads),
            dilations=list(dil)))
        return name

    def model(self):
        g = helper.make_graph(self.nodes, "depthwise", self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return onnx.shape_inference.infer_shapes(m)


def variants_model():
    b = Builder()
    for name, dtype, (c, h, w), mult, k, strides, pads, dil in VARIANTS:
        x = b.input("x_" + name, dtype, (c, h, w))
        b.output(b.qlinearconv(x, name, dtype, c, mult, k, strides, pads, dil), dtype)
    # In place: the second conv of a chain writes over its input (an intermediate).
    for dtype, tag in ((np.int8, "s8"), (np.uint8, "u8")):
        x = b.input(f"x_chain_{tag}", dtype, (4, 7, 9))
        y = b.qlinearconv(x, f"chain1_{tag}", dtype, 4, 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1))
        y = b.qlinearconv(y, f"chain2_{tag}", dtype, 4, 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1),
                          sx=0.06, zx=np.int8(5) if dtype == np.int8 else np.uint8(118))
        b.output(b.qlinearconv(y, f"chain3_{tag}", dtype, 4, 1, (3, 3), (2, 2),
                               (1, 1, 1, 1), (1, 1), sx=0.06,
                               zx=np.int8(5) if dtype == np.int8 else np.uint8(118)), dtype)
    # Channel scales 2^9 apart: no layer-wide shift (see common_shift), per-channel ASR.
    for tag, st in (("s1", 1), ("s2", 2)):
        x = b.input(f"x_spread_{tag}", np.int8, (2, 8, 12))
        w = (b.rng.integers(-127, 128, (2, 1, 3, 3)).astype(np.int8),
             np.array([0.00007, 0.04], np.float32), np.zeros(2, np.int8))
        b.output(b.qlinearconv(x, f"spread_{tag}", np.int8, 2, 1, (3, 3), (st, st),
                               (1, 1, 1, 1), (1, 1), w=w), np.int8)
    # A batch of two, input zero point 0, stride 1 and 2.
    for tag, st in (("s1", 1), ("s2", 2)):
        x = b.input(f"x_batch_{tag}", np.int8, (3, 9, 10), n=2)
        b.output(b.qlinearconv(x, f"batch_{tag}", np.int8, 3, 1, (3, 3), (st, st),
                               (1, 1, 1, 1), (1, 1), zx=np.int8(0)), np.int8)
    # Multipliers whose products can be exact ties (2^-7): the general requantization.
    x = b.input("x_ties", np.int8, (2, 6, 9))
    w = (b.rng.integers(-127, 128, (2, 1, 3, 3)).astype(np.int8),
         np.full(2, 0.125, np.float32), np.zeros(2, np.int8))
    b.output(b.qlinearconv(x, "ties", np.int8, 2, 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1),
                           sx=0.125, sy=np.float32(2.0), w=w), np.int8)
    return b.model(), b.feeds


def clamped_model():
    """QDQ depthwise conv + Relu6 (act_min/act_max inside the 8-bit range)."""
    b = Builder(1)
    c = 4
    x = b.input("x", np.int8, (c, 9, 10))
    ws = (b.rng.random(c) * 0.02 + 0.004).astype(np.float32)
    w = b.rng.integers(-127, 128, (c, 1, 3, 3)).astype(np.int8)
    b.nodes += [
        helper.make_node("DequantizeLinear", [x, b.c("sx", np.float32(0.05)),
                                              b.c("zx", np.int8(-7))], ["xf"]),
        helper.make_node("DequantizeLinear", [b.c("w", w), b.c("ws", ws),
                                              b.c("wz", np.zeros(c, np.int8))], ["wf"], axis=0),
        helper.make_node("DequantizeLinear", [b.c("b", b.rng.integers(-2000, 2000, c)
                                                  .astype(np.int32)),
                                              b.c("bs", (ws * np.float32(0.05)).astype(np.float32)),
                                              b.c("bz", np.zeros(c, np.int32))], ["bf"], axis=0),
        helper.make_node("Conv", ["xf", "wf", "bf"], ["cf"], group=c, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["cf", b.c("lo", np.float32(0)), b.c("hi", np.float32(6))],
                         ["rf"]),
        helper.make_node("QuantizeLinear", ["rf", b.c("sy", np.float32(0.031)),
                                            b.c("zy", np.int8(-128))], ["y"]),
    ]
    b.output("y", np.int8)
    return b.model(), b.feeds


def _check_host(model, feeds, ort_steps=1):
    import onnxruntime as ort
    lib = mtvm.compile(model)
    kinds = [o["kind"] for o in lib.metadata["operators"]]
    assert all(k == "QConv" for k in kinds), kinds
    got = lib.run_host(feeds)
    interp = interpret(lib.graph, feeds)
    for i, (name, a) in enumerate(got.items()):
        np.testing.assert_array_equal(a, interp[lib.graph.outputs[i]], err_msg=name)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for (name, a), e in zip(got.items(), sess.run(None, feeds)):
        d = np.abs(a.astype(np.int64) - e.astype(np.int64))
        assert d.max() <= ort_steps, (name, d.max())
    return lib, got


def test_depthwise_variants_match_reference():
    model, feeds = variants_model()
    lib, _ = _check_host(model, feeds)
    # every conv is the depthwise kernel; the chain's middle convs run in place
    for lk in lib.kernels:
        assert lk.kernel.node.attrs.get("folded", 1) == 0, lk.kernel.fname
    assert sum(lk.kernel.inplace is not None for lk in lib.kernels) >= 2
    # the Thumb-2 loops are emitted (2x2 stride 1, 4 pixels stride 2; int8 and uint8)
    src = "\n".join(lib.sources.values())
    for loop in ("mtvm_dw3x3s1_2x2_s8", "mtvm_dw3x3s1_2x2_u8", "mtvm_dw3x3s2_4_s8",
                 "mtvm_dw3x3s2_4_u8", "mtvm_dw5x3s2_4_s8"):
        assert loop + "_" in src, loop
    # with the layer's shift in SSAT (most) and with a per-channel shift (the spread ones)
    assert re.search(r"mtvm_dw3x3s1_2x2_s8_ssat_r\d+_w\d+_s\d+\(", src)
    assert re.search(r"mtvm_dw3x3s1_2x2_s8_ssat_r\d+_w\d+\(", src)
    assert re.search(r"mtvm_dw3x3s2_4_s8_ssat_r\d+_d1\(", src)


def test_depthwise_clamped_matches_reference():
    model, feeds = clamped_model()
    lib, got = _check_host(model, feeds)
    a = lib.kernels[0].kernel.node.attrs
    assert (a["act_min"], a["act_max"]) != (-128, 127)


@pytest.mark.parametrize("make", [variants_model, clamped_model])
def test_depthwise_sanitized(make):
    model, feeds = make()
    lib = mtvm.compile(model)
    plain, checked = lib.run_host(feeds), lib.run_host(feeds, sanitize=True)
    for k in plain:
        np.testing.assert_array_equal(checked[k], plain[k], err_msg=k)


@pytest.mark.skipif(not have("arm-none-eabi-gcc"), reason="arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("cpu,fpu", [("cortex-m4", "hard"), ("cortex-m33", "hard"),
                                     ("cortex-m3", "soft"), ("cortex-m0plus", "soft")])
def test_depthwise_compiles_strictly_for_cortex_m(cpu, fpu, tmp_path):
    import subprocess
    lib = mtvm.compile(variants_model()[0])
    src = tmp_path / "mlf"
    lib.export(str(src), force=True)
    flags = ["-mfpu=fpv4-sp-d16"] if cpu == "cortex-m4" else \
        (["-mfpu=fpv5-sp-d16"] if cpu == "cortex-m33" else [])
    subprocess.run(["arm-none-eabi-gcc", f"-mcpu={cpu}", "-mthumb", f"-mfloat-abi={fpu}", *flags,
                    "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror",
                    "-I", str(src / "codegen/host/include"), "-c",
                    str(src / "codegen/host/src/tvmgen_default_kernels.c"),
                    "-o", str(tmp_path / "k.o")], check=True)


@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="QEMU or arm-none-eabi-gcc not installed")
def test_depthwise_variants_on_mps2_an386_bit_identical(tmp_path):
    """The DSP path (Cortex-M4) equals the host's portable path byte for byte."""
    for i, make in enumerate((variants_model, clamped_model)):
        model, feeds = make()
        lib = mtvm.compile(model)
        host = lib.run_host(feeds)
        dev = run_on_board(lib, feeds, tmp_path / f"p{i}")
        assert set(dev) == set(host)
        for k in host:
            np.testing.assert_array_equal(dev[k], host[k], err_msg=k)


@pytest.mark.parametrize("target", ["x86-64-v3"])
def test_depthwise_ties_ruled_out_by_the_sums_bound_on_x86(target):
    """Multipliers from float scales have trailing zero bits, so the general test of the
    cheap requantization (no tie for any int32 sum) rejects most layers; the sums' bound
    (weights and bias are constants) rules the ties out for them, as on the DSP cores.
    Such layers take the cheap form on x86 too (the x86 plane's mode 0) and still equal
    the interpreter exactly."""
    from mtvm.ops.quantized import depthwise as dw
    model, feeds = variants_model()
    lib = mtvm.compile(model, target=target)
    by_bound = []
    for lk in lib.kernels:
        k = lk.kernel
        x, w, bias, mult, shift, w_zp = dw.operands(k)
        y_zp = int(k.node.attrs.get("y_zp", 0))
        if not dw._fast_requant(k, bias, w, w_zp, mult, shift, y_zp, x) and \
                dw.ties_ruled_out_by_bound(bias, w, w_zp, mult, shift, y_zp, x):
            by_bound.append(k.fname)
    assert len(by_bound) >= 4, by_bound
    src = "\n".join(lib.sources.values())
    for fname in by_bound:
        start = re.search(rf"\b{fname}\([^;{{]*\)\s*\{{", src).end()   # the definition
        body = src[start:src.index("\n}\n", start)]
        assert "mtvm_dw_requant_x86_t){0, mult_o" in body, fname
    got = lib.run_host(feeds)
    interp = interpret(lib.graph, feeds)
    for i, (name, a) in enumerate(got.items()):
        np.testing.assert_array_equal(a, interp[lib.graph.outputs[i]], err_msg=name)
