"""Targets: parsing, the macros a target claims against the real compilers'
predefined macros, and what a target-specific compile leaves out."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import mtvm
from mtvm.boards import list_boards, load_board
from mtvm.errors import MtvmError
from mtvm.target import GENERIC, Target, host_target, target_names

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "models")
ARM_GCC = shutil.which("arm-none-eabi-gcc")
RISCV_GCC = shutil.which("riscv64-unknown-elf-gcc")
CC = shutil.which(os.environ.get("CC", "cc"))


def predefined(cc: str, flags: list[str]) -> dict[str, str]:
    p = subprocess.run([cc, *flags, "-dM", "-E", "-x", "c", os.devnull],
                       capture_output=True, text=True)
    if p.returncode != 0 and "unrecognized -mcpu" in p.stderr:
        pytest.skip(f"{cc} does not know {flags[0]}")
    assert p.returncode == 0, p.stderr
    return dict(re.findall(r"^#define (\w+) ?(.*)$", p.stdout, re.M))


def assert_macros_match(t: Target, defined: dict[str, str]) -> None:
    for name, value in t.macros().items():
        if value is None:
            assert name not in defined, f"{t.name}: {name} is defined by the compiler"
        else:
            assert name in defined, f"{t.name}: {name} is not defined by the compiler"
            assert int(defined[name] or "1", 0) == value, (t.name, name, defined[name])


# -- parsing -------------------------------------------------------------------------------

def test_every_named_target_parses_and_round_trips():
    for name in target_names():
        t = Target.parse(name)
        assert Target.parse(t.name) == t
    assert Target.resolve(None) is GENERIC and GENERIC.is_generic and GENERIC.macros() == {}


def test_feature_suffixes():
    t = Target.parse("x86-64-v4+avx512vnni")
    assert t.has("avx512vnni", "avx512bw", "avx2") and t.name == "x86-64-v4+avx512vnni"
    assert "-mavx512vnni" in t.cflags()
    soft = Target.parse("cortex-m4+nofp")
    assert soft.fpu is None and soft.has("dsp") and "-mfloat-abi=soft" in soft.cflags()
    assert not Target.parse("cortex-m55+nomve").has("mve")
    assert Target.parse("cortex-m55").macros()["__ARM_FEATURE_MVE"] == 3


@pytest.mark.parametrize("text", ["bogus", "x86-64-v3+avx512vnni", "cortex-m4+mve", "cortex-m7+nodsp",
                                  "cortex-m4+warp", "cortex-m99"])
def test_bad_target_is_one_line(text):
    with pytest.raises(MtvmError) as e:
        Target.parse(text)
    assert "\n" not in str(e.value) and repr(text) in str(e.value)


def test_boards_imply_their_targets():
    assert Target.from_board(load_board("mps2-an386")).name == "cortex-m4"
    assert Target.from_board(load_board("mps2-an385")).name == "cortex-m3"
    assert Target.from_board(load_board("host")) == host_target()
    for name in list_boards():       # every built-in board names a known target
        Target.from_board(load_board(name))


def test_compatibility():
    m4, m3, v3, v4 = (Target.parse(n) for n in ("cortex-m4", "cortex-m3", "x86-64-v3",
                                                 "x86-64-v4"))
    assert GENERIC.compatible_with(m4) and GENERIC.compatible_with(v4)
    assert m3.compatible_with(m4) is False     # different architecture
    assert v3.compatible_with(v4) and not v4.compatible_with(v3)
    assert not m4.compatible_with(v4)


# -- the macros a target claims are the compiler's ---------------------------------------------

@pytest.mark.skipif(ARM_GCC is None, reason="arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("name", [n for n in target_names() if n.startswith("cortex")]
                         + ["cortex-m4+nofp", "cortex-m55+nomve", "cortex-m33+nodsp"])
def test_arm_target_macros_match_arm_gcc(name):
    t = Target.parse(name)
    assert_macros_match(t, predefined(ARM_GCC, t.cflags()))


@pytest.mark.parametrize("board", [b for b in list_boards() if b != "host"])
def test_board_target_macros_match_the_board_cflags(board):
    b = load_board(board)
    cc = shutil.which(b.data.get("cc", "arm-none-eabi-gcc"))
    if cc is None:
        pytest.skip(f"{b.data.get('cc')} not installed")
    assert_macros_match(Target.from_board(b), predefined(cc, b.cflags))


@pytest.mark.skipif(RISCV_GCC is None, reason="riscv64-unknown-elf-gcc not installed")
@pytest.mark.parametrize("name", ["rv32imc", "rv32imac", "rv32imafc", "rv32imafc+nofp"])
def test_riscv_target_macros_match_riscv_gcc(name):
    t = Target.parse(name)
    assert_macros_match(t, predefined(RISCV_GCC, t.cflags()))


def test_riscv_targets():
    assert Target.from_board(load_board("riscv32-virt")).name == "rv32imafc"
    assert Target.from_board(load_board("sifive_e")).name == "rv32imac"
    imac, imafc = Target.parse("rv32imac"), Target.parse("rv32imafc")
    assert imac.pointer_bytes == 4 and imac.fpu is None and imafc.fpu == "f"
    assert imac.is_riscv and not imac.is_arm and not imac.is_x86
    assert Target.parse("rv32imafc+nofp") == imac
    assert imac.compatible_with(imafc) and not imafc.compatible_with(imac)
    assert not imac.compatible_with(Target.parse("cortex-m4"))
    assert not Target.parse("cortex-m3").compatible_with(imac)
    with pytest.raises(MtvmError, match="rv32imac"):
        Target.parse("rv32imac+dsp")


@pytest.mark.skipif(CC is None or host_target().is_generic, reason="needs an x86-64 host cc")
@pytest.mark.parametrize("name", ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4",
                                  "x86-64-v4+avx512vnni", "host"])
def test_x86_target_macros_match_cc(name):
    t = Target.parse(name)
    assert_macros_match(t, predefined(CC, t.cflags()))


# -- what a target-specific compile contains ------------------------------------------------

X86_CODE = re.compile(r"__AVX|\b_mm\w*\(|__m(128|256|512)|immintrin")
THUMB_CODE = re.compile(r"__ARM_FEATURE|__thumb|\b__asm__|\b__(smlad|sxtb16|uxtb16)\b|arm_acle")
ARM_CODE = re.compile(r"__ARM_FEATURE|__thumb|\b__(smlad|sxtb16|uxtb16|ssat|usat)\b|arm_acle|"
                      r"\b(smlad|sxtb16|pkhbt|smmla)\b")


def _kernel_c(lib) -> str:
    return "\n".join(t for p, t in lib.sources.items() if p.endswith((".c", ".h")))


@pytest.mark.parametrize("model", ["kws_dscnn", "kws_dscnn_int8"])
def test_a_cortex_m_build_has_no_x86_code_and_an_x86_build_no_thumb(model):
    path = os.path.join(MODELS, f"{model}.onnx")
    if not os.path.exists(path):
        pytest.skip("../shared/models not found")
    generic = _kernel_c(mtvm.compile(path))
    assert X86_CODE.search(generic)                                    # what "c" keeps
    assert THUMB_CODE.search(generic) or "int8" not in model
    m4 = mtvm.compile(path, target=Target.from_board(load_board("mps2-an386")))
    assert not X86_CODE.search(_kernel_c(m4))
    assert m4.metadata["target"]["name"] == "cortex-m4"
    v4 = mtvm.compile(path, target="x86-64-v4")
    assert not THUMB_CODE.search(_kernel_c(v4))
    assert len(_kernel_c(m4)) < len(generic) and len(_kernel_c(v4)) < len(generic)
    rv = _kernel_c(mtvm.compile(path, target="rv32imac"))
    # (its only inline assembly is the RV32 kernels', c_runtime/kernels/riscv/)
    assert not X86_CODE.search(rv) and not ARM_CODE.search(rv)


def _small(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])], "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 12, 12])], [w])
    path = str(tmp_path / "small.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, {"x": rng.standard_normal((1, 8, 12, 12)).astype(np.float32)}


@pytest.mark.skipif(host_target().is_generic, reason="needs an x86-64 host")
def test_host_target_runs_on_the_host_and_matches_generic(tmp_path):
    path, x = _small(tmp_path)
    generic = mtvm.compile(path).run_host(x)["y"]
    host = mtvm.compile(path, target="host")
    np.testing.assert_allclose(host.run_host(x)["y"], generic, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(host.run_host(x, sanitize=True)["y"], generic, rtol=1e-4,
                               atol=1e-5)


def test_a_foreign_target_does_not_run_on_the_host(tmp_path):
    path, x = _small(tmp_path)
    lib = mtvm.compile(path, target="cortex-m4")
    with pytest.raises(MtvmError, match="compiled for target cortex-m4"):
        lib.run_host(x)


def test_project_refuses_a_model_compiled_for_another_target(tmp_path):
    path, _ = _small(tmp_path)
    lib = mtvm.compile(path, target="cortex-m4")
    with pytest.raises(MtvmError, match="does not run on board host"):
        mtvm.project.generate(lib, board="host", out_dir=str(tmp_path / "p"))
    with pytest.raises(MtvmError, match="does not run on board mps2-an385"):
        mtvm.project.generate(path, board="mps2-an385", out_dir=str(tmp_path / "q"),
                              compile_options={"target": "cortex-m4"})


def test_cli_target_and_board(tmp_path):
    path, _ = _small(tmp_path)
    out = subprocess.run(["mtvm", "compile", path, "--board", "mps2-an386", "-o",
                          str(tmp_path / "m4")], capture_output=True, text=True)
    assert out.returncode == 0 and "target cortex-m4" in out.stdout
    import json
    md = json.load(open(tmp_path / "m4" / "metadata.json"))
    assert md["target"]["name"] == "cortex-m4" and "dsp" in md["target"]["features"]
    bad = subprocess.run(["mtvm", "compile", path, "--target", "armv9"], capture_output=True,
                         text=True)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1
    listing = subprocess.run(["mtvm", "targets"], capture_output=True, text=True, check=True)
    for name in ("c", "host", "x86-64-v3", "x86-64-v4", "cortex-m4", "cortex-m55"):
        assert re.search(rf"^{re.escape(name)}\s", listing.stdout, re.M)


# -- every shared model compiles for each kind of target -------------------------------------

def _shared_models():
    if not os.path.isdir(MODELS):
        return []
    return sorted(f[:-5] for f in os.listdir(MODELS) if f.endswith(".onnx"))


def _compile_only(lib, cc: str, flags: list[str], tmp) -> None:
    lib.export(str(tmp))
    srcs = [os.path.join(tmp, p) for p in lib.sources if p.endswith(".c")]
    inc = [f"-I{os.path.join(tmp, 'codegen/host/include')}",
           f"-I{os.path.join(tmp, 'codegen/host/src')}"]
    for src in srcs:
        p = subprocess.run([cc, *flags, "-O1", "-std=c99", "-Wall", "-Wextra", "-Werror",
                            *inc, "-c", src, "-o", os.devnull], capture_output=True, text=True)
        assert p.returncode == 0, f"{src}:\n{p.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("model", _shared_models() or ["(no shared models)"])
def test_every_shared_model_builds_for_each_target(model, tmp_path):
    """The specialized C of M4 (DSP), M3 (no DSP), RV32IMAC, RV32IMAFC and x86-64-v4
    compiles with -Werror for that target; the host-target C runs and matches target c
    (int8: bit-identical)."""
    if model.startswith("("):
        pytest.skip("../shared/models not found")
    path = os.path.join(MODELS, f"{model}.onnx")
    if ARM_GCC:
        for t in ("cortex-m4", "cortex-m3"):
            target = Target.parse(t)
            _compile_only(mtvm.compile(path, target=target), ARM_GCC, target.cflags(),
                          tmp_path / t)
    if RISCV_GCC:
        for t in ("rv32imac", "rv32imafc"):
            target = Target.parse(t)
            _compile_only(mtvm.compile(path, target=target), RISCV_GCC,
                          ["--specs=picolibc.specs", *target.cflags()], tmp_path / t)
    if CC and not host_target().is_generic:
        v4 = Target.parse("x86-64-v4")
        _compile_only(mtvm.compile(path, target=v4), CC, v4.cflags(), tmp_path / "v4")
        data = np.load(os.path.join(MODELS, f"{model}.npz"))
        generic = mtvm.compile(path)
        inputs = [data[f"in_{i}"] for i in range(len(generic.metadata["inputs"]))]
        want = generic.run_host(inputs)
        got = mtvm.compile(path, target="host").run_host(inputs)
        for name, y in want.items():
            if y.dtype.kind in "iu":
                np.testing.assert_array_equal(got[name], y)
            else:
                np.testing.assert_allclose(got[name], y, rtol=1e-3, atol=1e-4)
