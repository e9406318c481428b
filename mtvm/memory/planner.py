"""Static memory planning: every activation gets an offset in one arena.

The planners have the interface of TFLM's MicroMemoryPlanner:
add_buffer(size, first_use, last_use) then offsets() and arena_size().
LinearPlanner (every buffer its own bytes) is the trivially correct oracle;
GreedyPlanner places the largest buffers first at the lowest offset that does
not collide with any placed buffer whose lifetime overlaps.

Several workspace pools (RAM banks, compile(workspace_pools=...)): the buffers
are split over the pools, hottest first into the first pool (split_pools), and
each pool is planned on its own (its own planner, its own lower bound).
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from ..errors import MtvmError
from ..ir import Graph


ALIGN = 16


def aligned(n: int) -> int:
    """n bytes rounded up to the arena's alignment: what a buffer of n bytes occupies."""
    return (n + ALIGN - 1) // ALIGN * ALIGN


class LinearPlanner:
    def __init__(self):
        self.buffers: list[tuple[int, int, int]] = []

    def add_buffer(self, size: int, first_use: int, last_use: int) -> int:
        self.buffers.append((size, first_use, last_use))
        return len(self.buffers) - 1

    def offsets(self) -> list[int]:
        out, at = [], 0
        for size, _, _ in self.buffers:
            out.append(at)
            at += aligned(size)
        return out

    def arena_size(self) -> int:
        return sum(aligned(s) for s, _, _ in self.buffers)

    def lower_bound(self) -> int:
        """Largest sum of simultaneously live (aligned) buffers."""
        return max(self.live_bytes(), default=0)

    def live_bytes(self) -> list[int]:
        """Sum of the live (aligned) buffers at each step up to the last use."""
        if not self.buffers:
            return []
        delta = [0] * (max(b[2] for b in self.buffers) + 2)
        for s, f, l in self.buffers:
            delta[f] += aligned(s)
            delta[l + 1] -= aligned(s)
        out, at = [], 0
        for d in delta[:-1]:
            at += d
            out.append(at)
        return out


