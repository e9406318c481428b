"""Softmax's lanes form (mtvm/ops/softmax.py, vector_row_body): on x86 and the portable
target a contiguous float row of at least 16 takes its maximum and its sum in eight
lanes and its exponentials from the branch-free mtvm_exp_f32, so that gcc vectorizes
every pass. Checked: the values (rows of every tail length, NaN and infinities, built
at -O3 for this machine, AVX2 and the portable ISA), that gcc vectorizes the kernel's
loops, and that a Cortex-M target keeps the one-pass loop."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import mtvm
from mtvm.host_runner import HostModule
from mtvm.testing import make_model

from .kernel_harness import WARN

NAN, INF = np.float32(np.nan), np.float32(np.inf)
BUILDS = [("-O3", ["-march=native"]), ("-O3", ["-march=x86-64-v3"]), ("-O2", [])]


def _rows(n: int) -> np.ndarray:
    """Rows of length n: plain, large (x - max keeps them finite), NaN first, NaN in the
    lanes, NaN in the tail, +inf, -inf in a few places, all -inf."""
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((8, n)) * 4).astype(np.float32)
    x[1] = x[1] * 20 + 300
    x[2, 0] = NAN
    x[3, min(5, n - 1)] = NAN
    x[4, n - 1] = NAN
    x[5, n // 2] = INF
    x[6, [0, n // 3, n - 1]] = -INF
    x[7] = -INF
    return x


def _expected(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        s = x.astype(np.float64) - x.max(axis=1, keepdims=True)
        e = np.exp(s)
        return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="builds for x86 ISAs")
@pytest.mark.parametrize("n", [16, 17, 23, 50, 64, 129])
def test_lanes_rows_match_numpy_with_nan_and_infinities(n):
    x = _rows(n)
    lib = mtvm.compile(make_model("Softmax", {"x": x}, {"axis": -1}, opset=13))
    assert "sum0" in lib.sources["codegen/host/src/tvmgen_default_kernels.c"]  # the lanes form
    expected = _expected(x)
    feeds = {lib.metadata["inputs"][0]["name"]: x}
    for opt, extra in BUILDS:
        got = list(HostModule(lib, opt=opt, extra=extra).run(feeds).values())[0]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=str(extra))
        finite = ~np.isnan(expected)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=2e-6, atol=1e-12,
                                   err_msg=f"{opt} {extra}")


@pytest.mark.skipif(shutil.which("gcc") is None or os.uname().machine != "x86_64",
                    reason="needs gcc on x86")
@pytest.mark.parametrize("march", ["x86-64-v3", "x86-64-v4"])
def test_every_pass_of_a_lanes_row_is_vectorized(march):
    """The maximum's lanes, the exponentials, the sum's lanes and the scaling: at least
    four loops of the kernel reported vectorized."""
    x = _rows(50)
    lib = mtvm.compile(make_model("Softmax", {"x": x}, {"axis": -1}, opset=13))
    with tempfile.TemporaryDirectory(prefix="mtvm-softmax-") as tmp:
        for rel, text in lib.sources.items():
            with open(os.path.join(tmp, os.path.basename(rel)), "w") as f:
                f.write(text)
        src = os.path.join(tmp, "tvmgen_default_kernels.c")
        p = subprocess.run(["gcc", "-O3", f"-march={march}", *WARN, "-fopt-info-vec-optimized",
                            "-I", tmp, "-c", src, "-o", os.path.join(tmp, "k.o")],
                           capture_output=True, text=True, timeout=120)
        text = open(src).read()
    assert p.returncode == 0, p.stderr
    start = text.index("softmax(")
    first = text[:start].count("\n") + 1                  # the kernel's lines
    last = first + text[start:text.index("\n}\n", start)].count("\n")
    lines = {int(m.group(1)) for m in re.finditer(r"kernels\.c:(\d+):\d+: optimized: loop vectorized",
                                                  p.stderr)}
    assert len({ln for ln in lines if first <= ln <= last}) >= 4, (first, last, p.stderr)


def test_a_cortex_m_target_keeps_the_one_pass_loop():
    """Nothing vectorizes there: the lanes would only add instructions."""
    x = _rows(50)
    lib = mtvm.compile(make_model("Softmax", {"x": x}, {"axis": -1}, opset=13),
                       target="cortex-m4")
    text = lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    assert "mtvm_exp_f32" in text and "sum0" not in text and "pragma" not in text
