"""The RV32 int8 kernels (c_runtime/kernels/riscv/) against NumPy, run on the emulated
riscv32-virt board (kernel_harness: picolibc semihosting under qemu-system-riscv32):
mtvm_mm2x4_rv32 (QConv's im2col micro-kernel: two pixels x four channels, RV32IM
assembly) over the int16 column and packed weight layout of mtvm_mm_s16.h, int8 and
uint8 weights, every tail length."""
import os

import numpy as np
import pytest

import mtvm
from mtvm.ops.quantized.conv import tail_slot, tail_stride

from .kernel_harness import c_array, run_c_test

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "models")

CASES = [(nb, tl) for nb in (0, 1, 3, 16) for tl in (0, 1, 2, 3) if nb or tl]


def layout(rng, nb, tl, w_u, w=None):
    """Random column and two channel pairs' weights (or w: [4][kk]) in mtvm_mm_s16.h's
    layout, and the eight sums mtvm_mm2x4_rv32 adds (p0.o, p0.o1, p1.o, p1.o1, then
    o + 2, o + 3)."""
    kk = 4 * nb + tl
    x = rng.integers(-128, 256, size=(2, kk))                # the column holds int8 or uint8
    if w is None:
        w = rng.integers(0, 256, size=(4, kk)) if w_u else rng.integers(-128, 128, size=(4, kk))
    ts = tail_stride(tl) if tl else 0
    col = np.zeros(8 * nb + 2 * ts, np.int64)
    wb = np.zeros((2, 8 * nb + 2 * ts), np.int64)
    for b in range(nb):
        for j in range(4):
            q = (0, 2, 1, 3)[j]
            col[8 * b + j], col[8 * b + 4 + j] = x[0, 4 * b + j], x[1, 4 * b + j]
            for pair in range(2):
                wb[pair, 8 * b + q] = w[2 * pair, 4 * b + j]
                wb[pair, 8 * b + 4 + q] = w[2 * pair + 1, 4 * b + j]
    for j in range(tl):
        q = tail_slot(j, tl)
        col[8 * nb + q], col[8 * nb + ts + q] = x[0, 4 * nb + j], x[1, 4 * nb + j]
        for pair in range(2):
            wb[pair, 8 * nb + 2 * q] = w[2 * pair, 4 * nb + j]
            wb[pair, 8 * nb + 2 * q + 1] = w[2 * pair + 1, 4 * nb + j]
    s = x @ w.T                                              # [pixel][channel]
    sums = [s[0, 0], s[0, 1], s[1, 0], s[1, 1], s[0, 2], s[0, 3], s[1, 2], s[1, 3]]
    return col, wb, [int(v) for v in sums], w


@pytest.mark.device
@pytest.mark.parametrize("w_u", [0, 1])
def test_mm2x4_rv32(w_u):
    rng = np.random.default_rng(18 + w_u)
    wt, suffix = ("uint8_t", "u8") if w_u else ("int8_t", "s8")
    decls, calls, want = [], [], []
    for i, (nb, tl) in enumerate(CASES):
        col, wb, sums, _ = layout(rng, nb, tl, w_u)
        bias = rng.integers(-1000, 1000, size=8)
        decls += [c_array(f"c{i}", list(col) + [0], "int16_t"),
                  c_array(f"w{i}", list(wb.reshape(-1)) + [0], wt),
                  c_array(f"b{i}", bias, "int32_t")]
        n = wb.shape[1]
        calls += [f"    {{ int32_t a[8]; memcpy(a, b{i}, sizeof a);",
                  f"      mtvm_mm2x4_rv32_{suffix}(c{i}, w{i}, w{i} + {n}, {nb}, {tl}, a);",
                  "      for (int k = 0; k < 8; ++k) printf(\"%ld \", (long)a[k]);",
                  "      printf(\"\\n\"); }"]
        want.append(" ".join(str(int(b) + s) for b, s in zip(bias, sums)))
    src = "\n".join(["#include <stdio.h>", "#include <string.h>", "#include <stdint.h>",
                     '#include "mtvm_mm_s16_rv32.h"', *decls, "int main(void)", "{",
                     *calls, "    return 0;", "}"])
    out = run_c_test(src, name=f"mm2x4_rv32_{suffix}", target="riscv32-virt",
                     library=["mtvm_mm_s16_rv32.h"])
    assert [line.strip() for line in out.strip().splitlines()] == want