class GreedyPlanner(LinearPlanner):
    """Places buffers one at a time, each at the lowest offset (or into the
    tightest gap) free of every placed buffer whose lifetime overlaps. The
    result depends on the order, so several orders are tried (largest first,
    longest-lived first, by first use, by area, ...; then seeded shuffles, for
    a bounded time) and the smallest arena kept; the search stops as soon as
    an arena equals the lower bound (no placement can do better)."""

    SHUFFLES = 64          # extra random orders when no fixed order reaches the bound
    TIME_BUDGET_S = 1.0    # ... or until this much time has been spent

    def add_buffer(self, size: int, first_use: int, last_use: int) -> int:
        self._best = None
        return super().add_buffer(size, first_use, last_use)

    def _place(self, order, tightest: bool) -> tuple[list[int], int]:
        placed: list[tuple[int, int, int, int]] = []   # offset, end, first, last
        out = [0] * len(self.buffers)
        top = 0
        for i in order:
            size, first, last = self.buffers[i]
            size = aligned(size)
            busy = sorted((o, e) for o, e, f, l in placed if f <= last and first <= l)
            at, best, best_gap = 0, None, None
            for o, e in busy:
                if at + size <= o:
                    if not tightest:
                        break
                    if best_gap is None or o - at < best_gap:
                        best, best_gap = at, o - at
                at = max(at, e)
            if tightest and best is not None:
                at = best
            out[i] = at
            top = max(top, at + size)
            placed.append((at, at + size, first, last))
        return out, top

    def _orders(self):
        b = self.buffers
        idx = range(len(b))
        yield sorted(idx, key=lambda i: (-b[i][0], b[i][1]))               # largest first
        yield sorted(idx, key=lambda i: (-(b[i][2] - b[i][1]), -b[i][0]))  # longest-lived
        yield sorted(idx, key=lambda i: (b[i][1], -b[i][0]))               # by first use
        yield sorted(idx, key=lambda i: (-b[i][0] * (b[i][2] - b[i][1] + 1), b[i][1]))
        yield sorted(idx, key=lambda i: (-b[i][2], -b[i][0]))              # by last use

    def _search(self) -> tuple[list[int], int]:
        import random
        import time
        bound = self.lower_bound()
        best = None
        for order in self._orders():
            for tightest in (False, True):
                cand = self._place(order, tightest)
                if best is None or cand[1] < best[1]:
                    best = cand
                if best[1] <= bound:
                    return best
        rng = random.Random(0)
        order = list(range(len(self.buffers)))
        deadline = time.perf_counter() + self.TIME_BUDGET_S
        for _ in range(self.SHUFFLES):
            if time.perf_counter() > deadline:
                break
            rng.shuffle(order)
            # keep the largest buffers early: shuffle within size classes
            order.sort(key=lambda i: -self.buffers[i][0].bit_length())
            for tightest in (False, True):
                cand = self._place(order, tightest)
                if cand[1] < best[1]:
                    best = cand
            if best[1] <= bound:
                break
        if best[1] > bound:
            exact = self._in_windows(bound) or self._branch_and_bound(bound, best[1])
            if exact is not None:
                best = exact
        return best

    SEARCH_NODES = 100_000  # placements the exact search may try before it gives up ...
    SEARCH_S = 1.0          # ... or seconds it may take
    SEARCH_MAX_BUFFERS = 300  # one level of recursion a buffer

    def _branch_and_bound(self, bound: int, above: int, active=None, pinned=None,
                          deadline=None) -> tuple[list[int], int] | None:
        """A placement with a smaller top than `above` (the bound itself if there is one
        within SEARCH_NODES placements), or None. Complete: pushed down as far as it
        goes, every buffer of an optimal placement sits at 0 or on the end of a buffer
        whose lifetime overlaps; placed in the order of their offsets, that buffer is
        already placed. So the search places, at each step, any unplaced buffer at 0 or
        on the end of a placed neighbour, at or above the last offset used (ties in
        index order: each placement is reached once), and cuts a branch whose top
        reaches the best found, or where at some step the buffers still to place need
        more bytes than are free between the last offset and the best top. The
        heuristics miss the bound on a few models (a small buffer in the one gap a large
        one needed); there the buffers are few.

        `active` (indices) are the buffers to place, all of them by default; `pinned`
        ({index: offset}) are already placed and stay where they are (the argument
        above holds with them: a buffer resting on a pinned one finds its end among the
        candidates); any other buffer is left out. The result's offsets are those of
        active and pinned buffers (None elsewhere)."""
        import time
        size = [aligned(s) for s, _, _ in self.buffers]
        n = len(size)
        pinned = pinned or {}
        active = list(range(n)) if active is None else list(active)
        if len(active) > self.SEARCH_MAX_BUFFERS:
            return None
        deadline = deadline or time.perf_counter() + self.SEARCH_S
        present = sorted(set(active) | set(pinned))
        meets = {i: [j for j in present if j != i and self.buffers[j][1] <= self.buffers[i][2]
                     and self.buffers[i][1] <= self.buffers[j][2]] for i in active}
        live_at = [[] for _ in range(max(self.buffers[i][2] for i in present) + 1)]
        for i in present:
            for t in range(self.buffers[i][1], self.buffers[i][2] + 1):
                live_at[t].append(i)
        need = [sum(size[i] for i in live if i not in pinned) for live in live_at]
        at: list[int | None] = [None] * n
        for i, o in pinned.items():
            at[i] = o
        best: list = [None, above]
        nodes = 0

        def room(low: int) -> bool:
            """Whether, at every step, the unplaced buffers fit in the bytes between low
            and the best top that no placed buffer takes."""
            top = best[1] - 1
            for t, live in enumerate(live_at):
                if need[t] == 0:
                    continue
                taken = sum(max(0, min(at[j] + size[j], top) - max(at[j], low))
                            for j in live if at[j] is not None)
                if need[t] > top - low - taken:
                    return False
            return True

        def fits(i: int, o: int) -> bool:
            return all(at[j] is None or at[j] >= o + size[i] or at[j] + size[j] <= o
                       for j in meets[i])

        def place(k: int, low: int, last: int, top: int) -> bool:
            nonlocal nodes
            if k == len(active):
                best[0], best[1] = list(at), top
                return top <= bound
            nodes += 1
            if nodes > self.SEARCH_NODES or (nodes % 256 == 0
                                             and time.perf_counter() > deadline):
                raise TimeoutError
            moves = []
            for i in active:
                if at[i] is not None:
                    continue
                cands = {0} | {at[j] + size[j] for j in meets[i] if at[j] is not None}
                for o in cands:
                    if (o > low or (o == low and i > last)) and o + size[i] < best[1] \
                            and fits(i, o):
                        moves.append((o, -size[i], i))
            for o, _, i in sorted(moves):
                if o + size[i] >= best[1]:
                    continue
                at[i] = o
                first, last = self.buffers[i][1], self.buffers[i][2]
                for t in range(first, last + 1):
                    need[t] -= size[i]
                if room(o) and place(k + 1, o, i, max(top, o + size[i])):
                    return True
                for t in range(first, last + 1):
                    need[t] += size[i]
                at[i] = None
            return False

        try:
            place(0, 0, -1, max((o + size[i] for i, o in pinned.items()), default=0))
        except TimeoutError:
            pass
        return None if best[0] is None else (best[0], best[1])

    WINDOW_BUFFERS = 12     # at least this many buffers a window of the windowed search

    def _in_windows(self, bound: int) -> tuple[list[int], int] | None:
        """The exact search a stretch of steps at a time: the buffers first used in
        each window are placed at or under the bound with the earlier windows' buffers
        that are still live pinned where they were put; None as soon as a window
        fails. Not complete (an earlier window's choice can leave a later one no
        room), but each window's search is small: on a 54-buffer transformer whose
        whole search did not end in two minutes, the halves each took 10 ms. The
        windows end where the fewest buffers cross from one step to the next."""
        import time
        b = self.buffers
        steps = max(last for _, _, last in b) + 1
        crossing = [0] * steps          # buffers live at step t and at t + 1
        for _, first, last in b:
            for t in range(first, last):
                crossing[t] += 1
        fewest = min(crossing[:-1], default=0)
        first_at: list[list[int]] = [[] for _ in range(steps)]
        for i, (_, first, _) in enumerate(b):
            first_at[first].append(i)
        windows, current = [], []
        for t in range(steps):
            current += first_at[t]
            if current and (t == steps - 1 or (crossing[t] <= fewest + 1
                                               and len(current) >= self.WINDOW_BUFFERS)):
                windows.append(current)
                current = []
        if len(windows) < 2:
            return None
        deadline = time.perf_counter() + self.SEARCH_S
        at: dict[int, int] = {}
        for window in windows:
            start = min(b[i][1] for i in window)
            pinned = {i: o for i, o in at.items() if b[i][2] >= start}
            found = self._branch_and_bound(bound, bound + 1, window, pinned, deadline)
            if found is None:
                return None
            at.update({i: found[0][i] for i in window})
        return [at[i] for i in range(len(b))], max(at[i] + aligned(b[i][0]) for i in at)

    def offsets(self) -> list[int]:
        if getattr(self, "_best", None) is None:
            self._best = self._search()
        return list(self._best[0])

    def arena_size(self) -> int:
        self.offsets()
        return self._best[1]


