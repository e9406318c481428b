"""Build and run C unit tests of the kernel library (c_runtime/kernels/).

A test is a complete C program that #includes library headers by name,
prints its results and returns 0. It gets the library files exactly as a
compiled model gets them (kernel_library.module_files: the closure of the
headers, specialized for the target) and runs
  * on the host: cc -std=c99 -Wall -Wextra -Werror, under ASan/UBSan, optionally
    with -march=native (the AVX2/AVX-512 paths of this machine);
  * on an emulated board (mps2-an386: Cortex-M4F, mps2-an385: Cortex-M3, ...):
    arm-none-eabi-gcc with the board's cflags, under qemu-system-arm, output
    and exit status through semihosting (semihost_start.c, semihost_link.ld);
  * on riscv32-virt: riscv64-unknown-elf-gcc with picolibc's semihosting crt0 and
    I/O, under qemu-system-riscv32 -M virt -bios none.
The Python side compares the printed values with the NumPy bit-exact models.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from mtvm.boards import load_board
from mtvm.codegen import kernel_library
from mtvm.target import GENERIC, Target, host_target

HERE = os.path.dirname(os.path.abspath(__file__))
WARN = ["-std=c99", "-Wall", "-Wextra", "-Werror"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"]
QEMU_TIMEOUT = 60


def _write_library(root: str, library, target) -> None:
    for rel, text in kernel_library.module_files(list(library), target).items():
        path = os.path.join(root, os.path.basename(rel))
        with open(path, "w") as f:
            f.write(text)


def _run(cmd, what, timeout=120, env=None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what}: timed out after {timeout} s")


def run_c_test(test_c: str, *, name: str, target: str = "host", sanitize: bool = True,
               library=(), march: str | None = None) -> str:
    """Compile and run one C test program; returns its stdout (fails the calling
    test on a compile error, a non-zero exit, a sanitizer report or a timeout)."""
    with tempfile.TemporaryDirectory(prefix="mtvm-ktest-") as tmp:
        src = os.path.join(tmp, f"{name}.c")
        with open(src, "w") as f:
            f.write(test_c)
        if target == "host":
            # the library specialized for the -march it is built with (native: this host)
            t = Target.parse("host" if march == "native" else march) if march else GENERIC
            _write_library(tmp, library, t)
            cc = os.environ.get("CC", "cc")
            flags = ["-O2"] + WARN + (SANITIZE if sanitize else []) + \
                ([f"-march={march}"] if march else [])
            exe = os.path.join(tmp, name)
            p = _run([cc, *flags, "-I", tmp, src, "-o", exe, "-lm"], f"compiling {name}")
            if p.returncode:
                pytest.fail(f"compiling {name} for the host failed:\n{p.stderr[-3000:]}")
            env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0",
                       UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
            r = _run([exe], f"running {name}", env=env)
        elif load_board(target).data.get("template") == "riscv":
            r = _run_riscv(tmp, src, name, target, library)
        else:
            board = load_board(target)
            for tool in (board.data.get("cc", "arm-none-eabi-gcc"), "qemu-system-arm"):
                if shutil.which(tool) is None:
                    pytest.skip(f"{tool} not installed")
            _write_library(tmp, library, Target.from_board(board))
            elf = os.path.join(tmp, f"{name}.elf")
            ram_end = f"-Wl,--defsym=__mtvm_ram_end={board.ram.origin + board.ram.size:#x}"
            p = _run([board.data.get("cc", "arm-none-eabi-gcc"), *board.cflags, "-O2", *WARN,
                      "--specs=rdimon.specs", "-nostartfiles", ram_end, "-T",
                      os.path.join(HERE, "semihost_link.ld"), "-I", tmp,
                      os.path.join(HERE, "semihost_start.c"), src, "-o", elf, "-lm"],
                     f"compiling {name}")
            if p.returncode:
                pytest.fail(f"compiling {name} for {target} failed:\n{p.stderr[-3000:]}")
            r = _run(["qemu-system-arm", "-M", board.qemu_machine, "-nographic", "-monitor",
                      "none", "-serial", "none", "-semihosting-config",
                      "enable=on,target=native", "-kernel", elf], f"running {name} on {target}",
                     timeout=QEMU_TIMEOUT)
        if r.returncode != 0:
            pytest.fail(f"{name} on {target} exited {r.returncode}:\n{r.stdout[-2000:]}\n"
                        f"{r.stderr[-3000:]}")
        return r.stdout


def _run_riscv(tmp, src, name, target, library) -> subprocess.CompletedProcess:
    """A test on an emulated RISC-V board (riscv32-virt): riscv64-unknown-elf-gcc with the
    board's -march/-mabi and picolibc's semihosting crt0 and I/O (printf, exit status),
    loaded at the board's RAM by qemu-system-riscv32 -M virt -bios none."""
    board = load_board(target)
    cc = board.data.get("cc", "riscv64-unknown-elf-gcc")
    for tool in (cc, "qemu-system-riscv32"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    if board.qemu_machine != "virt":
        pytest.skip(f"C unit tests run on riscv32-virt only, not {target}")
    _write_library(tmp, library, Target.from_board(board))
    elf = os.path.join(tmp, f"{name}.elf")
    mem = ["-Wl,--defsym=__flash=0x80000000", "-Wl,--defsym=__flash_size=0x200000",
           "-Wl,--defsym=__ram=0x80200000", "-Wl,--defsym=__ram_size=0x200000"]
    march = Target.from_board(board).cflags()
    p = _run([cc, *march, "-O2", *WARN, "--specs=picolibc.specs", "--oslib=semihost",
              "--crt0=semihost", *mem, "-I", tmp, src, "-o", elf, "-lm"], f"compiling {name}")
    if p.returncode:
        pytest.fail(f"compiling {name} for {target} failed:\n{p.stderr[-3000:]}")
    r = _run(["qemu-system-riscv32", "-M", "virt", "-bios", "none", "-nographic",
              "-monitor", "none", "-serial", "none", "-semihosting-config",
              "enable=on,target=native", "-kernel", elf], f"running {name} on {target}",
             timeout=QEMU_TIMEOUT)
    # picolibc's semihosting stdout reaches QEMU's stderr
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout + r.stderr, "")


def c_array(name: str, values, ctype: str) -> str:
    """`static const <ctype> name[N] = {...};` with exact integer values."""
    vals = [int(v) for v in list(values)]
    body = ", ".join(f"{v}" if v > -(1 << 31) else f"({v + 1} - 1)" for v in vals)
    return f"static const {ctype} {name}[{len(vals)}] = {{{body}}};"


def has_avx2() -> bool:
    t = host_target()
    return t.is_x86 and t.has("avx2")
