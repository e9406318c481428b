"""Models of the shared families with sizes mtvm was not developed on (bench/variants.py,
its seed 2: other resolutions, widths, kernels, dilations, sequence lengths and heads
than the shared models and than the bench's seed 1): each compiles, runs on the host
within tolerance of onnxruntime (float: 1e-4 of the output's range; int8: one step of
the output's last quantization) and plans its arena at the lower bound (for the host, AVX2, Cortex-M4 and RV32 targets)."""
from __future__ import annotations

import functools
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import mtvm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import variants  # noqa: E402

SEED = 2


@functools.lru_cache(maxsize=None)
def _written(family: str, out: str) -> tuple[str, ...]:
    return tuple(variants.write_family(family, SEED, out))


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("variants"))


def _output_step(path: str) -> float:
    m = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    last_q = [n for n in m.graph.node if n.op_type == "QuantizeLinear"][-1]
    return float(inits[last_q.input[1]])


@pytest.mark.parametrize("family", variants.FAMILIES)
def test_variant_runs_within_tolerance_at_the_arena_bound(family, out_dir):
    for path in _written(family, out_dir):
        ref = np.load(path[:-5] + ".npz")
        lib = mtvm.compile(path)
        got = lib.run_host([ref["in_0"]])
        for i, y in enumerate(got.values()):
            r = ref[f"out_{i}"]
            if path.endswith("_int8.onnx"):
                tol = _output_step(path) * 1.001
            else:
                tol = 1e-4 * max(float(np.abs(r).max()), 1e-6)
            assert np.abs(y - r).max() <= tol, f"{os.path.basename(path)} output {i}"
        for target in ("host", "x86-64-v3", "cortex-m4", "rv32imac"):
            md = (lib if target == "host" else mtvm.compile(path, target=target)).metadata
            assert md["workspace_bytes"] == md["workspace_lower_bound"], \
                f"{os.path.basename(path)} for {target}"