@dataclass
class MemoryPlan:
    """Where each tensor lives: 'input'/'output' (user buffers), 'const', or
    an arena offset. Aliases resolve to the tensor whose bytes they view."""
    offsets: dict[str, int] = field(default_factory=dict)
    alias_of: dict[str, str] = field(default_factory=dict)
    scratch: dict[int, int] = field(default_factory=dict)   # node index -> arena offset
    arena_bytes: int = 0
    lower_bound: int = 0
    live_bytes: list[int] = field(default_factory=list)     # per node, while it runs
    # The lower bound in the graph's node order with inplace_steps as they are
    # (what reorder=False gives; memory.schedule may do better).
    original_lower_bound: int = 0
    # Several workspace pools (empty: the one arena). Then offsets and scratch
    # are offsets inside the pool named by pool_of[tensor] / scratch_pool[step],
    # and arena_bytes is the sum of the pools' planned bytes.
    pools: list["Pool"] = field(default_factory=list)
    pool_of: dict[str, str] = field(default_factory=dict)
    scratch_pool: dict[int, str] = field(default_factory=dict)

    # Views at a byte offset into their alias_of tensor (a Concat's inputs,
    # concat_views); a view missing here starts where its source does.
    view_offset: dict[str, int] = field(default_factory=dict)

    def root(self, name: str) -> str:
        while name in self.alias_of:
            name = self.alias_of[name]
        return name

    def byte_offset(self, name: str) -> int:
        """Where name's bytes start in its root's buffer."""
        at = 0
        while name in self.alias_of:
            at += self.view_offset.get(name, 0)
            name = self.alias_of[name]
        return at

    def arena_offset(self, name: str) -> int:
        """name's offset in the arena (or in its pool)."""
        return self.offsets[self.root(name)] + self.byte_offset(name)


