"""What the generated code runs on: a Target.

A Target is a small value: the instruction set, the CPU, its FPU and SIMD
extensions, pointer size and the alignment its vectors want. The compiler
reads it to pick each kernel's schedule (mtvm.schedules) and to leave out the
code of every other target (codegen.specialize): a Cortex-M4 build carries no
x86 intrinsics, an x86-64-v4 build no Thumb-2 assembly.

Made from a string (`Target.parse`):

    c                       portable C for any target: every ISA variant under #if,
                            chosen by the C compiler's flags (the default)
    host                    this machine (x86: the x86-64 level `cc -march=native`
                            reaches, e.g. x86-64-v3 on an AVX2 host)
    x86-64, x86-64-v2, x86-64-v3, x86-64-v4
                            the psABI levels (v3: AVX2+FMA, v4: AVX-512 F/BW/CD/DQ/VL)
    cortex-m0, cortex-m0plus, cortex-m3, cortex-m4, cortex-m7, cortex-m33,
    cortex-m55, cortex-m85  Arm M-profile cores with their usual FPU
    rv32imc, rv32imac, rv32imafc
                            32-bit RISC-V microcontrollers (no SIMD): soft float, or
                            single-precision hard float (F, ilp32f) for rv32imafc

with `+feature` / `+nofeature` suffixes (`x86-64-v4+avx512vnni`,
`cortex-m4+nofp`), or from a board file (`Target.from_board`, which reads the
board's cpu, fpu, dsp and mve fields).
"""
from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from .errors import MtvmError

# -- x86 ------------------------------------------------------------------------
# The x86-64 psABI micro-architecture levels and the features each adds.
_X86_LEVELS = {
    "x86-64": ("sse", "sse2"),
    "x86-64-v2": ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"),
    "x86-64-v3": ("avx", "avx2", "fma", "bmi1", "bmi2", "f16c"),
    "x86-64-v4": ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
}
_X86_EXTRA = ("avx512vnni",)           # features a `+` suffix may add to a level
# feature -> the macro gcc and clang define for it
_X86_MACROS = {
    "sse": "__SSE__", "sse2": "__SSE2__", "sse3": "__SSE3__", "ssse3": "__SSSE3__",
    "sse4.1": "__SSE4_1__", "sse4.2": "__SSE4_2__", "popcnt": "__POPCNT__",
    "avx": "__AVX__", "avx2": "__AVX2__", "fma": "__FMA__", "bmi1": "__BMI__",
    "bmi2": "__BMI2__", "f16c": "__F16C__", "avx512f": "__AVX512F__",
    "avx512bw": "__AVX512BW__", "avx512cd": "__AVX512CD__", "avx512dq": "__AVX512DQ__",
    "avx512vl": "__AVX512VL__", "avx512vnni": "__AVX512VNNI__",
}

# -- Arm M-profile ------------------------------------------------------------------
@dataclass(frozen=True)
class _ArmCore:
    arch: str                   # -march spelling, for documentation and metadata
    arch_number: int            # __ARM_ARCH
    thumb2: bool                # Thumb-2 (everything but v6-M)
    features: tuple[str, ...]   # dsp, mve, mve.fp
    fpu: str | None             # the usual FPU of parts built on this core (None: none)


_ARM_CORES = {
    "cortex-m0": _ArmCore("armv6-m", 6, False, (), None),
    "cortex-m0plus": _ArmCore("armv6-m", 6, False, (), None),
    "cortex-m3": _ArmCore("armv7-m", 7, True, (), None),
    "cortex-m4": _ArmCore("armv7e-m", 7, True, ("dsp",), "fpv4-sp-d16"),
    "cortex-m7": _ArmCore("armv7e-m", 7, True, ("dsp",), "fpv5-d16"),
    "cortex-m33": _ArmCore("armv8-m.main", 8, True, ("dsp",), "fpv5-sp-d16"),
    "cortex-m55": _ArmCore("armv8.1-m.main", 8, True, ("dsp", "mve", "mve.fp"), "auto"),
    "cortex-m85": _ArmCore("armv8.1-m.main", 8, True, ("dsp", "mve", "mve.fp"), "auto"),
}
_ARM_FEATURES = ("dsp", "mve", "mve.fp", "fp")

