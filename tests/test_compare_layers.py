"""`mtvm run DIR --input x.npy --compare-layers`: every kernel output of the
debug build on the device, against the host build and onnxruntime. A clean
build is within tolerance at every layer; a build with one constant of one
layer changed in its generated constants .c (test-only fault injection: a
weight byte, or a bias when the kernel packed its weights into its own code)
is named at that layer first, with its ONNX nodes. One run on mps2-an386
under QEMU (a device test)."""
import os
import re
import shutil

import numpy as np
import pytest

import mtvm
from mtvm.cli import main as cli
from mtvm.compare_layers import DEBUG_DIR
from mtvm.testing import models_dir

MODEL = os.path.join(models_dir(), "kws_dscnn_int8.onnx")
LAYER = 3          # a pointwise QConv in the middle of the network: /f/f.6/Conv

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason=f"{MODEL} not found")


def _input(tmp_path) -> str:
    path = str(tmp_path / "x.npy")
    with np.load(MODEL[:-5] + ".npz") as z:
        np.save(path, z["in_0"])
    return path


def _constant_read_by(project_dir: str, layer: int) -> str:
    """A constant input of kernel `layer` that its C, as the project's compiler
    sees it (preprocessed for the target), reads: a schedule may have packed the
    weights into the kernel itself. The kernel's inK parameters are its node's
    inputs in order, as the project's target lays them out (its schedule may read
    its weights in another order, under another name)."""
    import json
    import subprocess
    from mtvm.target import Target
    model = os.path.join(project_dir, "model")
    with open(os.path.join(model, "metadata.json")) as f:
        target = Target.parse(json.load(f)["target"]["name"])
    lib = mtvm.compile(MODEL, target=target)
    kernel = lib.kernels[layer].kernel
    fname = kernel.fname
    src = os.path.join(model, "codegen", "host", "src")
    path = next(os.path.join(src, f) for f in os.listdir(src) if f.endswith("_kernels.c"))
    text = subprocess.run(["cc", "-E", "-P", *target.cflags(), "-I", src, "-I",
                           os.path.join(model, "codegen", "host", "include"), path],
                          capture_output=True, text=True, check=True).stdout
    start = re.search(rf"\b{fname}\([^;{{]*\)\s*\{{", text).end()   # the definition
    end = text.find("\nint32_t ", start)
    body = text[start:end if end > 0 else len(text)]
    for k, buf in enumerate(kernel.ins):
        used = re.sub(rf"\(void\)\s*in{k}\s*;", "", body)
        if buf is not None and buf.const is not None and re.search(rf"\bin{k}\b", used):
            return buf.name
    raise AssertionError(f"{fname} reads none of its constants from the constants file")


def corrupt_constant(project_dir: str, tensor: str) -> None:
    """Test-only fault injection in the generated constants .c: the first byte
    of `tensor`'s data flipped by 0x80 (int8: an octal escape in a string), or
    its first element + 100000 (int32: a braced list)."""
    src = os.path.join(project_dir, "model", "codegen", "host", "src")
    path = next(os.path.join(src, f) for f in os.listdir(src) if f.endswith("_constants.c"))
    with open(path) as f:
        text = f.read()
    at = text.index(f"/* {tensor}: ")
    m = re.compile(r'"\\([0-7]{3})|\.data = \{ (-?\d+)').search(text, at)
    assert m, f"no data after {tensor}'s comment"
    if m.group(1):
        new, span = f"{int(m.group(1), 8) ^ 0x80:03o}", m.span(1)
    else:
        new, span = str(int(m.group(2)) + 100000), m.span(2)
    with open(path, "w") as f:
        f.write(text[:span[0]] + new + text[span[1]:])


def test_clean_build_within_tolerance_then_the_corrupted_layer_first(tmp_path, capsys):
    proj = str(tmp_path / "kws")
    assert cli(["project", "generate", MODEL, "--board", "host", "-o", proj]) == 0
    x = _input(tmp_path)
    capsys.readouterr()
    assert cli(["run", proj, "--input", x, "--compare-layers"]) == 0
    out = capsys.readouterr().out
    assert "all 14 layers within tolerance" in out, out
    assert "vs host" in out and "onnxruntime" in out

    debug = os.path.join(proj, DEBUG_DIR)
    corrupt_constant(debug, _constant_read_by(debug, LAYER))
    assert cli(["run", proj, "--input", x, "--compare-layers"]) == 1
    out = capsys.readouterr().out
    first = re.search(r"first layer out of tolerance: (.*)", out)
    assert first, out
    assert first.group(1).startswith(f"layer {LAYER} QConv"), first.group(1)
    assert "/f/f.6/Conv (Conv)" in first.group(1) and "QuantizeLinear" in first.group(1)
    # the layers before it agree; the later ones compute right on their own inputs
    rows = {int(r.split()[0]): r for r in out.splitlines() if re.match(r"^\d+\s", r)}
    assert all(rows[i].endswith("OK") for i in range(LAYER)), out
    assert rows[LAYER].endswith("FAIL")
    assert re.search(r"\s0 st\s+inputs differ$", rows[LAYER + 1]), rows[LAYER + 1]
    assert not any(rows[i].endswith("FAIL") for i in range(LAYER + 1, 14)), out


def test_refuses_what_it_cannot_do(tmp_path, capsys):
    lib = mtvm.compile(MODEL)
    proj = str(tmp_path / "mlf")
    mtvm.project.generate(lib, board="host", out_dir=proj, progress=lambda m: None)
    assert cli(["run", proj, "--compare-layers"]) == 1
    assert "needs the ONNX model" in capsys.readouterr().err
    assert cli(["run", proj, "--compare-layers", "--validate"]) == 1
    assert "cannot go with it" in capsys.readouterr().err


@pytest.mark.device
def test_on_mps2_an386(tmp_path, capsys):
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    proj = str(tmp_path / "kws-m4")
    assert cli(["project", "generate", MODEL, "--board", "mps2-an386", "-o", proj]) == 0
    capsys.readouterr()
    assert cli(["run", proj, "--input", _input(tmp_path), "--compare-layers"]) == 0
    out = capsys.readouterr().out
    assert "on mps2-an386" in out and "all 14 layers within tolerance" in out, out
