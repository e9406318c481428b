"""The numbers behind `mtvm analyze --report` (no matplotlib here): the memory
timeline from a compiled model's plan, the flash and RAM budgets against a
board, the per-layer rows and a saved profile."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from ..errors import MtvmError
from ..memory.planner import aligned, live_steps


# -- memory timeline ---------------------------------------------------------------------
@dataclass
class Timeline:
    """Arena bytes live at each kernel, by tensor: series[name] = bytes at each
    kernel (0 where the tensor is dead). Sizes are the planner's (16-byte
    aligned), so the stack at a kernel is what the planner counted there."""
    kernels: list[str]                    # one label per kernel, execution order
    series: dict[str, list[int]] = field(default_factory=dict)
    arena_bytes: int = 0
    lower_bound: int = 0

    @property
    def totals(self) -> list[int]:
        return [sum(v[i] for v in self.series.values()) for i in range(len(self.kernels))]

    @property
    def peak(self) -> int:
        return max(self.totals, default=0)


def timeline(lib) -> Timeline:
    """From a CompiledModel: each arena tensor (aliases and in-place outputs
    count as the tensor whose bytes they use) is live from the kernel that
    first writes it to the last that reads it; kernel scratch at its kernel.
    Checked against the plan's own per-step sums."""
    g, plan = lib.graph, lib.plan
    root = plan.root
    first, last = live_steps(g, root)
    nbytes: dict[str, int] = {}
    for name, t in g.tensors.items():
        if not t.is_const and root(name) in plan.offsets:
            nbytes[root(name)] = max(nbytes.get(root(name), 0), t.nbytes)
    end = max(len(g.nodes) - 1, 0)
    steps = [lk.step for lk in lib.kernels]
    labels = [f"{i} {lk.kernel.node.op}" for i, lk in enumerate(lib.kernels)]
    tl = Timeline(labels, arena_bytes=plan.arena_bytes, lower_bound=plan.lower_bound)
    for r in sorted(plan.offsets, key=lambda r: (first.get(r, 0), plan.offsets[r])):
        f = first.get(r, 0)
        l_ = end if (lib.io_in_workspace and r in g.outputs) else last.get(r, f)
        size = aligned(max(nbytes.get(r, 1), 1))
        tl.series[r] = [size if f <= s <= l_ else 0 for s in steps]
    scratch = {lk.step: lk.kernel.scratch_bytes for lk in lib.kernels if lk.kernel.scratch_bytes}
    if scratch:
        tl.series["(kernel scratch)"] = [aligned(scratch.get(s, 0)) if scratch.get(s) else 0
                                         for s in steps]
    planned = [plan.live_bytes[s] if s < len(plan.live_bytes) else 0 for s in steps]
    rest = [p - t for p, t in zip(planned, tl.totals)]
    if any(rest):      # should not happen: say so in the figure rather than hide it
        tl.series["(not attributed)"] = rest
    return tl


def timeline_from_metadata(md: dict) -> Timeline:
    """Without the plan (an MLF or a project): one series, metadata's live_bytes."""
    ops = md["operators"]
    return Timeline([f"{o['index']} {o['kind'].split('+')[0]}" for o in ops],
                    {"(live arena bytes)": [int(o.get("live_bytes", 0)) for o in ops]},
                    int(md["workspace_bytes"]), int(md.get("workspace_lower_bound", 0)))


# -- budgets -----------------------------------------------------------------------------
@dataclass
class Budget:
    """Flash and RAM items (name, bytes, how known) against the board's sizes."""
    board: str
    flash: list = field(default_factory=list)
    ram: list = field(default_factory=list)
    flash_size: int | None = None
    ram_size: int | None = None
    notes: list = field(default_factory=list)

    def used(self, which: str) -> int:
        return sum(b for _, b, _ in getattr(self, which))


