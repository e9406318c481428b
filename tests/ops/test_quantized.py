"""Quantized operators: QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear,
the QOperator ops (ai.onnx ones against onnx.reference, com.microsoft ones
against onnxruntime) and the QDQ patterns the quantization pass turns into
integer kernels (against onnxruntime, which runs them as integer kernels too).

Integer results may differ from the references by one step where the exact
value is a rounding tie for one side only: the references compute the rescale
in float32 (docs/quantization.md); the tests allow that on a few elements.
"""
import re

import zlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.interp import interpret
from mtvm.testing import check_model, make_model, reference_outputs

rng = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _data_seeded_per_test(request):
    """Each test draws from its own seed, so its data (and whether an 8-bit result sits
    on a rounding tie) does not depend on which tests xdist ran before it."""
    global rng
    rng = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
MS = "com.microsoft"


def qrand(dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def zp(dtype, v=None):
    if v is None:
        v = 3 if dtype == np.int8 else 131
    return np.array(v, dtype)


def run_ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_q_close(got, expected, what="", max_frac=0.02):
    """8-bit results: at most one step apart, on at most max_frac of the elements."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, what
    d = np.abs(got.astype(np.int64) - expected.astype(np.int64))
    assert d.max(initial=0) <= 1, f"{what}: off by {d.max()} steps"
    assert np.count_nonzero(d) <= max(1, max_frac * d.size), \
        f"{what}: {np.count_nonzero(d)} of {d.size} differ"


def check_q(model, feeds, reference="ort", kinds=None, sanitize=False, **kw):
    lib = mtvm.compile(model)
    runs = [lib.run_host(feeds)]
    if sanitize:
        runs.append(lib.run_host(feeds, sanitize=True))
    expected = run_ort(model, feeds) if reference == "ort" else reference_outputs(model, feeds)
    for got in runs:
        for (name, a), e in zip(got.items(), expected):
            if a.dtype.kind == "f":
                np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6, err_msg=name)
            else:
                assert_q_close(a, e, name, **kw)
    if kinds is not None:
        assert [o["kind"] for o in lib.metadata["operators"]] == kinds
    return lib


# -- QuantizeLinear / DequantizeLinear -----------------------------------------------

@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("opset", [19, 21])
def test_quantize_per_tensor(dtype, opset):
    x = (rng.standard_normal((2, 3, 5)) * 4).astype(np.float32)
    x.flat[:6] = [0.25, 0.75, -0.25, -0.75, 1e4, -1e4]   # ties (scale 0.5) and saturation
    m = make_model("QuantizeLinear", {"x": x}, consts={"s": np.float32(0.5), "z": zp(dtype)},
                   opset=opset)
    check_model(m, {"x": x})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_quantize_dequantize_per_axis(dtype, axis):
    shape = (2, 3, 4)
    n = shape[axis]
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    scale = (rng.random(n) * 0.1 + 0.01).astype(np.float32)
    zps = qrand(dtype, n) // 4
    check_model(make_model("QuantizeLinear", {"x": x}, consts={"s": scale, "z": zps},
                           attrs={"axis": axis}, opset=19), {"x": x})
    q = qrand(dtype, shape)
    check_model(make_model("DequantizeLinear", {"q": q}, consts={"s": scale, "z": zps},
                           attrs={"axis": axis}, opset=19), {"q": q}, sanitize=axis == 0)


@pytest.mark.parametrize("opset", [11, 13])
def test_quantize_dequantize_older_opsets(opset):
    """Opset 11 (per-tensor only, default uint8) and 13 (axis): against onnxruntime."""
    x = (rng.standard_normal((3, 4)) * 2).astype(np.float32)
    m = make_model("QuantizeLinear", {"x": x}, consts={"s": np.float32(0.02)}, opset=opset)
    check_q(m, {"x": x}, max_frac=0)
    q = qrand(np.int8, (3, 4))
    m = make_model("DequantizeLinear", {"q": q},
                   consts={"s": np.float32(0.02), "z": np.int8(-3)}, opset=opset)
    check_q(m, {"q": q})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("target,n,table", [("cortex-m4", 600, True), ("cortex-m0", 512, True),
                                            ("rv32imac", 700, True), ("cortex-m4", 100, False),
                                            ("host", 600, False)])
def test_dequantize_table_on_microcontrollers(dtype, target, n, table):
    """A large per-tensor 8-bit DequantizeLinear on a microcontroller reads a 256-entry float
    table made with the loop's own float32 arithmetic: its 256 entries are the loop's
    bits (the emulated M4 runs it in the ad_autoencoder_int8 device tests, bit for bit
    with the host build)."""
    import re

    from mtvm.target import Target
    info = np.iinfo(dtype)
    q = np.resize(np.arange(info.min, info.max + 1), n).astype(dtype).reshape(1, n)
    m = make_model("DequantizeLinear", {"q": q},
                   consts={"s": np.float32(0.0371), "z": np.asarray(7, dtype)}, opset=13)
    lib = mtvm.compile(m, target=Target.resolve(target))
    ops = lib.metadata["operators"]
    assert (ops[0].get("schedule") == "dequantize_s8.table") == table, ops
    src = lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    found = re.search(r"static const float dq\[256\] = \{([^}]*)\}", src)
    assert (found is not None) == table
    if table:
        got = np.array([np.float32(float(v.strip().rstrip("f")))
                        for v in found.group(1).split(",") if v.strip()], np.float32)
        vals = np.arange(info.min, info.max + 1)
        want = (vals - 7).astype(np.float32) * np.float32(0.0371)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_dequantize_table_only_where_it_pays_for_its_flash():
    """Beside a conv of 2.4 M MACs (a decoder's), the table's 1 KiB would save 0.1 % of the
    model's instructions for far more than that of its 2 KB of weights: the loop; the
    same DequantizeLinear alone (no MACs) reads the table."""
    from mtvm.target import Target
    q = helper.make_tensor_value_info("q", TensorProto.INT8, [1, 1, 32, 32])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 64, 64])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("d", "y")]
    inits = [numpy_helper.from_array(np.float32(0.05), "s"),
             numpy_helper.from_array(np.int8(3), "z"),
             numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype(np.float32), "w")]
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "decoder", [q, x], outs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    ops = mtvm.compile(m, target=Target.resolve("cortex-m4")).metadata["operators"]
    deq = [o for o in ops if o["kind"] == "DequantizeLinear"]
    assert deq and deq[0].get("schedule") != "dequantize_s8.table", deq
    # the same, without the conv: the table
    graph = helper.make_graph(nodes[:1], "alone", [q], outs[:1], inits[:2])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    ops = mtvm.compile(m, target=Target.resolve("cortex-m4")).metadata["operators"]
    assert ops[0].get("schedule") == "dequantize_s8.table", ops


def test_dequantize_int32_bias():
    q = rng.integers(-100000, 100000, (8,)).astype(np.int32)
    m = make_model("DequantizeLinear", {"q": q},
                   consts={"s": (rng.random(8) * 1e-4).astype(np.float32),
                           "z": np.zeros(8, np.int32)}, attrs={"axis": 0}, opset=19)
    check_model(m, {"q": q})


@pytest.mark.parametrize("shape", [(7,), (2, 3, 4)])
def test_dynamic_quantize_linear(shape):
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    check_model(make_model("DynamicQuantizeLinear", {"x": x}, n_outputs=3, opset=11), {"x": x},
                sanitize=len(shape) == 1)


# -- QOperator: ai.onnx (onnx.reference) -------------------------------------------------

CONV_CASES = [  # x shape, w shape, attrs
    ((1, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 9, 7), (6, 4, 3, 2), {"strides": [2, 1], "pads": [0, 1, 2, 0]}),
    ((1, 6, 7, 7), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 4, 6, 6), (8, 2, 3, 3), {"group": 2, "dilations": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 12), (5, 3, 3), {"pads": [1, 1]}),
    ((1, 8, 5, 5), (4, 8, 1, 1), {}),
]


def qlinearconv_case(xs, ws, attrs, dtype, per_channel):
    """A QLinearConv model with random data, its input and the reference to check with."""
    x, w = qrand(dtype, xs), qrand(np.int8 if dtype == np.int8 else np.uint8, ws)
    oc = ws[0]
    w_scale = (rng.random(oc) * 0.01 + 0.002).astype(np.float32) if per_channel else \
        np.float32(0.0071)
    w_zp = np.zeros(oc, np.int8) if per_channel else np.uint8(124)
    consts = dict(xs=np.float32(0.031), xz=zp(dtype), w=w, ws=w_scale, wz=w_zp,
                  ys=np.float32(0.173), yz=zp(dtype, -7 if dtype == np.int8 else 120),
                  b=rng.integers(-3000, 3000, oc).astype(np.int32))
    m = make_model("QLinearConv", {"x": x}, consts=consts, attrs=attrs,
                   input_order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
    # onnx.reference broadcasts a per-channel scale wrongly for 1-D: onnxruntime there.
    return m, {"x": x}, "ort" if len(xs) == 3 and per_channel else "onnx"


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES, ids=range(len(CONV_CASES)))
@pytest.mark.parametrize("dtype,per_channel", [(np.int8, True), (np.uint8, False)])
def test_qlinearconv(xs, ws, attrs, dtype, per_channel):
    m, feeds, reference = qlinearconv_case(xs, ws, attrs, dtype, per_channel)
    check_q(m, feeds, reference=reference, kinds=["QConv"], sanitize=xs == (1, 3, 12))


# Shapes the int8 im2col kernel (QConv, folded=1) special-cases: odd output channel
# counts per group, odd pixel counts (a one-pixel tail), taps not a multiple of four
# (a tail of one to three taps), pointwise with channels not a multiple of four,
# border pixels (tap masks), strides, dilations, groups, windows too large to unroll.
IM2COL_CASES = [  # x shape, w shape, attrs
    ((1, 6, 9, 7), (5, 6, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 6, 9, 7), (7, 6, 1, 1), {}),
    ((1, 5, 3, 3), (3, 5, 1, 1), {}),
    ((1, 6, 9, 7), (4, 6, 3, 2), {"strides": [2, 1], "pads": [0, 1, 2, 0]}),
    ((1, 6, 9, 7), (6, 3, 3, 3), {"group": 2, "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 6, 9, 7), (3, 6, 1, 1), {"strides": [2, 2]}),
    ((1, 6, 9, 7), (4, 6, 1, 1), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 9, 7), (3, 3, 5, 5), {"pads": [2, 2, 2, 2]}),
    ((1, 2, 9, 8), (2, 2, 7, 5), {"pads": [3, 2, 3, 2], "strides": [1, 2]}),
    ((2, 2, 5, 6), (9, 2, 2, 2), {"pads": [1, 0, 0, 1]}),
    ((1, 7, 13), (5, 7, 3), {"pads": [1, 1], "dilations": [2]}),
    ((1, 1, 14, 9), (4, 1, 10, 4), {"pads": [5, 2, 5, 2], "strides": [2, 2]}),  # 40 taps
    # fewer channels than a whole number of blocks: their 25 or 50 taps unrolled
    ((1, 1, 15, 10), (6, 1, 5, 5), {"pads": [2, 2, 2, 2], "strides": [2, 2]}),
    ((1, 2, 8, 7), (3, 2, 5, 5), {"pads": [0, 1, 2, 0]}),
]


@pytest.mark.parametrize("xs,ws,attrs", IM2COL_CASES, ids=range(len(IM2COL_CASES)))
@pytest.mark.parametrize("dtype,per_channel", [(np.int8, True), (np.uint8, False)])
def test_qlinearconv_im2col_shapes(xs, ws, attrs, dtype, per_channel):
    """Against the reference, and under the address/undefined-behaviour sanitizers."""
    m, feeds, reference = qlinearconv_case(xs, ws, attrs, dtype, per_channel)
    check_q(m, feeds, reference=reference, kinds=["QConv"], sanitize=True)


@pytest.mark.parametrize("oc,kk,group", [(1, 1, 1), (5, 27, 1), (8, 16, 2), (6, 7, 3), (9, 40, 1)])
def test_conv_weight_packing_is_a_permutation(oc, kk, group):
    from mtvm.ops.quantized.conv import conv_pack_index, pack_conv_weights, unpack_conv_weights
    idx = conv_pack_index(oc, kk, group)
    assert sorted(idx.tolist()) == list(range(oc * kk))
    w = rng.integers(-128, 128, (oc, kk // group if kk % group == 0 else kk, 1)).astype(np.int8)
    np.testing.assert_array_equal(unpack_conv_weights(pack_conv_weights(w, group), group), w)


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES[:3], ids=range(3))
def test_convinteger(xs, ws, attrs):
    x, w = qrand(np.uint8, xs), qrand(np.uint8, ws)
    m = make_model("ConvInteger", {"x": x}, consts={"w": w, "xz": np.uint8(130),
                                                    "wz": np.uint8(120)},
                   attrs=attrs, input_order=["x", "w", "xz", "wz"])
    check_q(m, {"x": x}, reference="onnx", kinds=["QConv"], max_frac=0)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("ashape,bshape,per_col", [((4, 9), (9, 5), False),
                                                   ((2, 3, 16), (16, 7), True)])
def test_qlinearmatmul(dtype, ashape, bshape, per_col):
    a, b = qrand(dtype, ashape), qrand(dtype, bshape)
    n = bshape[1]
    consts = dict(sa=np.float32(0.023), za=zp(dtype), b=b,
                  sb=(rng.random(n) * 0.02 + 0.01).astype(np.float32) if per_col
                  else np.float32(0.017),
                  zb=np.full(n, zp(dtype), dtype) if per_col else zp(dtype),
                  sy=np.float32(0.37), yz=zp(dtype, -1 if dtype == np.int8 else 129))
    m = make_model("QLinearMatMul", {"a": a}, consts=consts,
                   input_order=["a", "sa", "za", "b", "sb", "zb", "sy", "yz"])
    check_q(m, {"a": a}, reference="onnx", kinds=["QMatMul"])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("ashape", [(1, 7, 12), (12,)])
def test_qlinearmatmul_by_a_vector(dtype, ashape):
    """A constant 1-D B [K] (QOperator of MatMul(x, w[K])): the product with the column
    [K][1], its axis of 1 dropped (it went to QBatchMatMul, which read K as the column
    count: 40 steps off)."""
    a, b = qrand(dtype, ashape), qrand(np.int8, (12,))
    consts = dict(sa=np.float32(0.03), za=zp(dtype), b=b, sb=np.float32(0.005),
                  zb=np.int8(0), sy=np.float32(0.03), yz=zp(dtype))
    m = make_model("QLinearMatMul", {"a": a}, consts=consts,
                   input_order=["a", "sa", "za", "b", "sb", "zb", "sy", "yz"])
    check_q(m, {"a": a}, reference="onnx", kinds=["QMatMul", "Reshape"])


def test_matmulinteger_by_a_vector():
    a, b = qrand(np.uint8, (3, 10)), qrand(np.int8, (10,))
    m = make_model("MatMulInteger", {"a": a}, consts={"b": b, "za": np.uint8(12),
                                                      "zb": np.int8(-2)},
                   input_order=["a", "b", "za", "zb"])
    check_q(m, {"a": a}, reference="onnx", kinds=["QMatMul", "Reshape"], max_frac=0)


def test_matmulinteger():
    a, b = qrand(np.uint8, (3, 4, 10)), qrand(np.int8, (10, 6))
    m = make_model("MatMulInteger", {"a": a}, consts={"b": b, "za": np.uint8(12),
                                                      "zb": np.int8(-2)},
                   input_order=["a", "b", "za", "zb"])
    check_q(m, {"a": a}, reference="onnx", kinds=["QMatMul"], max_frac=0)


def test_qlinearconv_runtime_scale_is_refused():
    x, w = qrand(np.int8, (1, 2, 4, 4)), qrand(np.int8, (2, 2, 1, 1))
    m = make_model("QLinearConv", {"x": x, "xs": np.float32(0.1)},
                   consts=dict(xz=np.int8(0), w=w, ws=np.float32(0.1), wz=np.int8(0),
                               ys=np.float32(0.1), yz=np.int8(0)),
                   input_order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"])
    with pytest.raises(mtvm.errors.UnsupportedError, match="--bind"):
        mtvm.compile(m)
    lib = mtvm.compile(m, bind={"xs": np.float32(0.1)})
    assert [o["kind"] for o in lib.metadata["operators"]] == ["QConv"]


# -- QOperator: com.microsoft (onnxruntime) -------------------------------------------------

def ms_model(op, inputs, consts, order, out_shape, out_dtype, attrs=None):
    node = helper.make_node(op, order, ["y"], domain=MS, **(attrs or {}))
    g = helper.make_graph(
        [node], op,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype)),
                                       out_shape)],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("sa,sb", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (3, 1)), ((4,), ())])
def test_qlinear_binary(op, dtype, sa, sb):
    a, b = qrand(dtype, sa), qrand(dtype, sb)
    consts = dict(sa=np.float32(0.0213), za=zp(dtype), sb=np.float32(0.0517),
                  zb=zp(dtype, -3 if dtype == np.int8 else 140),
                  sy=np.float32(0.0439 if op == "QLinearAdd" else 0.531),
                  zy=zp(dtype, 2 if dtype == np.int8 else 125))
    m = ms_model(op, {"a": a, "b": b}, consts, ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                 np.broadcast_shapes(sa, sb), dtype)
    check_q(m, {"a": a, "b": b}, kinds=["QAdd" if op == "QLinearAdd" else "QMul"],
            sanitize=sb == (3, 1) and dtype == np.int8)


UNARY_MS = [("QLinearSigmoid", {}, 1 / 256), ("QLinearLeakyRelu", {"alpha": 0.13}, 0.041),
            ("QLinearSoftmax", {"axis": -1, "opset": 13}, 1 / 256),
            ("QLinearSoftmax", {"axis": 1, "opset": 11}, 1 / 256),
            # an inner axis: in float (DQ -> Softmax -> Q), opset 13's and 11's meaning
            ("QLinearSoftmax", {"axis": 1, "opset": 13}, 1 / 256),
            ("QLinearSoftmax", {"axis": 1, "opset": 11}, 1 / 128)]


@pytest.mark.parametrize("op,attrs,ys", UNARY_MS, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qlinear_unary(op, attrs, ys, dtype):
    shape = (3, 10) if op == "QLinearSoftmax" else (2, 3, 5)
    inner = op == "QLinearSoftmax" and (attrs["opset"], ys) in ((13, 1 / 256), (11, 1 / 128)) \
        and attrs["axis"] == 1
    if inner:
        shape = (2, 4, 3)
    x = qrand(dtype, shape)
    lo = -128 if dtype == np.int8 else 0
    yz = lo if op != "QLinearLeakyRelu" else zp(dtype)
    consts = dict(sx=np.float32(0.0617), zx=zp(dtype), sy=np.float32(ys), zy=np.array(yz, dtype))
    m = ms_model(op, {"x": x}, consts, ["x", "sx", "zx", "sy", "zy"], shape, dtype, attrs)
    kind = "QSoftmax" if op == "QLinearSoftmax" else "QLut"
    if inner:
        lib = check_q(m, {"x": x}, max_frac=0.1)
        kinds = [o["kind"] for o in lib.metadata["operators"]]
        assert "Softmax" in kinds and "QSoftmax" not in kinds, kinds
        return
    # onnxruntime's QLinearSoftmax uses its own float exp table: within one step.
    check_q(m, {"x": x}, kinds=[kind], max_frac=0.1 if kind == "QSoftmax" else 0.02)


POOL_CASES = [("QLinearGlobalAveragePool", (1, 4, 5, 6), {}),
              ("QLinearAveragePool", (1, 3, 7, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
              ("QLinearAveragePool", (2, 2, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
              ("QLinearAveragePool", (1, 2, 6, 5), {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1],
                                                    "count_include_pad": 1}),
              # ceil_mode: in float (DQ -> AveragePool -> Q); with count_include_pad a window
              # past the padded input divided by the whole kernel, as onnxruntime's op does
              ("QLinearAveragePool", (1, 3, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                    "ceil_mode": 1}),
              ("QLinearAveragePool", (1, 3, 8, 7), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                    "ceil_mode": 1, "count_include_pad": 1,
                                                    "pads": [1, 0, 1, 1]})]


@pytest.mark.parametrize("op,shape,attrs", POOL_CASES, ids=range(len(POOL_CASES)))
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qlinear_pool(op, shape, attrs, dtype):
    # Data seeded per case, not from the shared generator: the outcome must not depend on
    # the order xdist runs tests in. (Averages of few taps can land within 1e-7 of a .5
    # tie; mtvm rounds the exact value, onnxruntime its float32 estimate: one step apart.)
    info = np.iinfo(dtype)
    seed = zlib.crc32(repr((op, shape, sorted(attrs.items()), np.dtype(dtype).name)).encode())
    x = np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)
    ref_attrs = {k: v for k, v in attrs.items()}
    out = mtvm.ops.get_op(op, MS).reference(x, np.float32(0.05), zp(dtype), np.float32(0.037),
                                            zp(dtype), **ref_attrs)
    consts = dict(sx=np.float32(0.05), zx=zp(dtype), sy=np.float32(0.037), zy=zp(dtype))
    m = ms_model(op, {"x": x}, consts, ["x", "sx", "zx", "sy", "zy"], out.shape, dtype, attrs)
    check_q(m, {"x": x}, kinds=["QAvgPool"] if not attrs.get("ceil_mode") else
            ["DequantizeLinear", "AveragePool", "QuantizeLinear"])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qlinear_concat(dtype):
    a, b, c = qrand(dtype, (1, 2, 3, 4)), qrand(dtype, (1, 3, 3, 4)), qrand(dtype, (1, 1, 3, 4))
    consts = dict(sy=np.float32(0.05), zy=zp(dtype), s1=np.float32(0.05), z1=zp(dtype),
                  s2=np.float32(0.031), z2=zp(dtype, 7), s3=np.float32(0.09), z3=zp(dtype))
    m = ms_model("QLinearConcat", {"a": a, "b": b, "c": c}, consts,
                 ["sy", "zy", "a", "s1", "z1", "b", "s2", "z2", "c", "s3", "z3"],
                 (1, 6, 3, 4), dtype, {"axis": 1})
    check_q(m, {"a": a, "b": b, "c": c}, kinds=["QAffine", "QAffine", "Concat"])


# -- QDQ patterns -> integer kernels ---------------------------------------------------

class QDQ:
    """Builds DQ -> float op(s) -> Q graphs with 8-bit graph inputs and outputs."""

    def __init__(self, dtype=np.int8):
        self.dtype, self.nodes, self.inits, self.inputs, self.feeds = dtype, [], [], [], {}
        self.n = 0

    def name(self, hint):
        self.n += 1
        return f"{hint}{self.n}"

    def const(self, value, hint="c"):
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def input(self, shape, scale, z=None):
        name = self.name("x")
        x = qrand(self.dtype, shape)
        self.feeds[name] = x
        self.inputs.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(self.dtype)), shape))
        return self.dq(name, scale, z)

    def dq(self, q, scale, z=None, axis=None, dtype=None):
        z = zp(dtype or self.dtype) if z is None else np.asarray(z, dtype or self.dtype)
        out = self.name("dq")
        kw = {} if axis is None else {"axis": axis}
        self.nodes.append(helper.make_node("DequantizeLinear",
                                           [q, self.const(np.asarray(scale, np.float32)),
                                            self.const(z)], [out], **kw))
        return out

    def weight(self, shape, per_channel=True, dtype=np.int8, axis=0):
        w = qrand(dtype, shape)
        n = shape[axis]
        if per_channel:
            s = (rng.random(n) * 0.01 + 0.002).astype(np.float32)
            return self.dq(self.const(w, "w"), s, np.zeros(n, dtype), axis=axis, dtype=dtype), s
        return self.dq(self.const(w, "w"), np.float32(0.0093), zp(dtype), dtype=dtype), \
            np.float32(0.0093)

    def bias(self, n, x_scale, w_scale):
        b = rng.integers(-2000, 2000, n).astype(np.int32)
        s = (np.float32(x_scale) * np.broadcast_to(w_scale, (n,))).astype(np.float32)
        return self.dq(self.const(b, "b"), s, np.zeros(n, np.int32), axis=0, dtype=np.int32)

    def op(self, op_type, inputs, **attrs):
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def q(self, x, scale, z=None):
        out = self.name("y")
        z = zp(self.dtype) if z is None else np.asarray(z, self.dtype)
        self.nodes.append(helper.make_node("QuantizeLinear",
                                           [x, self.const(np.float32(scale)), self.const(z)],
                                           [out]))
        return out

    def model(self, *outputs):
        g = helper.make_graph(self.nodes, "qdq", self.inputs,
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                               for o in outputs], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return onnx.shape_inference.infer_shapes(m)


@pytest.mark.parametrize("dtype,per_channel,act", [(np.int8, True, "Relu"),
                                                   (np.uint8, False, None),
                                                   (np.int8, True, "Clip")])
@pytest.mark.parametrize("depthwise", [False, True])
def test_qdq_conv(dtype, per_channel, act, depthwise):
    b = QDQ(dtype)
    c = 6
    x = b.input((1, c, 9, 9), 0.043)
    w, ws = b.weight((c, 1 if depthwise else c, 3, 3), per_channel,
                     np.int8 if per_channel else dtype)
    y = b.op("Conv", [x, w, b.bias(c, 0.043, ws)], pads=[1, 1, 1, 1], strides=[2, 1],
             group=c if depthwise else 1)
    if act == "Relu":
        y = b.op("Relu", [y])
    elif act == "Clip":
        y = b.op("Clip", [y, b.const(np.float32(0)), b.const(np.float32(2.5))])
    out = b.q(y, 0.071, -20 if dtype == np.int8 else 110)
    check_q(b.model(out), b.feeds, kinds=["QConv"], sanitize=act == "Clip" and depthwise)


@pytest.mark.parametrize("dtype,per_channel,act,bias", [(np.int8, True, "Relu", "int32"),
                                                        (np.uint8, False, None, "float"),
                                                        (np.int8, False, "Clip", None),
                                                        (np.int8, True, None, "float")])
@pytest.mark.parametrize("stride", [2, 3])
def test_qdq_conv_transpose_stride_sized(dtype, per_channel, act, bias, stride):
    """Kernel == stride (a U-Net's up-convolution): a pointwise QConv with Co s^2 output
    channels, then DepthToSpace; int8 weights stay int8 (per channel on axis 1)."""
    b = QDQ(dtype)
    ci, co = 5, 4
    x = b.input((1, ci, 6, 7), 0.043)
    w, ws = b.weight((ci, co, stride, stride), per_channel, np.int8 if per_channel else dtype,
                     axis=1)
    inputs = [x, w]
    if bias == "int32":
        inputs.append(b.bias(co, 0.043, ws))
    elif bias == "float":
        inputs.append(b.const((rng.standard_normal(co) * 0.3).astype(np.float32), "bf"))
    y = b.op("ConvTranspose", inputs, strides=[stride, stride])
    if act == "Relu":
        y = b.op("Relu", [y])
    elif act == "Clip":
        y = b.op("Clip", [y, b.const(np.float32(0)), b.const(np.float32(2.5))])
    out = b.q(y, 0.071, -20 if dtype == np.int8 else 110)
    check_q(b.model(out), b.feeds, kinds=["QConv", "DepthToSpace"], sanitize=stride == 3)


@pytest.mark.parametrize("x_shape,k,attrs", [
    ((1, 5, 6, 7), 3, dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
    ((1, 5, 5, 6), 4, dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 5, 4, 5), 3, dict(strides=[2, 1], pads=[0, 1, 0, 1])),
    ((1, 5, 9), 5, dict(strides=[3], pads=[1, 2])),
])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qdq_conv_transpose_phases(x_shape, k, attrs, per_channel):
    """A strided ConvTranspose with a larger kernel, padding, output padding (PyTorch's
    decoders), 1-D or 2-D: one QConv per phase, then the 8-bit interleave."""
    b = QDQ()
    ci, co = x_shape[1], 4
    x = b.input(x_shape, 0.043)
    w, ws = b.weight((ci, co) + (k,) * (len(x_shape) - 2), per_channel, axis=1)
    y = b.op("Relu", [b.op("ConvTranspose", [x, w, b.bias(co, 0.043, ws)], **attrs)])
    out = b.q(y, 0.071, -20)
    lib = check_q(b.model(out), b.feeds, sanitize=per_channel)
    kinds = [o["kind"] for o in lib.metadata["operators"]]
    phases = int(np.prod(attrs["strides"]))
    assert kinds.count("QConv") == phases and "ConvTranspose" not in kinds, kinds


def test_qdq_grouped_conv_transpose_stays_float():
    """A grouped ConvTranspose has no integer rewrite: it dequantizes."""
    b = QDQ()
    x = b.input((1, 4, 5, 5), 0.05)
    w, _ = b.weight((4, 1, 2, 2), False)
    out = b.q(b.op("ConvTranspose", [x, w], strides=[2, 2], group=2), 0.07)
    lib = check_q(b.model(out), b.feeds)
    assert "QConv" not in [o["kind"] for o in lib.metadata["operators"]]


@pytest.mark.parametrize("trans_b", [0, 1])
def test_qdq_gemm(trans_b):
    b = QDQ()
    x = b.input((3, 20), 0.05)
    w, ws = b.weight((12, 20) if trans_b else (20, 12), axis=0 if trans_b else 1)
    y = b.op("Gemm", [x, w, b.bias(12, 0.05, ws)], transB=trans_b)
    check_q(b.model(b.q(y, 0.31)), b.feeds, kinds=["QMatMul"])


@pytest.mark.parametrize("alpha,beta", [(0.5, 1.0), (1.0, 2.0), (0.5, 2.0), (1.5, 0.25)])
def test_qdq_gemm_alpha_beta(alpha, beta):
    """alpha (x w) + beta C with C's int32 scale not sx sw (onnxruntime's quantizer stores
    beta C so, beta then 1): the float bias path, alpha carried by the weight scale."""
    b = QDQ()
    x = b.input((3, 20), 0.05)
    w, ws = b.weight((12, 20), axis=0)
    bias = b.bias(12, 0.05 * 2.0, ws)        # scale 2 sx sw: not the accumulator's
    y = b.op("Gemm", [x, w, bias], transB=1, alpha=alpha, beta=beta)
    check_q(b.model(b.q(y, 0.31)), b.feeds, kinds=["QMatMul"])


def test_qdq_matmul_of_a_vector_and_an_activation_stays_float():
    """v[K] @ X[K][N], v a quantized constant and X an activation: no QBatchMatMul (it
    takes matrices: an internal error at a.shape[-2]); the float MatMul between the DQs."""
    b = QDQ()
    x = b.input((6, 5), 0.05)
    v = b.dq(b.const(qrand(np.int8, (6,)), "v"), np.float32(0.01), np.int8(0))
    m = b.model(b.q(b.op("MatMul", [v, x]), 0.11))
    lib = check_q(m, b.feeds)
    assert "QBatchMatMul" not in [o["kind"] for o in lib.metadata["operators"]]


def test_qdq_matmul_3d():
    b = QDQ(np.uint8)
    x = b.input((2, 4, 16), 0.02)
    w, _ = b.weight((16, 5), per_channel=False, dtype=np.uint8)
    check_q(b.model(b.q(b.op("MatMul", [x, w]), 0.11)), b.feeds, kinds=["QMatMul"])


@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_qdq_add_mul_relu(op):
    b = QDQ()
    x1, x2 = b.input((2, 4, 3, 3), 0.037), b.input((1, 4, 1, 1), 0.081, 5)
    y = b.op("Relu", [b.op(op, [x1, x2])])
    check_q(b.model(b.q(y, 0.06 if op == "Add" else 0.4, -128)), b.feeds,
            kinds=["Q" + op])


@pytest.mark.parametrize("op", ["Add", "Mul"])
@pytest.mark.parametrize("dtype,first,act", [(np.int8, False, None), (np.uint8, True, "Relu"),
                                             (np.int8, True, "Relu")])
def test_qdq_add_mul_by_a_scalar_is_onnxruntimes_table(op, dtype, first, act):
    """x op c, c one quantized constant (a GELU's 1 + erf, a scale; either side): a QLut
    tabulated as onnxruntime computes DQ -> op -> Q in float32, so every one of the 256
    inputs gives onnxruntime's byte (the integer QAdd/QMul rounded once, a step apart on
    some)."""
    b = QDQ(dtype)
    info = np.iinfo(dtype)
    x = b.input((1, 256), 0.0371, 3 if dtype == np.int8 else 131)
    b.feeds[next(iter(b.feeds))] = np.arange(info.min, info.max + 1).astype(dtype).reshape(1, 256)
    c = b.dq(b.const(np.asarray(77 if op == "Add" else 101, dtype)), 0.0133,
             -5 if dtype == np.int8 else 120)
    y = b.op(op, [c, x] if first else [x, c])
    if act:
        y = b.op(act, [y])
    m = b.model(b.q(y, 0.0291 if op == "Add" else 0.0573))
    lib = mtvm.compile(m)
    assert [o["kind"] for o in lib.metadata["operators"]] == ["QLut"]
    got = list(lib.run_host(b.feeds).values())[0]
    opts = ort.SessionOptions()     # the float chain itself (no QLinearAdd/Mul fusion)
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(m.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"]).run(None, b.feeds)[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op,attrs,entries", [
    ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]), 10),
    ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1), 1),
    ("AveragePool", dict(kernel_shape=[2, 3], strides=[2, 1]), 1),
    ("GlobalAveragePool", {}, 1),
    ("ReduceMean", dict(axes=[2, 3], keepdims=0), 1)])
def test_qdq_average(op, attrs, entries):
    """One multiplier per count a window can have, or a single one where every window
    counts all its taps (padding counted, or none)."""
    b = QDQ()
    x = b.input((1, 5, 7, 6), 0.05)
    lib = check_q(b.model(b.q(b.op(op, [x], **attrs), 0.021)), b.feeds, kinds=["QAvgPool"])
    node = next(n for n in lib.graph.nodes if n.op == "QAvgPool")
    assert lib.graph.const(node.inputs[1]).size == entries


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("shape,axes,keepdims,opset", [
    ((1, 9, 12), [1], 0, 17),           # a transformer's mean over the sequence
    ((1, 9, 12), [-2], 1, 17),
    ((2, 5, 3, 4), [1, 2], 1, 17),      # contiguous middle axes, batch 2
    ((1, 7, 6), None, 1, 17),           # all axes
    ((1, 9, 12), [1], 0, 18)])          # axes as an input
def test_qdq_reduce_mean_other_axes(dtype, shape, axes, keepdims, opset):
    """A ReduceMean over contiguous axes other than the trailing spatial ones is an
    average pool over a view of the tensor ([1, before, reduced, after], a window of
    reduced x 1), in 8 bits: no float tensor, within a step of onnxruntime."""
    b = QDQ(dtype)
    x = b.input(shape, 0.05)
    attrs = dict(keepdims=keepdims)
    ins = [x]
    if axes is not None and opset >= 18:
        ins.append(b.const(np.array(axes, np.int64)))
    elif axes is not None:
        attrs["axes"] = axes
    m = b.model(b.q(b.op("ReduceMean", ins, **attrs), 0.021))
    if opset != 17:
        m.opset_import[0].version = opset
        m = onnx.shape_inference.infer_shapes(m)
    lib = check_q(m, b.feeds)
    kinds = [o["kind"] for o in lib.metadata["operators"]]
    assert "QAvgPool" in kinds and "DequantizeLinear" not in kinds, kinds


def test_qdq_same_scale_ops_stay_8bit():
    """MaxPool, Transpose, Reshape between equal scales: no requantization at all."""
    b = QDQ()
    x = b.input((1, 4, 6, 6), 0.05)
    y = b.q(b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2]), 0.05)
    y = b.q(b.op("Transpose", [b.dq(y, 0.05)], perm=[0, 2, 3, 1]), 0.05)
    y = b.q(b.op("Reshape", [b.dq(y, 0.05), b.const(np.array([1, -1], np.int64))]), 0.05)
    lib = check_q(b.model(y), b.feeds, max_frac=0)
    kinds = [o["kind"] for o in lib.metadata["operators"]]
    assert kinds[:2] == ["QMaxPool", "Transpose"] and "DequantizeLinear" not in kinds


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qdq_gather_and_slice_stay_8bit(dtype):
    """An attention block's split of its fused Q/K/V projection: one DQ read by three
    Gathers (scalar index, as torch exports q, k, v = qkv[0], qkv[1], qkv[2]), each
    into a Q of the same scale; and Slices (steps, negative bounds) and Gathers (index
    vectors, negative indices, another axis) alike. All of them move the 8-bit bytes:
    no DequantizeLinear or QuantizeLinear is left."""
    b = QDQ(dtype)
    qkv = b.input((3, 2, 5, 4), 0.05)
    outs = [b.q(b.op("Gather", [qkv, b.const(np.array(i, np.int64))], axis=0), 0.05)
            for i in range(3)]
    x = b.input((2, 6, 8), 0.03, 3)
    outs.append(b.q(b.op("Gather", [x, b.const(np.array([[5, -1], [0, 2]], np.int64))],
                         axis=2), 0.03, 3))
    outs.append(b.q(b.op("Slice", [x, b.const(np.array([1, -1], np.int64)),
                                   b.const(np.array([-1, 0], np.int64)),
                                   b.const(np.array([1, 2], np.int64)),
                                   b.const(np.array([2, -3], np.int64))]), 0.03, 3))
    lib = check_q(b.model(*outs), b.feeds, max_frac=0)
    kinds = [o["kind"] for o in lib.metadata["operators"]]
    assert kinds.count("Gather") == 4 and kinds.count("Slice") == 1, kinds
    assert "DequantizeLinear" not in kinds and "QuantizeLinear" not in kinds, kinds


def test_qdq_gather_between_different_scales_stays_float():
    """A Gather whose Q has another scale than its DQ is not a byte move: it stays float
    between them (and is still right)."""
    b = QDQ()
    x = b.input((4, 6), 0.05)
    y = b.q(b.op("Gather", [x, b.const(np.array([3, 0], np.int64))], axis=0), 0.07)
    lib = check_q(b.model(y), b.feeds)
    assert "DequantizeLinear" in [o["kind"] for o in lib.metadata["operators"]]


def test_qdq_concat_requantizes_only_where_scales_differ():
    b = QDQ()
    x1, x2 = b.input((1, 2, 4, 4), 0.05), b.input((1, 3, 4, 4), 0.09, -4)
    y = b.q(b.op("Concat", [x1, x2], axis=1), 0.05)
    check_q(b.model(y), b.feeds, kinds=["QAffine", "Concat"])


@pytest.mark.parametrize("op,attrs,ys,yz", [("Sigmoid", {}, 1 / 256, -128),
                                             ("LeakyRelu", {"alpha": 0.2}, 0.04, 0),
                                             ("Tanh", {}, 1 / 128, 0)])
def test_qdq_unary_lut(op, attrs, ys, yz):
    b = QDQ()
    x = b.input((2, 3, 8), 0.047)
    check_q(b.model(b.q(b.op(op, [x], **attrs), ys, yz)), b.feeds, kinds=["QLut"])


@pytest.mark.parametrize("chain", ["gelu_erf", "scaled_sigmoid", "const_minus_x_tanh"])
def test_qdq_chains_with_scalar_operands_are_one_lut(chain):
    """DequantizeLinear -> ops of x and one-element constants -> QuantizeLinear (a GELU's
    x / sqrt(2) -> Erf; Mul by a scalar, then Sigmoid; 1 - x, then Tanh) is one table,
    whatever else reads the dequantized x (here: the output's second term)."""
    b = QDQ()
    x = b.input((2, 3, 8), 0.047)
    c = b.const(np.array(1.4142135, np.float32))
    if chain == "gelu_erf":
        y = b.op("Erf", [b.op("Div", [x, c])])
    elif chain == "scaled_sigmoid":
        y = b.op("Sigmoid", [b.op("Mul", [c, x])])
    else:
        y = b.op("Tanh", [b.op("Sub", [b.const(np.array([1.0], np.float32)), x])])
    y = b.q(y, 1 / 128, 0)
    out = b.q(b.op("Add", [b.dq(y, 1 / 128, 0), x]), 0.06)
    # the table's output as onnxruntime's float chain gives it; the QAdd within a step
    lib = check_q(b.model(y, out), b.feeds, kinds=["QLut", "QAdd"], max_frac=0.1)
    np.testing.assert_array_equal(list(lib.run_host(b.feeds).values())[0],
                                  run_ort(b.model(y, out), b.feeds)[0])


def test_qdq_chain_with_a_per_channel_operand_is_no_lut():
    """A constant of more than one element makes the chain no function of x alone."""
    b = QDQ()
    x = b.input((1, 3, 8), 0.047)
    c = b.const(np.array([1.0, 2.0, 3.0], np.float32).reshape(1, 3, 1))
    lib = check_q(b.model(b.q(b.op("Erf", [b.op("Div", [x, c])]), 1 / 128, 0)), b.feeds,
                  max_frac=0.05)
    assert "QLut" not in [o["kind"] for o in lib.metadata["operators"]]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("shape,axis,bias,relu", [((2, 5, 16), -1, True, False),
                                                  ((3, 4, 6), -2, False, False),
                                                  ((1, 7, 32), 2, True, True),
                                                  ((4, 1), -1, True, False),
                                                  ((2, 400), -1, True, False)])
def test_qdq_layernorm_in_8_bits(dtype, shape, axis, bias, relu):
    """DequantizeLinear -> LayerNormalization (-> Relu) -> QuantizeLinear is one QLayerNorm:
    within a step of onnxruntime, the same integers as its NumPy model, and the LLVM
    backend's the same as the C's (rows of 400: the variance numerator in int64)."""
    b = QDQ(dtype)
    x = b.input(shape, 0.043, 3)
    norm = shape[axis:] if axis >= 0 else shape[len(shape) + axis:]
    ins = [x, b.const((rng.random(norm) + 0.5).astype(np.float32))]
    if bias:
        ins.append(b.const((rng.standard_normal(norm) * 0.3).astype(np.float32)))
    y = b.op("LayerNormalization", ins, axis=axis, epsilon=1e-5)
    if relu:
        y = b.op("Relu", [y])
    model = b.model(b.q(y, 0.021, -128 if dtype == np.int8 and relu else None))
    lib = check_q(model, b.feeds, kinds=["QLayerNorm"], sanitize=True, max_frac=0.05)
    got = list(lib.run_host(b.feeds).values())[0]
    np.testing.assert_array_equal(got, list(interpret(lib.graph, b.feeds).values())[0])
    llvm = mtvm.compile(model, backend="llvm")
    np.testing.assert_array_equal(list(llvm.run_host(b.feeds).values())[0], got)


def test_qdq_layernorm_with_its_statistics_used_stays_float():
    """A LayerNormalization whose Mean output is read elsewhere is not rewritten."""
    b = QDQ()
    x = b.input((2, 8), 0.05)
    out, mean = b.name("ln"), b.name("mean")
    b.nodes.append(helper.make_node("LayerNormalization", [x, b.const(np.ones(8, np.float32))],
                                    [out, mean], axis=-1))
    lib = mtvm.compile(b.model(b.q(out, 0.02), mean))
    assert "QLayerNorm" not in [o["kind"] for o in lib.metadata["operators"]]


def test_qdq_batchnorm_affine():
    b = QDQ()
    c = 5
    x = b.input((2, c, 3, 3), 0.05)
    consts = [b.const(v.astype(np.float32)) for v in
              (rng.random(c) + 0.5, rng.standard_normal(c), rng.standard_normal(c) * 0.3,
               rng.random(c) + 0.2)]
    y = b.op("BatchNormalization", [x] + consts)
    check_q(b.model(b.q(y, 0.07)), b.feeds, kinds=["QAffine"])


def test_qdq_with_an_infinite_scale_stays_float():
    """onnxruntime's quantizer gives a tensor holding -inf (a causal mask through Where) an
    infinite scale: no integer kernel (the int8 Softmax's table divided by zero on the host,
    SIGFPE); the float ops compute what onnxruntime does."""
    x = (rng.standard_normal((1, 2, 6, 6))).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(np.inf, np.float32), "s_inf"),
             numpy_helper.from_array(np.array(0, np.uint8), "z"),
             numpy_helper.from_array(np.array(1 / 255, np.float32), "ys")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_inf", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s_inf", "z"], ["xd"]),
             helper.make_node("Softmax", ["xd"], ["p"], axis=-1),
             helper.make_node("QuantizeLinear", ["p", "ys", "z"], ["pq"]),
             helper.make_node("DequantizeLinear", ["pq", "ys", "z"], ["y"])]
    g = helper.make_graph(nodes, "inf_scale", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(x.shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, list(x.shape))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    lib = mtvm.compile(m)
    assert "QSoftmax" not in [o["kind"] for o in lib.metadata["operators"]]
    np.testing.assert_array_equal(lib.run_host({"x": x})["y"], run_ort(m, {"x": x})[0])


def test_qdq_softmax():
    b = QDQ()
    x = b.input((4, 10), 0.1)
    check_q(b.model(b.q(b.op("Softmax", [x], axis=-1), 1 / 256, -128)), b.feeds,
            kinds=["QSoftmax"], max_frac=0.05)


@pytest.mark.parametrize("d,sx,sy", [(10, 0.1, 1 / 256), (50, 0.02, 1 / 256), (3, 0.5, 1 / 128),
                                     (257, 0.05, 1 / 256), (1000, 0.01, 1 / 1024),
                                     (10, 0.1, 1 / 32768)])   # the 64-bit division
def test_qsoftmax_c_is_bit_exact_with_its_model(d, sx, sy):
    """The per-element division (through the row sum's reciprocal on x86-64 where
    softmax_recip_ok allows it, else one 32-bit one where the shifted numerator fits,
    else the 64-bit one) gives exactly QSoftmax.reference's integers, portable and
    -march=native."""
    from mtvm.host_runner import HostModule
    b = QDQ()
    x = b.input((3, d), sx)
    lib = mtvm.compile(b.model(b.q(b.op("Softmax", [x], axis=-1), sy, -128)))
    assert "QSoftmax" in [o["kind"] for o in lib.metadata["operators"]]
    recip = "mtvm_div_recip_u32" in lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    assert recip == (sy > 1 / 4096)      # the largest scale: quotients up to 2^15
    expected = interpret(lib.graph, b.feeds)
    for extra in ([], ["-march=native"]):
        got = HostModule(lib, opt="-O3", extra=extra).run(b.feeds)
        for (name, a), e in zip(got.items(), expected.values()):
            np.testing.assert_array_equal(a, e, err_msg=f"{name} {extra}")


@pytest.mark.parametrize("d,sx,sy,table", [
    (6, 0.05, 1 / 256, np.uint16), (24, 0.1, 1 / 256, np.uint16), (25, 0.1, 1 / 256, np.uint32),
    (12, 0.3, 1 / 128, np.uint16), (10, 0.1, 1 / 4096, np.uint32)])
def test_short_softmax_rows_take_a_uint16_table_within_a_tenth_of_a_step(d, sx, sy, table):
    """Rows short enough (softmax_bits: (d + 1) 2^-16 at most a tenth of an output step) take
    a 15-bit table of uint16 (half the flash): over 400 random rows every output is within
    0.6 of a step of the exact probability (rounding's half step and the table's tenth), and
    the C (portable, and the M4's DSP schedule declines uint16 tables) equals
    QSoftmax.reference."""
    from mtvm.interp import interpret
    b = QDQ()
    x = b.input((400, d), sx)
    lib = mtvm.compile(b.model(b.q(b.op("Softmax", [x], axis=-1), sy, -128)))
    tables = [lib.graph.tensors[n.inputs[1]].data for n in lib.graph.nodes if n.op == "QSoftmax"]
    assert len(tables) == 1 and tables[0].dtype == table
    got = lib.run_host(b.feeds)
    want = interpret(lib.graph, b.feeds)
    for (name, a), e in zip(got.items(), want.values()):
        np.testing.assert_array_equal(a, e, err_msg=name)
    xs = next(iter(b.feeds.values())).astype(np.float64) * sx
    p = np.exp(xs - xs.max(axis=1, keepdims=True))
    exact = p / p.sum(axis=1, keepdims=True) / sy - 128
    y = next(iter(got.values())).astype(np.float64)
    inside = (exact > -128.5) & (exact < 127.5)             # not clamped
    assert np.max(np.abs(y - exact)[inside]) <= 0.6


def test_qdq_float_fallback_is_reported():
    """An op with no integer kernel runs in float between its DQ and Q, reported."""
    b = QDQ()
    x = b.input((1, 3, 4, 4), 0.05)
    scale = b.const(np.ones(3, np.float32))
    bias = b.const(np.zeros(3, np.float32))
    y = b.q(b.op("InstanceNormalization", [x, scale, bias]), 0.02)
    lib = check_q(b.model(y), b.feeds)
    kinds = [o["kind"] for o in lib.metadata["operators"]]
    assert kinds == ["DequantizeLinear", "InstanceNormalization", "QuantizeLinear"]
    fallback = lib.metadata["quantization"]["float_fallback"]
    assert len(fallback) == 1 and fallback[0].startswith('InstanceNormalization "')
    assert "run in float" in lib.metadata["notes"][0]


def test_interp_matches_c_bit_exactly():
    """The NumPy references of the integer kernels are the kernels' exact model."""
    b = QDQ()
    x = b.input((1, 4, 8, 8), 0.043)
    w, ws = b.weight((8, 4, 3, 3))
    y = b.q(b.op("Relu", [b.op("Conv", [x, w, b.bias(8, 0.043, ws)], pads=[1, 1, 1, 1])]), 0.02)
    x2 = b.dq(y, 0.02)
    y2 = b.q(b.op("GlobalAveragePool", [x2]), 0.011)
    lib = mtvm.compile(b.model(y2))
    from mtvm.interp import interpret
    got = lib.run_host(b.feeds)
    for (k, a), e in zip(got.items(), interpret(lib.graph, b.feeds).values()):
        np.testing.assert_array_equal(a, e, err_msg=k)


def test_qdq_matmul_of_two_activations():
    b = QDQ()
    x1, x2 = b.input((2, 3, 5, 8), 0.05), b.input((3, 8, 4), 0.07, -2)
    check_q(b.model(b.q(b.op("MatMul", [x1, x2]), 0.4)), b.feeds, kinds=["QBatchMatMul"],
            sanitize=True)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("ashape,bshape,zps", [
    ((2, 4, 6), (2, 6, 3), (3, 3)),          # fewer columns than one block of four
    ((2, 3, 5, 17), (2, 3, 17, 9), (3, -5)),  # attention Q K^T: two blocks + one
    ((1, 3, 7, 4), (2, 1, 4, 8), (0, 2)),     # broadcast batch dims, b_zp only
    ((3, 1, 9), (9, 5), (4, 0)),              # a 2-D b: a_zp only
    ((4, 1), (1, 4), (0, 0))])                # K = 1, symmetric
def test_qlinearmatmul_runtime_b(dtype, ashape, bshape, zps):
    """QBatchMatMul: b's block transposed into scratch, dot products four columns
    at a time, the zero points' terms per row and column."""
    a, bb = qrand(dtype, ashape), qrand(dtype, bshape)
    za, zb = (v if dtype == np.int8 else v + 128 for v in zps)
    consts = dict(sa=np.float32(0.023), za=zp(dtype, za), sb=np.float32(0.019),
                  zb=zp(dtype, zb), sy=np.float32(0.27), yz=zp(dtype))
    m = make_model("QLinearMatMul", {"a": a, "b": bb}, consts=consts,
                   input_order=["a", "sa", "za", "b", "sb", "zb", "sy", "yz"])
    check_q(m, {"a": a, "b": bb}, reference="onnx", kinds=["QBatchMatMul"])


# -- the ONNX backend node cases of these operators ---------------------------------------

BACKEND_OPS = ("quantizelinear", "dequantizelinear", "dynamicquantizelinear", "qlinearconv",
               "qlinearmatmul", "convinteger", "matmulinteger")
# float8 / 4-bit / 2-bit types and blocked quantization are not supported (docs/quantization.md)
UNSUPPORTED = re.compile(r"e4m3|e5m2|int4|uint4|int2|uint2|float4|blocked")
# operands that are parameters (scales, zero points, weights): bound as constants
DATA_INPUTS = {"qlinearmatmul": ("a", "b"), "matmulinteger": ("A", "B")}


def _backend_cases():
    """The onnx package's node cases of these operators (their case modules only:
    collect_testcases() would generate every operator's cases, ~30 s)."""
    import importlib
    import onnx.backend.test.case.node as node_cases
    for m in BACKEND_OPS:
        importlib.import_module(f"onnx.backend.test.case.node.{m}")
    return {c.name: c for c in node_cases._NodeTestCases
            if c.name[len("test_"):].split("_")[0] in BACKEND_OPS
            and not UNSUPPORTED.search(c.name) and not c.name.endswith("_expanded")}


BACKEND_CASES = _backend_cases()


@pytest.mark.parametrize("case", sorted(BACKEND_CASES))
def test_backend_node_case(case):
    model, data_sets = BACKEND_CASES[case].model, BACKEND_CASES[case].data_sets
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset < 11:   # mtvm reads opset >= 11; these operators are unchanged since 10
        model = onnx.version_converter.convert_version(model, 11)
    op = case[len("test_"):].split("_")[0]
    names = [i.name for i in model.graph.input]
    data = DATA_INPUTS.get(op, names if op == "dynamicquantizelinear" else names[:1])
    for inputs, outputs in data_sets:
        feeds = dict(zip(names, inputs))
        lib = mtvm.compile(model, bind={k: v for k, v in feeds.items() if k not in data})
        got = lib.run_host({k: v for k, v in feeds.items() if k in data})
        for a, e in zip(got.values(), outputs):
            e = np.asarray(e)
            if e.dtype.kind == "f":
                np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)
            else:
                np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("dtype,float_out,trans_b,trans_a", [
    (np.uint8, False, 1, 0), (np.int8, False, 0, 0), (np.uint8, True, 1, 0),
    (np.int8, False, 1, 1), (np.uint8, True, 0, 1)])    # transA: a Transpose of A's bytes