@dataclass
class Pool:
    """One workspace pool: its name, the bytes the user gave it (capacity), and
    what the plan uses of it (bytes: its arena; lower_bound: the largest sum of
    its buffers live at once; buffers: how many it holds)."""
    name: str
    capacity: int
    bytes: int = 0
    lower_bound: int = 0
    buffers: int = 0

    def as_dict(self) -> dict:
        return {"name": self.name, "size_bytes": self.capacity, "used_bytes": self.bytes,
                "lower_bound": self.lower_bound, "buffers": self.buffers}


def last_reads(g: Graph, root) -> dict[str, int]:
    """Per buffer (root(name)), the last step that reads it (fused tails included)."""
    last: dict[str, int] = {}
    for step, n in enumerate(g.nodes):
        for part in [n] + n.tail:
            for i in part.inputs:
                if i:
                    last[root(i)] = step
    return last


def inplace_steps(g: Graph) -> dict[int, int | str]:
    """{node index: input index} of the kernels that will write their output over
    that input's buffer: the operator can (Op.inplace_input), the input is an
    activation (not a model input/output or constant) read for the last time by
    this node and by nothing else in it (its fused tail included), and the
    output is not a model output. Or {node index: tensor name}: the output takes
    over the buffer of a fused tail's operand (a residual add), see
    _tail_operands_to_overwrite. Only "read for the last time here" depends on
    the execution order (memory.schedule relies on that split)."""
    root = view_root(g)
    io = set(g.inputs) | set(g.outputs)
    last = last_reads(g, root)
    out = {}
    for step, n in enumerate(g.nodes):
        for value, r in inplace_candidates(g, n, root, io):
            if last.get(r) == step:
                out[step] = value
                break
    return out


def trim_inplace(g: Graph, inplace: dict[int, int | str],
                 scratch_bytes: dict[int, int] | None = None,
                 io_in_workspace: bool = False) -> dict[int, int | str]:
    """inplace without the writes that raise the order's peak: an output larger
    than the input it overwrites sizes that buffer for the output over the
    input's whole life, which costs where the input lives long (a branch point
    whose other branch runs in between). Any subset of inplace_steps is valid."""
    def curve(ip):
        life = lifetimes(g, scratch_bytes, ip, io_in_workspace)
        p = LinearPlanner()
        for b in life.buffers():
            p.add_buffer(*b)
        return life, p.live_bytes()
    life, live = curve(inplace)
    best = max(live, default=0)
    for step in sorted(inplace):
        n, value = g.nodes[step], inplace[step]
        src = value if isinstance(value, str) else n.inputs[value]
        if g.tensors[n.kernel_outputs[0]].nbytes <= g.tensors[src].nbytes:
            continue
        # Dropping it shrinks only that buffer: worth a try if it is live at a peak step.
        r = src
        while r in life.alias_of:
            r = life.alias_of[r]
        _, first, last = life.tensors[r]
        if best not in live[first:last + 1]:
            continue
        trial = {k: v for k, v in inplace.items() if k != step}
        trial_life, trial_live = curve(trial)
        if max(trial_live, default=0) < best:
            inplace, life, live, best = trial, trial_life, trial_live, max(trial_live)
    return inplace


def view_parents(g: Graph) -> dict[str, tuple[str, int]]:
    """name -> (the tensor whose bytes it views, its byte offset there): an alias
    node's output views its input from the start; a concat_views node's inputs
    view its output one after the other."""
    out = {}
    for n in g.nodes:
        if n.alias:
            out[n.outputs[0]] = (n.inputs[0], 0)
        elif n.concat_views:
            at = 0
            for i in n.inputs:
                out[i] = (n.outputs[0], at)
                at += g.tensors[i].nbytes
    return out


def view_root(g: Graph):
    """name -> the tensor whose bytes it views (through view nodes only)."""
    alias_of = {name: parent for name, (parent, _) in view_parents(g).items()}

    def root(x):
        while x in alias_of:
            x = alias_of[x]
        return x
    return root


