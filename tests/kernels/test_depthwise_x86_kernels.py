"""C unit tests of c_runtime/kernels/x86/mtvm_depthwise_x86.h (QConv's int8 depthwise
plane on AVX2 hosts): the vector requantization equals mtvm_requantize on every path
(m = 0 and m > 0, ties to even, products of both signs), and mtvm_dw_plane_x86 equals a
NumPy model of the plane for both strides, dilations, widths that are and are not
multiples of eight, rows narrower than a vector (at stride 1 or 2 both ways the plane as
one flat row: a DS-CNN's 25 x 5 planes and its stride-2 layer, one-pixel rows, odd row
lengths, dilations, a 5x5 window; one by one below eight flat pixels and where the strides
differ), int8 and uint8 activations, both
requantization modes; the widened-pair form's chunks, as a flat row and row by row, each
form forced where it applies (MTVM_DW_FORM) and as its counts choose. Built with -march=native (AVX-512
where the host has it) and -march=x86-64-v3 (AVX2) under ASan/UBSan: a read past the plane
(the input is its own heap-sized array here) fails the test."""
from __future__ import annotations

import numpy as np
import pytest

from mtvm.ops.quantized.common import requantize

from .kernel_harness import c_array, has_avx2, run_c_test

pytestmark = pytest.mark.skipif(not has_avx2(), reason="the host has no AVX2")

LIB = ["mtvm_depthwise_x86.h"]


def _requant_cases(rng):
    """(acc, mult, shift): random, the extremes, and exact ties of the 64-bit product
    (acc * mult a multiple of 2^(n - 1) with n = 31 - shift)."""
    cases = []
    for shift in (-1, -2, -5, -12, -31):
        n = 31 - shift
        for _ in range(40):
            mult = int(rng.integers(1 << 30, 1 << 31))
            acc = int(rng.integers(-(1 << 31), 1 << 31))
            cases.append((acc, mult, shift))
        for q in range(-6, 7):   # acc * mult = q * 2^(n - 1): every rounding tie
            mult = 1 << 30
            acc = q << (n - 1 - 30) if n - 1 >= 30 else q
            if -(1 << 31) <= acc < (1 << 31):
                cases.append((acc, mult, shift))
        cases += [(-(1 << 31), (1 << 31) - 1, shift), ((1 << 31) - 1, (1 << 31) - 1, shift)]
    return cases


def test_vector_requantization_equals_mtvm_requantize():
    rng = np.random.default_rng(3)
    cases = _requant_cases(rng)
    calls, expected = [], []
    for shift in sorted({s for _, _, s in cases}):
        group = [(a, m) for a, m, s in cases if s == shift]
        group += group[:-len(group) % 8]          # whole vectors of eight
        for i in range(0, len(group), 8):
            accs, mults = zip(*group[i:i + 8])
            calls.append(
                f"    {{ static const int32_t a[8] = {{{', '.join(map(str, accs))}}};\n"
                f"      static const int32_t m[8] = {{{', '.join(map(str, mults))}}};\n"
                "      int32_t r[8];\n"
                "      _mm256_storeu_si256((__m256i*)(void*)r, mtvm_requantize_x86(\n"
                "          _mm256_loadu_si256((const __m256i*)(const void*)a),\n"
                f"          _mm256_loadu_si256((const __m256i*)(const void*)m), {-1 - shift}));\n"
                "      for (int j = 0; j < 8; ++j) printf(\"%ld %ld\\n\", (long)r[j],\n"
                f"          (long)mtvm_requantize(a[j], m[j], {shift})); }}")
            expected += requantize(np.array(accs, np.int64), np.array(mults, np.int64),
                                   shift).tolist()
    program = "\n".join(["#include <stdio.h>", '#include "mtvm_depthwise_x86.h"',
                         "int main(void)", "{", *calls, "    return 0;", "}"])
    out = run_c_test(program, name="dw_requant_x86", library=LIB, march="native")
    rows = [tuple(int(v) for v in line.split()) for line in out.splitlines() if line.strip()]
    assert len(rows) == len(expected)
    # the vector lanes equal the C routine, which equals the NumPy model
    assert [v for v, _ in rows] == [c for _, c in rows]
    assert [c for _, c in rows] == expected


