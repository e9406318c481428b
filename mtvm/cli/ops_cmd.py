"""`mtvm ops`: the ONNX operators mtvm compiles, with their domain and opsets."""
from __future__ import annotations

import json

# Operators the ONNX loader handles itself instead of an op definition.
LOADER_OPS = {"Constant": "folded into a constant",
              "If": "inlined when its condition is a compile-time value",
              "Loop": "unrolled (a compile-time trip count)",
              "Scan": "unrolled"}
INTERNAL_DOMAINS = ("mtvm",)    # mtvm's own kernels, made by its passes, not read from models


def add_parser(sub) -> None:
    p = sub.add_parser("ops", help="list the supported ONNX operators (domain, opsets)",
                       description="The operators mtvm compiles: name, domain and the opsets "
                       "it reads them in. Per-operator dtypes (as tested against the ONNX "
                       "backend cases) are in docs/operators.md.")
    p.add_argument("name", nargs="?", help="show only operators whose name contains this "
                   "(case-insensitive)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def operators() -> list[dict]:
    """[{name, domain, min_opset, max_opset, note}] sorted by domain then name."""
    import onnx.defs

    from ..frontend.onnx_loader import MIN_OPSET
    from ..ops import REGISTRY
    latest = onnx.defs.onnx_opset_version()
    rows = []
    for (domain, name), op in REGISTRY.items():
        if domain in INTERNAL_DOMAINS:
            continue
        lo = max(op.min_opset, MIN_OPSET) if domain == "" else op.min_opset
        rows.append({"name": name, "domain": domain or "ai.onnx",
                     "min_opset": lo, "max_opset": latest if domain == "" else None,
                     "note": ""})
    for name, note in LOADER_OPS.items():
        rows.append({"name": name, "domain": "ai.onnx", "min_opset": MIN_OPSET,
                     "max_opset": latest, "note": note})
    return sorted(rows, key=lambda r: (r["domain"] != "ai.onnx", r["domain"], r["name"]))


def run(args) -> int:
    rows = operators()
    if args.name:
        rows = [r for r in rows if args.name.lower() in r["name"].lower()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [("operator", "domain", "opsets", "note")]
    for r in rows:
        opsets = (f"{r['min_opset']}-{r['max_opset']}" if r["max_opset"]
                  else f"{r['min_opset']}+")
        table.append((r["name"], r["domain"], opsets, r["note"]))
    widths = [max(len(t[i]) for t in table) for i in range(4)]
    for i, t in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(t, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    from ..frontend.onnx_loader import MIN_OPSET
    plural = "s" if len(rows) != 1 else ""
    print(f"{len(rows)} operator{plural}; a model of opset < {MIN_OPSET} is first converted to "
          f"opset {MIN_OPSET} (onnx.version_converter); dtypes per operator: docs/operators.md")
    return 0
