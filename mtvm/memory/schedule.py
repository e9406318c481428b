"""Execution order: the topological order of the graph's nodes with the lowest
peak of live memory.

What is minimized: the planner's lower bound of an order (planner.order_peak):
the largest sum, over the steps, of the bytes live while a node runs -- every
buffer written earlier and read at or after it, its outputs, its kernel
scratch. Buffers are the planner's: a view (alias node) uses its source's
bytes; an in-place write (inplace_steps) makes output and input one buffer
of the larger size. In-place that no order can change (the input's other
readers are all ancestors of the node) is modelled exactly; in-place that the
order decides (the node must be the input's last reader) is counted as a
saving at that node's step only -- an estimate, which choose_order checks.

How: dynamic programming over the sets of scheduled nodes that are closed
under predecessors. The live bytes after such a set S do not depend on the
order inside it, so the lowest peak from S to the end is
    rest(S) = min over ready v of max(step(S, v), rest(S + v)).
A chain of blocks keeps the number of such sets small (their sum over the
blocks, not their product). When a layer of sets (same size) exceeds BEAM, or
after WORK_BUDGET node visits, only the best (peak so far, live bytes) are
kept, plus the original order's prefix: a bounded search (greedy at the
end), no longer exact, never worse than the original. Among orders of equal
peak the one taking the earliest original node first wins, so an order
nothing beats comes back as is.

choose_order() runs this on the lowered graph, re-lowers the orders found
(in-place decisions and scratch recomputed for each), drops the in-place
writes that raise an order's peak (planner.trim_inplace), and keeps the
result only if its bound -- and, should the placement miss it, its arena --
is strictly below the graph order's. When the placement misses the bound,
the orders of the same peak that continue the branch run last are placed
too (nested lifetimes pack better).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

from ..ir import Graph, all_inputs
from .planner import (MemoryPlan, aligned, concat_views, inplace_candidates, inplace_steps,
                      order_peak, plan_memory, trim_inplace, view_root)

BEAM = 512              # sets of scheduled nodes kept per layer beyond which the search is pruned
WORK_BUDGET = 20_000    # node visits (~0.2 s); past it, one set per layer (greedy)


@dataclass
class Problem:
    """Nodes 0..n-1 (original order, topological) and the buffers they use."""
    preds: list[int]                       # per node: bitmask of the nodes it reads from
    size: list[int]                        # per buffer: aligned bytes
    writes: list[list[int]]                # per node: buffers whose life it starts
    reads: list[list[int]]                 # per node: buffers it reads
    readers: list[int]                     # per buffer: bitmask of the nodes reading it
    scratch: list[int]                     # per node: aligned scratch bytes
    inplace: list[list[tuple[int, int]]]   # per node: (buffer, bytes saved if read last here)
    start: list[int]                       # live before the first node (inputs in the arena)
    pinned: set[int]                       # live to the end (outputs in the arena)

    def __post_init__(self):
        # Per node, what step() and live_after() add up (they run per visited set).
        self._new = [sum(self.size[b] for b in w) for w in self.writes]
        self._ending = [self._mortal(set(r) | set(w)) for r, w in zip(self.reads, self.writes)]
        self._ending_first = [self._mortal(set(self.start) - set(e for e, _ in ends))
                              for ends in self._ending]
        self._succ = [[u for u in range(self.n) if self.preds[u] >> v & 1] for v in range(self.n)]

    def _mortal(self, buffers) -> list[tuple[int, int]]:
        return [(b, self.size[b]) for b in sorted(buffers) if b not in self.pinned]

    @property
    def n(self) -> int:
        return len(self.preds)

    def first_ready(self) -> int:
        """Bitmask of the nodes that can run first."""
        return sum(1 << v for v, p in enumerate(self.preds) if not p)

    def ready_after(self, ready: int, done: int, v: int) -> int:
        """The ready nodes once v has run (ready: before it; done: with v)."""
        ready &= ~(1 << v)
        for u in self._succ[v]:
            if not self.preds[u] & ~done:
                ready |= 1 << u
        return ready

    def step(self, done: int, live: int, v: int) -> int:
        """Bytes live while v runs after the set `done` (live bytes before it)."""
        total = live + self._new[v] + self.scratch[v]
        after = done | 1 << v
        for b, saved in self.inplace[v]:
            if not self.readers[b] & ~after:      # v is its last reader: written over
                return total - saved
        return total

    def live_after(self, done: int, live: int, v: int) -> int:
        after, readers = done | 1 << v, self.readers
        ending = self._ending[v] + (self._ending_first[v] if not done else [])
        return live + self._new[v] - sum(s for b, s in ending if not readers[b] & ~after)

    def initial_live(self) -> int:
        return sum(self.size[b] for b in self.start)


def problem(g: Graph, scratch_bytes: dict[int, int] | None = None,
            io_in_workspace: bool = False) -> Problem:
    """The scheduling problem of g's nodes, buffers as plan_memory sees them."""
    nodes, root = g.nodes, view_root(g)
    io = set(g.inputs) | set(g.outputs)
    preds, ancestors, readers = _dependencies(g, root)
    merged, dynamic = _split_inplace(g, root, io, readers, ancestors)

    def cls(name):                 # the buffer (its owner tensor) a tensor lives in
        r = root(name)
        while r in merged:
            r = merged[r]
        return r
    nbytes: dict[str, int] = {}
    for name, t in g.tensors.items():
        if not t.is_const:         # constants: never a buffer (and the bulk of the tensors)
            nbytes[cls(name)] = max(nbytes.get(cls(name), 0), t.nbytes)
    index: dict[str, int] = {}     # owner tensor -> buffer number

    def buf(name) -> int | None:
        c = cls(name) if name else None
        if c is None or g.tensors[c].is_const or (c in io and not io_in_workspace):
            return None
        return index.setdefault(c, len(index))
    start = [b for name in g.inputs if io_in_workspace and name in g.tensors
             and not g.tensors[name].is_const for b in [buf(name)] if b is not None]
    reads = [list(dict.fromkeys(b for i in all_inputs(n) for b in [buf(i)] if b is not None))
             for n in nodes]
    writes, born = [], set(start)
    for n in nodes:
        new = [b for o in n.kernel_outputs for b in [buf(o)] if b is not None and b not in born]
        born.update(new)
        writes.append(new)
    size = [0] * len(index)
    for c, b in index.items():
        size[b] = aligned(max(nbytes[c], 1))
    bufreaders = [0] * len(index)
    for v, rs in enumerate(reads):
        for b in rs:
            bufreaders[b] |= 1 << v
    pinned = {buf(name) for name in g.outputs if io_in_workspace} - {None}
    scratch = [aligned((scratch_bytes or {}).get(v, 0)) for v in range(len(nodes))]
    inplace = [[(buf(r), min(size[buf(r)], size[buf(n.kernel_outputs[0])])) for r in dynamic[v]]
               for v, n in enumerate(nodes)]
    return Problem(preds, size, writes, reads, bufreaders, scratch, inplace, start, pinned)


