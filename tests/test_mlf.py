"""Model Library Format output and the C interface it carries."""
import json
import subprocess
import tarfile

import numpy as np
import pytest
from onnx import helper, TensorProto

import mtvm
from mtvm.errors import MtvmError
from mtvm.host_runner import compile_c
from mtvm.testing import assert_close, make_model


@pytest.fixture(scope="module")
def lib():
    x = np.zeros((1, 4, 5), np.float32)
    return mtvm.compile(make_model("Sigmoid", {"input.1": x}), module_name="My-Model")


def test_directory_layout_and_metadata(lib, tmp_path):
    out = tmp_path / "mlf"
    lib.export(out)
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert "codegen/host/include/tvmgen_my_model.h" in files
    assert "metadata.json" in files and "src/my_model.ir.txt" in files
    assert any(f.startswith("codegen/host/src/") and f.endswith(".c") for f in files)
    md = json.loads((out / "metadata.json").read_text())
    assert md["inputs"] == [{"name": "input.1", "c_name": "input_1", "shape": [1, 4, 5],
                             "dtype": "float32", "size_bytes": 80, "quantization": None}]
    for key in ("format_version", "workspace_bytes", "workspace_lower_bound", "constant_bytes",
                "operators", "outputs", "model_name", "module_name"):
        assert key in md
    assert md["operators"][0]["kind"] == "Sigmoid"


def test_header_interface(lib):
    h = lib.sources["codegen/host/include/tvmgen_my_model.h"]
    assert "#define TVMGEN_MY_MODEL_INPUT_1_SIZE 80" in h
    assert "#define TVMGEN_MY_MODEL_WORKSPACE_SIZE" in h
    assert "struct tvmgen_my_model_inputs {\n    void* input_1;\n};" in h
    assert "int32_t tvmgen_my_model_run(struct tvmgen_my_model_inputs* inputs, " \
           "struct tvmgen_my_model_outputs* outputs);" in h


def test_tar_export_and_no_overwrite(lib, tmp_path):
    path = tmp_path / "m.tar"
    lib.export(path)
    with tarfile.open(path) as t:
        assert "metadata.json" in t.getnames()
    with pytest.raises(MtvmError, match="exists"):
        lib.export(path)
    lib.export(path, force=True)
    d = tmp_path / "d"
    d.mkdir()
    (d / "mine.txt").write_text("user data")
    with pytest.raises(MtvmError, match="not empty"):
        lib.export(d)
    assert (d / "mine.txt").read_text() == "user data"


def test_external_workspace():
    x = np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Exp", ["x"], ["e"]),
                           helper.make_node("Exp", ["x"], ["f"]),
                           helper.make_node("Add", ["e", "f"], ["y"])], "ws",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 7])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 7])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    lib = mtvm.compile(m, external_workspace=True, fuse=False)
    h = lib.sources["codegen/host/include/tvmgen_default.h"]
    assert "struct tvmgen_default_workspace_pools" in h
    assert "tvmgen_default_workspace[" not in lib.sources["codegen/host/src/tvmgen_default.c"]
    assert lib.metadata["workspace_bytes"] > 0
    assert_close(lib.run_host({"x": x})["y"], 2 * np.exp(x))
    assert_close(lib.run_host({"x": x}, sanitize=True)["y"], 2 * np.exp(x))


def test_large_constants_compile_quickly(tmp_path):
    """4M float weights (16 MB) as a byte-string blob: gcc takes seconds, not minutes."""
    import time
    w = np.random.default_rng(0).standard_normal(4_000_000).astype(np.float32)
    m = make_model("Add", {"x": np.zeros(4_000_000, np.float32)}, consts={"w": w})
    lib = mtvm.compile(m)
    lib.export(tmp_path / "big")
    t = time.time()
    compile_c(["cc", "-c", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror",
               str(tmp_path / "big/codegen/host/src/tvmgen_default_constants.c"),
               "-I", str(tmp_path / "big/codegen/host/src"), "-o", str(tmp_path / "c.o")], "big")
    elapsed = time.time() - t
    x = np.ones(4_000_000, np.float32)
    assert_close(lib.run_host({"x": x})["y0"], x + w)
    print(f"16 MB of constants compiled in {elapsed:.1f} s")


