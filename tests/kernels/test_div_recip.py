"""C unit test of mtvm_div_recip_u32 (mtvm_requantize.h): floor(n / d) through d's
double reciprocal on x86-64 / AArch64 hosts (QSoftmax's division by the row's sum),
which must equal the integer division wherever the emitter allows it
(quantized.softmax.softmax_recip_ok: n < 2^31, quotients below 2^14). Swept at
the dangerous places: n an exact multiple of d and one below, for divisors from 1
to 2^32 - 1 and quotients up to 2^14 - 1, plus random pairs; on the host under
ASan/UBSan, portable and -march=native (where gcc may contract or vectorize)."""
from __future__ import annotations

import pytest

from .kernel_harness import run_c_test

DIV_TEST = r"""
#include <stdint.h>
#include <stdio.h>
#include "mtvm_requantize.h"

static uint64_t state = 88172645463325252ull;
static uint32_t next32(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 16);
}

/* 1 if n / d is exact through the reciprocal (or out of the allowed range). */
static int check(uint32_t n, uint32_t d)
{
    if (n >= 0x80000000u || d == 0 || n / d >= (1u << 14)) return 1;
    return mtvm_div_recip_u32(n, d, mtvm_recip_u32(d)) == (int32_t)(n / d);
}

int main(void)
{
    long bad = 0, tried = 0;
    /* divisors: small ones, powers of two and their neighbours, random */
    for (int i = 0; i < 200000; ++i) {
        uint32_t d;
        if (i < 4096) d = (uint32_t)i + 1u;
        else if (i < 4096 + 96) d = (1u << ((i - 4096) / 3)) + (uint32_t)((i - 4096) % 3) - 1u;
        else d = next32() >> (next32() % 32);
        if (d == 0) d = 1;
        /* quotients near the largest allowed, small ones, random */
        for (int j = 0; j < 8; ++j) {
            uint32_t q = j < 2 ? (1u << 14) - 1u - (uint32_t)j : j < 4 ? (uint32_t)j - 2u
                                                              : next32() % (1u << 14);
            uint64_t n0 = (uint64_t)q * d;
            uint64_t cand[4] = { n0, n0 - 1, n0 + 1, n0 + d - 1 };
            for (int c = 0; c < 4; ++c) {
                if (cand[c] >= 0x80000000u || (c == 1 && n0 == 0)) continue;
                ++tried;
                if (!check((uint32_t)cand[c], d)) {
                    if (bad < 5) printf("wrong: %u / %u\n", (unsigned)cand[c], (unsigned)d);
                    ++bad;
                }
            }
        }
    }
    printf("tried %ld bad %ld\n", tried, bad);
    return bad != 0;
}
"""


@pytest.mark.parametrize("march", [None, "native"])
def test_div_recip_is_the_integer_division(march):
    out = run_c_test(DIV_TEST, name="div_recip", library=["mtvm_requantize.h"], march=march)
    tried, bad = out.split()[-3], out.split()[-1]
    assert bad == "0" and int(tried) > 1_000_000, out