def _dependencies(g: Graph, root):
    """Per node: the nodes it reads from and all its ancestors (bitmasks); per
    tensor owning bytes (view root): the nodes reading it."""
    producer = {o: v for v, n in enumerate(g.nodes) for part in [n] + n.tail
                for o in part.outputs if o}
    preds = [0] * len(g.nodes)
    ancestors = [0] * len(g.nodes)
    readers: dict[str, int] = {}
    for v, n in enumerate(g.nodes):
        for i in filter(None, all_inputs(n)):
            readers[root(i)] = readers.get(root(i), 0) | 1 << v
            if i in producer:
                u = producer[i]
                preds[v] |= 1 << u
                ancestors[v] |= ancestors[u] | 1 << u
    return preds, ancestors, readers


def _split_inplace(g: Graph, root, io, readers, ancestors):
    """inplace_steps' choices, split by whether the order decides them: {output:
    input} merged for good (the input's other readers are all ancestors of the
    node, so it is read last there in every order); per node, the inputs it may
    overwrite if it runs after their other readers (tried in order)."""
    merged: dict[str, str] = {}
    dynamic: list[list[str]] = [[] for _ in g.nodes]
    for v, n in enumerate(g.nodes):
        for _, r in inplace_candidates(g, n, root, io):
            others = readers.get(r, 0) & ~(1 << v)
            if any(ancestors[u] >> v & 1 for u in _bits(others)):
                continue                       # read after v in every order: never in place
            if others & ~ancestors[v]:
                dynamic[v].append(r)           # in place if v runs after those readers
                continue
            if dynamic[v]:
                dynamic[v].append(r)           # always possible, unless an earlier one applies
            else:
                merged[root(n.kernel_outputs[0])] = r
            break
    return merged, dynamic


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def peak(p: Problem, order: list[int]) -> int:
    """The model's peak of an order."""
    done, live, top = 0, p.initial_live(), 0
    for v in order:
        top = max(top, p.step(done, live, v))
        live = p.live_after(done, live, v)
        done |= 1 << v
    return top