# Every ISA macro a Target can decide. A macro a target does not define is
# known to be undefined on it; one not listed here (__GNUC__, MTVM_NO_SIMD, a
# kernel's own) is left to the C compiler.
_ARM_MACROS = ("__arm__", "__thumb__", "__thumb2__", "__ARM_ARCH", "__ARM_FEATURE_DSP",
               "__ARM_FEATURE_SIMD32", "__ARM_FEATURE_MVE", "__ARM_ARCH_6M__",
               "__ARM_ARCH_7M__", "__ARM_ARCH_7EM__", "__ARM_ARCH_8M_MAIN__", "__ARM_FP")
# __ARM_FP (bit 2: single, bit 3: double, bit 1: half precision) of each FPU
_ARM_FP = {"fpv4-sp-d16": 4, "fpv5-sp-d16": 4, "fpv5-d16": 14, "auto": 14}
# The features that decide mtvm's schedules (what `mtvm targets` shows).
_SHOWN = frozenset({"sse4.2", "avx2", "fma", "avx512f", "avx512bw", "avx512vnni", "dsp", "mve",
                    "mve.fp"})
_X86_ALL_MACROS = tuple(_X86_MACROS.values()) + ("__x86_64__", "__i386__")

# -- RISC-V (32-bit microcontrollers) --------------------------------------------------
# The ISAs mtvm compiles for: name -> (single-letter extensions beyond I, ABI).
# No SIMD (P, V): the int8 conv and dense kernels have RV32IM forms
# (c_runtime/kernels/riscv/); the rest is portable.
_RISCV_ISAS = {
    "rv32imc": (("m", "c"), "ilp32"),
    "rv32imac": (("m", "a", "c"), "ilp32"),
    "rv32imafc": (("m", "a", "f", "c"), "ilp32f"),
}
# Board cpu names -> their ISA (a board may also name the ISA itself as its cpu).
# QEMU's generic rv32 core is RV32GC; mtvm uses its IMAFC subset (single precision).
_RISCV_CORES = {"sifive-e31": "rv32imac", "sifive-e34": "rv32imafc", "esp32-c3": "rv32imc",
                "rv32": "rv32imafc"}
_RISCV_MACROS = ("__riscv", "__riscv_xlen", "__riscv_mul", "__riscv_atomic",
                 "__riscv_compressed", "__riscv_flen", "__riscv_float_abi_soft",
                 "__riscv_float_abi_single", "__riscv_float_abi_double", "__riscv_vector")


