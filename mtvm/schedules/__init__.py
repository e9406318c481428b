"""Schedules: the ways to compute an operator on a target.

An op file (mtvm/ops/...) says what an operator means: shape rule, NumPy
reference, canonicalization. How to compute it is a *schedule*, registered
here from the per-target modules:

    mtvm/schedules/generic/   portable C, any target
    mtvm/schedules/x86/       x86-64 SIMD (AVX2, AVX-512, VNNI)
    mtvm/schedules/arm_dsp/   Armv7E-M/v8-M DSP extension (SMLAD, SXTB16, ...)
    mtvm/schedules/arm_mve/   Armv8.1-M Helium (MVE) vectors
    mtvm/schedules/riscv/     RV32 cores without SIMD (register blocking, assembly)

Each schedule declares which op it computes, when it applies (target and
shapes), its knobs with their defaults, a pure scratch size, the layout it
reads its constant weights in (weight_layout: the model's plain weights
re-laid out at compile time for this target, before emission), and emits
the kernel's C. Lowering a kernel asks `choose(k)` for the applicable schedule
of highest priority; its knob values come from the defaults overridden by a
ScheduleConfig (per schedule name, or per kernel by workload key), so a tuner
can set them layer by layer.

An op whose file registers no schedule is emitted by its own `emit()` (the
portable C of simple ops: elementwise, layout, indexing...).

Adding a schedule for an existing op: write a Schedule subclass in the
module of its target family, decorate it with @register, and test it; the
op file and the compiler do not change (docs/architecture.md).
"""
from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MtvmError

FAMILIES = ("generic", "x86", "arm_dsp", "arm_mve", "riscv")


@dataclass(frozen=True)
class Knob:
    """One tunable choice of a schedule."""
    name: str
    default: Any
    choices: tuple = ()         # the values a tuner may try (empty: default only)
    doc: str = ""


class Schedule:
    """Base class: subclass, set the class attributes, override applies/emit
    (and scratch_bytes when the kernel needs arena scratch)."""
    op: str = ""                # op type as in the IR (e.g. "Conv", "QConv")
    domain: str = ""            # "" for ONNX ops, "mtvm" for the integer kernels
    name: str = ""              # unique, "<op family>.<variant>", e.g. "conv2d_f32.pointwise"
    family: str = "generic"     # which directory it lives in (FAMILIES)
    priority: int = 0           # higher is tried first among those that apply
    knobs: tuple[Knob, ...] = ()

    def applies(self, k, /, **attrs) -> bool:
        """Whether this schedule can compute kernel k (its shapes, dtypes,
        constants, k.target) with these attributes."""
        return True

    def emit(self, k, /, **attrs) -> str:
        """The kernel body (C statements); k.knobs holds the knob values."""
        raise NotImplementedError(self.name)

    def scratch_bytes(self, k, /, **attrs) -> int:
        """Arena scratch the body needs: a pure function of k's shapes, target,
        in-place decision and k.knobs (memory planning calls it, never emit)."""
        return 0

    def weight_layout(self, k, /, **attrs) -> dict[int, np.ndarray]:
        """{input index: the constant re-laid out} for the constant inputs this
        schedule reads in another order than the op's plain one (e.g. output
        channels interleaved in the order a micro-kernel loads them): a pure
        function of k's constants, shapes, target and k.knobs, applied before
        emission (mtvm.codegen.weight_layout), so the IR keeps the op's plain
        meaning and every backend and reference reads plain weights."""
        return {}

    def default_knobs(self, k=None) -> dict:
        """The knob values without tuning; k: the kernel, where a default depends
        on its target (None: the target-independent values)."""
        return {kn.name: kn.default for kn in self.knobs}

    def faster_with_scratch(self, k, /, **attrs) -> dict:
        """Knob values (beyond k.knobs) that make kernel k faster for more scratch, which
        its default leaves off to spare RAM; the compiler takes them where they do take
        more scratch and the planned arena does not grow (mtvm.schedules.free_scratch).
        {}: none."""
        return {}

    def __repr__(self) -> str:
        return f"<schedule {self.name} ({self.family}) for {self.domain or 'onnx'}.{self.op}>"


_REGISTRY: dict[tuple[str, str], list[Schedule]] = {}
_BY_NAME: dict[str, Schedule] = {}
_loaded = False


def register(cls):
    """Class decorator: register one instance of a Schedule subclass."""
    s = cls()
    if not s.name or not s.op:
        raise TypeError(f"{cls.__name__}: a schedule needs a name and an op")
    if s.family not in FAMILIES:
        raise TypeError(f"{s.name}: family {s.family!r} is not one of {FAMILIES}")
    if s.name in _BY_NAME and type(_BY_NAME[s.name]) is not cls:
        raise TypeError(f"schedule name {s.name} registered twice")
    _BY_NAME[s.name] = s
    lst = _REGISTRY.setdefault((s.domain, s.op), [])
    lst[:] = [x for x in lst if x.name != s.name] + [s]
    lst.sort(key=lambda x: -x.priority)
    return cls


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for fam in FAMILIES:
            importlib.import_module(f"{__name__}.{fam}")


