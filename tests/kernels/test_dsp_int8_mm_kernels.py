"""C unit tests of the Arm DSP int8 matrix-product, QAdd and QSoftmax kernels
(c_runtime/kernels/arm_dsp/mtvm_mm_s8_dsp.h: mtvm_packv_*_dsp + mtvm_dot<4|5|6>p_*_dsp and
mtvm_sum_*_dsp, mtvm_colsum_*_dsp;
mtvm_qadd_s8_dsp.h: mtvm_qadd_*_dsp, mtvm_qadd1_*_dsp, mtvm_qadd32_*_dsp, mtvm_qaffine32*_dsp)
against their NumPy definitions:
exact int32 sums of one byte vector with 4, 5 or 6 packed vectors (one to all present,
every length mod 8: the two-group assembly steps, one group, the byte tail; vectors read
along rows or down columns; int8 and uint8 on either side), and QAdd's rounding (ties to
even, forced by small shifts and even multipliers) bit for bit with the portable
mtvm_round_shift, and with the tie test left out (a negative shift) where no input makes a
tie; mtvm_softmax_s8_dsp.h's rows (every length mod 4, ties at the maximum) against
QSoftmax's reference. On the host (ASan/UBSan: the portable reading of the same layout), the
emulated Cortex-M4F (SXTB16/SMLAD/SMLAL assembly) and Cortex-M3 (portable)."""
from __future__ import annotations

import numpy as np
import pytest

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
LIB = ("mtvm_mm_s8_dsp.h", "mtvm_qadd_s8_dsp.h")
LENGTHS = (1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 50, 64)
DT = {"s8": ("int8_t", -128, 128), "u8": ("uint8_t", 0, 256)}

MM_TEST = r"""
#include <stdio.h>
#include "mtvm_mm_s8_dsp.h"
@ARRAYS@
static uint32_t pk[MTVM_PACKV_WORDS(6, 64)];
#define CASE(PT, AT, SRC, AVEC) do { \
        int32_t s0 = acc[6 * c], s1 = acc[6 * c + 1], s2 = acc[6 * c + 2], s3 = acc[6 * c + 3]; \
        int32_t s4 = acc[6 * c + 4], s5 = acc[6 * c + 5]; \
        mtvm_packv_##PT##_dsp((const PT##_t_*)SRC, vs[c], es[c], nv[c], V[c], n[c], pk); \
        if (V[c] == 4) { \
            mtvm_dot4p_##AT##_dsp((const AT##_t_*)AVEC, pk, n[c], s0, s1, s2, s3); \
        } else if (V[c] == 5) { \
            mtvm_dot5p_##AT##_dsp((const AT##_t_*)AVEC, pk, n[c], s0, s1, s2, s3, s4); \
        } else { \
            mtvm_dot6p_##AT##_dsp((const AT##_t_*)AVEC, pk, n[c], s0, s1, s2, s3, s4, s5); \
        } \
        printf(" %ld %ld %ld %ld %ld %ld", (long)s0, (long)s1, (long)s2, (long)s3, (long)s4, \
               (long)s5); \
    } while (0)
typedef int8_t s8_t_;
typedef uint8_t u8_t_;
int main(void)
{
    for (int c = 0; c < @N@; ++c) {
        CASE(s8, s8, vs8 + 384 * c, as8 + 64 * c);
        CASE(s8, u8, vs8 + 384 * c, au8 + 64 * c);
        CASE(u8, s8, vu8 + 384 * c, as8 + 64 * c);
        CASE(u8, u8, vu8 + 384 * c, au8 + 64 * c);
        printf(" %ld %ld", (long)mtvm_sum_s8_dsp(as8 + 64 * c, n[c]),
               (long)mtvm_sum_u8_dsp(au8 + 64 * c, n[c]));
        printf("\n");
    }
    return 0;
}
"""


