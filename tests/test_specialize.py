"""codegen.specialize: resolving the preprocessor conditions a target decides."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from mtvm.codegen.specialize import evaluate, specialize
from mtvm.target import Target

X86 = Target.parse("x86-64-v3").macros()
M4 = Target.parse("cortex-m4").macros()

SOURCE = """\
#if defined(__AVX512F__) && !defined(MTVM_NO_SIMD)
#define NR 16
#elif defined(__AVX2__) && defined(__FMA__) && !defined(MTVM_NO_SIMD)
#define NR 8
#else
#define NR 4
#endif
#if defined(__ARM_FEATURE_DSP)
#define SIMD_X86 0
#elif defined(__AVX2__) && !defined(MTVM_NO_SIMD)
#define SIMD_X86 1
#endif
#if NR == 4
int nr(void) { return 4; }
#else
int nr(void) { return NR; }
#endif
#ifdef SIMD_X86
int x86(void) { return 1; }
#endif
#if defined(__GNUC__) && (__ARM_FP & 4)
int fp(void) { return 1; }
#endif
int main(void) { return 0; }"""


def test_evaluate_is_tri_state():
    assert evaluate("defined(__AVX2__)", X86) is True
    assert evaluate("defined __AVX2__ && defined(__ARM_FEATURE_DSP)", X86) is False
    assert evaluate("defined(__AVX2__) && !defined(MTVM_NO_SIMD)", X86) == "!defined(MTVM_NO_SIMD)"
    assert evaluate("defined(__ARM_FEATURE_DSP) || defined(FOO)", M4) is True
    assert evaluate("__ARM_ARCH >= 7 && __ARM_ARCH < 8", M4) is True
    assert evaluate("(__ARM_FP & 4) && defined(__ARM_FEATURE_DSP)", X86) is False
    assert evaluate("FOO(1)", X86) == "FOO(1)"          # function-like: left alone
    assert evaluate("defined(__AVX2__)", {}) == "defined(__AVX2__)"


def test_cortex_m4_keeps_only_its_branches():
    out = specialize(SOURCE, M4)
    assert "__AVX" not in out and "MTVM_NO_SIMD" not in out
    assert "#define NR 4" in out and "#define NR 8" not in out
    assert "int nr(void) { return 4; }" in out and "return NR;" not in out
    assert "#define SIMD_X86 0" in out and "int x86(void)" in out   # defined (as 0)
    assert "#if defined(__GNUC__)" in out                          # undecided part kept


def test_x86_keeps_the_undecided_user_switch():
    out = specialize(SOURCE, X86)
    assert "__ARM_FEATURE_DSP" not in out and "__AVX512F__" not in out
    assert "#if !defined(MTVM_NO_SIMD)\n#define NR 8\n#else\n#define NR 4\n#endif" in out
    assert "#if NR == 4" in out            # NR depends on MTVM_NO_SIMD: left to the compiler
    assert "int fp(void)" not in out       # __ARM_FP is 0 on x86


def test_generic_is_identity():
    assert specialize(SOURCE, {}) == SOURCE


def test_defines_only_in_dropped_branches_become_undefined():
    src = ("#if defined(__AVX2__)\n#define MTVM_X86_PATH 1\n#endif\n"
           "#if defined(MTVM_X86_PATH)\nx86();\n#else\nportable();\n#endif")
    assert specialize(src, M4).split() == ["portable();"]
    assert specialize(src, X86).split() == ["#define", "MTVM_X86_PATH", "1", "x86();"]


def test_nested_and_continued_directives():
    src = ("#if defined(__ARM_FEATURE_DSP) && \\\n    defined(__thumb2__)\n"
           "#ifdef USER\nuser();\n#else\nasm_path();\n#endif\n#else\nplain();\n#endif")
    assert specialize(src, M4) == "#ifdef USER\nuser();\n#else\nasm_path();\n#endif"
    assert specialize(src, X86) == "plain();"


@pytest.mark.parametrize("target", ["x86-64-v3", "cortex-m4", "cortex-m0"])
def test_specialized_source_compiles_like_the_original(tmp_path, target):
    """The compiler sees the same program: preprocess both with the target's flags."""
    t = Target.parse(target)
    cc = "arm-none-eabi-gcc" if t.is_arm else os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} not installed")
    a, b = tmp_path / "a.c", tmp_path / "b.c"
    a.write_text(SOURCE)
    b.write_text(specialize(SOURCE, t.macros()))

    def pre(p):
        r = subprocess.run([cc, *t.cflags(), "-E", "-P", str(p)], capture_output=True,
                           text=True, check=True)
        return [line for line in r.stdout.splitlines() if line.strip()]
    assert pre(a) == pre(b)
