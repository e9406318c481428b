"""The command line: exit codes, one-line errors, outputs."""
import subprocess
import sys

import numpy as np
import onnx

from mtvm.testing import make_model


def mtvm(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mtvm", *args], capture_output=True, text=True,
                          cwd=cwd)


def test_compile_writes_mlf_and_dumps_ir(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model("Relu", {"x": np.zeros((2, 3), np.float32)}), path)
    p = mtvm("compile", str(path), "-o", str(tmp_path / "out"), "--dump-ir", "--module-name", "kws")
    assert p.returncode == 0, p.stderr
    assert "Relu(%x)" in p.stdout and "arena" in p.stdout
    assert (tmp_path / "out/codegen/host/include/tvmgen_kws.h").exists()
    again = mtvm("compile", str(path), "-o", str(tmp_path / "out"))
    assert again.returncode == 1 and "not empty" in again.stderr


def test_errors_are_one_line_without_traceback(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("this is not protobuf")
    p = mtvm("compile", str(bad), "-o", str(tmp_path / "o"))
    assert p.returncode == 1
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1
    assert p.stderr.startswith("error: bad.onnx: not a valid ONNX model")
    v = mtvm("--verbose", "compile", str(bad), "-o", str(tmp_path / "o"))
    assert "Traceback" in v.stderr


def test_bad_input_shape_option(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model("Relu", {"x": np.zeros((2, 3), np.float32)}), path)
    p = mtvm("compile", str(path), "--input-shape", "x=1,2")
    assert p.returncode == 1 and "expected NAME:D1,D2" in p.stderr


def test_analyze(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model("Sigmoid", {"x": np.zeros((2, 3), np.float32)}), path)
    p = mtvm("analyze", str(path))
    assert p.returncode == 0 and "Sigmoid" in p.stdout and "MACs" in p.stdout


def test_compile_memory_table_and_io_in_workspace(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model("Relu", {"x": np.zeros((2, 3), np.float32)}), path)
    p = mtvm("compile", str(path), "--memory", "--io-in-workspace")
    assert p.returncode == 0, p.stderr
    assert "live bytes" in p.stdout and "lower bound" in p.stdout
    assert "inputs/outputs in the arena" in p.stdout
