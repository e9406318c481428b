"""QuantizeLinear (the float -> 8/16-bit edge of a quantized model) on tricky
values: exact ties, values one ulp around ties, -0.0, denormals, huge and
infinite values, NaN, saturation at both ends. The Cortex-M4 path (VCVTR + QADD
+ SSAT/USAT, mtvm/ops/quantize.py) and the portable path equal the NumPy
reference (float32 division, round half to even) bit for bit, and onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.ops.quantize import quantize_ref
from mtvm.testing import have, run_on_board

SHAPE = (1, 3, 7, 11)   # 231 elements: four per pass plus a remainder of three

# output name, zero point (its dtype is the output type), scale, per-axis
CASES = [("q_s8", np.int8(-3), np.float32(0.25), False),
         ("q_s8_odd", np.int8(7), np.float32(0.0389626398), False),
         ("q_u8", np.uint8(128), np.float32(0.5), False),
         ("q_u8_odd", np.uint8(3), np.float32(0.0173), False),
         ("q_s16", np.int16(-300), np.float32(0.001953125), False),
         ("q_u16", np.uint16(40000), np.float32(0.75), False),
         ("q_axis", np.array([-128, 0, 127], np.int8), np.array([0.25, 0.1, 3.0], np.float32),
          True)]


def tricky_values(n, rng) -> np.ndarray:
    f = np.float32
    special = [0.0, -0.0, 1e-45, -1e-45, 1.17549435e-38, -1e-30, 1e30, -1e30, np.inf, -np.inf,
               np.nan, 4194304.0, -4194304.0, 8388608.5, 2.0 ** 31, -2.0 ** 31, 3e9, -3e9,
               65535.5, -32768.5, 32767.5]
    v = [f(s) for s in special]
    # exact ties k + 1/2 for scales that are powers of two, and their neighbours
    for k in range(-140, 140, 3):
        t = f((k + 0.5) * 0.25)
        v += [t, np.nextafter(t, f(np.inf)), np.nextafter(t, f(-np.inf))]
    for k in (-129, -128, -127, 126, 127, 128, 254, 255, 256):
        t = f((k + 0.5) * 0.5)
        v += [t, np.nextafter(t, f(np.inf)), np.nextafter(t, f(-np.inf))]
    v = np.array(v, np.float32)
    rest = (rng.standard_normal(n) * 4).astype(np.float32)
    rest[:v.size] = v[:n]
    return rest[rng.permutation(n)] if v.size < n else rest


def edge_model():
    n = int(np.prod(SHAPE))
    nodes, inits, outs = [], [], []
    for name, zp, scale, axis in CASES:
        inits += [numpy_helper.from_array(np.asarray(scale), name + "_s"),
                  numpy_helper.from_array(np.asarray(zp), name + "_z")]
        kw = {"axis": 1} if axis else {}
        nodes.append(helper.make_node("QuantizeLinear", ["x", name + "_s", name + "_z"],
                                      [name], **kw))
        outs.append(helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None))
    g = helper.make_graph(nodes, "qedge", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, SHAPE)], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    m = onnx.shape_inference.infer_shapes(m)
    x = tricky_values(n, np.random.default_rng(5)).reshape(SHAPE)
    return m, {"x": x}


def expected(feeds):
    return {name: quantize_ref(feeds["x"], scale, zp, np.asarray(zp).dtype, 1)
            for name, zp, scale, _ in CASES}


def test_quantize_edge_host_matches_reference():
    model, feeds = edge_model()
    lib = mtvm.compile(model)
    ref = expected(feeds)
    for got in (lib.run_host(feeds), lib.run_host(feeds, sanitize=True)):
        for k in ref:
            np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


def test_quantize_edge_reference_matches_onnxruntime():
    import onnxruntime as ort
    model, feeds = edge_model()
    finite = {"x": np.nan_to_num(feeds["x"], nan=0.0)}   # NaN: implementation-defined
    try:
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
    except Exception as e:   # an onnxruntime without opset 21
        pytest.skip(str(e).splitlines()[0])
    ref = expected(finite)
    for (name, *_), e in zip(CASES, sess.run(None, finite)):
        np.testing.assert_array_equal(ref[name], e, err_msg=name)


@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="QEMU or arm-none-eabi-gcc not installed")
def test_quantize_edge_on_mps2_an386_bit_identical(tmp_path):
    model, feeds = edge_model()
    lib = mtvm.compile(model)
    dev = run_on_board(lib, feeds, tmp_path / "proj")
    text = open(next(p for p in (tmp_path / "proj").rglob("*_kernels.c"))).read()
    assert "mtvm_cvtr(" in text
    ref = expected(feeds)
    for k in ref:
        np.testing.assert_array_equal(dev[k], ref[k], err_msg=k)


@pytest.mark.skipif(not have("arm-none-eabi-gcc"), reason="arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("flags", [["-mcpu=cortex-m4", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
                                   ["-mcpu=cortex-m4", "-mfloat-abi=softfp",
                                    "-mfpu=fpv4-sp-d16"],
                                   ["-mcpu=cortex-m33", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"],
                                   ["-mcpu=cortex-m4", "-mfloat-abi=soft"],
                                   ["-mcpu=cortex-m3", "-mfloat-abi=soft"],
                                   ["-mcpu=cortex-m0plus", "-mfloat-abi=soft"]],
                         ids=lambda f: "_".join(x.split("=")[1] for x in f))
def test_quantize_edge_compiles_strictly(flags, tmp_path):
    """-Werror on every core; VCVTR only where there is a single-precision FPU."""
    import subprocess
    lib = mtvm.compile(edge_model()[0])
    src = tmp_path / "mlf"
    lib.export(str(src), force=True)
    obj = str(tmp_path / "k.o")
    subprocess.run(["arm-none-eabi-gcc", "-mthumb", *flags, "-O2", "-std=c99", "-Wall",
                    "-Wextra", "-Werror", "-I", str(src / "codegen/host/include"), "-c",
                    str(src / "codegen/host/src/tvmgen_default_kernels.c"), "-o", obj],
                   check=True)
    text = subprocess.run(["arm-none-eabi-objdump", "-d", obj], capture_output=True, text=True,
                          check=True).stdout
    assert ("vcvtr" in text) == ("soft" != flags[1].split("=")[1])
