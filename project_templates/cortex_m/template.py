"""The cortex_m template's hooks (docs/projects.md): a bare-metal firmware
for any Cortex-M board of boards/ -- startup, a linker script from the
board's memory, the board's UART driver with an interrupt-fed receive ring,
DWT/SysTick timer, semihosting exit on QEMU, a Makefile for arm-none-eabi-gcc.

flash: an emulated board starts QEMU with the UART on a pty (recorded in
build/qemu.json); a real board runs its flash runner. open_transport: pyserial
on that pty, on --port, or on the port found by the board's USB vid/pid.
"""
from __future__ import annotations

import json
import os
import re

from mtvm.boards import board_from_dict
from mtvm.codegen.names import c_comment, make_word
from mtvm.errors import MtvmError
from mtvm.firmware import qemu, runners, size

ELF = "build/firmware.elf"
QEMU_STATE = "build/qemu.json"

# Files copied as they are (src/drivers/uart_<driver>.c is added per board).
STATIC_FILES = ["src/startup.c", "src/cortex_m.h", "src/uart.h", "src/uart_ring.c",
                "src/platform_cortex_m.c", "src/platform_cortex_m.h", "src/systick_count.h"]

# nRF52 UARTE BAUDRATE register values (the PS's table; not a formula).
NRF_UARTE_BAUD = {9600: 0x00275000, 19200: 0x004EA000, 38400: 0x009D0000, 57600: 0x00EB0000,
                  115200: 0x01D60000, 230400: 0x03B00000, 460800: 0x07400000,
                  921600: 0x0F000000, 1000000: 0x10000000}
# nRF51 UART BAUDRATE register values (nRF51 Series Reference Manual v3.0, 29.10).
NRF_UART_BAUD = {9600: 0x00275000, 14400: 0x003B0000, 19200: 0x004EA000, 28800: 0x0075F000,
                 38400: 0x009D5000, 57600: 0x00EBF000, 76800: 0x013A9000, 115200: 0x01D7E000,
                 230400: 0x03AFB000, 250000: 0x04000000, 460800: 0x075F7000,
                 921600: 0x0EBEDFA4, 1000000: 0x10000000}


def _board(project_or_ctx):
    return board_from_dict(project_or_ctx.board)


def _int(v) -> int:
    return v if isinstance(v, int) else int(str(v), 0)


def _ring_bytes(max_packet: int) -> int:
    # A whole request with every byte escaped, plus start, length and CRC.
    need = 2 * (max_packet + 6) + 2
    n = 64
    while n < need:
        n *= 2
    return n


def _pin(name) -> tuple[int, int]:
    """"PA9" -> (0, 9)."""
    s = str(name).upper()
    if len(s) < 3 or s[0] != "P" or not s[1].isalpha() or not s[2:].isdigit():
        raise MtvmError(f"pin {name!r}: expected a name like PA9")
    return ord(s[1]) - ord("A"), int(s[2:])


def _reg_bits(pairs) -> tuple[str, int]:
    pairs = list(pairs or [])
    if not pairs:
        return "{ {0u, 0u} }", 0
    body = ", ".join(f"{{{_int(r):#010x}u, {int(b)}u}}" for r, b in pairs)
    return "{ " + body + " }", len(pairs)


