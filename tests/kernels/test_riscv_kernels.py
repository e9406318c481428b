"""The RV32 int8 kernels (c_runtime/kernels/riscv/) against NumPy, run on the emulated
riscv32-virt board (kernel_harness: picolibc semihosting under qemu-system-riscv32):
mtvm_mm2x4_rv32 (QConv's im2col micro-kernel: two pixels x four channels, RV32IM
assembly) over the int16 column and packed weight layout of mtvm_mm_s16.h, int8 and
uint8 weights, every tail length; MTVM_MM4X4Q_RV32 (four pixels x four channels with the
bias, the requantization and the stores in the same assembly); mtvm_dw3x3_channel_rv32
(the 3x3 depthwise conv of one channel, strides 1 and 2); MTVM_MM1X4Q_RV32 (a plane's odd
last pixel x four channels)."""
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
    """A RISC-V compile of an int8 model uses the RV32 forms (im2col blocks requantized in
    assembly, the depthwise strips; and ships riscv/); target c,
    Cortex-M and x86 compiles neither call nor ship them."""
    path = os.path.join(MODELS, "kws_dscnn_int8.onnx")
    if not os.path.exists(path):
        pytest.skip("../shared/models not found")
    for t in ("rv32imac", "rv32imafc"):
        src = mtvm.compile(path, target=t).sources
        kernels = "".join(v for k, v in src.items() if k.endswith("_kernels.c"))
        assert "MTVM_MM4X4Q_RV32_S8(" in kernels and "mtvm_mm2x4_rv32_s8(" in kernels
        assert "mtvm_dw3x3_channel_rv32(" in kernels and "mtvm_dw_copy_rv32(" in kernels
        assert "codegen/host/include/mtvm_mm_s16_rv32.h" in src
        assert "codegen/host/include/mtvm_depthwise_rv32.h" in src
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


DW_CASES = [(1, 6, 5, 0), (1, 7, 9, 0), (1, 9, 4, 1), (1, 5, 5, 0), (2, 4, 4, 0), (2, 5, 3, 0),
            (2, 7, 7, 1), (2, 3, 6, 0), (1, 1, 3, 0), (2, 1, 1, 0)]


@pytest.mark.device
@pytest.mark.parametrize("x_u", [0, 1])
def test_dw3x3_channel_rv32(x_u):
    """mtvm_dw3x3_channel_rv32 (the 3x3 depthwise conv of one channel, strides 1 and 2, in
    strips of two lines along x or, for planes taller than wide, along y; odd line counts
    take the one-line strip) against NumPy, requantized and clamped as QConv's fast path."""
    rng = np.random.default_rng(31 + x_u)
    tx = "uint8_t" if x_u else "int8_t"
    decls, calls, want = [], [], []
    for i, (s, oh, ow, narrow) in enumerate(DW_CASES):
        ih, iw = s * (oh - 1) + 3, s * (ow - 1) + 3
        row_w = iw + 2                                  # a row wider than the windows read
        x = rng.integers(0, 256, (ih, row_w)) if x_u else rng.integers(-128, 128, (ih, row_w))
        w = rng.integers(-128, 128, 9)
        bias = int(rng.integers(-5000, 5000))
        mult, sh = int(rng.integers(1 << 29, 1 << 31)), int(rng.integers(0, 6))
        rnd = (1 << sh) // 2 - 3 * (1 << sh)
        lo, hi = (0, 255) if narrow else (-128, 127)
        acc = np.full((oh, ow), bias, np.int64)
        for ky in range(3):
            for kx in range(3):
                acc += w[3 * ky + kx] * x[ky:ky + s * (oh - 1) + 1:s, kx:kx + s * (ow - 1) + 1:s]
        r = np.clip((((acc * mult) >> 32) + rnd) >> sh, lo, hi)
        decls += [c_array(f"x{i}", x.reshape(-1), tx), c_array(f"w{i}", w, "int32_t")]
        for along_y in (0, 1):
            calls += [f"    {{ uint8_t y[{oh * ow}];",
                      f"      mtvm_dw3x3_channel_rv32((const uint8_t*)x{i}, y, w{i}, {bias}, "
                      f"{mult}, {rnd}, {sh}, {lo}, {hi}, {x_u}, {s}, {row_w}, {oh}, {ow}, "
                      f"{along_y});",
                      f"      for (int k = 0; k < {oh * ow}; ++k) printf(\"%d \", "
                      f"{'(int)y[k]' if narrow else '(int)(int8_t)y[k]'});",
                      "      printf(\"\\n\"); }"]
            want.append(" ".join(str(int(v)) for v in r.reshape(-1)))
    src = "\n".join(["#include <stdio.h>", "#include <string.h>", "#include <stdint.h>",
                     '#include "mtvm_depthwise_rv32.h"', *decls, "int main(void)", "{", *calls,
                     "    return 0;", "}"])
    out = run_c_test(src, name=f"dw3x3_rv32_{tx}", target="riscv32-virt",
                     library=["mtvm_depthwise_rv32.h"])
    assert [line.strip() for line in out.strip().splitlines()] == want


