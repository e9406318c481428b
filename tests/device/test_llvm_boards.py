"""The LLVM backend's object code linked into the board projects and run under
QEMU: the MLF's codegen/host/lib/lib0.o (no generated C) in the cortex_m and
riscv templates, a host-driven session over the emulated UART, outputs within
1e-4 of the reference. kws_dscnn on mps2-an386 (Cortex-M4, hard float: the
object passes floats in VFP registers and says so to the linker) and mps3-an547
(Cortex-M55: Helium float vectors), a small CNN
on mps2-an385 (Cortex-M3, soft float) and riscv32-virt (RV32IMAFC, ilp32f); int8
models, bit for bit what the C backend computes on the host, on mps2-an386
(SMLAD im2col dot products, SXTB16 word depthwise rows and matrix products) and
riscv32-virt (the
same schedules in portable pairs), and mps3-an547 (Helium byte dot products)."""
import os

import numpy as np
import pytest

import mtvm.project as P
from mtvm.testing import run_once

from device_utils import MODELS_DIR, need_models, need_qemu, quiet, small_model_path

pytestmark = pytest.mark.device


def _run(path, board, out_dir, inputs) -> np.ndarray:
    proj = P.generate(path, board=board, out_dir=str(out_dir), compile_options={"backend": "llvm"},
                      progress=quiet)
    assert os.path.isfile(os.path.join(out_dir, "model", "codegen", "host", "lib", "lib0.o"))
    src = os.path.join(out_dir, "model", "codegen", "host", "src")
    assert not [f for f in os.listdir(src) if f.endswith(".c")]   # no generated C
    proj.build(progress=quiet)
    return list(run_once(proj, inputs).values())[0]


@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_kws_dscnn_object_code(tmp_path, board):
    """On the Cortex-M4 (scalar FPU) and the Cortex-M55, whose conv tiles are
    Helium vectors of 4 floats."""
    need_qemu()
    need_models()
    ref = np.load(os.path.join(MODELS_DIR, "kws_dscnn.npz"))
    y = _run(os.path.join(MODELS_DIR, "kws_dscnn.onnx"), board, tmp_path / "p",
             [ref["in_0"]])
    np.testing.assert_allclose(y, ref["out_0"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("board", ["mps2-an385", "riscv32-virt"])
def test_small_cnn_object_code(tmp_path, board):
    if board.startswith("riscv"):
        from test_riscv import need_riscv
        need_riscv()
    else:
        need_qemu()
    path = small_model_path(str(tmp_path))
    x = np.random.default_rng(3).standard_normal((1, 1, 8, 8)).astype(np.float32)
    import mtvm
    expected = mtvm.compile(path).run_host({"input": x})["output"]
    y = _run(path, board, tmp_path / "p", [x])
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name,board", [("kws_dscnn_int8", "mps2-an386"),
                                        ("vww_mobilenetv1_int8", "mps2-an386"),
                                        ("ic_resnet8_int8", "riscv32-virt"),
                                        ("ad_autoencoder_int8", "mps2-an386"),
                                        ("kwt_tiny_int8", "mps2-an386"),
                                        ("vww_mobilenetv1_int8", "mps3-an547"),
                                        ("kwt_tiny_int8", "mps3-an547")])
def test_int8_object_code_matches_the_c_backend(tmp_path, name, board):
    """Stride-1 and stride-2 depthwise rows, pointwise and padded KxK im2col, the
    SXTB16 word dot products of fully connected layers and of a transformer's
    projections."""
    if board.startswith("riscv"):
        from test_riscv import need_riscv
        need_riscv()
    else:
        need_qemu()
    need_models()
    import mtvm
    path = os.path.join(MODELS_DIR, name + ".onnx")
    x = np.load(os.path.join(MODELS_DIR, name + ".npz"))["in_0"]
    lib = mtvm.compile(path)
    expected = list(lib.run_host({lib.metadata["inputs"][0]["name"]: x}).values())[0]
    y = _run(path, board, tmp_path / "p", [x])
    np.testing.assert_array_equal(y, expected)


def test_profiling_build_on_the_m4(tmp_path):
    """--profile with the LLVM backend: the firmware times each kernel with the board's
    timer, and the session's profile gives every kernel a figure (what `mtvm tune`
    needs to measure LLVM object code on a board)."""
    need_qemu()
    need_models()
    path = os.path.join(MODELS_DIR, "kws_dscnn_int8.onnx")
    proj = P.generate(path, board="mps2-an386", out_dir=str(tmp_path / "p"),
                      compile_options={"backend": "llvm"}, profile=True, progress=quiet)
    proj.build(progress=quiet)
    with proj.session() as s:
        prof = s.executor.profile(runs=2)
    md = proj.metadata["operators"]
    assert len(prof.rows) == len(md) > 5
    assert all(r.ticks > 0 for r in prof.rows)
    convs = [r.ticks for r, op in zip(prof.rows, md) if op["function"].endswith("qconv")]
    assert convs and max(convs) > 10 * min(r.ticks for r in prof.rows)


def test_tune_llvm_object_code_on_the_m4(tmp_path):
    """`mtvm tune --backend llvm` on an emulated board: the LLVM nests' knob settings
    profiled as object code under QEMU icount, recorded with their backend, applied by
    `compile --backend llvm --tuning-records`, and the tuned firmware right on the board."""
    import json

    import onnx

    import mtvm
    from mtvm.testing import conv_relu_conv, reference_outputs
    need_qemu()
    model = conv_relu_conv(8, 5, "tiny_convs")
    path, rec = str(tmp_path / "tiny.onnx"), str(tmp_path / "tiny.m4.llvm.jsonl")
    onnx.save(model, path)
    res = mtvm.tune(path, board="mps2-an386", backend="llvm", records=rec, trials=3)
    with open(rec) as f:
        recs = [json.loads(line) for line in f]
    assert recs and all(r["backend"] == "llvm" and r["unit"] == "instructions"
                        and r["status"] == "ok" and r["schedule"] == "llvm.conv2d_f32"
                        for r in recs)
    assert res.backend == "llvm" and not res.jit and res.stats.builds == 3
    assert "backend llvm" in res.summary() and "JIT" not in res.summary()
    best = [res.best[lay.key] for lay in res.layers]
    assert all(b.record["figure"] <= b.default_figure for b in best)
    tuned = [b for b in best if not b.is_default]
    assert tuned, res.summary()      # a 4x4 register tile is not the best for every layer

    lib = mtvm.compile(path, target="cortex-m4", backend="llvm", tuning_records=rec)
    knobs = {o["workload_key"]: o["knobs"] for o in lib.metadata["operators"]
             if o.get("schedule")}
    for b in tuned:
        assert knobs[b.key] == {**knobs[b.key], **b.record["knobs"]}
    # the C backend's records and these never apply to each other
    assert mtvm.compile(path, target="cortex-m4", tuning_records=rec).sources == \
        mtvm.compile(path, target="cortex-m4").sources
    x = np.random.default_rng(1).standard_normal((1, 8, 8, 8)).astype(np.float32)
    proj = P.generate(lib, board="mps2-an386", out_dir=str(tmp_path / "tuned"), progress=quiet)
    proj.build(progress=quiet)
    y = list(run_once(proj, [x]).values())[0]
    np.testing.assert_allclose(y, reference_outputs(model, {"x": x})[0], rtol=1e-4, atol=1e-5)

    again = mtvm.tune(path, board="mps2-an386", backend="llvm", records=rec, trials=3)
    assert len(again.hits) == len(res.layers) and again.stats.skipped >= len(recs) - 2
