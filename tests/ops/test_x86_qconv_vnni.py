"""The AVX-512 VNNI int8 convolution (qconv_s8.im2col_vnni, mtvm/schedules/x86/qconv_s8.py;
c_runtime/kernels/x86/mtvm_qgemm_s8_vnni_x86.h): bit-exact with the generic schedule
(the same model compiled for x86-64-v4 without VNNI), within one step of onnxruntime,
under ASan/UBSan, in its portable form (MTVM_NO_SIMD) and on target "c" built for this
machine; chosen only where the target has avx512vnni."""
from __future__ import annotations

import zlib

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
import onnx

import mtvm
from mtvm.host_runner import HostModule
from mtvm.target import Target, host_target
from mtvm.testing import make_model

VNNI = "qconv_s8.im2col_vnni"

needs_vnni = pytest.mark.skipif(not host_target().has("avx512vnni", "avx512bw", "avx512vl"),
                                reason="the host CPU lacks AVX-512 VNNI")


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _q(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def qconv_model(xs, ws, attrs, x_dtype=np.int8, per_channel=True, seed=0):
    """A QLinearConv with int8 weights (zero point 0) and x_dtype data."""
    rng = _rng(xs, ws, sorted(attrs.items()), np.dtype(x_dtype).name, per_channel, seed)
    x, w = _q(rng, x_dtype, xs), _q(rng, np.int8, ws)
    oc = ws[0]
    w_scale = (rng.random(oc) * 0.01 + 0.002).astype(np.float32) if per_channel else \
        np.float32(0.0071)
    w_zp = np.zeros(oc, np.int8) if per_channel else np.int8(0)
    signed = x_dtype == np.int8
    consts = dict(xs=np.float32(0.031), xz=np.array(5 if signed else 131, x_dtype), w=w,
                  ws=w_scale, wz=w_zp, ys=np.float32(0.173 * max(1, ws[1] * np.prod(ws[2:]) / 54)),
                  yz=np.array(-7 if signed else 120, x_dtype),
                  b=rng.integers(-3000, 3000, oc).astype(np.int32))
    m = make_model("QLinearConv", {"x": x}, consts=consts, attrs=attrs,
                   input_order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
    return m, {"x": x}


def _schedules(lib):
    return [lk.kernel.schedule for lk in lib.kernels if lk.kernel.node.op == "QConv"]


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _folded(lib) -> bool:
    return all(lk.kernel.node.attrs.get("folded", 1) for lk in lib.kernels
               if lk.kernel.node.op == "QConv")


def check(model, feeds, *, sanitize=False, portable=False, generic_c=False, config=None,
          expect=VNNI):
    lib = mtvm.compile(model, target="host", schedule_config=config)
    ref = mtvm.compile(model, target="x86-64-v4")
    assert VNNI not in _schedules(ref)
    depthwise = _schedules(ref) == ["qconv_s8.depthwise"]

    def expected(built):
        # depthwise (folded=0): not this one, unless the single-channel pass gave the
        # build im2col (one input channel: with VNNI always, passes/single_channel_conv.py)
        return expect if not depthwise or _folded(built) else "qconv_s8.depthwise"
    assert set(_schedules(lib)) == {expected(lib)}, _schedules(lib)
    want = ref.run_host(feeds)
    runs = {"vnni": lib.run_host(feeds)}
    if sanitize:
        runs["sanitized"] = lib.run_host(feeds, sanitize=True)
    if portable:
        runs["portable"] = HostModule(lib, extra=["-DMTVM_NO_SIMD"]).run(feeds)
    if generic_c:
        c = mtvm.compile(model, schedule_config=config)
        assert set(_schedules(c)) == {expected(c)}
        runs["c -march=native"] = HostModule(c, extra=["-march=native"]).run(feeds)
        runs["c"] = c.run_host(feeds)
    expected = _ort(model, feeds)
    for what, got in runs.items():
        for (name, a), e in zip(got.items(), expected):
            np.testing.assert_array_equal(a, want[name], err_msg=f"{what}: {name}")
            d = np.abs(a.astype(np.int64) - e.astype(np.int64))
            assert d.max(initial=0) <= 1, f"{what}: {name} off by {d.max()} steps from ort"
    return lib


CASES = [  # x shape, w shape, attrs
    ((1, 16, 8, 8), (1, 16, 1, 1), {}),                                     # one channel
    ((1, 70, 5, 7), (70, 70, 1, 1), {}),                                    # tails
    ((1, 5, 3, 3), (3, 5, 1, 1), {}),                                       # 9 positions
    ((1, 3, 9, 7), (17, 3, 3, 3), {"pads": [1, 1, 1, 1]}),                  # kk 27
    ((1, 6, 9, 7), (4, 6, 3, 2), {"strides": [2, 1], "pads": [0, 1, 2, 0]}),
    ((1, 6, 9, 7), (6, 3, 3, 3), {"group": 2, "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 6, 9, 7), (3, 6, 1, 1), {"strides": [2, 2]}),
    ((1, 6, 9, 7), (4, 6, 1, 1), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 9, 7), (3, 3, 5, 5), {"pads": [2, 2, 2, 2]}),
    ((1, 2, 9, 8), (2, 2, 7, 5), {"pads": [3, 2, 3, 2], "strides": [1, 2]}),
    ((2, 2, 5, 6), (9, 2, 2, 2), {"pads": [1, 0, 0, 1]}),                   # batch 2
    ((1, 7, 13), (5, 7, 3), {"pads": [1, 1], "dilations": [2]}),            # 1-D
    ((1, 8, 50), (33, 8, 5), {"strides": [2], "pads": [2, 2]}),             # 1-D, stride 2
    ((1, 1, 14, 9), (4, 1, 10, 4), {"pads": [5, 2, 5, 2], "strides": [2, 2]}),  # 40 taps
    ((1, 4, 20, 20), (8, 4, 5, 1), {"pads": [2, 0, 2, 0]}),                 # 5 x 1
    ((1, 4, 6, 40), (16, 4, 1, 7), {"pads": [0, 3, 0, 3]}),                 # 1 x k
    ((1, 5, 11, 23), (6, 5, 3, 3), {"strides": [3, 3]}),                    # stride 3
    ((1, 4, 12, 30), (5, 4, 3, 3), {"dilations": [1, 3], "pads": [1, 3, 1, 3]}),
    ((1, 1, 10, 10), (1, 1, 3, 3), {"pads": [1, 1, 1, 1]}),                 # depthwise
    ((1, 8, 9, 9), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),       # depthwise
    ((1, 1, 10, 10), (3, 1, 3, 3), {"pads": [1, 1, 1, 1]}),                 # kk 9
    ((1, 16, 3, 3), (64, 16, 3, 3), {"pads": [1, 1, 1, 1]}),                # few positions
    ((1, 32, 17, 19), (48, 32, 3, 3), {"pads": [1, 1, 1, 1]}),              # many tiles
    ((1, 12, 16, 16), (21, 4, 3, 3), {"group": 3, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 9, 4, 70), (31, 9, 1, 1), {}),                                     # tail tile
]


@needs_vnni
@pytest.mark.parametrize("xs,ws,attrs", CASES, ids=range(len(CASES)))
@pytest.mark.parametrize("x_dtype,per_channel", [(np.int8, True), (np.uint8, False)])
def test_vnni_conv_is_bit_exact(xs, ws, attrs, x_dtype, per_channel):
    m, feeds = qconv_model(xs, ws, attrs, x_dtype, per_channel)
    check(m, feeds)


@needs_vnni
@pytest.mark.parametrize("i", [0, 1, 4, 5, 12, 13, 16, 20, 24])
def test_vnni_conv_under_sanitizers_and_portable(i):
    xs, ws, attrs = CASES[i]
    m, feeds = qconv_model(xs, ws, attrs, np.int8, True, seed=1)
    check(m, feeds, sanitize=True, portable=True, generic_c=True)


@needs_vnni
@pytest.mark.parametrize("opt", ["-O1", "-O3"])
def test_vnni_conv_builds_at_other_optimization_levels(opt):
    """gcc's warnings differ by level (-Werror): the layers' shapes at -O1 and -O3."""
    for i in (0, 1, 3, 5, 9, 12, 16, 21, 22, 24):
        xs, ws, attrs = CASES[i]
        m, feeds = qconv_model(xs, ws, attrs, np.int8, True, seed=3)
        lib = mtvm.compile(m, target="host")
        want = mtvm.compile(m, target="x86-64-v4").run_host(feeds)
        got = HostModule(lib, opt=opt).run(feeds)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


@needs_vnni
@pytest.mark.parametrize("tiles", [1, 2, 3])
@pytest.mark.parametrize("channel_block", [1, 4, 6, 8])
def test_vnni_knobs(tiles, channel_block):
    for i in (1, 3, 24):
        xs, ws, attrs = CASES[i]
        m, feeds = qconv_model(xs, ws, attrs, np.int8, True, seed=2)
        check(m, feeds, config={VNNI: {"tiles": tiles, "channel_block": channel_block}})


def test_vnni_is_chosen_only_with_avx512vnni():
    m, _ = qconv_model(*CASES[3])
    for target in ("x86-64-v3", "x86-64-v4", "cortex-m4", "cortex-m55", "rv32imac"):
        assert VNNI not in _schedules(mtvm.compile(m, target=target)), target
    assert _schedules(mtvm.compile(m, target="x86-64-v4+avx512vnni")) == [VNNI]
    assert _schedules(mtvm.compile(m)) == [VNNI]          # target c: under #if, generic #else
    # the int16 column asked for on target c: the generic schedule
    assert _schedules(mtvm.compile(m, schedule_config={"qconv_s8.im2col": {
        "x86_direct": False}})) == ["qconv_s8.im2col"]
    # uint8 weights, weight zero points: not this schedule
    x = _q(_rng(1), np.uint8, (1, 4, 6, 6))
    consts = dict(xs=np.float32(0.03), xz=np.uint8(128), w=_q(_rng(2), np.uint8, (4, 4, 3, 3)),
                  ws=np.float32(0.01), wz=np.uint8(120), ys=np.float32(0.2), yz=np.uint8(128),
                  b=np.zeros(4, np.int32))
    u = make_model("QLinearConv", {"x": x}, consts=consts, attrs={},
                   input_order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
    assert VNNI not in _schedules(mtvm.compile(u, target="x86-64-v4+avx512vnni"))


def test_scratch_is_what_the_schedule_reports():
    """On a VNNI target the column of `tiles` tiles and the tap tables; on target "c" the
    generic schedule's (this branch's column is on the stack there)."""
    from mtvm import schedules
    from mtvm.ops.quantized.conv import qconv_scratch_bytes
    m, _ = qconv_model(*CASES[22])
    s = schedules.get_schedule(VNNI)
    for target in ("x86-64-v4+avx512vnni", "c"):
        for tiles in (1, 2, 3):
            lib = mtvm.compile(m, target=target,
                               schedule_config={VNNI: {"tiles": tiles}})
            k = [lk.kernel for lk in lib.kernels if lk.kernel.node.op == "QConv"][0]
            assert k.schedule == VNNI
            assert k.scratch_bytes == s.scratch_bytes(k, **k.node.attrs)
            if target == "c":
                assert k.scratch_bytes == qconv_scratch_bytes(k, **k.node.attrs)
            else:
                assert k.scratch_bytes == (64 * tiles + 32) * (32 * 9 // 4)


def test_vnni_weight_layout():
    from mtvm.schedules.x86.qconv_s8 import vnni_bias, vnni_weights
    w = _q(_rng(3), np.int8, (5, 3, 3, 3))
    q = vnni_weights(w)
    assert q.shape == (5, 7) and q.dtype == np.int32
    rows = w.reshape(5, 27).astype(np.int64)
    for o in range(5):
        for t in range(28):
            byte = (int(q[o, t // 4]) >> (8 * (t % 4))) & 0xFF
            assert byte == (rows[o, t] & 0xFF if t < 27 else 0)
    b = np.arange(5, dtype=np.int32)
    np.testing.assert_array_equal(vnni_bias(b, w, True), b - 128 * rows.sum(axis=1))
    np.testing.assert_array_equal(vnni_bias(b, w, False), b)
    lib = mtvm.compile(qconv_model(*CASES[3])[0], target="x86-64-v4+avx512vnni")
    k = [lk.kernel for lk in lib.kernels if lk.kernel.node.op == "QConv"][0]
    plain = lib.graph.tensors[k.node.inputs[1]].data
    assert k.plain(1).const is plain or np.array_equal(k.plain(1).const, plain)
    np.testing.assert_array_equal(k.ins[1].const, vnni_weights(plain))


def _qdq_chain(dtype, act):
    """x -> 1x1 conv (8 -> 8) -> act -> 1x1 conv (8 -> 8) -> 3x3 conv -> Q: pointwise convs
    the planner may write over their input."""
    rng = _rng("chain", np.dtype(dtype).name, act)
    nodes, inits = [], []

    def const(v, name):
        inits.append(numpy_helper.from_array(np.asarray(v), name))
        return name
    z = 3 if dtype == np.int8 else 131
    x = _q(rng, dtype, (1, 8, 12, 12))
    nodes.append(helper.make_node("DequantizeLinear", ["x", const(np.float32(0.05), "xs"),
                                                       const(np.array(z, dtype), "xz")], ["d0"]))
    cur = "d0"
    for i, (oc, k) in enumerate(((8, 1), (8, 1), (6, 3))):
        ic = 8
        w = _q(rng, np.int8, (oc, ic, k, k))
        ws = (rng.random(oc) * 0.01 + 0.002).astype(np.float32)
        nodes.append(helper.make_node("DequantizeLinear",
                                      [const(w, f"w{i}"), const(ws, f"ws{i}"),
                                       const(np.zeros(oc, np.int8), f"wz{i}")], [f"dw{i}"],
                                      axis=0))
        b = rng.integers(-500, 500, oc).astype(np.int32)
        sx = 0.05 if i == 0 else 0.07 + 0.02 * (i - 1)
        nodes.append(helper.make_node("DequantizeLinear",
                                      [const(b, f"b{i}"), const((ws * sx).astype(np.float32),
                                                                f"bs{i}"),
                                       const(np.zeros(oc, np.int32), f"bz{i}")], [f"db{i}"],
                                      axis=0))
        nodes.append(helper.make_node("Conv", [cur, f"dw{i}", f"db{i}"], [f"c{i}"],
                                      pads=[k // 2] * 4))
        cur = f"c{i}"
        if act == "Relu":
            nodes.append(helper.make_node("Relu", [cur], [f"r{i}"]))
            cur = f"r{i}"
        elif act == "Clip":
            nodes.append(helper.make_node("Clip", [cur, const(np.float32(0), f"lo{i}"),
                                                   const(np.float32(2.0), f"hi{i}")], [f"r{i}"]))
            cur = f"r{i}"
        nodes.append(helper.make_node("QuantizeLinear", [cur, const(np.float32(0.07 + 0.02 * i), f"qs{i}"),
                                                         const(np.array(z, dtype), f"qz{i}")],
                                      [f"q{i}"]))
        nodes.append(helper.make_node("DequantizeLinear", [f"q{i}", f"qs{i}", f"qz{i}"],
                                      [f"d{i + 1}"]))
        cur = f"d{i + 1}"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(
        "x", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), x.shape)],
        [helper.make_tensor_value_info("q2", TensorProto.UNDEFINED, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m), {"x": x}


@needs_vnni
@pytest.mark.parametrize("dtype,act", [(np.int8, "Relu"), (np.int8, "Clip"), (np.uint8, None)])
def test_vnni_qdq_chain_in_place(dtype, act):
    m, feeds = _qdq_chain(dtype, act)
    lib = check(m, feeds, sanitize=act == "Clip", portable=act == "Clip")
    qconvs = [lk.kernel for lk in lib.kernels if lk.kernel.node.op == "QConv"]
    assert len(qconvs) == 3
    if dtype == np.int8 and act == "Relu":
        assert any(k.inplace is not None for k in qconvs), "no conv written in place"


def test_x86_64_v3_is_unchanged_by_this_schedule():
    """An AVX2 target's C never mentions the VNNI kernel."""
    m, _ = qconv_model(*CASES[3])
    lib = mtvm.compile(m, target=Target.resolve("x86-64-v3"))
    assert not any("vnni_x86" in text for text in lib.sources.values())


@needs_vnni
@pytest.mark.parametrize("name", ["denoise_unet_int8", "ic_resnet8_int8", "kws_dscnn_int8",
                                  "vww_mobilenetv1_int8", "fomo_mbv2_int8", "har_cnn1d_int8"])
def test_vnni_models_are_bit_exact(models_dir, name):
    """The int8 models: the host (VNNI) build gives the integers of the AVX-512 one without
    VNNI, and of target "c" built for this machine (the VNNI branch of its `if`)."""
    import os
    path = os.path.join(models_dir, name + ".onnx")
    x = np.load(os.path.join(models_dir, name + ".npz"))["in_0"]
    lib = mtvm.compile(path, target="host")
    assert VNNI in _schedules(lib)
    feeds = {lib.metadata["inputs"][0]["name"]: x}
    want = mtvm.compile(path, target="x86-64-v4").run_host(feeds)
    c = mtvm.compile(path)
    for got in (lib.run_host(feeds), HostModule(c, opt="-O3", extra=["-march=native"]).run(feeds)):
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