@pytest.mark.device
@pytest.mark.parametrize("w_u", [0, 1])
def test_mm4x4q_rv32(w_u):
    """MTVM_MM4X4Q_RV32 (four pixels x four channels with the bias, the requantization and
    the byte stores in the same assembly) against NumPy: one shift for all channels (ONE)
    and per-channel shifts (PER), one multiplier for all or per channel, every tail length,
    int8 and uint8 output ranges, output planes near and beyond the 12-bit offset range."""
    rng = np.random.default_rng(41 + w_u)
    wt, suffix = ("uint8_t", "U8") if w_u else ("int8_t", "S8")
    decls, calls, want = [], [], []
    cases = [("ONE", 1, 4, 0, (-128, 127), 16), ("PER", 4, 5, 1, (-128, 127), 700),
             ("PER", 4, 1, 2, (0, 255), 5), ("ONE", 4, 2, 3, (0, 255), 3000),
             ("PER", 1, 16, 3, (-128, 127), 9), ("ONE", 4, 3, 0, (-128, 127), 1024)]
    for i, (mode, nm, nb, tl, (lo, hi), ohw) in enumerate(cases):   # mults, blocks, tail
        col, wb, s01, w = layout(rng, nb, tl, w_u)
        col2, _, s23, _ = layout(rng, nb, tl, w_u, w=w)
        bias = rng.integers(-3000, 3000, 4)
        mult = rng.integers(1 << 29, 1 << 31, nm)
        m = np.full(4, int(rng.integers(2, 9))) if mode == "ONE" else rng.integers(2, 9, 4)
        zp = int(rng.integers(-20, 20)) if lo < 0 else int(rng.integers(0, 30))
        # the sums [pixel q..q + 3][channel o..o + 3] (layout's order: p0.o, p0.o1, p1.o,
        # p1.o1, p0.o2, p0.o3, p1.o2, p1.o3)
        acc = np.array([[s[0], s[1], s[4], s[5]] for s in (s01, s23)] +
                       [[s[2], s[3], s[6], s[7]] for s in (s01, s23)], np.int64)[[0, 2, 1, 3]]
        acc = acc + bias[None, :]
        mc = np.broadcast_to(mult, 4)
        hi_ = (acc.astype(np.int64) * mc[None, :]) >> 32
        if mode == "ONE":
            add = (1 << int(m[0] - 1)) + zp * (1 << int(m[0]))
            out = (hi_ + add) >> int(m[0])
            sh, addv, shifts = int(m[0]), add, np.array([-1 - int(m[0])])
        else:
            out = ((hi_ >> (m[None, :] - 1)) + 2 * zp + 1) >> 1
            sh, addv, shifts = 0, 2 * zp + 1, -1 - m
        out = np.clip(out, lo, hi)
        sstep = 4 if shifts.size > 1 else 0
        decls += [c_array(f"c{i}", list(col) + list(col2), "int16_t"),
                  c_array(f"w{i}", list(wb.reshape(-1)), wt),
                  c_array(f"b{i}", bias, "int32_t"), c_array(f"m{i}", mult, "int32_t"),
                  c_array(f"s{i}", shifts, "int32_t")]
        calls += [f"    {{ static uint8_t y[{3 * ohw + 4}];",
                  f"      const void* const rq[4] = {{ b{i}, y, m{i}, s{i} }};",
                  f"      MTVM_MM4X4Q_RV32_{suffix}({mode}, c{i}, c{i} + {len(col)}, w{i}, "
                  f"{wb.shape[1]}, {nb}, {tl}, rq, {ohw}, {4 if nm > 1 else 0}, {sstep}, {sh}, "
                  f"{addv}, {lo}, {hi});",
                  "      for (int o = 0; o < 4; ++o) {",
                  "          for (int p = 0; p < 4; ++p) {",
                  f"              printf(\"%d \", {'(int)' if lo == 0 else '(int)(int8_t)'}"
                  f"y[o * {ohw} + p]);",
                  "          }", "      }", "      printf(\"\\n\"); }"]
        want.append(" ".join(str(int(v)) for v in out.T.reshape(-1)))
    src = "\n".join(["#include <stdio.h>", "#include <stdint.h>", '#include "mtvm_mm_s16_rv32.h"',
                     *decls, "int main(void)", "{", *calls, "    return 0;", "}"])
    out = run_c_test(src, name=f"mm4x4q_rv32_{suffix}", target="riscv32-virt",
                     library=["mtvm_mm_s16_rv32.h"])
    assert [line.strip() for line in out.strip().splitlines()] == want


