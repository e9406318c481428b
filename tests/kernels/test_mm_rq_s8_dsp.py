"""C unit test of the fused int8 QMatMul loop of the Arm DSP cores
(c_runtime/kernels/arm_dsp/mtvm_mm_rq_s8_dsp.h): the Thumb-2 loop (Cortex-M4F, mps2-an386)
equals the header's own C form (mtvm_mm_rq_s8_dsp_c, the same file on the same board) and
a NumPy model of it, for 4 and 5 rows, depths of one, two, four and eight groups a step
(four with one, two and three groups after the loop: 52, 24, 28, 20),
and the three forms of the folded bias Add: none, one ia for all columns (after the
table), an ia per column; with the weights read as int8 and widened beforehand
(mtvm_mm_rq_widen_s8: the wide form); each column's rnd and sh in two words, or packed in
one (post | 4, MTVM_MM_RQ_PACKED: shifts 6 to 11, rnd | sh). On the host the C form runs
under ASan/UBSan."""
from __future__ import annotations

import numpy as np
import pytest

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device)]
# V, depth, columns, post
CASES = [(5, 32, 12, 1), (4, 32, 8, 0), (5, 12, 7, 2), (4, 24, 9, 1), (5, 64, 6, 2),
         (4, 128, 5, 0), (5, 8, 16, 0), (5, 52, 7, 0), (4, 28, 6, 2), (5, 20, 5, 1),
         (5, 32, 12, 5), (4, 48, 8, 4), (5, 28, 7, 6), (4, 12, 9, 4), (5, 64, 6, 5)]
POST_SHIFT = 7

TEST = r"""
#include <stdio.h>
#include "mtvm_mm_rq_s8_dsp.h"
@ARRAYS@
static uint32_t pk[MTVM_PACKV_WORDS(5, 128)];
static uint32_t wide[128 * 16 / 2];
static int8_t ya[5 * 16], yc[5 * 16], yw[5 * 16], ywc[5 * 16];
#define CASE(V, KK, NN, POST) do { \
        mtvm_packv_s8_dsp(x + xo, KK, 1, V, V, KK, pk); \
        mtvm_mm_rq_s8_dsp(V, w + wo, pk, KK, NN, NN, prm + po, ya, POST, @SHIFT@, 0); \
        mtvm_mm_rq_s8_dsp_c(V, w + wo, pk, KK, NN, NN, prm + po, yc, POST, @SHIFT@, 0); \
        mtvm_mm_rq_widen_s8(w + wo, NN * KK, wide); \
        mtvm_mm_rq_s8_dsp(V, (const int8_t*)wide, pk, KK, NN, NN, prm + po, yw, POST, @SHIFT@, \
                          1); \
        mtvm_mm_rq_s8_dsp_c(V, (const int8_t*)wide, pk, KK, NN, NN, prm + po, ywc, POST, \
                            @SHIFT@, 1); \
        for (int i = 0; i < V * NN; ++i) printf(" %d %d %d %d", ya[i], yc[i], yw[i], ywc[i]); \
        printf("\n"); \
        xo += V * KK; wo += NN * KK; \
        po += MTVM_MM_RQ_PRM(POST) * NN + (MTVM_MM_RQ_ADD_FORM(POST) == 1); \
    } while (0)
int main(void)
{
    int xo = 0, wo = 0, po = 0;
@CASES@
    return 0;
}
"""


def _table(rng, nn, post):
    packed, post = post & 4, post & 3
    m = rng.integers(1 << 29, (1 << 31) - 1, nn)
    sh = rng.integers(6, 12, nn) if packed else rng.integers(2, 6, nn)
    rnd = (1 << (sh - 1)) + rng.integers(-20, 20, nn) * (1 << sh)
    bias = rng.integers(-4000, 4000, nn) * (64 if packed else 1)
    c = rng.integers(-3000, 3000, nn) * 16
    ia = rng.integers(60, 200, nn if post == 2 else 1)
    cols = [bias, m] + ([rnd | sh] if packed else [rnd, sh]) + ([c] if post else []) + \
        ([ia] if post == 2 else [])
    flat = np.stack(cols, axis=1).ravel()
    return (np.append(flat, ia) if post == 1 else flat), bias, m, rnd, sh, c, ia


