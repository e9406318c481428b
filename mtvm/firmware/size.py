"""Flash and RAM use of a linked firmware against the board's capacity, by
section (from `arm-none-eabi-size -A`) and by the symbols that matter (the
model's arena, its weights, the runtime's packet buffers, from `nm`); and a
pre-link check that says plainly when a model cannot fit.

The linker is the truth of what fits: the MEMORY regions of link.ld stop the
link when one overflows (link_error() turns ld's words into one line), and
check_layout() reads the linked ELF's sections and load segments -- what a
loader or QEMU writes, and where -- and refuses a firmware that would write
outside the board's memory or zero-fill flash (a .bss that is not NOLOAD in
RAM)."""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

from ..errors import MtvmError


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if name.startswith("riscv64-unknown-elf-"):
            raise MtvmError(f"{name} not found: install the RISC-V GNU toolchain "
                            f"(Debian/Ubuntu: apt-get install gcc-riscv64-unknown-elf "
                            f"picolibc-riscv64-unknown-elf)")
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


def _output_rows(argv: list) -> list[list[str]]:
    """A binutils tool's output, each line split into its words."""
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines()]


def _symbol_sizes(elf: str, nm: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for parts in _output_rows([nm, "-S", "--size-sort", elf]):
        if len(parts) == 4:
            _, size, _, name = parts
            sizes[name] = sizes.get(name, 0) + int(size, 16)
    return sizes


@dataclass
class Section:
    name: str
    size: int
    vma: int
    lma: int
    flags: frozenset

    @property
    def loaded(self) -> bool:          # has bytes in the image (PROGBITS)
        return "LOAD" in self.flags and "CONTENTS" in self.flags

    @property
    def alloc(self) -> bool:
        return "ALLOC" in self.flags


@dataclass
class Segment:
    """A PT_LOAD program header: the loader copies filesz bytes to paddr and
    zero-fills up to memsz."""
    vaddr: int
    paddr: int
    filesz: int
    memsz: int


def elf_sections(elf: str, prefix: str = "arm-none-eabi-") -> list[Section]:
    """The ELF's sections with their run (VMA) and load (LMA) addresses."""
    result = []
    for parts in _output_rows([_tool(prefix + "objdump"), "-h", "-w", elf]):
        if len(parts) >= 7 and parts[0].isdigit() and parts[1].startswith("."):
            flags = frozenset(f.strip(",") for f in parts[7:]) if len(parts) > 7 else frozenset()
            result.append(Section(parts[1], int(parts[2], 16), int(parts[3], 16),
                                  int(parts[4], 16), flags))
    return result


def load_segments(elf: str, prefix: str = "arm-none-eabi-") -> list[Segment]:
    segs = []
    for parts in _output_rows([_tool(prefix + "readelf"), "-l", "-W", elf]):
        if len(parts) >= 6 and parts[0] == "LOAD":
            _, _off, vaddr, paddr, filesz, memsz = parts[:6]
            segs.append(Segment(int(vaddr, 16), int(paddr, 16), int(filesz, 16),
                                int(memsz, 16)))
    return segs


def check_layout(elf: str, regions: dict, board_name: str,
                 prefix: str = "arm-none-eabi-") -> None:
    """regions: {"flash": (origin, size, label), "ram": (...)}. Raises MtvmError
    (one line) when a section lies outside the board's memory or when a load
    segment would be written (or zero-filled) outside it or zero-filled in
    flash -- the boot-time lock-up of a .bss loaded after .data in flash."""
    flash_o, flash_n, flash_label = regions["flash"]

    def region_of(addr: int):
        for key, (o, n, label) in regions.items():
            if o <= addr < o + n:
                return key, o, n, label
        return None

    for sec in elf_sections(elf, prefix):
        if not sec.alloc or sec.size == 0:
            continue
        for kind, addr in (("runs at", sec.vma),) + ((("loads at", sec.lma),)
                                                     if sec.loaded else ()):
            r = region_of(addr)
            if r is None:
                raise MtvmError(f"{board_name}: section {sec.name} ({sec.size:,} bytes) {kind} "
                                f"{addr:#010x}, outside the board's flash and RAM")
            _, o, n, label = r
            if addr + sec.size > o + n:
                raise MtvmError(f"{board_name}: section {sec.name} overflows {label} by "
                                f"{addr + sec.size - (o + n):,} bytes")
    for seg in load_segments(elf, prefix):
        if seg.memsz == 0:
            continue
        r = region_of(seg.paddr)
        if r is None:
            raise MtvmError(f"{board_name}: a load segment of {seg.memsz:,} bytes is placed at "
                            f"{seg.paddr:#010x}, outside the board's flash and RAM")
        key, o, n, label = r
        if seg.paddr + seg.memsz > o + n:
            raise MtvmError(f"{board_name}: a load segment at {seg.paddr:#010x} ({seg.memsz:,} "
                            f"bytes) would be written {seg.paddr + seg.memsz - (o + n):,} bytes "
                            f"past the end of {label}")
        if key == "flash" and seg.memsz > seg.filesz:
            raise MtvmError(f"{board_name}: a load segment would zero-fill "
                            f"{seg.memsz - seg.filesz:,} bytes of {label} at "
                            f"{seg.paddr + seg.filesz:#010x} (a RAM section such as .bss is "
                            f"not NOLOAD with its load address in RAM: `(NOLOAD) ... > RAM AT> "
                            f"RAM` in link.ld)")


_REGION_RE = re.compile(r"region [`'\"]?([\w.]+)['\"]? overflowed by (\d+) bytes")
_SECTION_RE = re.compile(r"section [`'\"]?([\w.]+)['\"]? will not fit in region "
                         r"[`'\"]?([\w.]+)")


def link_error(text: str, board_name: str, regions: dict) -> str | None:
    """ld's overflow messages -> one line: the regions, by how much, and the
    sections that did not fit; None when the text has none."""
    over = {}
    for region, n in _REGION_RE.findall(text):
        over[region] = max(over.get(region, 0), int(n))
    secs = {}
    for sec, region in _SECTION_RE.findall(text):
        secs.setdefault(region, []).append(sec)
    asserts = [m.strip() for m in re.findall(r"mtvm: ([^\n]*overflow[^\n]*)", text)]
    if not over and not secs and not asserts:
        return None
    sizes = {k.upper(): v for k, v in regions.items()}
    parts = []
    for region in dict.fromkeys(list(over) + list(secs)):
        size = sizes.get(region.upper())
        what = f"region {region}"
        if size is not None:
            what += f" ({size[2]}, {size[1]:,} bytes)"
        if region in over:
            what += f" overflowed by {over[region]:,} bytes"
        else:
            what += " overflowed"
        if secs.get(region):
            what += f" ({', '.join(dict.fromkeys(secs[region]))} did not fit)"
        parts.append(what)
    if not parts:
        parts = asserts[:1]
    return (f"the firmware does not fit on {board_name}: " + "; ".join(parts)
            + " (try a board with more memory, the int8 model or a smaller max_packet_bytes)")


def report(elf: str, flash_size: int, ram_size: int, module_name: str = "default",
           prefix: str = "arm-none-eabi-", flash_origin: int | None = None,
           ram_origin: int | None = None) -> SizeReport:
    """flash_origin/ram_origin given: flash and RAM used are the extents the
    linker laid out (load addresses in flash, run addresses in RAM, alignment
    gaps included); else the sum of the sections."""
    size_tool, nm = _tool(prefix + "size"), _tool(prefix + "nm")
    sections: dict[str, int] = {}
    for parts in _output_rows([size_tool, "-A", elf]):
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
    flash_used, ram_used = text + rodata + data, stack + data + bss
    if flash_origin is not None and ram_origin is not None:
        secs = [s for s in elf_sections(elf, prefix) if s.alloc and s.size]
        in_flash = [s.lma + s.size for s in secs
                    if s.loaded and flash_origin <= s.lma < flash_origin + flash_size]
        in_ram = [s.vma + s.size for s in secs if ram_origin <= s.vma < ram_origin + ram_size]
        flash_used = max(in_flash, default=flash_origin) - flash_origin
        ram_used = max(in_ram, default=ram_origin) - ram_origin
    return SizeReport(sections, text, rodata, data, bss, stack, arena, weights, runtime, ring,
                      flash_used=flash_used, ram_used=ram_used,
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
