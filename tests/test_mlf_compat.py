"""microTVM compatibility of the Model Library Format and the C interface.

The readers below are re-implemented from the public source of TVM v0.18 (what
keys and files each one reads; no code copied):
  - tvmc's MLF reader (`TVMCPackage.import_package`, python/tvm/driver/tvmc/model.py);
  - the Arduino template's `generate_project` (`_disassemble_mlf`, `_template_model`,
    `_cmsis_required`; apps/microtvm/arduino/template_project/microtvm_api_server.py);
  - the Zephyr and the CRT host templates' `generate_project` (the tar extracted as
    `model/`, CMake globbing `model/codegen/host/src/*.c` with
    `model/codegen/host/include` on the include path);
  - TVM's parameter-dict format (`runtime::LoadParams`: list magic, reserved word,
    names, arrays).
The demo programs are written as microTVM's aot_standalone_demo and its AOT test
harness write theirs (`tvmgen_default_run` with designated initializers of the
inputs/outputs structs, the size and workspace-pool macros) and compile unchanged
with -std=c99 -Wall -Wextra -Werror against mtvm's MLF. Last, a project generated
from the MLF tar (`mtvm project generate model.tar`) runs through a session.
"""
import datetime
import json
import os
import pathlib
import re
import shutil
import string
import struct
import subprocess
import tarfile

import numpy as np
import pytest
from onnx import TensorProto, helper

import mtvm
from mtvm.cli import main as cli
from mtvm.errors import MtvmError
from mtvm.model_library import load_model_library

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "sensor_mlp.onnx")
EXAMPLE_NPZ = os.path.join(ROOT, "examples", "sensor_mlp.npz")
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2"]


def quiet(msg):
    pass


def reference():
    with np.load(EXAMPLE_NPZ) as z:
        return z["in_0"], z["out_0"]


def _extract(tar_path, dest):
    """tar.extractall, with the 'data' filter where Python has it."""
    with tarfile.open(tar_path, "r:") as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, filter="data")
        else:
            tf.extractall(dest)


@pytest.fixture(scope="module")
def mlfs(tmp_path_factory):
    """sensor_mlp as microTVM would name it (tar), with an external pool (directory),
    and with mtvm's default ONNX output names (tar)."""
    d = tmp_path_factory.mktemp("mlf")
    tar = d / "model.tar"
    mtvm.compile(EXAMPLE, output_names="microtvm").export(tar)
    pools = d / "pools"
    mtvm.compile(EXAMPLE, output_names="microtvm", external_workspace=True).export(pools)
    onnx_names = d / "onnx_names.tar"
    mtvm.compile(EXAMPLE).export(onnx_names)
    return {"tar": tar, "pools": pools, "onnx_names": onnx_names, "dir": d}


# -- tvmc ------------------------------------------------------------------------------------
def read_tvm_params(blob: bytes) -> dict:
    """TVM's parameter dict: u64 list magic, u64 reserved, names (u64 count, then u64
    length + bytes each), arrays (u64 count, then the NDArrays)."""
    magic, _reserved, n_names = struct.unpack_from("<QQQ", blob, 0)
    assert magic == 0xF7E58D4F05049CB7, "not a TVM parameter dict"
    off, names = 24, []
    for _ in range(n_names):
        (size,) = struct.unpack_from("<Q", blob, off)
        names.append(blob[off + 8:off + 8 + size].decode())
        off += 8 + size
    (n_arrays,) = struct.unpack_from("<Q", blob, off)
    assert n_arrays == len(names)
    return {"names": names, "end": off + 8}


