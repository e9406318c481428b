"""An int8 conv over one input channel (group 1: a first layer on a spectrogram or a
grey image) takes the im2col kernel on Arm DSP cores and x86 where that is faster
(mtvm/passes/single_channel_conv.py), with the zero-point terms folded into its bias:
the same integers as the depthwise kernel the other targets keep."""
from __future__ import annotations

import numpy as np
import pytest

import mtvm
from mtvm.interp import interpret
from mtvm.target import Target
from mtvm.testing import have, run_on_board

from test_int_depthwise import Builder

# name, dtype, (H, W), output channels, (kh, kw), strides, pads, im2col on the M4
CONVS = [
    ("crnn_5x3", np.int8, (12, 10), 16, (5, 3), (2, 1), (2, 1, 2, 1), True),
    ("u8_3x3_s2", np.uint8, (9, 8), 16, (3, 3), (2, 2), (1, 1, 1, 1), True),
    ("loop_3x3", np.int8, (8, 9), 16, (3, 3), (1, 1), (1, 1, 1, 1), False),
    ("taps_1x9", np.int8, (1, 40), 8, (1, 9), (1, 1), (0, 4, 0, 4), True),
    ("few_3x3", np.int8, (8, 9), 8, (3, 3), (1, 1), (1, 1, 1, 1), False),
    ("few_5x3", np.int8, (13, 13), 8, (5, 3), (2, 1), (2, 1, 2, 1), True),   # bordered
    ("few_3x3_s2", np.uint8, (9, 10), 8, (3, 3), (2, 2), (1, 1, 1, 1), False),
]


def model():
    b = Builder(3)
    for name, dtype, (h, w), oc, k, strides, pads, _ in CONVS:
        x = b.input("x_" + name, dtype, (1, h, w))
        b.output(b.qlinearconv(x, name, dtype, 1, oc, k, strides, pads, (1, 1)), dtype)
    return b.model(), b.feeds


def folded(lib) -> list[int]:
    """Each conv's `folded` attribute, in the order of CONVS."""
    return [lk.kernel.node.attrs.get("folded", 1) for lk in lib.kernels]


def test_im2col_on_arm_dsp_cores_only():
    """And there, the padded layers' input plane copied with its border into scratch
    (knob border_plane: the spectrogram's plane is small)."""
    m, _ = model()
    want = [int(im2col) for *_, im2col in CONVS]
    for target in ("cortex-m4", "cortex-m7"):
        lib = mtvm.compile(m, target=Target.resolve(target))
        assert folded(lib) == want, target
        assert [bool(lk.kernel.knobs.get("border_plane")) for lk in lib.kernels] == want
    for target in ("cortex-m55", "rv32imac", "cortex-m3"):
        assert folded(mtvm.compile(m, target=Target.resolve(target))) == [0] * len(CONVS), \
            target


def test_im2col_on_x86():
    """x86: with AVX-512 VNNI every such conv; with AVX2, and in the portable C, those
    of stride 2 and more."""
    m, _ = model()
    strided = [int(min(strides) >= 2) for _, _, _, _, _, strides, _, _ in CONVS]
    assert 0 < sum(strided) < len(CONVS)
    for target in ("c", "x86-64-v3"):
        assert folded(mtvm.compile(m, target=Target.resolve(target))) == strided, target
    vnni = Target.resolve("x86-64-v4+avx512vnni")
    assert folded(mtvm.compile(m, target=vnni)) == [1] * len(CONVS)


def test_folded_graph_computes_the_same_integers():
    """The rewritten graph (its QConv.reference: sums over the zero-point padded window,
    the folded bias) equals the unchanged one (sums inside the input)."""
    m, feeds = model()
    plain = mtvm.compile(m)
    m4 = mtvm.compile(m, target=Target.resolve("cortex-m4"))
    want, got = interpret(plain.graph, feeds), interpret(m4.graph, feeds)
    for a, b in zip(plain.graph.outputs, m4.graph.outputs):
        np.testing.assert_array_equal(got[b], want[a], err_msg=a)


@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="QEMU or arm-none-eabi-gcc not installed")
def test_on_mps2_an386_bit_identical(tmp_path):
    m, feeds = model()
    host = mtvm.compile(m).run_host(feeds)
    dev = run_on_board(mtvm.compile(m, target=Target.resolve("cortex-m4")), feeds, tmp_path)
    assert set(dev) == set(host)
    for k in host:
        np.testing.assert_array_equal(dev[k], host[k], err_msg=k)
