"""The search space: which kernels of a model can be tuned, and the distinct
ways each can be computed on the target.

A *layer* is one workload key (mtvm.schedules.workload_key: op, tail, shapes,
dtypes, attributes, in-place flag, target; not the model). Kernels of a model
that share a key (the repeated blocks of a DS-CNN) are one layer: they get
the same schedule and knobs, and their figure is the mean over them.

A layer's candidates come from the schedules registered for its op that apply
to it on the target, and from their knobs' `choices`. The raw product of the
choices is large (the float Conv schedule alone has 11,664 combinations, most
of which emit the same C: a threshold knob beyond the layer's sizes changes
nothing), so candidates are told apart by the C they emit: each setting is
emitted for the layer alone (no build, a few milliseconds), specialized for
the target as the module would be, and only settings giving new code (or new
scratch) are kept. The settings are explored breadth first from the default,
changing one knob at a time from every setting that gave new code, up to
`max_emits` emissions per layer (Layer.complete says whether it got to the
end). A pair of knobs that changes the code only together, and neither
alone from any setting already found, is not seen: no shipped schedule has
such a pair today.
"""
from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from .. import schedules
from ..codegen import kernel_library
from ..codegen.c_codegen import make_kernel
from ..codegen.weight_layout import lay_out_weights
from ..errors import MtvmError
from ..schedules import ScheduleConfig, workload_key

MAX_EMITS = 400        # per layer
CODE_CHARS = 16        # of a candidate's code hash kept in its records


@dataclass(frozen=True)
class Candidate:
    """One way to compute a layer: a schedule and all of its knob values."""
    schedule: str
    knobs: tuple           # sorted (name, value) pairs: hashable
    scratch_bytes: int = 0
    # a hash of the C it emits for the layer (enumerate_layer; "" where not known): a
    # record of the same schedule and knobs but other code measured another mtvm's C
    code: str = field(default="", compare=False)

    @staticmethod
    def make(schedule: str, knobs: dict, scratch_bytes: int = 0, code: str = "") -> "Candidate":
        return Candidate(schedule, tuple(sorted(knobs.items())), int(scratch_bytes), code)

    @property
    def knob_dict(self) -> dict:
        return dict(self.knobs)

    @property
    def ident(self) -> str:
        """What identifies the candidate in the records (with the key)."""
        return candidate_ident(self.schedule, self.knob_dict)

    def config_entry(self) -> dict:
        return {"schedule": self.schedule, "knobs": self.knob_dict}

    def describe(self, default: "Candidate | None" = None) -> str:
        """The schedule and the knobs that differ from `default`."""
        if default is not None and self.ident == default.ident:
            return "default"
        same = default is not None and default.schedule == self.schedule
        if same:
            base = default.knob_dict
        else:       # knobs that differ from the schedule's own defaults
            try:
                base = schedules.get_schedule(self.schedule).default_knobs()
            except MtvmError:
                base = {}
        text = " ".join(f"{k}={v}" for k, v in self.knobs if base.get(k, object()) != v)
        return " ".join(p for p in ("" if same else self.schedule, text) if p)


def candidate_ident(schedule: str, knobs: dict) -> str:
    return json.dumps({"schedule": schedule, "knobs": knobs}, sort_keys=True,
                      separators=(",", ":"))


@dataclass
class Layer:
    """A tunable workload of a model: its key, where it occurs and its candidates
    (candidates[0] is what the compiler picks without tuning)."""
    key: str
    kind: str                       # "Conv+Relu"
    what: str                       # shapes and attributes, for people
    functions: list                 # the kernels (C functions) with this key
    nodes: list                     # their ONNX nodes
    macs: int                       # per kernel
    candidates: list = field(default_factory=list)
    raw_size: int = 0               # the product of the knobs' choices, over the schedules
    emits: int = 0                  # settings emitted to find the candidates
    complete: bool = True           # every setting reachable one knob at a time was emitted

    @property
    def default(self) -> Candidate:
        return self.candidates[0]

    @property
    def count(self) -> int:
        return len(self.functions)


def _shape(t) -> str:
    return "x".join(str(d) for d in t.shape) or "scalar"


def describe_kernel(k) -> str:
    """'f32 1x8x40x40 * 16x8x3x3 -> 1x16x40x40 strides=[2, 2]': the layer for people."""
    g, n = k.graph, k.node
    ins = [g.tensors[x] for x in n.inputs if x]
    outs = [g.tensors[x] for x in n.kernel_outputs if x]
    dt = np.dtype(ins[0].dtype).name.replace("float", "f").replace("int", "i") if ins else ""
    text = f"{dt} " + " * ".join(_shape(t) for t in ins[:2])
    text += " -> " + ", ".join(_shape(t) for t in outs)
    shown = {a: v for a, v in n.attrs.items()
             if a in ("strides", "group", "dilations", "transA", "transB")
             and v not in (None, 1, 0) and not (isinstance(v, (list, tuple))
                                                 and all(x == 1 for x in v))}
    if shown:
        text += " " + " ".join(f"{a}={list(v) if isinstance(v, (list, tuple)) else v}"
                               for a, v in sorted(shown.items()))
    return text