def best_order(p: Problem, beam: int = BEAM, budget: int = WORK_BUDGET,
               depth_first: bool = False) -> tuple[list[int], int, bool]:
    """(order, its peak, whether the search was exhaustive). Among the orders
    of that peak: the one taking the earliest original node first, or with
    depth_first the one continuing the branch run last (nested lifetimes,
    which the placement packs more easily)."""
    layers, exact = _explore(p, beam, budget)
    rest = _rest(p, layers)
    order, done, target = [], 0, rest[0]
    position: dict[int, int] = {}
    for _ in range(p.n):
        _, live, ready = layers[len(order)][done]
        nodes = list(_bits(ready))                    # earliest original node first
        if depth_first:
            nodes.sort(key=lambda v: -max((position[u] for u in _bits(p.preds[v])), default=-1))
        for v in nodes:
            after = done | 1 << v
            if after in rest and max(p.step(done, live, v), rest[after]) <= target:
                position[v] = len(order)
                order.append(v)
                done = after
                break
    return order, target, exact


def _explore(p: Problem, beam: int, budget: int):
    """Layer k: {set of k scheduled nodes: (lowest peak to reach it, live bytes,
    ready nodes)}, the original order's prefix first, then best first; and
    whether nothing was pruned. Past `budget` node visits, the rest of a layer
    is skipped and the next layers keep one set besides the prefix (greedy)."""
    layers = [{0: (0, p.initial_live(), p.first_ready())}]
    exact, work = True, 0
    for k in range(p.n):
        nxt: dict[int, tuple[int, int, int]] = {}
        for done, (top, live, ready) in layers[-1].items():
            if work > budget and nxt:
                exact = False
                break
            for v in _bits(ready):
                work += 1
                after = done | 1 << v
                t = max(top, p.step(done, live, v))
                if after not in nxt:
                    nxt[after] = (t, p.live_after(done, live, v), p.ready_after(ready, after, v))
                elif t < nxt[after][0]:
                    nxt[after] = (t,) + nxt[after][1:]
        prefix = (1 << (k + 1)) - 1       # the original order's (always reached): kept
        keep = max(beam - 1, 1) if work <= budget else 1
        others = [s for s in nxt if s != prefix]
        if len(others) > keep:
            exact = False
            others = heapq.nsmallest(keep, others, key=nxt.get)
        else:
            others.sort(key=nxt.get)
        layers.append({s: nxt[s] for s in [prefix] + others})
    return layers, exact


def _rest(p: Problem, layers) -> dict[int, int]:
    """{explored set: lowest peak of the remaining steps through explored sets}."""
    rest = {(1 << p.n) - 1: 0}
    for layer in reversed(layers[:-1]):
        for done, (_, live, ready) in layer.items():
            peaks = [max(p.step(done, live, v), rest[after]) for v in _bits(ready)
                     for after in [done | 1 << v] if after in rest]
            if peaks:
                rest[done] = min(peaks)
    return rest


def reordered(g: Graph, order: list[int]) -> Graph:
    h = g.copy()
    h.nodes = [h.nodes[v] for v in order]
    return h


@dataclass
class Scheduled:
    """A graph in its chosen order, lowered and planned."""
    graph: Graph
    inplace: dict
    kernels: list                   # filled by the caller (compiler) after the choice
    scratch: dict[int, int]
    peak: int                       # the order's lower bound (planner.order_peak)
    plan: MemoryPlan | None = None