def test_large_all_zero_constant_stays_const_in_flash(tmp_path):
    """A big all-zero weight (synthetic models) is written `{ { 0 } }`, not spelled
    out, and is still const: it lands in .rodata (flash), not in RAM."""
    w = np.zeros(1 << 15, np.float32)                      # 128 KiB of zeros
    m = make_model("Add", {"x": np.zeros(1 << 15, np.float32)}, consts={"w": w})
    lib = mtvm.compile(m)
    lib.export(tmp_path / "z")
    src = tmp_path / "z/codegen/host/src/tvmgen_default_constants.c"
    text = src.read_text()
    assert "{ { 0 } };" in text and len(text) < 10_000
    obj = tmp_path / "c.o"
    compile_c(["cc", "-c", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", str(src),
               "-I", str(tmp_path / "z/codegen/host/src"), "-o", str(obj)], "zeros")
    sizes = subprocess.run(["size", "-A", str(obj)], capture_output=True, text=True).stdout
    section = {ln.split()[0]: int(ln.split()[1]) for ln in sizes.splitlines()[2:] if ln.strip()
               and ln.split()[1].isdigit()}
    assert section.get(".rodata", 0) >= w.nbytes and section.get(".bss", 0) < w.nbytes
    x = np.arange(1 << 15, dtype=np.float32)
    assert_close(lib.run_host({"x": x})["y0"], x)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_equal_constants_are_stored_once(backend):
    """Two initializers of the same bytes (the zero biases of several layers) are
    one constant in flash: one definition, counted once in constant_bytes; a
    short constant's byte view is its exact size (no string terminator)."""
    from onnx import numpy_helper
    rng = np.random.default_rng(3)
    big = rng.standard_normal(100).astype(np.float32)       # the byte-string form
    other = rng.standard_normal(100).astype(np.float32)
    small = rng.standard_normal((4, 4)).astype(np.float32)  # the readable form
    inits = [numpy_helper.from_array(v, n) for n, v in
             (("a", big), ("b", other), ("c", big.copy()), ("d", small), ("e", small.copy()),
              ("shape", np.array([25, 4], np.int64)))]
    nodes = [helper.make_node(op, ins, [out]) for op, ins, out in (
        ("Add", ["x", "a"], "t0"), ("Sigmoid", ["t0"], "t1"), ("Mul", ["t1", "b"], "t2"),
        ("Tanh", ["t2"], "t3"), ("Add", ["t3", "c"], "t4"), ("Relu", ["t4"], "t5"),
        ("Reshape", ["t5", "shape"], "t6"), ("MatMul", ["t6", "d"], "t7"),
        ("MatMul", ["t7", "e"], "y"))]
    g = helper.make_graph(nodes, "dedup",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [100])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [25, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    lib = mtvm.compile(m, backend=backend)
    x = rng.standard_normal(100).astype(np.float32)
    t6 = np.maximum(np.tanh((1 / (1 + np.exp(-(x + big)))) * other) + big, 0).reshape(25, 4)
    assert_close(lib.run_host({"x": x})["y"], t6 @ small @ small)
    assert lib.metadata["constant_bytes"] == big.nbytes + other.nbytes + small.nbytes
    if backend == "c":
        consts = lib.sources["codegen/host/src/tvmgen_default_constants.c"]
        assert consts.count("const union") == 3, consts
        header = lib.sources["codegen/host/src/tvmgen_default_internal.h"]
        assert "unsigned char bytes[64]; float data[16];" in header       # 16 floats, exactly
        assert "unsigned char bytes[401]; float data[100];" in header     # and the terminator