# (name, H, W (unpadded plane), kh, kw, sh, sw, dh, dw)
PLANES = [
    ("s1_w16", 5, 18, 3, 3, 1, 1, 1, 1),
    ("s1_w12", 6, 14, 3, 3, 1, 1, 1, 1),
    ("s1_w9", 4, 11, 3, 3, 1, 1, 1, 1),
    ("s1_w8", 4, 10, 3, 3, 1, 1, 1, 1),
    ("s1_w7", 4, 9, 3, 3, 1, 1, 1, 1),
    ("s2_w12", 9, 25, 3, 3, 2, 2, 1, 1),
    ("s2_w8", 7, 17, 3, 3, 2, 2, 1, 1),
    ("s2_w11", 7, 23, 3, 3, 2, 2, 1, 1),
    ("dil2", 8, 25, 3, 3, 1, 1, 2, 2),
    ("k5x5_s2", 9, 30, 5, 5, 2, 2, 1, 1),
    ("k1x4", 3, 21, 1, 4, 1, 1, 1, 1),
    ("wide", 3, 70, 3, 3, 1, 2, 1, 3),
    # rows under eight pixels at stride 1: the plane as one flat row
    ("flat_25x5", 27, 7, 3, 3, 1, 1, 1, 1),
    ("flat_w1", 12, 3, 3, 3, 1, 1, 1, 1),
    ("flat_k5", 9, 9, 5, 5, 1, 1, 1, 1),
    ("flat_dil2", 10, 8, 3, 3, 1, 1, 2, 2),
    ("flat_8", 4, 5, 3, 3, 1, 1, 1, 1),         # exactly one vector of flat pixels
    ("flat_1x3", 6, 5, 1, 3, 1, 1, 1, 1),
    ("short", 3, 5, 3, 3, 1, 1, 1, 1),           # three flat pixels: one by one
    # and at stride 2 both ways (flat pixel q reads from 2 q)
    ("flat_s2_16x5", 33, 12, 3, 3, 2, 2, 1, 1),  # a DS-CNN's stride-2 layer, padded
    ("flat_s2_odd", 10, 9, 3, 3, 2, 2, 1, 1),    # odd row length
    ("flat_s2_k5", 11, 11, 5, 5, 2, 2, 1, 1),
    ("flat_s2_dil2", 13, 13, 3, 3, 2, 2, 2, 2),
    ("short_s2", 5, 5, 3, 3, 2, 2, 1, 1),        # seven flat pixels: one by one
    ("s2_rows_only", 9, 9, 3, 3, 2, 1, 1, 1),    # strides differ: one by one
    # the widened-pair form's chunks (MTVM_DW_W16_ELEMS int16 of input a chunk): several,
    # a last one shorter than a block (at both vector widths), at stride 2; a row dilation;
    # a window of more than 32 tap pairs (the byte form)
    ("chunks", 70, 66, 3, 3, 1, 1, 1, 1),
    ("chunk_tail", 62, 66, 3, 3, 1, 1, 1, 1),
    ("chunks_s2", 101, 99, 3, 3, 2, 2, 1, 1),
    ("rows_dil3", 12, 40, 3, 3, 1, 1, 3, 1),
    ("k9x9", 12, 20, 9, 9, 1, 1, 1, 1),
    # the row-by-row form: rows of exactly a block (AVX-512, stride 2), a row dilation at
    # stride 2, a last chunk of one row
    ("s2_w16", 7, 33, 3, 3, 2, 2, 1, 1),
    ("s2_dil2_rows", 13, 41, 3, 3, 2, 2, 2, 1),
    ("rows_tail", 43, 99, 3, 3, 2, 2, 1, 1),
]


