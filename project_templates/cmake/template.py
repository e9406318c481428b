"""The cmake template's hooks (docs/projects.md, "The cmake template"): the
model and mtvm's C runtime as CMake library targets (mtvm::model,
mtvm::runtime) that a firmware adds with add_subdirectory(), plus an example
app (mtvm_app) and, for Cortex-M boards, a toolchain file for arm-none-eabi-gcc.

It builds for the boards of the `host` and `cortex_m` templates and reuses
them: their main, platform port, startup code, drivers and linker script are
copied from their directories at generation time (their generate() runs with
the Makefile left out), and flashing, the transport, QEMU, standalone runs and
timing notes are their hooks. Only the build is this template's: CMake
(Ninja, or Unix Makefiles without ninja) instead of make.
"""
from __future__ import annotations

import os
import re
import shutil

from mtvm.errors import MtvmError
from mtvm.project import GenerateContext, load_template
from mtvm.project.boards import template_dir

# The board templates whose boards this template builds for (mtvm.project.generate).
BOARD_TEMPLATES = ("host", "cortex_m")
BUILD_DIR = "build"
TOOLCHAIN_FILE = "cmake/arm-none-eabi-gcc.cmake"
# Written by the model's descriptor step (mtvm.project.generate): in mtvm::model.
MODEL_DESC = "src/mtvm_model_desc.c"
# What goes into CMake files as it is: flags, tool names, file names.
_CMAKE_WORD = re.compile(r"[A-Za-z0-9_+\-=.,/:]+")


def cmake_word(value, what: str) -> str:
    """A flag, tool or file name written unquoted (or inside a quoted string) into a
    CMake file; anything CMake would read differently (spaces, quotes, ;, $, \\) is
    refused rather than escaped."""
    s = str(value)
    if not _CMAKE_WORD.fullmatch(s):
        raise MtvmError(f"{what}: {s!r} cannot be written into the CMake project as it is "
                        f"(use letters, digits and _ + - = . , / :)")
    return s


def cmake_words(values, what: str) -> str:
    return " ".join(cmake_word(v, what) for v in values)


def _base_name(board: dict) -> str:
    base = board["template"]
    if base not in BOARD_TEMPLATES:
        raise MtvmError(f"the cmake template builds for {' and '.join(BOARD_TEMPLATES)} "
                        f"boards; board {board['name']} uses template {base!r}")
    return base


def _base(project):
    """The hook module of the project board's own template (host or cortex_m)."""
    return load_template(_base_name(project.board))


class _Borrowed(GenerateContext):
    """The context another template's generate() runs with: its files come from its
    directory into this project; its build file (Makefile) is left out, and the
    substitutions it had for it are kept (the cortex_m UART driver, objcopy, ...)."""

    def __init__(self, ctx, name: str, skip=("Makefile",)):
        super().__init__(ctx.out_dir, template_dir(name), ctx.board, ctx.kind, ctx.model,
                         ctx.profile, ctx.sample, ctx.subs)
        self.skip = set(skip)
        self.skipped: dict = {}

    def render(self, src, dst=None, **extra):
        if (dst or src) in self.skip:
            self.skipped[dst or src] = extra
            return None
        return super().render(src, dst, **extra)

    def copy(self, src, dst=None):
        if (dst or src) in self.skip:
            return None
        return super().copy(src, dst)


def _split_cflags(flags) -> list[str]:
    """Host boards: the flags CMake does not already express (-std=c99 is C_STANDARD,
    warnings are MTVM_WARNING_FLAGS / MTVM_WERROR): what selects the target
    (-march=..., the model's SIMD extensions) and the optimisation level."""
    keep = []
    for f in flags:
        if f.startswith("-std=") or (f.startswith("-W") and not f.startswith(("-Wa,", "-Wp,"))):
            continue
        keep.append(f)
    return keep


