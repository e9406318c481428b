"""Measuring one build: compile the model with a schedule config (one candidate
per layer) and profiling, generate and build a host-driven project for the
board, run it on the device through a session, check its outputs against the
reference (onnxruntime, as `mtvm validate`) and read each kernel's figure from
the device's per-kernel profile.

A Device is where one worker measures: the host executable, an emulator it
starts for each build (with -icount: figures are instruction counts), or a
board on a port (a serial device, `rfc2217://host:port`, `socket://...`),
flashed with the board's runner.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from ..errors import BuildError, MtvmError
from ..schedules import ScheduleConfig
from ..session.executor import profile_warmup
from .space import candidate_ident

# what went wrong, as records say it
COMPILE_ERROR, BUILD_ERROR, WRONG_OUTPUT = "compile_error", "build_error", "wrong_output"
RESET, TIMEOUT, SESSION_ERROR, OVER_BUDGET = "reset", "timeout", "session_error", "over_budget"


def _quiet(*_a, **_k):
    pass


@dataclass
class Device:
    """One worker's device. port: None for the host executable or an emulator
    started per build; else where the board's UART is (flashed per build with
    the board's runner, which must reach that board)."""
    index: int
    workdir: str
    port: str | None = None
    icount: bool = True             # emulated boards: -icount shift=0
    project: object = None          # the project being measured (to stop it on Ctrl-C)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        return self.port or str(self.index)

    def stop(self) -> None:
        proj = self.project
        if proj is not None:
            try:
                proj.stop()
            except Exception:
                pass


@dataclass
class KernelFigure:
    key: str
    schedule: str
    knobs: dict
    figure: float               # per kernel call (mean over the kernels with this key)
    spread: float
    scratch_bytes: int

    @property
    def ident(self) -> str:
        return candidate_ident(self.schedule, self.knobs)


@dataclass
class BuildResult:
    status: str                          # "ok" or one of the failures above
    error: str = ""
    arena_bytes: int | None = None
    unit: str = "ticks"                  # or "instructions"
    ticks_per_second: int | None = None
    runs: int = 0
    figures: dict = field(default_factory=dict)      # {key: KernelFigure}
    realized: dict = field(default_factory=dict)     # {key: candidate ident the build used}
    seconds: float = 0.0
    total: float | None = None           # the whole model's figure (sum of its kernels)
    statistic: str = "median"            # of the profiled runs: "median" or "min"


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]


