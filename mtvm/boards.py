"""Boards as data: one JSON file per board in `boards/`, flash runners in
`boards/runners/`. A board names its shared pieces (UART driver, runner,
template) instead of carrying them; this module loads, validates and lists
them.

Extra board directories can be added with MTVM_BOARDS_PATH (os.pathsep-separated);
a board found there overrides a built-in board of the same name.
"""
from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field

from .datadirs import data_dir
from .errors import MtvmError

# The built-in boards and templates (a checkout's top-level directories, or an
# installed wheel's package data: mtvm.datadirs).
BOARDS_DIR = data_dir("boards", must_exist=False)
TEMPLATES_DIR = data_dir("project_templates", must_exist=False)

_SIZE = re.compile(r"^\s*(0x[0-9a-fA-F]+|\d+)\s*([KkMm]i?[Bb]?)?\s*$")


def parse_size(v) -> int:
    """128, "0x400", "128K", "4M", "640KiB" -> bytes."""
    if isinstance(v, int):
        return v
    m = _SIZE.match(str(v))
    if not m:
        raise MtvmError(f"not a size: {v!r} (use bytes, 0x..., or a K/M suffix)")
    n = int(m.group(1), 0)
    unit = (m.group(2) or "").upper()[:1]
    return n * {"": 1, "K": 1024, "M": 1024 * 1024}[unit]


def parse_int(v) -> int:
    return v if isinstance(v, int) else int(str(v), 0)


def board_dirs() -> list[str]:
    extra = [d for d in os.environ.get("MTVM_BOARDS_PATH", "").split(os.pathsep) if d]
    return extra + [data_dir("boards")]


@dataclass
class Region:
    origin: int
    size: int
    name: str = ""

    @property
    def end(self) -> int:
        return self.origin + self.size


@dataclass
class Runner:
    """How firmware gets onto a board: "qemu" (start the emulator) or a command."""
    name: str
    kind: str                       # "qemu" | "command"
    tool: str
    command: list[str]
    description: str = ""
    debian: str | None = None
    pypi: str | None = None
    install: str | None = None

    def install_hint(self) -> str:
        ways = []
        if self.debian:
            ways.append(f"apt-get install {self.debian}")
        if self.pypi:
            ways.append(f"pip install {self.pypi}")
        if self.install:
            ways.append(self.install)
        return " or ".join(ways) if ways else "see the tool's documentation"

    def expand(self, values: dict) -> list[str]:
        """Fill the command's {placeholders}; an argument that is exactly one
        placeholder whose value is a list becomes that many arguments."""
        out = []
        for arg in self.command:
            m = re.fullmatch(r"\{(\w+)\}", arg)
            if m and isinstance(values.get(m.group(1)), (list, tuple)):
                out.extend(str(x) for x in values[m.group(1)])
                continue
            try:
                out.append(arg.format(**values))
            except KeyError as e:
                raise MtvmError(f"runner {self.name}: the board gives no value for {e} "
                                f"(add it to runner_args)") from None
        return out


@dataclass
class Board:
    name: str
    description: str
    template: str
    path: str
    data: dict = field(repr=False)
    emulated: bool = False
    cpu: str = ""
    cflags: list = field(default_factory=list)
    fpu: str | None = None
    dsp: bool = False
    mve: bool = False
    clock_hz: int = 0
    flash: Region | None = None
    ram: Region | None = None
    stack_bytes: int = 8192
    irqs: int = 32
    uart: dict = field(default_factory=dict)
    timer: str = ""
    runner: Runner | None = None
    runner_args: dict = field(default_factory=dict)
    usb: dict | None = None
    notes: str = ""

    @property
    def qemu_machine(self) -> str | None:
        if self.runner is not None and self.runner.kind == "qemu":
            return self.runner_args.get("machine")
        return None

    @property
    def flashes_with(self) -> str:
        if self.runner is None:
            return "-"
        if self.runner.kind == "qemu":
            return f"qemu ({self.qemu_machine})"
        return self.runner.name

    def to_dict(self) -> dict:
        return dict(self.data)


def _runner_path(name: str) -> str | None:
    for d in board_dirs():
        p = os.path.join(d, "runners", name + ".json")
        if os.path.isfile(p):
            return p
    return None


def load_runner(name: str) -> Runner:
    p = _runner_path(name)
    if p is None:
        known = sorted({os.path.basename(f)[:-5] for d in board_dirs()
                        for f in glob.glob(os.path.join(d, "runners", "*.json"))})
        raise MtvmError(f"unknown flash runner {name!r}; known: {', '.join(known)}")
    with open(p) as f:
        d = json.load(f)
    return Runner(name=d.get("name", name), kind=d.get("kind", "command"), tool=d["tool"],
                  command=list(d["command"]), description=d.get("description", ""),
                  debian=d.get("debian"), pypi=d.get("pypi"), install=d.get("install"))


