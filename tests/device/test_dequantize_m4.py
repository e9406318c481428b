"""A large DequantizeLinear on the Cortex-M4 (mps2-an386): its 256-entry float table read
four input bytes a word load (mtvm_lut32_*_dsp), int8 and uint8, a length with a tail of
three; the outputs the host build's, bit for bit."""
import numpy as np
import pytest

import mtvm
from mtvm.testing import make_model, run_on_board

from device_utils import need_qemu

pytestmark = pytest.mark.device


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
def test_dequantize_table_on_mps2_an386(dtype, tmp_path):
    need_qemu()
    info = np.iinfo(dtype)
    q = np.resize(np.arange(info.min, info.max + 1), 603).astype(dtype).reshape(1, 603)
    np.random.default_rng(5).shuffle(q[0])
    m = make_model("DequantizeLinear", {"q": q},
                   consts={"s": np.float32(0.0371), "z": np.asarray(7, dtype)}, opset=13)
    host = mtvm.compile(m).run_host({"q": q})
    lib = mtvm.compile(m, target="cortex-m4")
    assert "mtvm_lut32_" in "\n".join(lib.sources.values())
    dev = run_on_board(lib, {"q": q}, tmp_path / "proj")
    for k in host:
        np.testing.assert_array_equal(dev[k].view(np.uint32), host[k].view(np.uint32))
