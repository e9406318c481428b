"""C unit test of c_runtime/kernels/arm_dsp/mtvm_transpose8_dsp.h (the byte transpose of the
Arm DSP cores: blocks of four rows and four columns through registers, the last rows and
columns byte by byte) against NumPy, for sizes with and without whole blocks, on the host
(ASan/UBSan: the byte loop), the emulated Cortex-M4F (the blocks) and Cortex-M3 (the byte
loop); and the schedule that calls it (mtvm/schedules/arm_dsp/transpose_8.py) chosen for
the 2-D transposes of bytes on DSP cores only."""
from __future__ import annotations

import numpy as np
import pytest

import mtvm
from mtvm.target import Target

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
# rows x cols: whole blocks, leftover rows, leftover columns, both, one row, one column
SIZES = [(4, 4), (49, 32), (32, 49), (5, 7), (1, 9), (9, 1), (13, 3), (8, 12), (6, 5)]

TEST = r"""
#include <stdio.h>
#include "mtvm_transpose8_dsp.h"
@ARRAYS@
static uint8_t out[49 * 32];
int main(void)
{
    static const int rows[] = { @ROWS@ }, cols[] = { @COLS@ };
    const uint8_t* s = src;
    for (int i = 0; i < @N@; ++i) {
        mtvm_transpose8_dsp(s, rows[i], cols[i], out);
        for (int j = 0; j < rows[i] * cols[i]; ++j) printf(" %d", out[j]);
        printf("\n");
        s += rows[i] * cols[i];
    }
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_transpose8_matches_numpy(target):
    rng = np.random.default_rng(41)
    mats = [rng.integers(0, 256, (r, c)) for r, c in SIZES]
    src = TEST.replace("@ARRAYS@", c_array("src", np.concatenate([m.ravel() for m in mats]),
                                           "uint8_t")) \
        .replace("@ROWS@", ", ".join(str(r) for r, _ in SIZES)) \
        .replace("@COLS@", ", ".join(str(c) for _, c in SIZES)).replace("@N@", str(len(SIZES)))
    out = run_c_test(src, name="transpose8", target=target, library=("mtvm_transpose8_dsp.h",))
    lines = out.strip().splitlines()
    assert len(lines) == len(SIZES)
    for m, line in zip(mats, lines):
        assert [int(t) for t in line.split()] == m.T.ravel().tolist(), m.shape


def _transpose_model(tmp_path, dtype, shape, perm) -> str:
    import onnx
    from onnx import helper
    t = {np.int8: onnx.TensorProto.INT8, np.float32: onnx.TensorProto.FLOAT}[dtype]
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=perm)], "t",
                          [helper.make_tensor_value_info("x", t, shape)],
                          [helper.make_tensor_value_info("y", t, None)])
    path = str(tmp_path / "t.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("target,dtype,shape,perm,chosen", [
    ("cortex-m4", np.int8, [1, 1, 49, 32], [0, 1, 3, 2], True),    # K^T
    ("cortex-m4", np.int8, [3, 6, 5], [0, 2, 1], True),            # a batch of three
    ("cortex-m33", np.int8, [6, 5], [1, 0], True),
    ("cortex-m4", np.int8, [2, 3, 4], [2, 1, 0], False),           # not a 2-D transpose
    ("cortex-m4", np.float32, [6, 5], [1, 0], False),              # not bytes
    ("cortex-m3", np.int8, [6, 5], [1, 0], False),                 # no DSP extension
    ("c", np.int8, [6, 5], [1, 0], False)])
def test_the_schedule_takes_the_byte_matrix_transposes_on_dsp_cores(tmp_path, target, dtype,
                                                                      shape, perm, chosen):
    lib = mtvm.compile(_transpose_model(tmp_path, dtype, shape, perm),
                       target=Target.resolve(target))
    src = lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    assert ("mtvm_transpose8_dsp(" in src) == chosen
    x = (np.arange(np.prod(shape)) % 251 - 120).astype(dtype).reshape(shape)
    if target == "c":
        np.testing.assert_array_equal(list(lib.run_host([x]).values())[0], x.transpose(perm))


@pytest.mark.device
@pytest.mark.parametrize("shape,perm", [([3, 9, 6], [0, 2, 1]), ([1, 1, 24, 48], [0, 1, 3, 2])])
def test_byte_transposes_on_the_m4(tmp_path, shape, perm):
    """The schedule's batch loop over the kernel, and sizes that are whole blocks (compiled
    with the board's -O2 -Werror: gcc 12 once warned, wrongly, of undefined behaviour in
    the loops past the blocks), on the emulated Cortex-M4F, as NumPy."""
    from mtvm.testing import have, run_on_board
    if not (have("qemu-system-arm") and have("arm-none-eabi-gcc")):
        pytest.skip("QEMU or arm-none-eabi-gcc not installed")
    lib = mtvm.compile(_transpose_model(tmp_path, np.int8, shape, perm),
                       target=Target.resolve("cortex-m4"))
    x = (np.arange(np.prod(shape)) % 251 - 120).astype(np.int8).reshape(shape)
    y = list(run_on_board(lib, [x], tmp_path / "board", board="mps2-an386").values())[0]
    np.testing.assert_array_equal(y, x.transpose(perm))
