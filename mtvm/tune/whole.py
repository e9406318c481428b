"""The whole-model check of a host tune: the model as `--tuning-records` compiles it
against the compiler's defaults, both plain builds (no profiling), timed in turns.

Why, after the search's own confirmation (search.Tuner._confirm_build): that one
compares profiling builds, the sum of each kernel's fastest run. A user runs the
plain build, whose kernels run back to back (no timer reads between them: what
one kernel leaves in the caches and in flight is the next one's start), and a
profiling build's gain did not always survive into it: denoise_unet's tuned build
won in the tuner's profiling builds and lost 1-3 % in the plain build, run after run
(docs/tuning.md, "Figures"). So the check measures what the user gets: both
programs running at once, their device processes on one CPU, timed by the device
timer in turns (default, tuned, tuned, default, ...: whoever runs right after the
other finds the caches holding the other's weights). Each pair of neighbouring
turns gives a ratio, tuned over default; the build is faster when the ratios say so
with 95 % confidence (a sign test: enough of the pairs below 1). Why ratios of
pairs, not the fastest turns: on this machine (a KVM guest, 2026-11-30) the speed
of the whole guest came and went by up to 1.7x within minutes, and two processes
of ONE build, timed so, differed by up to 19 % by their fastest turns and 7 % by
their median turns, but by at most 2.5 % by the median of their pairs' ratios
(bench/results/2026-11-30-session30.md).

When the tuned build is not faster, the choices with the smallest measured gains
are given back: each gets a record with status "slower_model" (phase "whole"),
which records.best never chooses, and the configuration is read again from the
records and checked again. In the first two passes half the choices go (a key may
then take its next-best candidate), in the third every layer left, whole (every
candidate the records would choose for it).

Only where two programs can run at once and time themselves: the host board. An
emulated board's instruction counts are exact and add up; a real board runs one
program at a time (its tune keeps the confirmation's check).
"""
from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field

from . import records as R

# The confidence with which the tuned build must be faster (one-sided sign test).
CONFIDENCE = 0.95
ROUNDS = 20                  # timed turns of each build
TURN_SECONDS = 0.005         # at least this long a turn (more runs for a small model)
MIN_RUNS = 20                # runs per turn at least
# A pass drops half the choices (the records may then choose other candidates, checked
# in the next pass), the third every layer that is left, whole: so a check makes three
# tuned builds at most.
HALVING_PASSES = 2


def _quiet(*_a, **_k):
    pass