def uart_extra(board) -> str:
    """Driver-specific lines of board_config.h."""
    u, drv = board.uart, board.uart["driver"]
    lines = []
    if drv.startswith("stm32_usart"):
        tx, rx = _pin(u["pins"]["tx"]), _pin(u["pins"]["rx"])
        clocks, nclocks = _reg_bits(u.get("clock_enable"))
        extra, nextra = _reg_bits(u.get("set_bits"))
        lines += [f"#define MTVM_UART_PCLK_HZ {_int(u['pclk_hz'])}u",
                  f"#define MTVM_UART_LPUART {1 if u.get('lpuart') else 0}",
                  f"#define MTVM_GPIO_BASE {_int(u['gpio_base']):#010x}u",
                  f"#define MTVM_UART_TX_PORT {tx[0]}u", f"#define MTVM_UART_TX_PIN {tx[1]}u",
                  f"#define MTVM_UART_RX_PORT {rx[0]}u", f"#define MTVM_UART_RX_PIN {rx[1]}u",
                  f"#define MTVM_UART_AF {int(u['af'])}u",
                  f"#define MTVM_UART_CLOCK_ENABLES {clocks}",
                  f"#define MTVM_UART_CLOCK_ENABLE_COUNT {nclocks}u",
                  f"#define MTVM_UART_SET_BITS {extra}",
                  f"#define MTVM_UART_SET_BITS_COUNT {nextra}u"]
    elif drv == "cmsdk_uart":
        lines += [f"#define MTVM_UART_PCLK_HZ {_int(u['pclk_hz'])}u"]
    elif drv in ("nrf_uarte", "nrf_uart"):
        table, what = ((NRF_UARTE_BAUD, "nRF UARTE") if drv == "nrf_uarte"
                       else (NRF_UART_BAUD, "nRF51 UART"))
        baud = int(u.get("baud", 115200))
        if baud not in table:
            raise MtvmError(f"board {board.name}: the {what} has no {baud} baud setting; "
                            f"use one of {sorted(table)}")
        lines += [f"#define MTVM_UART_TX_PIN {int(u['pins']['tx'])}u",
                  f"#define MTVM_UART_RX_PIN {int(u['pins']['rx'])}u",
                  f"#define MTVM_UART_BAUD_REG {table[baud]:#010x}u"]
    return "\n".join(lines) + ("\n" if lines else "")


def generate(ctx):
    b = _board(ctx)
    max_packet = int(ctx.subs["MAX_PACKET_BYTES"])
    drv = b.uart["driver"]
    subs = dict(
        OBJCOPY="arm-none-eabi-objcopy", SIZE="arm-none-eabi-size", EXTRA_DEFINES="",
        UART_DRIVER=make_word(drv, f"board {b.name}: uart.driver"), IRQS=b.irqs,
        CLOCK_HZ=b.clock_hz,
        TIMER_DWT=1 if b.timer == "dwt" else 0, CACHES=1 if b.data.get("caches") else 0,
        SEMIHOSTING=1 if b.emulated else 0,
        UART_BASE=f"{_int(b.uart['base']):#010x}", UART_RX_IRQ=int(b.uart["rx_irq"]),
        UART_BAUD=int(b.uart.get("baud", 115200)),
        # standalone firmware receives nothing: a token ring
        UART_RX_RING_BYTES=_ring_bytes(max_packet) if ctx.kind == "host-driven" else 64,
        UART_EXTRA=uart_extra(b),
        FLASH_ORIGIN=f"{b.flash.origin:#010x}", FLASH_SIZE=b.flash.size,
        RAM_ORIGIN=f"{b.ram.origin:#010x}", RAM_SIZE=b.ram.size,
        FLASH_NAME=c_comment(b.flash.name or "flash"), RAM_NAME=c_comment(b.ram.name or "RAM"),
        STACK_BYTES=b.stack_bytes, **memory_placement(b, ctx.metadata))
    ctx.render("Makefile.in", "Makefile", **subs)
    ctx.render("link.ld.in", "link.ld", **subs)
    ctx.render("src/board_config.h.in", "src/board_config.h", **subs)
    ctx.render("src/main.c.in", "src/main.c", **subs)
    for f in STATIC_FILES:
        ctx.copy(f)
    ctx.copy(f"src/drivers/uart_{drv}.c")
    if drv.startswith("stm32_usart"):
        ctx.copy("src/drivers/stm32_common.h")
    ctx.template_data.update(elf=ELF, hex="build/firmware.hex", bin="build/firmware.bin",
                             emulated=b.emulated, qemu_machine=b.qemu_machine,
                             qemu_state=QEMU_STATE if b.emulated else None,
                             baud=int(b.uart.get("baud", 115200)))


