"""A small int8 attention block built here (onnx.helper + onnxruntime's quantize_static,
int8 and uint8): LayerNormalization, Q K^T (QBatchMatMul, head dim 14: rows of 3 words and a tail), Softmax over rows
of 37, attention x V, a projection (QMatMul), a GELU (the erf form, one table after
tabulate_integer_cones). On the emulated Cortex-M4 (the Arm DSP kernels: row statistics
with USADA8/SMLAD, tables four bytes a step, the SMMLA requantization, the dot products
four groups a step) its every intermediate 8-bit tensor is the host build's, byte for
byte."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.testing import quantize_qdq, quantized_activations, run_on_board

from device_utils import need_qemu

pytestmark = pytest.mark.device

SEQ, DIM = 37, 14


def _float_block(path):
    rng = np.random.default_rng(11)

    def w(name, shape, s=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "wq"], ["q"]),
        helper.make_node("MatMul", ["n", "wk"], ["k"]),
        helper.make_node("MatMul", ["n", "wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["a"]),
        helper.make_node("MatMul", ["a", "wo"], ["o"]),
        helper.make_node("Div", ["o", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["o", "e1"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    inits = [numpy_helper.from_array((rng.random(DIM) + 0.5).astype(np.float32), "g"),
             w("b", (DIM,)), w("wq", (DIM, DIM)), w("wk", (DIM, DIM)), w("wv", (DIM, DIM)),
             w("wo", (DIM, DIM)),
             numpy_helper.from_array(np.array(np.sqrt(2), np.float32), "sqrt2"),
             numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    g = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, SEQ, DIM])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, SEQ, DIM])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("uint8", [False, True], ids=["int8", "uint8"])
def test_attention_block_on_mps2_an386_bit_identical(uint8, tmp_path):
    need_qemu()
    fp32, q = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    _float_block(fp32)
    rng = np.random.default_rng(4)
    calib = [(rng.standard_normal((1, SEQ, DIM)) * 2 + 0.5).astype(np.float32)
             for _ in range(6)]
    quantize_qdq(fp32, q, "x", calib, calib[0], uint8=uint8)
    model = onnx.load(q)
    m = onnx.shape_inference.infer_shapes(model)
    names = quantized_activations(m)
    vi = {v.name: v for v in m.graph.value_info}
    m.graph.output.extend(vi[n] for n in names if n in vi)
    feeds = {"x": calib[1]}
    host = mtvm.compile(m).run_host(feeds)
    lib = mtvm.compile(m, target="cortex-m4")
    kinds = {o["kind"] for o in lib.metadata["operators"]}
    assert {"QLayerNorm", "QBatchMatMul", "QSoftmax", "QMatMul", "QLut"} <= kinds, kinds
    src = "\n".join(lib.sources.values()) if isinstance(lib.sources, dict) else str(lib.sources)
    dsp = ("mtvm_sum_sq_", "mtvm_lut_", "mtvm_dw_requantize") + \
        (() if uint8 else ("mtvm_softmax_row_",))         # (int8 rows only)
    for kernel in dsp:
        assert kernel in src, kernel           # the Arm DSP schedules, not the portable C
    dev = run_on_board(lib, feeds, tmp_path / "proj")
    assert set(dev) == set(host) and len(host) > 5
    for k in host:
        np.testing.assert_array_equal(dev[k], host[k], err_msg=k)
