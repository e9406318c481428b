"""Helpers of the device tests.

Device tests: the cortex_m template on every board of boards/ (compile and
link), and firmware running under QEMU (standalone apps and host-driven
sessions over the emulator's UART pty).

Needs arm-none-eabi-gcc (+ newlib) for building and qemu-system-arm for
running; each test is skipped with the reason when a tool is missing. Models
are compiled once per test session and shared between boards and kinds."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

MODELS_DIR = os.environ.get("MTVM_MODELS_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "models")

ARM_GCC = "arm-none-eabi-gcc"
QEMU = "qemu-system-arm"


def need_gcc():
    if shutil.which(ARM_GCC) is None:
        pytest.skip(f"{ARM_GCC} not installed (apt-get install gcc-arm-none-eabi "
                    "libnewlib-arm-none-eabi)")


def need_qemu():
    need_gcc()
    if shutil.which(QEMU) is None:
        pytest.skip(f"{QEMU} not installed (apt-get install qemu-system-arm)")


def need_models():
    if not os.path.isdir(MODELS_DIR):
        pytest.skip("../shared/models not found (set MTVM_MODELS_DIR)")


def small_model_path(tmp_dir: str) -> str:
    """A small model with the common op kinds (Conv, Relu, pooling, Gemm,
    Softmax), so building it for nine boards stays fast."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 1, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal((4, 5)).astype(np.float32), "w2"),
             numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b2")]
    nodes = [helper.make_node("Conv", ["input", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["g"]),
             helper.make_node("Softmax", ["g"], ["output"], axis=1)]
    g = helper.make_graph(nodes, "small_cnn",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 8, 8])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 5])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(tmp_dir, "small_cnn.onnx")
    onnx.save(m, path)
    return path


class ModelCache:
    """Compiles each model once per test session."""

    def __init__(self, tmp_dir):
        self.tmp_dir = tmp_dir
        self.models = {}

    def path(self, name: str) -> str:
        if name == "small_cnn":
            return small_model_path(self.tmp_dir)
        need_models()
        return os.path.join(MODELS_DIR, f"{name}.onnx")

    def get(self, name: str):
        if name not in self.models:
            import mtvm
            self.models[name] = mtvm.compile(self.path(name))
        return self.models[name]

    def reference(self, name: str):
        need_models()
        with np.load(os.path.join(MODELS_DIR, f"{name}.npz")) as z:
            return z["in_0"], z["out_0"]


def quiet(msg):
    pass


def tolerance(ref) -> float:
    return 1e-4 * max(float(np.abs(ref).max()), 1.0)