def ram_banks(b) -> list[dict]:
    """The board's RAM banks ("ram_banks": name, origin, size), each with the
    linker-script region that holds it: RAM for the bank that is the board's
    RAM, BANK_<NAME> for the others."""
    from mtvm.boards import parse_int, parse_size
    out = []
    for bank in b.data.get("ram_banks") or []:
        origin, size_ = parse_int(bank["origin"]), parse_size(bank["size"])
        name = str(bank["name"])
        if not re.fullmatch(r"[a-z0-9_]+", name):
            raise MtvmError(f"board {b.name}: ram bank name {name!r}: use a-z, 0-9 and _")
        region = "RAM" if origin == b.ram.origin else f"BANK_{name.upper()}"
        out.append({"name": name, "origin": origin, "size": size_, "region": region})
    return out


def pool_banks(b, pools: list) -> dict:
    """{pool name: bank} for the model's workspace pools: the bank of the same
    name, else the next bank not taken (in the board's order), else the
    board's RAM."""
    banks = ram_banks(b)
    ram = {"name": "ram", "origin": b.ram.origin, "size": b.ram.size, "region": "RAM"}
    taken = {p["name"] for p in pools if any(k["name"] == p["name"] for k in banks)}
    free = [k for k in banks if k["name"] not in taken]
    out = {}
    for p in pools:
        match = [k for k in banks if k["name"] == p["name"]]
        out[p["name"]] = match[0] if match else (free.pop(0) if free else ram)
    return out


def memory_placement(b, md: dict) -> dict:
    """link.ld's placeholders for the model's workspace pools (each pool's
    section .mtvm.pool.<name> in its bank, NOLOAD) and its constants section
    (in flash, after .rodata)."""
    from mtvm.compiler import check_section_name, check_workspace_pools
    pools = [p for p in md.get("workspace_pools") or [] if int(p.get("used_bytes", 0))]
    check_workspace_pools([(p["name"], int(p["size_bytes"])) for p in pools])   # names as compiled
    where = pool_banks(b, pools)
    regions, ram_secs, bank_secs = {}, "", ""
    for p in pools:
        bank = where[p["name"]]
        sec = (f"\n\n    /* workspace pool {p['name']} ({int(p['used_bytes'])} bytes) in bank "
               f"{bank['name']} */\n    .mtvm.pool.{p['name']} (NOLOAD) : ALIGN(16)\n    {{\n"
               f"        KEEP(*(.mtvm.pool.{p['name']}))\n    }} > {bank['region']} AT> "
               f"{bank['region']}")
        if bank["region"] == "RAM":
            ram_secs += sec
        else:
            regions[bank["region"]] = bank
            bank_secs += sec
    memory = "".join(f"\n    {r} (rwx) : ORIGIN = {k['origin']:#010x}, LENGTH = {k['size']}"
                     for r, k in regions.items())
    consts = ""
    name = check_section_name(md.get("constants_section"))
    if name:
        consts = (f"\n\n    /* the weights (--constants-section {name}) */\n"
                  f"    {name} : ALIGN(16)\n    {{\n        KEEP(*({name}))\n    }} > FLASH")
    return dict(POOL_MEMORY=memory, POOL_SECTIONS_RAM=ram_secs, POOL_SECTIONS_BANKS=bank_secs,
                CONSTANTS_SECTION=consts)


def _regions(b, prefix: bool = True) -> dict:
    """The board's memory for the fit checks: {key: (origin, size, label)}."""
    flash, ram = b.flash.name or "flash", b.ram.name or "RAM"
    out = {"flash": (b.flash.origin, b.flash.size, f"FLASH ({flash})" if prefix else flash),
           "ram": (b.ram.origin, b.ram.size, f"RAM ({ram})" if prefix else ram)}
    for bank in ram_banks(b):   # the other RAM banks (workspace pools)
        if bank["region"] != "RAM":
            out[bank["region"].lower()] = (bank["origin"], bank["size"],
                                           f"{bank['region']} ({bank['name']})" if prefix
                                           else bank["name"])
    return out