def choose_order(g: Graph, scratch_of, io_in_workspace: bool = False,
                 reorder: bool = True) -> Scheduled:
    """Order and plan g; with reorder, in the order (and with the in-place
    writes, planner.trim_inplace) of the lowest peak, kept only if its arena is
    strictly smaller than the graph order's. scratch_of(graph, inplace) ->
    {step: scratch bytes} is pure (the schedules' scratch_bytes): planning never
    emits C. The caller lowers the chosen graph once."""
    lower = scratch_of
    io = io_in_workspace
    original = _lowered(g, inplace_steps(g), lower, io)
    best = original
    if reorder:
        for c in [_trimmed(original, lower, io)] + _candidates(g, original.scratch, lower, io):
            if c.peak < best.peak:
                best = c
    best.plan = _plan(best, io)
    if reorder and best.plan.arena_bytes > best.peak:
        # The placement missed the bound: orders of the same peak that nest
        # the branches' lifetimes may pack better.
        for c in _candidates(g, original.scratch, lower, io, depth_first=True):
            if c.peak < best.plan.arena_bytes:
                c.plan = _plan(c, io)
                if c.plan.arena_bytes < best.plan.arena_bytes:
                    best = c
    if best is not original and best.plan.arena_bytes >= original.peak:
        # Still above the graph order's bound: compare arenas (ties keep the graph order).
        original.plan = _plan(original, io)
        if original.plan.arena_bytes <= best.plan.arena_bytes:
            best = original
    # Concats written in place by their producers (no copy), in the chosen order
    # and in the graph's: the views can favour either, and the graph order's
    # result is what reorder=False gives (the bound reported as the original).
    chose_the_graph_order = best is original
    best = _with_views(best, lower, io)
    graph_order = best if chose_the_graph_order else _with_views(original, lower, io)
    if graph_order is not best and not (
            best.plan.lower_bound <= graph_order.plan.lower_bound and
            best.plan.arena_bytes <= graph_order.plan.arena_bytes):
        best = graph_order
    best.plan.original_lower_bound = graph_order.plan.lower_bound
    return best


def _with_views(c: Scheduled, lower, io: bool) -> Scheduled:
    """c planned, with its Concats written in place (planner.concat_views) where
    that does not grow its arena."""
    if c.plan is None:
        c.plan = _plan(c, io)
    viewed = concat_views(c.graph, c.inplace, c.scratch, io)
    if viewed is None:
        return c
    v = _lowered(*viewed, lower, io)
    v.plan = _plan(v, io)
    return v if v.plan.arena_bytes <= c.plan.arena_bytes else c


def _candidates(g: Graph, scratch, lower, io_in_workspace: bool, depth_first: bool = False
                ) -> list[Scheduled]:
    """The orders found, lowered, in-place writes trimmed."""
    graphs = [reordered(g, order)
              for order in candidate_orders(g, scratch, io_in_workspace, depth_first)]
    return [_trimmed(_lowered(h, inplace_steps(h), lower, io_in_workspace), lower,
                     io_in_workspace) for h in graphs]


def _lowered(h: Graph, inplace: dict, scratch_of, io_in_workspace: bool) -> Scheduled:
    scratch = {step: b for step, b in scratch_of(h, inplace).items() if b}
    return Scheduled(h, inplace, [], scratch, order_peak(h, scratch, inplace, io_in_workspace))


def _trimmed(c: Scheduled, lower, io_in_workspace: bool) -> Scheduled:
    """c without the in-place writes that raise its peak (re-lowered: scratch may change)."""
    inplace = trim_inplace(c.graph, c.inplace, c.scratch, io_in_workspace)
    if inplace == c.inplace:
        return c
    d = _lowered(c.graph, inplace, lower, io_in_workspace)
    return d if d.peak < c.peak else c


def _plan(c: Scheduled, io_in_workspace: bool) -> MemoryPlan:
    return plan_memory(c.graph, c.scratch, inplace=c.inplace, io_in_workspace=io_in_workspace)


def candidate_orders(g: Graph, scratch: dict[int, int], io_in_workspace: bool,
                     depth_first: bool = False) -> list[list[int]]:
    """The best orders that differ from the original, for two models of the
    in-place writes the order decides: a saving at their step, or none."""
    with_inplace = problem(g, scratch, io_in_workspace)
    problems = [with_inplace]
    if any(with_inplace.inplace):
        problems.append(replace(with_inplace, inplace=[[] for _ in g.nodes]))
    out = []
    for p in problems:
        order, _, _ = best_order(p, depth_first=depth_first)
        if order != list(range(len(g.nodes))) and order not in out:
            out.append(order)
    return out