def _text_bytes(objs: list[str], size_tool: str) -> int:
    """.text + .rodata (+ .data image) of object files, from `size -A`."""
    total = 0
    for o in objs:
        out = subprocess.run([size_tool, "-A", o], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit() and (
                    parts[0].startswith(".text") or parts[0].startswith(".rodata")
                    or parts[0] == ".data"):
                total += int(parts[1])
    return total


def _compile_size(cc: str, cflags: list, sources: dict, includes: list) -> tuple:
    """(bytes of code of `sources` ({name: C text}) compiled with cc -O2 -c, or
    None; why not)."""
    size_tool = None
    if cc.endswith("gcc") and "-" in os.path.basename(cc):
        size_tool = shutil.which(cc[:-3] + "size")
    size_tool = size_tool or shutil.which("size")
    if not shutil.which(cc) or not size_tool:
        return None, f"{cc} or its size tool not found"
    with tempfile.TemporaryDirectory(prefix="mtvm-size-") as tmp:
        objs = []
        for name, text in sources.items():
            src = os.path.join(tmp, os.path.basename(name))
            with open(src, "w", encoding="utf-8") as f:
                f.write(text)
        for name in sources:
            if not name.endswith(".c"):
                continue
            src = os.path.join(tmp, os.path.basename(name))
            obj = src[:-2] + ".o"
            flags = [f for f in cflags if not f.startswith("-O") and f != "-Werror"]
            cmd = [cc, *flags, "-O2", "-std=c99", "-ffunction-sections", "-c", src, "-o", obj,
                   "-I", tmp] + [f"-I{d}" for d in includes]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                err = next((ln for ln in p.stderr.splitlines() if "error" in ln), "")
                return None, f"{os.path.basename(name)} did not compile with {cc}: {err[:200]}"
            objs.append(obj)
        return _text_bytes(objs, size_tool), ""


def model_sources(lib=None, mlf_dir: str | None = None) -> dict:
    """{file name: text} of the model's C (entry, kernels, kernel library),
    without the constants (counted as weights)."""
    if lib is not None:
        files = lib.sources
    elif mlf_dir:
        files = {}
        for sub in ("codegen/host/src", "codegen/host/include"):
            d = os.path.join(mlf_dir, sub)
            for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    files[f"{sub}/{name}"] = f.read()
    else:
        return {}
    return {k: v for k, v in files.items() if not k.endswith("_constants.c")}


def budgets(md: dict, board, sources: dict) -> Budget:
    """Flash: weights (metadata constant_bytes), the model's code and the
    runtime's (compiled here with the board's compiler and flags, -O2, when it
    is installed: an estimate, the linked firmware is the truth -- `mtvm project
    build` prints it); RAM: arena, input/output buffers, the runtime's packet
    buffers (host-driven), the board's stack reserve."""
    from ..datadirs import data_dir
    b = Budget(board.name if board else "(no board)")
    if board is not None:
        b.flash_size = board.flash.size if board.flash else None
        b.ram_size = board.ram.size if board.ram else None
    cc = (board.data.get("cc") if board is not None else None) or "cc"
    cflags = list(board.cflags) if board is not None else []
    if not any(f.startswith("-mcpu") for f in cflags):      # the host: the model's target
        from ..target import Target
        try:
            cflags += Target.parse((md.get("target") or {}).get("name") or "c").cflags()
        except MtvmError:
            pass
    weights = int(md.get("constant_bytes", 0))
    b.flash.append(("weights", weights, "metadata constant_bytes"))
    code, why = _compile_size(cc, cflags, sources, []) if sources else (None, "no C sources")
    if code is not None:
        b.flash.append(("model code", code, f"{os.path.basename(cc)} -O2, estimate"))
    else:
        b.notes.append(f"model code not measured: {why}")
    rt_dir = data_dir("c_runtime", must_exist=False)
    rt_src = {}
    for name in ("mtvm_server.c", "mtvm_framing.c", "mtvm_model.c"):
        path = os.path.join(rt_dir, "src", name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                rt_src[name] = f.read()
    rt, why = _compile_size(cc, cflags, rt_src, [os.path.join(rt_dir, "include")]) \
        if rt_src else (None, "c_runtime/src not found")
    if rt is not None:
        b.flash.append(("runtime code", rt, "c_runtime server + framing, estimate"))
    else:
        b.notes.append(f"runtime code not measured: {why}")
    max_packet = int(board.data.get("max_packet_bytes", 512)) if board is not None else 512
    io = sum(t["size_bytes"] for t in md.get("inputs", []) + md.get("outputs", []))
    b.ram.append(("arena", int(md["workspace_bytes"]), "metadata workspace_bytes"))
    b.ram.append(("inputs + outputs", io, "metadata"))
    b.ram.append(("runtime buffers", 2 * max_packet + 64,
                  f"2 x max_packet_bytes {max_packet} + server state (host-driven)"))
    stack = board.stack_bytes if board is not None else 8192
    b.ram.append(("stack", stack, "board stack_bytes"))
    return b


# -- layers ------------------------------------------------------------------------------
def layer_rows(md: dict, lib=None, profile: dict | None = None) -> list[dict]:
    """One row per kernel: metadata plus parameters (from the compiled model),
    arena offset of its output, and device time from a profile."""
    rows = []
    times = {}
    if profile:
        for k in profile.get("kernels", []):
            times[int(k["index"])] = k
    for i, o in enumerate(md["operators"]):
        row = {"index": o["index"], "function": o["function"], "kind": o["kind"],
               "nodes": list(o.get("nodes", [])), "macs": int(o["macs"]),
               "output_bytes": int(o["output_bytes"]),
               "scratch_bytes": int(o.get("workspace_bytes") or 0),
               "live_bytes": int(o.get("live_bytes", 0)),
               "schedule": o.get("schedule") or "-", "knobs": o.get("knobs") or {},
               "params": None, "param_bytes": None, "outputs": [], "offset": None}
        if lib is not None and i < len(lib.kernels):
            lk = lib.kernels[i]
            consts = {b.name: b for _, b in lk.params if b is not None and b.const is not None}
            row["params"] = sum(int(lib.graph.tensors[n].size) for n in consts)
            row["param_bytes"] = sum(int(lib.graph.tensors[n].nbytes) for n in consts)
            outs = [x for x in lk.kernel.node.kernel_outputs if x]
            row["outputs"] = outs
            if outs:
                r = lib.plan.root(outs[0])
                row["offset"] = lib.plan.arena_offset(outs[0]) if r in lib.plan.offsets else None
        t = times.get(o["index"])
        if t is not None:
            row["ticks"] = int(t["ticks"])
            tps = profile.get("ticks_per_second") or 0
            row["seconds"] = t["ticks"] / tps if tps else None
        rows.append(row)
    return rows


def load_profile(path: str) -> dict:
    """A profile saved by `mtvm run --profile N --profile-json FILE`."""
    try:
        with open(path, encoding="utf-8") as f:
            p = json.load(f)
    except (OSError, ValueError) as e:
        raise MtvmError(f"{path}: cannot read the profile: {e}") from None
    if not isinstance(p, dict) or not isinstance(p.get("kernels"), list):
        raise MtvmError(f"{path}: not a profile written by `mtvm run --profile-json`")
    return p


def profile_from_records(md: dict, records) -> dict | None:
    """A profile (profile_json's form) from `mtvm tune` records: per kernel whose
    workload key the records measured for md's target, the figure of the candidate
    they choose (mtvm.tune.records.best). None when no kernel has one. Figures of
    one group only (board, unit): instructions under QEMU -icount, else timer ticks."""
    from ..tune import records as R
    target = (md.get("target") or {}).get("name")
    chosen = R.best(R.resolve(records), target=target)
    kernels, units, rates, boards = [], set(), set(), set()
    for o in md["operators"]:
        b = chosen.get(o.get("workload_key") or "")
        if b is None:
            continue
        rec = b.record
        kernels.append({"index": o["index"], "ticks": int(rec["figure"])})
        units.add(rec.get("unit"))
        rates.add(rec.get("ticks_per_second") if rec.get("unit") != "instructions" else None)
        boards.add(rec.get("board"))
    if not kernels:
        return None
    if len(units) > 1 or len(rates) > 1:
        raise MtvmError(f"the tuning records measure this model's layers in different units "
                        f"or clocks ({', '.join(sorted(map(str, units)))}; boards "
                        f"{', '.join(sorted(map(str, boards)))}): give the records of one board")
    unit = units.pop()
    return {"format": "mtvm-profile-1", "source": "tuning records", "unit": unit,
            "ticks_per_second": rates.pop(), "runs": 1, "kernels": kernels}


def profile_json(prof) -> dict:
    """ProfileResult -> the JSON `--profile-json` writes."""
    from dataclasses import asdict
    return {"format": "mtvm-profile-1", "ticks_per_second": prof.ticks_per_second,
            "runs": prof.runs, "instructions_per_second": prof.instructions_per_second,
            "time_is_host_clock": prof.time_is_host_clock, "total_ticks": prof.total_ticks,
            "kernels": [asdict(r) for r in prof.rows]}