def _mm_cases(rng):
    cases = []
    for n in LENGTHS:
        for v in (4, 5, 6):
            for nv in sorted({v, v - 1, 1}):
                cols = len(cases) % 2 == 1
                # rows: vector r at r * n, elements contiguous; columns: element e at
                # e * 6, vectors adjacent (a QBatchMatMul's b)
                vs, es = (1, 6) if cols else (n, 1)
                cases.append((n, v, nv, vs, es))
    return cases


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_packed_dot_products_are_exact(target):
    rng = np.random.default_rng(13)
    cases = _mm_cases(rng)
    nc = len(cases)
    vs8 = rng.integers(-128, 128, (nc, 384))
    vu8 = rng.integers(0, 256, (nc, 384))
    as8 = rng.integers(-128, 128, (nc, 64))
    au8 = rng.integers(0, 256, (nc, 64))
    vs8[:, 0], vu8[:, 0], as8[:, 0], au8[:, 0] = -128, 255, -128, 255     # extremes
    acc = rng.integers(-(1 << 24), 1 << 24, (nc, 6))
    n, v, nv, vs, es = (np.array(x) for x in zip(*cases))
    arrays = "\n".join([c_array("vs8", vs8.ravel(), "int8_t"),
                        c_array("vu8", vu8.ravel(), "uint8_t"),
                        c_array("as8", as8.ravel(), "int8_t"),
                        c_array("au8", au8.ravel(), "uint8_t"),
                        c_array("acc", acc.ravel(), "int32_t"),
                        c_array("n", n, "int32_t"), c_array("nv", nv, "int32_t"),
                        c_array("V", v, "int32_t"),
                        c_array("vs", vs, "int32_t"), c_array("es", es, "int32_t")])
    out = run_c_test(MM_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(nc)),
                     name="mm_s8_dsp", target=target, library=LIB)
    lines = out.strip().splitlines()
    assert len(lines) == nc
    for c, (line, (kk, nvec, v, s_v, s_e)) in enumerate(zip(lines, cases)):
        got = [int(t) for t in line.split()]
        want = []
        for src in (vs8, vu8):
            for a in (as8, au8):
                for r in range(6):
                    s = int(acc[c, r])
                    if r < v:
                        vec = [int(src[c, r * s_v + e * s_e]) for e in range(kk)]
                        s += sum(int(x) * y for x, y in zip(a[c, :kk], vec))
                    want.append(s)
        want += [int(as8[c, :kk].sum()), int(au8[c, :kk].sum())]     # mtvm_sum_*_dsp
        assert got == want, f"case {c}: n={kk} V={nvec} nv={v} vs={s_v} es={s_e}"


