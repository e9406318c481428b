"""A small cost model for `mtvm tune --search model` (NumPy only).

What it predicts: log(figure / the layer's default figure) of a candidate,
so that layers of very different sizes (and units) share one model: a
measurement of one layer informs the others that have the same schedule.

Features of a (layer, candidate) pair:
  - the schedule, one-hot;
  - each knob, named `schedule.knob`: numeric knobs as log2(value) (-1 for 0,
    which the LLVM nests' knobs use for "auto"), the raw value and a
    "== 0" indicator; booleans as 0/1; anything else one-hot per value;
  - the layer's workload, parsed from its description (space.describe_kernel:
    "f32 1x16x32x32 * 16x16x3x3 -> 1x16x32x32 group=16"): the op (with its
    fused tail) one-hot, log2 of the MACs, of the output size, of the output
    columns and rows, of the input and output channels, the kernel size,
    depthwise;
  - products of every pair of knob features of one schedule (squares of the
    numeric ones included), and of every numeric knob feature with every
    numeric workload feature (a tile's width matters relative to the row's).

Model: ridge regression on the standardized features, its penalty and the
interactions' weight (SCALES) chosen by exact leave-one-out error over a
small grid, and a bootstrap ensemble of it
(`members` resamples) for an uncertainty: predict() gives the mean and the
standard deviation over the members. Refitted lazily when measurements came
in since the last fit. Deterministic for a given seed.
"""
from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

ALPHAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
# The interactions' weight relative to the main effects (after standardizing):
# a smaller one penalizes them more (0: an additive model). Chosen with the
# penalty by leave-one-out error: with few points the additive model ranks
# best, the interactions earn their place as measurements come in.
SCALES = (0.0, 0.1, 0.3, 1.0)

_SHAPE = re.compile(r"^\d+(x\d+)*$")


def _log2(v: float) -> float:
    return math.log2(v) if v > 0 else -1.0


def _shapes(text: str) -> list[list[int]]:
    return [[int(d) for d in tok.split("x")] for tok in re.split(r"[\s,*]+", text)
            if _SHAPE.match(tok)]


def workload_features(kind: str, what: str) -> dict:
    """Features of a layer from its op (`Layer.kind`, a record's "op") and its
    description (`Layer.what`, a record's "layer"). Unparsable parts give none."""
    f = {f"op={kind}": 1.0}
    left, _, right = (what or "").partition(" -> ")
    ins, outs = _shapes(left), _shapes(right.split("=")[0] if "=" in right else right)
    out = outs[0] if outs else []
    w = ins[1] if len(ins) > 1 else []
    x = ins[0] if ins else []
    numel = int(np.prod(out)) if out else 0
    group = re.search(r"group=(\d+)", what or "")
    if len(out) == 4 and len(w) == 4:           # conv NCHW, weights OIHW
        macs = numel * int(np.prod(w[1:]))
        f.update({"w.cin": _log2(x[1] if len(x) == 4 else w[1]), "w.cout": _log2(out[1]),
                  "w.rows": _log2(out[2]), "w.cols": _log2(out[3]),
                  "w.kernel": float(w[2] * w[3]),
                  "w.depthwise": float(bool(group) and w[1] == 1)})
    elif out:                                   # matmul-like: [.., M, N], K the input's last
        k = x[-1] if x else 1
        macs = numel * k
        f.update({"w.cin": _log2(k), "w.cout": _log2(out[-1]),
                  "w.rows": _log2(out[-2] if len(out) > 1 else 1),
                  "w.cols": _log2(out[-1])})
    else:
        macs = 0
    if out:
        f["w.macs"] = _log2(macs)
        f["w.size"] = _log2(numel)
    return f


def knob_features(schedule: str, knobs: dict) -> tuple[dict, list[str]]:
    """({feature: value}, [names of the numeric ones]) of a candidate's knobs."""
    f = {f"s={schedule}": 1.0}
    numeric = []
    for k, v in sorted(knobs.items()):
        n = f"{schedule}.{k}"
        if isinstance(v, bool) or v is None:
            f[n] = float(bool(v))
            numeric.append(n)
        elif isinstance(v, (int, float)):
            f[n + ".log2"] = _log2(float(v))
            f[n] = float(v)
            f[n + "==0"] = float(v == 0)
            f[f"{n}={v}"] = 1.0
            numeric += [n + ".log2", n]
        else:
            f[f"{n}={v}"] = 1.0
    return f, numeric


