"""mtvm Targets as LLVM target machines: triple, CPU, features, float ABI.

The same Target that picks the C backend's schedules picks LLVM's code
generation: an x86-64 level is LLVM's CPU of that name, an Arm M-profile core
its `thumbv*` triple (eabihf with an FPU, soft float without), an RV32 ISA
`riscv32` with its extension letters and ABI.
"""
from __future__ import annotations

import functools

from ...errors import MtvmError
from ...target import Target, host_target

# Arm architecture (Target.isa) -> LLVM's Thumb triple arch.
_THUMB = {"armv6-m": "thumbv6m", "armv7-m": "thumbv7m", "armv7e-m": "thumbv7em",
          "armv8-m.main": "thumbv8m.main", "armv8.1-m.main": "thumbv8.1m.main"}


@functools.cache
def _llvm():
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def llvm_target(target: Target) -> Target:
    """The target LLVM compiles for: the portable "c" target means this host."""
    return host_target() if target.is_generic else target


def triple_cpu_features(target: Target) -> tuple[str, str, str, str]:
    """(triple, cpu, features, abi) of an mtvm Target."""
    t = llvm_target(target)
    if t.is_x86:
        llvm = _llvm()
        extra = [f"+{f}" for f in sorted(t.features) if f == "avx512vnni"]
        if t.has("avx512f"):
            extra.append("-prefer-256-bit")   # the kernels are written for full vectors
        return (llvm.get_process_triple() if t.runs_on_host() else "x86_64-unknown-linux-gnu",
                t.cpu, ",".join(extra), "")
    if t.is_arm:
        arch = _THUMB.get(t.isa)
        if arch is None:
            raise MtvmError(f"target {t.name}: no LLVM triple for {t.isa}")
        triple = f"{arch}-none-eabi" + ("hf" if t.fpu else "")
        features = []
        for f in ("dsp", "mve", "mve.fp"):
            if f not in t.features:
                features.append(f"-{f}")
        if not t.fpu:
            features.append("+soft-float")
        else:
            # LLVM's Cortex-M4/M7 models call VFMA slow and keep VMUL + VADD; gcc (and so
            # the C backend) fuses them: one instruction, the same cycles on an M4.
            features.append("-slowfpvfmx")
        return triple, t.cpu, ",".join(features), ""
    if t.is_riscv:
        letters = [f for f in ("m", "a", "f", "c") if f in t.isa[4:]]
        abi = "ilp32f" if "f" in letters else "ilp32"
        return "riscv32-unknown-elf", "generic-rv32", ",".join(f"+{x}" for x in letters), abi
    raise MtvmError(f"target {t.name}: the LLVM backend has no code generator for it")


# On an Arm core with an FPU the C side is built -mfloat-abi=hard, but llvmlite
# cannot set LLVM's float ABI (TargetOptions.FloatABIType): its code would pass
# floats in core registers. So every function and libm call is declared with
# the hard-float convention itself (arm_aapcs_vfpcc), the libm intrinsics LLVM
# would lower to a library call (with its own, soft, convention) are called as
# functions instead, and the object is marked as using VFP register arguments
# (elf_arm.mark_vfp_args) for the linker. These intrinsics are instructions there.
ARM_HARD_FLOAT_INTRINSICS = frozenset({"llvm.sqrt", "llvm.fabs", "llvm.fma", "llvm.copysign"})


def abi(target: Target) -> tuple[str, frozenset | None]:
    """(calling convention, intrinsics allowed) for FunctionLowering."""
    t = llvm_target(target)
    if t.is_arm and t.fpu:
        return "arm_aapcs_vfpcc", ARM_HARD_FLOAT_INTRINSICS
    return "", None


def target_machine(target: Target, jit: bool = False, opt: int = 3):
    """An llvmlite TargetMachine for the target (static relocation for a
    microcontroller's firmware, position independent on a host)."""
    llvm = _llvm()
    triple, cpu, features, abi = triple_cpu_features(target)
    host = llvm_target(target).is_x86
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=opt, reloc="pic" if host else "static",
        codemodel="jitdefault" if jit else "default", jit=jit, abiname=abi)


def optimize(module, tm) -> None:
    """LLVM's -O3 pipeline over a parsed module (loop vectorizer included)."""
    llvm = _llvm()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)


__all__ = ["abi", "llvm_target", "optimize", "target_machine", "triple_cpu_features"]
