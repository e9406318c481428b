"""Run onnxruntime on the AVX2 instruction set on an AVX-512 machine.

The AVX2 comparison (`--march x86-64-v3`) builds mtvm's C as for an AVX2-only
host. onnxruntime chooses its kernels at run time from CPUID, so on an AVX-512
machine it would still run its AVX-512 (and AMX) kernels, and the ratio would
compare two instruction sets. `limit_to_avx2()` makes CPUID of this process
report no AVX-512, AMX or AVX-VNNI (bench/cpuid_mask.c), so onnxruntime picks
what it picks on an AVX2 host. Call it before onnxruntime is imported.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
AVX512F = 1 << 16


def cpu_flags() -> set[str]:
    """The flags of /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def limit_to_avx2() -> str:
    """Hide AVX-512 from this process's CPUID; returns what onnxruntime will see,
    for the report. Does nothing (and says so) where there is no AVX-512 to hide
    or the CPU cannot fault on CPUID."""
    if "onnxruntime" in sys.modules:
        raise RuntimeError("limit_to_avx2() must run before onnxruntime is imported")
    flags = cpu_flags()
    if "avx512f" not in flags:
        return "onnxruntime on this machine's own kernels (no AVX-512 here to hide)"
    if "cpuid_fault" not in flags:
        return ("onnxruntime on this machine's AVX-512 kernels (the CPU cannot fault on "
                "CPUID, so they cannot be hidden)")
    work = tempfile.mkdtemp(prefix="mtvm-cpuid-")
    try:
        so = os.path.join(work, "libcpuid_mask.so")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so,
                        os.path.join(HERE, "cpuid_mask.c")], check=True, capture_output=True)
        lib = ctypes.CDLL(so, use_errno=True)   # stays mapped after its file is removed
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lib.cpuid_mask_leaf7_ebx.restype = ctypes.c_uint32
    if lib.cpuid_mask_install() != 0:
        return (f"onnxruntime on this machine's AVX-512 kernels (CPUID faulting refused: "
                f"{os.strerror(ctypes.get_errno()) or 'error'})")
    if lib.cpuid_mask_leaf7_ebx() & AVX512F:
        raise RuntimeError("CPUID still reports AVX-512 after the mask was installed")
    return ("onnxruntime limited to AVX2: CPUID of the benchmark process reports no "
            "AVX-512, AMX or AVX-VNNI (bench/cpuid_mask.c)")
