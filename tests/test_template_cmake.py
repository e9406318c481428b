"""The cmake project template: kws_dscnn and vww_mobilenetv1_int8 as CMake projects
built with cmake + ninja for the host and for mps2-an386 (arm-none-eabi-gcc, QEMU),
run through `mtvm run` (a session) against the reference outputs beside the models;
the standalone app; the model and runtime libraries added to a user's firmware with
add_subdirectory(); the toolchain file on other Cortex-M boards; Unix Makefiles
when ninja is missing; which templates a board accepts; names from a model or a board
never becoming CMake code."""
import functools
import os
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import mtvm
import mtvm.project
from mtvm.cli import main as cli
from mtvm.errors import MtvmError
from mtvm.testing import have, models_dir

MODELS_DIR = models_dir()
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "sensor_mlp.onnx")

need_cmake = pytest.mark.skipif(not have("cmake"), reason="cmake not installed "
                                "(apt-get install cmake ninja-build)")
need_models = pytest.mark.skipif(not os.path.isdir(MODELS_DIR),
                                 reason="../shared/models missing")
need_arm_gcc = pytest.mark.skipif(not have("arm-none-eabi-gcc"),
                                  reason="arm-none-eabi-gcc not installed")
# As tests/device: QEMU runs are device tests.
device = [pytest.mark.device,
          pytest.mark.skipif(not (have("arm-none-eabi-gcc") and have("qemu-system-arm")),
                             reason="arm-none-eabi-gcc or qemu-system-arm not installed")]


def quiet(msg):
    pass


def model_path(name, ext=".onnx"):
    return os.path.join(MODELS_DIR, name + ext)


@functools.lru_cache(maxsize=None)
def output_step(name) -> float | None:
    """One quantization step of the output (the scale of the DequantizeLinear that
    makes it), or None for a float model."""
    m = onnx.load(model_path(name))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    out = m.graph.output[0].name
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] == out:
            return float(np.max(inits[n.input[1]]))
    return None


def assert_matches_reference(name, y):
    """Float models: 1e-4 * max(|ref|, 1), as the host and device tests; int8 models:
    one output quantization step (the compiler's contract; tests/test_int8_models.py)."""
    with np.load(model_path(name, ".npz")) as z:
        ref = z["out_0"]
    assert y.shape == ref.shape
    err = float(np.abs(y.astype(np.float64) - ref).max())
    step = output_step(name)
    tol = step * 1.001 if step else 1e-4 * max(float(np.abs(ref).max()), 1.0)
    assert err <= tol, f"{name}: max abs error {err} > {tol}"


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """(model, board, kind) -> a built cmake project, generated with the CLI (shared by
    the tests of this file)."""
    root = tmp_path_factory.mktemp("cmake_projects")
    made = {}

    def get(name, board, kind="host-driven"):
        key = (name, board, kind)
        if key not in made:
            d = str(root / f"{name}-{board}-{kind}")
            src = model_path(name) if name != "sensor_mlp" else EXAMPLE
            assert cli(["project", "generate", src, "--board", board, "--template", "cmake",
                        "--kind", kind, "-o", d]) == 0
            assert cli(["project", "build", d]) == 0
            made[key] = mtvm.project.load(d)
        return made[key]
    return get


# -- host and mps2-an386: the reference outputs through a session ----------------------------
CASES = [pytest.param(name, board, marks=device if board != "host" else [], id=f"{name}-{board}")
         for board in ("host", "mps2-an386") for name in ("kws_dscnn", "vww_mobilenetv1_int8")]


@need_cmake
@need_models
@pytest.mark.parametrize("name,board", CASES)
def test_cmake_project_matches_the_reference(name, board, projects, tmp_path):
    proj = projects(name, board)
    assert proj.info["template"] == "cmake"
    assert os.path.isfile(proj.path("CMakeLists.txt"))
    assert not os.path.exists(proj.path("Makefile"))              # the build is CMake's
    assert os.path.isfile(proj.path("build", "build.ninja")) or not have("ninja")
    if board == "host":
        assert os.path.isfile(proj.path("build", "mtvm_app"))
    else:
        for f in ("firmware.elf", "firmware.bin", "firmware.hex", "size.json"):
            assert os.path.isfile(proj.path("build", f)), f
        assert os.path.isfile(proj.path("cmake", "arm-none-eabi-gcc.cmake"))
        assert os.path.isfile(proj.path("link.ld"))
    out = str(tmp_path / "out.npz")
    # `mtvm run` as for the Make projects: the host executable over stdin/stdout, or
    # QEMU started for the session and its UART pty through pyserial.
    assert cli(["run", proj.dir, "--input", model_path(name, ".npz"), "--output", out]) == 0
    with np.load(out) as z:
        y = z[z.files[0]]
    assert_matches_reference(name, y)
    assert not proj.running()


