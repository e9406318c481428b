"""The Helium (MVE) int8 kernels (c_runtime/kernels/arm_mve/) against NumPy, run on the
emulated Cortex-M55 board mps3-an547 (kernel_harness: semihosting under qemu-system-arm,
which implements MVE): QConv's MVE micro-kernels mtvm_mm_s8_mve (two channels x one or two
pixels over the packed weights every target shares) and mtvm_mmx1_s8_mve (the odd last
channel), every number of blocks modulo 4 and every tail length; the column gather
mtvm_im2col_s8_mve, windows inside the input and crossing each border, strides of the
window (dilation) and the zero point as padding."""
import os

import numpy as np
import pytest

import mtvm
from mtvm.ops.quantized.conv import mve_column_tables, mve_kp, pack_conv_weights

from .kernel_harness import c_array, run_c_test

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "models")
M55 = "mps3-an547"
LIB = ["mtvm_mm_s8_mve.h"]
HEAD = ["#include <stdio.h>", "#include <string.h>", "#include <stdint.h>",
        '#include "mtvm_mm_s8_mve.h"']

# (nb, tl): nb % 4 = 0..3, with and without whole 16-tap steps, every tail
CASES = [(nb, tl) for nb in (0, 1, 2, 3, 4, 9, 18) for tl in (0, 1, 2, 3) if nb or tl]


def column_row(rng, x):
    """A pixel's column row (kp bytes) of taps x[kk], in the packed weights' order
    (mve_column_tables of a 1 x kk window: the offset of byte j is its tap), the bytes
    past kk random (they must meet zero weights)."""
    kk = len(x)
    off, _, _ = mve_column_tables(kk, 1, 1, 1, 1, 1, 1)
    row = rng.integers(-128, 128, mve_kp(kk))
    row[:kk] = x[off[:kk]]
    return row


def interleave(rows):
    """A column block: the pixels' rows [pixel][kp] interleaved by 16-byte chunks (chunk c of
    pixel i at c * cs + 16 * i, cs = 16 x the pixels)."""
    rows = np.asarray(rows)
    return rows.reshape(len(rows), -1, 16).transpose(1, 0, 2).reshape(-1)


def program(decls, calls, header="mtvm_mm_s8_mve.h"):
    head = HEAD[:-1] + [f'#include "{header}"']
    return "\n".join(head + decls + ["int main(void)", "{"] + calls + ["    return 0;", "}"])


def lines(out):
    return [line.strip() for line in out.strip().splitlines()]


@pytest.mark.device
def test_mm_s8_mve():
    """mtvm_mm_s8_mve: acc (p0.o, p0.o1, p1.o, p1.o1) += column rows . the pair's packed
    weights (pack_conv_weights of two channels), 16 random bytes after the weights (the
    predicated loads must not read them), for one and two pixels."""
    rng = np.random.default_rng(55)
    decls, calls, want = [], [], []
    for i, (nb, tl) in enumerate(CASES):
        kk = 4 * nb + tl
        kp = mve_kp(kk)
        w = rng.integers(-128, 128, (2, kk))
        x = rng.integers(-128, 128, (2, kk))
        packed = pack_conv_weights(w.astype(np.int8)).reshape(-1).astype(np.int64)
        col = interleave([column_row(rng, x[0]), column_row(rng, x[1])])
        bias = rng.integers(-100000, 100000, 4)
        decls += [c_array(f"c{i}", col, "int8_t"),
                  c_array(f"w{i}", list(packed) + list(rng.integers(-128, 128, 16)), "int8_t"),
                  c_array(f"b{i}", bias, "int32_t")]
        calls += [f"    {{ uint8_t tail[32]; mtvm_mm_s8_mve_tail({nb}, {tl}, tail);",
                  "      for (int32_t px = 2; px > 0; --px) {",
                  f"        int32_t a[4]; memcpy(a, b{i}, sizeof a);",
                  f"        mtvm_mm_s8_mve(c{i}, 32, w{i}, {nb}, {tl}, tail, px, a);",
                  "        for (int32_t k = 0; k < 2 * px; ++k) printf(\"%ld \", (long)a[k]);",
                  "        printf(\"\\n\");", "      } }"]
        s = x @ w.T                                           # [pixel][channel]
        sums = bias + np.array([s[0, 0], s[0, 1], s[1, 0], s[1, 1]])
        want += [" ".join(str(int(v)) for v in sums), " ".join(str(int(v)) for v in sums[:2])]
    out = run_c_test(program(decls, calls), name="mm_s8_mve", target=M55, library=LIB)
    assert lines(out) == want