COLSUM_TEST = r"""
#include <stdio.h>
#include "mtvm_mm_s8_dsp.h"
@ARRAYS@
static int32_t sums[64];
int main(void)
{
    for (int c = 0; c < @N@; ++c) {
        if (u[c]) {
            mtvm_colsum_u8_dsp(bu + off[c], rows[c], cols[c], sums);
        } else {
            mtvm_colsum_s8_dsp(bs + off[c], rows[c], cols[c], sums);
        }
        for (int j = 0; j < cols[c]; ++j) printf(" %ld", (long)sums[j]);
        printf("\n");
    }
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_column_sums_are_exact(target):
    """mtvm_colsum_*_dsp (a QBatchMatMul's b column sums): every column count mod 4, and
    the row counts where the int16 lanes are fullest (255 int8 rows of -128, 128 uint8
    rows of 255) and one past them (the column loop)."""
    rng = np.random.default_rng(15)
    cases = [(u, r, c) for u in (0, 1) for r in (1, 3, 49, 128, 129, 255, 256)
             for c in (1, 4, 7, 33)]
    data = {0: [], 1: []}
    offs, want = [], []
    for u, r, c in cases:
        lo, hi = (0, 256) if u else (-128, 128)
        b = rng.integers(lo, hi, (r, c))
        if r in (128, 255):   # the extreme sums a lane holds
            b[:] = 255 if u else -128
        offs.append(sum(x.size for x in data[u]))
        data[u].append(b.ravel())
        want.append([int(v) for v in b.sum(axis=0)])
    arrays = "\n".join([
        c_array("bs", np.concatenate(data[0]), "int8_t"),
        c_array("bu", np.concatenate(data[1]), "uint8_t"),
        c_array("u", [u for u, _, _ in cases], "int32_t"),
        c_array("rows", [r for _, r, _ in cases], "int32_t"),
        c_array("cols", [c for _, _, c in cases], "int32_t"),
        c_array("off", offs, "int32_t")])
    out = run_c_test(COLSUM_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(len(cases))),
                     name="colsum", target=target, library=LIB)
    got = [[int(t) for t in line.split()] for line in out.strip().splitlines()]
    assert got == want


QADD_TEST = r"""
#include <stdio.h>
#include "mtvm_qadd_s8_dsp.h"
@ARRAYS@
static int8_t ys[64];
static uint8_t yu[64];
int main(void)
{
    for (int c = 0; c < @N@; ++c) {
        if (lo[c] < 0) {
            mtvm_qadd_s8_dsp(a8 + 64 * c, b8 + 64 * c, ys, 64, c0[c], ia[c], ib[c], n[c], zy[c],
                             lo[c], hi[c]);
        } else {
            mtvm_qadd_u8_dsp(au + 64 * c, bu + 64 * c, yu, 64, c0[c], ia[c], ib[c], n[c], zy[c],
                             lo[c], hi[c]);
        }
        for (int i = 0; i < 64; ++i) printf(" %d", lo[c] < 0 ? (int)ys[i] : (int)yu[i]);
        if (lo[c] < 0) {
            mtvm_qadd1_s8_dsp(b8 + 64 * c, ys, 64, c1[c], ib[c], n[c], zy[c], lo[c], hi[c]);
        } else {
            mtvm_qadd1_u8_dsp(bu + 64 * c, yu, 64, c1[c], ib[c], n[c], zy[c], lo[c], hi[c]);
        }
        for (int i = 0; i < 64; ++i) printf(" %d", lo[c] < 0 ? (int)ys[i] : (int)yu[i]);
        printf("\n");
    }
    return 0;
}
"""


def _round_shift(v: int, n: int) -> int:
    """mtvm_round_shift (c_runtime/kernels/generic/mtvm_requantize.h): ties to even."""
    return (v + (1 << (n - 1)) - 1 + ((v >> n) & 1)) >> n


def _wrap32(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_qadd_rounds_as_the_portable_kernel(target):
    rng = np.random.default_rng(14)
    cases = []
    for c in range(24):
        n = int(rng.choice([1, 2, 3, 8, 20, 30, 31]))
        if c % 3 == 0:    # even multipliers, small shift: many exact halves
            ia, ib = int(rng.integers(1, 64)) * 2, int(rng.integers(1, 64)) * 2
            n = int(rng.choice([1, 2, 3, 4]))
        else:
            ia, ib = int(rng.integers(1, 1 << 31)), int(rng.integers(1, 1 << 31))
        signed = c % 2 == 0
        lo, hi = ((-128, 127) if signed else (0, 255)) if c % 4 < 2 else \
            ((-100, 90) if signed else (7, 200))
        za, zb, zy = (int(rng.integers(-128, 128)) if signed else int(rng.integers(0, 256))
                      for _ in range(3))
        cases.append((n, ia, ib, za, zb, zy, lo, hi))
    nc = len(cases)
    a8, b8 = rng.integers(-128, 128, (nc, 64)), rng.integers(-128, 128, (nc, 64))
    au, bu = rng.integers(0, 256, (nc, 64)), rng.integers(0, 256, (nc, 64))
    a0 = rng.integers(-128, 128, nc)        # the scalar operand of mtvm_qadd1
    c0 = [-za * ia - zb * ib + (1 << (n - 1)) for n, ia, ib, za, zb, *_ in cases]
    # qadd1: the constant's raw value a0 + za, its term (a0 + za - za) ia folded in
    c1 = [x + (int(s) + za) * ia for x, s, (n, ia, ib, za, *_) in zip(c0, a0, cases)]
    cols = list(zip(*cases))

    def acc_of(c, first, i):
        n, ia, ib, za, zb, zy, lo, hi = cases[c]
        a, b = (a8[c], b8[c]) if lo < 0 else (au[c], bu[c])
        x = int(a[i]) if first else int(a0[c]) + za
        return (x - za) * ia + (int(b[i]) - zb) * ib

    # where the case's data makes no tie, the kernels get -n (the test left out)
    n_arg = [n if any(acc_of(c, f, i) % (1 << n) == 1 << (n - 1) for f in (True, False)
                      for i in range(64)) else -n for c, (n, *_) in enumerate(cases)]
    assert any(v < 0 for v in n_arg) and any(v > 0 for v in n_arg)
    cols[0] = n_arg
    arrays = "\n".join([c_array("a8", a8.ravel(), "int8_t"), c_array("b8", b8.ravel(), "int8_t"),
                        c_array("au", au.ravel(), "uint8_t"),
                        c_array("bu", bu.ravel(), "uint8_t"),
                        c_array("n", cols[0], "int32_t"), c_array("ia", cols[1], "int32_t"),
                        c_array("ib", cols[2], "int32_t"), c_array("zy", cols[5], "int32_t"),
                        c_array("lo", cols[6], "int32_t"), c_array("hi", cols[7], "int32_t")])
    for name, vals in (("c0", c0), ("c1", c1)):
        arrays += f"\nstatic const int64_t {name}[{nc}] = " + \
            "{" + ", ".join(f"INT64_C({v})" for v in vals) + "};"
    out = run_c_test(QADD_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(nc)),
                     name="qadd_s8_dsp", target=target, library=LIB)
    lines = out.strip().splitlines()
    assert len(lines) == nc
    ties = 0
    for c, (line, (n, ia, ib, za, zb, zy, lo, hi)) in enumerate(zip(lines, cases)):
        got = [int(t) for t in line.split()]
        signed = lo < 0
        a, b = (a8[c], b8[c]) if signed else (au[c], bu[c])
        want = []
        for first in (True, False):
            for i in range(64):
                x = int(a[i]) if first else int(a0[c]) + za
                v = (x - za) * ia + (int(b[i]) - zb) * ib
                ties += (v % (1 << n)) == (1 << (n - 1))
                want.append(min(max(_wrap32(_round_shift(v, n)) + zy, lo), hi))
        assert got == want, f"case {c}: n={n} ia={ia} ib={ib}"
    assert ties > 20      # the tie rule was exercised


QADD32_TEST = r"""
#include <stdio.h>
#include "mtvm_qadd_s8_dsp.h"
@ARRAYS@
static int8_t ys[65536];
static uint8_t yu[65536];
int main(void)
{
    for (int c = 0; c < @N@; ++c) {
        /* every pair (a, b): a = i >> 8, b = i & 255 of the case's signedness; the first
         * call of each case in place over a copy of a (y aliasing a), an odd count */
        if (lo[c] < 0) {
            for (int i = 0; i < 65535; ++i) ys[i] = (int8_t)((i >> 8) - 128);
            mtvm_qadd32_s8_dsp(ys, sb, ys, 65535, c0[c], ia[c], ib[c], n[c], lo[c], hi[c]);
        } else {
            for (int i = 0; i < 65535; ++i) yu[i] = (uint8_t)(i >> 8);
            mtvm_qadd32_u8_dsp(yu, ub, yu, 65535, c0[c], ia[c], ib[c], n[c], lo[c], hi[c]);
        }
        unsigned long sum = 0;
        for (int i = 0; i < 65535; ++i) {
            sum = sum * 31u + (unsigned long)(lo[c] < 0 ? (uint8_t)ys[i] : yu[i]);
        }
        printf("%lu\n", sum & 0xffffffffUL);
    }
    return 0;
}
"""


def _qadd32_cases():
    """(signed, za, zb, zy, ia, ib, n, lo, hi) of QAdds as the quantization pass makes them
    (add_multipliers of random scale ratios), plus ratios that make exact halves (0.5 and
    0.5: the reference's ties to even, which no (c, ia, ib, n) of the 32-bit form follows)."""
    from mtvm.ops.quantized.elementwise import add_multipliers
    rng = np.random.default_rng(21)
    cases = []
    for c in range(10):
        signed = c % 2 == 0
        ra, rb = (float(v) for v in np.exp(rng.uniform(-2.5, 1.0, 2)))
        ia, ib, n = add_multipliers(ra, rb)
        za, zb, zy = (int(rng.integers(-128, 128)) if signed else int(rng.integers(0, 256))
                      for _ in range(3))
        lo, hi = ((-128, 127) if signed else (0, 255)) if c % 3 else \
            ((-100, 90) if signed else (7, 200))
        cases.append((signed, za, zb, zy, ia, ib, n, lo, hi))
    ia, ib, n = add_multipliers(0.5, 0.5)
    cases.append((True, 3, -5, 1, ia, ib, n, -128, 127))
    return cases


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_qadd32_gives_every_pair_the_reference_output(target):
    """narrow_qadd's 32-bit constants, run through mtvm_qadd32_*_dsp over all 65,536 input
    pairs (in place, an odd count: the two-a-step loop and its tail), against the QAdd
    op's reference; the exact-halves case has no 32-bit form (None: the 64-bit kernel)."""
    from types import SimpleNamespace

    from mtvm.ops.base import get_op
    from mtvm.schedules.arm_dsp.elementwise_s8 import narrow_qadd
    found, want, consts = [], [], []
    for signed, za, zb, zy, ia, ib, n, lo, hi in _qadd32_cases():
        dt = np.int8 if signed else np.uint8
        buf = SimpleNamespace(const=None, dtype=dt)
        k = SimpleNamespace(ins=[buf, buf])
        narrow = narrow_qadd(k, za, zb, zy, ia, ib, n, lo, hi)
        if narrow is None:
            found.append(False)
            continue
        found.append(True)
        vals = np.arange(256) - (128 if signed else 0)
        a = np.repeat(vals, 256)[:65535].astype(dt)
        b = np.tile(vals, 256)[:65535].astype(dt)
        ref = get_op("QAdd", "mtvm").reference(a, b, a_zp=za, b_zp=zb, y_zp=zy, a_mult=ia,
                                               b_mult=ib, shift=n, act_min=lo, act_max=hi)
        h = 0
        for v in ref.astype(np.uint8).tolist():
            h = (h * 31 + v) & 0xFFFFFFFF
        want.append(h)
        consts.append((*narrow, lo, hi))
    assert found[:-1] == [True] * (len(found) - 1) and found[-1] is False
    vals = np.arange(256)
    cols = list(zip(*consts))
    arrays = "\n".join([c_array("sb", np.tile(vals - 128, 256)[:65535], "int8_t"),
                        c_array("ub", np.tile(vals, 256)[:65535], "uint8_t")] +
                       [c_array(nm, col, "int32_t")
                        for nm, col in zip(("c0", "ia", "ib", "n", "lo", "hi"), cols)])
    out = run_c_test(QADD32_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(len(consts))),
                     name="qadd32_s8_dsp", target=target, library=LIB)
    assert [int(t) for t in out.split()] == want


QAFFINE_TEST = r"""
#include <stdio.h>
#include "mtvm_qadd_s8_dsp.h"
@ARRAYS@
static int8_t ys[@C@ * 256];
static uint8_t yu[@C@ * 256];
int main(void)
{
    /* per case: the channels-innermost form over [256][C] (x value v in row v), then the
     * per-channel runs over [C][256], in place */
    for (int c = 0; c < @N@; ++c) {
        const int32_t* ca = tab + 2 * @C@ * c;
        for (int layout = 0; layout < 2; ++layout) {
            for (int i = 0; i < @C@ * 256; ++i) {
                const int v = layout == 0 ? i / @C@ : i % 256;
                ys[i] = (int8_t)(v - 128);
                yu[i] = (uint8_t)v;
            }
            for (int r = 0; r < (layout == 0 ? 256 : @C@); ++r) {
                int8_t* s = ys + r * (layout == 0 ? @C@ : 256);
                uint8_t* u = yu + r * (layout == 0 ? @C@ : 256);
                if (layout == 0 && lo[c] < 0) {
                    mtvm_qaffine32c_s8_dsp(s, s, @C@, ca, n[c], lo[c], hi[c]);
                } else if (layout == 0) {
                    mtvm_qaffine32c_u8_dsp(u, u, @C@, ca, n[c], lo[c], hi[c]);
                } else if (lo[c] < 0) {
                    mtvm_qaffine32_s8_dsp(s, s, 256, ca[2 * r], ca[2 * r + 1], n[c], lo[c], hi[c]);
                } else {
                    mtvm_qaffine32_u8_dsp(u, u, 256, ca[2 * r], ca[2 * r + 1], n[c], lo[c], hi[c]);
                }
            }
            for (int i = 0; i < @C@ * 256; ++i) {
                /* printed as [C][256] in both layouts */
                const int j = layout == 0 ? (i % 256) * @C@ + i / 256 : i;
                printf(" %d", lo[c] < 0 ? (int)ys[j] : (int)yu[j]);
            }
            printf("\n");
        }
    }
    return 0;
}
"""


def _qaffine_cases(chans: int):
    """QAffine parameters as the quantization pass makes them (passes.quantize.rule_affine:
    scale +-2^16, the offset in its units, the multiplier of the rest) for random per-channel
    gains (negative and zero ones too) and offsets; full and narrower clamps, int8 and uint8."""
    from mtvm.ops.quantized.common import quantize_multiplier
    rng = np.random.default_rng(22)
    cases = []
    for c in range(6):
        signed = c % 2 == 0
        r = np.exp(rng.uniform(-4.0, 1.5, chans)) * rng.choice([-1.0, 1.0], chans)
        r[0] = 0.0 if c == 1 else r[0]
        o = rng.uniform(-60, 60, chans)
        scale = np.where(r > 0, 1, np.where(r < 0, -1, 0)) << 16
        real = np.where(r != 0, np.abs(r), 1.0) / (1 << 16)
        offset = np.rint(o / real)
        mult, shift = quantize_multiplier(real)
        zx, zy = (int(rng.integers(-128, 128)) if signed else int(rng.integers(0, 256))
                  for _ in range(2))
        lo, hi = ((-128, 127) if signed else (0, 255)) if c < 4 else \
            ((zy, 127) if signed else (zy, 255))    # a fused Relu
        cases.append((signed, scale, offset, mult, shift, zx, zy, lo, hi))
    return cases


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_qaffine32_gives_every_value_the_reference_output(target):
    """narrow_affine's per-channel (c, ia) through mtvm_qaffine32c_*_dsp (channels
    innermost) and mtvm_qaffine32_*_dsp (a run per channel), in place, for all 256 input
    values of each channel, against the QAffine op's reference."""
    from types import SimpleNamespace

    from mtvm.ops.base import get_op
    from mtvm.schedules.arm_dsp.elementwise_s8 import narrow_affine
    chans = 7
    tabs, consts, want = [], [], []
    for signed, scale, offset, mult, shift, zx, zy, lo, hi in _qaffine_cases(chans):
        dt = np.int8 if signed else np.uint8

        def buf(v, dtype=np.int32):
            return SimpleNamespace(const=np.asarray(v, dtype), dtype=dtype,
                                   size=np.size(v))
        k = SimpleNamespace(ins=[SimpleNamespace(const=None, dtype=dt), buf(scale),
                                 buf(offset), buf(mult), buf(shift)])
        narrow = narrow_affine(k, zx, zy, lo, hi)
        assert narrow is not None
        table, n = narrow
        tabs.append(table.ravel())
        consts.append((n, lo, hi))
        x = (np.arange(256) - (128 if signed else 0)).astype(dt)
        xs = np.broadcast_to(x, (chans, 256))
        ref = get_op("QAffine", "mtvm").reference(
            np.ascontiguousarray(xs), np.asarray(scale, np.int32), np.asarray(offset, np.int32),
            mult, shift, axis=0, x_zp=zx, y_zp=zy, act_min=lo, act_max=hi)
        want.append(ref.astype(np.int64).ravel().tolist())
    cols = list(zip(*consts))
    arrays = "\n".join([c_array("tab", np.concatenate(tabs), "int32_t")] +
                       [c_array(nm, col, "int32_t") for nm, col in zip(("n", "lo", "hi"), cols)])
    src = QAFFINE_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(len(consts)))
    out = run_c_test(src.replace("@C@", str(chans)), name="qaffine32_s8_dsp", target=target,
                     library=LIB)
    lines = out.strip().splitlines()
    assert len(lines) == 2 * len(want)
    for c, w in enumerate(want):
        for layout in range(2):
            assert [int(t) for t in lines[2 * c + layout].split()] == w, (c, layout)


