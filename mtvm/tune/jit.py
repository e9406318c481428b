"""Tuning the LLVM backend (`mtvm tune --backend llvm`): each layer's
candidates measured in this process through LLVM's JIT -- no C compiler, no
project, no session, no device.

A layer is one workload key of the LLVM backend (codegen.llvm.loopnests.
workload_key: the C backend's key plus the backend) whose loop nest has
knobs (NEST_KNOBS: the float Conv register tiles, the Gemm/MatMul tiles).
Its candidates are the knob settings that give distinct IR, found as
space.py finds the C schedules' (breadth first from the default, one knob at
a time, each setting's nest emitted and compared; nothing compiled).

They are measured in batches: one LLVM module holds the layer's default and
up to BATCH candidates, each kernel lowered as in a model (noinline) with a
wrapper that calls it n times; LLVM compiles it (-O3, the target's CPU) and
MCJIT loads it. Its buffers are where the model's JIT puts them: the
activations at their planned offsets in a page-aligned arena, the weights
and tables on 64-byte lines, the model's inputs and outputs 64-byte aligned
(a table 16 bytes off a cache line made one AVX2 tile 1.45x slower, and a
measurement at another alignment than the model's chose tiles that were
slower in the model). Every kernel runs once on seeded random inputs and is
checked against the NumPy reference of the node and its fused tail
(mtvm.interp.run_node) before its time counts. Then rounds: each candidate
in turn, n calls timed with perf_counter_ns; the figure is the fastest
round's time per call in ns (as for a host build's timer: preemption only
adds time), the spread (max - min) / median. The default is in every batch,
so a candidate is always compared with a default measured beside it.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import os
import random
import statistics
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..errors import MtvmError
from . import records as R
from .measure import COMPILE_ERROR, WRONG_OUTPUT
from .space import MAX_EMITS, Candidate, Layer, candidate_ident, describe_kernel

BATCH = 8                 # candidates per module (besides the default)
ROUND_SECONDS = 0.002     # one timed round of one candidate: n calls of about this long
UNIT = "ns"


@dataclass
class Site:
    """Where a layer's (first) kernel is in the compiled model: what re-emitting
    it with other knobs needs."""
    graph: object
    step: int
    inplace: object          # the kernel's in-place decision (input index or tail name)
    target: object
    plan: object             # the model's memory plan (where the kernel's buffers are)
    nest: str                # the knob set's name (loopnests.NEST_KNOBS)
    key: str


def _nests() -> dict:
    from ..codegen.llvm.loopnests import NEST_KNOBS
    return {n.name: n for n in NEST_KNOBS.values()}


def _body(site: Site, knobs: dict):
    """(Kernel, statements) of the site's kernel with these knob values."""
    from ..codegen.c_codegen import make_kernel
    from ..codegen.llvm import ir_body, scratch_bytes
    from ..schedules import ScheduleConfig
    cfg = ScheduleConfig(workloads={site.key: {"schedule": site.nest, "knobs": dict(knobs)}})
    inplace = {site.step: site.inplace} if site.inplace is not None else None
    k = make_kernel(site.graph, site.step, "tune", inplace, site.target, cfg)
    k.scratch_bytes = scratch_bytes(k)
    body = ir_body(k)
    if k.knobs != {**k.knobs, **knobs}:
        raise MtvmError(f"knobs {knobs} were not applied to {k.fname} (key {site.key})")
    return k, body


def emit(site: Site, knobs: dict):
    """The IRKernel of the site's kernel with these knob values."""
    from ..codegen.llvm import names_used
    from ..codegen.llvm.module import IRKernel
    k, body = _body(site, knobs)
    return IRKernel(k, body, site.step, k.params(" ".join(sorted(names_used(body)))))


def _code(site: Site, knobs: dict) -> tuple[str, int]:
    """(hash of the kernel's statements with these knob values, scratch bytes)."""
    k, body = _body(site, knobs)
    h = hashlib.sha256(repr(body).encode())     # the IR's dataclass reprs: structural
    h.update(str(k.scratch_bytes).encode())
    return h.hexdigest(), int(k.scratch_bytes)