@pytest.mark.device
def test_mmx1_s8_mve():
    """mtvm_mmx1_s8_mve: the odd last channel's own row (pack_conv_weights of one channel)
    against one and two column rows."""
    rng = np.random.default_rng(56)
    decls, calls, want = [], [], []
    for i, kk in enumerate((1, 3, 4, 15, 16, 17, 27, 72, 150)):
        kp = mve_kp(kk)
        w = rng.integers(-128, 128, (1, kk))
        x = rng.integers(-128, 128, (2, kk))
        packed = pack_conv_weights(w.astype(np.int8)).reshape(-1).astype(np.int64)
        col = interleave([column_row(rng, x[0]), column_row(rng, x[1])])
        bias = rng.integers(-100000, 100000, 2)
        decls += [c_array(f"c{i}", col, "int8_t"),
                  c_array(f"w{i}", list(packed) + list(rng.integers(-128, 128, 16)), "int8_t")]
        calls += ["    for (int32_t px = 2; px > 0; --px) {",
                  f"      int32_t a[2] = {{ {bias[0]}, {bias[1]} }};",
                  f"      mtvm_mmx1_s8_mve(c{i}, 32, w{i}, {kk}, px, a);",
                  "      printf(\"%ld %ld\\n\", (long)a[0], (long)a[1]); }"]
        s = x @ w[0] + bias                                  # a[p]: bias[p] + row p . w
        want += [f"{s[0]} {s[1]}", f"{s[0]} {bias[1]}"]
    out = run_c_test(program(decls, calls), name="mmx1_s8_mve", target=M55, library=LIB)
    assert lines(out) == want


@pytest.mark.device
@pytest.mark.parametrize("cg,h,wd,kh,kw,dh,dw", [(3, 7, 9, 3, 3, 1, 1), (5, 6, 5, 3, 2, 2, 1),
                                                 (2, 4, 4, 5, 5, 1, 1), (20, 3, 4, 1, 1, 1, 1)])
def test_im2col_s8_mve(cg, h, wd, kh, kw, dh, dw):
    """mtvm_im2col_s8_mve: the column rows of windows whose first input is at every (iy0,
    ix0) from one window outside the plane to past its end, against the NumPy gather (taps
    outside the plane: the zero point); the bytes of a row past kk are not compared."""
    rng = np.random.default_rng(cg * 100 + h)
    zp = int(rng.integers(-128, 128))
    x = rng.integers(-128, 128, (cg, h, wd))
    off, dy, dx = mve_column_tables(cg, h, wd, kh, kw, dh, dw)
    kk, kp = cg * kh * kw, mve_kp(cg * kh * kw)
    ylast, xlast = (kh - 1) * dh, (kw - 1) * dw
    xp = np.full((cg, h + 2 * ylast + 2, wd + 2 * xlast + 2), zp)
    xp[:, ylast + 1:ylast + 1 + h, xlast + 1:xlast + 1 + wd] = x
    # the channel of each column byte: its tap (the tables of a 1 x kk window) // khw
    ci = mve_column_tables(kk, 1, 1, 1, 1, 1, 1)[0][:kk] // (kh * kw)
    decls = [c_array("x", x.reshape(-1), "int8_t"), c_array("off", off, "uint16_t"),
             c_array("dy", dy, "int16_t"), c_array("dx", dx, "int16_t"),
             f"static const mtvm_im2col_s8_mve_t geo = {{ off, dy, dx, {kp}, {h}, {wd}, 16, "
             f"{ylast}, {xlast}, {zp} }};", f"static int8_t col[{kp}];"]
    calls, want = [], []
    for iy0 in range(-ylast - 1, h + 1):
        for ix0 in range(-xlast - 1, wd + 1):
            calls += [f"    mtvm_im2col_s8_mve(col, x, {iy0}, {ix0}, &geo);",
                      f"    for (int32_t j = 0; j < {kk}; ++j) printf(\"%d \", col[j]);",
                      "    printf(\"\\n\");"]
            row = xp[ci, iy0 + ylast + 1 + dy[:kk], ix0 + xlast + 1 + dx[:kk]]
            want.append(" ".join(str(int(v)) for v in row))
    out = run_c_test(program(decls, calls), name="im2col_s8_mve", target=M55, library=LIB)
    assert lines(out) == want