def _board_files() -> dict[str, str]:
    found = {}
    for d in reversed(board_dirs()):          # earlier directories override later ones
        for p in glob.glob(os.path.join(d, "*.json")):
            found[os.path.basename(p)[:-5]] = p
    return found


def _region(name, d, board) -> Region:
    try:
        return Region(parse_int(d["origin"]), parse_size(d["size"]), d.get("name", name))
    except (KeyError, TypeError) as e:
        raise MtvmError(f"board {board}: memory.{name} needs origin and size ({e})") from None


_PLAIN_NAME = re.compile(r"[a-z0-9_]+")


def _validate_cortex_m(b: Board):
    missing = [k for k in ("cpu", "cflags", "memory", "uart", "timer", "runner")
               if k not in b.data]
    if missing:
        raise MtvmError(f"board {b.name} ({b.path}): missing field(s) {', '.join(missing)}")
    drv = b.uart.get("driver")
    drivers = os.path.join(data_dir("project_templates"), "cortex_m", "src", "drivers")
    tpl = os.path.join(drivers, f"uart_{drv}.c")
    if not os.path.isfile(tpl):
        raise MtvmError(f"board {b.name}: no UART driver {drv!r} (expected {tpl})")
    if b.timer not in ("dwt", "systick"):
        raise MtvmError(f"board {b.name}: timer must be 'dwt' or 'systick', not {b.timer!r}")
    if b.flash.size <= 0 or b.ram.size <= 0:
        raise MtvmError(f"board {b.name}: flash and RAM sizes must be positive")


def load_board(name: str) -> Board:
    """Load boards/<name>.json (or a path to a board file)."""
    if os.sep in name or name.endswith(".json"):
        path = name
    else:
        path = _board_files().get(name)
        if path is None:
            raise MtvmError(f"unknown board {name!r}; known boards: {', '.join(list_boards())} "
                            f"(see `mtvm boards`)")
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise MtvmError(f"cannot read board file {path}: {e}") from None
    return board_from_dict(d, path)


def board_from_dict(d: dict, path: str = "") -> Board:
    """A Board from its data (e.g. the board_data a project saved)."""
    bname = d.get("name", os.path.basename(path)[:-5] if path else "?")
    mem = d.get("memory", {})
    b = Board(
        name=bname, description=d.get("description", ""),
        template=d.get("template", "host" if bname == "host" else "cortex_m"),
        path=path, data=d, emulated=bool(d.get("emulated", False)), cpu=d.get("cpu", ""),
        cflags=list(d.get("cflags", [])), fpu=d.get("fpu"), dsp=bool(d.get("dsp", False)),
        mve=bool(d.get("mve", False)), clock_hz=parse_int(d.get("clock_hz", 0)),
        flash=_region("flash", mem["flash"], bname) if "flash" in mem else None,
        ram=_region("ram", mem["ram"], bname) if "ram" in mem else None,
        stack_bytes=parse_size(d.get("stack_bytes", 8192)), irqs=parse_int(d.get("irqs", 32)),
        uart=dict(d.get("uart") or {}), timer=d.get("timer", ""),
        runner=load_runner(d["runner"]) if isinstance(d.get("runner"), str) else None,
        runner_args=dict(d.get("runner_args") or {}), usb=d.get("usb"), notes=d.get("notes", ""))
    # The template and UART driver names select files (template.py is imported): plain words
    # only, so a board file cannot point outside project_templates/.
    for key, value in (("template", b.template), ("uart.driver", b.uart.get("driver", "x"))):
        if not isinstance(value, str) or not _PLAIN_NAME.fullmatch(value):
            raise MtvmError(f"board {bname!r}: {key} must be a plain name "
                            f"([a-z0-9_]+), not {value!r}")
    if b.template == "cortex_m":
        _validate_cortex_m(b)
    return b


def list_boards() -> list[str]:
    return sorted(_board_files())


def _fmt_size(n: int | None) -> str:
    if n is None:
        return "-"
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"


def board_table(names=None) -> str:
    rows = [("name", "cpu", "fpu", "dsp", "flash", "RAM", "clock", "uart", "flashes with")]
    for n in names or list_boards():
        try:
            b = load_board(n)
        except MtvmError as e:
            rows.append((n, f"(invalid: {e})", "", "", "", "", "", "", ""))
            continue
        if b.template != "cortex_m":
            rows.append((b.name, b.cpu or "native", "-", "-", "-", "-", "-", "stdio",
                         "- (runs on this machine)"))
            continue
        rows.append((b.name, b.cpu, b.fpu or "no", "yes" if b.dsp else "no",
                     _fmt_size(b.flash.size), _fmt_size(b.ram.size),
                     f"{b.clock_hz / 1e6:g} MHz", b.uart.get("driver", "-"), b.flashes_with))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
