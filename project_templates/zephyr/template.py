"""The zephyr template's hooks (docs/projects.md, "The zephyr template"): the
project directory is a Zephyr module (zephyr/module.yml, CMakeLists.txt,
Kconfig: a library of the model's C, its descriptor and mtvm's C runtime when
CONFIG_MTVM=y) with a Zephyr application in app/ (CMakeLists.txt, prj.conf,
src/main.c, src/platform_zephyr.c: the session over the console UART, or the
standalone runner; time from k_cycle_get_32).

mtvm does not build it: `west build -b <board> app` in a Zephyr workspace does
(`build` says so). The template applies to the boards of the cortex_m template;
Zephyr's name of the board is known for some (ZEPHYR_BOARDS), else the board
file's `zephyr_board`.
"""
from __future__ import annotations

import os

from mtvm import __version__
from mtvm.codegen.names import c_comment, c_string_literal, sanitize
from mtvm.errors import MtvmError
from mtvm.project import load_template

BOARD_TEMPLATES = ("cortex_m",)
# mtvm board -> Zephyr board (hardware model v2 names, Zephyr >= 3.7).
ZEPHYR_BOARDS = {"nrf52840dk": "nrf52840dk/nrf52840", "nucleo-f746zg": "nucleo_f746zg",
                 "nucleo-l4r5zi": "nucleo_l4r5zi", "stm32f746g-disco": "stm32f746g_disco",
                 "mps2-an385": "mps2/an385", "mps2-an386": "mps2/an386",
                 "mps2-an500": "mps2/an500", "mps3-an547": "mps3/corstone300/an547"}
APP = "app"


def module_id(model_name: str) -> str:
    """The module's name in zephyr/module.yml: `mtvm_` + the model's name as an
    ASCII word."""
    return "mtvm_" + sanitize(model_name)


def _ring_bytes(max_packet: int) -> int:
    # A whole request with every byte escaped, plus start, length and CRC.
    need = 2 * (max_packet + 6) + 2
    n = 64
    while n < need:
        n *= 2
    return n


def zephyr_board(board: dict) -> str | None:
    name = board.get("zephyr_board") or ZEPHYR_BOARDS.get(board["name"])
    return str(name) if name else None


def generate(ctx) -> None:
    board = ctx.board
    if board.get("template") not in BOARD_TEMPLATES:
        raise MtvmError(f"the zephyr template builds for cortex_m boards; board "
                        f"{board['name']} uses template {board.get('template')!r}")
    word = load_template("cmake").cmake_word
    md = ctx.metadata
    sources = ["src/mtvm_model_desc.c"]
    for sub in ("model/codegen/host/src", "c_runtime/src"):
        sources += [f"{sub}/{n}" for n in sorted(os.listdir(ctx.path(sub))) if n.endswith(".c")]
    app_sources = ""
    if ctx.kind == "standalone":
        app_sources = " ${MTVM_MODULE_DIR}/src/mtvm_sample.c"
    max_packet = int(ctx.subs["MAX_PACKET_BYTES"])
    subs = dict(
        VERSION=__version__, MODULE_ID=module_id(md["model_name"]),
        MODEL_COMMENT=c_comment(md["model_name"]),
        BOARD_STRING=c_string_literal(ctx.subs["BOARD"]),
        SOURCES="\n".join("    ${CMAKE_CURRENT_LIST_DIR}/" + word(s, "module source")
                          for s in sources),
        APP_SOURCES=app_sources,
        STACK_BYTES=int(board.get("stack_bytes", 8192)),
        FPU_CONF="CONFIG_FPU=y" if ctx.model.target.fpu else "# no FPU: soft float",
        RX_RING_BYTES=_ring_bytes(max_packet) if ctx.kind == "host-driven" else 64)
    ctx.render("zephyr/module.yml.in", "zephyr/module.yml", **subs)
    ctx.render("CMakeLists.txt.in", "CMakeLists.txt", **subs)
    ctx.render("Kconfig.in", "Kconfig", **subs)
    ctx.render("app/CMakeLists.txt.in", f"{APP}/CMakeLists.txt", **subs)
    ctx.render("app/prj.conf.in", f"{APP}/prj.conf", **subs)
    ctx.render("app/src/main.c.in", f"{APP}/src/main.c", **subs)
    ctx.render("app/src/platform_zephyr.c.in", f"{APP}/src/platform_zephyr.c", **subs)
    ctx.copy("app/src/platform_zephyr.h", f"{APP}/src/platform_zephyr.h")
    ctx.template_data.update(build_system="zephyr", app=APP, zephyr_board=zephyr_board(board),
                             baud=int(board.get("uart", {}).get("baud", 115200)))


def build(project, progress):
    zb = project.template_data.get("zephyr_board") or "<zephyr board>"
    raise MtvmError(
        f"a zephyr project is built by Zephyr's tools, not by mtvm: in a Zephyr workspace "
        f"(west init; west update; ZEPHYR_BASE set) run west build -b {zb} "
        f"{os.path.join(project.dir, APP)}, then west flash")


def open_transport(project, port=None, **kw):
    """The board's serial port (--port), or the one its USB vid/pid finds."""
    from mtvm.firmware import runners
    from mtvm.boards import board_from_dict
    from mtvm.session import transport
    if port is None:
        b = board_from_dict(project.board)
        if b.emulated:
            raise MtvmError("a zephyr project on an emulated board: start it with "
                            "west build -t run and pass its serial port (--port)")
        port = runners.find_port(b)
    baud = int(project.template_data.get("baud", 115200))
    return transport.open_url(os.fspath(port), baudrate=baud, **kw)


def timing(project, result=None) -> str:
    return ("ticks are k_cycle_get_32() cycles at sys_clock_hw_cycles_per_sec() "
            "(the system timer's clock, not always the CPU's)")