def tvmc_import_package(package_path, workdir):
    """What tvmc's TVMCPackage.import_package does with an MLF."""
    tmp = pathlib.Path(workdir)
    with tarfile.open(package_path) as t:       # tvmc: tarfile.open, any compression
        if hasattr(tarfile, "data_filter"):
            t.extractall(tmp, filter="data")
        else:
            t.extractall(tmp)
    assert (tmp / "metadata.json").exists()      # "Model Library Format (MLF)"
    metadata = json.loads((tmp / "metadata.json").read_text())
    names = list(metadata["modules"].keys())
    assert len(names) == 1, "Multiple modules in MLF is not supported."
    module_name = names[0]
    module_metadata = metadata["modules"][module_name]
    graph = (tmp / f"executor-config/graph/{module_name}.graph"
             if "graph" in module_metadata["executors"] else None)
    params = tmp / f"parameters/{module_name}.params"
    assert len(module_metadata["executors"]) == 1
    return {"type": "mlf", "executor_type": module_metadata["executors"][0],
            "params": bytearray(params.read_bytes()),
            "graph": graph.read_text() if graph is not None else None}


def test_tvmc_reads_the_mlf(mlfs, tmp_path):
    pkg = tvmc_import_package(mlfs["tar"], tmp_path / "tvmc")
    assert pkg["executor_type"] == "aot" and pkg["graph"] is None
    params = read_tvm_params(bytes(pkg["params"]))
    assert params == {"names": [], "end": len(pkg["params"])}   # weights are in the C


def test_metadata_has_microtvm_v7_layout_beside_mtvm_fields(mlfs, tmp_path):
    _extract(mlfs["tar"], tmp_path)
    md = json.loads((tmp_path / "metadata.json").read_text())
    assert md["version"] == 7
    mod = md["modules"]["default"]
    assert mod["executors"] == ["aot"] and mod["style"] == "full-model"
    assert mod["model_name"] == "sensor_mlp"
    when = datetime.datetime.strptime(mod["export_datetime"], "%Y-%m-%d %H:%M:%SZ")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    if not os.environ.get("SOURCE_DATE_EPOCH"):
        assert abs((now - when).total_seconds()) < 600
    assert mod["target"] == ["c -keys=cpu"]
    main = mod["memory"]["functions"]["main"]
    assert len(main) == 1 and set(main[0]) == {"device", "workspace_size_bytes",
                                              "constants_size_bytes", "io_size_bytes",
                                              "inputs", "outputs"}
    m = main[0]
    assert m["device"] == 1 and m["workspace_size_bytes"] == md["workspace_bytes"]
    assert m["constants_size_bytes"] == md["constant_bytes"] > 0
    assert m["inputs"] == {"x": {"size": 192, "dtype": "float32"}}
    assert m["outputs"] == {"output": {"size": 16, "dtype": "float32"}}
    assert m["io_size_bytes"] == 192 + 16
    ops = mod["memory"]["functions"]["operator_functions"]
    kernels = (tmp_path / "codegen/host/src/tvmgen_default_kernels.c").read_text()
    assert [o["function_name"] for o in ops] == [o["function"] for o in md["operators"]]
    assert all(f"int32_t {o['function_name']}(" in kernels for o in ops)
    assert all(o["workspace"][0]["device"] == 1 for o in ops)
    # mtvm's own fields stay as they were
    for key in ("format_version", "generator", "model_name", "module_name", "inputs",
                "outputs", "workspace_bytes", "constant_bytes", "operators", "target"):
        assert key in md
    assert md["outputs"][0]["name"] == "probs" and md["outputs"][0]["c_name"] == "output"
    assert md["output_names"] == "microtvm"
    # the IR where microTVM keeps its Relay text, beside mtvm's ir.txt
    relay = (tmp_path / "src/default.relay").read_text()
    assert relay == (tmp_path / "src/default.ir.txt").read_text() and relay.startswith("graph ")
    # the header: one member per metadata key (microTVM builds its header from these keys)
    h = (tmp_path / "codegen/host/include/tvmgen_default.h").read_text()
    for kind in ("inputs", "outputs"):
        members = re.search(rf"struct tvmgen_default_{kind} {{(.*?)}};", h, re.S).group(1)
        assert re.findall(r"void\* (\w+);", members) == list(m[kind])
        for name, t in m[kind].items():
            assert f"#define TVMGEN_DEFAULT_{name.upper()}_SIZE {t['size']}\n" in h