def test_mve_kernels_only_on_mve_targets():
    """A Cortex-M55 compile of an int8 model uses the MVE paths (QConv im2col and depthwise,
    QMatMul) and ships arm_mve/;
    target c, Cortex-M4/M3 and x86 compiles neither call nor ship it."""
    path = os.path.join(MODELS, "kws_dscnn_int8.onnx")
    if not os.path.exists(path):
        pytest.skip("../shared/models not found")
    src = mtvm.compile(path, target="cortex-m55").sources
    kernels = "".join(v for k, v in src.items() if k.endswith("_kernels.c"))
    assert "mtvm_conv_s8_mve(" in kernels and "mtvm_dw_channel_s8_mve(" in kernels
    assert "mtvm_dot4_s8_s8_mve(" in kernels and "codegen/host/include/mtvm_mm_s8_mve.h" in src
    for t in ("c", "cortex-m4", "cortex-m3", "x86-64-v3"):
        src = mtvm.compile(path, target=t).sources
        assert not any("_mve" in k or "_mve" in v for k, v in src.items()), t


def fast_requant_ref(acc, mult, m, add, lo, hi, per_channel_shift):
    """conv._Store's cheap requantization (hi = (acc * mult) >> 32, then the shift)."""
    h = (np.asarray(acc, np.int64) * mult) >> 32
    v = ((h >> (m - 1)) + add) >> 1 if per_channel_shift else (h + add) >> m
    return np.clip(v, lo, hi)


@pytest.mark.device
@pytest.mark.parametrize("per_channel_shift,passes", [(0, 1), (1, 2)])
def test_conv4x2_s8_mve(per_channel_shift, passes):
    """mtvm_conv4x2_s8_mve (one pass of mtvm_mm4x2_s8_mve, or two of mtvm_mm_s8_mve): four
    pixels (a column block, cs = 64) x a channel pair's packed weights, requantized
    (mtvm_requant_s8_mve: one shift for the layer, or one per channel) and stored as bytes at
    y[0..3] and y[ohw..ohw + 3]; where kk <= 16, mtvm_conv4x1_s8_mve for each channel too."""
    rng = np.random.default_rng(57 + per_channel_shift)
    decls, calls, want = [], [], []
    for i, (nb, tl) in enumerate(CASES):
        kk = 4 * nb + tl
        kp = mve_kp(kk)
        w = rng.integers(-128, 128, (2, kk))
        x = rng.integers(-128, 128, (4, kk))
        packed = pack_conv_weights(w.astype(np.int8)).reshape(-1).astype(np.int64)
        col = interleave([column_row(rng, x[p]) for p in range(4)])
        bias = rng.integers(-20000, 20000, 2)
        mult = rng.integers(1 << 30, 1 << 31, 2)
        shift = rng.integers(-12, -8, 2) if per_channel_shift else np.array([-10, -10])
        m = -1 - shift
        y_zp, lo, hi = int(rng.integers(-20, 20)), -128, 127
        if per_channel_shift:
            mm, add = 0, 2 * y_zp + 1
        else:
            mm, add = int(m[0]), (1 << int(m[0] - 1)) + y_zp * (1 << int(m[0]))
        decls += [c_array(f"c{i}", col, "int8_t"),
                  c_array(f"w{i}", list(packed) + list(rng.integers(-128, 128, 16)), "int8_t"),
                  c_array(f"b{i}", bias, "int32_t"), c_array(f"m{i}", mult, "int32_t"),
                  c_array(f"s{i}", shift, "int32_t")]
        calls += [f"    {{ uint8_t tail[32]; int8_t y[14]; mtvm_mm_s8_mve_tail({nb}, {tl}, tail);",
                  f"      const mtvm_requant_s8_mve_t rq = {{ m{i}, s{i}, 1, {mm}, {add}, "
                  f"{lo}, {hi} }};",
                  "      memset(y, 99, sizeof y);",
                  f"      mtvm_conv4x2_s8_mve(c{i}, w{i}, {nb}, {tl}, tail, b{i}, 0, &rq, y, 10, "
                  f"{passes});",
                  "      for (int32_t k = 0; k < 14; ++k) printf(\"%d \", y[k]);",
                  "      printf(\"\\n\"); }"]
        if kk <= 16:
            calls += ["    { uint8_t offs[32]; int8_t y[14];",
                      f"      const mtvm_requant_s8_mve_t rq = {{ m{i}, s{i}, 1, {mm}, {add}, "
                      f"{lo}, {hi} }};",
                      f"      mtvm_mm_s8_mve_offsets({nb}, {tl}, offs); memset(y, 99, sizeof y);",
                      f"      mtvm_conv4x1_s8_mve(c{i}, w{i}, offs, {kk}, b{i}, 0, &rq, y);",
                      f"      mtvm_conv4x1_s8_mve(c{i}, w{i}, offs + 16, {kk}, b{i}, 1, &rq, "
                      "y + 10);",
                      "      for (int32_t k = 0; k < 14; ++k) printf(\"%d \", y[k]);",
                      "      printf(\"\\n\"); }"]
        acc = x @ w.T + bias                                  # [pixel][channel]
        y = np.full(14, 99)
        for ch in range(2):
            y[10 * ch:10 * ch + 4] = fast_requant_ref(acc[:, ch], mult[ch], m[ch], add, lo, hi,
                                                      per_channel_shift)
        want += [" ".join(str(int(v)) for v in y)] * (2 if kk <= 16 else 1)
    out = run_c_test(program(decls, calls), name="conv4x2_s8_mve", target=M55, library=LIB)
    assert lines(out) == want


