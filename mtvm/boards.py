"""Boards as data: one JSON file per board in `boards/`, the chips they are
built on in `boards/socs/`, flash runners in `boards/runners/`. A board names
its shared pieces (SoC, UART driver, runner, template) instead of carrying
them; this module loads, merges, validates (boards/schema/*.schema.json) and
lists them.

A board's data is its SoC's keys with the board's own on top; nested objects
(memory, uart, runner_args) are merged key by key, so a board can override
one memory region or one UART setting of its chip.

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


def _validate_riscv(b: Board):
    missing = [k for k in ("cpu", "cflags", "memory", "uart", "timer", "runner")
               if k not in b.data]
    if "plic" not in b.data and "interrupt_matrix" not in b.data:
        missing.append("plic (or interrupt_matrix)")
    if b.timer == "mtime" and "mtime" not in b.data:
        missing.append("mtime")
    if missing:
        raise MtvmError(f"board {b.name} ({b.path}): missing field(s) {', '.join(missing)}")
    drv = b.uart.get("driver")
    tpl = os.path.join(data_dir("project_templates"), "riscv", "src", "drivers",
                       f"uart_{drv}.c")
    if not os.path.isfile(tpl):
        raise MtvmError(f"board {b.name}: no UART driver {drv!r} (expected {tpl})")
    if b.timer not in ("mtime", "mcycle"):
        raise MtvmError(f"board {b.name}: timer must be 'mtime' or 'mcycle', not {b.timer!r}")
    if b.flash.size <= 0 or b.ram.size <= 0:
        raise MtvmError(f"board {b.name}: flash and RAM sizes must be positive")


# -- schema and SoC layer -------------------------------------------------------------------

def _schema_dir() -> str:
    return os.path.join(data_dir("boards"), "schema")


_VALIDATORS: dict = {}


def _validator(kind: str):
    """The jsonschema validator of boards/schema/<kind>.schema.json (kind: board, soc)."""
    if kind not in _VALIDATORS:
        import jsonschema
        from referencing import Registry, Resource
        schemas = {}
        for k in ("board", "soc"):
            with open(os.path.join(_schema_dir(), f"{k}.schema.json")) as f:
                schemas[k] = json.load(f)
        registry = Registry().with_resources(
            (f"{k}.schema.json", Resource.from_contents(v)) for k, v in schemas.items())
        registry = registry.with_resources(
            (v["$id"], Resource.from_contents(v)) for v in schemas.values())
        for k, v in schemas.items():
            _VALIDATORS[k] = jsonschema.Draft202012Validator(v, registry=registry)
    return _VALIDATORS[kind]


def _json_path(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "top level"


def check_schema(data: dict, kind: str, where: str) -> None:
    """One MtvmError line for the first schema violation of `data` (a board or SoC
    file's dict), naming the file, the JSON path and what to do."""
    import difflib
    errors = sorted(_validator(kind).iter_errors(data), key=lambda e: list(e.absolute_path))
    if not errors:
        return
    e = errors[0]
    at = _json_path(e.absolute_path)
    if e.validator == "additionalProperties":
        allowed = list(e.schema.get("properties", {}))
        extra = [k for k in e.instance if k not in allowed]
        key = extra[0] if extra else "?"
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else \
            f" (known keys: {', '.join(allowed)})"
        raise MtvmError(f"{where}: unknown key {key!r} at {at}{hint}")
    if e.validator == "pattern" and e.schema.get("pattern") == "^[a-z0-9_]+$":
        # names that select files (template.py is imported): no paths
        raise MtvmError(f"{where}: {at} must be a plain name ([a-z0-9_]+), not {e.instance!r}")
    if e.validator == "pattern" and list(e.absolute_path) == ["name"]:
        raise MtvmError(f"{where}: {kind} name {e.instance!r} may only hold letters, digits, "
                        "'.', '_' and '-' (it lands in Makefiles and C strings)")
    raise MtvmError(f"{where}: {at}: {e.message} (see boards/schema/{kind}.schema.json)")


def _soc_path(name: str, board_path: str) -> str | None:
    """boards/socs/<name>.json beside the board file first, then in every board directory."""
    dirs = ([os.path.dirname(board_path)] if board_path else []) + board_dirs()
    for d in dirs:
        p = os.path.join(d, "socs", name + ".json")
        if os.path.isfile(p):
            return p
    return None


def list_socs() -> list[str]:
    return sorted({os.path.basename(f)[:-5] for d in board_dirs()
                   for f in glob.glob(os.path.join(d, "socs", "*.json"))})


def _merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def merged_board_data(d: dict, path: str = "") -> dict:
    """A board file's dict with its SoC merged in (validated against the schemas)."""
    where = path or f"board {d.get('name', '?')}"
    check_schema(d, "board", where)
    soc = d.get("soc")
    if soc is None:
        return dict(d)
    sp = _soc_path(soc, path)
    if sp is None:
        raise MtvmError(f"{where}: unknown soc {soc!r}; known: {', '.join(list_socs())} "
                        "(boards/socs/<soc>.json)")
    try:
        with open(sp) as f:
            sd = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise MtvmError(f"cannot read SoC file {sp}: {e}") from None
    check_schema(sd, "soc", sp)
    chip = {k: v for k, v in sd.items() if k not in ("name", "description")}
    merged = _merge(chip, d)
    check_schema(merged, "board", f"{where} merged with {sp}")
    return merged


def load_board(name: str) -> Board:
    """Load boards/<name>.json (or a path to a board file), merged with its SoC."""
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
    if not isinstance(d, dict):
        raise MtvmError(f"{path}: a board file holds a JSON object")
    return board_from_dict(d, path)


def board_from_dict(d: dict, path: str = "") -> Board:
    """A Board from its data, SoC merged in (e.g. the board_data a project saved)."""
    bname = d.get("name", os.path.basename(path)[:-5] if path else "?")
    d = merged_board_data(d, path)     # merging again into merged data changes nothing
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
    elif b.template == "riscv":
        _validate_riscv(b)
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
        if b.template not in ("cortex_m", "riscv"):
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
