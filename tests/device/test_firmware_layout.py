"""The Cortex-M linker script and the fit check: .bss (and the stack) are
NOLOAD with their load address in RAM, so no loader zero-fills flash; the
fit check is the linker's and the ELF's own (a region that overflows fails
the build in one line naming it and by how much).

Before: .bss sat in .data's load segment with a load address in flash; QEMU
zero-filled .bss's size after .data's initial values, wrapping through the
4 MiB SSRAM1 mirror over the vector table, and the board locked up at boot
("qemu: fatal: Lockup") while the size report said the firmware fit."""
import copy
import json
import os
import re
import subprocess

import numpy as np
import onnx
import pytest

from mtvm.boards import load_board
from onnx import numpy_helper

import mtvm.project as P
from mtvm.boards import BOARDS_DIR
from mtvm.errors import MtvmError
from mtvm.firmware import qemu, size

from device_utils import need_gcc, need_qemu, quiet

pytestmark = pytest.mark.device


def big_bss_model(path: str, n: int) -> str:
    """log(1 + |x[1, n] + w|) -> ReduceSum (positive terms: no cancellation): n floats of
    weights and of sample input in flash, n floats of input and of arena in .bss; Log
    links newlib's logf, which brings a non-empty .data (so .data's load segment
    exists, as in the report; Sigmoid and Tanh no longer call libm)."""
    from onnx import TensorProto, helper
    w = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Abs", ["s"], ["m"]),
         helper.make_node("Add", ["m", "one"], ["m1"]), helper.make_node("Log", ["m1"], ["a"]),
         helper.make_node("ReduceSum", ["a"], ["y"], keepdims=1)], "big_bss",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(1.0), "one")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_large_bss_boots_and_bss_is_noload(tmp_path):
    """flash used (2.4 MB) + .bss (2.4 MB) > the 4 MiB of flash: boots and
    computes the sum; .bss is NOBITS and in no load segment placed in flash."""
    need_qemu()
    n = 300_003
    model = big_bss_model(str(tmp_path / "big_bss.onnx"), n)
    x = np.linspace(-2, 2, n, dtype=np.float32).reshape(1, n)
    proj = P.generate(model, board="mps2-an386", out_dir=str(tmp_path / "p"),
                      kind="standalone", sample=[x], progress=quiet)
    proj.build(progress=quiet)
    elf = proj.path("build", "firmware.elf")
    secs = {s.name: s for s in size.elf_sections(elf)}
    assert secs[".data"].size > 0 and secs[".bss"].size > 2 * 4 * (n - 1)
    flash_end = 4 << 20
    assert secs[".rodata"].lma + secs[".rodata"].size + secs[".bss"].size > flash_end
    for name in (".bss", ".stack"):
        assert secs[name].flags == {"ALLOC"}, name                     # NOLOAD
        assert secs[name].lma == secs[name].vma, name                  # loads in RAM
    hdrs = subprocess.run(["arm-none-eabi-readelf", "-S", "-W", elf], capture_output=True,
                          text=True, check=True).stdout
    assert re.search(r"\]\s+\.bss\s+NOBITS", hdrs)
    for seg in size.load_segments(elf):
        if seg.paddr < flash_end:
            assert seg.memsz == seg.filesz, seg        # nothing zero-filled in flash
    r = qemu.run_to_exit("mps2-an386", elf, timeout=60)
    assert r.status == 0, r.output + r.stderr
    assert "Lockup" not in r.stderr
    got = float(re.search(r"output 0 y float32\[1,1\]: (\S+)", r.output).group(1))
    w = numpy_helper.to_array(onnx.load(model).graph.initializer[0])
    ref = float(np.log1p(np.abs(x[0].astype(np.float64) + w)).sum())
    assert got == pytest.approx(ref, rel=1e-4)
    with open(proj.path("build", "size.json")) as f:
        assert json.load(f)["flash_used"] > 2 * 4 * n


def test_layout_check_refuses_bss_loaded_in_flash(tmp_path):
    """The old linker script (no `AT> RAM`): the ELF check names the zero-fill
    in flash (which wraps over the vector table once it passes the end of
    flash) instead of a board that locks up at boot."""
    need_gcc()
    n = 1001
    model = big_bss_model(str(tmp_path / "big_bss.onnx"), n)
    proj = P.generate(model, board="mps2-an386", out_dir=str(tmp_path / "p"),
                      kind="standalone", sample=[np.zeros((1, n), np.float32)], progress=quiet)
    with open(proj.path("link.ld")) as f:
        text = f.read()
    with open(proj.path("link.ld"), "w") as f:
        f.write(text.replace(" AT> RAM", ""))
    with pytest.raises(MtvmError, match=r"mps2-an386: a load segment would zero-fill "
                                        r"[\d,]+ bytes of FLASH \(ZBT SSRAM1\)") as e:
        proj.build(progress=quiet)
    assert "\n" not in str(e.value)


def test_model_too_big_fails_with_the_linkers_words(models, tmp_path):
    """Weights that fit the pre-check but not beside the code: ld's region
    overflow, in one line with the region and the byte count."""
    need_gcc()
    board = copy.deepcopy(load_board("mps3-an547").data)  # merged with its SoC
    n = 130_001                               # 520,004 bytes of weights in 512 KiB of ITCM
    model = big_bss_model(str(tmp_path / "big.onnx"), n)
    board["memory"]["ram"]["size"] = "2M"
    proj = P.generate(model, board=board, out_dir=str(tmp_path / "p"), progress=quiet)
    with pytest.raises(MtvmError) as e:
        proj.build(progress=quiet)
    msg = str(e.value)
    assert "\n" not in msg
    m = re.search(r"does not fit on mps3-an547: region FLASH \(ITCM \(boot memory\), "
                  r"524,288 bytes\) overflowed by ([\d,]+) bytes", msg)
    assert m, msg
    assert int(m.group(1).replace(",", "")) > 0
