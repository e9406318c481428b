"""QMatMul's AVX-512 VNNI branch (c_runtime/kernels/x86/mtvm_qmatmul_s8_vnni_x86.h; the op's
C on target c and AVX-512 targets, under MTVM_QMM_VNNI): emitted where it applies and built
with it on a VNNI host, bit-exact with the same C built without SIMD (the generic kernel)
and within one output step of onnxruntime, over rows 1 .. 50, depths under, at and over the
64-byte chunk (1 .. 130), output channels under, at and over a block of 16 (1 .. 40), int8
and uint8 activations, per-tensor and per-channel weights, a Relu, and the folded bias Add
in both of its forms ([N + 1] and [N][2] pairs); under the sanitizers once."""
from __future__ import annotations

import numpy as np
import pytest
from test_matmul_bias_fold import _folded, linear_bias_model
from test_x86_qmatmul_avx2 import qdq_model

import mtvm
from mtvm.host_runner import HostModule
from mtvm.testing import cpu_has

pytestmark = pytest.mark.skipif(not all(cpu_has(f) for f in ("avx512f", "avx512bw",
                                                             "avx512_vnni")),
                                reason="the host has no AVX-512 VNNI")

# (rows, depth, columns, uint8 activations, per-channel weights (Gemm with a bias), Relu)
CASES = [(1, 1, 1, False, False, False), (2, 7, 5, True, True, False),
         (3, 64, 16, False, True, True), (5, 65, 17, False, False, False),
         (9, 130, 40, True, True, True), (50, 64, 33, False, True, False),
         (4, 128, 32, True, False, True)]


def _builds(model, feeds):
    """Outputs of target c's C built for this host (VNNI) and without SIMD."""
    lib = mtvm.compile(model, target="c")
    src = next(t for p, t in lib.sources.items() if p.endswith("_kernels.c"))
    assert "mtvm_qmatmul_vnni_x86(" in src
    native = HostModule(lib, opt="-O2", extra=["-march=native"]).run(feeds)
    plain = HostModule(lib, opt="-O2", extra=["-DMTVM_NO_SIMD"]).run(feeds)
    return lib, native, plain


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}x{c[1]}x{c[2]}" for c in CASES])
def test_vnni_qmatmul_matches_generic_and_onnxruntime(case, monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    model, x, step = qdq_model(*case, seed=sum(case[:3]) + 7)
    lib, native, plain = _builds(model, {"x": x})
    np.testing.assert_array_equal(native["out"], plain["out"])
    ref = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(native["out"] - ref).max() <= step * 1.001
    if case == CASES[4]:
        from mtvm import host_runner
        monkeypatch.setattr(host_runner, "SANITIZE_FLAGS",
                            host_runner.SANITIZE_FLAGS + ["-march=native"])
        np.testing.assert_array_equal(lib.run_host({"x": x}, sanitize=True)["out"],
                                      plain["out"])


@pytest.mark.parametrize("m, kk, n, uint8, relu, per_channel",
                         [(3, 24, 20, False, False, False), (3, 24, 20, False, False, True),
                          (6, 70, 48, False, True, False), (11, 18, 22, False, True, True)])
def test_vnni_qmatmul_with_the_folded_bias_add(m, kk, n, uint8, relu, per_channel):
    """The QAdd of a bias row folded into the QMatMul (its [N + 1] form): the same bytes
    as the generic kernel's stores."""
    model, x, _ = linear_bias_model(m, kk, n, uint8=uint8, per_channel=per_channel,
                                    relu=relu, seed=m + kk)
    lib, native, plain = _builds(model, {"x": x})
    _folded(lib)
    for name in native:
        np.testing.assert_array_equal(native[name], plain[name])


def test_vnni_qmatmul_with_a_slope_per_column():
    """The folded Add's [N][2] form (test_matmul_bias_fold's graph with its table
    rewritten as pairs), 20 columns: a block of 16 and one of 4."""
    from mtvm import passes
    from mtvm.compiler import compile_graph
    from mtvm.frontend import load_onnx
    model, x, _ = linear_bias_model(6, 32, 20, per_channel=True, relu=True, seed=3)
    g = passes.optimize(load_onnx(model))
    (mm,) = [nd for nd in g.nodes if nd.op == "QMatMul"]
    c = g.tensors[mm.inputs[6]].data
    mm.inputs[6] = g.add_const("pairs", np.stack([c[:-1], np.full_like(c[:-1], c[-1])], axis=1))
    lib = compile_graph(g, target="c")
    src = next(t for p, t in lib.sources.items() if p.endswith("_kernels.c"))
    assert "mtvm_qmatmul_vnni_x86(" in src
    got = HostModule(lib, opt="-O2", extra=["-march=native"]).run([x])
    want = HostModule(lib, opt="-O2", extra=["-DMTVM_NO_SIMD"]).run([x])
    for name in got:
        np.testing.assert_array_equal(got[name], want[name])