SOFTMAX_TEST = r"""
#include <stdio.h>
#include "mtvm_softmax_s8_dsp.h"
@ARRAYS@
static uint8_t y[64];
int main(void)
{
    int off = 0;
    for (int c = 0; c < @N@; ++c) {
        mtvm_softmax_row_s8_dsp(x + off, y, d[c], table, inv[c], zy[c], lo[c], hi[c]);
        for (int i = 0; i < d[c]; ++i) printf(" %d", lo[c] < 0 ? (int)(int8_t)y[i] : (int)y[i]);
        printf("\n");
        off += d[c];
    }
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_softmax_rows_match_the_reference(target):
    from mtvm.ops.quantized.softmax import QSoftmax, softmax_table
    rng = np.random.default_rng(15)
    table = softmax_table(0.07)
    rows = []
    for c, d in enumerate((1, 3, 4, 5, 7, 8, 50, 64)):
        signed = c % 2 == 0
        x = rng.integers(-128, 128, d)
        if c == 6:
            x[:] = 127 - rng.integers(0, 3, d)          # ties at the maximum
        inv = int(round(65536 / (1 / 256)))                # output scale 1/256
        rows.append((x, d, inv, -128 if signed else 0, (-128, 127) if signed else (0, 255)))
    xs = np.concatenate([r[0] for r in rows])
    arrays = "\n".join([c_array("x", xs, "int8_t"), c_array("table", table, "uint32_t"),
                        c_array("d", [r[1] for r in rows], "int32_t"),
                        c_array("inv", [r[2] for r in rows], "uint32_t"),
                        c_array("zy", [r[3] for r in rows], "int32_t"),
                        c_array("lo", [r[4][0] for r in rows], "int32_t"),
                        c_array("hi", [r[4][1] for r in rows], "int32_t")])
    out = run_c_test(SOFTMAX_TEST.replace("@ARRAYS@", arrays).replace("@N@", str(len(rows))),
                     name="softmax_s8_dsp", target=target, library=("mtvm_softmax_s8_dsp.h",))
    lines = out.strip().splitlines()
    assert len(lines) == len(rows)
    for line, (x, d, inv, zy, (lo, hi)) in zip(lines, rows):
        want = QSoftmax.reference(None, x.astype(np.int8).reshape(1, -1), table, inv=inv,
                                  y_zp=zy, act_min=lo, act_max=hi).ravel()
        assert [int(t) for t in line.split()] == [int(v) for v in want], (d, lo)