@dataclass(frozen=True)
class Target:
    name: str                           # canonical spelling, parseable by Target.parse
    isa: str                            # "c" (any), "x86_64", "armv7e-m", ...
    cpu: str | None = None              # "cortex-m4"; the x86 level for x86
    features: frozenset = field(default_factory=frozenset)
    fpu: str | None = None              # Arm FPU name; None: no FPU (soft float)
    pointer_bytes: int | None = None    # None: any (target c)
    alignment: int = 16                 # bytes the widest vector load wants

    # -- what it is -----------------------------------------------------------
    @property
    def is_generic(self) -> bool:
        """Portable C for any target ("c"): every ISA variant kept under #if."""
        return self.isa == "c"

    @property
    def is_x86(self) -> bool:
        return self.isa == "x86_64"

    @property
    def is_arm(self) -> bool:
        return self.isa.startswith("armv")

    @property
    def is_riscv(self) -> bool:
        return self.isa.startswith("rv")

    @property
    def is_arm_dsp(self) -> bool:
        """An Arm core with the DSP extension and without Helium (M4, M7, M33): where
        the Thumb-2 SMLAD kernels are the fastest form (a Helium core has its own)."""
        return self.is_arm and self.has("dsp") and not self.has("mve")

    @property
    def arena_alignment(self) -> int:
        """Bytes the arena's (and each pool's) start is aligned to: the widest vector
        load's, at least 16, and a cache line for target c, whose AVX-512 kernels run
        under #if. (A 16-byte aligned arena that the linker put 48 bytes into a line
        split every 512-bit load of a shared library's activations: resnet_v16's
        16-channel 3x3 convs took 1.8x their time.)"""
        return 64 if self.is_generic else max(16, self.alignment)

    @property
    def vector_constants(self) -> bool:
        """Whether the weights are aligned to a cache line on x86 builds: target c
        and the x86 targets (their 256- and 512-bit loads); never on a
        microcontroller, where the padding would be flash."""
        return self.is_generic or self.is_x86

    def has(self, *features: str) -> bool:
        return all(f in self.features for f in features)

    def describe(self) -> str:
        if self.is_generic:
            return "portable C: every ISA variant under #if, chosen by the C compiler's flags"
        if self.is_riscv:
            return "no SIMD, " + ("FPU F (single precision)" if self.fpu else "soft float")
        shown = sorted(self.features & _SHOWN) or (["SSE2 only"] if self.is_x86 else ["no SIMD"])
        fpu = f", FPU {self.fpu}" if self.fpu else (", soft float" if self.is_arm else "")
        return ", ".join(shown) + fpu

    def to_json(self) -> dict:
        return {"name": self.name, "isa": self.isa, "cpu": self.cpu,
                "features": sorted(self.features), "fpu": self.fpu,
                "pointer_bytes": self.pointer_bytes, "alignment": self.alignment}

    # -- what the C compiler will see ---------------------------------------------
    def macros(self) -> dict[str, int | None]:
        """The ISA macros this target decides: name -> value (1 or a number) when
        the compiler defines it for this target, None when it does not. Empty for
        the generic target, whose C keeps every #if."""
        if self.is_generic:
            return {}
        out: dict[str, int | None] = {}
        if self.is_x86:
            out.update({m: None for m in _ARM_MACROS})
            out.update({m: None for m in _X86_ALL_MACROS})
            out["__x86_64__"] = 1
            for f in self.features:
                out[_X86_MACROS[f]] = 1
        elif self.is_riscv:
            out.update({m: None for m in _X86_ALL_MACROS + _ARM_MACROS + _RISCV_MACROS})
            out["__riscv"] = 1
            out["__riscv_xlen"] = 32
            if self.has("m"):
                out["__riscv_mul"] = 1
            if self.has("a"):
                out["__riscv_atomic"] = 1
            if self.has("c"):
                out["__riscv_compressed"] = 1
            if self.fpu:
                out["__riscv_flen"] = 32
                out["__riscv_float_abi_single"] = 1
            else:
                out["__riscv_float_abi_soft"] = 1
        else:
            core = _ARM_CORES[self.cpu]
            out.update({m: None for m in _X86_ALL_MACROS + _ARM_MACROS})
            out["__arm__"] = out["__thumb__"] = 1
            out["__ARM_ARCH"] = core.arch_number
            if core.thumb2:
                out["__thumb2__"] = 1
            # gcc 12 names Armv8.1-M mainline __ARM_ARCH_8M_MAIN__ too
            arch_macro = {"armv6-m": "__ARM_ARCH_6M__", "armv7-m": "__ARM_ARCH_7M__",
                          "armv7e-m": "__ARM_ARCH_7EM__", "armv8-m.main": "__ARM_ARCH_8M_MAIN__",
                          "armv8.1-m.main": "__ARM_ARCH_8M_MAIN__"}[core.arch]
            out[arch_macro] = 1
            if self.fpu in _ARM_FP:
                out["__ARM_FP"] = _ARM_FP[self.fpu]
            elif self.fpu is not None:
                del out["__ARM_FP"]        # an FPU this table does not know: undecided
            if self.has("dsp"):
                out["__ARM_FEATURE_DSP"] = out["__ARM_FEATURE_SIMD32"] = 1
            if self.has("mve"):
                out["__ARM_FEATURE_MVE"] = 3 if self.has("mve.fp") else 1
        return out

    def cflags(self) -> list[str]:
        """C compiler flags that make the compiler see this target (the board's
        cflags take precedence in projects)."""
        if self.is_generic:
            return []
        if self.is_x86:
            level = self.cpu
            extra = [f"-m{f}" for f in sorted(self.features) if f in _X86_EXTRA]
            return [f"-march={level}"] + extra
        if self.is_riscv:
            return [f"-march={self.isa}", f"-mabi={_RISCV_ISAS[self.isa][1]}"]
        core = _ARM_CORES[self.cpu]
        mods = [f"+no{f}" for f in ("mve", "dsp") if f in core.features and not self.has(f)]
        flags = [f"-mcpu={self.cpu}" + "".join(mods), "-mthumb"]
        if self.fpu and self.fpu != "auto":
            flags += ["-mfloat-abi=hard", f"-mfpu={self.fpu}"]
        elif self.fpu == "auto":
            flags += ["-mfloat-abi=hard"]
        else:
            flags += ["-mfloat-abi=soft"]
        return flags

    def compatible_with(self, other: "Target") -> bool:
        """Whether C compiled for self runs on `other` (generic C runs anywhere;
        otherwise the same ISA family and no feature `other` lacks)."""
        if self.is_generic:
            return True
        if (self.is_x86 != other.is_x86 or self.is_arm != other.is_arm
                or self.is_riscv != other.is_riscv):
            return False
        if self.is_arm and (self.cpu != other.cpu and _ARM_CORES[self.cpu].arch !=
                            _ARM_CORES[other.cpu].arch):
            return False
        return self.features <= other.features

    def runs_on_host(self) -> bool:
        """Whether code for this target runs on this machine."""
        if self.is_generic:
            return True
        host = host_target()
        return (self.is_x86 and host.is_x86 and self.features <= host.features)

    # -- making one -------------------------------------------------------------
    @staticmethod
    def parse(text: str) -> "Target":
        text = str(text).strip()
        if text in ("c", "generic", "portable"):
            return GENERIC
        if text in ("host", "native"):
            return host_target()
        base, *mods = text.split("+")
        if base in _X86_LEVELS:
            return _x86(base, mods, text)
        if base in _ARM_CORES:
            return _arm(base, mods, text)
        if base in _RISCV_ISAS:
            return _riscv(base, mods, text)
        raise MtvmError(f"unknown target {text!r}; known: {', '.join(target_names())} "
                        "(with +feature suffixes, e.g. x86-64-v4+avx512vnni, "
                        "cortex-m4+nofp; `mtvm targets` lists them)")

    @staticmethod
    def from_board(board) -> "Target":
        """The target a board's cpu, fpu, dsp and mve fields describe (the host
        board: this machine)."""
        def field(key, default=None):   # a Board, or its dict (project.boards.load_board)
            if isinstance(board, dict):
                return board.get(key, default)
            return getattr(board, key, default)

        cpu = field("cpu", "") or ""
        if field("target"):             # a board may name its target outright
            return Target.parse(field("target"))
        if cpu in ("", "native") or field("template", "") == "host":
            return host_target()
        if cpu in _RISCV_ISAS or cpu in _RISCV_CORES:
            # a RISC-V core: its ISA, without F when the board has no FPU (soft float)
            isa = _RISCV_CORES.get(cpu, cpu)
            return _riscv(isa, [] if field("fpu", None) else ["nofp"], cpu)
        if cpu not in _ARM_CORES:
            raise MtvmError(f"board {field('name', '?')}: cpu {cpu!r} is not a known target "
                            f"(known: {', '.join([*_ARM_CORES, *_RISCV_CORES, *_RISCV_ISAS])})")
        core = _ARM_CORES[cpu]
        feats = set(core.features)
        for flag, feature in (("dsp", "dsp"), ("mve", "mve")):
            if field(flag, False):
                feats.add(feature)
            else:
                feats.discard(feature)
        if "mve" not in feats:
            feats.discard("mve.fp")
        fpu = field("fpu", None) or None
        mods = [f for f in sorted(feats - set(core.features))]
        mods += [f"no{f}" for f in sorted(set(core.features) - feats) if f != "mve.fp"
                 or "mve" in feats]
        if fpu is None and core.fpu is not None:
            mods.append("nofp")
        return _arm(cpu, mods, "+".join([cpu] + mods), fpu=fpu)

    @staticmethod
    def resolve(value) -> "Target":
        """None -> the generic target; a Target; or a string for Target.parse."""
        if value is None:
            return GENERIC
        if isinstance(value, Target):
            return value
        return Target.parse(value)


