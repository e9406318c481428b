"""C unit tests of the vectorizable float transcendentals: the kernel library's
branch-free exponential (mtvm_exp_f32_branchless in mtvm_exp_f32.h, Softmax's and
Sigmoid's e^x on a glibc host) and the erf expression of the Erf op and the GELU
chains (mtvm.ops.math_functions.erf_f32, rendered into a C function as a kernel
renders it). Each sweeps the floats of both signs (every `stride`-th bit pattern,
plus the edges) against double-precision libm in C, on the host under ASan/UBSan
(portable and -march=native) and on the emulated Cortex-M4F and M3; and gcc -O3
must vectorize a loop calling each (AVX2 and AVX-512)."""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from mtvm.codegen import kernel_library
from mtvm.codegen.cwriter import Function, Return, Type, Var, render_c
from mtvm.ops.math_functions import erf_f32
from mtvm.target import GENERIC

from .kernel_harness import WARN, run_c_test

BOARDS = [pytest.param("mps2-an386", marks=pytest.mark.device),
          pytest.param("mps2-an385", marks=pytest.mark.device)]
TARGETS = ["host", "host-native"] + BOARDS
FLT_MIN = 1.17549435e-38
FLT_MAX = float(np.finfo(np.float32).max)


def erf_function(name: str = "erf_under_test") -> str:
    """The Erf op's float expression as a C function of x."""
    x = Var("x", Type("float32"))
    return render_c(Function(name, [x], [Return(erf_f32(x))], ret=Type("float32"),
                             static=True, inline=True))


# The sweep: the largest relative error where the exact result is a normal float, the
# largest error in units of the smallest subnormal below FLT_MIN, and whether every
# exact result above FLT_MAX came out +inf; then the function at the edges.
SWEEP_TEST = r"""
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
@INCLUDE@
@FUNCTION@

static float f_of_bits(uint32_t bits)
{
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

int main(void)
{
    double max_rel = 0.0, worst_x = 0.0, max_subnormal = 0.0;
    int overflow_ok = 1;
    for (uint32_t sign = 0; sign < 2; ++sign) {
        for (uint32_t bits = 0; bits <= 0x7F800000u; bits += @STRIDE@u) {
            const float x = f_of_bits(bits | (sign << 31));
            const double exact = @REF@((double)x);
            const double got = (double)@FN@(x);
            const double mag = fabs(exact);
            if (mag >= FLT_MIN && mag <= FLT_MAX) {
                const double rel = fabs(got - exact) / mag;
                if (rel > max_rel) {
                    max_rel = rel;
                    worst_x = x;
                }
            } else if (mag < FLT_MIN) {
                const double err = fabs(got - exact) / 1.40129846e-45;
                max_subnormal = err > max_subnormal ? err : max_subnormal;
            } else if (!(isinf(got) && got > 0)) {   /* above FLT_MAX: must be +inf */
                overflow_ok = 0;
            }
        }
    }
    printf("%.9e %.9e %.9e %d\n", max_rel, worst_x, max_subnormal, overflow_ok);
    static const uint32_t edges[] = {
        0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u,
        0x00000001u, 0x80000001u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu,
        0x3F800000u, 0xBF800000u, 0x40800000u, 0xC0800000u, 0x42B17217u, 0x42B17218u,
        0xC2AEAC50u, 0xC2CFF1B5u, 0xC2D00000u, 0x42C80000u, 0xC2DC0000u, 0x33800000u};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; ++i) {
        const float x = f_of_bits(edges[i]);
        printf("%.9e %.9e\n", (double)x, (double)@FN@(x));
    }
    return 0;
}
"""


def _sweep(fn: str, ref: str, include: str, function: str, target: str):
    # Boards emulate double libm in software: a coarser sweep keeps them in seconds.
    stride = 4099 if target.startswith("host") else 262147
    program = (SWEEP_TEST.replace("@INCLUDE@", include).replace("@FUNCTION@", function)
               .replace("@FN@", fn).replace("@REF@", ref).replace("@STRIDE@", str(stride)))
    library = ["mtvm_exp_f32.h"] if include else []
    if target == "host-native":
        out = run_c_test(program, name=fn, library=library, march="native")
    else:
        out = run_c_test(program, name=fn, target=target, library=library)
    lines = out.splitlines()
    max_rel, worst_x, max_subnormal, overflow_ok = lines[0].split()
    # %.9e prints a float exactly enough to read it back as the same float.
    edges = [tuple(float(np.float32(v)) for v in line.split()) for line in lines[1:]]
    return float(max_rel), float(worst_x), float(max_subnormal), overflow_ok == "1", edges


