"""The Arm kernels' inline assembly at the optimization levels users build with: every
shared model compiled for the Cortex-M4F (DSP, FPv4) builds its kernels at -O0 (a debug
build: no constant propagation, r7 kept as the frame pointer) and -Os (Zephyr's and
Arduino's default) with -Werror, within a time limit. The board templates build at -O2
(the device tests); a kernel whose register operands cannot be found at another level
fails here with gcc's error, and one where gcc's allocator does not come back -- the
six-sum dot product did at -O0 until it was limited to optimized builds -- fails on the
timeout instead of hanging the user's build."""
from __future__ import annotations

import functools
import glob
import os
import signal
import subprocess

import pytest

import mtvm
from mtvm.testing import have, models_dir

MODELS = sorted(os.path.splitext(os.path.basename(p))[0]
                for p in glob.glob(os.path.join(models_dir(), "*.onnx")))
ARCH = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
COMPILE_SECONDS = 120

pytestmark = pytest.mark.skipif(not (have("arm-none-eabi-gcc") and MODELS),
                                reason="arm-none-eabi-gcc or ../shared/models missing")


@functools.lru_cache(maxsize=None)
def _exported(name: str, root: str) -> str:
    out = os.path.join(root, name)
    mtvm.compile(os.path.join(models_dir(), name + ".onnx"), target="cortex-m4").export(
        out, force=True)
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("mlf"))


@pytest.mark.parametrize("opt", ["-O0", "-Os"])
@pytest.mark.parametrize("name", MODELS)
def test_kernels_build_at(name, opt, root):
    mlf = _exported(name, root)
    for src in sorted(glob.glob(os.path.join(mlf, "codegen", "host", "src", "*.c"))):
        cmd = ["arm-none-eabi-gcc", *ARCH, opt, "-std=c99", "-Wall", "-Wextra", "-Werror",
               "-I", os.path.join(mlf, "codegen", "host", "include"), "-c", src,
               "-o", os.devnull]
        # its own process group: on the timeout cc1 (gcc's child) is killed too
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            _, err = p.communicate(timeout=COMPILE_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            pytest.fail(f"{name}: gcc {opt} did not finish {os.path.basename(src)} in "
                        f"{COMPILE_SECONDS} s")
        assert p.returncode == 0, f"{name} {opt} {os.path.basename(src)}:\n{err[-2000:]}"