def test_qgemm(dtype, float_out, trans_b, trans_a):
    a = qrand(dtype, (10, 3) if trans_a else (3, 10))
    b = qrand(np.int8 if dtype == np.int8 else np.uint8, (7, 10) if trans_b else (10, 7))
    consts = dict(sa=np.float32(0.021), za=zp(dtype), b=b, sb=np.float32(0.013),
                  zb=zp(b.dtype.type, 0 if dtype == np.int8 else 127),
                  c=rng.integers(-500, 500, 7).astype(np.int32))
    order = ["a", "sa", "za", "b", "sb", "zb", "c"]
    if not float_out:
        consts.update(sy=np.float32(0.29), zy=zp(dtype))
        order += ["sy", "zy"]
    m = ms_model("QGemm", {"a": a}, consts, order, (3, 7), np.float32 if float_out else dtype,
                 {"transB": trans_b, "alpha": 0.5, "transA": trans_a})
    kinds = ["QMatMul", "DequantizeLinear"] if float_out else ["QMatMul"]
    check_q(m, {"a": a}, kinds=(["Transpose"] if trans_a else []) + kinds)


def test_io_quantization_in_metadata():
    """8-bit model inputs and outputs carry their scale and zero point in metadata.json."""
    b = QDQ(np.uint8)
    x = b.input((1, 4, 5, 5), 0.043, 120)
    w, ws = b.weight((3, 4, 1, 1))
    y = b.q(b.op("Conv", [x, w, b.bias(3, 0.043, ws)]), 0.07, 99)
    lib = mtvm.compile(b.model(y))
    q_in = lib.metadata["inputs"][0]["quantization"]
    q_out = lib.metadata["outputs"][0]["quantization"]
    assert q_in["zero_point"] == [120] and abs(q_in["scale"][0] - 0.043) < 1e-7
    assert q_out["zero_point"] == [99] and abs(q_out["scale"][0] - 0.07) < 1e-7
    m, feeds = ms_model("QLinearSigmoid", {"x": qrand(np.int8, (4,))},
                        dict(sx=np.float32(0.1), zx=np.int8(2), sy=np.float32(1 / 256),
                             zy=np.int8(-128)), ["x", "sx", "zx", "sy", "zy"], (4,),
                        np.int8), None
    md = mtvm.compile(m).metadata
    assert md["inputs"][0]["quantization"]["zero_point"] == [2]
    assert md["outputs"][0]["quantization"]["zero_point"] == [-128]


