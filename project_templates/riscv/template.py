"""The riscv template's hooks (docs/projects.md, docs/boards.md): a bare-metal
firmware for an RV32 board of boards/ -- reset code in assembly, a linker
script from the board's memory, the board's UART driver (ns16550, FE310 UART)
with a receive ring fed by the PLIC interrupt, the CLINT's mtime or the
mcycle CSR for time (minstret, the exact instruction count, under QEMU
-icount), semihosting exit on QEMU, a Makefile for riscv64-unknown-elf-gcc
with picolibc.

Everything after the build is the cortex_m template's, imported rather than
copied: flash (QEMU with the UART on a pty, recorded in build/qemu.json; the
emulator binary and its machine arguments come from the board's runner),
standalone runs, the transport (pyserial on the pty or --port), stop and the
emulator's log. The receive ring (src/uart.h, src/uart_ring.c) is the
cortex_m template's too: portable C, written into the project from there.

A chip whose boot, memory map or interrupt controller the generic files do not
fit keeps its own versions under soc/<soc>/ (same relative paths): they replace
the generic ones for its boards only (soc/esp32c3/: an image the ROM loads into
SRAM, a vector table for the interrupt matrix, the watchdogs, the mpccr counter).
"""
from __future__ import annotations

import json
import os
import re

from mtvm.boards import board_from_dict
from mtvm.codegen.names import c_comment, make_word
from mtvm.errors import MtvmError
from mtvm.firmware import qemu, size
from mtvm.project import load_template
from mtvm.project.boards import template_dir

_cm = load_template("cortex_m")

ELF = _cm.ELF
QEMU_STATE = _cm.QEMU_STATE
TOOL_PREFIX = "riscv64-unknown-elf-"

STATIC_FILES = ["src/start.S", "src/startup.c", "src/riscv.h", "src/platform_riscv.c",
                "src/platform_riscv.h"]
# Shared with the cortex_m template (portable C): the UART driver interface and the ring.
CORTEX_M_FILES = ["src/uart.h", "src/uart_ring.c"]

# The hooks that do not depend on the core: the cortex_m template's.
flash = _cm.flash
run_standalone = _cm.run_standalone
open_transport = _cm.open_transport
diagnostics = _cm.diagnostics
stop = _cm.stop
running = _cm.running
instructions_per_inference = _cm.instructions_per_inference


def _board(project_or_ctx):
    return board_from_dict(project_or_ctx.board)


def _int(v) -> int:
    return v if isinstance(v, int) else int(str(v), 0)


