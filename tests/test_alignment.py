"""Where the model's arrays start. On x86 (and target c, whose AVX-512 kernels run
under #if) the arena and the weights of a cache line or more start on a cache line, so
that a 512-bit load never splits one: a shared library once put the arena 48 bytes
into a line and resnet_v16's 3x3 convs took 1.8x their time. On a microcontroller the
weights keep their natural alignment (padding there would be flash)."""
import shutil
import subprocess

import numpy as np
import pytest

import mtvm
from mtvm.host_runner import HostModule, build_shared
from mtvm.testing import conv_relu_conv, reference_outputs


def symbols(path: str) -> dict[str, int]:
    """Defined data symbols of an object or library: name -> address."""
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    return {f[2]: int(f[0], 16) for f in (line.split() for line in out.splitlines())
            if len(f) == 3 and f[1] in "bBdDrR"}


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
@pytest.mark.parametrize("target", ["c", "host"])
def test_arena_and_weights_start_on_a_cache_line(target):
    model = conv_relu_conv(12, seed=5)
    lib = mtvm.compile(model, target=target)
    assert "aligned(64)" in lib.sources["codegen/host/src/tvmgen_default_constants.c"]
    syms = symbols(build_shared(lib, opt="-O2"))
    weights = {n: a for n, a in syms.items() if n.startswith("tvmgen_default_c_")}
    assert weights and "tvmgen_default_workspace" in syms
    big = [n for n in weights if n.endswith("_w")]   # the convs' packed weights
    assert big
    for name in big + ["tvmgen_default_workspace"]:
        assert syms[name] % 64 == 0, f"{name} at {syms[name]:#x}"
    # and the outputs are the same
    x = np.random.default_rng(1).standard_normal((1, 8, 12, 12)).astype(np.float32)
    got = list(HostModule(lib, opt="-O2").run({"x": x}).values())[0]
    np.testing.assert_allclose(got, reference_outputs(model, {"x": x})[0], rtol=1e-4,
                               atol=1e-5)


def test_microcontroller_weights_keep_their_alignment():
    lib = mtvm.compile(conv_relu_conv(12, seed=5), target="cortex-m4")
    assert "aligned(64)" not in lib.sources["codegen/host/src/tvmgen_default_constants.c"]
    assert "aligned(16)" in lib.sources["codegen/host/src/tvmgen_default.c"]