@need_cmake
@need_models
@pytest.mark.parametrize("board", ["host", pytest.param("mps2-an386", marks=device)])
def test_standalone_app_prints_the_reference(board, projects):
    proj = projects("kws_dscnn", board, "standalone")
    r = proj.template.run_standalone(proj)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "mtvm standalone: done (status 0)" in r.stdout
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("output 0 ")][0]
    y = np.array([float(v) for v in line.split(":", 1)[1].split()], np.float32).reshape(1, 12)
    assert_matches_reference("kws_dscnn", y)


# -- the libraries in a user's firmware ----------------------------------------------------------
USER_MAIN = r"""/* A user's app: calls the model directly through the MLF interface. */
#include <stdint.h>
#include <stdio.h>

#include "tvmgen_default.h"

static uint64_t in[(TVMGEN_DEFAULT_INPUT_SIZE + 7) / 8];
static uint64_t out[(TVMGEN_DEFAULT_OUTPUT_SIZE + 7) / 8];

int main(void)
{
    struct tvmgen_default_inputs inputs;
    struct tvmgen_default_outputs outputs;
    if (fread(in, 1, TVMGEN_DEFAULT_INPUT_SIZE, stdin) != TVMGEN_DEFAULT_INPUT_SIZE) {
        return 2;
    }
    inputs.input = in;
    outputs.output = out;
    if (tvmgen_default_run(&inputs, &outputs) != 0) {
        return 3;
    }
    fwrite(out, 1, TVMGEN_DEFAULT_OUTPUT_SIZE, stdout);
    return 0;
}
"""