def one_core_sessions(projs: dict) -> dict:
    """{name: Session} for {name: Project}, every device process on one CPU (the
    last this thread may use): on a 2-core machine the two cores see different loads
    (interrupts, other jobs), so two identical builds on two cores differed by a few
    percent, on one core by the noise only. The calling thread's affinity is
    restored; the processes keep theirs."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if allowed:
        os.sched_setaffinity(0, {max(allowed)})   # the device processes inherit it
    sessions = {}
    try:
        for name, proj in projs.items():
            sessions[name] = proj.session()
        return sessions
    except BaseException:
        for s in sessions.values():
            s.close()
        raise
    finally:
        if allowed:
            os.sched_setaffinity(0, allowed)


def runs_per_turn(sessions: dict, inputs: dict, at_least: int = MIN_RUNS) -> int:
    """Runs a turn so that it lasts TURN_SECONDS on the slowest build (a turn of a
    20 us model's 20 runs is shorter than a timer interrupt's reach), after a run of
    each with `inputs` and a warm-up."""
    per = 0.0
    for s in sessions.values():
        s.executor.run(inputs)
        per = max(per, s.executor.benchmark(number=max(1, at_least // 4), repeat=1).min)
    return max(at_least, math.ceil(TURN_SECONDS / per) if per > 0 else at_least)


def paired_turns(sessions: dict, number: int, rounds: int) -> dict:
    """{name: [seconds per inference of each turn]}: `rounds` turns of `number`
    back-to-back runs each, the first build first in even turns and last in odd
    ones."""
    times = {k: [] for k in sessions}
    for turn in range(rounds):
        items = list(sessions.items())
        for k, s in (items if turn % 2 == 0 else items[::-1]):
            times[k].append(s.executor.benchmark(number=number, repeat=1, warmup=0).median)
    return times


def sign_test_bound(ratios: list, confidence: float = CONFIDENCE) -> float:
    """An upper bound of the median of `ratios` at `confidence` (one-sided, no
    assumption on their distribution): the k-th smallest, k the least with
    P(Binomial(n, 1/2) < k) >= confidence. Below 1: in enough pairs the second
    build was the faster that chance (a median of 1) is ruled out."""
    n = len(ratios)
    if n == 0:
        return math.inf
    below, k = 0.0, 0
    while k < n and below < confidence:
        below += math.comb(n, k) / 2 ** n
        k += 1
    return sorted(ratios)[k - 1] if below >= confidence else math.inf


@dataclass
class WholeCheck:
    """What the whole-model check measured, seconds per inference of the plain builds
    (fastest and median turns) and the median of the pairs' ratios, tuned / default,
    with its upper bound (sign_test_bound); tuned None when the records choose only
    defaults (or nothing is left after the drops)."""
    default_s: float | None = None
    default_med: float | None = None
    tuned_s: float | None = None
    tuned_med: float | None = None
    ratio: float | None = None                      # median of the pairs' ratios
    ratio_bound: float | None = None                # its upper bound at CONFIDENCE
    passes: int = 0
    kept: int = 0                                   # choices in the checked tuned build
    dropped: list = field(default_factory=list)     # keys given back (slower_model)
    rounds: int = 0
    number: int = 0
    error: str = ""                                 # why it could not be made

    def take(self, turns: dict) -> None:
        """The figures of paired_turns' {"default": [...], "tuned": [...]}."""
        d, t = turns["default"], turns["tuned"]
        self.default_s, self.default_med = min(d), statistics.median(d)
        self.tuned_s, self.tuned_med = min(t), statistics.median(t)
        ratios = [b / a for a, b in zip(d, t)]
        self.ratio, self.ratio_bound = statistics.median(ratios), sign_test_bound(ratios)

    @property
    def faster(self) -> bool:
        """The pairs' ratios below 1 with CONFIDENCE."""
        return self.tuned_s is not None and self.ratio_bound is not None and \
            self.ratio_bound < 1.0

    def describe(self) -> str:
        if self.error:
            return "whole-model check not made: " + self.error
        if self.tuned_s is None:
            what = "no choice left" if self.dropped else "the records choose only defaults"
            if self.default_s is None:
                return f"whole model: {what}" + self._drops()
        head = (f"whole model, plain builds in {self.rounds} paired turns of {self.number} "
                f"runs: default {self.default_s * 1e6:,.1f} us")
        if self.tuned_s is None:
            return f"{head}, {what}" + self._drops()
        return (head + f", tuned {self.tuned_s * 1e6:,.1f} us (fastest turns); tuned/default "
                f"{self.ratio:.3f}, < {self.ratio_bound:.3f} at {CONFIDENCE:.0%}, with "
                f"{self.kept} choice(s)" + self._drops())

    def _drops(self) -> str:
        if not self.dropped:
            return ""
        return (f"; {len(self.dropped)} choice(s) given back after {self.passes} pass(es) "
                "(the tuned build was not faster)")