GENERIC = Target("c", "c", None, frozenset(), None, None, 16)


def _x86(level: str, mods: list[str], text: str) -> Target:
    feats: set[str] = set()
    for name in _X86_LEVELS:
        feats.update(_X86_LEVELS[name])
        if name == level:
            break
    for m in mods:
        if m in _X86_EXTRA and "avx512f" in feats:
            feats.add(m)
        else:
            raise MtvmError(f"target {text!r}: {m!r} is not a feature mtvm can add to "
                            f"{level} (known: {', '.join(_X86_EXTRA)}, on x86-64-v4)")
    align = 64 if "avx512f" in feats else 32 if "avx" in feats else 16
    name = "+".join([level] + sorted(f for f in feats if f in _X86_EXTRA))
    return Target(name, "x86_64", level, frozenset(feats), None, 8, align)


def _arm(cpu: str, mods: list[str], text: str, fpu: str | None = "default") -> Target:
    core = _ARM_CORES[cpu]
    feats = set(core.features)
    has_fp = core.fpu is not None
    for m in mods:
        off = m.startswith("no")
        f = m[2:] if off else m
        if f not in _ARM_FEATURES:
            raise MtvmError(f"target {text!r}: unknown feature {m!r} "
                            f"(known: {', '.join(_ARM_FEATURES)}, or no<feature>)")
        if f == "dsp" and off and core.arch == "armv7e-m":
            raise MtvmError(f"target {text!r}: an Armv7E-M core always has the DSP "
                            "extension (for a core without it use cortex-m3)")
        if f == "fp":
            has_fp = not off
        elif off:
            feats.discard(f)
            if f == "mve":
                feats.discard("mve.fp")
        else:
            feats.add(f)
    if fpu == "default":
        fpu = core.fpu if has_fp else None
    elif not has_fp:
        fpu = None
    if "mve" in feats and not core.arch.startswith("armv8.1"):
        raise MtvmError(f"target {text!r}: MVE (Helium) needs an Armv8.1-M core "
                        "(cortex-m55, cortex-m85)")
    suffix = sorted(f for f in feats - set(core.features)) + \
        sorted(f"no{f}" for f in set(core.features) - feats if f != "mve.fp" or "mve" in feats)
    if core.fpu is not None and fpu is None:
        suffix.append("nofp")
    elif core.fpu is None and fpu is not None:
        suffix.append("fp")
    name = "+".join([cpu] + suffix)
    return Target(name, core.arch, cpu, frozenset(feats), fpu, 4, 8)