def measure(model, board: dict, config: ScheduleConfig, device: Device, inputs: dict,
            runs: int = 10, memory_budget: int | None = None, compile_options=None,
            timeout: float | None = None) -> BuildResult:
    """Compile, build, run, validate and profile one configuration on `device`."""
    from .. import project as P
    from ..compiler import compile as mtvm_compile
    from ..session.errors import DeviceReset, SessionError, SessionTimeout
    from ..target import Target
    from ..validate import validate_outputs
    t0 = time.monotonic()
    res = BuildResult("ok")
    opts = dict(compile_options or {})
    target = Target.resolve(opts.pop("target", None) or Target.from_board(board))
    try:
        cm = mtvm_compile(model, profile=True, target=target, schedule_config=config, **opts)
    except MtvmError as e:
        return BuildResult(COMPILE_ERROR, _first_line(e), seconds=time.monotonic() - t0)
    md = cm.metadata
    res.arena_bytes = md["workspace_bytes"]
    scratch = {}
    for op in md["operators"]:
        if op.get("schedule"):
            res.realized[op["workload_key"]] = candidate_ident(op["schedule"], op["knobs"])
            scratch[op["workload_key"]] = op.get("workspace_bytes", 0)
    if memory_budget is not None and res.arena_bytes > memory_budget:
        res.status, res.error = OVER_BUDGET, (f"arena {res.arena_bytes} B over the budget of "
                                              f"{memory_budget} B")
        res.seconds = time.monotonic() - t0
        return res
    proj = None
    try:
        proj = P.generate(cm, board=board["name"], out_dir=device.workdir, force=True,
                          overwrite_edited=True, progress=_quiet)
        proj.build(progress=_quiet)
    except (BuildError, MtvmError) as e:
        res.status, res.error = BUILD_ERROR, _first_line(e)
        res.seconds = time.monotonic() - t0
        return res
    emulated = bool(board.get("emulated"))
    device.project = proj
    try:
        if device.port is None and emulated:
            proj.flash(progress=_quiet, icount=device.icount)
        elif device.port is not None and not emulated:
            proj.flash(progress=_quiet)
        with proj.session(port=device.port, timeout=timeout) as sess:
            info = sess.info()
            ex = sess.executor
            outputs = ex.run(inputs)
            _, checks = validate_outputs(model, inputs, outputs)
            bad = [c for c in checks if not c.ok]
            if bad:
                res.status, res.error = WRONG_OUTPUT, bad[0].describe()
                return res
            prof = ex.profile(runs=runs, warmup=profile_warmup(board))
        tps = info.ticks_per_second
        res.ticks_per_second, res.runs = tps, prof.runs
        per_tick = 1.0
        if emulated and device.port is None and device.icount and tps:
            res.unit, per_tick = "instructions", 1e9 / tps   # 1 instruction = 1 ns
        ops = {o["function"]: o for o in md["operators"]}
        acc: dict[str, list] = {}
        for row in prof.rows:
            op = ops.get(row.name)
            if not op or not op.get("schedule"):
                continue
            acc.setdefault(op["workload_key"], []).append((op, row))
        # A timer's figure is the fastest run: on a loaded machine preemption and
        # interrupts only ever add time (the median of 15 runs of a host build
        # moved by +-25 % between runs at a load of 6 on 2 cores, the minimum by 1 %).
        # Instruction counts are the same in every run: their median.
        res.statistic = "median" if res.unit == "instructions" else "min"

        def ticks(r):
            return r.ticks if res.statistic == "median" else r.min_ticks
        res.total = sum(ticks(r) for r in prof.rows) * per_tick
        for key, items in acc.items():
            op = items[0][0]
            fig = sum(ticks(r) for _, r in items) / len(items) * per_tick
            res.figures[key] = KernelFigure(key, op["schedule"], dict(op["knobs"]), fig,
                                            max(r.spread for _, r in items), scratch.get(key, 0))
    except DeviceReset as e:
        res.status, res.error = RESET, _first_line(e)
    except SessionTimeout as e:
        res.status, res.error = TIMEOUT, _first_line(e)
    except SessionError as e:
        res.status, res.error = SESSION_ERROR, _first_line(e)
    except (BuildError, MtvmError, OSError) as e:   # flashing, opening the port
        res.status, res.error = SESSION_ERROR, _first_line(e)
    finally:
        device.project = None
        try:
            proj.stop()
        except Exception:
            pass
        res.seconds = time.monotonic() - t0
    return res


def reference_inputs(model, md: dict, seed: int = 0) -> dict:
    """The inputs builds are checked with: the model's .npz beside it (its first
    sample), else seeded random inputs."""
    import numpy as np
    from ..project.generate import default_sample_path, pick_inputs, random_inputs
    path = default_sample_path(model) if isinstance(model, (str, os.PathLike)) else None
    arrays = None
    if path:
        try:
            with np.load(path) as z:
                arrays = pick_inputs(md, {k: z[k] for k in z.files}, path)
        except (MtvmError, OSError, ValueError, KeyError):
            arrays = None
    if arrays is None:
        arrays = random_inputs(md, seed)
    return {t["name"]: a for t, a in zip(md["inputs"], arrays)}


__all__ = ["Device", "BuildResult", "KernelFigure", "measure", "reference_inputs",
           "COMPILE_ERROR", "BUILD_ERROR", "WRONG_OUTPUT", "RESET", "TIMEOUT",
           "SESSION_ERROR", "OVER_BUDGET"]
