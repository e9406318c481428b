"""A large DequantizeLinear on the Cortex-M4 (mps2-an386): its 256-entry float table read
four input bytes a word load (mtvm_lut32_*_dsp), int8 and uint8, a length with a tail of
three; the outputs the host build's, bit for bit. And QuantizeLinear's VCVTR loop with
NaNs, infinities and ties (its once-a-call NaN check)."""
import numpy as np
import pytest

import mtvm
from mtvm.testing import make_model, run_on_board

from device_utils import need_qemu

pytestmark = pytest.mark.device


def board_matches_host(op, name, value, scale, zp, kernel, tmp_path):
    """op (one input `name`, a constant scale and zero point) built for the Cortex-M4 with
    `kernel` in its C, run on mps2-an386: its outputs the host build's, bit for bit."""
    m = make_model(op, {name: value}, consts={"s": np.float32(scale), "z": zp}, opset=13)
    host = mtvm.compile(m).run_host({name: value})
    lib = mtvm.compile(m, target="cortex-m4")
    assert kernel in "\n".join(lib.sources.values())
    dev = run_on_board(lib, {name: value}, tmp_path / "proj")
    for k in host:
        np.testing.assert_array_equal(dev[k].view(np.uint8), host[k].view(np.uint8))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
def test_dequantize_table_on_mps2_an386(dtype, tmp_path):
    need_qemu()
    info = np.iinfo(dtype)
    q = np.resize(np.arange(info.min, info.max + 1), 603).astype(dtype).reshape(1, 603)
    np.random.default_rng(5).shuffle(q[0])
    board_matches_host("DequantizeLinear", "q", q, 0.0371, np.asarray(7, dtype), "mtvm_lut32_",
                       tmp_path)


@pytest.mark.parametrize("dtype,n", [(np.int8, 603), (np.uint8, 600), (np.int8, 64)],
                         ids=["int8-tail3", "uint8", "int8-clean"])
def test_quantize_on_mps2_an386_with_and_without_nans(dtype, n, tmp_path):
    """QuantizeLinear's VCVTR loop, which looks for NaNs once a call (the FPSCR's invalid
    flag) and then redoes the tensor carefully: NaNs, infinities, values beyond int32,
    ties at every half, on the board as on the host; a clean input takes the fast loop
    only and gives the same bytes."""
    need_qemu()
    rng = np.random.default_rng(6)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    x[::7] = (np.round(x[::7] * 2) / 2) * np.float32(0.0371)   # ties after the division
    if n != 64:
        x[[3, 50, n - 1]] = np.nan
        x[[4, 51]] = [np.inf, -np.inf]
        x[[5, 52]] = [3e12, -3e12]
    x = x.reshape(1, n)
    board_matches_host("QuantizeLinear", "x", x, 0.0371, np.asarray(5, dtype), "mtvm_ioc_take",
                       tmp_path)