def build(project, progress):
    b = _board(project)
    kind = project.kind
    size.check_fits(project.metadata, b.flash.size, b.ram.size, b.stack_bytes,
                    int(project.info.get("max_packet_bytes", 512)), kind, b.name)
    jobs = str(max(1, min(8, os.cpu_count() or 1)))
    try:
        project.run_command(["make", "-j", jobs], f"make: arm-none-eabi-gcc for {b.name}",
                            progress=progress)
    except MtvmError as e:
        line = size.link_error(str(e), b.name, _regions(b, prefix=False))
        if line is not None:
            raise MtvmError(line) from None
        raise
    elf = project.path(ELF)
    size.check_layout(elf, _regions(b), b.name)
    rep = size.report(elf, b.flash.size, b.ram.size, project.info["module_name"],
                      flash_origin=b.flash.origin, ram_origin=b.ram.origin)
    progress(rep.format(b.name))
    with open(project.path("build", "size.json"), "w") as f:
        json.dump(rep.as_dict(), f, indent=2)
    return rep


def flash(project, progress, icount: bool | None = None, gdb: int | None = None,
          detach: bool = False, **kw):
    """icount (QEMU only): -icount shift=0, 1 instruction = 1 ns of virtual
    time; default from MTVM_QEMU_ICOUNT=1. gdb (QEMU only): a TCP port for
    arm-none-eabi-gdb (`target remote :PORT`), the core halted at reset until
    the debugger continues; default from MTVM_QEMU_GDB=PORT. detach (QEMU
    only): the emulator outlives this process (`mtvm project flash`); by
    default it is stopped when this process exits."""
    b = _board(project)
    elf = project.path(ELF)
    if not os.path.exists(elf):
        raise MtvmError(f"{elf} not found: run `mtvm project build {project.dir}` first")
    if b.emulated and project.kind == "standalone":
        # The app runs to its end and exits through semihosting: nothing would
        # be there to read a pty in time, so run it with the UART on the console.
        p = run_standalone(project, icount=bool(icount))
        print(p.stdout, end="")
        progress(f"QEMU {b.qemu_machine}: the standalone app exited with status {p.returncode}")
        if p.returncode != 0:
            raise MtvmError(f"the standalone app failed (status {p.returncode})\n{p.stderr}")
        return None
    if b.emulated:
        if icount is None:
            icount = os.environ.get("MTVM_QEMU_ICOUNT", "") not in ("", "0")
        if gdb is None and os.environ.get("MTVM_QEMU_GDB"):
            gdb = int(os.environ["MTVM_QEMU_GDB"])
        extra = ["-gdb", f"tcp::{int(gdb)}", "-S"] if gdb else None
        inst = qemu.start(b.qemu_machine, elf, project.path(QEMU_STATE), icount=icount,
                          extra=extra, detach=detach, **qemu.board_emulator(b))
        progress(f"QEMU {b.qemu_machine} running (pid {inst.pid}), UART on {inst.pty}"
                 + (" [icount: 1 instruction = 1 ns]" if icount else "")
                 + (f" [halted for gdb: arm-none-eabi-gdb {elf} -ex 'target remote :{gdb}']"
                    if gdb else "")
                 + (f"; stop it with `mtvm project stop {project.dir}`" if detach
                    else "; it stops with stop() or when this process exits"))
        return inst
    runners.flash(b, elf, project.path("build", "firmware.hex"),
                  project.path("build", "firmware.bin"), progress=progress)
    return None