@pytest.mark.device
@pytest.mark.parametrize("w_u", [0, 1])
def test_mm4x4_rv32(w_u):
    """MTVM_MM4X4_RV32_S8/U8: two columns (pixels q, q + 1 and q + 2, q + 3) x two channel
    pairs, the second pair WOFF bytes after the first."""
    rng = np.random.default_rng(40 + w_u)
    wt, suffix = ("uint8_t", "U8") if w_u else ("int8_t", "S8")
    decls, calls, want = [], [], []
    for i, (nb, tl) in enumerate(CASES):
        ca, wb, sa, w = layout(rng, nb, tl, w_u)
        cb, _, sb, _ = layout(rng, nb, tl, w_u, w)
        bias = rng.integers(-1000, 1000, size=16)
        decls += [c_array(f"ca{i}", list(ca) + [0], "int16_t"),
                  c_array(f"cb{i}", list(cb) + [0], "int16_t"),
                  c_array(f"w{i}", list(wb.reshape(-1)) + [0], wt),
                  c_array(f"b{i}", bias, "int32_t")]
        calls += [f"    {{ int32_t a[16]; memcpy(a, b{i}, sizeof a);",
                  f"      MTVM_MM4X4_RV32_{suffix}(ca{i}, cb{i}, w{i}, {wb.shape[1]}, {nb}, "
                  f"{tl}, a);",
                  "      for (int k = 0; k < 16; ++k) printf(\"%ld \", (long)a[k]);",
                  "      printf(\"\\n\"); }"]
        want.append(" ".join(str(int(b) + s) for b, s in zip(bias, sa + sb)))
    src = "\n".join(["#include <stdio.h>", "#include <string.h>", "#include <stdint.h>",
                     '#include "mtvm_mm_s16_rv32.h"', *decls, "int main(void)", "{",
                     *calls, "    return 0;", "}"])
    out = run_c_test(src, name=f"mm4x4_rv32_{suffix}", target="riscv32-virt",
                     library=["mtvm_mm_s16_rv32.h"])
    assert [line.strip() for line in out.strip().splitlines()] == want


def test_rv32_kernels_only_on_riscv_targets():
    """A RISC-V compile of an int8 model uses the RV32 forms (and ships riscv/); target c,
    Cortex-M and x86 compiles neither call nor ship them."""
    path = os.path.join(MODELS, "kws_dscnn_int8.onnx")
    if not os.path.exists(path):
        pytest.skip("../shared/models not found")
    for t in ("rv32imac", "rv32imafc"):
        src = mtvm.compile(path, target=t).sources
        kernels = "".join(v for k, v in src.items() if k.endswith("_kernels.c"))
        assert "MTVM_MM4X4_RV32_S8(" in kernels and "mtvm_mm2x4_rv32_s8(" in kernels
        assert "codegen/host/include/mtvm_mm_s16_rv32.h" in src
    for t in ("c", "cortex-m4", "cortex-m3", "x86-64-v3"):
        src = mtvm.compile(path, target=t).sources
        assert not any("rv32" in k or "RV32" in v for k, v in src.items()), t


@pytest.mark.device
@pytest.mark.parametrize("a_u,b_u", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_dot4_rv32(a_u, b_u):
    """mtvm_dot4_rv32_<a>_<b> (QMatMul's four-row dot: eight taps per step in assembly,
    the rest in C) against NumPy, lengths around the step."""
    rng = np.random.default_rng(7 + 2 * a_u + b_u)
    na, ta = ("u8", "uint8_t") if a_u else ("s8", "int8_t")
    nb_, tb = ("u8", "uint8_t") if b_u else ("s8", "int8_t")
    decls, calls, want = [], [], []
    for i, n in enumerate((1, 7, 8, 9, 16, 23, 64)):
        stride = n + 3
        a = rng.integers(0, 256, n) if a_u else rng.integers(-128, 128, n)
        b = rng.integers(0, 256, (4, stride)) if b_u else rng.integers(-128, 128, (4, stride))
        bias = rng.integers(-1000, 1000, 4)
        decls += [c_array(f"a{i}", a, ta), c_array(f"b{i}", b.reshape(-1), tb),
                  c_array(f"s{i}", bias, "int32_t")]
        calls += [f"    {{ int32_t acc[4]; memcpy(acc, s{i}, sizeof acc);",
                  f"      mtvm_dot4_rv32_{na}_{nb_}(a{i}, b{i}, {stride}, {n}, acc);",
                  "      for (int k = 0; k < 4; ++k) printf(\"%ld \", (long)acc[k]);",
                  "      printf(\"\\n\"); }"]
        want.append(" ".join(str(int(v)) for v in bias + b[:, :n] @ a))
    src = "\n".join(["#include <stdio.h>", "#include <string.h>", "#include <stdint.h>",
                     '#include "mtvm_dot_8_rv32.h"', *decls, "int main(void)", "{", *calls,
                     "    return 0;", "}"])
    out = run_c_test(src, name=f"dot4_rv32_{na}_{nb_}", target="riscv32-virt",
                     library=["mtvm_dot_8_rv32.h"])
    assert [line.strip() for line in out.strip().splitlines()] == want