def schedules_for(op: str, domain: str = "") -> list[Schedule]:
    """The registered schedules of an op, highest priority first."""
    _load()
    return list(_REGISTRY.get((domain, op), []))


def all_schedules() -> list[Schedule]:
    _load()
    return sorted(_BY_NAME.values(), key=lambda s: s.name)


def get_schedule(name: str) -> Schedule:
    _load()
    if name not in _BY_NAME:
        raise MtvmError(f"unknown schedule {name!r}; known: {', '.join(sorted(_BY_NAME))}")
    return _BY_NAME[name]


# -- per-kernel configuration ------------------------------------------------------------

def _jsonable(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(a): _jsonable(b) for a, b in sorted(v.items())}
    if isinstance(v, (bytes,)):
        return v.decode("latin-1")
    return v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)


def workload(k) -> dict:
    """What identifies a kernel's computation, independent of the model: op,
    tail, inputs (shape, dtype, constant or not), outputs, attributes, target."""
    g = k.graph

    def tensor(name):
        if not name:
            return None
        t = g.tensors[name]
        return [list(t.shape), np.dtype(t.dtype).name, t.data is not None]

    n = k.node
    return {"op": n.op, "domain": n.domain, "tail": [t.op for t in n.tail],
            "inputs": [tensor(x) for x in n.inputs],
            "outputs": [tensor(x) for x in n.kernel_outputs],
            "attrs": _jsonable(dict(n.attrs)), "inplace": k.inplace is not None
            or k.inplace_tail is not None, "target": k.target.name}


def workload_key(k, backend: str = "c") -> str:
    """A short stable key of workload(k): records from one model apply to any
    model with the same layer on the same target. Another backend's key of the
    same kernel names the backend too, so records of one never apply to the other."""
    w = workload(k) if backend == "c" else {**workload(k), "backend": backend}
    text = json.dumps(w, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class ScheduleConfig:
    """Knob values (and schedule choices) that override the defaults.

    knobs:     {schedule name: {knob: value}} for every kernel of that schedule
    workloads: {workload key: {"schedule": name (optional), "knobs": {...}}}
               for one layer shape (what `mtvm tune` records)
    """
    knobs: dict = field(default_factory=dict)
    workloads: dict = field(default_factory=dict)

    @staticmethod
    def resolve(value) -> "ScheduleConfig | None":
        if value is None or isinstance(value, ScheduleConfig):
            return value
        if isinstance(value, dict):
            if set(value) <= {"knobs", "workloads"}:
                return ScheduleConfig(dict(value.get("knobs", {})),
                                      dict(value.get("workloads", {})))
            return ScheduleConfig(knobs=dict(value))   # {schedule name: {knob: value}}
        raise MtvmError(f"schedule_config: expected a ScheduleConfig or a dict, "
                        f"got {type(value).__name__}")

    def for_kernel(self, k, schedule: Schedule, key: str | None = None) -> dict:
        """The knobs of kernel k under `schedule` (anything with a name and
        default_knobs()): its defaults, overridden per schedule name, then per
        workload key (key: another backend's key of k; default the C backend's)."""
        values = schedule.default_knobs(k)
        values.update(self.knobs.get(schedule.name, {}))
        w = self.workloads.get(workload_key(k) if key is None else key)
        if w and w.get("schedule", schedule.name) == schedule.name:
            values.update(w.get("knobs", {}))
        unknown = set(values) - set(schedule.default_knobs())
        if unknown:
            raise MtvmError(f"schedule {schedule.name} has no knob(s) "
                            f"{', '.join(sorted(unknown))}; its knobs: "
                            f"{', '.join(schedule.default_knobs()) or 'none'}")
        return values

    def forced(self, k) -> str | None:
        w = self.workloads.get(workload_key(k))
        return w.get("schedule") if w else None


def choose(k, attrs: dict | None = None) -> Schedule | None:
    """The schedule that computes kernel k, with k.schedule and k.knobs set;
    None when its op registers none (the op's own emit() computes it)."""
    attrs = k.node.attrs if attrs is None else attrs
    cands = schedules_for(k.node.op, k.node.domain)
    if not cands:
        return None
    cfg = ScheduleConfig.resolve(k.config) or ScheduleConfig()
    forced = cfg.forced(k)
    for s in cands:
        if forced is not None and s.name != forced:
            continue
        k.knobs = cfg.for_kernel(k, s)
        if s.applies(k, **attrs):
            k.schedule = s.name
            return s
    if forced is not None:
        raise MtvmError(f"schedule {forced} (from the schedule config) does not apply to "
                        f"node {k.node.name} ({k.node.op}) on target {k.target.name}")
    k.knobs = {}
    return None


__all__ = ["Knob", "Schedule", "ScheduleConfig", "register", "choose", "schedules_for",
           "all_schedules", "get_schedule", "workload", "workload_key", "FAMILIES"]
