"""Loops that gcc must vectorize on an x86 host without AVX-512 (-march=x86-64-v3).

AVX-512 masks a select's arms, AVX2 does not: there a float select followed by
arithmetic (GELU's erf, LSTM gates) or a two-sided clamp before more arithmetic
(QuantizeLinear's rounding) used to leave the whole loop scalar, 8-16x slower,
while the AVX-512 build of the same C was vectorized. The generated operators'
source is compiled to assembly for AVX2 and each kernel's body must hold the
256-bit instruction only a vectorized loop would have."""
import re
import shutil
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.host_runner import _write_mlf
from mtvm.target import host_target

pytestmark = pytest.mark.skipif(not host_target().is_x86 or shutil.which("gcc") is None,
                                reason="needs gcc for x86")


def _model(nodes, inits, out_dtype):
    g = helper.make_graph(nodes, "vec", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      (1, 64, 128))],
                          [helper.make_tensor_value_info("y", out_dtype, (1, 64, 128))],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _avx2_assembly(model, tmp_path) -> dict[str, str]:
    """{kernel function: its assembly} of the operators' source built for AVX2."""
    lib = mtvm.compile(model)
    srcs = _write_mlf(lib, str(tmp_path))
    kernels = next(s for s in srcs if s.endswith("_kernels.c"))
    asm = subprocess.run(["gcc", "-std=c99", "-O3", "-march=x86-64-v3", "-S", "-o", "-",
                          "-I", str(tmp_path / "codegen/host/include"), kernels],
                         capture_output=True, text=True, check=True).stdout
    bodies = {}
    for m in re.finditer(r"^(tvmgen_default_\d+_\w+):\n(.*?)\.cfi_endproc", asm, re.S | re.M):
        bodies[m.group(1)] = m.group(2)
    assert bodies, asm[:2000]
    return bodies


def test_gelu_erf_is_vectorized_for_avx2(tmp_path):
    nodes = [helper.make_node("Div", ["x", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    inits = {"s2": np.float32(np.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5)}
    bodies = _avx2_assembly(_model(nodes, inits, TensorProto.FLOAT), tmp_path)
    erf = [b for name, b in bodies.items() if "erf" in name]
    assert erf and all(re.search(r"vdivps\s.*%ymm", b) for b in erf), list(bodies)


def test_quantize_linear_is_vectorized_for_avx2(tmp_path):
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])]
    inits = {"s": np.float32(0.02), "z": np.int8(-3)}
    bodies = _avx2_assembly(_model(nodes, inits, TensorProto.INT8), tmp_path)
    q = [b for name, b in bodies.items() if "quantize" in name]
    assert q and all(re.search(r"vcvt\w*ps2dq\s.*%ymm", b) for b in q), list(bodies)
