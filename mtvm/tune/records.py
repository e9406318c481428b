"""Tuning records: JSON lines, one per measured candidate.

    {"key": "cd66247f2725401f", "target": "cortex-m4", "board": "mps2-an386",
     "op": "Conv+Relu", "layer": "f32 1x8x40x40 * 16x8x3x3 -> 1x16x40x40",
     "schedule": "conv2d_f32", "knobs": {"kxk": "im2col", ...}, "default": false,
     "status": "ok", "figure": 3412520, "unit": "instructions", "spread": 0.0,
     "runs": 2, "ticks_per_second": 25000000, "scratch_bytes": 9216,
     "arena_bytes": 41216, "model": "two_convs", "build": 3, "device": "0",
     "code": "3f9a07c2d15e8b40", "mtvm_version": "0.1.0", "date": "2026-11-26T12:00:00Z"}

code is a hash of the C the candidate emitted for the layer (C backend): a later
mtvm may emit other C for the same schedule and knobs, and then the record's figure
is not the candidate's any more. A resumed run measures such candidates again
(stale); choosing takes each candidate's records of its newest code only.

status is "ok" or what went wrong in the build the candidate was measured in
(compile_error, build_error, wrong_output, reset, timeout, session_error,
over_budget); only "ok" records have a figure and only they are ever chosen.
figure is per kernel call: device instructions (QEMU -icount: exact; the
median of `runs` profiled runs), else device timer ticks (`ticks_per_second`
of them per second; the fastest of `runs` runs, as `statistic` says: on a
loaded machine preemption only adds time); spread = (max - min) / median.
run names the tuning run that measured it: every run measures each layer's
default (its baseline build), and timer figures are compared relative to the
default of their own run (_run_scales).

Files are appended to (one flushed line per record, so an interrupted run keeps
what it measured) and merge with `cat a.jsonl b.jsonl > c.jsonl`.
"""
from __future__ import annotations

import datetime
import json
import os
import statistics
import threading

from ..errors import MtvmError
from .space import candidate_ident

OK = "ok"
# A candidate the confirmation found slower as part of the tuned build than the
# defaults as a whole (mtvm/tune/search.py, Tuner._confirm_build): never chosen,
# whatever its own figures say.
SLOWER_MODEL = "slower_model"
# A non-default candidate measured with a device timer must beat the default by
# this much to be chosen (host timers on a loaded machine jitter by a few %);
# instruction counts are exact, up to one timer tick (_resolution).
TIMER_MARGIN = 0.03


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def make(**fields) -> dict:
    from .. import __version__
    rec = dict(fields)
    rec.setdefault("mtvm_version", __version__)
    rec.setdefault("date", now())
    return rec


def ident(rec: dict) -> str:
    return candidate_ident(rec.get("schedule", ""), rec.get("knobs", {}))


def backend_of(rec: dict) -> str:
    """The backend a record was measured with: "llvm" (`mtvm tune --backend llvm`:
    the LLVM nests' knobs) or "c" (records without the field: the C backend's)."""
    return rec.get("backend") or "c"


def load(path, missing_ok: bool = False) -> list[dict]:
    """The records of a file (or of several: a list of paths). A line that is not
    a JSON object (the torn last line of an interrupted run) is skipped."""
    if isinstance(path, (list, tuple)):
        return [r for p in path for r in load(p, missing_ok)]
    path = os.fspath(path)
    if not os.path.exists(path):
        if missing_ok:
            return []
        raise MtvmError(f"tuning records {path} not found")
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("key"), str):
                out.append(rec)
    return out


def resolve(records) -> list[dict]:
    """A path, a list of paths, or records already loaded -> records."""
    if records is None:
        return []
    if isinstance(records, (str, os.PathLike)):
        return load(records)
    records = list(records)
    if records and not isinstance(records[0], dict):
        return load(records)
    return records


