"""C unit tests of the Arm DSP int8 pointwise kernel over 8 n input channels
(c_runtime/kernels/arm_dsp/mtvm_pw_s8_dsp.h: mtvm_pw8_pack_s8_dsp + mtvm_pw8_s8_dsp, and for
n = 2..4 mtvm_pw8_sum_s8_dsp (first and middle groups) and mtvm_pw8_last_s8_dsp through
the sums' slots) against its definition:
acc = bias + the products, then sat8((floor(acc * mult / 2^32) + rnd) >> sh) and the clamp,
sh per channel or one constant shift with weights and bias times 2^k (k 0..7)
-- every pixel count mod 4 (the four-pixel assembly steps, the last pixels), full-range and
narrower clamps, extreme bytes. On the host (ASan/UBSan:
portable C), the emulated Cortex-M4F (SMLAD/SMMLA assembly) and Cortex-M3 (portable)."""
from __future__ import annotations

import numpy as np
import pytest

from .kernel_harness import c_array, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
HW = 40

PW_TEST = r"""
#include <stdio.h>
#include "mtvm_pw_s8_dsp.h"
@ARRAYS@
static uint32_t xp[4 * @HW@];
static int8_t y[@HW@];
@PW8@
int main(void)
{
    for (int c = 0; c < @N@; ++c) {
        mtvm_pw8_pack_s8_dsp(x + 8 * @HW@ * c, @HW@, np[c], xp);
        if (lo[c] == -128 && hi[c] == 127) {
            PW8(-128, 127);
        } else {
            PW8(-20, 90);
        }
        for (int i = 0; i < np[c]; ++i) printf(" %d", (int)y[i]);
        printf("\n");
    }
    return 0;
}
"""


# The two forms of the requantization: sh per channel in a register, or the layer's one
# shift S (a constant: SSAT shifts) with each channel's weights and bias times 2^k (k = 0
# in the first).
PW8_REG = """#define KK k[c]
#define SH sh[c]
#define PW8(LO, HI) mtvm_pw8_s8_dsp(xp, y, np[c], w + 8 * c, k[c], bias[c], mult[c], rnd[c], \\
                                    sh[c], LO, HI)"""
COMMON_S = 9
PW8_COMMON = f"""#define KK k[c]
#define SH {COMMON_S}
#define PW8(LO, HI) mtvm_pw8_s8_dsp(xp, y, np[c], w + 8 * c, k[c], bias[c], mult[c], rnd[c], \\
                                    {COMMON_S}, LO, HI)"""


def cases(seed: int, k: int, np_, sh_lo: int, common: bool = False):
    """Random cases of k input channels (the first gives the largest sum): their inputs,
    weights, pixel counts and requantization, as C arrays, and the cases' parameters.
    common: sh is COMMON_S for all, and each case's weights and bias count 2^k (k 0..7)."""
    rng = np.random.default_rng(seed)
    nc = len(np_)
    x = rng.integers(-128, 128, (nc, k, HW))
    w = rng.integers(-128, 128, (nc, k))
    x[0], w[0] = -128, -128
    prm = dict(np=np.asarray(np_), bias=rng.integers(-(1 << 16), 1 << 16, nc),
               mult=rng.integers(1 << 30, 1 << 31, nc), sh=rng.integers(sh_lo, sh_lo + 8, nc),
               k=np.zeros(nc, np.int64))
    if common:
        prm["sh"], prm["k"] = np.full(nc, COMMON_S), np.arange(nc) % 8
    yzp = rng.integers(-128, 128, nc)
    prm["rnd"] = (1 << (prm["sh"] - 1)) + yzp * (1 << prm["sh"])
    prm["lo"] = np.where(np.arange(nc) % 3 == 2, -20, -128)
    prm["hi"] = np.where(np.arange(nc) % 3 == 2, 90, 127)
    arrays = [c_array("x", x.ravel(), "int8_t"), c_array("w", w.ravel(), "int8_t")] + \
        [c_array(name, v, "int32_t") for name, v in prm.items() if name != "sh" or not common]
    return x, w, prm, arrays