def _plane_case(rng, spec, x_u: int, exact: int):
    _, h, wd, kh, kw, sh, sw, dh, dw = spec
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (wd - (kw - 1) * dw - 1) // sw + 1
    x = rng.integers(0, 256, (h, wd)) if x_u else rng.integers(-128, 128, (h, wd))
    w = rng.integers(-255, 256, kh * kw)
    bias = int(rng.integers(-5000, 5000))
    acc = np.full((oh, ow), bias, np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += w[ky * kw + kx] * x[ky * dh:ky * dh + (oh - 1) * sh + 1:sh,
                                       kx * dw:kx * dw + (ow - 1) * sw + 1:sw]
    mult, shift, y_zp = int(rng.integers(1 << 30, 1 << 31)), -9, 3
    lo, hi = (0, 255) if x_u else (-128, 127)
    if exact:
        y = requantize(acc, mult, shift) + y_zp
        rq = f"1, {mult}, {shift}, {y_zp}, 0, 0, {lo}, {hi}"
    else:
        m = -1 - shift
        rnd = (1 << (m - 1)) + y_zp * (1 << m)
        y = (((acc * mult) >> 32) + rnd) >> m
        rq = f"0, {mult}, 0, 0, {rnd}, {m}, {lo}, {hi}"
    return x, w, bias, rq, (oh, ow), np.clip(y, lo, hi)


# MTVM_DW_FORM: the widened-pair form's choice left to its counts (None), or each form
# taken wherever it applies: 0 the byte form, 1 the flat row, 2 row by row
@pytest.mark.parametrize("form", [None, 0, 1, 2])
@pytest.mark.parametrize("march", ["native", "x86-64-v3"])
def test_plane_matches_numpy(march, form):
    rng = np.random.default_rng(5)
    arrays, calls, expected = [], [], []
    for i, spec in enumerate(s for s in PLANES for _ in range(2)):
        x_u, exact = i % 2, (i // 2) % 2
        x, w, bias, rq, (oh, ow), y = _plane_case(rng, spec, x_u, exact)
        _, h, wd, kh, kw, sh, sw, dh, dw = spec
        t = "uint8_t" if x_u else "int8_t"
        arrays += [c_array(f"w{i}", w, "int32_t")]
        calls.append(
            f"    {{ {t}* x = ({t}*)malloc({h * wd});   /* exactly the plane: ASan */\n"
            f"      {t} y[{oh * ow}];\n"
            f"      static const {t} xv[] = {{{', '.join(str(v) for v in x.ravel())}}};\n"
            f"      memcpy(x, xv, {h * wd});\n"
            f"      mtvm_dw_plane_x86((const uint8_t*)x, {x_u}, {wd}, (uint8_t*)y, {oh}, {ow}, "
            f"{kh}, {kw}, {sh}, {sw}, {dh}, {dw}, w{i}, {bias}, (mtvm_dw_requant_x86_t){{{rq}}});\n"
            f"      for (int j = 0; j < {oh * ow}; ++j) printf(\"%d \", (int)y[j]);\n"
            f"      printf(\"\\n\"); free(x); }}")
        expected.append(y.ravel())
    forced = [] if form is None else [f"#define MTVM_DW_FORM {form}"]
    program = "\n".join([*forced, "#include <stdio.h>", "#include <stdlib.h>",
                         "#include <string.h>", '#include "mtvm_depthwise_x86.h"', *arrays,
                         "int main(void)", "{",
                         *calls, "    return 0;", "}"])
    out = run_c_test(program, name="dw_plane_x86", library=LIB, march=march)
    got = [np.array([int(v) for v in line.split()]) for line in out.splitlines() if line.strip()]
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_array_equal(g, e, err_msg=f"case {i} ({PLANES[i // 2][0]})")
