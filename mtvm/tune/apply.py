"""Compiling with tuning records: the best measured schedule and knobs per
workload key of the target, as a ScheduleConfig (what `mtvm compile
--tuning-records FILE` and `mtvm.compile(..., tuning_records=FILE)` use).

A key the records do not have, or whose best is the compiler's default,
keeps the default. With a memory budget, compile_within() gives back the
most scratch-hungry choices one by one until the arena fits.
"""
from __future__ import annotations

import logging

from . import records as R


def config_for(records, target, base=None, log=None, backend: str = "c"):
    """The ScheduleConfig of the best records of `target` (a Target or its name)
    measured with `backend`. Records of other targets or of the other backend
    only are worth a warning: nothing applies."""
    name = target if isinstance(target, str) else target.name
    recs = R.resolve(records)
    if recs and not any(r.get("target") == name for r in recs):
        others = sorted({str(r.get("target")) for r in recs})
        logging.getLogger(__name__).warning(
            f"the tuning records hold no record for target {name} (only for "
            f"{', '.join(others)}): compiling with the default schedules")
    elif recs and not any(r.get("target") == name and R.backend_of(r) == backend
                          for r in recs):
        other = "llvm" if backend == "c" else "c"
        logging.getLogger(__name__).warning(
            f"the tuning records of target {name} were measured with --backend {other}, "
            f"not {backend}: compiling with the default schedules")
    return R.schedule_config(recs, name, base=base, log=log, backend=backend)


def compile_within(model, records, memory_budget: int | None = None, **compile_kwargs):
    """mtvm.compile with the records' best choices; when the arena exceeds
    memory_budget, the choice that adds the most scratch over the default is
    dropped (its layer back to the default) and the model compiled again, until
    it fits or no choice is left. Returns (CompiledModel, [keys given back])."""
    from ..compiler import compile as mtvm_compile
    from ..schedules import ScheduleConfig
    from ..target import Target
    target = Target.resolve(compile_kwargs.pop("target", None))
    base = compile_kwargs.pop("schedule_config", None)
    cfg = config_for(records, target, base, backend=compile_kwargs.get("backend", "c"))
    cm = mtvm_compile(model, target=target, schedule_config=cfg, **compile_kwargs)
    dropped = []
    base_cfg = ScheduleConfig.resolve(base)
    base_keys = set(base_cfg.workloads) if base_cfg else set()
    if memory_budget is None:
        return cm, dropped
    default = None
    while cm.metadata["workspace_bytes"] > memory_budget:
        tuned = [k for k in cfg.workloads if k not in base_keys]
        if not tuned:
            break
        if default is None:
            default = {o["workload_key"]: o.get("workspace_bytes", 0)
                       for o in mtvm_compile(model, target=target, schedule_config=base,
                                             **compile_kwargs).metadata["operators"]
                       if o.get("workload_key")}
        now = {o["workload_key"]: o.get("workspace_bytes", 0)
               for o in cm.metadata["operators"] if o.get("workload_key")}
        worst = max(tuned, key=lambda k: now.get(k, 0) - default.get(k, 0))
        del cfg.workloads[worst]
        dropped.append(worst)
        cm = mtvm_compile(model, target=target, schedule_config=cfg, **compile_kwargs)
    return cm, dropped


__all__ = ["config_for", "compile_within"]