def test_export_datetime_follows_source_date_epoch(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    md = mtvm.compile(_two_outputs()).metadata
    assert md["modules"]["default"]["export_datetime"] == "2023-11-14 22:13:20Z"


# -- the Arduino, Zephyr and CRT templates --------------------------------------------------
PLATFORM_C_TEMPLATE = "#define TVM_WORKSPACE_SIZE_BYTES $workspace_size_bytes\n"
CMSIS_HEADERS = ("arm_nn_math_types.h", "arm_nn_tables.h", "arm_nn_types.h",
                 "arm_nnfunctions.h", "arm_nnsupportfunctions.h")


def arduino_generate_project(mlf_tar, project_dir):
    """The MLF part of the Arduino template's generate_project: unpack, copy every
    .c of codegen/host/src into src/model/, template platform.c with the summed
    main workspace sizes of full-model modules, look for CMSIS-NN headers."""
    source_dir = project_dir / "src"
    model_dir = source_dir / "model"
    model_dir.mkdir(parents=True)
    unpack = project_dir / "unpack"
    _extract(mlf_tar, unpack)                      # tarfile.open(path, "r:")
    for f in (unpack / "codegen" / "host" / "src").rglob("*.c"):
        shutil.copy(f, model_dir)
    metadata = json.loads((unpack / "metadata.json").read_text())
    names = list(metadata["modules"].keys())
    assert all(metadata["modules"][n]["style"] == "full-model" for n in names), \
        "when generating AOT, expect only full-model Model Library Format"
    workspace = sum(metadata["modules"][n]["memory"]["functions"]["main"][0]
                    ["workspace_size_bytes"] for n in names)
    platform_c = string.Template(PLATFORM_C_TEMPLATE).substitute(
        {"workspace_size_bytes": workspace})
    (source_dir / "platform.c").write_text(platform_c)
    cmsis = any(h in p.read_text(encoding="ISO-8859-1") for p in model_dir.iterdir()
                if p.is_file() for h in CMSIS_HEADERS)
    return {"workspace": workspace, "cmsis": cmsis,
            "sources": sorted(p.name for p in model_dir.iterdir())}


def test_arduino_template_reads_the_mlf(mlfs, tmp_path):
    got = arduino_generate_project(mlfs["tar"], tmp_path / "arduino")
    md = load_model_library(mlfs["tar"]).metadata
    assert got["workspace"] == md["workspace_bytes"] and not got["cmsis"]
    assert got["sources"] == ["tvmgen_default.c", "tvmgen_default_constants.c",
                              "tvmgen_default_kernels.c"]
    assert (tmp_path / "arduino/src/platform.c").read_text() == \
        f"#define TVM_WORKSPACE_SIZE_BYTES {md['workspace_bytes']}\n"


def zephyr_or_crt_generate_project(mlf_tar, project_dir):
    """The MLF part of the Zephyr and CRT host templates: the tar copied as model.tar
    and extracted into model/ (tarfile.TarFile: uncompressed), the CMSIS check
    over codegen/host/src (read as text), and what CMake then globs."""
    project_dir.mkdir()
    shutil.copy2(mlf_tar, project_dir / "model.tar")
    extract = project_dir / "model"
    with tarfile.TarFile(project_dir / "model.tar") as tf:
        extract.mkdir()
        if hasattr(tarfile, "data_filter"):
            tf.extractall(path=extract, filter="data")
        else:
            tf.extractall(path=extract)
    cmsis = False
    for p in (extract / "codegen" / "host" / "src").iterdir():
        if p.is_file():
            text = p.read_text()
            cmsis |= any(h in text for h in ("<arm_nnsupportfunctions.h>", "arm_nn_types.h",
                                             "arm_nnfunctions.h"))
    srcs = sorted(extract.glob("codegen/host/src/**/*.c")) + \
        sorted(extract.glob("codegen/host/lib/**/*.o"))
    return {"cmsis": cmsis, "srcs": srcs, "include": extract / "codegen" / "host" / "include"}


def test_zephyr_and_crt_templates_read_and_build_the_mlf(mlfs, tmp_path):
    got = zephyr_or_crt_generate_project(mlfs["tar"], tmp_path / "zephyr")
    assert not got["cmsis"] and len(got["srcs"]) == 3
    assert (got["include"] / "tvmgen_default.h").is_file()
    # tvm_model: the sources compiled where they are, with model/codegen/host/include
    for src in got["srcs"]:
        subprocess.run(["cc", *CFLAGS, "-c", str(src), "-I", str(got["include"]),
                        "-o", str(src.with_suffix(".o"))], check=True)


# -- the C interface: a demo written against microTVM, compiled unchanged ----------------------
DEMO_C = r"""
/* As microTVM's aot_standalone_demo (apps/microtvm/zephyr/.../aot_standalone_demo)
 * calls the model: the header's structs, its size macros, tvmgen_default_run. */
#include <float.h>
#include <stdint.h>
#include <stdio.h>

#include "tvmgen_default.h"

static float input_data[TVMGEN_DEFAULT_X_SIZE / sizeof(float)];
static float output_data[TVMGEN_DEFAULT_OUTPUT_SIZE / sizeof(float)];
static const size_t output_data_len = TVMGEN_DEFAULT_OUTPUT_SIZE / sizeof(float);
#ifdef TVMGEN_DEFAULT_GLOBAL_WORKSPACE_WORKSPACE_POOL_SIZE
/* as TVM's AOT test harness places an external pool (USMP) */
static uint8_t global_workspace[TVMGEN_DEFAULT_GLOBAL_WORKSPACE_WORKSPACE_POOL_SIZE]
    __attribute__((aligned(16)));
#endif

int main(int argc, char** argv) {
  FILE* f;
  size_t i, max_ind = 0;
  float max_val = -FLT_MAX;
  int32_t ret_val;
  struct tvmgen_default_inputs inputs = {
      .x = input_data,
  };
  struct tvmgen_default_outputs outputs = {
      .output = output_data,
  };
#ifdef TVMGEN_DEFAULT_GLOBAL_WORKSPACE_WORKSPACE_POOL_SIZE
  struct tvmgen_default_workspace_pools workspace_pools = {
      .global_workspace = global_workspace,
  };
#endif
  if (argc != 2 || (f = fopen(argv[1], "rb")) == NULL) return 2;
  if (fread(input_data, 1, TVMGEN_DEFAULT_X_SIZE, f) != TVMGEN_DEFAULT_X_SIZE) return 3;
  fclose(f);
  printf("workspace %d\n", (int)TVMGEN_DEFAULT_WORKSPACE_SIZE);
#ifdef TVMGEN_DEFAULT_GLOBAL_WORKSPACE_WORKSPACE_POOL_SIZE
  ret_val = tvmgen_default_run(&inputs, &outputs, &workspace_pools);
#else
  ret_val = tvmgen_default_run(&inputs, &outputs);
#endif
  if (ret_val != 0) {
    printf("Error: %d\n", (int)ret_val);
    return 4;
  }
  for (i = 0; i < output_data_len; i++) {
    printf("%.9g\n", (double)output_data[i]);
    if (output_data[i] >= max_val) {
      max_ind = i;
      max_val = output_data[i];
    }
  }
  printf("result:%d\n", (int)max_ind);
  return 0;
}
"""


def build_and_run_demo(mlf_dir, tmp_path, x):
    demo = tmp_path / "demo.c"
    demo.write_text(DEMO_C)
    srcs = sorted(str(p) for p in (mlf_dir / "codegen/host/src").glob("*.c"))
    exe = tmp_path / "demo"
    subprocess.run(["cc", *CFLAGS, str(demo), *srcs, "-I", str(mlf_dir / "codegen/host/include"),
                    "-o", str(exe), "-lm"], check=True)
    (tmp_path / "x.bin").write_bytes(np.ascontiguousarray(x, "<f4").tobytes())
    p = subprocess.run([str(exe), str(tmp_path / "x.bin")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.split()
    return np.array([float(v) for v in lines[2:-1]]), lines


@pytest.mark.parametrize("which", ["tar", "pools"])
def test_aot_standalone_demo_compiles_unchanged_and_runs(mlfs, tmp_path, which):
    mlf = mlfs[which]
    if which == "tar":
        _extract(mlf, tmp_path / "mlf")
        mlf = tmp_path / "mlf"
    h = (mlf / "codegen/host/include/tvmgen_default.h").read_text()
    assert ("TVMGEN_DEFAULT_GLOBAL_WORKSPACE_WORKSPACE_POOL_SIZE" in h) == (which == "pools")
    x, ref = reference()
    out, lines = build_and_run_demo(mlf, tmp_path, x)
    np.testing.assert_allclose(out, ref.ravel(), rtol=1e-5, atol=1e-6)
    assert lines[-1] == f"result:{int(np.argmax(ref))}"


# -- output names ----------------------------------------------------------------------------
def _two_outputs(input_name="x"):
    g = helper.make_graph(
        [helper.make_node("Relu", [input_name], ["r.out"]),
         helper.make_node("Neg", [input_name], ["n"])], "two",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("r.out", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("n", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def members(cm, kind):
    h = cm.sources[f"codegen/host/include/tvmgen_{cm.module_name}.h"]
    body = re.search(rf"struct tvmgen_\w+_{kind} {{(.*?)}};", h, re.S).group(1)
    return re.findall(r"void\* (\w+);", body)


def test_output_names_microtvm_and_onnx():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    cm = mtvm.compile(_two_outputs(), output_names="microtvm")
    assert members(cm, "outputs") == ["output0", "output1"]
    assert list(cm.metadata["modules"]["default"]["memory"]["functions"]["main"][0]
                ["outputs"]) == ["output0", "output1"]
    y = cm.run_host({"x": x})                       # results keep the ONNX names
    np.testing.assert_array_equal(y["r.out"], np.maximum(x, 0))
    np.testing.assert_array_equal(y["n"], -x)
    assert members(mtvm.compile(_two_outputs()), "outputs") == ["r_out", "n"]   # default
    # an input named like microTVM's output gives way (one namespace for the macros)
    cm = mtvm.compile(_two_outputs("output0"), output_names="microtvm")
    assert members(cm, "inputs") == ["output0_1"] and members(cm, "outputs") == [
        "output0", "output1"]
    with pytest.raises(MtvmError, match="output_names 'tvm'"):
        mtvm.compile(_two_outputs(), output_names="tvm")


# -- mtvm project generate MODEL.tar -----------------------------------------------------------
def test_generate_from_mlf_runs_through_a_session(mlfs, tmp_path, capsys):
    d = str(tmp_path / "proj")
    assert cli(["project", "generate", str(mlfs["onnx_names"]), "--board", "host",
                "-o", d]) == 0
    assert "model sensor_mlp" in capsys.readouterr().out
    proj = mtvm.project.load(d)
    assert proj.info["model_library"] == str(mlfs["onnx_names"]) and \
        proj.info["model_path"] is None
    # the project's model/ is the MLF's files, byte for byte
    with tarfile.open(mlfs["onnx_names"]) as tf:
        for m in tf.getmembers():
            assert pathlib.Path(d, "model", m.name).read_bytes() == tf.extractfile(m).read()
    proj.build(quiet)
    x, ref = reference()
    with proj.session() as sess:
        y = sess.executor.run({"x": x})
    np.testing.assert_allclose(y["probs"], ref, rtol=1e-5, atol=1e-6)


def test_generate_from_mlf_directory_standalone(mlfs, tmp_path):
    x, ref = reference()
    proj = mtvm.project.generate(str(mlfs["pools"]), board="host", out_dir=tmp_path / "app",
                                 kind="standalone", sample={"x": x}, progress=quiet)
    assert proj.metadata["external_workspace"]
    proj.build(quiet)
    p = subprocess.run([proj.path("build", "mtvm_app")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("output 0 probs"))
    np.testing.assert_allclose([float(v) for v in line.split(":", 1)[1].split()], ref.ravel(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.device
@pytest.mark.skipif(not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")),
                    reason="arm-none-eabi-gcc or qemu-system-arm not installed")
def test_generate_from_cortex_m4_mlf_runs_on_qemu(tmp_path, capsys):
    """An MLF compiled for the board's target (mtvm compile --board mps2-an386) becomes
    an mps2-an386 project, runs under QEMU through a session; the host board refuses it."""
    tar = tmp_path / "m4.tar"
    assert cli(["compile", EXAMPLE, "--board", "mps2-an386", "-o", str(tar)]) == 0
    capsys.readouterr()
    _one_line_error(capsys, ["project", "generate", str(tar), "--board", "host",
                             "-o", str(tmp_path / "h")],
                    "target cortex-m4 does not run on board host")
    proj = mtvm.project.generate(tar, board="mps2-an386", out_dir=tmp_path / "an386",
                                 progress=quiet).build(quiet)
    x, ref = reference()
    with proj.flash(quiet):
        with proj.session() as sess:
            y = sess.executor.run({"x": x})
    np.testing.assert_allclose(y["probs"], ref, rtol=1e-5, atol=1e-6)


def _one_line_error(capsys, argv, match):
    assert cli(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(match, err), err


def test_foreign_or_broken_mlf_gives_one_line(mlfs, tmp_path, capsys):
    out = str(tmp_path / "p")
    # TVM's own MLF: microTVM's keys, none of mtvm's
    tvm = tmp_path / "tvm"
    (tvm / "codegen/host/src").mkdir(parents=True)
    (tvm / "codegen/host/src/default_lib0.c").write_text("int x;\n")
    (tvm / "metadata.json").write_text(json.dumps(
        {"version": 7, "modules": {"default": {"executors": ["aot"], "style": "full-model"}}}))
    with tarfile.open(tmp_path / "tvm.tar", "w") as tf:
        tf.add(tvm, arcname=".")
    _one_line_error(capsys, ["project", "generate", str(tmp_path / "tvm.tar"), "-o", out],
                    r"Model Library Format that mtvm did not write \(version 7, modules "
                    r"default\)")
    (tmp_path / "junk.tar").write_bytes(b"not a tar at all" * 64)
    _one_line_error(capsys, ["project", "generate", str(tmp_path / "junk.tar"), "-o", out],
                    "is not a Model Library Format: not a readable tar")
    (tmp_path / "empty").mkdir()
    _one_line_error(capsys, ["project", "generate", str(tmp_path / "empty"), "-o", out],
                    "is not a Model Library Format: it has no metadata.json")
    _one_line_error(capsys, ["project", "generate", str(mlfs["tar"]), "-o", out, "--profile",
                             "--target", "c"], "--target, --profile are options for compiling")
    # mtvm's MLF without its entry source; a member escaping the archive
    broken = tmp_path / "broken"
    shutil.copytree(mlfs["pools"], broken)
    os.remove(broken / "codegen/host/src/tvmgen_default.c")
    _one_line_error(capsys, ["project", "generate", str(broken), "-o", out],
                    r"tvmgen_default\.c missing")
    with tarfile.open(tmp_path / "evil.tar", "w") as tf:
        tf.add(mlfs["pools"] / "metadata.json", arcname="../metadata.json")
    _one_line_error(capsys, ["project", "generate", str(tmp_path / "evil.tar"), "-o", out],
                    "outside the archive")
    assert not os.path.exists(out) and not (tmp_path.parent / "metadata.json").exists()