def llvm_layers(cm, max_emits: int = MAX_EMITS, log=None) -> tuple[list, dict]:
    """([Layer], {key: Site}) of an LLVM-backend CompiledModel: one layer per
    workload key of a kernel whose nest has knobs, its candidates default first."""
    from ..codegen.llvm import workload_key
    nests = _nests()
    layers: dict[str, Layer] = {}
    sites: dict[str, Site] = {}
    for lk in cm.kernels:
        k0 = lk.kernel
        if k0.schedule not in nests:
            continue
        key = workload_key(k0)
        if key in layers:
            layers[key].functions.append(k0.fname)
            continue
        n = k0.node
        spec = nests[k0.schedule]
        inplace = k0.inplace if k0.inplace is not None else k0.inplace_tail
        site = Site(cm.graph, lk.step, inplace, cm.target, cm.plan, spec.name, key)
        lay = Layer(key, "+".join([n.op] + [t.op for t in n.tail]), describe_kernel(k0),
                    [k0.fname], [p.name for p in [n] + n.tail], 0)
        lay.raw_size = int(np.prod([max(1, len(kn.choices)) for kn in spec.knobs]))
        default = Candidate.make(spec.name, dict(k0.knobs), k0.scratch_bytes)
        lay.candidates.append(default)
        codes: dict[str, Candidate] = {}
        tried: set[str] = set()

        def visit(knobs, lay=lay, site=site, default=default, codes=codes, tried=tried,
                  name=spec.name) -> bool:
            ident = candidate_ident(name, knobs)
            if ident in tried:
                return False
            tried.add(ident)
            lay.emits += 1
            try:
                h, scratch = _code(site, knobs)
            except Exception as e:     # a setting the nest cannot build: not a candidate
                if log:
                    log(f"layer {site.key}: {knobs} does not emit ({type(e).__name__}: {e})")
                return False
            if h in codes:
                return False
            if ident == default.ident:
                codes[h] = default
                return True
            c = Candidate.make(name, knobs, scratch)
            codes[h] = c
            lay.candidates.append(c)
            return True

        visit(default.knob_dict)
        frontier = deque([default.knob_dict])
        relevant = [kn for kn in spec.knobs]     # after the default's neighbours: those
        first = True                             # that changed its code
        while frontier and lay.complete:
            knobs = frontier.popleft()
            changed = set()
            for kn in relevant:
                for v in kn.choices:
                    if v == knobs.get(kn.name):
                        continue
                    if lay.emits >= max_emits:
                        lay.complete = False
                        break
                    new = {**knobs, kn.name: v}
                    if visit(new):
                        frontier.append(new)
                        changed.add(kn.name)
            if first:
                relevant = [kn for kn in relevant if kn.name in changed]
                first = False
        layers[key], sites[key] = lay, site
    macs = {o["function"]: o["macs"] for o in cm.metadata["operators"]}
    for lay in layers.values():
        lay.macs = macs.get(lay.functions[0], 0)
    return list(layers.values()), sites


# -- one module of candidates ----------------------------------------------------------