def check(out: str, x, w, prm, channels):
    """Each case's line of outputs against the definition over its channels[c] inputs."""
    lines = out.strip().splitlines()
    assert len(lines) == len(prm["np"])
    for c, line in enumerate(lines):
        k = channels[c]
        acc = int(prm["bias"][c]) + (x[c, :k, :prm["np"][c]].astype(np.int64) *
                                     w[c, :k].astype(np.int64)[:, None]).sum(axis=0)
        acc <<= int(prm["k"][c])
        v = ((acc * int(prm["mult"][c])) >> 32) + int(prm["rnd"][c])
        v = np.clip(v >> int(prm["sh"][c]), -128, 127)
        v = np.clip(v, int(prm["lo"][c]), int(prm["hi"][c]))
        assert [int(t) for t in line.split()] == v.tolist(), f"case {c}"


@pytest.mark.parametrize("common", [False, True], ids=["sh", "common_shift"])
@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_pointwise8_matches_its_definition(target, common):
    x, w, prm, arrays = cases(16, 8, [1, 2, 3, 5, 8, 16, 17, 33, 40, 39, 4, 6], 4, common)
    src = PW_TEST.replace("@ARRAYS@", "\n".join(arrays)).replace("@N@", str(len(x))) \
        .replace("@HW@", str(HW)).replace("@PW8@", PW8_COMMON if common else PW8_REG)
    out = run_c_test(src, name="pw_s8_dsp", target=target, library=("mtvm_pw_s8_dsp.h",))
    check(out, x, w, prm, [8] * len(x))


PWN_TEST = r"""
#include <stdio.h>
#include "mtvm_pw_s8_dsp.h"
@ARRAYS@
#define HW @HW@
static uint32_t xp[5 * 4 * HW];   /* up to four groups, then the sums' slots */
static int8_t y[HW];
@PW8@
/* N groups (a constant: the sums' distances are immediates) */
#define RUN(N, LO, HI) do { \
        for (int g = 0; g < (N); ++g) \
            mtvm_pw8_pack_s8_dsp(xc + 8 * g * HW, HW, np[c], xp + 4 * HW * g); \
        mtvm_pw8_sum_s8_dsp(xp, np[c], wc, KK, 4 * HW * (N), bias[c], 1); \
        if ((N) > 2) mtvm_pw8_sum_s8_dsp(xp + 4 * HW, np[c], wc + 8, KK, 4 * HW * ((N) - 1), 0, \
                                         0); \
        if ((N) > 3) mtvm_pw8_sum_s8_dsp(xp + 8 * HW, np[c], wc + 16, KK, 4 * HW * ((N) - 2), 0, \
                                         0); \
        mtvm_pw8_last_s8_dsp(xp + 4 * HW * ((N) - 1), y, np[c], wc + 8 * ((N) - 1), KK, 4 * HW, \
                             mult[c], rnd[c], SH, LO, HI); \
    } while (0)
int main(void)
{
    for (int c = 0; c < @N@; ++c) {
        const int8_t* xc = x + 32 * HW * c;
        const int8_t* wc = w + 32 * c;
        const int full = lo[c] == -128 && hi[c] == 127;
        if (ng[c] == 2) { if (full) RUN(2, -128, 127); else RUN(2, -20, 90); }
        else if (ng[c] == 3) { if (full) RUN(3, -128, 127); else RUN(3, -20, 90); }
        else { if (full) RUN(4, -128, 127); else RUN(4, -20, 90); }
        for (int i = 0; i < np[c]; ++i) printf(" %d", (int)y[i]);
        printf("\n");
    }
    return 0;
}
"""


@pytest.mark.parametrize("common", [False, True], ids=["sh", "common_shift"])
@pytest.mark.parametrize("target", ["host"] + BOARDS)
def test_pointwise_groups_match_their_definition(target, common):
    """16, 24 and 32 input channels: the first, middle and last passes through the sums'
    slots after the packed groups (x's groups are planes HW apart, as the schedule packs
    them)."""
    ng = np.array([2, 3, 4, 2, 3, 4, 2, 2, 4, 3, 2, 4])
    x, w, prm, arrays = cases(17, 32, [1, 2, 3, 4, 5, 8, 16, 17, 33, 40, 39, 7], 6, common)
    src = PWN_TEST.replace("@ARRAYS@", "\n".join(arrays + [c_array("ng", ng, "int32_t")])) \
        .replace("@N@", str(len(x))).replace("@HW@", str(HW)) \
        .replace("@PW8@", PW8_COMMON if common else PW8_REG)
    out = run_c_test(src, name="pwn_s8_dsp", target=target, library=("mtvm_pw_s8_dsp.h",))
    check(out, x, w, prm, 8 * ng)