@pytest.mark.device
@pytest.mark.parametrize("w_u", [0, 1])
def test_mm1x4q_rv32(w_u):
    """MTVM_MM1X4Q_RV32 (a plane's odd last pixel x four channels, requantized in the same
    assembly) against NumPy: both modes, every tail length, int8 and uint8 ranges."""
    rng = np.random.default_rng(53 + w_u)
    wt, suffix = ("uint8_t", "U8") if w_u else ("int8_t", "S8")
    decls, calls, want = [], [], []
    cases = [("ONE", 1, 1, 0, (-128, 127), 9), ("PER", 4, 3, 1, (0, 255), 700),
             ("ONE", 4, 2, 2, (-128, 127), 3000), ("PER", 4, 5, 3, (-128, 127), 25)]
    for i, (mode, nm, nb, tl, (lo, hi), ohw) in enumerate(cases):   # mults, blocks, tail
        col, wb, s, _ = layout(rng, nb, tl, w_u)
        bias = rng.integers(-3000, 3000, 4)
        acc = np.array([s[0], s[1], s[4], s[5]], np.int64) + bias
        mult = rng.integers(1 << 29, 1 << 31, nm)
        m = np.full(4, int(rng.integers(2, 9))) if mode == "ONE" else rng.integers(2, 9, 4)
        zp = int(rng.integers(-20, 20)) if lo < 0 else int(rng.integers(0, 30))
        hi_ = (acc * np.broadcast_to(mult, 4)) >> 32
        if mode == "ONE":
            addv = (1 << int(m[0] - 1)) + zp * (1 << int(m[0]))
            out, sh, shifts = (hi_ + addv) >> int(m[0]), int(m[0]), np.array([-1 - int(m[0])])
        else:
            addv = 2 * zp + 1
            out, sh, shifts = ((hi_ >> (m - 1)) + addv) >> 1, 0, -1 - m
        out = np.clip(out, lo, hi)
        decls += [c_array(f"c{i}", list(col), "int16_t"),
                  c_array(f"w{i}", list(wb.reshape(-1)), wt),
                  c_array(f"b{i}", bias, "int32_t"), c_array(f"m{i}", mult, "int32_t"),
                  c_array(f"s{i}", shifts, "int32_t")]
        calls += [f"    {{ static uint8_t y[{3 * ohw + 1}];",
                  f"      const void* const rq[4] = {{ b{i}, y, m{i}, s{i} }};",
                  f"      MTVM_MM1X4Q_RV32_{suffix}({mode}, c{i}, w{i}, {wb.shape[1]}, {nb}, {tl}, "
                  f"rq, {ohw}, {4 if nm > 1 else 0}, {4 if shifts.size > 1 else 0}, {sh}, "
                  f"{addv}, {lo}, {hi});",
                  "      for (int o = 0; o < 4; ++o) {",
                  f"          printf(\"%d \", {'(int)' if lo == 0 else '(int)(int8_t)'}"
                  f"y[o * {ohw}]);",
                  "      }", "      printf(\"\\n\"); }"]
        want.append(" ".join(str(int(v)) for v in out))
    src = "\n".join(["#include <stdio.h>", "#include <stdint.h>", '#include "mtvm_mm_s16_rv32.h"',
                     *decls, "int main(void)", "{", *calls, "    return 0;", "}"])
    out = run_c_test(src, name=f"mm1x4q_rv32_{suffix}", target="riscv32-virt",
                     library=["mtvm_mm_s16_rv32.h"])
    assert [line.strip() for line in out.strip().splitlines()] == want


@pytest.mark.device
def test_dw_copy_rv32():
    """mtvm_dw_copy_rv32 (a channel plane into the rows of the bordered plane): the word,
    halfword and byte paths (by row width and alignment) leave the border untouched."""
    rng = np.random.default_rng(61)
    decls, calls, want = [], [], []
    for i, (h, w, dw, off) in enumerate([(3, 8, 16, 4), (5, 6, 10, 2), (4, 6, 9, 1),
                                         (2, 7, 12, 3), (3, 4, 8, 1)]):
        x = rng.integers(0, 256, h * w + 4)
        decls.append(c_array(f"x{i}", x, "uint8_t"))
        calls += [f"    {{ static uint32_t buf[{(h * dw + off) // 4 + 2}];",
                  "      uint8_t* d = (uint8_t*)buf;",
                  f"      memset(buf, 0xEE, sizeof buf);",
                  f"      mtvm_dw_copy_rv32(d + {off}, {dw}, (const uint8_t*)x{i} + 4, {h}, {w});",
                  f"      for (int k = 0; k < {h * dw + off}; ++k) {{",
                  "          printf(\"%d \", (int)d[k]);",
                  "      }", "      printf(\"\\n\"); }"]
        plane = np.full(h * dw + off, 0xEE)
        for y in range(h):
            plane[off + y * dw:off + y * dw + w] = x[4 + y * w:4 + (y + 1) * w]
        want.append(" ".join(str(int(v)) for v in plane))
    src = "\n".join(["#include <stdio.h>", "#include <string.h>", "#include <stdint.h>",
                     '#include "mtvm_depthwise_rv32.h"', *decls, "int main(void)", "{", *calls,
                     "    return 0;", "}"])
    out = run_c_test(src, name="dw_copy_rv32", target="riscv32-virt",
                     library=["mtvm_depthwise_rv32.h"])
    assert [line.strip() for line in out.strip().splitlines()] == want