# Kernels that must not write over their input in this planning, whatever
# Op.inplace_input says: the LLVM backend's loop nests that read their whole
# input while writing (mtvm.codegen.llvm.refuses_inplace). A context variable, so
# that every path of the scheduler (orders, trims, problems) sees it without a
# parameter each.
_NO_INPLACE: ContextVar = ContextVar("mtvm_no_inplace", default=lambda node, graph: False)


@contextmanager
def no_inplace(refuses):
    """Within the block, the kernels for which refuses(node, graph) is true never
    take their input's buffer."""
    token = _NO_INPLACE.set(refuses)
    try:
        yield
    finally:
        _NO_INPLACE.reset(token)


def inplace_candidates(g: Graph, n, root, io) -> list[tuple[int | str, str]]:
    """What node n could write its output over, in order of preference, as
    (inplace_steps value, root of the buffer taken over): every condition of
    inplace_steps but the order-dependent one (that buffer is read for the last
    time at n)."""
    from ..ops.base import get_op
    if not n.has_kernel or _NO_INPLACE.get()(n, g):
        return []
    op = get_op(n.op, n.domain)
    idx = op.inplace_input(n, g)
    outs = [o for o in n.kernel_outputs if o]
    if len(outs) != 1 or outs[0] in io or len(n.kernel_outputs) != 1 or \
            _in_concat_slice(g, outs[0]):    # the output has its bytes: a Concat's slice
        return []
    if idx is None and getattr(op, "epilogue_inplace", False):
        return [(name, root(name)) for name in _tail_operands_to_overwrite(g, n, outs[0], root, io)
                if not _in_concat_slice(g, name)]
    if idx is None:
        return []
    r = root(n.inputs[idx])
    if r in io or g.tensors[r].is_const or _in_concat_slice(g, n.inputs[idx]):
        return []
    others = [i for j, i in enumerate(n.inputs) if j != idx and i]
    others += [i for t in n.tail for i in t.inputs[1:] if i]
    if any(root(i) == r for i in others):
        return []
    return [(idx, r)]


def _in_concat_slice(g: Graph, name: str) -> bool:
    """Whether name's bytes are (a view of) one input of a concat_views Concat: an
    output written over them could be larger than the slice and run into the next."""
    slices = {i for m in g.nodes if m.concat_views for i in m.inputs}
    if not slices:
        return False
    views = view_parents(g)
    while name not in slices and name in views:
        name = views[name][0]
    return name in slices


def _tail_operands_to_overwrite(g, n, out, root, io) -> list[str]:
    """A residual add fused into an anchor that supports it (Op.epilogue_inplace:
    each output element is stored right after its tail read the operand at the
    same index): the output may take over that operand's buffer when the operand
    is read there for the last time, only once, and has the output's layout."""
    y = g.tensors[out]
    reads = [i for part in [n] + n.tail for i in part.inputs if i]
    names = []
    for t in n.tail:
        for name in t.inputs[1:]:
            if not name:
                continue
            r, v = root(name), g.tensors[name]
            if tuple(v.shape) != tuple(y.shape) or v.dtype != y.dtype or r in io or \
                    g.tensors[r].is_const or sum(root(i) == r for i in reads) != 1:
                continue
            names.append(name)
    return names


# -- Concat written in place by its producers ------------------------------------------------
def concat_views(g: Graph, inplace: dict, scratch_bytes: dict[int, int] | None = None,
                 io_in_workspace: bool = False) -> tuple[Graph, dict] | None:
    """(a copy of g, its in-place writes) for g in its final order with its
    in-place writes decided, the Concats written by their producers: each input
    a view of the output at its byte offset, so no kernel copies it
    (concat_views). A Concat qualifies when its inputs are contiguous slices of
    the output (every dimension before the axis is 1), each input is an
    activation of its own written by a kernel (a kernel that wrote it over its
    own input writes it into the slice instead), no in-place write takes over
    one of them, and the slices keep the planner's alignment (a kernel may store
    up to it). Taken one Concat at a time in order, each only if the order's
    peak does not rise: the views tie the inputs' lifetimes to the output's,
    which costs when one input (a U-Net's skip connection) is written long
    before the others. None: none taken."""
    io = set(g.inputs) | set(g.outputs)
    h = g.copy()
    peak = order_peak(h, scratch_bytes, inplace, io_in_workspace)
    taken = False
    for n in h.nodes:
        drop = _concat_can_view(h, n, inplace, io)
        if drop is None:
            continue
        n.concat_views = True
        trial_inplace = {k: v for k, v in inplace.items() if k not in drop}
        scratch = {k: b for k, b in (scratch_bytes or {}).items() if h.nodes[k].has_kernel}
        trial = order_peak(h, scratch, trial_inplace, io_in_workspace) \
            if _inplace_still_valid(h, trial_inplace) else None
        if trial is None or trial > peak:
            n.concat_views = False
            continue
        peak, inplace, taken = trial, trial_inplace, True
    return (h, inplace) if taken else None