def _code(lk, target, schedule: schedules.Schedule, knobs: dict):
    """(hash of the C the layer gets with this schedule and knobs, scratch bytes),
    or None when the schedule does not apply with these knobs."""
    k0 = lk.kernel
    inplace = k0.inplace if k0.inplace is not None else k0.inplace_tail
    key = workload_key(k0)
    cfg = ScheduleConfig(workloads={key: {"schedule": schedule.name, "knobs": knobs}})
    g = k0.graph.copy()      # emitters may add constants (packed weights)
    k = make_kernel(g, lk.step, "tune", {lk.step: inplace} if inplace is not None else None,
                    target, cfg)
    try:
        s = schedules.choose(k)
    except MtvmError:
        return None          # does not apply with these knobs
    if s is None or s.name != schedule.name:
        return None
    n = k.node
    lay_out_weights(k, s, n.attrs)
    body = s.emit(k, **n.attrs)
    text = "\n".join(list(k.helpers.values()) + [body])
    text = kernel_library.specialize_source(text, list(k.libraries), target)
    h = hashlib.sha256()
    for part in (text, "\0".join(k.libraries), str(k.scratch_bytes)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest(), int(k.scratch_bytes)


def _raw_size(s: schedules.Schedule) -> int:
    size = 1
    for kn in s.knobs:
        size *= max(1, len(kn.choices))
    return size


def enumerate_layer(lk, target, max_emits: int = MAX_EMITS, log=None) -> Layer:
    """The Layer of lowered kernel lk (its candidates, default first)."""
    k0 = lk.kernel
    n = k0.node
    key = workload_key(k0)
    layer = Layer(key, "+".join([n.op] + [t.op for t in n.tail]), describe_kernel(k0),
                  [k0.fname], [p.name for p in [n] + n.tail], 0)
    default = Candidate.make(k0.schedule, dict(k0.knobs), k0.scratch_bytes)
    layer.candidates.append(default)
    scheds = schedules.schedules_for(n.op, n.domain)
    layer.raw_size = sum(_raw_size(s) for s in scheds)
    codes: dict[str, Candidate] = {}
    tried: set[str] = set()

    def visit(s, knobs) -> bool:
        """Emit one setting; True when it gave new code (a new candidate)."""
        ident = candidate_ident(s.name, knobs)
        if ident in tried:
            return False
        tried.add(ident)
        layer.emits += 1
        try:
            got = _code(lk, target, s, knobs)
        except Exception as e:      # a knob setting the emitter cannot handle: not a candidate
            if log:
                log(f"layer {key}: {s.name} {knobs} does not emit ({type(e).__name__}: {e})")
            return False
        if got is None:
            return False
        h, scratch = got
        if h in codes:
            return False
        if ident == default.ident:
            codes[h] = layer.candidates[0] = replace(default, code=h[:CODE_CHARS])
            return True
        c = Candidate.make(s.name, knobs, scratch, h[:CODE_CHARS])
        codes[h] = c
        layer.candidates.append(c)
        return True

    visit(next(s for s in scheds if s.name == default.schedule), default.knob_dict)
    frontier = deque([(next(s for s in scheds if s.name == default.schedule),
                       default.knob_dict)])
    for s in scheds:            # the other schedules, from their own defaults
        if s.name != default.schedule:
            visit(s, s.default_knobs())
            frontier.append((s, s.default_knobs()))
    while frontier:
        s, knobs = frontier.popleft()
        for kn in s.knobs:
            for v in kn.choices:
                if v == knobs.get(kn.name):
                    continue
                if layer.emits >= max_emits:
                    layer.complete = False
                    return layer
                new = {**knobs, kn.name: v}
                if visit(s, new):
                    frontier.append((s, new))
    return layer


def layers_of(cm, max_emits: int = MAX_EMITS, log=None) -> list[Layer]:
    """The tunable layers of a CompiledModel (kernels with a registered schedule),
    in kernel order, one per workload key; layers with one candidate included
    (they have nothing to try, but their figure is measured)."""
    by_key: dict[str, Layer] = {}
    for lk in cm.kernels:
        if not lk.kernel.schedule:
            continue
        key = workload_key(lk.kernel)
        if key in by_key:
            by_key[key].functions.append(lk.kernel.fname)
            continue
        by_key[key] = enumerate_layer(lk, cm.target, max_emits, log)
    macs = {o["function"]: o["macs"] for o in cm.metadata["operators"]}
    for layer in by_key.values():
        layer.macs = macs.get(layer.functions[0], 0)
    return list(by_key.values())


__all__ = ["Candidate", "Layer", "candidate_ident", "describe_kernel", "enumerate_layer",
           "layers_of", "MAX_EMITS"]