def _aligned(arr: np.ndarray, align: int = 64) -> np.ndarray:
    """A copy of arr (contiguous) at an `align`-byte aligned address."""
    arr = np.ascontiguousarray(arr)
    raw = np.empty(arr.nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    out = raw[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    out[...] = arr
    return out


def _random(shape, dtype, rng) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(dt)
    return rng.integers(-3, 4, shape).astype(dt)


def _close(got: np.ndarray, ref: np.ndarray) -> str:
    """'' when got matches the reference (float: max error <= FLOAT_RTOL of
    max(|ref|, 1), NaNs in the same places; else exact), else what differs."""
    from ..testing import FLOAT_RTOL
    if ref.dtype.kind in "fc":
        if not np.array_equal(np.isnan(got), np.isnan(ref)):
            return "NaN where the reference has none (or the reverse)"
        fin = np.isfinite(ref)
        scale = max(float(np.max(np.abs(ref[fin]), initial=0.0)), 1.0)
        err = float(np.max(np.abs(got[fin] - ref[fin]), initial=0.0))
        return "" if err <= FLOAT_RTOL * scale else f"max error {err:.3g} (scale {scale:.3g})"
    return "" if np.array_equal(got, ref) else "outputs differ"


@dataclass
class Outcome:
    status: str                  # "ok", compile_error, wrong_output
    figure: float | None = None  # ns per call
    spread: float | None = None
    error: str = ""


class Batch:
    """The default and some candidates of one layer, compiled into one module,
    loaded, checked and timed."""

    def __init__(self, site: Site, cands: list, seed: int = 0):
        self.site, self.cands = site, cands
        self.outcomes: dict[str, Outcome] = {}
        self.kernels = {}
        for c in cands:
            try:
                self.kernels[c.ident] = emit(site, c.knob_dict)
            except Exception as e:
                self.outcomes[c.ident] = Outcome(COMPILE_ERROR, error=_line(e))
        self.rng = np.random.default_rng(seed)
        self.calls = 0

    def _build(self, idents: list):
        """(engine, {ident: bench function}) of a module of these candidates."""
        import llvmlite.ir as ir

        from ..codegen.llvm import parse_and_optimize
        from ..codegen.llvm.lower import FunctionLowering
        from ..codegen.llvm.machine import _llvm, abi, target_machine, triple_cpu_features
        target = self.site.target
        llvm = _llvm()
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        m = ir.Module(name="mtvm_tune")
        m.triple = triple_cpu_features(target)[0]
        m.data_layout = str(target_machine(target, jit=True).target_data)
        cconv, intrinsics = abi(target)
        low = FunctionLowering(m, 8 * (target.pointer_bytes or 8), cconv, intrinsics)
        i32, i64 = ir.IntType(32), ir.IntType(64)
        names = {}
        for i, ident in enumerate(idents):
            ik = self.kernels[ident]
            fn = dataclasses.replace(ik.function(), name=f"mtvm_tune_k{i}")
            kf = low.function(fn, linkage="internal", contract=ik.may_contract)
            kf.attributes.add("noinline")     # timed as the function it is in a model
            # int32 bench(params..., int64 n): n calls, the first nonzero status
            bf = ir.Function(m, ir.FunctionType(i32, [a.type for a in kf.args] + [i64]),
                             f"mtvm_tune_bench{i}")
            entry, loop, fail, nxt, done = (bf.append_basic_block(s) for s in
                                            ("entry", "loop", "fail", "next", "done"))
            b = ir.IRBuilder(entry)
            b.branch(loop)
            b.position_at_end(loop)
            it = b.phi(i64)
            st = b.call(kf, list(bf.args[:-1]), cconv=cconv or None)
            b.cbranch(b.icmp_signed("!=", st, ir.Constant(i32, 0)), fail, nxt)
            b.position_at_end(fail)
            b.ret(st)
            b.position_at_end(nxt)
            it2 = b.add(it, ir.Constant(i64, 1))
            b.cbranch(b.icmp_signed("<", it2, bf.args[-1]), loop, done)
            it.add_incoming(ir.Constant(i64, 0), entry)
            it.add_incoming(it2, nxt)
            b.position_at_end(done)
            b.ret(ir.Constant(i32, 0))
            names[ident] = bf.name
        mod, tm = parse_and_optimize(str(m), target, jit=True)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        fns = {}
        for ident, name in names.items():
            nargs = len(self.kernels[ident].function().params)
            proto = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_void_p] * nargs),
                                     ctypes.c_int64)
            fns[ident] = proto(engine.get_function_address(name))
        return engine, fns

    def _arguments(self):
        """({ident: [addresses]}, inputs, {ident: [(tensor, output array)]}) with
        every buffer where the model's JIT has it: the activations at their
        planned offsets in a page-aligned arena (as MCJIT places the model's),
        weights and tables on cache lines (jit.BLOB_ALIGN), the model's inputs
        and outputs in 64-byte aligned arrays. inputs: [(array in place, its
        seeded random value)], written again before each check."""
        from ..codegen.llvm.jit import BLOB_ALIGN
        site, plan = self.site, self.site.plan
        g = site.graph
        arena = _aligned(np.zeros(max(plan.arena_bytes, 1), np.uint8), 4096)
        placed: dict[str, np.ndarray] = {}
        inputs = []

        def at(buf) -> np.ndarray:
            if buf.name in placed:
                return placed[buf.name]
            root = plan.root(buf.name)
            if buf.const is not None:
                a = _aligned(np.asarray(buf.const, buf.dtype).reshape(buf.shape), BLOB_ALIGN)
            elif root in g.inputs or root in g.outputs or root not in plan.offsets:
                a = _aligned(np.zeros(buf.shape, buf.dtype))
            else:
                off = plan.arena_offset(buf.name)
                nbytes = int(np.prod(buf.shape, dtype=np.int64)) * buf.dtype.itemsize
                a = arena[off:off + nbytes].view(buf.dtype).reshape(buf.shape)
            placed[buf.name] = a
            return a

        args, outs = {}, {}
        self._keep = [arena]
        for ident, ik in self.kernels.items():
            k = ik.kernel
            addrs, mine = [], []
            for _, buf in ik.params:
                if buf is None:           # the scratch, where the model plans it
                    off = plan.scratch.get(site.step)
                    a = arena[off:] if off is not None else \
                        _aligned(np.zeros(max(k.scratch_bytes, 1), np.uint8))
                elif any(buf is o for o in k.outs):
                    a = at(buf)
                    mine.append((buf.name, a))
                else:
                    a = at(buf)
                    if buf.const is None and all(buf.name != n for n, _, _ in inputs):
                        inputs.append((buf.name, a, _random(buf.shape, buf.dtype, self.rng)))
                self._keep.append(a)
                addrs.append(a.ctypes.data)
            for t in ik.tables:
                a = _aligned(np.asarray(t.data), BLOB_ALIGN)
                self._keep.append(a)
                addrs.append(a.ctypes.data)
            args[ident], outs[ident] = addrs, mine
        return args, inputs, outs

    def _reference(self, inputs) -> dict:
        """The node's and its tail's outputs on the inputs (mtvm.interp.run_node)."""
        from ..interp import run_node
        g = self.site.graph
        node = g.nodes[self.site.step]
        values = {name: value for name, _, value in inputs}
        for name in node.inputs + [x for t in node.tail for x in t.inputs]:
            if name and name not in values and g.tensors[name].data is None:
                values[name] = _random(g.tensors[name].shape, g.tensors[name].dtype, self.rng)
        run_node(g, node, values)
        return values

    def run(self, runs: int = 15) -> dict[str, Outcome]:
        """Compile, check and time; {ident: Outcome} of every candidate."""
        idents = [c.ident for c in self.cands if c.ident in self.kernels]
        if not idents:
            return self.outcomes
        try:
            engine, fns = self._build(idents)
        except Exception:           # find the candidates at fault: each alone
            fns, engines = {}, []
            for ident in idents:
                try:
                    e, f = self._build([ident])
                except Exception as e2:
                    self.outcomes[ident] = Outcome(COMPILE_ERROR, error=_line(e2))
                    continue
                engines.append(e)
                fns.update(f)
            engine = engines
        args, inputs, outs = self._arguments()
        ref = self._reference(inputs)
        ok = []
        for ident, fn in fns.items():
            for _, a in outs[ident]:       # what was not written shows
                if not any(np.shares_memory(a, x) for _, x, _ in inputs):
                    a[...] = np.nan if a.dtype.kind == "f" else 0
            for _, a, value in inputs:     # an output may be planned over an input
                a[...] = value
            st = fn(*args[ident], 1)
            bad = f"status {st}" if st else ""
            for name, a in outs[ident]:
                bad = bad or _close(a, ref[name])
            if bad:
                self.outcomes[ident] = Outcome(WRONG_OUTPUT, error=bad)
            else:
                ok.append(ident)
        if ok:
            times = paired([lambda n, f=fns[i], a=args[i]: f(*a, n) for i in ok], runs)
            for ident, ts in zip(ok, times):
                self.outcomes[ident] = Outcome(R.OK, min(ts), _spread(ts))
        del engine
        return self.outcomes