def _src(b, rel: str) -> str:
    """The template file for `rel`: soc/<soc>/<rel> when the board's SoC has its own."""
    soc = b.data.get("soc")
    if isinstance(soc, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", soc):
        own = os.path.join("soc", soc, rel)
        if os.path.isfile(os.path.join(template_dir("riscv"), own)):
            return own
    return rel


def uart_extra(board) -> str:
    """Driver-specific lines of board_config.h."""
    u, drv = board.uart, board.uart["driver"]
    lines = []
    if drv == "fe310_uart":
        lines += [f"#define MTVM_GPIO_BASE {_int(u.get('gpio_base', '0x10012000')):#010x}u",
                  f"#define MTVM_UART_TX_PIN {int(u['pins']['tx'])}u",
                  f"#define MTVM_UART_RX_PIN {int(u['pins']['rx'])}u"]
    im = board.data.get("interrupt_matrix")
    if im:   # no suffix on the CPU interrupt: start.S uses it in .if
        lines += ["/* No PLIC (MTVM_PLIC_BASE is unused): the interrupt matrix maps the UART's",
                  " * source to a CPU interrupt, whose vector the driver's handler takes. */",
                  f"#define MTVM_INTMATRIX_BASE {_int(im['base']):#010x}u",
                  f"#define MTVM_INTMATRIX_CPU_INT {int(im['cpu_interrupt'])}"]
    return "\n".join(lines) + ("\n" if lines else "")


def generate(ctx):
    b = _board(ctx)
    max_packet = int(ctx.subs["MAX_PACKET_BYTES"])
    drv = b.uart["driver"]
    mtime = b.data.get("mtime") or {}
    plic = b.data.get("plic") or {"base": 0}    # none: the interrupt matrix (uart_extra)
    subs = dict(
        OBJCOPY=TOOL_PREFIX + "objcopy", SIZE=TOOL_PREFIX + "size", EXTRA_DEFINES="",
        UART_DRIVER=make_word(drv, f"board {b.name}: uart.driver"),
        CLOCK_HZ=b.clock_hz, EMULATED=1 if b.emulated else 0,
        SEMIHOSTING=1 if b.emulated else 0,
        TIMER_MTIME=1 if b.timer == "mtime" else 0,
        MTIME_BASE=f"{_int(mtime.get('base', '0x0200BFF8')):#010x}",
        MTIME_HZ=int(mtime.get("hz", b.clock_hz or 1)),
        PLIC_BASE=f"{_int(plic['base']):#010x}", PLIC_CONTEXT=int(plic.get("context", 0)),
        UART_BASE=f"{_int(b.uart['base']):#010x}", UART_RX_IRQ=int(b.uart["rx_irq"]),
        UART_BAUD=int(b.uart.get("baud", 115200)),
        UART_PCLK_HZ=int(b.uart.get("pclk_hz", b.clock_hz)),
        # standalone firmware receives nothing: a token ring
        UART_RX_RING_BYTES=_cm._ring_bytes(max_packet) if ctx.kind == "host-driven" else 64,
        UART_EXTRA=uart_extra(b),
        FLASH_ORIGIN=f"{b.flash.origin:#010x}", FLASH_SIZE=b.flash.size,
        RAM_ORIGIN=f"{b.ram.origin:#010x}", RAM_SIZE=b.ram.size,
        FLASH_NAME=c_comment(b.flash.name or "flash"), RAM_NAME=c_comment(b.ram.name or "RAM"),
        STACK_BYTES=b.stack_bytes)
    ctx.render(_src(b, "Makefile.in"), "Makefile", **subs)
    ctx.render(_src(b, "link.ld.in"), "link.ld", **subs)
    ctx.render("src/board_config.h.in", "src/board_config.h", **subs)
    ctx.render("src/main.c.in", "src/main.c", **subs)
    for f in STATIC_FILES:
        ctx.copy(_src(b, f), f)
    for f in CORTEX_M_FILES:
        with open(os.path.join(template_dir("cortex_m"), f)) as src:
            ctx.write(f, src.read())
    ctx.copy(f"src/drivers/uart_{drv}.c")
    ctx.template_data.update(elf=ELF, hex="build/firmware.hex", bin="build/firmware.bin",
                             emulated=b.emulated, qemu_machine=b.qemu_machine,
                             qemu_state=QEMU_STATE if b.emulated else None,
                             baud=int(b.uart.get("baud", 115200)))


def build(project, progress):
    b = _board(project)
    kind = project.kind
    size.check_fits(project.metadata, b.flash.size, b.ram.size, b.stack_bytes,
                    int(project.info.get("max_packet_bytes", 512)), kind, b.name)
    jobs = str(max(1, min(8, os.cpu_count() or 1)))
    try:
        project.run_command(["make", "-j", jobs], f"make: {TOOL_PREFIX}gcc for {b.name}",
                            progress=progress)
    except MtvmError as e:
        line = size.link_error(str(e), b.name, _cm._regions(b, prefix=False))
        if line is not None:
            raise MtvmError(line) from None
        raise
    elf = project.path(ELF)
    size.check_layout(elf, _cm._regions(b), b.name, prefix=TOOL_PREFIX)
    rep = size.report(elf, b.flash.size, b.ram.size, project.info["module_name"],
                      prefix=TOOL_PREFIX, flash_origin=b.flash.origin, ram_origin=b.ram.origin)
    progress(rep.format(b.name))
    with open(project.path("build", "size.json"), "w") as f:
        json.dump(rep.as_dict(), f, indent=2)
    return rep


def timing(project, result=None) -> str:
    """What the device timer's numbers mean (printed by `mtvm run --benchmark`).
    Under QEMU with icount the firmware times with minstret at 1 GHz of virtual
    time: one tick per instruction, exact."""
    b = _board(project)
    if b.emulated:
        inst = qemu.load_state(project.path(QEMU_STATE))
        if inst is not None and inst.icount and inst.alive():
            text = ("QEMU -icount shift=0: the firmware times with minstret, 1 tick = 1 "
                    "instruction = 1 ns of virtual time, so seconds x 1e9 = instructions")
            if result is not None:
                text += (f"; {instructions_per_inference(result):,} instructions per inference "
                         f"(median)")
            return text
        hz = int((b.data.get("mtime") or {}).get("hz", b.clock_hz))
        return (f"QEMU without icount: mtime ({hz / 1e6:g} MHz) follows the host's clock, so "
                f"times follow the host's speed; `MTVM_QEMU_ICOUNT=1 mtvm project flash` "
                f"counts instructions")
    if b.timer == "mtime":
        hz = int((b.data.get("mtime") or {}).get("hz", 0))
        return f"the CLINT's mtime at {hz:,} Hz"
    return f"mcycle at the {b.clock_hz / 1e6:g} MHz core clock"
