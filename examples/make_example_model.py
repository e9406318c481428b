"""Writes examples/sensor_mlp.onnx (+ sensor_mlp.npz with in_0/out_0 from
onnxruntime): a tiny classifier of a 3-axis accelerometer window
(1x3x16 -> 4 classes): Mul/Add normalization, Gemm+Relu, Gemm, Softmax.

    python examples/make_example_model.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(42)
    c = lambda name, a: numpy_helper.from_array(np.asarray(a, np.float32), name)  # noqa: E731
    inits = [c("scale", np.full((1, 3, 16), 0.5)), c("shift", np.full((1, 3, 16), -0.1)),
             c("w1", rng.standard_normal((48, 32)) * 0.2), c("b1", rng.standard_normal(32) * 0.1),
             c("w2", rng.standard_normal((32, 4)) * 0.3), c("b2", rng.standard_normal(4) * 0.1),
             numpy_helper.from_array(np.array([1, 48], np.int64), "flat")]
    nodes = [helper.make_node("Mul", ["x", "scale"], ["xs"], name="normalize_scale"),
             helper.make_node("Add", ["xs", "shift"], ["xn"], name="normalize_shift"),
             helper.make_node("Reshape", ["xn", "flat"], ["xf"], name="flatten"),
             helper.make_node("Gemm", ["xf", "w1", "b1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["hr"], name="relu1"),
             helper.make_node("Gemm", ["hr", "w2", "b2"], ["logits"], name="fc2"),
             helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1)]
    g = helper.make_graph(nodes, "sensor_mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16])],
                          [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 4])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    m = build()
    path = os.path.join(HERE, "sensor_mlp.onnx")
    onnx.save(m, path)
    x = np.random.default_rng(7).standard_normal((1, 3, 16)).astype(np.float32)
    import onnxruntime as ort
    y = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.savez(os.path.join(HERE, "sensor_mlp.npz"), in_0=x, out_0=y)
    print(f"wrote {path} and sensor_mlp.npz")


if __name__ == "__main__":
    main()