def _model(x, w, bias, m, rnd, sh, post, c, ia):
    acc = x.astype(np.int64) @ w.astype(np.int64).T + bias           # [V][N]
    v = ((acc * m) >> 32) + rnd >> sh
    v = np.clip(v, -128, 127)
    if post & 3:
        v = np.clip((c + v * ia) >> POST_SHIFT, -128, 127)
    return v


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_fused_loop_equals_its_c_form(target):
    rng = np.random.default_rng(31)
    xs, ws, tabs, want, cases = [], [], [], [], []
    for v, kk, nn, post in CASES:
        x = rng.integers(-128, 128, (v, kk))
        w = rng.integers(-128, 128, (nn, kk))
        table, bias, m, rnd, sh, c, ia = _table(rng, nn, post)
        xs.append(x.ravel()), ws.append(w.ravel()), tabs.append(table)
        want.append(_model(x, w, bias, m, rnd, sh, post, c, ia).ravel())
        cases.append(f"    CASE({v}, {kk}, {nn}, {post});")
    arrays = "\n".join([c_array("x", np.concatenate(xs), "int8_t"),
                        c_array("w", np.concatenate(ws), "int8_t"),
                        c_array("prm", np.concatenate(tabs), "int32_t")])
    src = TEST.replace("@ARRAYS@", arrays).replace("@CASES@", "\n".join(cases)) \
        .replace("@SHIFT@", str(POST_SHIFT))
    out = run_c_test(src, name="mm_rq", target=target,
                     library=("mtvm_mm_s8_dsp.h", "mtvm_mm_rq_s8_dsp.h"))
    lines = out.strip().splitlines()
    assert len(lines) == len(CASES)
    for (v, kk, nn, post), line, exp in zip(CASES, lines, want):
        got = np.array([int(t) for t in line.split()]).reshape(-1, 4)
        # [r][o] in all: y[r * nn + o]
        for col, form in enumerate(("loop", "C form", "wide loop", "wide C form")):
            np.testing.assert_array_equal(got[:, col], exp,
                                          err_msg=f"{form} V={v} K={kk} post={post}")


# QBatchMatMul's fused form: b [K][N] widened per column less zb (mtvm_mm_rq_cols_s8), a's
# rows packed, the wide loop: sum (a - za)(b - zb) requantized. (V, K, N, za, zb)
BMM_CASES = [(5, 49, 7, -128, 6), (4, 22, 11, 3, -5), (5, 32, 9, 0, 17), (5, 8, 5, -7, 0)]

BMM_TEST = r"""
#include <stdio.h>
#include "mtvm_mm_rq_s8_dsp.h"
@ARRAYS@
static uint32_t pk[MTVM_PACKV_WORDS(5, 52)], bw[52 * 11 / 2];
static int32_t prm[4 * 11];
static int8_t y[5 * 11], y2[5 * 11];
/* all N columns at once, then in two chunks of CW columns (the second overlapping the
 * first where N is odd), the rows N apart in y2 */
#define CASE(V, K, N, ZA, ZB, MULT, RND, SH) do { \
        const int kp = (K + 3) / 4 * 4, CW = (N + 1) / 2; \
        mtvm_mm_rq_cols_s8(b + bo, K, N, N, kp, ZB, ZA, MULT, RND, SH, bw, prm); \
        mtvm_packv_s8_dsp(a + ao, K, 1, V, V, K, pk); \
        mtvm_mm_rq_s8_dsp(V, (const int8_t*)bw, pk, kp, N, N, prm, y, 0, 0, 1); \
        for (int j0 = 0; j0 < N; j0 += CW) { \
            const int c0 = j0 + CW <= N ? j0 : N - CW; \
            mtvm_mm_rq_cols_s8(b + bo + c0, K, CW, N, kp, ZB, ZA, MULT, RND, SH, bw, prm); \
            mtvm_mm_rq_s8_dsp(V, (const int8_t*)bw, pk, kp, CW, N, prm, y2 + c0, 0, 0, 1); \
        } \
        for (int i = 0; i < V * N; ++i) printf(" %d %d", y[i], y2[i]); \
        printf("\n"); \
        ao += V * K; bo += K * N; \
    } while (0)
int main(void)
{
    int ao = 0, bo = 0;
@CASES@
    return 0;
}
"""


@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_fused_batch_matmul_form_against_its_definition(target):
    """Depths of 49 (13 groups, the last three values zeros), 22, 32 and 8, zero points on
    either side, both and neither; every column at once and in two chunks (the rows'
    stride then the whole width)."""
    rng = np.random.default_rng(37)
    As, Bs, want, cases = [], [], [], []
    for v, kk, nn, za, zb in BMM_CASES:
        a = rng.integers(-128, 128, (v, kk))
        b = rng.integers(-128, 128, (kk, nn))
        a[0, :], b[:, 0] = -128, 127
        m, sh = int(rng.integers(1 << 30, (1 << 31) - 1)), int(rng.integers(8, 12))
        rnd = (1 << (sh - 1)) + int(rng.integers(-20, 20)) * (1 << sh)
        acc = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
        want.append(np.clip(((acc * m) >> 32) + rnd >> sh, -128, 127).ravel())
        As.append(a.ravel()), Bs.append(b.ravel())
        cases.append(f"    CASE({v}, {kk}, {nn}, {za}, {zb}, {m}, {rnd}, {sh});")
    arrays = "\n".join([c_array("a", np.concatenate(As), "int8_t"),
                        c_array("b", np.concatenate(Bs), "int8_t")])
    src = BMM_TEST.replace("@ARRAYS@", arrays).replace("@CASES@", "\n".join(cases))
    out = run_c_test(src, name="mm_rq_bmm", target=target,
                     library=("mtvm_mm_s8_dsp.h", "mtvm_mm_rq_s8_dsp.h"))
    lines = out.strip().splitlines()
    assert len(lines) == len(BMM_CASES)
    for case, line, exp in zip(BMM_CASES, lines, want):
        got = np.array([int(t) for t in line.split()]).reshape(-1, 2)
        np.testing.assert_array_equal(got[:, 0], exp, err_msg=f"{case}, one pass")
        np.testing.assert_array_equal(got[:, 1], exp, err_msg=f"{case}, two chunks")