def to_give_back(chosen: dict, passes: int) -> list:
    """The keys of `chosen` ({key: records.Best}) to give back to their defaults after
    pass `passes` found the tuned build not faster: the half with the smallest measured
    speedups (at least one) in the first HALVING_PASSES passes (each key's chosen
    candidate: the next-best may take its place), then all (each with every candidate
    the records would choose for it)."""
    ranked = sorted(chosen, key=lambda k: (chosen[k].speedup or 0.0, k))
    return ranked[:max(1, len(ranked) // 2)] if passes <= HALVING_PASSES else ranked


def give_back(records_path: str, known: list, target: str, vetoes: dict, whole: bool,
              why: str, model_name: str = "", run_id: str = "") -> None:
    """Append a slower_model record (phase "whole") for each records.Best of `vetoes`
    ({key: Best}); whole: and for every candidate the records would choose next for
    those keys, until they choose the defaults."""
    keys = set(vetoes)
    with R.Writer(records_path) as w:
        while vetoes:
            for b in vetoes.values():
                w.write(R.make(**{f: b.record[f] for f in _KEPT if f in b.record},
                               status=R.SLOWER_MODEL, figure=None, phase="whole",
                               model=model_name, run=run_id, error=why))
            if not whole:
                break
            # the next-best are given back unmeasured: the int8 layers of
            # vww_mobilenetv1_int8 had so many candidates ahead in the profiling builds
            # that each pass found new ones, none of which made the model faster
            recs = [r for r in R.load(records_path) + known if r.get("target") == target]
            vetoes = {k: b for k, b in _chosen(recs, target).items() if k in keys}
            why = ("given back with its layer (the whole-model check found the model not "
                   "faster with this layer's choices)")


def _chosen(records, target: str) -> dict:
    """{key: Best} of the keys the records give a non-default candidate."""
    return {k: b for k, b in R.best(records, target, backend="c").items() if not b.is_default}


def check_whole_model(model, target, records_path: str, known: list, compile_options: dict,
                      workdir: str, inputs: dict, board: str = "host", model_name: str = "",
                      run_id: str = "", rounds: int = ROUNDS, log=None) -> WholeCheck:
    """Compile `model` with the records (those of records_path and `known`, as
    `--tuning-records` would) and with the defaults, time both plain builds in
    turns, and give back choices while the tuned build is not faster (records with
    status slower_model appended to records_path). Returns the WholeCheck of the
    last pass."""
    from .. import project as P
    from ..compiler import compile as mtvm_compile
    from ..errors import BuildError, MtvmError
    from ..session.errors import SessionError
    log = log or _quiet
    opts = dict(compile_options)
    name = target.name

    def build(kind: str, cm):
        out = os.path.join(workdir, "whole", kind)
        return P.generate(cm, board=board, out_dir=out, force=True, overwrite_edited=True,
                          progress=_quiet).build(progress=_quiet)

    res = WholeCheck(rounds=rounds)
    sessions: dict = {}
    projs: dict = {}
    default_cm = None
    try:
        while True:
            recs = [r for r in R.load(records_path) + known if r.get("target") == name]
            chosen = _chosen(recs, name)
            cm = mtvm_compile(model, tuning_records=recs, **opts) if chosen else None
            if cm is not None and default_cm is None:
                default_cm = mtvm_compile(model, **opts)
            if cm is None or cm.sources == default_cm.sources:
                res.tuned_s = res.tuned_med = res.ratio = res.ratio_bound = None
                res.kept = 0
                return res
            res.passes += 1
            for s in sessions.values():
                s.close()
            sessions = {}
            if "default" not in projs:
                projs["default"] = build("default", default_cm)
            projs["tuned"] = build(f"tuned{res.passes}", cm)
            sessions = one_core_sessions(projs)
            res.number = runs_per_turn(sessions, inputs)
            res.take(paired_turns(sessions, res.number, rounds))
            res.kept = len(chosen)
            log(f"whole-model check, pass {res.passes}: {res.describe()}")
            if res.faster:
                return res
            drop = to_give_back(chosen, res.passes)
            why = (f"the model compiled with this choice was not faster than the defaults "
                   f"in the whole-model check (tuned/default {res.ratio:.3f}, bound "
                   f"{res.ratio_bound:.3f})")
            give_back(records_path, known, name, {k: chosen[k] for k in drop},
                      whole=res.passes > HALVING_PASSES, why=why, model_name=model_name,
                      run_id=run_id)
            res.dropped.extend(drop)
    except (MtvmError, BuildError, SessionError, OSError) as e:
        res.error = str(e).splitlines()[0] if str(e) else type(e).__name__
        log(f"whole-model check: {res.error}")
        return res
    finally:
        for s in sessions.values():
            s.close()


# what a veto record keeps of the vetoed candidate's record: which candidate it is
_KEPT = ("key", "target", "board", "op", "layer", "schedule", "knobs", "default", "unit",
         "statistic", "ticks_per_second", "scratch_bytes", "code")