def dw_ref(x, w, bias, stride, dil, mult, rnd, sh_r, lo, hi):
    """A depthwise plane (x already bordered), the requantization of mtvm_dw_requantize."""
    kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dil
    oh = (x.shape[0] - (kh - 1) * dh - 1) // sh + 1
    ow = (x.shape[1] - (kw - 1) * dw - 1) // sw + 1
    acc = np.full((oh, ow), bias, np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += w[ky, kx] * x[ky * dh:ky * dh + (oh - 1) * sh + 1:sh,
                                 kx * dw:kx * dw + (ow - 1) * sw + 1:sw]
    v = (((acc * mult) >> 32) + rnd) >> sh_r
    return np.clip(v, lo, hi)


@pytest.mark.device
@pytest.mark.parametrize("kh,kw,stride,dil,h,wd", [
    (3, 3, (1, 1), (1, 1), 7, 13),     # rows of 11: whole vectors and a tail
    (3, 3, (2, 2), (1, 1), 9, 18),     # gathers at x stride 2
    (4, 4, (1, 1), (1, 1), 6, 11),     # 16 taps
    (3, 3, (1, 1), (6, 6), 15, 22),    # window offsets past a byte: the int32-lane paths
    (2, 5, (1, 2), (2, 1), 8, 20)], ids=["3x3", "3x3s2", "4x4", "3x3d6", "2x5s12d21"])
def test_dw_plane_s8_mve(kh, kw, stride, dil, h, wd):
    """mtvm_dw_plane_dot_s8_mve (windows of at most 16 taps within a byte gather's reach) and
    mtvm_dw_plane_s8_mve (four pixels per int32 vector: the 3x3 rows with the weights in
    registers, the other windows and a plane's last row in the general loop) against NumPy,
    one channel plane each, with the fast requantization and the ReLU clamp."""
    rng = np.random.default_rng(kh * 100 + wd)
    x = rng.integers(-128, 128, (h, wd))
    w = rng.integers(-128, 128, (kh, kw))
    bias, mult = int(rng.integers(-5000, 5000)), int(rng.integers(1 << 30, 1 << 31))
    sh_r, zp = 9, int(rng.integers(-10, 10))
    rnd, lo, hi = (1 << (sh_r - 1)) + zp * (1 << sh_r), zp, 127
    want = dw_ref(x, w, bias, stride, dil, mult, rnd, sh_r, lo, hi)
    oh, ow = want.shape
    (sh, sw), (dh, dw) = stride, dil
    taps = [ky * dh * wd + kx * dw for ky in range(kh) for kx in range(kw)]
    geo = (f"{{ {wd}, {oh}, {ow}, {kh}, {kw}, {sh}, {sw}, {dh}, {dw}, {mult}, {rnd}, {sh_r}, "
           f"{lo}, {hi}, {int(3 * sw <= sh * wd)} }}")
    decls = [c_array("x", x.reshape(-1), "int8_t"), c_array("w8", w.reshape(-1), "int8_t"),
             f"static const mtvm_dw_plane_s8_mve_t geo = {geo};",
             f"static int8_t y[{oh * ow + 4}];"]
    calls = ["    mtvm_dw_plane_s8_mve(x, y, w8, %d, &geo);" % bias,
             f"    for (int32_t i = 0; i < {oh * ow + 4}; ++i) printf(\"%d \", y[i]);",
             "    printf(\"\\n\");", f"    memset(y, 99, sizeof y);"]
    n = 1
    if len(taps) <= 16 and max(taps) <= 255:
        decls += [c_array("taps", taps + [0] * (16 - len(taps)), "uint8_t")]
        calls += [f"    mtvm_dw_plane_dot_s8_mve(x, y, w8, {bias}, taps, &geo);",
                  f"    for (int32_t i = 0; i < {oh * ow + 4}; ++i) printf(\"%d \", y[i]);",
                  "    printf(\"\\n\");"]
        n = 2
    out = run_c_test(program(decls, ["    memset(y, 99, sizeof y);"] + calls,
                             "mtvm_depthwise_s8_mve.h"),
                     name="dw_plane_s8_mve", target=M55, library=["mtvm_depthwise_s8_mve.h"])
    row = " ".join(str(int(v)) for v in list(want.reshape(-1)) + [99] * 4)
    assert lines(out) == [row] * n


@pytest.mark.device
def test_dot_s8_s8_mve():
    """mtvm_dot_s8_s8_mve and mtvm_dot4_s8_s8_mve (QMatMul's rows) against NumPy, lengths
    around the 16-byte step, 16 random bytes after every row (not to be read)."""
    rng = np.random.default_rng(58)
    decls, calls, want = [], [], []
    for i, n in enumerate((1, 7, 15, 16, 17, 33, 64, 100)):
        stride = n + 16
        a = rng.integers(-128, 128, n + 16)
        b = rng.integers(-128, 128, (4, stride))
        bias = rng.integers(-1000, 1000, 4)
        decls += [c_array(f"a{i}", a, "int8_t"), c_array(f"b{i}", b.reshape(-1), "int8_t"),
                  c_array(f"s{i}", bias, "int32_t")]
        calls += [f"    {{ int32_t acc[4]; memcpy(acc, s{i}, sizeof acc);",
                  f"      mtvm_dot4_s8_s8_mve(a{i}, b{i}, {stride}, {n}, acc);",
                  f"      printf(\"%ld %ld %ld %ld %ld\\n\", (long)acc[0], (long)acc[1], "
                  f"(long)acc[2], (long)acc[3], (long)mtvm_dot_s8_s8_mve(a{i}, b{i}, {n})); }}"]
        s = b[:, :n] @ a[:n]
        want.append(" ".join(str(int(v)) for v in list(bias + s) + [s[0]]))
    out = run_c_test(program(decls, calls, "mtvm_dot_8_mve.h"), name="dot_s8_s8_mve",
                     target=M55, library=["mtvm_dot_8_mve.h"])
    assert lines(out) == want


@pytest.mark.device
def test_copy_rows_s8_mve():
    """mtvm_copy_rows_s8_mve (the depthwise's bordered plane): rows of 1, 15, 16, 17 and 40
    bytes into a wider plane at an offset; the border bytes stay as they were."""
    rng = np.random.default_rng(59)
    decls, calls, want = [], [], []
    for i, (rows, n) in enumerate(((3, 1), (2, 15), (2, 16), (3, 17), (2, 40))):
        stride, at = n + 3, n + 4
        src = rng.integers(-128, 128, rows * n)
        dst = np.full((rows + 2) * stride, 7)
        for r in range(rows):
            dst[at + r * stride:at + r * stride + n] = src[r * n:(r + 1) * n]
        decls.append(c_array(f"s{i}", src, "int8_t"))
        calls += [f"    {{ int8_t d[{dst.size}]; memset(d, 7, sizeof d);",
                  f"      mtvm_copy_rows_s8_mve(d, {at}, {stride}, s{i}, {rows}, {n});",
                  f"      for (int32_t k = 0; k < {dst.size}; ++k) printf(\"%d \", d[k]);",
                  "      printf(\"\\n\"); }"]
        want.append(" ".join(str(int(v)) for v in dst))
    out = run_c_test(program(decls, calls, "mtvm_depthwise_s8_mve.h"), name="copy_rows_s8_mve",
                     target=M55, library=["mtvm_depthwise_s8_mve.h"])
    assert lines(out) == want