def _concat_can_view(g: Graph, n, inplace: dict, io: set) -> set[int] | None:
    """None if Concat n cannot be views of its output, else the steps whose
    in-place write of one of its inputs gives way to the slice."""
    if n.op != "Concat" or n.domain or n.tail or not n.has_kernel:
        return None
    y = g.tensors[n.outputs[0]]
    axis = n.attrs.get("axis", 0) % max(len(y.shape), 1)
    if n.outputs[0] in io or any(int(d) != 1 for d in y.shape[:axis]):
        return None
    if len(set(n.inputs)) != len(n.inputs) or "" in n.inputs:
        return None
    writers = {o: m for m in g.nodes if m.has_kernel for o in m.kernel_outputs if o}
    taken_over = {v if isinstance(v, str) else g.nodes[k].inputs[v] for k, v in inplace.items()}
    written_over = {g.nodes[k].kernel_outputs[0]: k for k in inplace}
    views = view_parents(g)
    for name in [n.outputs[0]] + n.inputs:
        if name in views or name in taken_over:
            return None
    for name in n.inputs:
        x = g.tensors[name]
        if name in io or x.is_const or name not in writers or x.dtype != y.dtype or \
                x.nbytes == 0 or x.nbytes % ALIGN:
            return None
    if n.outputs[0] in written_over:
        return None
    return {written_over[name] for name in n.inputs if name in written_over}


def _inplace_still_valid(g: Graph, inplace: dict) -> bool:
    """Every in-place write still overwrites a buffer read for the last time there
    (with the views, a Concat's input shares its last read with the output's), and
    none overwrites a Concat's input (an output larger than the slice would run
    into the next)."""
    root = view_root(g)
    last = last_reads(g, root)
    for step, v in inplace.items():
        src = v if isinstance(v, str) else g.nodes[step].inputs[v]
        if _in_concat_slice(g, src) or last.get(root(src)) != step:
            return False
    return True


@dataclass
class Lifetimes:
    """The buffers of one execution order: the tensors that own arena bytes
    (name -> (bytes, first step, last step)) and the kernels' scratch
    (step -> bytes, live at that step only); alias_of maps views and in-place
    outputs to the tensor whose bytes they use."""
    alias_of: dict[str, str]
    tensors: dict[str, tuple[int, int, int]]
    scratch: dict[int, int]
    view_offset: dict[str, int] = field(default_factory=dict)

    def buffers(self) -> list[tuple[int, int, int]]:
        return list(self.tensors.values()) + [(b, i, i) for i, b in self.scratch.items()]