def _same(got: float, expect: float) -> bool:
    if math.isnan(expect):
        return math.isnan(got)
    return got == expect and math.copysign(1, got) == math.copysign(1, expect)


@pytest.mark.parametrize("target", TARGETS)
def test_branchless_exp_is_within_2e7_over_every_float(target):
    max_rel, worst_x, max_subnormal, overflow_ok, edges = _sweep(
        "mtvm_exp_f32_branchless", "exp", '#include "mtvm_exp_f32.h"', "", target)
    assert max_rel < 2e-7, f"relative error {max_rel:.3g} at x = {worst_x!r}"
    assert max_subnormal <= 1.0          # subnormal results: within one subnormal step
    assert overflow_ok
    for x, got in edges:
        expect = math.nan if math.isnan(x) else math.exp(min(x, 200.0))
        if math.isnan(x):
            assert math.isnan(got)
        elif expect > FLT_MAX:
            assert got == math.inf, x
        elif expect < 0.5 * 1.40129846e-45:     # rounds to 0
            assert got == 0.0, x
        else:
            assert got == pytest.approx(expect, rel=2e-7, abs=1.5e-45), x


@pytest.mark.parametrize("target", TARGETS)
def test_erf_is_within_5e7_over_every_float(target):
    max_rel, worst_x, max_subnormal, overflow_ok, edges = _sweep(
        "erf_under_test", "erf", "", erf_function(), target)
    assert max_rel < 5e-7, f"relative error {max_rel:.3g} at x = {worst_x!r}"
    assert max_subnormal <= 1.0
    assert overflow_ok                   # nothing overflows: vacuous
    for x, got in edges:
        if math.isnan(x):
            assert math.isnan(got)
        elif x == 0:
            assert _same(got, x)             # erf(-0) = -0
        elif abs(x) >= 3.6:
            assert got == math.copysign(1.0, x)
        else:
            assert got == pytest.approx(math.erf(x), rel=5e-7, abs=1.5e-45), x
            assert abs(got) <= 1.0


@pytest.mark.parametrize("march", [None, "native"])
def test_erf_never_leaves_minus_one_to_one(march):
    """Every float of [2, 5], where the rational comes within rounding of 1 and meets
    the +-1 of the selects; portable and -march=native builds."""
    program = ("#include <math.h>\n#include <stdio.h>\n"
               f"{erf_function()}\n"
               "int main(void)\n{\n"
               "    long bad = 0;\n"
               "    for (float x = 2.0f; x <= 5.0f; x = nextafterf(x, 6.0f)) {\n"
               "        const float y = erf_under_test(x), z = erf_under_test(-x);\n"
               "        bad += y > 1.0f || z < -1.0f || y != -z;\n"
               "    }\n"
               "    printf(\"%ld\\n\", bad);\n    return 0;\n}\n")
    assert run_c_test(program, name="erf_bounds", march=march).strip() == "0"


VECTOR_LOOP = r"""
#include <stddef.h>
@INCLUDE@
@FUNCTION@
void apply(const float* restrict in, float* restrict out, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        out[i] = @FN@(in[i]);
    }
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("which,march", [("exp", "x86-64-v3"), ("exp", "x86-64-v4"),
                                         ("erf", "x86-64-v4")])
def test_loops_calling_them_are_vectorized(which, march):
    """What they are for: gcc -O3 vectorizes a loop over them (libm's are calls). The
    erf expression's saturating selects hold its arithmetic in a conditional arm, which
    gcc (under its default -ftrapping-math) predicates with AVX-512 masks only: on AVX2
    the loop stays scalar (still several times faster than glibc's erff)."""
    if os.uname().machine != "x86_64":
        pytest.skip("the x86 vector ISAs")
    if which == "exp":
        include, function, fn = '#include "mtvm_exp_f32.h"', "", "mtvm_exp_f32_branchless"
    else:
        include, function, fn = "", erf_function(), "erf_under_test"
    program = (VECTOR_LOOP.replace("@INCLUDE@", include).replace("@FUNCTION@", function)
               .replace("@FN@", fn))
    with tempfile.TemporaryDirectory(prefix="mtvm-vec-") as tmp:
        for rel, text in kernel_library.module_files(["mtvm_exp_f32.h"], GENERIC).items():
            with open(os.path.join(tmp, os.path.basename(rel)), "w") as f:
                f.write(text)
        src = os.path.join(tmp, "loop.c")
        with open(src, "w") as f:
            f.write(program)
        p = subprocess.run(["gcc", "-O3", f"-march={march}", *WARN, "-fopt-info-vec-optimized",
                            "-I", tmp, "-c", src, "-o", os.path.join(tmp, "loop.o")],
                           capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "loop vectorized" in p.stderr, p.stderr
