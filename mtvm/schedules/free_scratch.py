"""Knobs that trade RAM for speed, taken where the RAM is there anyway.

A kernel's scratch lives only while it runs, so the arena -- the most bytes live at
any one step -- grows with it only where its step is at (or near) the peak. The
schedules' defaults are chosen kernel by kernel, without the plan, and so keep such
knobs off above a size (the Arm DSP int8 conv's widened weights above 4 KiB); here,
after planning, each kernel whose schedule names faster knob values for more scratch
(Schedule.faster_with_scratch) takes them when the bytes live at its step plus the
extra scratch stay within the planned arena -- for every kernel of the same layer
key, which share one setting -- and the graph is planned again; kept only if the new
arena is not larger. Knobs the user's schedule config (or tuning records) set are
left alone."""
from __future__ import annotations

from ..memory.planner import aligned


def _user_set(config, key: str, schedule: str, knobs) -> bool:
    if config is None:
        return False
    if set(config.knobs.get(schedule, {})) & set(knobs):
        return True
    w = config.workloads.get(key)
    return bool(w and set(w.get("knobs", {})) & set(knobs))


def free_scratch_config(s, mod: str, target, config):
    """The schedule config (a ScheduleConfig, or None for none) adding the faster knob
    values whose scratch fits under planned order s's arena, or None when no kernel
    has any."""
    from ..codegen.c_codegen import make_kernel
    from . import ScheduleConfig, choose, workload_key
    plan = s.plan
    if plan is None or plan.pools or not plan.live_bytes:
        return None
    g = s.graph
    layers: dict[str, list] = {}
    for step, n in enumerate(g.nodes):
        if not n.has_kernel or step >= len(plan.live_bytes):
            continue
        k = make_kernel(g, step, mod, s.inplace, target, config)
        if all(b is None or b.size == 0 for b in k.outs):
            continue
        sched = choose(k)
        if sched is None:
            continue
        more = sched.faster_with_scratch(k, **n.attrs)
        if not more:
            continue
        key = workload_key(k)
        if _user_set(config, key, sched.name, more):
            continue
        old = sched.scratch_bytes(k, **n.attrs)
        knobs = {**k.knobs, **more}
        k.knobs = knobs
        new = sched.scratch_bytes(k, **n.attrs)
        if new <= old:   # the knobs do not apply to this kernel: nothing to trade
            continue
        fits = plan.live_bytes[step] + aligned(new) - aligned(old) <= plan.arena_bytes
        entry = layers.setdefault(key, [sched.name, knobs, True])
        entry[2] = entry[2] and fits
    taken = {key: {"schedule": name, "knobs": knobs}
             for key, (name, knobs, fits) in layers.items() if fits}
    if not taken:
        return None
    base = config or ScheduleConfig()
    return ScheduleConfig(dict(base.knobs), {**base.workloads, **taken})