def live_steps(g: Graph, root) -> tuple[dict[str, int], dict[str, int]]:
    """(first, last): per buffer (root(name) of every kernel output), the step that
    first writes it and the last step that reads or writes it (fused tails included)."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for step, n in enumerate(g.nodes):
        for o in n.kernel_outputs:
            if o:
                r = root(o)
                first.setdefault(r, step)
                last[r] = max(last.get(r, step), step)
        for part in [n] + n.tail:
            for i in part.inputs:
                if i:
                    last[root(i)] = step
    return first, last


def lifetimes(g: Graph, scratch_bytes: dict[int, int] | None = None,
              inplace: dict[int, int] | None = None, io_in_workspace: bool = False) -> Lifetimes:
    """Lifetimes in execution order (see plan_memory)."""
    views = view_parents(g)
    alias_of = {name: parent for name, (parent, _) in views.items()}
    view_offset = {name: at for name, (_, at) in views.items() if at}
    for step, idx in (inplace or {}).items():
        n = g.nodes[step]
        alias_of[n.kernel_outputs[0]] = idx if isinstance(idx, str) else n.inputs[idx]

    def root(name):
        while name in alias_of:
            name = alias_of[name]
        return name
    nbytes: dict[str, int] = {}
    for name, t in g.tensors.items():
        if t.is_const:        # never in the arena (and the bulk of the tensors)
            continue
        r = root(name)
        nbytes[r] = max(nbytes.get(r, 0), t.nbytes)
    io = set(g.inputs) | set(g.outputs)
    first, last = live_steps(g, root)
    if io_in_workspace:
        end = max(len(g.nodes) - 1, 0)
        for name in g.inputs:
            if name in g.tensors and not g.tensors[name].is_const:
                first[name] = 0
                last.setdefault(name, 0)
        for name in g.outputs:
            if name in first:
                last[name] = end
        io = set()
    # A zero-size tensor still gets a (minimal) slot: its kernel gets a valid pointer.
    tensors = {name: (max(nbytes[name], 1), f, last[name]) for name, f in first.items()
               if name not in io and not g.tensors[name].is_const}
    scratch = {i: b for i, b in (scratch_bytes or {}).items() if b}
    return Lifetimes(alias_of, tensors, scratch, view_offset)


def order_peak(g: Graph, scratch_bytes: dict[int, int] | None = None,
               inplace: dict[int, int] | None = None, io_in_workspace: bool = False) -> int:
    """The lower bound of the arena for the graph's node order (what plan_memory
    reports as lower_bound), without placing anything."""
    p = LinearPlanner()
    for b in lifetimes(g, scratch_bytes, inplace, io_in_workspace).buffers():
        p.add_buffer(*b)
    return p.lower_bound()


def plan_memory(g: Graph, scratch_bytes: dict[int, int] | None = None,
                planner_cls=GreedyPlanner, inplace: dict[int, int] | None = None,
                io_in_workspace: bool = False, pools=None) -> MemoryPlan:
    """Lifetimes in execution order -> arena offsets. `scratch_bytes` maps a
    node index to the scratch its kernel needs while it runs; `inplace` (from
    inplace_steps) the nodes whose output takes over an input's buffer: the
    output becomes an alias of that input, the buffer sized for the larger.
    io_in_workspace: the model's inputs (live from the start to their last use)
    and outputs (from their producer to the end) get arena offsets too.
    pools: [(name, bytes), ...] splits the buffers over several pools
    (split_pools); None or [] plans the one arena."""
    life = lifetimes(g, scratch_bytes, inplace, io_in_workspace)
    plan = MemoryPlan(alias_of=life.alias_of, view_offset=life.view_offset)
    if pools:
        return _plan_pools(g, life, plan, pools, planner_cls)
    planner = planner_cls()
    ids = {name: planner.add_buffer(*b) for name, b in life.tensors.items()}
    scratch_ids = {i: planner.add_buffer(b, i, i) for i, b in life.scratch.items()}
    offs = planner.offsets()
    plan.offsets = {name: offs[i] for name, i in ids.items()}
    plan.scratch = {step: offs[i] for step, i in scratch_ids.items()}
    plan.arena_bytes = planner.arena_size()
    plan.lower_bound = planner.lower_bound()
    plan.original_lower_bound = plan.lower_bound
    plan.live_bytes = (planner.live_bytes() + [0] * len(g.nodes))[:len(g.nodes)]
    return plan


# -- several workspace pools ------------------------------------------------------------------
def heat(accesses: int, size: int, first: int, last: int) -> tuple:
    """The order in which buffers claim the first pools, hottest first: kernel
    accesses per step of life (accesses / live steps = the buffer's traffic,
    bytes x accesses, per byte-step of pool it occupies), then the larger
    traffic (bytes x accesses), then the earlier first use. A kernel's scratch
    (written and read by its kernel in its one step) scores 2; an activation
    written by one kernel and read by the next, 1; one written once and read
    once, live over ten steps (a skip connection), 0.2."""
    return (-accesses / (last - first + 1), -size * accesses, first)


def _accesses(g: Graph, life: Lifetimes) -> dict[str, int]:
    """Kernel reads and writes of each buffer (tensor root): one per kernel
    output written and per input (fused tails included) read."""
    def root(name):
        while name in life.alias_of:
            name = life.alias_of[name]
        return name
    acc: dict[str, int] = {}
    for n in g.nodes:
        if not n.has_kernel:
            continue
        for name in [o for o in n.kernel_outputs if o] + \
                [i for part in [n] + n.tail for i in part.inputs if i]:
            r = root(name)
            acc[r] = acc.get(r, 0) + 1
    return acc


def split_pools(buffers: dict, accesses: dict, pools: list[tuple[str, int]],
                planner_cls=None, names=None) -> tuple[dict, list[list[int]]]:
    """buffers {key: (bytes, first, last)}, accesses {key: count} -> ({key: pool
    index}, per pool the offsets planner's result). Buffers are taken hottest
    first (heat) and each goes into the first pool whose live bytes stay within
    its size over the buffer's life; each pool is then placed by its own
    planner, and a pool whose placement overflows (fragmentation above its
    lower bound) hands its coldest buffers on to the next pools. MtvmError
    (one line) when they do not fit."""
    planner_cls = planner_cls or GreedyPlanner
    order = sorted(buffers, key=lambda k: heat(accesses.get(k, 1), *buffers[k]) + (str(k),))
    steps = max((b[2] for b in buffers.values()), default=0) + 1
    live = [[0] * steps for _ in pools]
    where: dict = {}

    def fits(p, key):
        size, f, l = buffers[key]
        return max(live[p][f:l + 1]) + aligned(size) <= pools[p][1]

    def put(p, key, sign=1):
        size, f, l = buffers[key]
        for s in range(f, l + 1):
            live[p][s] += sign * aligned(size)
        if sign > 0:
            where[key] = p

    def fail(key):
        need = LinearPlanner()
        for b in buffers.values():
            need.add_buffer(*b)
        size, f, l = buffers[key]
        total = sum(c for _, c in pools)
        raise MtvmError(
            "workspace pools " + ", ".join(f"{n}:{c}" for n, c in pools)
            + f" ({total} bytes in all) are too small: the activations need at least "
            f"{need.lower_bound()} bytes live at once, and a {aligned(size)}-byte buffer "
            f"(live over operators {f}..{l}) fits in no pool; make the pools larger or "
            "add one (--workspace-pools NAME:BYTES,...)")

    for key in order:
        p = next((p for p in range(len(pools)) if fits(p, key)), None)
        if p is None:
            fail(key)
        put(p, key)
    results = []
    for p in range(len(pools)):
        while True:
            mine = [k for k in order if where.get(k) == p]
            planner = planner_cls()
            for k in mine:
                planner.add_buffer(*buffers[k])
            offs = planner.offsets() if mine else []
            if not mine or planner.arena_size() <= pools[p][1]:
                results.append(dict(zip(mine, offs)))
                break
            coldest = mine[-1]           # the placement overflowed: pass it on
            put(p, coldest, -1)
            del where[coldest]
            q = next((q for q in range(p + 1, len(pools)) if fits(q, coldest)), None)
            if q is None:
                fail(coldest)
            put(q, coldest)
    return where, results


def _plan_pools(g: Graph, life: Lifetimes, plan: MemoryPlan, pools, planner_cls) -> MemoryPlan:
    buffers = dict(life.tensors)
    buffers.update({("scratch", i): (b, i, i) for i, b in life.scratch.items()})
    acc = _accesses(g, life)
    acc.update({("scratch", i): 2 for i in life.scratch})   # written and read by its kernel
    where, offsets = split_pools(buffers, acc, list(pools), planner_cls)
    whole = LinearPlanner()
    for b in buffers.values():
        whole.add_buffer(*b)
    for p, (name, cap) in enumerate(pools):
        mine = offsets[p]
        lin = LinearPlanner()
        for k in mine:
            lin.add_buffer(*buffers[k])
        top = max((o + aligned(buffers[k][0]) for k, o in mine.items()), default=0)
        plan.pools.append(Pool(name, int(cap), top, lin.lower_bound(), len(mine)))
        for k, o in mine.items():
            if isinstance(k, tuple):
                plan.scratch[k[1]] = o
                plan.scratch_pool[k[1]] = name
            else:
                plan.offsets[k] = o
                plan.pool_of[k] = name
    plan.arena_bytes = sum(p.bytes for p in plan.pools)
    plan.lower_bound = whole.lower_bound()
    plan.original_lower_bound = plan.lower_bound
    plan.live_bytes = (whole.live_bytes() + [0] * len(g.nodes))[:len(g.nodes)]
    return plan
