"""Search strategies of `mtvm tune` replayed offline on one measured table.

    python bench/tune_search.py measure [--target host|x86-64-v3] [--runs N] [-o TABLE.json] [MODEL ...]
    python bench/tune_search.py replay TABLE.json [--seeds N] [--md OUT.md]

measure: every candidate of every layer with at least --min-candidates
candidates (the LLVM backend's nests, mtvm/tune/jit.py) of the models
(default ic_resnet8, kws_dscnn, fomo_mbv2 from ../shared/models) is compiled
into ONE JIT module per layer with its default, checked against the reference
and timed in paired rounds (each candidate in turn, the fastest round per
call), so a layer's figures are comparable with each other. The table (JSON)
gives, per model and layer, the key, op, shapes and each candidate's schedule,
knobs, status and figure (ns per call).

replay: the strategies of mtvm/tune/search.py (LayerSearch, the real code)
run on the table instead of a device, for many seeds: exhaustive order
(space.py's nearest-the-default-first order), random order, simulated
annealing, and the cost-model search. As in a C tuning run, all layers of a
model are searched in lock-step (trial t proposes one candidate per layer,
their figures come back together; the cost model is shared by the layers of
the model and refitted between trials); trial 1 is the default (the
baseline). Per layer and seed: the trials until the best found is within 5 %
(2 %) of the layer's best, and best-found / best after N trials. Reported:
means over layers and seeds, and how often each strategy has found the best
after N trials.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tune import cpu_name  # noqa: E402  (bench/tune.py: the machine's CPU, for the table)

DEFAULT_MODELS = os.path.join(HERE, "..", "..", "shared", "models")
MODELS = ["ic_resnet8", "kws_dscnn", "fomo_mbv2"]
STRATEGIES = ["exhaustive", "random", "annealing", "model"]
NS = (8, 16, 32)


# -- measure ---------------------------------------------------------------------------------

def measure(args) -> int:
    import mtvm
    from mtvm.tune import records as R
    from mtvm.tune.jit import Batch, llvm_layers
    table = {"what": "every candidate of the LLVM backend's tunable layers, one JIT module "
                     "per layer, paired rounds, fastest round per call (ns)",
             "cpu": cpu_name(), "machine": platform.machine(), "runs": args.runs,
             "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "models": {}}
    for name in args.models or MODELS:
        path = name if name.endswith(".onnx") else os.path.join(args.models_dir, name + ".onnx")
        name = os.path.splitext(os.path.basename(path))[0]
        cm = mtvm.compile(path, backend="llvm", target=args.target)
        table["target"] = cm.target.name
        layers, sites = llvm_layers(cm)
        out = []
        for lay in layers:
            if len(lay.candidates) < args.min_candidates:
                continue
            t0 = time.monotonic()
            res = Batch(sites[lay.key], lay.candidates, 0).run(args.runs)
            cands = []
            for c in lay.candidates:
                o = res[c.ident]
                cands.append({"schedule": c.schedule, "knobs": c.knob_dict,
                              "status": o.status, "figure": o.figure, "spread": o.spread,
                              "error": o.error})
            ok = [x["figure"] for x in cands if x["status"] == R.OK]
            print(f"{name} {lay.key} {lay.kind} {lay.what}: {len(cands)} candidates, "
                  f"default {cands[0]['figure']:,.0f} ns, best {min(ok):,.0f} ns "
                  f"({cands[0]['figure'] / min(ok):.2f}x), {time.monotonic() - t0:.1f} s",
                  flush=True)
            out.append({"key": lay.key, "kind": lay.kind, "what": lay.what, "macs": lay.macs,
                        "count": lay.count, "candidates": cands})
        table["models"][name] = out
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(table, f, indent=1)
    print(f"wrote {args.output}")
    return 0


# -- replay ----------------------------------------------------------------------------------

def _layers(entries):
    """(Layer, {ident: figure or None}) per table entry."""
    from mtvm.tune.space import Candidate, Layer
    out = []
    for e in entries:
        lay = Layer(e["key"], e["kind"], e["what"], ["f"] * e.get("count", 1), [],
                    e.get("macs", 0))
        figs = {}
        for c in e["candidates"]:
            cand = Candidate.make(c["schedule"], c["knobs"])
            lay.candidates.append(cand)
            figs[cand.ident] = c["figure"] if c["status"] == "ok" else None
        out.append((lay, figs))
    return out


def replay_model(entries, strategy: str, seed: int, trials: int):
    """{key: [best figure after trial 1, 2, ...]} for one model, one strategy, one seed."""
    from mtvm.tune.cost_model import CostModel
    from mtvm.tune.search import LayerSearch
    rng = random.Random(seed)
    layers = _layers(entries)
    model = CostModel(seed=seed) if strategy == "model" else None
    searches, curves = [], {}
    for lay, figs in layers:
        s = LayerSearch(lay, set(), trials, rng, model=model,
                        strategy="exhaustive" if strategy == "random" else strategy)
        if strategy == "random":      # a random order, the default first
            rest = s.untried[1:]
            rng.shuffle(rest)
            s.untried = s.untried[:1] + rest
            s.strategy = "exhaustive"
        searches.append((s, figs))
        curves[lay.key] = []
    for _ in range(trials):
        got = []
        for s, figs in searches:
            c = s.propose()
            if c is not None:
                got.append((s, c, figs[c.ident]))
        if not got:
            break
        for s, c, f in got:
            s.result(c, f)
        for s, figs in searches:
            curves[s.layer.key].append(s.best_figure)
    return curves


def _trials_to(curve, target):
    for i, f in enumerate(curve):
        if f is not None and f <= target:
            return i + 1
    return None


def replay(args) -> int:
    with open(args.table) as f:
        table = json.load(f)
    trials = max(NS)
    stats = {s: {"t5": [], "t2": [], **{f"r{n}": [] for n in NS},
                 **{f"hit{n}": [] for n in NS}} for s in STRATEGIES}
    per_layer = {}
    layers = sum(len(v) for v in table["models"].values())
    sizes = [len(e["candidates"]) for v in table["models"].values() for e in v]
    t0 = time.monotonic()
    for strategy in args.strategies:
        for seed in range(args.seeds):
            for mname, entries in table["models"].items():
                curves = replay_model(entries, strategy, seed, trials)
                for e in entries:
                    ok = [c["figure"] for c in e["candidates"] if c["status"] == "ok"]
                    best = min(ok)
                    n = len(e["candidates"])
                    curve = curves[e["key"]]
                    curve = curve + [curve[-1]] * (trials - len(curve))
                    st = stats[strategy]
                    # a layer that never gets there in `trials`: counted as its size
                    st["t5"].append(_trials_to(curve, best * 1.05) or n)
                    st["t2"].append(_trials_to(curve, best * 1.02) or n)
                    for k in NS:
                        st[f"r{k}"].append(curve[k - 1] / best)
                        st[f"hit{k}"].append(curve[k - 1] <= best * 1.0000001)
                    per_layer.setdefault((mname, e["key"]), {}).setdefault(
                        strategy, []).append(_trials_to(curve, best * 1.05) or n)
        print(f"{strategy}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)

    def gmean(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    lines = [f"Table {os.path.basename(args.table)}: {table['cpu']}, {table['machine']}, "
             f"target {table.get('target')}, {layers} layers of "
             f"{', '.join(table['models'])} with {min(sizes)}-{max(sizes)} candidates "
             f"(mean {statistics.mean(sizes):.1f}); {args.seeds} seeds; lock-step per model, "
             f"trial 1 = the default.", "",
             "| strategy | trials to 5 % (mean) | to 2 % (mean) | "
             + " | ".join(f"best/opt @{n} (gmean)" for n in NS) + " | "
             + " | ".join(f"found opt @{n}" for n in NS) + " |",
             "|---|---|---|" + "---|" * (2 * len(NS))]
    for s in args.strategies:
        st = stats[s]
        lines.append(f"| {s} | {statistics.mean(st['t5']):.2f} | {statistics.mean(st['t2']):.2f} | "
                     + " | ".join(f"{gmean(st[f'r{n}']):.4f}" for n in NS) + " | "
                     + " | ".join(f"{100 * statistics.mean(st[f'hit{n}']):.0f} %" for n in NS)
                     + " |")
    lines += ["", "Per layer, trials to 5 % (mean over seeds):", "",
              "| model | key | size | " + " | ".join(args.strategies) + " |",
              "|---|---|---|" + "---|" * len(args.strategies)]
    for mname, entries in table["models"].items():
        for e in entries:
            row = per_layer[(mname, e["key"])]
            lines.append(f"| {mname} | {e['key'][:8]} {e['kind']} | {len(e['candidates'])} | "
                         + " | ".join(f"{statistics.mean(row[s]):.1f}" for s in args.strategies)
                         + " |")
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("models", nargs="*")
    m.add_argument("--models-dir", default=DEFAULT_MODELS)
    m.add_argument("--target", default="host")
    m.add_argument("--runs", type=int, default=15)
    m.add_argument("--min-candidates", type=int, default=6)
    m.add_argument("-o", "--output", default=os.path.join(
        HERE, "results", "2026-11-26-issue14-cost-model-table.json"))
    m.set_defaults(func=measure)
    r = sub.add_parser("replay")
    r.add_argument("table")
    r.add_argument("--seeds", type=int, default=50)
    r.add_argument("--strategies", nargs="+", default=STRATEGIES, choices=STRATEGIES)
    r.add_argument("--md", help="also write the tables here")
    r.set_defaults(func=replay)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
