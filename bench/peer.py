"""Host latency of a peer ONNX -> C compiler, emx-onnx-cgen (PyPI), for the
side-by-side table of bench/host.py.

Its C is generated with its default options (`emx-onnx-cgen compile model.onnx
out.c`), built like mtvm's (cc -O3 -march=native, shared library) and called
in-process through ctypes on the model's sample input: the entry function
`void <name>(const float in[...], float out[...])`, one input and one output.
Returns None when the tool is not installed; an error string when it fails
on a model.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

ENTRY_RE = re.compile(r"^void (\w+)\(const float \w+\[restrict [^\n]*, float \w+\[", re.M)


def available() -> bool:
    return shutil.which("emx-onnx-cgen") is not None


def build(path: str, workdir: str | None = None, march: str = "native"):
    """(callable taking (x, y) float32 arrays, seconds to generate + build) or an error."""
    import time
    work = workdir or tempfile.mkdtemp(prefix="emx-")
    c_file = os.path.join(work, "model.c")
    so = os.path.join(work, "libmodel.so")
    t = time.perf_counter()
    r = subprocess.run(["emx-onnx-cgen", "compile", "--color", "never", path, c_file],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return f"emx-onnx-cgen failed: {(r.stderr or r.stdout).strip().splitlines()[-1][:80]}"
    with open(c_file) as f:
        m = ENTRY_RE.search(f.read())
    if m is None:
        return "no float entry function found"
    r = subprocess.run(["cc", "-O3", f"-march={march}", "-shared", "-fPIC", "-w", c_file, "-o", so,
                        "-lm"], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return f"cc failed: {r.stderr.strip().splitlines()[-1][:80]}"
    fn = getattr(ctypes.CDLL(so), m.group(1))
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    seconds = time.perf_counter() - t

    def run(x: np.ndarray, y: np.ndarray) -> None:
        fn(x.ctypes.data, y.ctypes.data)
    return run, seconds