def generate(ctx) -> None:
    board = ctx.board
    base = _base_name(board)
    borrowed = _Borrowed(ctx, base)
    load_template(base).generate(borrowed)
    ctx.template_data.update(borrowed.template_data)
    ctx.template_data.update(build_system="cmake", base_template=base, build_dir=BUILD_DIR)
    name = board["name"]
    # The app: every C file the board's template wrote under src/ (main, platform port,
    # startup, UART driver), the sample (standalone); the descriptor is the model's.
    app = sorted(os.path.relpath(os.path.join(d, f), ctx.out_dir).replace(os.sep, "/")
                 for d, _, files in os.walk(ctx.path("src")) for f in files if f.endswith(".c"))
    app = [f for f in app if f != MODEL_DESC]
    includes = sorted({os.path.dirname(f) for f in
                       (os.path.relpath(os.path.join(d, f), ctx.out_dir).replace(os.sep, "/")
                        for d, _, files in os.walk(ctx.path("src")) for f in files
                        if f.endswith(".h"))} | {"src"})
    subs = dict(
        BOARD_KIND=base,
        APP_SOURCES=" ".join(cmake_word(f, "app source") for f in app),
        APP_INCLUDES=" ".join(cmake_word(f, "app include directory") for f in includes),
        BOARD_LDFLAGS=cmake_words(board.get("ldflags", []), f"board {name}: ldflags"),
        HOST_COMPILER="")
    if base == "host":
        cc = board.get("cc", "cc")
        cc = cc if isinstance(cc, list) else str(cc).split()
        subs["TARGET_FLAGS"] = cmake_words(
            _split_cflags(list(board.get("cflags", [])) + ctx.model.target.cflags()),
            f"board {name}: cflags")
        if len(cc) == 1:     # the board's compiler, unless CC or -DCMAKE_C_COMPILER says
            subs["HOST_COMPILER"] = (
                "if(MTVM_TOP_LEVEL AND NOT CMAKE_C_COMPILER AND NOT DEFINED ENV{CC})\n"
                f"  set(CMAKE_C_COMPILER {cmake_word(cc[0], f'board {name}: cc')})"
                "     # the board's cc\nendif()")
    else:
        subs["TARGET_FLAGS"] = ""
        made = borrowed.skipped.get("Makefile", {})
        cc = board.get("cc", "arm-none-eabi-gcc")
        cc = cc if isinstance(cc, list) else str(cc).split()
        if len(cc) != 1:
            raise MtvmError(f"board {name}: cc {' '.join(cc)!r} is not one program; for CMake "
                            f"use CMAKE_C_COMPILER_LAUNCHER for a launcher")
        ctx.render(f"{TOOLCHAIN_FILE}.in", TOOLCHAIN_FILE,
                   CC=cmake_word(cc[0], f"board {name}: cc"),
                   OBJCOPY=cmake_word(made.get("OBJCOPY", "arm-none-eabi-objcopy"), "objcopy"),
                   SIZE=cmake_word(made.get("SIZE", "arm-none-eabi-size"), "size"),
                   CPU=cmake_word(board.get("cpu", "cortex-m"), f"board {name}: cpu"),
                   ARCH_FLAGS=cmake_words(board.get("cflags", []), f"board {name}: cflags"))
        ctx.template_data["toolchain_file"] = TOOLCHAIN_FILE
    ctx.render("CMakeLists.txt.in", "CMakeLists.txt", **subs)


# -- build ------------------------------------------------------------------------------------
def _generator(project) -> list[str]:
    """Ninja when it is installed, else Unix Makefiles; a configured build directory
    keeps the generator it was configured with."""
    if os.path.exists(project.path(BUILD_DIR, "CMakeCache.txt")):
        return []
    return ["-G", "Ninja"] if shutil.which("ninja") else ["-G", "Unix Makefiles"]


def build(project, progress):
    """cmake -S . -B build [-G Ninja] && cmake --build build; on Cortex-M boards, the
    flash/RAM checks and report of the cortex_m template (build/size.json)."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise MtvmError("cmake not found: install it (apt-get install cmake ninja-build, or "
                        "pip install cmake ninja) to build a cmake project")
    base_name = _base_name(project.board)
    cortex_m = _base(project) if base_name == "cortex_m" else None
    b = None
    if cortex_m is not None:
        from mtvm.firmware import size
        b = cortex_m._board(project)
        size.check_fits(project.metadata, b.flash.size, b.ram.size, b.stack_bytes,
                        int(project.info.get("max_packet_bytes", 512)), project.kind, b.name)
    gen = _generator(project)
    project.run_command([cmake, "-S", ".", "-B", BUILD_DIR] + gen,
                        f"cmake: configuring {project.dir}"
                        + (f" ({gen[1]})" if gen else ""), progress)
    jobs = str(max(1, min(8, os.cpu_count() or 1)))
    what = (f"cmake --build: arm-none-eabi-gcc for {b.name}" if b is not None
            else f"cmake --build: {project.board.get('cc', 'cc')} for the host")
    try:
        project.run_command([cmake, "--build", BUILD_DIR, "--parallel", jobs], what, progress)
    except MtvmError as e:
        if cortex_m is None:
            raise
        line = size.link_error(str(e), b.name, cortex_m._regions(b, prefix=False))
        if line is not None:
            raise MtvmError(line) from None
        raise
    if cortex_m is None:
        return None
    import json
    elf = project.path(project.template_data.get("elf", "build/firmware.elf"))
    size.check_layout(elf, cortex_m._regions(b), b.name)
    rep = size.report(elf, b.flash.size, b.ram.size, project.info["module_name"],
                      flash_origin=b.flash.origin, ram_origin=b.ram.origin)
    progress(rep.format(b.name))
    with open(project.path(BUILD_DIR, "size.json"), "w") as f:
        json.dump(rep.as_dict(), f, indent=2)
    return rep


# -- everything else is the board template's ------------------------------------------------
def flash(project, progress, **kw):
    return _base(project).flash(project, progress, **kw)


def open_transport(project, port=None, **kw):
    return _base(project).open_transport(project, port=port, **kw)


def run_standalone(project, **kw):
    hook = getattr(_base(project), "run_standalone", None)
    if hook is None:
        raise MtvmError(f"board {project.board['name']} has no way to run a standalone app here")
    return hook(project, **kw)


def stop(project):
    hook = getattr(_base(project), "stop", None)
    return hook(project) if hook is not None else None


def running(project) -> bool:
    hook = getattr(_base(project), "running", None)
    return bool(hook and hook(project))


def diagnostics(project) -> str:
    hook = getattr(_base(project), "diagnostics", None)
    return hook(project) if hook is not None else ""


def timing(project, result=None):
    hook = getattr(_base(project), "timing", None)
    return hook(project, result) if hook is not None else None