# Block counts (kk // 4) the x86 host path of the im2col kernel splits into steps of
# four (AVX-512 VNNI), two (AVX2) and one block: 1, 2, 3, 5, 7 and 8 blocks, with and
# without tail taps, odd pixel and channel counts, groups.
X86_CASES = IM2COL_CASES + [  # x shape, w shape, attrs
    ((1, 4, 5, 3), (3, 4, 1, 1), {}),                        # 1 block, 15 pixels
    ((1, 8, 4, 4), (6, 8, 1, 1), {}),                        # 2 blocks
    ((1, 12, 3, 5), (5, 12, 1, 1), {}),                      # 3
    ((1, 20, 5, 5), (4, 20, 1, 1), {}),                      # 5, 25 pixels
    ((1, 7, 6, 6), (9, 7, 2, 2), {"pads": [1, 1, 0, 0]}),    # 7 blocks
    ((1, 8, 6, 5), (4, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),   # 9 blocks per group
    ((1, 32, 4, 3), (5, 32, 1, 1), {}),                      # 8 blocks
    ((1, 33, 3, 3), (2, 33, 1, 1), {}),                      # 8 blocks and one tail tap
    ((1, 3, 6, 5), (8, 3, 3, 3), {"pads": [1, 1, 1, 1]}),    # 27 taps: a tail of 3
    ((1, 5, 4, 3), (4, 5, 1, 1), {}),                        # a tail of 1
    # rows of eight pixels or more: the direct KxK path (direct_x86) where the weights
    # are symmetric (int8); a full tile and an overlapping last one, padding at both ends
    ((1, 6, 6, 12), (5, 6, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 5, 5, 19), (4, 5, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),   # odd channels
    ((1, 4, 6, 20), (6, 2, 3, 5), {"group": 2, "dilations": [1, 2], "pads": [1, 4, 1, 4]}),
    ((1, 3, 5, 10), (8, 3, 1, 3), {}),                       # exactly one tile
    ((1, 3, 3, 16), (6, 3, 3, 3), {"pads": [1, 1, 1, 1]}),   # one pair of tiles
    ((1, 5, 3, 37), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}),   # two pairs, then a last tile
    ((1, 7, 30), (5, 7, 3), {"strides": [2], "pads": [1, 1]}),
    # one input channel a group (int8: the direct path): pairs of taps
    # (mtvm_conv_tile8_taps_x86), 40 (a keyword-spotting stem, stride 2), 25 and 27 (an
    # odd last pair), dilation, 1-D, two groups of one channel
    ((1, 1, 49, 40), (8, 1, 10, 4), {"strides": [2, 2], "pads": [4, 1, 4, 1]}),
    ((1, 1, 12, 16), (8, 1, 5, 5), {"pads": [2, 2, 2, 2]}),
    ((1, 1, 14, 20), (6, 1, 3, 9), {"dilations": [2, 1], "pads": [2, 4, 2, 4]}),
    ((1, 1, 40), (6, 1, 27), {"strides": [2], "pads": [13, 13]}),
    ((1, 2, 12, 16), (16, 1, 7, 7), {"group": 2, "pads": [3, 3, 3, 3]}),
]


def _native_builds():
    import platform
    if platform.machine() not in ("x86_64", "AMD64"):
        return [["-march=native"]]
    return [["-march=native"], ["-mavx2"], []]   # AVX-512 VNNI (here), AVX2, portable


@pytest.mark.parametrize("xs,ws,attrs", X86_CASES, ids=range(len(X86_CASES)))
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_im2col_x86_paths_bit_exact(xs, ws, attrs, dtype, monkeypatch):
    """The im2col kernel built for the host's SIMD (AVX-512 VNNI, AVX2) and portable
    gives exactly QConv.reference's integers (the IR interpreter); uint8 with weight
    zero points. One case also under ASan/UBSan with -march=native."""
    from mtvm import host_runner
    from mtvm.host_runner import HostModule
    from mtvm.interp import interpret
    m, feeds, _ = qlinearconv_case(xs, ws, attrs, dtype, per_channel=dtype == np.int8)
    x = feeds["x"]
    lib = mtvm.compile(m)
    assert [o["kind"] for o in lib.metadata["operators"]] == ["QConv"]
    expected = list(interpret(lib.graph, {"x": x}).values())[-1]
    for extra in _native_builds():
        got = list(HostModule(lib, opt="-O3", extra=extra).run({"x": x}).values())[0]
        np.testing.assert_array_equal(got, expected, err_msg=str(extra))
    if ws in ((5, 6, 3, 3), (9, 7, 2, 2), (2, 2, 7, 5), (8, 3, 3, 3), (4, 5, 1, 1),
              (7, 5, 3, 3), (8, 1, 10, 4), (6, 1, 3, 9)):
        monkeypatch.setattr(host_runner, "SANITIZE_FLAGS",
                            host_runner.SANITIZE_FLAGS + ["-march=native"])
        got = list(lib.run_host({"x": x}, sanitize=True).values())[0]
        np.testing.assert_array_equal(got, expected, err_msg="sanitized, -march=native")


@pytest.mark.parametrize("xs,ws,spread", [
    ((1, 8, 7, 7), (16, 8, 1, 1), False),     # 49 positions: a partial tile of one
    ((1, 7, 5, 4), (6, 7, 1, 1), True),       # odd input channels, 6 = 4 + 2 outputs
    ((1, 33, 3, 11), (5, 33, 1, 1), True),    # a tail tap, one odd channel
    ((1, 12, 4, 8), (10, 6, 1, 1), False),    # groups of 5 outputs
])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_pointwise_x86_direct_bit_exact(xs, ws, spread, dtype, monkeypatch):
    """The x86 paths of pointwise convs not written in place (16 positions per vector on
    AVX-512, 8 on AVX2, weights rebuilt from the packed rows): native, AVX2-only and
    portable builds equal QConv.reference; symmetric int8 weights, one shift or one per
    channel. The partial tiles (masked, overlapping) also under ASan/UBSan."""
    from mtvm import host_runner
    from mtvm.host_runner import HostModule
    from mtvm.interp import interpret
    x, w = qrand(dtype, xs), qrand(np.int8, ws)
    oc = ws[0]
    w_scale = (rng.random(oc) * (0.05 if spread else 0.002) + 0.002).astype(np.float32)
    consts = dict(xs=np.float32(0.031), xz=zp(dtype), w=w, ws=w_scale, wz=np.zeros(oc, np.int8),
                  ys=np.float32(0.173), yz=zp(dtype, -7 if dtype == np.int8 else 120),
                  b=rng.integers(-3000, 3000, oc).astype(np.int32))
    attrs = {"group": xs[1] // ws[1]} if xs[1] != ws[1] else {}
    m = make_model("QLinearConv", {"x": x}, consts=consts, attrs=attrs,
                   input_order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
    lib = mtvm.compile(m)
    src = next(t for p, t in lib.sources.items() if p.endswith("_kernels.c"))
    assert "see pointwise_x86" in src
    expected = list(interpret(lib.graph, {"x": x}).values())[-1]
    for extra in _native_builds():
        got = list(HostModule(lib, opt="-O3", extra=extra).run({"x": x}).values())[0]
        np.testing.assert_array_equal(got, expected, err_msg=str(extra))
    if xs == (1, 8, 7, 7) and _native_builds()[1:]:   # 49 positions: partial tiles
        base = host_runner.SANITIZE_FLAGS
        for flags in (["-mavx2"], ["-march=native"]):
            monkeypatch.setattr(host_runner, "SANITIZE_FLAGS", base + flags)
            got = list(lib.run_host({"x": x}, sanitize=True).values())[0]
            np.testing.assert_array_equal(got, expected, err_msg=f"sanitized, {flags}")


def test_dynamic_quantization_is_refused_by_name():
    """onnxruntime's quantize_dynamic (DynamicQuantizeLinear -> MatMulInteger): one line
    saying it is dynamic quantization and what to do instead."""
    x = (rng.standard_normal((2, 8))).astype(np.float32)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "w", "xz"], ["acc"])]
    g = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 8])], [helper.make_tensor_value_info(
            "acc", TensorProto.INT32, [2, 3])],
        [numpy_helper.from_array(qrand(np.uint8, (8, 3)), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    with pytest.raises(mtvm.MtvmError, match="dynamic quantization.*quantize_static"):
        mtvm.compile(m)