def _riscv(isa: str, mods: list[str], text: str) -> Target:
    exts, _ = _RISCV_ISAS[isa]
    for m in mods:
        if m != "nofp":
            raise MtvmError(f"target {text!r}: {m!r} is not a RISC-V modifier mtvm knows "
                            "(name the ISA instead: rv32imc, rv32imac, rv32imafc)")
        if "f" in exts:                      # the same core without its FPU: soft float
            isa = isa.replace("f", "")
            exts, _ = _RISCV_ISAS[isa]
    fpu = "f" if "f" in exts else None
    return Target(isa, isa, isa, frozenset(exts), fpu, 4, 4)


def target_names() -> list[str]:
    return ["c", "host"] + list(_X86_LEVELS) + list(_ARM_CORES) + list(_RISCV_ISAS)


def all_targets() -> list[Target]:
    """The named targets (host included, resolved to this machine)."""
    return [Target.parse(n) for n in target_names()]


@functools.lru_cache(maxsize=1)
def host_target() -> Target:
    """This machine. On x86, the highest x86-64 level whose features the C
    compiler's -march=native has (plus VNNI when present); elsewhere the
    generic target."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return GENERIC
    feats = _native_x86_features()
    level = "x86-64"
    for name, need in _X86_LEVELS.items():
        if all(f in feats for f in need):
            level = name
        else:
            break
    mods = [f for f in _X86_EXTRA if f in feats and level == "x86-64-v4"]
    return _x86(level, mods, "host")


def _native_x86_features() -> set[str]:
    """Features of this machine: from the C compiler's predefined macros for
    -march=native (what the host build will see), else /proc/cpuinfo."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc):
        try:
            p = subprocess.run([cc, "-march=native", "-dM", "-E", "-x", "c", os.devnull],
                               capture_output=True, text=True, timeout=30)
            if p.returncode == 0:
                defined = set(re.findall(r"^#define (\w+)", p.stdout, re.M))
                return {f for f, m in _X86_MACROS.items() if m in defined}
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        return set()
    cpuinfo = {"sse4_1": "sse4.1", "sse4_2": "sse4.2", "bmi1": "bmi1", "pni": "sse3",
               "avx512_vnni": "avx512vnni"}
    return {cpuinfo.get(f, f) for f in flags if cpuinfo.get(f, f) in _X86_MACROS}


__all__ = ["Target", "GENERIC", "host_target", "all_targets", "target_names"]
