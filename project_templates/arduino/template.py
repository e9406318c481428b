"""The arduino template's hooks (docs/projects.md, "The arduino template"): the
project directory is an Arduino library (library.properties, src/, examples/)
holding the model's C from the Model Library Format and mtvm's C runtime, laid
out as the Arduino build expects (every source and header flat in src/, which
is compiled recursively and is the only include directory), a platform port on
the Arduino API (a Stream for bytes, micros() for time) and two example
sketches: mtvm_session (host-driven, the session server over Serial) or
mtvm_standalone (the model on the embedded sample, outputs printed), by the
project's kind.

mtvm does not build it: the Arduino IDE or arduino-cli does, with the core of
the user's board (`build` says so). The template applies to the boards of the
cortex_m template, whose cpu decides the model's target; the library's config
header stops a build for a core without the FPU or DSP extension the model's C
was generated for.
"""
from __future__ import annotations

import os

from mtvm import __version__
from mtvm.codegen.names import c_comment, c_string_literal, label, sanitize
from mtvm.errors import MtvmError

BOARD_TEMPLATES = ("cortex_m",)
SRC = "src"
# The runtime's header whose copy gets the project's packet size (see _server_header).
SERVER_HEADER = "mtvm_server.h"
_SIZE_GUARD = "#ifndef MTVM_MAX_PACKET_BYTES\n"
EXAMPLES = {"host-driven": ("session.ino.in", "mtvm_session"),
            "standalone": ("standalone.ino.in", "mtvm_standalone")}
# Macros the model's C may depend on, and what they mean (mtvm.target.Target.macros).
_REQUIRED = {"__ARM_FP": "a hardware FPU", "__ARM_FEATURE_DSP": "the DSP extension",
             "__ARM_FEATURE_MVE": "Helium (MVE)"}


def library_name(model_name: str) -> str:
    """The library's name (and its header's): `mtvm_` + the model's name as an
    ASCII word (letters, digits, _), so it is safe in library.properties, file
    names and #include lines."""
    return "mtvm_" + sanitize(model_name)


def _target_checks(target) -> str:
    lines = []
    for macro, what in _REQUIRED.items():
        if target.macros().get(macro) is not None:
            lines += [f"#if !defined({macro})",
                      f'#error "this library\'s model was compiled by mtvm for {target.name}, '
                      f'which has {what}; the board being built for has not: regenerate it '
                      f'with mtvm for this board (mtvm project generate ... --board)"',
                      "#endif"]
    return "\n".join(lines) + ("\n" if lines else "/* (nothing to check) */\n")


def _flat_files(ctx) -> dict:
    """{name in src/: (path it comes from)}: the MLF's sources and headers
    (codegen/host/src, codegen/host/include) and the runtime's (c_runtime/src,
    c_runtime/include), as the project has them. Arduino compiles src/
    recursively but puts only src/ on the include path, so they go there flat."""
    files = {}
    for sub in ("model/codegen/host/include", "model/codegen/host/src",
                "c_runtime/include", "c_runtime/src"):
        d = ctx.path(sub)
        for name in sorted(os.listdir(d)):
            if not name.endswith((".c", ".h")):
                continue
            if name in files or os.path.exists(ctx.path(SRC, name)):
                raise MtvmError(f"arduino template: {sub}/{name} has the same name as "
                                f"another file of the library's src/; rename the module "
                                f"(--module-name)")
            files[name] = os.path.join(d, name)
    return files


def _server_header(text: str, path: str) -> str:
    """The runtime's mtvm_server.h with the library's config included first, so
    MTVM_MAX_PACKET_BYTES (which sizes mtvm_server_t) is the project's in every
    file that includes it: an Arduino library cannot pass -D flags."""
    if text.count(_SIZE_GUARD) != 1:
        raise MtvmError(f"arduino template: {path} no longer has one '#ifndef "
                        f"MTVM_MAX_PACKET_BYTES' line; the template needs updating")
    return text.replace(_SIZE_GUARD, '#include "mtvm_arduino_config.h"\n' + _SIZE_GUARD)


def generate(ctx) -> None:
    board = ctx.board
    if board.get("template") not in BOARD_TEMPLATES:
        raise MtvmError(f"the arduino template builds for cortex_m boards; board "
                        f"{board['name']} uses template {board.get('template')!r}")
    md = ctx.metadata
    flat = _flat_files(ctx)
    lib = library_name(md["model_name"])
    # a model named `model`, `server`, ... would make the library's header the runtime's
    while f"{lib}.h" in flat or lib in ("mtvm_arduino_config", "mtvm_platform_arduino",
                                         "mtvm_model_desc", "mtvm_sample"):
        lib += "_lib"
    target = ctx.model.target
    subs = dict(LIBRARY=lib, VERSION=__version__, TARGET=label(target.name),
                MODEL_COMMENT=c_comment(md["model_name"]),
                BOARD_STRING=c_string_literal(ctx.subs["BOARD"]),
                BAUD=int(board.get("uart", {}).get("baud", 115200)),
                STANDALONE=1 if ctx.kind == "standalone" else 0,
                TARGET_CHECKS=_target_checks(target))
    for name, src in flat.items():
        with open(src) as f:
            text = f.read()
        if name == SERVER_HEADER:
            text = _server_header(text, src)
        ctx.write(f"{SRC}/{name}", text)
    ctx.render("library.properties.in", "library.properties", **subs)
    ctx.render("src/library.h.in", f"{SRC}/{lib}.h", **subs)
    ctx.render("src/mtvm_arduino_config.h.in", f"{SRC}/mtvm_arduino_config.h", **subs)
    ctx.copy("src/mtvm_platform_arduino.cpp", f"{SRC}/mtvm_platform_arduino.cpp")
    ino, example = EXAMPLES[ctx.kind]
    ctx.render(f"examples/{ino}", f"examples/{example}/{example}.ino", **subs)
    ctx.template_data.update(build_system="arduino", library=lib,
                             sketch=f"examples/{example}",
                             baud=subs["BAUD"])


def build(project, progress):
    lib = project.template_data.get("library", "the library")
    sketch = project.template_data.get("sketch", "examples/mtvm_session")
    raise MtvmError(
        f"an arduino project is an Arduino library ({lib}); mtvm does not build it: use the "
        f"Arduino IDE (Sketch > Include Library > Add .ZIP Library) or arduino-cli with "
        f"your board's core: arduino-cli compile --fqbn <vendor:arch:board> --library "
        f"{project.dir} {os.path.join(project.dir, sketch)}")


def open_transport(project, port=None, **kw):
    """The board's serial port, which the user names (--port): the Arduino's USB
    serial port is not the port mtvm's board file knows."""
    from mtvm.session import transport
    if port is None:
        raise MtvmError("an arduino project talks over the board's serial port: pass it "
                        "(mtvm run DIR --port /dev/ttyACM0)")
    baud = int(project.template_data.get("baud", 115200))
    return transport.open_url(os.fspath(port), baudrate=baud, **kw)


def timing(project, result=None) -> str:
    return "ticks are micros() (1 MHz; its resolution is the core's, 1 to 8 us)"