@need_cmake
@need_models
def test_add_subdirectory_into_a_user_project(projects, tmp_path):
    """The generated project as a subdirectory of a user's CMake project: mtvm::model
    (and the runtime through it) link into the user's executable; the example app is
    not built there."""
    proj = projects("kws_dscnn", "host")
    user = tmp_path / "firmware"
    user.mkdir()
    (user / "main.c").write_text(USER_MAIN)
    (user / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(user_firmware C)\n"
        f'add_subdirectory("{proj.dir}" mtvm)\n'
        "add_executable(user_app main.c)\n"
        "target_link_libraries(user_app PRIVATE mtvm::model)\n")
    build = str(user / "build")
    for argv in (["cmake", "-S", str(user), "-B", build],
                 ["cmake", "--build", build, "--parallel", "2"]):
        p = subprocess.run(argv, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
    assert os.path.isfile(os.path.join(build, "mtvm", "libmtvm_model.a"))
    assert not os.path.exists(os.path.join(build, "mtvm", "mtvm_app"))
    with np.load(model_path("kws_dscnn", ".npz")) as z:
        x = z["in_0"].astype("<f4")
    r = subprocess.run([os.path.join(build, "user_app")], input=x.tobytes(),
                       capture_output=True)
    assert r.returncode == 0, r.stderr
    assert_matches_reference("kws_dscnn", np.frombuffer(r.stdout, "<f4").reshape(1, 12))


# -- the toolchain file on other Cortex-M boards --------------------------------------------
@need_cmake
@need_arm_gcc
@pytest.mark.parametrize("board,arch", [("nucleo-f746zg", "7E-M"), ("nrf52840dk", "7E-M"),
                                        ("mps2-an385", "7-M")])
def test_cortex_m_toolchain_file_configures_and_builds(board, arch, tmp_path):
    """cmake with the generated toolchain file, as a user runs it: the board's compiler
    and flags, a firmware ELF for the board's core (Cortex-M7 with caches and an STM32
    UART, nRF52840, Cortex-M3 without FPU)."""
    d = str(tmp_path / "p")
    proj = mtvm.project.generate(EXAMPLE, board=board, out_dir=d, template="cmake",
                                 progress=quiet)
    tc = proj.path("cmake", "arm-none-eabi-gcc.cmake")
    text = open(tc).read()
    for flag in proj.board["cflags"]:
        assert flag in text
    build = proj.path("b")
    gen = ["-G", "Ninja"] if have("ninja") else []
    p = subprocess.run(["cmake", "-S", d, "-B", build, f"-DCMAKE_TOOLCHAIN_FILE={tc}"] + gen,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    cache = open(os.path.join(build, "CMakeCache.txt")).read()
    assert "arm-none-eabi-gcc" in cache and "CMAKE_BUILD_TYPE:STRING=RelWithDebInfo" in cache
    p = subprocess.run(["cmake", "--build", build, "--parallel", "2"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    elf = os.path.join(build, "firmware.elf")
    hdr = subprocess.run(["arm-none-eabi-readelf", "-h", "-A", elf], capture_output=True,
                         text=True, check=True).stdout
    assert "Machine:" in hdr and "ARM" in hdr
    assert f'Tag_CPU_name: "{arch}"' in hdr, hdr                 # the board's core
    assert ("Tag_FP_arch" in hdr) == bool(proj.board.get("fpu")), hdr    # and its FPU
    assert os.path.isfile(os.path.join(build, "firmware.hex"))


# -- no ninja: Unix Makefiles ------------------------------------------------------------------
@need_cmake
def test_unix_makefiles_when_ninja_is_missing(tmp_path, monkeypatch):
    """`mtvm project build` configures with Unix Makefiles when no ninja is on PATH (a
    PATH that holds every program of the real one but ninja)."""
    if not have("make"):
        pytest.skip("make not installed")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for n in os.listdir(d):
            target = os.path.join(d, n)
            if n.startswith("ninja") or os.path.lexists(bindir / n) \
                    or not os.access(target, os.X_OK):
                continue
            os.symlink(target, bindir / n)
    monkeypatch.setenv("PATH", str(bindir))
    assert shutil.which("ninja") is None
    proj = mtvm.project.generate(EXAMPLE, board="host", out_dir=str(tmp_path / "p"),
                                 template="cmake", progress=quiet)
    proj.build(progress=quiet)
    assert os.path.isfile(proj.path("build", "Makefile"))
    assert not os.path.exists(proj.path("build", "build.ninja"))
    with np.load(os.path.join(ROOT, "examples", "sensor_mlp.npz")) as z:
        x, ref = z["in_0"], z["out_0"]
    with proj.session() as s:
        y = list(s.executor.run([x]).values())[0]
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-4 * max(float(np.abs(ref).max()), 1.0))


# -- which templates a board accepts ----------------------------------------------------------
def test_template_choice_is_checked(tmp_path):
    with pytest.raises(MtvmError, match=r"template 'host' does not build for board "
                                        r"mps2-an386.*templates for it: cortex_m, (\w+, )*cmake"):
        mtvm.project.generate(EXAMPLE, board="mps2-an386", out_dir=str(tmp_path / "a"),
                              template="host", progress=quiet)
    with pytest.raises(MtvmError, match="plain name"):
        mtvm.project.generate(EXAMPLE, board="host", out_dir=str(tmp_path / "b"),
                              template="../host", progress=quiet)
    with pytest.raises(MtvmError, match="not found.*known: .*cmake"):
        mtvm.project.generate(EXAMPLE, board="host", out_dir=str(tmp_path / "c"),
                              template="zephyrr", progress=quiet)
    assert not os.path.exists(tmp_path / "a")
    # the default stays the board's own template
    p = mtvm.project.generate(EXAMPLE, board="host", out_dir=str(tmp_path / "d"),
                              progress=quiet)
    assert p.info["template"] == "host" and os.path.isfile(p.path("Makefile"))
    # regenerating keeps the project's template: a cmake project stays one
    p = mtvm.project.generate(EXAMPLE, board="host", out_dir=str(tmp_path / "e"),
                              template="cmake", progress=quiet)
    p = mtvm.project.generate(EXAMPLE, board="host", out_dir=str(tmp_path / "e"), force=True,
                              progress=quiet)
    assert p.info["template"] == "cmake" and os.path.isfile(p.path("CMakeLists.txt"))
    assert not os.path.exists(p.path("Makefile"))


# -- names from a model or a board never become CMake code ------------------------------------
@need_cmake
def test_hostile_names_stay_out_of_the_cmake_files(tmp_path):
    """A graph name and a module name that would run `touch MARKER` if CMake read them
    as code; board flags CMake would split or expand are refused."""
    from onnx import TensorProto, helper
    marker = str(tmp_path / "INJECTED")
    evil = f'x)\nexecute_process(COMMAND touch {marker})\nset(y "${{CMAKE_COMMAND}}" #'
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name=evil)], evil,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    cm = mtvm.compile(m, module_name=evil)
    proj = mtvm.project.generate(cm, board="host", out_dir=str(tmp_path / "p"),
                                 template="cmake", progress=quiet)
    text = open(proj.path("CMakeLists.txt")).read()
    assert text.isascii() and "execute_process(" not in text and "${CMAKE_COMMAND}" not in text
    # what is left of the names: words in comments and the project()'s name
    assert all(ln.lstrip().startswith(("#", "project(mtvm_x_")) for ln in text.splitlines()
               if "touch" in ln)
    proj.build(progress=quiet)
    assert not os.path.exists(marker)
    x = np.array([-1, 2, -3, 4], np.float32)
    with proj.session() as s:
        np.testing.assert_array_equal(list(s.executor.run([x]).values())[0], np.maximum(x, 0))
    assert not os.path.exists(marker)
    board = mtvm.project.load_board("host")
    arm = mtvm.project.load_board("mps2-an386")
    for i, bad in enumerate((dict(board, cflags=["-DX=${CMAKE_COMMAND}"]),
                             dict(board, cflags=["-O2;-DX"]), dict(board, ldflags=['-l"m"']),
                             dict(arm, cflags=["-mcpu=cortex-m4)", "x"]),
                             dict(arm, cc="arm-none-eabi-gcc\nexecute_process(x)"))):
        with pytest.raises(MtvmError, match="cannot be written into the CMake project|Makefile"):
            mtvm.project.generate(cm, board=bad, out_dir=str(tmp_path / f"b{i}"),
                                  template="cmake", progress=quiet)