def paired(fns: list, runs: int) -> list[list[float]]:
    """Times per call (ns) of fns (each called as fn(n): n calls), in `runs`
    rounds that run every fn in turn (the order rotating), so that a load spike
    hits all of them alike. n is chosen once so that a round of the first fn
    lasts about ROUND_SECONDS."""
    first = fns[0]
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter_ns()
        first(1)
        best = min(best, time.perf_counter_ns() - t0)
    n = int(max(1, min(1_000_000, ROUND_SECONDS * 1e9 / max(best, 1))))
    for f in fns:               # warm up: code and data in the caches
        f(n)
    out = [[] for _ in fns]
    for r in range(runs):
        for j in range(len(fns)):
            i = (j + r) % len(fns)
            t0 = time.perf_counter_ns()
            fns[i](n)
            out[i].append((time.perf_counter_ns() - t0) / n)
    return out


def _spread(ts) -> float:
    med = statistics.median(ts)
    return round((max(ts) - min(ts)) / med, 4) if med else 0.0


def _line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]


# -- the tuner -------------------------------------------------------------------------

def tune_llvm(model: str, board_data: dict, target, records_path: str, trials: int,
              runs: int | None, time_limit: float | None, known_records, opts: dict,
              max_emits: int, seed: int, progress: bool, log):
    """mtvm.tune(..., backend="llvm"): every layer's candidates measured through
    the JIT here; returns a TuneResult."""
    from .. import progress as _progress
    from ..compiler import compile as mtvm_compile
    from ..host_runner import normalize_inputs
    from ..validate import validate_outputs
    from . import TuneResult
    from .measure import reference_inputs
    from .search import LayerSearch, TuneStats
    t0 = time.monotonic()
    runs = runs or 15
    cm = mtvm_compile(model, backend="llvm", target=target, **opts)
    target = cm.target
    layers, sites = llvm_layers(cm, max_emits, log)
    old = R.load(records_path, missing_ok=True)
    known = R.load(known_records, missing_ok=False) if known_records else []

    def mine(recs):
        return [r for r in recs if r.get("target") == target.name and R.backend_of(r) == "llvm"]
    prior_recs = mine(old + known)
    done = R.measured(prior_recs)
    prior = R.best(prior_recs, target.name, backend="llvm")
    hits = [lay.key for lay in layers if any(k == lay.key for k, _ in done)]
    name = os.path.splitext(os.path.basename(model))[0]
    rng = random.Random(seed)
    stats = TuneStats(unit=UNIT)
    searches = []
    for lay in layers:
        pb = prior.get(lay.key)
        best = fig = None
        if pb is not None:
            best = next((c for c in lay.candidates if c.ident == R.ident(pb.record)), None)
            fig = pb.record.get("figure") if best is not None else None
        s = LayerSearch(lay, done, trials, rng, fig, best)
        s.untried = [c for c in s.untried if c.ident != lay.default.ident]
        searches.append(s)
    stats.skipped = sum(len(lay.candidates) - 1 for lay in layers) - \
        sum(len(s.untried) for s in searches)
    total = sum(-(-s.remaining // BATCH) for s in searches)
    bar_ctx = _progress.bar(total, f"tune {os.path.basename(model)} (llvm)", unit="module",
                            delay=0) if progress else None
    bar = bar_ctx.__enter__() if bar_ctx else None
    batch_index = 0
    try:
        with R.Writer(records_path) as writer:
            for s in searches:
                lay, site = s.layer, sites[s.layer.key]
                while True:
                    if time_limit is not None and time.monotonic() - t0 > time_limit:
                        if not stats.stopped_by_time:
                            stats.stopped_by_time = True
                            log(f"time limit of {time_limit:.0f} s reached")
                        break
                    cands = []
                    while len(cands) < BATCH:
                        c = s.propose()
                        if c is None:
                            break
                        cands.append(c)
                    if not cands:
                        break
                    t1 = time.monotonic()
                    out = Batch(site, [lay.default] + cands, seed).run(runs)
                    stats.builds += 1
                    stats.build_seconds += time.monotonic() - t1
                    dflt = out.get(lay.default.ident)
                    if dflt is None or dflt.status != R.OK:
                        raise MtvmError(f"layer {lay.key} ({lay.kind} {lay.what}) fails with "
                                        f"the LLVM backend's default nest: "
                                        f"{dflt.status if dflt else '?'}: "
                                        f"{dflt.error if dflt else ''}")
                    for c in [lay.default] + cands:
                        o = out[c.ident]
                        default = c.ident == lay.default.ident
                        rec = R.make(key=lay.key, target=target.name, board=board_data["name"],
                                     backend="llvm", op=lay.kind, layer=lay.what,
                                     schedule=c.schedule, knobs=c.knob_dict, default=default,
                                     status=o.status, figure=o.figure, unit=UNIT,
                                     spread=o.spread, runs=runs, statistic="min",
                                     ticks_per_second=10 ** 9, scratch_bytes=c.scratch_bytes,
                                     arena_bytes=cm.metadata["workspace_bytes"], model=name,
                                     build=batch_index, device="jit",
                                     phase="baseline" if default else "search")
                        if o.error:
                            rec["error"] = o.error
                        writer.write(rec)
                        if not default:
                            stats.measured += o.status == R.OK
                            if o.status != R.OK:
                                stats.failed += 1
                                stats.errors.append(f"{lay.key} {c.describe(lay.default)}: "
                                                    f"{o.status}: {o.error}")
                        s.result(c, o.figure)
                    log(f"layer {lay.key}: module {batch_index}, {len(cands)} candidate(s), "
                        f"best {s.best.describe(lay.default)} {s.best_figure:,.0f} ns "
                        f"(default {dflt.figure:,.0f} ns)")
                    batch_index += 1
                    if bar is not None:
                        bar.update(1)
    except KeyboardInterrupt:
        stats.interrupted = True
        raise
    finally:
        if bar_ctx is not None:
            bar_ctx.__exit__(None, None, None)
    all_recs = mine(R.load(records_path) + known)
    res = TuneResult(records_path, board_data["name"], target.name, layers, stats,
                     R.best(all_recs, target.name, backend="llvm"), hits, backend="llvm",
                     jit=True)
    res.default_arena = res.tuned_arena = cm.metadata["workspace_bytes"]
    # The tuned model: checked as a whole against the reference, and timed beside the default.
    inputs = reference_inputs(model, cm.metadata, seed)
    tuned = mtvm_compile(model, backend="llvm", target=target, tuning_records=all_recs, **opts)
    res.tuned_arena = tuned.metadata["workspace_bytes"]
    _, checks = validate_outputs(model, inputs, tuned.run_host(inputs))
    bad = [c for c in checks if not c.ok]
    res.tuned_check = bad[0].describe() if bad else "ok"
    models = [cm] if tuned.llvm_ir == cm.llvm_ir else [cm, tuned]
    timers = []
    for m in models:
        m.run_host(inputs)           # the JIT
        timers.append(m._jit.timer(normalize_inputs(m, inputs)))
    times = paired(timers, max(runs, 10))
    stats.baseline_total = min(times[0])
    res.model_figures = (min(times[0]), min(times[1]) if len(times) > 1 else None)
    stats.seconds = time.monotonic() - t0
    return res


__all__ = ["BATCH", "Batch", "Site", "emit", "llvm_layers", "paired", "tune_llvm"]