def _knob(feature: str) -> str:
    """'sched.knob' of a knob feature ('sched.knob.log2', 'sched.knob=4', ...)."""
    base = feature.split("=")[0]
    return base[:-5] if base.endswith(".log2") else base


def features(kind: str, what: str, schedule: str, knobs: dict) -> dict:
    """The sparse feature dict of one (layer, candidate)."""
    wf = workload_features(kind, what)
    kf, numeric = knob_features(schedule, knobs)
    f = {**wf, **kf}
    knames = sorted(kf)
    for i, a in enumerate(knames):             # knob x knob (one schedule: all of them)
        for b in knames[i:]:
            if (a == b and a not in numeric) or (a != b and _knob(a) == _knob(b)):
                continue
            v = kf[a] * kf[b]
            if v:
                f[f"{a}*{b}"] = v
    wnum = [n for n in sorted(wf) if n.startswith("w.")]
    for a in numeric:                          # knob x workload
        for b in wnum:
            v = kf[a] * wf[b]
            if v:
                f[f"{a}*{b}"] = v
    return f


class CostModel:
    """Measurements of a tuning run (and of the records it resumes) -> predicted
    log(figure / default figure) of untried candidates, with an uncertainty."""

    def __init__(self, seed: int = 0, members: int = 8, alphas=ALPHAS, scales=SCALES):
        self.seed, self.members, self.alphas = seed, members, tuple(alphas)
        self.scales = tuple(scales)
        self.points: dict[tuple[str, str], tuple[dict, float]] = {}   # (key, ident) -> (feat, fig)
        self.default_figure: dict[str, float] = {}
        self.schedules: dict[str, str] = {}      # (key, ident) -> schedule, for counting
        self._feat: dict[tuple[str, str], dict] = {}
        self._fit = None
        self._dirty = True

    # -- data -------------------------------------------------------------------------
    def _features(self, key, kind, what, c) -> dict:
        k = (key, c.ident)
        if k not in self._feat:
            self._feat[k] = features(kind, what, c.schedule, c.knob_dict)
        return self._feat[k]

    def observe(self, layer, c, figure: float | None, default: bool = False) -> None:
        """One measurement of candidate c of `layer` (a space.Layer, or anything
        with key, kind and what); figure None (failed) is not learned from."""
        self._observe(layer.key, layer.kind, layer.what, c, figure, default)

    def _observe(self, key, kind, what, c, figure, default) -> None:
        if figure is None or not figure > 0 or not math.isfinite(figure):
            return
        if default:
            old = self.default_figure.get(key)
            self.default_figure[key] = figure if old is None else min(old, figure)
        pk = (key, c.ident)
        old = self.points.get(pk)
        if old is None or figure < old[1]:
            self.points[pk] = (self._features(key, kind, what, c), figure)
            self.schedules[pk] = c.schedule
        self._dirty = True

    def observe_records(self, records) -> int:
        """The ok records of a records file (resumed or --known-records): per key,
        those of its most frequent (board, unit). Returns how many were used."""
        from .space import Candidate
        ok = [r for r in records if r.get("status") == "ok" and r.get("figure")]
        groups = Counter((r["key"], r.get("board"), r.get("unit")) for r in ok)
        top = {}
        for (key, board, unit), n in groups.most_common():
            top.setdefault(key, (board, unit))
        used = 0
        for r in ok:
            if top[r["key"]] != (r.get("board"), r.get("unit")):
                continue
            c = Candidate.make(r.get("schedule", ""), r.get("knobs") or {})
            self._observe(r["key"], r.get("op", ""), r.get("layer", ""), c, r["figure"],
                          bool(r.get("default")))
            used += 1
        return used

    def relevant(self, schedules, exclude_key: str | None = None) -> int:
        """Usable points (their layer's default measured) of these schedules."""
        return sum(1 for (key, _), s in self.schedules.items()
                   if s in schedules and key != exclude_key and key in self.default_figure)

    # -- fitting ----------------------------------------------------------------------
    def _data(self):
        rows, ys = [], []
        for (key, _), (feat, fig) in sorted(self.points.items()):
            d = self.default_figure.get(key)
            if d is None:
                continue
            rows.append(feat)
            ys.append(math.log(fig / d))
        return rows, np.array(ys, dtype=np.float64)

    def fit(self) -> bool:
        """Refit on every usable point; False when there are fewer than 3."""
        if not self._dirty:
            return self._fit is not None
        self._dirty = False
        rows, y = self._data()
        if len(rows) < 3:
            self._fit = None
            return False
        names = sorted({n for r in rows for n in r})
        index = {n: i for i, n in enumerate(names)}
        X = np.zeros((len(rows), len(names)))
        for i, r in enumerate(rows):
            for n, v in r.items():
                X[i, index[n]] = v
        mu, sd = X.mean(0), X.std(0)
        keep = sd > 1e-9                        # constant columns carry nothing
        X = (X[:, keep] - mu[keep]) / sd[keep]
        inter = np.array(["*" in n for n in names])[keep]
        best = (float("inf"), self.alphas[-1], 1.0)
        for scale in self.scales:
            Xs = X * np.where(inter, scale, 1.0)
            err, alpha = self._alpha(Xs, y)
            if err < best[0] - 1e-12:
                best = (err, alpha, scale)
        _, alpha, scale = best
        colscale = np.where(inter, scale, 1.0)
        X = X * colscale
        rng = np.random.default_rng([self.seed, len(rows)])
        ws = []
        for m in range(self.members):
            idx = np.arange(len(y)) if m == 0 else rng.integers(0, len(y), len(y))
            ws.append(_ridge(X[idx], y[idx], alpha))
        self._fit = (index, keep, mu[keep], sd[keep] / np.where(colscale > 0, colscale, 1.0),
                     colscale > 0, ws, (alpha, scale))
        return True

    def _alpha(self, X, y) -> tuple[float, float]:
        """(least exact leave-one-out squared error, its penalty)."""
        yc = y - y.mean()
        n = len(y)
        if X.shape[1] == 0 or not X.any():
            return float(np.mean((yc * n / max(n - 1, 1)) ** 2)), self.alphas[-1]
        U, s, _ = np.linalg.svd(X, full_matrices=False)
        uy = U.T @ yc
        best, best_err = self.alphas[-1], float("inf")
        for a in self.alphas:
            shrink = s ** 2 / (s ** 2 + a)
            fitted = U @ (shrink * uy)
            h = (U ** 2) @ shrink + 1.0 / n
            err = float(np.mean(((yc - fitted) / np.maximum(1 - h, 1e-6)) ** 2))
            if err < best_err - 1e-12:
                best, best_err = a, err
        return best_err, best

    def predict(self, layer, cands) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) of the predicted log(figure / default) of each candidate of
        `layer`; zeros (no information) before there is anything to fit."""
        n = len(cands)
        if not self.fit():
            return np.zeros(n), np.zeros(n)
        index, keep, mu, sd, on, ws, _ = self._fit
        X = np.zeros((n, len(index)))
        for i, c in enumerate(cands):
            for name, v in self._features(layer.key, layer.kind, layer.what, c).items():
                j = index.get(name)
                if j is not None:
                    X[i, j] = v
        X = np.where(on, (X[:, keep] - mu) / sd, 0.0)
        P = np.stack([X @ w + b for w, b in ws])
        return P.mean(0), P.std(0)


def _ridge(X, y, alpha):
    """(weights, intercept) of ridge regression (intercept not penalized)."""
    ym = y.mean()
    xm = X.mean(0)
    Xc, yc = X - xm, y - ym
    n, d = Xc.shape
    if d <= n:
        w = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(d), Xc.T @ yc)
    else:                                        # the dual: n x n
        w = Xc.T @ np.linalg.solve(Xc @ Xc.T + alpha * np.eye(n), yc)
    return w, ym - xm @ w


__all__ = ["CostModel", "features", "workload_features", "knob_features"]
