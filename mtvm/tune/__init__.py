"""`mtvm tune`: measure each layer's schedules on the device, keep the records,
compile with the best (docs/tuning.md).

    res = mtvm.tune("kws.onnx", board="mps2-an386", records="kws.m4.jsonl", trials=16)
    print(res.summary())
    lib = mtvm.compile("kws.onnx", target="cortex-m4", tuning_records="kws.m4.jsonl")

Modules: space (the layers and their distinct candidates), measure (one
profiling build on one device), search (which builds, on which devices),
records (the JSON-lines file, choosing the best), whole (the host's check of
the tuned model against the defaults, plain builds timed in turns), apply
(records -> a ScheduleConfig for the compiler), jit (the LLVM backend's loop nests,
measured in this process through LLVM's JIT: `backend="llvm"`).

The package is callable: `mtvm.tune(...)` is `mtvm.tune.tune(...)`.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass, field

from ..errors import MtvmError
from . import records as R
from .apply import compile_within, config_for
from .space import MAX_EMITS, Candidate, Layer, layers_of
from .cost_model import CostModel
from .search import TuneStats, Tuner, check_strategy, using


@dataclass
class TuneResult:
    records_path: str
    board: str
    target: str
    layers: list
    stats: TuneStats
    best: dict                       # {key: records.Best}, from every record read
    hits: list = field(default_factory=list)   # keys already measured in earlier records
    default_arena: int = 0
    tuned_arena: int = 0
    budget_arena: int | None = None
    budget_dropped: list = field(default_factory=list)
    memory_budget: int | None = None
    backend: str = "c"
    jit: bool = False                # llvm on the host board: measured through the JIT
    tuned_check: str = ""            # llvm: the tuned model against the reference ("ok")
    model_figures: tuple | None = None   # llvm: (default, tuned or None: same code) ns, JIT
    whole: object = None             # whole.WholeCheck: the host's plain builds in turns

    def _fig(self, key):
        b = self.best.get(key)
        return (b.default_figure, b.record.get("figure")) if b else (None, None)

    def estimated_total(self, drop=()) -> float | None:
        """The tuned model's figure: the baseline minus what each layer's best
        saves (kernels sharing a key count once each); `drop`: keys left at the
        default."""
        base = self.stats.baseline_total
        if base is None:
            return None
        total = base
        for lay in self.layers:
            d, b = self._fig(lay.key)
            if d and b and lay.key not in drop and not self.best[lay.key].is_default:
                total -= (d - b) * lay.count
        return total

    def summary(self) -> str:
        st = self.stats
        unit = st.unit or "ticks"
        llvm = self.backend == "llvm"
        builds = f"{st.builds} JIT module(s)" if self.jit else \
            f"{st.builds} build(s) ({st.split_builds} split after a failure)"
        lines = [f"tuned on {self.board} (target {self.target}"
                 f"{', backend llvm' if llvm else ''}): {len(self.layers)} layer(s), "
                 f"{builds}, "
                 f"{st.measured} candidate(s) measured, {st.failed} failed, {st.skipped} "
                 f"already in the records, {st.seconds:.1f} s"
                 + (" [time limit reached]" if st.stopped_by_time else "")
                 + (" [interrupted]" if st.interrupted else "")]
        if not any(len(lay.candidates) > 1 for lay in self.layers):
            lines.append("  no layer has more than one candidate: nothing to tune ("
                         + ("the LLVM backend's knobs are the float Conv, Gemm and MatMul "
                            "nests'" if llvm else "on this target these layers' schedules "
                            "have one form each; ops without a registered schedule have "
                            "none") + ")")
        if self.hits:
            lines.append(f"  {len(self.hits)} layer key(s) found in earlier records "
                         f"(their measured candidates were skipped)")
        lines.append(f"  {'key':<16}  {'op':<14}  {'layer':<44}  {'cands':>9}  "
                     f"{'best':<28}  {'default':>12}  {'tuned':>12}  speedup")
        for lay in self.layers:
            b = self.best.get(lay.key)
            d, f = self._fig(lay.key)
            desc = "-" if b is None else ("default" if b.is_default else Candidate.make(
                b.record["schedule"], b.record["knobs"]).describe(lay.default))
            cands = f"{len(lay.candidates)}" + ("" if lay.complete else "+")
            sp = f"{d / f:.2f}x" if d and f else "-"
            lines.append(f"  {lay.key:<16}  {R._cut(lay.kind, 14):<14}  "
                         f"{R._cut(lay.what, 44):<44}  {cands:>9}  {R._cut(desc, 28):<28}  "
                         f"{d or 0:>12,.0f}  {f or 0:>12,.0f}  {sp}")
        base, est = st.baseline_total, self.estimated_total()
        if self.jit and self.model_figures:
            d, t = self.model_figures
            lines.append(f"  model through the JIT (fastest of paired rounds, per inference): "
                         f"default {d / 1e3:,.1f} us" + (" (the tuned build is the same code)"
                                                         if t is None else
                                                         f", tuned {t / 1e3:,.1f} us "
                                                         f"({d / t:.2f}x)"))
            lines.append(f"  tuned model against the reference: {self.tuned_check}")
        elif base:
            lines.append(f"  model (all kernels, per inference): default {base:,.0f} {unit}, "
                         f"tuned about {est:,.0f} {unit} ({base / est:.2f}x; from the "
                         "per-layer figures)")
        if self.whole is not None:
            lines.append(f"  {self.whole.describe()}")
        lines.append(f"  arena: default {self.default_arena:,} B, tuned {self.tuned_arena:,} B")
        if self.memory_budget is not None and self.default_arena > self.memory_budget:
            lines.append(f"  --memory-budget {self.memory_budget:,} B: even the default arena "
                         f"({self.default_arena:,} B) exceeds it")
        elif self.memory_budget is not None and self.budget_arena is not None:
            cost = self.estimated_total(self.budget_dropped)
            lines.append(f"  under --memory-budget {self.memory_budget:,} B: arena "
                         f"{self.budget_arena:,} B, {len(self.budget_dropped)} layer(s) kept at "
                         f"the default" + (f", about {cost:,.0f} {unit} ({est / cost:.2f}x of "
                                           f"the unbudgeted tuned figure)"
                                           if cost and est else ""))
        for e in st.errors[:10]:
            lines.append(f"  failed: {e}")
        lines.append(f"  records: {self.records_path}")
        return "\n".join(lines)


def _devices(devices, port, workdir, icount):
    from .measure import Device
    if isinstance(devices, str):
        devices = [d for d in devices.split(",") if d]
    if isinstance(devices, int) or devices is None:
        n = int(devices or 1)
        if n < 1:
            raise MtvmError("tune: devices must be >= 1")
        ports = [port] * n if port else [None] * n
        if port and n > 1:
            raise MtvmError("tune: one --port is one device; list several ports as "
                            "--devices PORT,PORT,...")
    else:
        ports = list(devices)
        if not ports:
            raise MtvmError("tune: no devices")
    return [Device(i, os.path.join(workdir, f"device{i}"), p, icount)
            for i, p in enumerate(ports)]


def tune(model, board: str = "host", records=None, trials: int = 32, devices=1,
         port: str | None = None, runs: int | None = None, time_limit: float | None = None,
         memory_budget: int | None = None, known_records=None, workdir=None,
         input_shapes: dict | None = None, bind: dict | None = None,
         max_emits: int = MAX_EMITS, seed: int = 0, timeout: float | None = None,
         icount: bool = True, target=None, progress: bool | None = None,
         log=None, backend: str = "c", search: str = "auto",
         whole_model_check: bool = True) -> TuneResult:
    """Tune `model` (an .onnx path) on `board`; appends a record per measured
    candidate to `records` (a JSON-lines file; what it already holds for this
    target is not measured again) and returns a TuneResult.

    trials: candidates measured per layer at most (the number of builds is
    about the largest per-layer count, not the sum). devices: how many
    devices measure in parallel (emulators or host processes), or a list of
    ports/URLs of boards. runs: profiled runs per build (default 2 under QEMU
    -icount, whose counts are exact, else 15). known_records: more record
    files to read (their measured candidates are skipped too: records of
    another model with the same layers). memory_budget: builds whose arena
    exceeds it are rejected, and the summary reports the best under it.
    target: what to compile for (default: the board's; the host board also
    runs e.g. "x86-64-v3" on an AVX-512 machine).
    backend: "c" (the C schedules, measured in builds on the device) or "llvm"
    (the LLVM backend's loop nests' knobs: on the host board measured in this
    process through LLVM's JIT, no C compiler needed, mtvm/tune/jit.py; on
    any other board as the C schedules are, in profiling builds of LLVM
    object code run on the device).
    search: per layer, "auto" (exhaustive when its untried candidates fit in
    `trials`, else "model"), "exhaustive", "annealing" or "model" (guided by
    a cost model learned from this run's measurements and the records it
    resumes: cost_model.py).
    whole_model_check: on the host board, after the search, the model compiled with
    the records against the defaults, plain builds timed in turns; choices are given
    back while the tuned build is not faster (whole.py).
    """
    from .. import progress as _progress
    from ..project import load_board
    from ..compiler import compile as mtvm_compile
    from ..target import Target
    from .measure import reference_inputs
    if records is None:
        raise MtvmError("tune: records (the JSON-lines file to append to) is required")
    if not isinstance(model, (str, os.PathLike)):
        raise MtvmError("tune: the model must be a path to an .onnx file")
    model = os.path.abspath(os.fspath(model))
    if not os.path.exists(model):
        raise MtvmError(f"model file {model} not found")
    if trials < 1:
        raise MtvmError("tune: trials must be >= 1")
    board_data = load_board(board)
    board_target = Target.from_board(board_data)
    target = Target.resolve(target) if target is not None else board_target
    if not target.compatible_with(board_target):
        raise MtvmError(f"target {target.name} does not run on board {board_data['name']} "
                        f"({board_target.name})")
    log = log or (lambda msg: None)
    opts = {"input_shapes": input_shapes, "bind": bind}
    if backend not in ("c", "llvm"):
        raise MtvmError(f"tune: backend {backend!r}: use c or llvm")
    check_strategy(search)
    if backend == "llvm" and memory_budget is not None:
        raise MtvmError("tune --backend llvm: --memory-budget has nothing to trade (the LLVM "
                        "nests' knobs use no scratch)")
    if backend == "llvm" and target.runs_on_host():
        _jit_options(devices, port)
        from .jit import tune_llvm
        if progress is None:
            progress = _progress.enabled()
        records = os.path.abspath(os.fspath(records))
        cost = CostModel(seed=seed)
        cost.observe_records([r for r in R.load(records, missing_ok=True)
                              + (R.load(known_records) if known_records else [])
                              if R.backend_of(r) == "llvm"
                              and r.get("target") == target.name])
        with using(search, cost):     # the LayerSearches tune_llvm makes
            return tune_llvm(model, board_data, target, records, trials, runs, time_limit,
                             known_records, opts, max_emits, seed, progress, log)
    if backend == "llvm":
        # LLVM object code profiled on the device: the layers are the loop nests' knob sets
        from .jit import llvm_layers
        opts["backend"] = "llvm"
        cm = mtvm_compile(model, profile=True, target=target, **opts)
        layers, _ = llvm_layers(cm, max_emits, log)
    else:
        cm = mtvm_compile(model, profile=True, target=target, **opts)
        layers = layers_of(cm, max_emits, log)
    opts["target"] = target
    emulated = bool(board_data.get("emulated"))
    if runs is None:
        runs = 2 if emulated and icount and not port else 15
    records_path = os.path.abspath(os.fspath(records))
    old = R.load(records_path, missing_ok=True)
    known = R.load(known_records, missing_ok=False) if known_records else []
    prior_recs = [r for r in old + known if r.get("target") == target.name
                  and R.backend_of(r) == backend]
    # records of a candidate whose C has changed since (another mtvm) are measured again
    current = {(lay.key, c.ident): c.code for lay in layers for c in lay.candidates if c.code}
    stale = {id(r) for r in R.stale(prior_recs, current)}
    if stale:
        log(f"{len(stale)} record(s) measured C that the candidates no longer emit: "
            "measured again")
        prior_recs = [r for r in prior_recs if id(r) not in stale]
    done = R.measured(prior_recs)
    prior = R.best(prior_recs, target.name, backend=backend)
    hits = [lay.key for lay in layers if any(k == lay.key for k, _ in done)]
    cost = CostModel(seed=seed)
    cost.observe_records(prior_recs)
    inputs = reference_inputs(model, cm.metadata, seed)
    own_dir = workdir is None
    workdir = os.path.abspath(workdir or tempfile.mkdtemp(prefix="mtvm-tune-"))
    devs = _devices(devices, port, workdir, icount)
    if progress is None:
        progress = _progress.enabled()
    bar = (lambda total: _progress.bar(total, f"tune {os.path.basename(model)}",
                                        unit="build", delay=0, position=0)) if progress else None
    layer_bar = (lambda total, desc, pos: _progress.bar(total, desc, unit="cand", delay=0,
                                                         position=pos)) if progress else None
    name = os.path.splitext(os.path.basename(model))[0]
    whole = None
    try:
        with R.Writer(records_path) as writer:
            tuner = Tuner(model, name, board_data, target.name, layers, devs, writer, inputs,
                          trials, done, prior, runs=runs, time_limit=time_limit,
                          memory_budget=memory_budget, compile_options=opts, timeout=timeout,
                          seed=seed, progress=bar, log=log, search=search,
                          cost_model=cost, backend=backend, layer_progress=layer_bar)
            stats = tuner.run()
        if whole_model_check and backend == "c" and not emulated \
                and all(d.port is None for d in devs):
            from .whole import check_whole_model
            whole = check_whole_model(model, target, records_path, known, opts, workdir,
                                      inputs, board_data["name"], name, tuner.run_id, log=log)
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
    all_recs = [r for r in R.load(records_path) + known if r.get("target") == target.name
                and R.backend_of(r) == backend]
    res = TuneResult(records_path, board_data["name"], target.name, layers, stats,
                     R.best(all_recs, target.name, backend=backend), hits,
                     memory_budget=memory_budget, backend=backend, whole=whole)
    if stats.baseline_total is None:     # resumed with the baseline measured before
        stats.unit = next((r.get("unit") for r in all_recs), "")
    res.default_arena = cm.metadata["workspace_bytes"]
    tuned, _ = compile_within(model, all_recs, None, **opts)
    res.tuned_arena = tuned.metadata["workspace_bytes"]
    if memory_budget is not None:
        within, dropped = compile_within(model, all_recs, memory_budget, **opts)
        res.budget_arena, res.budget_dropped = within.metadata["workspace_bytes"], dropped
    return res


def _jit_options(devices, port) -> None:
    """What `--backend llvm` on the host board (measured through the JIT) cannot do."""
    if port or (devices not in (None, 1, "1")):
        raise MtvmError("tune --backend llvm on the host board measures through LLVM's JIT "
                        "in this process: --port and --devices are for boards and emulators")


class _CallableModule(types.ModuleType):
    """`mtvm.tune(...)` calls tune() although mtvm.tune is this package."""

    def __call__(self, *args, **kwargs):
        return tune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["tune", "TuneResult", "Layer", "Candidate", "layers_of", "config_for",
           "compile_within", "records"]
