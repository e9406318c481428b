"""Flash and RAM use of a linked firmware against the board's capacity, by
section (from `arm-none-eabi-size -A`) and by the symbols that matter (the
model's arena, its weights, the runtime's packet buffers, from `nm`); and a
pre-link check that says plainly when a model cannot fit."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

from ..errors import MtvmError


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MtvmError(f"{name} not found: install the Arm GNU toolchain "
                        f"(Debian/Ubuntu: apt-get install gcc-arm-none-eabi "
                        f"libnewlib-arm-none-eabi binutils-arm-none-eabi)")
    return path


@dataclass
class SizeReport:
    sections: dict[str, int]
    text: int
    rodata: int
    data: int
    bss: int
    stack: int
    arena: int
    weights: int
    runtime_buffers: int
    uart_ring: int
    flash_used: int
    ram_used: int
    flash_size: int
    ram_size: int
    symbols: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in (
            "text", "rodata", "data", "bss", "stack", "arena", "weights", "runtime_buffers",
            "uart_ring", "flash_used", "ram_used", "flash_size", "ram_size")}

    def format(self, board_name: str = "") -> str:
        def pct(a, b):
            return f"{100.0 * a / b:5.1f}%" if b else "   -"
        on = f" on {board_name}" if board_name else ""
        return "\n".join([
            f"memory use{on}:",
            f"  flash {self.flash_used:>10,} / {self.flash_size:>10,} bytes "
            f"{pct(self.flash_used, self.flash_size)}"
            f"   text {self.text:,}  rodata {self.rodata:,} (weights {self.weights:,})"
            f"  data init {self.data:,}",
            f"  RAM   {self.ram_used:>10,} / {self.ram_size:>10,} bytes "
            f"{pct(self.ram_used, self.ram_size)}"
            f"   stack reserve {self.stack:,}  data {self.data:,}  bss {self.bss:,}"
            f" (arena {self.arena:,}, runtime buffers {self.runtime_buffers:,},"
            f" UART ring {self.uart_ring:,})",
        ])


def _symbol_sizes(elf: str, nm: str) -> dict[str, int]:
    out = subprocess.run([nm, "-S", "--size-sort", elf], capture_output=True, text=True,
                         check=True).stdout
    sizes: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            _, size, _, name = parts
            sizes[name] = sizes.get(name, 0) + int(size, 16)
    return sizes


def report(elf: str, flash_size: int, ram_size: int, module_name: str = "default",
           prefix: str = "arm-none-eabi-") -> SizeReport:
    size_tool, nm = _tool(prefix + "size"), _tool(prefix + "nm")
    out = subprocess.run([size_tool, "-A", elf], capture_output=True, text=True,
                         check=True).stdout
    sections: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].startswith(".") and parts[1].isdigit():
            sections[parts[0]] = int(parts[1])
    syms = _symbol_sizes(elf, nm)
    text = sections.get(".vectors", 0) + sections.get(".text", 0)
    rodata = sum(sections.get(s, 0) for s in (".rodata", ".ARM.extab", ".ARM.exidx"))
    data, bss, stack = sections.get(".data", 0), sections.get(".bss", 0), sections.get(".stack", 0)
    prefix_c = f"tvmgen_{module_name}_c_"
    weights = sum(v for k, v in syms.items() if k.startswith(prefix_c))
    arena = syms.get(f"tvmgen_{module_name}_workspace", 0)
    runtime = syms.get("server", 0)
    ring = syms.get("ring", 0)
    return SizeReport(sections, text, rodata, data, bss, stack, arena, weights, runtime, ring,
                      flash_used=text + rodata + data, ram_used=stack + data + bss,
                      flash_size=flash_size, ram_size=ram_size, symbols=syms)


def check_fits(metadata: dict, flash_size: int, ram_size: int, stack_bytes: int,
               max_packet_bytes: int, kind: str, board_name: str) -> None:
    """Before compiling: refuse a model whose weights or arena alone cannot
    fit, with the numbers (the linker would say it less clearly)."""
    weights = int(metadata.get("constant_bytes", 0))
    arena = int(metadata.get("workspace_bytes", 0))
    io = sum(t["size_bytes"] for t in metadata.get("inputs", []) + metadata.get("outputs", []))
    sample = sum(t["size_bytes"] for t in metadata.get("inputs", [])) if kind == "standalone" else 0
    buffers = 2 * max_packet_bytes if kind != "standalone" else 0
    need_flash = weights + sample
    need_ram = arena + io + stack_bytes + buffers
    problems = []
    if need_flash > flash_size:
        problems.append(f"flash: the model's weights need {weights:,} bytes"
                        + (f" (+ {sample:,} of sample input)" if sample else "")
                        + f" but {board_name} has {flash_size:,}")
    if need_ram > ram_size:
        problems.append(f"RAM: arena {arena:,} + inputs/outputs {io:,} + stack {stack_bytes:,}"
                        + (f" + packet buffers {buffers:,}" if buffers else "")
                        + f" = {need_ram:,} bytes but {board_name} has {ram_size:,}")
    if problems:
        raise MtvmError(f"the model does not fit on {board_name}:\n  " + "\n  ".join(problems)
                        + "\n(try a board with more memory, the int8 model, or a smaller "
                        "max_packet_bytes)")
