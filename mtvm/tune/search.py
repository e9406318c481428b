"""The search: which candidates to measure, in which builds, on which devices.

One profiling build measures one candidate of EVERY layer at once (the
profile gives each kernel's figure), so a model needs as many builds as its
layer with the most candidates to try, not the sum over its layers. Build 0
is the compiler's default for every layer (the baseline); build i gives each
layer the next candidate its strategy proposes, and a layer with nothing
left to try runs its best so far (a candidate already checked on the device).

Per layer, with `trials` candidates to measure at most in a run:
  exhaustive   when its untried candidates fit in the trial budget: all of
               them, in the order space.py found them (nearest the default first);
  annealing    otherwise (the default, `search="auto"`): simulated annealing over
               the candidates, the proposal being an untried candidate nearest
               (fewest differing knobs) to the current one, or with probability
               `jump` (which decays) a random untried one; a measured proposal
               becomes the current one when faster, or when slower with the
               Metropolis probability exp(-(f - f_current) / (T f_current));
  model        (`search="model"`) guided by a cost model (cost_model.CostModel,
               shared by the layers of the run and fed the records it resumes):
               the default first, then, until the model has data for the layer's
               schedules, candidates far (in differing knobs) from those
               measured; then the untried candidate with the lowest predicted
               figure minus `kappa` standard deviations of the ensemble, or with
               probability `epsilon` a random untried one.
`search="exhaustive"` tries every candidate in space.py's order whatever
the budget (still at most `trials`). All are deterministic for a given seed.

A build whose candidates fail together (compile or build error, wrong output,
device reset or timeout, arena over --memory-budget) is split in two and
each half built again, until the candidate at fault is alone: only it is
recorded as failed, and failed candidates are never chosen.

Devices work in parallel: a thread pool with one worker per device, each
building in its own directory and measuring on its own emulator or board.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import queue
import random
import statistics
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from ..errors import MtvmError
from ..schedules import ScheduleConfig
from . import records as R
from .cost_model import CostModel
from .measure import Device, measure
from .space import Candidate, Layer

MAX_LAYER_BARS = 12
# Timer-measured tunes end with the best candidates and their defaults measured
# again in turns, this many times each (Tuner._confirm_build), in at most
# CONFIRM_PASSES passes (each after dropping choices: see there).
CONFIRM_ROUNDS = 3
CONFIRM_PASSES = 2


def distance(a: Candidate, b: Candidate) -> int:
    """Knobs that differ (a different schedule counts one more)."""
    ka, kb = a.knob_dict, b.knob_dict
    d = sum(1 for k in set(ka) | set(kb) if ka.get(k) != kb.get(k))
    return d + (a.schedule != b.schedule)


STRATEGIES = ("auto", "exhaustive", "annealing", "model")

# What LayerSearch uses when its caller gives no strategy (the LLVM tuner,
# jit.tune_llvm, makes its searches itself): set by `using()` for a run.
_DEFAULTS = contextvars.ContextVar("mtvm_tune_search", default=("auto", None))


@contextlib.contextmanager
def using(search: str = "auto", model: CostModel | None = None):
    """LayerSearches made in this block without a strategy use `search` and
    share `model`."""
    check_strategy(search)
    token = _DEFAULTS.set((search, model))
    try:
        yield
    finally:
        _DEFAULTS.reset(token)


def check_strategy(search: str) -> str:
    if search not in STRATEGIES:
        raise MtvmError(f"tune: search {search!r}: use one of {', '.join(STRATEGIES)}")
    return search


class LayerSearch:
    """The search state of one layer.

    strategy: "auto" (exhaustive when the untried candidates fit in `trials`,
    else "annealing": the cost model did not beat it in bench/tune_search.py's
    replays), "exhaustive", "annealing" or "model". model: the CostModel
    the layers of a run share (one of the layer's own when not given)."""

    def __init__(self, layer: Layer, done: set, trials: int, rng: random.Random,
                 best_figure: float | None = None, best: Candidate | None = None,
                 strategy: str | None = None, model: CostModel | None = None,
                 epsilon: float = 0.1, kappa: float = 0.5, n_init: int = 2):
        if strategy is None:
            strategy, model = _DEFAULTS.get()[0], model or _DEFAULTS.get()[1]
        check_strategy(strategy)
        self.layer = layer
        self.rng = rng
        self.untried = [c for c in layer.candidates if (layer.key, c.ident) not in done]
        self.trials = trials
        if strategy == "auto":
            strategy = "exhaustive" if len(self.untried) <= trials else "annealing"
        self.strategy = strategy
        self.tried = 0                     # proposed in this run
        self.pending: set[str] = set()
        self.figures: dict[str, float] = {}
        self.failed: set[str] = set()
        self.best, self.best_figure = best or layer.default, best_figure
        self.current, self.current_figure = self.best, best_figure
        self.temperature, self.jump = 0.3, 0.4
        self.model = model if model is not None or strategy != "model" else CostModel()
        self.epsilon, self.kappa, self.n_init = epsilon, kappa, n_init
        self.schedules = {c.schedule for c in layer.candidates}
        self.explored = 0                  # proposed while the model had nothing to say

    @property
    def remaining(self) -> int:
        return min(len(self.untried), max(0, self.trials - self.tried))

    def propose(self) -> Candidate | None:
        if not self.untried or self.tried >= self.trials:
            return None
        if self.strategy == "exhaustive" or (self.strategy == "annealing"
                                             and self.current_figure is None):
            c = self.untried[0]
        elif self.strategy == "model":
            c = self._propose_model()
        elif self.rng.random() < self.jump:
            c = self.rng.choice(self.untried)
        else:
            near = min(distance(x, self.current) for x in self.untried)
            c = self.rng.choice([x for x in self.untried if distance(x, self.current) == near])
        self.jump *= 0.9
        self.untried.remove(c)
        self.pending.add(c.ident)
        self.tried += 1
        return c

    def _propose_model(self) -> Candidate:
        default = self.layer.default
        if any(x.ident == default.ident for x in self.untried):
            return next(x for x in self.untried if x.ident == default.ident)
        if self.rng.random() < self.epsilon:
            return self.rng.choice(self.untried)
        ready = self.model.relevant(self.schedules, self.layer.key) >= 8 or \
            self.explored >= self.n_init
        if not ready or not self.model.fit():
            # diverse: as far (in differing knobs) as can be from what was tried
            self.explored += 1
            seen = [x for x in self.layer.candidates if x.ident in self.figures
                    or x.ident in self.failed or x.ident in self.pending] or [default]
            far = [min(distance(x, y) for y in seen) for x in self.untried]
            top = max(far)
            return self.rng.choice([x for x, d in zip(self.untried, far) if d == top])
        mean, std = self.model.predict(self.layer, self.untried)
        score = mean - self.kappa * std
        return self.untried[int(score.argmin())]     # ties: space.py's order

    def requeue(self, c: Candidate) -> None:
        """A candidate whose build failed with others: it is built again in a split."""
        self.pending.discard(c.ident)

    def result(self, c: Candidate, figure: float | None) -> None:
        self.pending.discard(c.ident)
        if self.model is not None:
            self.model.observe(self.layer, c, figure, c.ident == self.layer.default.ident)
        if figure is None:
            self.failed.add(c.ident)
            return
        self.figures[c.ident] = figure
        if self.best_figure is None or figure < self.best_figure:
            self.best, self.best_figure = c, figure
        if self.current_figure is None or figure < self.current_figure or \
                self.rng.random() < math.exp(-(figure - self.current_figure)
                                             / (self.temperature * self.current_figure)):
            self.current, self.current_figure = c, figure
        self.temperature *= 0.9


@dataclass
class Build:
    index: int
    trying: dict                    # {key: Candidate} measured in this build (new)
    fixed: dict                     # {key: Candidate} the other layers run (best so far)
    phase: str = "search"
    defaults: bool = False          # a confirmation build of the defaults (else of the choices)

    def config(self, base=None) -> ScheduleConfig:
        cfg = ScheduleConfig.resolve(base) or ScheduleConfig()
        work = dict(cfg.workloads)
        for key, c in list(self.fixed.items()) + list(self.trying.items()):
            work[key] = c.config_entry()
        return ScheduleConfig(dict(cfg.knobs), work)


@dataclass
class TuneStats:
    builds: int = 0
    failed_builds: int = 0
    split_builds: int = 0
    measured: int = 0
    failed: int = 0
    skipped: int = 0               # candidates already in the records (resume)
    seconds: float = 0.0
    build_seconds: float = 0.0     # summed over builds (device-seconds)
    interrupted: bool = False
    stopped_by_time: bool = False
    baseline_total: float | None = None
    unit: str = ""
    errors: list = field(default_factory=list)


class Tuner:
    """Runs the search of `layers` on `devices`, appending records to `writer`."""

    def __init__(self, model, model_name: str, board: dict, target: str, layers: list,
                 devices: list[Device], writer: R.Writer, inputs: dict, trials: int,
                 done: set, prior: dict, runs: int = 10, time_limit: float | None = None,
                 memory_budget: int | None = None, compile_options=None,
                 timeout: float | None = None, seed: int = 0, progress=None, log=None,
                 base_config=None, search: str = "auto", cost_model: CostModel | None = None,
                 backend: str = "c", layer_progress=None):
        self.model, self.model_name, self.board, self.target = model, model_name, board, target
        self.backend = backend
        self.layer_progress = layer_progress     # (total, desc, position) -> bar context
        self.layers = {lay.key: lay for lay in layers}
        self.devices, self.writer, self.inputs = devices, writer, inputs
        self.runs, self.time_limit, self.memory_budget = runs, time_limit, memory_budget
        self.compile_options, self.timeout = compile_options, timeout
        self.base_config = base_config
        self.log = log or (lambda msg: None)
        self.progress = progress
        rng = random.Random(seed)
        check_strategy(search)
        # one cost model for the run: what one layer measures informs the others
        self.cost_model = cost_model if cost_model is not None else CostModel(seed=seed)
        self.search = {}
        for lay in layers:
            pb = prior.get(lay.key)
            best = pb_fig = None
            if pb is not None:      # resumed: start from the best already recorded
                rec = pb.record
                best = next((c for c in lay.candidates
                             if c.ident == R.ident(rec)), None)
                pb_fig = rec.get("figure") if best is not None else None
            self.search[lay.key] = LayerSearch(lay, done, trials, rng, pb_fig, best,
                                               strategy=search, model=self.cost_model)
        self.stats = TuneStats()
        self.stats.skipped = sum(len(lay.candidates) for lay in layers) - \
            sum(len(s.untried) for s in self.search.values())
        self.queue: list[Build] = []     # builds to make before proposing new ones
        self.n = 0
        self.confirm_turns = 0            # confirm builds made in this pass (_confirm_build)
        self.confirm_pass = 0
        self.confirm_totals = {False: [], True: []}    # whole-build figures, by .defaults
        self.confirm_figures: dict = {}               # (key, defaults) -> [figure]
        self.vetoed: set = set()                      # keys whose choice lost as a whole
        self._last_confirm = None                     # (build, res, device) for vetoes
        self.stop = threading.Event()
        # which run a record comes from (records.best relates timer figures to the
        # default measured in the same run)
        self.run_id = f"{R.now()}-{random.Random().getrandbits(32):08x}"

    # -- composing builds --------------------------------------------------------------
    def _fixed(self, exclude) -> dict:
        return {k: s.best for k, s in self.search.items()
                if k not in exclude and s.best.ident != self.layers[k].default.ident}

    def next_build(self, idle: bool = True) -> Build | None:
        """The next build to measure; idle: no build is being measured (the
        confirmation waits for the search's last results)."""
        if self.queue:
            return self.queue.pop(0)
        trying = {}
        for key, s in self.search.items():
            c = s.propose()
            if c is not None:
                trying[key] = c
        if not trying:
            return self._confirm_build() if idle else None
        b = Build(self.n, trying, self._fixed(trying))
        self.n += 1
        return b

    def _chosen(self) -> dict:
        """{key: candidate} of the layers whose best beats its default by the margin
        records.best asks of timer figures: the tuned build as it will be compiled.
        Confirming in that build matters on a host: a kernel's time depends on what
        the rest of the model leaves in the caches (denoise_unet's 16 -> 32 channel
        conv measured 1.28x faster beside one set of choices, 1.03x beside another)."""
        out = {}
        for k, s in self.search.items():
            if k in self.vetoed:
                continue
            default = self.layers[k].default
            d = s.figures.get(default.ident)
            if s.best.ident != default.ident and d is not None and s.best_figure is not None \
                    and s.best_figure < d * (1 - R.TIMER_MARGIN):
                out[k] = s.best
        return out

    def _confirm_build(self) -> Build | None:
        """After the search, where figures come from a timer (not exact
        instruction counts): the layers' chosen candidates together (_chosen), then
        their defaults, measured again in turns, CONFIRM_ROUNDS times each. A search
        build's figures are of its moment: a clock that slows while another
        build compiles beside it, a neighbour's load, make a candidate look a
        few percent better than the default it never ran beside. The records of
        the turns join each candidate's median (records.best), so a gain that
        does not hold up in turns is not chosen.

        Then the whole builds are compared (the median of their totals): kernels
        that each run faster can still make the model slower (what one leaves in
        the caches for the next). If the choices' build is not faster by the
        timer margin (records.TIMER_MARGIN, as a single choice must be), the
        weaker half of the choices (by their gain in the turns) is dropped and the
        rest confirmed again; after CONFIRM_PASSES passes every choice left is
        dropped. A dropped choice gets a record with status "slower_model", which
        records.best never chooses."""
        if self.stats.unit == "instructions" or self.stats.measured == 0:
            return None
        if self.confirm_turns >= 2 * CONFIRM_ROUNDS:
            if not self._confirm_verdict():
                return None
        winners = self._chosen()
        if not winners:
            return None
        defaults = self.confirm_turns % 2 == 1
        if defaults:
            winners = {k: self.layers[k].default for k in winners}
        self.confirm_turns += 1
        b = Build(self.n, winners, {}, "confirm", defaults=defaults)
        self.n += 1
        return b

    def _confirm_verdict(self) -> bool:
        """A pass of confirmation is over: True when another pass is to run (some
        choices were dropped and some are left)."""
        med = {d: statistics.median(v) if v else None for d, v in self.confirm_totals.items()}
        chosen = self._chosen()
        gain = {k: self._confirm_gain(k) for k in chosen}
        self.confirm_turns = 0
        self.confirm_pass += 1
        self.confirm_totals = {False: [], True: []}
        self.confirm_figures = {}
        if not chosen or med[False] is None or med[True] is None or \
                med[False] < med[True] * (1 - R.TIMER_MARGIN):
            return False
        ranked = sorted(chosen, key=lambda k: (gain[k], k))
        drop = ranked if self.confirm_pass >= CONFIRM_PASSES else ranked[:max(1, len(ranked) // 2)]
        self.log(f"confirmation: the tuned build ran {med[False] / med[True]:.3f}x the "
                 f"defaults' time as a whole; dropping {len(drop)} of {len(chosen)} choice(s)")
        build, res, device = self._last_confirm
        for k in drop:
            self.vetoed.add(k)
            self._record(k, chosen[k], build, res, device, R.SLOWER_MODEL,
                         error=f"the build with this choice ran {med[False] / med[True]:.3f}x "
                               "the defaults' time as a whole (confirmation)")
        return len(drop) < len(chosen)

    def _confirm_gain(self, key) -> float:
        """The default's median over the choice's, in this pass's turns."""
        d = self.confirm_figures.get((key, True)) or [0.0]
        c = self.confirm_figures.get((key, False)) or [float("inf")]
        return statistics.median(d) / statistics.median(c)

    def estimate(self) -> int:
        """Builds still to make (without splits)."""
        return len(self.queue) + max([s.remaining for s in self.search.values()] + [0])

    # -- results -----------------------------------------------------------------------
    def _record(self, key: str, c: Candidate, build: Build, res, device: Device, status: str,
                fig=None, error: str = "") -> None:
        lay = self.layers[key]
        rec = R.make(key=key, target=self.target, board=self.board["name"], op=lay.kind,
                     layer=lay.what, schedule=c.schedule, knobs=c.knob_dict,
                     default=c.ident == lay.default.ident, status=status,
                     figure=fig.figure if fig else None, unit=res.unit,
                     spread=round(fig.spread, 4) if fig else None, runs=res.runs,
                     statistic=res.statistic,
                     ticks_per_second=res.ticks_per_second,
                     scratch_bytes=fig.scratch_bytes if fig else c.scratch_bytes,
                     arena_bytes=res.arena_bytes, model=self.model_name,
                     build=build.index, device=device.name, phase=build.phase,
                     run=self.run_id)
        if c.code:
            rec["code"] = c.code
        if self.backend != "c":     # C records have no field (records written before it)
            rec["backend"] = self.backend
        if error:
            rec["error"] = error
        self.writer.write(rec)

    def finish(self, build: Build, res, device: Device) -> None:
        self.stats.builds += 1
        self.stats.build_seconds += res.seconds
        if res.status != R.OK:
            self.stats.failed_builds += 1
            if build.phase == "baseline":
                raise MtvmError(f"the model fails with the compiler's default schedules on "
                                f"{self.board['name']} ({res.status}): {res.error}")
            new = dict(build.trying)
            if len(new) > 1:       # split: find the candidate at fault
                self.stats.split_builds += 1
                items = sorted(new.items())
                half = len(items) // 2
                for part in (items[:half], items[half:]):
                    trying = dict(part)
                    self.queue.append(Build(self.n, trying, self._fixed(trying), "split"))
                    self.n += 1
                self.log(f"build {build.index} failed ({res.status}: {res.error}); "
                         f"splitting its {len(new)} candidates")
                return
            for key, c in new.items():
                self.stats.failed += 1
                self.stats.errors.append(f"{key} {c.describe(self.layers[key].default)}: "
                                         f"{res.status}: {res.error}")
                self._record(key, c, build, res, device, res.status, error=res.error)
                self.search[key].result(c, None)
            return
        if build.phase == "baseline" and res.total is not None:
            self.stats.baseline_total = res.total
        self.stats.unit = res.unit
        if build.phase == "confirm":
            self._last_confirm = (build, res, device)
            if res.total is not None:
                self.confirm_totals[build.defaults].append(res.total)
        for key, c in build.trying.items():
            fig = res.figures.get(key)
            if build.phase == "confirm":     # the search is over: records only
                if fig is not None and res.realized.get(key) == c.ident:
                    self._record(key, c, build, res, device, R.OK, fig)
                    self.confirm_figures.setdefault((key, build.defaults), []).append(
                        fig.figure)
                continue
            if fig is None or res.realized.get(key) != c.ident:
                # The build did not run this candidate for this key (the key
                # changed with another layer's scratch, or it was not applied).
                self.log(f"layer {key}: {c.describe(self.layers[key].default)} was not "
                         f"realized in build {build.index}; not measured")
                self.search[key].result(c, None)
                continue
            self.stats.measured += 1
            self._record(key, c, build, res, device, R.OK, fig)
            self.search[key].result(c, fig.figure)

    # -- running -----------------------------------------------------------------------
    def _run_one(self, build: Build):
        dev = self._pool.get()
        try:
            cfg = build.config(self.base_config)
            # the baseline is measured whatever its arena: it is what the budget is against
            budget = None if build.phase == "baseline" else self.memory_budget
            return measure(self.model, self.board, cfg, dev, self.inputs, self.runs,
                           budget, self.compile_options, self.timeout), dev
        finally:
            self._pool.put(dev)

    def run(self) -> TuneStats:
        t0 = time.monotonic()
        devices = list(self.devices)
        self._pool = queue.Queue()
        for d in devices:
            self._pool.put(d)
        # build 0: every layer at its default (the baseline every speedup is against),
        # recorded for every layer, its default measured before or not: a timer's
        # figures are of their run (a loaded machine slows all of them), and
        # records.best compares a candidate with the default of the run it came from
        base = {k: s.layer.default for k, s in self.search.items()}
        for k in base:
            s = self.search[k]
            if s.untried and s.untried[0].ident == s.layer.default.ident:
                s.untried.remove(s.layer.default)
                s.tried += 1
            s.pending.add(s.layer.default.ident)
        self.queue.append(Build(self.n, base, {}, "baseline"))
        self.n += 1
        total = self.estimate()
        bar_ctx = self.progress(total) if self.progress else None
        bar = bar_ctx.__enter__() if bar_ctx else None
        layer_bars = contextlib.ExitStack()
        self._layer_bars = {}
        if bar is not None and self.layer_progress is not None:
            # under the builds' bar, one per layer with candidates to try (at most
            # MAX_LAYER_BARS: the terminal's lines), its best speedup so far beside it
            todo = [s for s in self.search.values() if s.remaining]
            for i, s in enumerate(todo[:MAX_LAYER_BARS]):
                lay = s.layer
                self._layer_bars[lay.key] = layer_bars.enter_context(self.layer_progress(
                    s.tried + s.remaining, f"  {lay.key[:8]} {R._cut(lay.kind, 12)}", i + 1))
        executor = ThreadPoolExecutor(max_workers=len(devices), thread_name_prefix="mtvm-tune")
        pending = {}
        try:
            # the baseline alone first when a layer's search needs its figures
            first = any(s.strategy in ("annealing", "model") for s in self.search.values())
            while True:
                out_of_time = self.time_limit is not None and self.stats.builds > 0 and \
                    time.monotonic() - t0 > self.time_limit     # the baseline always runs
                if out_of_time and not self.stats.stopped_by_time:
                    self.stats.stopped_by_time = True
                    self.log(f"time limit of {self.time_limit:.0f} s reached")
                while len(pending) < len(devices) and not out_of_time and \
                        not (first and pending):
                    b = self.next_build(idle=not pending)
                    if b is None:
                        break
                    pending[executor.submit(self._run_one, b)] = b
                if not pending:
                    break
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    b = pending.pop(f)
                    res, dev = f.result()
                    self.finish(b, res, dev)
                    first = False
                    if bar is not None:
                        if b.phase != "split":
                            self._update_layer_bars(b)
                        bar.total = self.stats.builds + len(pending) + self.estimate()
                        bar.update(1)
                        bar.set_postfix_str(self.postfix())
        except KeyboardInterrupt:
            self.stats.interrupted = True
            for f in pending:
                f.cancel()
            for d in devices:      # a session in flight sees its device go away
                d.stop()
            raise
        finally:
            executor.shutdown(wait=not self.stats.interrupted, cancel_futures=True)
            layer_bars.close()
            if bar_ctx is not None:
                bar_ctx.__exit__(None, None, None)
            self.stats.seconds = time.monotonic() - t0
        return self.stats

    def _update_layer_bars(self, build: Build) -> None:
        for key in build.trying:
            b = self._layer_bars.get(key)
            if b is None:
                continue
            s = self.search[key]
            b.update(1)
            d = s.figures.get(s.layer.default.ident)
            if d and s.best_figure:
                b.set_postfix_str(f"best {d / s.best_figure:.2f}x")

    def postfix(self) -> str:
        better = [s for s in self.search.values() if s.best.ident != s.layer.default.ident]
        return f"{len(better)}/{len(self.search)} layers improved"


__all__ = ["Tuner", "LayerSearch", "Build", "TuneStats", "distance", "using", "STRATEGIES"]