class Writer:
    """Appends records to a file, one flushed line each (thread-safe)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        d = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(d, exist_ok=True)
        self._f = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self.count = 0

    def write(self, rec: dict) -> None:
        line = json.dumps(rec, sort_keys=True, separators=(", ", ": ")) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()
            self.count += 1

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def measured(records, target: str | None = None) -> set[tuple[str, str]]:
    """(key, candidate ident) of every candidate with a record (ok or failed):
    what a resumed run skips. Candidates rejected by a memory budget are not
    in it: another run may have another budget."""
    return {(r["key"], ident(r)) for r in records
            if (target is None or r.get("target") == target)
            and r.get("status") != "over_budget"}


# -- choosing ---------------------------------------------------------------------------
class Best:
    """The choice for one key: the chosen record, the default's figure (when the
    default was measured in the same group), and what was measured."""

    def __init__(self, key, rec, default_figure, measured, failed, group):
        self.key, self.record, self.default_figure = key, rec, default_figure
        self.measured, self.failed, self.group = measured, failed, group

    @property
    def is_default(self) -> bool:
        return bool(self.record.get("default"))

    @property
    def speedup(self) -> float | None:
        f = self.record.get("figure")
        return self.default_figure / f if f and self.default_figure else None


def _group_of(rec) -> tuple:
    """Figures are compared within one board, unit and statistic."""
    return (rec.get("board", ""), rec.get("unit", ""), rec.get("statistic", "median"))


def _figure(recs, scale: dict) -> float:
    """One candidate's figure from its records: the median, each record's figure
    scaled to its run (_run_scales)."""
    return statistics.median(r["figure"] * scale.get(r.get("run"), 1.0) for r in recs)


def _run_scales(default_recs: list) -> dict:
    """{run: factor} that brings a timer's figures of each run to the same footing:
    the default's median over all runs / its median in that run. A run on a loaded
    machine (a test suite beside it) measured everything up to 2x slower, and its
    candidates, compared with a default measured in a quiet run, looked faster than
    they are (bench/results/2026-11-29-session27.md); each run measures the default
    of every layer (its baseline build), so each figure is taken relative to the
    default it was measured beside. Records without a run (written before the field)
    keep their figures."""
    runs: dict = {}
    for r in default_recs:
        if r.get("run"):
            runs.setdefault(r["run"], []).append(r["figure"])
    if len(runs) < 2:
        return {}
    overall = statistics.median(r["figure"] for r in default_recs)
    medians = {run: statistics.median(figs) for run, figs in runs.items()}
    return {run: overall / m for run, m in medians.items() if m > 0}


def _newest_code(recs) -> list:
    """The records of one candidate that measured its newest code (the newest
    record's `code`): the figures of the C an older mtvm emitted for the same schedule
    and knobs are history. Records without the field (written before it) all count."""
    code = max(recs, key=lambda r: r.get("date", "")).get("code")
    return [r for r in recs if r.get("code") == code] if code else recs


def stale(records, current: dict) -> list:
    """The records whose candidate emits other code today: current maps (key,
    candidate ident) to the code hash of the candidate now (Candidate.code); records
    without a code, or of candidates not in `current`, are not stale."""
    out = []
    for r in records:
        now_code = current.get((r.get("key"), ident(r)))
        if r.get("code") and now_code and r["code"] != now_code:
            out.append(r)
    return out


def _resolution(rec: dict, margin: float | None) -> float:
    """What an instruction count must beat the default's by (when no margin is
    given): one timer tick's instructions, the resolution of a device profile's
    figures (40 at the emulated boards' 25 MHz), so that two builds of the same
    code, whose per-kernel counts can land a tick apart, never pass for a gain."""
    tps = rec.get("ticks_per_second")
    if margin is not None or rec.get("unit") != "instructions" or not tps:
        return 0.0
    return 1e9 / tps


def best(records, target: str | None = None, margin: float | None = None,
         backend: str | None = None) -> dict[str, Best]:
    """{key: Best} over the ok records (of `target`, when given). Figures of
    different boards, units or statistics are not compared: per key, the
    (board, unit, statistic) group with the most ok records is used. In it,
    each candidate's figure is the median of its records (timer figures each scaled
    to its run: _run_scales), and a candidate other than the default is
    chosen only when it beats the default's figure by `margin` (default: one timer
    tick's instructions for instruction counts, TIMER_MARGIN for timer ticks).
    backend: only the records of that backend ("c" or "llvm")."""
    by_key: dict[str, list] = {}
    for r in resolve(records):
        if target is not None and r.get("target") != target:
            continue
        if backend is not None and backend_of(r) != backend:
            continue
        by_key.setdefault(r["key"], []).append(r)
    out = {}
    for key, recs in by_key.items():
        ok = [r for r in recs if r.get("status") == OK and isinstance(r.get("figure"),
                                                                        (int, float))]
        failed = len({ident(r) for r in recs if r.get("status") != OK})
        if not ok:
            continue
        groups: dict[tuple, list] = {}
        for r in ok:
            groups.setdefault(_group_of(r), []).append(r)
        group = max(groups, key=lambda g: (len(groups[g]), max(r.get("date", "")
                                                                 for r in groups[g])))
        cands: dict[str, list] = {}
        for r in groups[group]:
            cands.setdefault(ident(r), []).append(r)
        vetoed = {ident(r) for r in recs if r.get("status") == SLOWER_MODEL}
        cands = {i: _newest_code(rs) for i, rs in cands.items()
                 if i not in vetoed or any(r.get("default") for r in rs)}
        defaults = [i for i, rs in cands.items() if any(r.get("default") for r in rs)]
        scale = _run_scales(cands[defaults[0]]) if defaults and group[1] != "instructions" \
            else {}
        figures = {i: _figure(rs, scale) for i, rs in cands.items()}
        default_fig = figures[defaults[0]] if defaults else None
        m = margin if margin is not None else (0.0 if group[1] == "instructions"
                                               else TIMER_MARGIN)
        pick = min(figures, key=lambda i: (figures[i], i not in defaults))
        if default_fig is not None and pick not in defaults and \
                figures[pick] >= default_fig * (1 - m) - _resolution(cands[pick][-1], margin):
            pick = defaults[0]
        rec = dict(cands[pick][-1], figure=figures[pick])
        out[key] = Best(key, rec, default_fig, len(cands), failed, group)
    return out


def schedule_config(records, target: str, base=None, log=None, backend: str = "c"):
    """A ScheduleConfig choosing, for every key of `target` in the records, the
    best measured schedule and knobs (keys not in the records, and keys whose
    best is the default, keep the compiler's choice). base: a schedule config
    to start from; its own per-workload entries win over the records.
    Knobs a schedule no longer has are dropped; a schedule that no longer
    exists leaves its key at the default. backend: whose records ("c": the C
    schedules; "llvm": the LLVM backend's loop nests' knobs)."""
    from ..schedules import ScheduleConfig, get_schedule
    cfg = ScheduleConfig.resolve(base) or ScheduleConfig()
    cfg = ScheduleConfig(dict(cfg.knobs), dict(cfg.workloads))
    if backend == "llvm":
        from ..codegen.llvm.loopnests import NEST_KNOBS
        nests = {n.name: n for n in NEST_KNOBS.values()}
    for key, b in best(records, target, backend=backend).items():
        if b.is_default or key in cfg.workloads:
            continue
        name = b.record.get("schedule")
        try:
            if backend == "llvm":
                if name not in nests:
                    raise MtvmError(name)
                s = nests[name]
            else:
                s = get_schedule(name)
        except MtvmError:
            if log:
                log(f"tuning records: schedule {name} (key {key}) is unknown; default kept")
            continue
        have = s.default_knobs()
        knobs = {k: v for k, v in b.record.get("knobs", {}).items() if k in have}
        cfg.workloads[key] = {"schedule": name, "knobs": knobs}
    return cfg


def show(records, target: str | None = None) -> str:
    """The best candidate per key, as `mtvm tune --show` prints it."""
    recs = resolve(records)
    bests = best(recs, target)
    if not recs:
        return "no records"
    lines = []
    targets = sorted({(r.get("target", "?"), backend_of(r)) for r in recs
                      if target is None or r.get("target") == target})
    for t, bk in targets:
        mine = [r for r in recs if r.get("target") == t and backend_of(r) == bk]
        rows = [b for b in bests.values() if b.record.get("target") == t
                and backend_of(b.record) == bk]
        keys = {r["key"] for r in mine}
        no_ok = sorted(keys - {b.key for b in rows})
        lines.append(f"target {t}{' (backend llvm)' if bk == 'llvm' else ''}: "
                     f"{len(keys)} key(s), {len(mine)} record(s)")
        head = (f"  {'key':<16}  {'op':<14}  {'layer':<40}  {'best':<30}  {'figure':>12}  "
                f"{'default':>12}  {'speedup':>7}  tried  failed")
        lines.append(head)
        for b in sorted(rows, key=lambda b: (b.record.get("op", ""), b.key)):
            r = b.record
            unit = "instr" if r.get("unit") == "instructions" else "ticks"
            desc = "default" if b.is_default else _describe(r, recs)
            sp = f"{b.speedup:.2f}x" if b.speedup else "-"
            df = f"{b.default_figure:,.0f}" if b.default_figure else "-"
            lines.append(f"  {b.key:<16}  {_cut(r.get('op', ''), 14):<14}  "
                         f"{_cut(r.get('layer', ''), 40):<40}  {_cut(desc, 30):<30}  "
                         f"{r['figure']:>12,.0f}  {df:>12}  {sp:>7}  {b.measured:>5}  "
                         f"{b.failed:>6}")
        units = sorted({b.group for b in rows})
        lines.append("  figures: " + "; ".join(f"{u or 'ticks'} on {bd} ({st} of the runs)"
                                               for bd, u, st in units) + ", per kernel call")
        for key in no_ok:
            lines.append(f"  {key}: no candidate measured ok (failed records only)")
    return "\n".join(lines)


def _describe(rec: dict, recs: list) -> str:
    from .space import Candidate
    dflt = next((r for r in recs if r["key"] == rec["key"] and r.get("default")
                 and r.get("target") == rec.get("target")), None)
    c = Candidate.make(rec.get("schedule", ""), rec.get("knobs", {}))
    d = Candidate.make(dflt["schedule"], dflt.get("knobs", {})) if dflt else None
    return c.describe(d)


def _cut(text: str, n: int) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in str(text))
    return text if len(text) <= n else text[:n - 1] + "~"


__all__ = ["OK", "TIMER_MARGIN", "make", "load", "resolve", "Writer", "measured", "best",
           "Best", "schedule_config", "show", "ident", "backend_of"]
