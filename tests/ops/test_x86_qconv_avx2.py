"""The AVX2 int8 convolution (qconv_s8.im2col_avx2, mtvm/schedules/x86/qconv_s8.py;
c_runtime/kernels/x86/mtvm_qgemm_s8_avx2_x86.h): on target x86-64-v3 bit-exact with the
generic schedule (the same build with the layer forced to qconv_s8.im2col), within one
step of onnxruntime, under ASan/UBSan, in its portable form (MTVM_NO_SIMD), and as the
AVX2 branch of target "c" built with -march=x86-64-v3; chosen only on AVX2 targets
without AVX-512. The shapes and models: tests/ops/test_x86_qconv_vnni.py's."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import mtvm
from mtvm.host_runner import HostModule
from mtvm.schedules import workload_key
from mtvm.target import host_target

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_x86_qconv_vnni import CASES, VNNI, _ort, _q, _qdq_chain, _rng, _schedules, \
    qconv_model  # noqa: E402

AVX2 = "qconv_s8.im2col_avx2"
GENERIC = "qconv_s8.im2col"
V3 = "x86-64-v3"

needs_avx2 = pytest.mark.skipif(not host_target().has("avx2", "fma"),
                                reason="the host CPU lacks AVX2")


def _qconvs(lib):
    return [lk.kernel for lk in lib.kernels if lk.kernel.node.op == "QConv"]


def generic_of(model, lib, target=V3):
    """The model on `target` with every QConv of lib that took this schedule forced to the
    generic one (its x86 path)."""
    forced = {workload_key(k): {"schedule": GENERIC} for k in _qconvs(lib) if k.schedule == AVX2}
    ref = mtvm.compile(model, target=target, schedule_config={"workloads": forced})
    assert AVX2 not in _schedules(ref)
    return ref


# the generic schedule's direct KxK kernel off: then this schedule takes every layer it can
# (by default it leaves the generic one the layers that kernel takes: see takes())
NO_DIRECT = {GENERIC: {"x86_direct": False}}


s = mtvm.schedules.get_schedule(AVX2)


def check(model, feeds, *, sanitize=False, portable=False, generic_c=False, config=None,
          ort=True):
    """On x86-64-v3 with this schedule wherever it can (NO_DIRECT) against the default
    build with the layers forced to the generic schedule."""
    lib = mtvm.compile(model, target=V3, schedule_config={**NO_DIRECT, **(config or {})})
    kinds = set(_schedules(lib))
    assert kinds <= {AVX2, "qconv_s8.depthwise"} and kinds, kinds
    want = generic_of(model, lib).run_host(feeds)
    runs = {"avx2": lib.run_host(feeds)}
    if sanitize:
        runs["sanitized"] = lib.run_host(feeds, sanitize=True)
    if portable:
        runs["portable"] = HostModule(lib, extra=["-DMTVM_NO_SIMD"]).run(feeds)
    if generic_c:     # the AVX2 branch where this schedule takes the layer by default
        c = mtvm.compile(model, schedule_config=config)
        ks = [k for k in _qconvs(c) if k.schedule == VNNI]
        assert any(s.takes(k, k.node.attrs) for k in ks)
        assert "mtvm_qconv_avx2_x86(" in "".join(c.sources.values())
        runs["c -march=x86-64-v3"] = HostModule(c, extra=["-march=x86-64-v3"]).run(feeds)
    expected = _ort(model, feeds) if ort else None
    for what, got in runs.items():
        for i, (name, a) in enumerate(got.items()):
            np.testing.assert_array_equal(a, want[name], err_msg=f"{what}: {name}")
            if expected is not None:
                d = np.abs(a.astype(np.int64) - expected[i].astype(np.int64))
                assert d.max(initial=0) <= 1, f"{what}: {name} off by {d.max()} steps from ort"
    return lib


# every shape with int8 data and per-channel scales; uint8 data and one scale on a third of
# them (the file's runtime: two builds a case)
BIT_EXACT = [(i, np.int8, True) for i in range(len(CASES))] + \
    [(i, np.uint8, False) for i in (1, 3, 5, 9, 12, 16, 22, 24)]


@needs_avx2
@pytest.mark.parametrize("i,x_dtype,per_channel", BIT_EXACT,
                         ids=[f"{i}-{np.dtype(d).name}" for i, d, _ in BIT_EXACT])
def test_avx2_conv_is_bit_exact(i, x_dtype, per_channel):
    xs, ws, attrs = CASES[i]
    m, feeds = qconv_model(xs, ws, attrs, x_dtype, per_channel)
    check(m, feeds)


@needs_avx2
@pytest.mark.parametrize("i", [16])
def test_avx2_conv_under_sanitizers_and_portable(i):
    xs, ws, attrs = CASES[i]
    m, feeds = qconv_model(xs, ws, attrs, np.int8, True, seed=1)
    check(m, feeds, sanitize=True, portable=True, generic_c=True)


@needs_avx2
def test_avx2_knobs():
    for tiles, channel_block, i in ((1, 8, 24), (2, 5, 1), (3, 3, 5)):
        xs, ws, attrs = CASES[i]
        m, feeds = qconv_model(xs, ws, attrs, np.int8, True, seed=2)
        check(m, feeds, ort=False, config={AVX2: {"tiles": tiles, "channel_block": channel_block}})


def test_avx2_is_chosen_only_on_avx2_without_avx512():
    m, _ = qconv_model(*CASES[3])
    assert _schedules(mtvm.compile(m, target=V3)) == [AVX2]
    # a layer the generic schedule's direct KxK kernel takes: that one, unless turned off
    d, _ = qconv_model(*CASES[22])
    assert _schedules(mtvm.compile(d, target=V3)) == [GENERIC]
    assert _schedules(mtvm.compile(d, target=V3, schedule_config=NO_DIRECT)) == [AVX2]
    assert "mtvm_qconv_avx2_x86" not in "".join(mtvm.compile(d).sources.values())
    for target in ("x86-64-v2", "x86-64-v4", "x86-64-v4+avx512vnni", "cortex-m4",
                   "cortex-m55", "rv32imac", "c"):
        assert AVX2 not in _schedules(mtvm.compile(m, target=target)), target
    # target c: the VNNI schedule, with this kernel as the AVX2 branch of its `else`
    c = mtvm.compile(m)
    assert _schedules(c) == [VNNI]
    text = "".join(c.sources.values())
    assert "MTVM_QCONV_AVX2_ON" in text and "mtvm_qconv_avx2_x86" in text
    # the int16 column asked for on target c: the generic schedule, no AVX2 branch
    g = mtvm.compile(m, schedule_config={GENERIC: {"x86_direct": False}})
    assert _schedules(g) == [GENERIC]
    assert "mtvm_qconv_avx2_x86" not in "".join(g.sources.values())
    # weight zero points: not this schedule
    x = _q(_rng(1), np.uint8, (1, 4, 6, 6))
    from mtvm.testing import make_model
    consts = dict(xs=np.float32(0.03), xz=np.uint8(128), w=_q(_rng(2), np.uint8, (4, 4, 3, 3)),
                  ws=np.float32(0.01), wz=np.uint8(120), ys=np.float32(0.2), yz=np.uint8(128),
                  b=np.zeros(4, np.int32))
    u = make_model("QLinearConv", {"x": x}, consts=consts, attrs={},
                   input_order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
    assert AVX2 not in _schedules(mtvm.compile(u, target=V3))


def test_avx2_scratch_is_what_the_schedule_reports():
    """The column of `tiles` tiles and the tap tables; on target "c" the generic schedule's
    (the AVX2 branch's column is on the stack there, as the VNNI one's)."""
    from mtvm import schedules
    from mtvm.ops.quantized.conv import qconv_scratch_bytes
    m, _ = qconv_model(*CASES[22])
    s = schedules.get_schedule(AVX2)
    for tiles in (1, 2, 3):
        lib = mtvm.compile(m, target=V3, schedule_config={**NO_DIRECT, AVX2: {"tiles": tiles}})
        k = _qconvs(lib)[0]
        assert k.schedule == AVX2
        assert k.scratch_bytes == s.scratch_bytes(k, **k.node.attrs)
        assert k.scratch_bytes == (32 * tiles + 16) * (32 * 9 // 2)
    k = _qconvs(mtvm.compile(qconv_model(*CASES[3])[0], schedule_config={AVX2: {"tiles": 3}}))[0]
    assert k.schedule == VNNI
    assert k.scratch_bytes == qconv_scratch_bytes(k, **k.node.attrs)


def test_avx2_weight_layout():
    from mtvm.schedules.x86.qconv_s8 import avx2_weights
    w = _q(_rng(3), np.int8, (5, 3, 3, 3))
    q = avx2_weights(w)
    assert q.shape == (5, 14) and q.dtype == np.int32
    rows = w.reshape(5, 27).astype(np.int64)
    for o in range(5):
        for t in range(28):
            half = (int(q[o, t // 2]) >> (16 * (t % 2))) & 0xFFFF
            half = half - 0x10000 if half >= 0x8000 else half
            assert half == (rows[o, t] if t < 27 else 0)
    lib = mtvm.compile(qconv_model(*CASES[3])[0], target=V3)
    k = _qconvs(lib)[0]
    plain = lib.graph.tensors[k.node.inputs[1]].data
    np.testing.assert_array_equal(k.ins[1].const, avx2_weights(plain))


@needs_avx2
@pytest.mark.parametrize("dtype,act", [(np.int8, "Relu"), (np.int8, "Clip")])
def test_avx2_qdq_chain_in_place(dtype, act):
    m, feeds = _qdq_chain(dtype, act)
    lib = check(m, feeds, sanitize=act == "Clip", portable=act == "Clip",
                generic_c=act == "Relu")
    qconvs = _qconvs(lib)
    assert len(qconvs) == 3
    if dtype == np.int8 and act == "Relu":
        assert any(k.inplace is not None for k in qconvs), "no conv written in place"


@needs_avx2
@pytest.mark.parametrize("name", ["ic_resnet8_int8"])
def test_avx2_models_are_bit_exact(models_dir, name):
    """The int8 models on x86-64-v3: the integers of the generic schedule, and of target
    "c" built with -march=x86-64-v3 (the AVX2 branch of its `if`)."""
    path = os.path.join(models_dir, name + ".onnx")
    x = np.load(os.path.join(models_dir, name + ".npz"))["in_0"]
    lib = mtvm.compile(path, target=V3)
    assert AVX2 in _schedules(lib)
    feeds = {lib.metadata["inputs"][0]["name"]: x}
    import onnx
    want = generic_of(onnx.load(path), lib).run_host(feeds)
    c = mtvm.compile(path)
    for got in (lib.run_host(feeds),
                HostModule(c, opt="-O3", extra=["-march=x86-64-v3"]).run(feeds)):
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
