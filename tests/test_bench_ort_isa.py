"""The AVX2 comparison of bench/ is fair only if onnxruntime, too, runs without
AVX-512: bench/ort_isa.py hides AVX-512 from the benchmark process's CPUID.
Checked in a fresh process (the mask is per process and cannot be undone)."""
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")


def _flags() -> set[str]:
    with open("/proc/cpuinfo") as f:
        return next((set(line.split(":", 1)[1].split()) for line in f
                     if line.startswith("flags")), set())


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=BENCH, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo") or
                    not {"avx512f", "cpuid_fault"} <= _flags(),
                    reason="needs an AVX-512 CPU that can fault on CPUID")
def test_cpuid_hides_avx512_and_children_see_the_real_cpu():
    # numpy reads CPUID when it is imported, as onnxruntime's MLAS does: after the
    # mask it must see no AVX-512; a child process (execve resets the mask, so
    # compilers started by the bench see the real CPU) must see it again.
    features = ("try:\n from numpy._core._multiarray_umath import __cpu_features__ as f\n"
                "except ImportError:\n from numpy.core._multiarray_umath import __cpu_features__ as f\n"
                "print('AVX512F', f['AVX512F'], 'AVX2', f['AVX2'])\n")
    r = _run("import subprocess, sys, ort_isa\n"
             "print(ort_isa.limit_to_avx2())\n"
             + features +
             f"sys.stdout.write(subprocess.run([sys.executable, '-c', {features!r}],"
             " capture_output=True, text=True).stdout)\n"
             "import onnxruntime\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "limited to AVX2" in lines[0]
    assert lines[1] == "AVX512F False AVX2 True"
    assert lines[2] == "AVX512F True AVX2 True"


def test_limit_must_come_before_onnxruntime():
    r = _run("import onnxruntime, ort_isa\nort_isa.limit_to_avx2()\n")
    assert r.returncode != 0
    assert "before onnxruntime is imported" in r.stderr


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo") or
                    not {"avx512f", "cpuid_fault"} <= _flags(),
                    reason="needs an AVX-512 CPU that can fault on CPUID")
def test_real_segfault_still_kills_the_process():
    # The handler steps over CPUID only; any other fault must end the process.
    r = _run("import ort_isa, ctypes\nort_isa.limit_to_avx2()\nctypes.string_at(8)\n")
    assert r.returncode == -11, (r.returncode, r.stderr)