def run_standalone(project, timeout: float = 300.0, icount: bool = False):
    """Emulated boards: run the standalone app in QEMU until it exits through
    semihosting; stdout = what it printed on its UART, returncode = its status."""
    import subprocess
    b = _board(project)
    if not b.emulated:
        raise MtvmError(f"{b.name} is a real board: `mtvm project flash {project.dir}` programs "
                        f"it and the app prints on its UART (e.g. python -m serial.tools.miniterm "
                        f"PORT {int(b.uart.get('baud', 115200))})")
    elf = project.path(ELF)
    if not os.path.exists(elf):
        raise MtvmError(f"{elf} not found: run `mtvm project build {project.dir}` first")
    r = qemu.run_to_exit(b.qemu_machine, elf, timeout=timeout, icount=icount,
                         workdir=project.path("build"), **qemu.board_emulator(b))
    if r.status is None:
        log = r.stderr.strip()[-2000:]
        raise MtvmError(f"the standalone app did not exit within {timeout:.0f} s on QEMU "
                        f"{b.qemu_machine}; its output so far:\n{r.output}"
                        + (f"\nQEMU's log:\n{log}" if log else ""))
    argv = qemu.qemu_command(b.qemu_machine, elf, "file:build/uart0.txt", icount,
                             **qemu.board_emulator(b))
    return subprocess.CompletedProcess(argv, r.status, r.output, r.stderr)


def open_transport(project, port=None, **kw):
    """port: a serial device, a pyserial URL or tcp://host:port (a board's UART
    behind a TCP bridge); default: the emulator's pty, or the port found by
    the board's USB vid/pid."""
    from mtvm.session import transport
    b = _board(project)
    baud = int(b.uart.get("baud", 115200))
    if port is None:
        port = qemu.running(project.path(QEMU_STATE)).pty if b.emulated else runners.find_port(b)
    return transport.open_url(os.fspath(port), baudrate=baud, **kw)


def diagnostics(project) -> str:
    """What the emulator said (the tail of its log: guest errors, a lock-up,
    its exit), for an error when the board does not answer."""
    b = _board(project)
    if not b.emulated:
        return ""
    return qemu.log_tail(project.path(QEMU_STATE))


def stop(project) -> str | None:
    """Stops the project's emulator (the pid recorded in build/qemu.json, if it
    is still that QEMU); returns what was stopped, or None."""
    b = _board(project)
    if b.emulated:
        inst = qemu.stop(project.path(QEMU_STATE))
        if inst is not None:
            return inst.describe()
    return None


def running(project) -> bool:
    """True when the project's emulator is running."""
    b = _board(project)
    if not b.emulated:
        return False
    inst = qemu.load_state(project.path(QEMU_STATE))
    return inst is not None and inst.alive()


def timing(project, result=None) -> str:
    """What the device timer's numbers mean (printed by `mtvm run --benchmark`).
    Under QEMU with icount, virtual time is instructions (1 ns each), so a
    benchmark result converts to instructions per inference."""
    b = _board(project)
    tick_ns = 1e9 / b.clock_hz if b.clock_hz else 0
    if b.emulated:
        inst = qemu.load_state(project.path(QEMU_STATE))
        if inst is not None and inst.icount and inst.alive():
            text = (f"QEMU -icount shift=0: 1 instruction = 1 ns of virtual time, so seconds x 1e9 "
                    f"= instructions (resolution {tick_ns:.0f} instructions per SysTick tick)")
            if result is not None:
                text += (f"; {instructions_per_inference(result):,} instructions per inference "
                         f"(median)")
            return text
        return (f"QEMU without icount: SysTick runs on the host's clock, so times follow the "
                f"host's speed; `MTVM_QEMU_ICOUNT=1 mtvm project flash` counts instructions")
    return f"{b.timer} at the {b.clock_hz / 1e6:g} MHz core clock"


def instructions_per_inference(result) -> int:
    """A BenchmarkResult measured under QEMU icount -> instructions per run."""
    return int(round(result.median * 1e9))
