"""Float pointwise convolutions written over their input on the Cortex-M4 (mps2-an386):
the tile's input columns copied to scratch with one VLDMIA/VSTMIA pair a whole column
(mtvm_copy16) and mtvm_copy for the last, partial tile (a 7 x 7 plane: tiles of 4
positions and one of 1), with a ReLU6 and a residual Add fused; the outputs those of the
host build within float rounding."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.testing import assert_close, run_on_board

from device_utils import need_qemu

pytestmark = pytest.mark.device


def _model():
    rng = np.random.default_rng(0)

    def w(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32),
                                       name)
    nodes = [helper.make_node("Relu", ["x"], ["x0"]),
             helper.make_node("Conv", ["x0", "w1", "b1"], ["a"]),        # 8 -> 16, in place
             helper.make_node("Clip", ["a", "lo", "hi"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["c"]),         # 16 -> 16
             helper.make_node("Add", ["c", "r"], ["y"])]
    inits = [w("w1", (16, 8, 1, 1)), w("b1", (16,)), w("w2", (16, 16, 1, 1)), w("b2", (16,)),
             numpy_helper.from_array(np.array(0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6, np.float32), "hi")]
    g = helper.make_graph(nodes, "pointwise", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 8, 7, 7])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 16, 7, 7])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_pointwise_in_place_on_mps2_an386(tmp_path):
    need_qemu()
    model = _model()
    x = {"x": (np.random.default_rng(1).standard_normal((1, 8, 7, 7)) * 2).astype(np.float32)}
    host = mtvm.compile(model).run_host(x)["y"]
    lib = mtvm.compile(model, target="cortex-m4")
    src = "\n".join(lib.sources.values())
    assert "in place" in src and "mtvm_copy16(" in src
    dev = run_on_board(lib, x, tmp_path / "proj")["y"]
    assert_close(dev, host, rtol=1e-5, what="pointwise in place on the M4")


def _depthwise_model(cases):
    """One float depthwise Conv (+ ReLU6) per case (kernel, stride, dilation, pads) on
    the same 12-channel input."""
    rng = np.random.default_rng(2)
    nodes, inits, outs = [], [], []
    for n, (kk, st, dil, pads) in enumerate(cases):
        inits += [numpy_helper.from_array((rng.standard_normal((12, 1, kk, kk)) * 0.4)
                                          .astype(np.float32), f"w{n}"),
                  numpy_helper.from_array((rng.standard_normal(12) * 0.1).astype(np.float32),
                                          f"b{n}")]
        nodes += [helper.make_node("Conv", ["x", f"w{n}", f"b{n}"], [f"a{n}"], group=12,
                                   strides=[st, st], dilations=[dil, dil], pads=pads),
                  helper.make_node("Clip", [f"a{n}", "lo", "hi"], [f"y{n}"])]
        outs.append(f"y{n}")
    inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
              numpy_helper.from_array(np.array(6, np.float32), "hi")]
    g = helper.make_graph(nodes, "depthwise", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 12, 23, 21])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_strided_depthwise_on_mps2_an386(tmp_path):
    """Strided depthwise windows two interior columns a step on scalar FPUs (the values
    the two windows share loaded once), odd and even interior counts, dilations, 3x3 and
    5x5: the host's outputs within float rounding."""
    need_qemu()
    cases = [(3, 2, 1, [1, 1, 1, 1]), (3, 2, 1, [0, 0, 0, 0]), (5, 2, 1, [2, 2, 2, 2]),
             (3, 2, 2, [2, 2, 2, 2]), (5, 3, 1, [2, 1, 2, 1]), (3, 1, 1, [1, 1, 1, 1])]
    model = _depthwise_model(cases)
    x = {"x": (np.random.default_rng(3).standard_normal((1, 12, 23, 21)) * 2)
         .astype(np.float32)}
    host = mtvm.compile(model).run_host(x)
    lib = mtvm.compile(model, target="cortex-m4")
    assert "two a step" in "\n".join(lib.sources.values())
    dev = run_on_board(lib, x, tmp_path / "proj")
    for name in host:
        assert_close(dev[name], host[name], rtol=1e-5, what=name)
