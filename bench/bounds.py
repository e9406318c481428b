"""The limits issue 13 sets, checked against one run's tables (bench/run_all.py).

Figures, not pass/fail of the suite: the check prints which limit each figure keeps or
misses, so a results file says by itself whether the run met them.

- host, per ISA: geometric mean of mtvm/onnxruntime <= 0.8 and no model above 1.2;
- Cortex-M: instructions per MAC <= 2.5 for float conv/matmul models, <= 3.0 for float
  recurrent ones (LSTM, GRU, RNN), <= 1.5 for int8 ones; an int8 (QDQ) model with a
  recurrent layer counts as recurrent: ONNX has no quantized LSTM or GRU, its layer is
  float in the model (dequantized inputs and weights) and runs in float; fewer
  instructions than emx-onnx-cgen where the peer compiles the model;
- the arena equal to its lower bound on the host and the board;
- int8 models' model flash within 5 % of emx-onnx-cgen's where the peer compiles them.
"""
from __future__ import annotations

import os

from host import geomean

HOST_GEOMEAN = 0.8
HOST_MAX = 1.2
PER_MAC_FLOAT = 2.5
PER_MAC_RECURRENT = 3.0
PER_MAC_INT8 = 1.5
FLASH_MARGIN = 1.05
RECURRENT_OPS = {"LSTM", "GRU", "RNN"}
QUANTIZED_OPS = {"QuantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger",
                 "MatMulInteger"}


def model_kind(path: str) -> tuple[bool, bool]:
    """(int8, recurrent) from the model's operators."""
    import onnx
    ops = {n.op_type for n in onnx.load(path, load_external_data=False).graph.node}
    return bool(ops & QUANTIZED_OPS), bool(ops & RECURRENT_OPS)


def _line(ok: bool, text: str) -> str:
    return f"- {'met' if ok else '**missed**'}: {text}"


def host_lines(rows: list[dict], isa: str) -> list[str]:
    ratios = {r["model"]: r["ratio"] for r in rows if "ratio" in r}
    errors = [r["model"] for r in rows if "ratio" not in r]
    if not ratios:
        return [_line(False, f"host {isa}: no model ran")]
    geo = geomean(ratios.values())
    worst = max(ratios, key=ratios.get)
    out = [_line(geo <= HOST_GEOMEAN, f"host {isa}: geometric mean mtvm/onnxruntime {geo:.2f} "
                 f"(limit {HOST_GEOMEAN}) over {len(ratios)} models"),
           _line(ratios[worst] <= HOST_MAX, f"host {isa}: highest {worst} {ratios[worst]:.2f} "
                 f"(limit {HOST_MAX})")]
    if errors:
        out.append(_line(False, f"host {isa}: no figure for {', '.join(errors)}"))
    return out


def device_lines(rows: list[dict], kinds: dict, board: str) -> list[str]:
    out, over, arena = [], [], []
    worst = {}
    for r in rows:
        if "per_mac" not in r:
            out.append(_line(False, f"{board}: {r['model']}: no figure ({r.get('error', '?')})"))
            continue
        int8, recurrent = kinds[r["model"]]
        if recurrent:
            group, limit = ("int8 with a float recurrent layer" if int8 else "float recurrent",
                            PER_MAC_RECURRENT)
        else:
            group, limit = ("int8", PER_MAC_INT8) if int8 else ("float", PER_MAC_FLOAT)
        if r["per_mac"] > limit:
            over.append(f"{r['model']} {r['per_mac']:.2f}")
        if group not in worst or r["per_mac"] > worst[group][1]:
            worst[group] = (r["model"], r["per_mac"], limit)
        if r["arena"] != r["lower_bound"]:
            arena.append(f"{r['model']} {r['arena']:,} > {r['lower_bound']:,}")
    for group, (model, per_mac, limit) in sorted(worst.items()):
        out.append(_line(per_mac <= limit, f"{board}: {group} models <= {limit} instructions/MAC "
                         f"(highest {model} {per_mac:.2f})"))
    if over:
        out.append(_line(False, f"{board}: above the limit: {', '.join(over)}"))
    out.append(_line(not arena, f"{board}: arena equal to its lower bound on every model"
                     + (f" (not: {', '.join(arena)})" if arena else "")))
    return out


def peer_lines(rows: list[dict], kinds: dict, board: str) -> list[str]:
    compared = [r for r in rows if "error" not in r.get("mtvm", {"error": 1})
                and "error" not in r.get("emx", {"error": 1})]
    skipped = [r["model"] for r in rows if r not in compared]
    more = [r["model"] for r in compared
            if r["mtvm"]["instructions"] >= r["emx"]["instructions"]]
    flash = {r["model"]: r["mtvm"]["model_flash"] / r["emx"]["model_flash"]
             for r in compared if kinds[r["model"]][0]}
    big = [f"{m} {f:.2f}" for m, f in flash.items() if f > FLASH_MARGIN]
    out = [_line(not more, f"{board}: fewer instructions than emx-onnx-cgen on all "
                 f"{len(compared)} models it compiles" + (f" (not: {', '.join(more)})" if more
                                                          else ""))]
    if flash:
        hi = max(flash, key=flash.get)
        out.append(_line(not big, f"{board}: int8 model flash within 5 % of emx-onnx-cgen's on "
                         f"{len(flash)} models (highest {hi} {flash[hi]:.2f})"
                         + (f"; above: {', '.join(big)}" if big else "")))
    if skipped:
        out.append(f"- not compared (emx-onnx-cgen could not compile or run them): "
                   f"{', '.join(skipped)}")
    return out


def arena_lines(rows: list[dict], isa: str) -> list[str]:
    off = [f"{r['model']} {r['arena']:,} > {r['lower_bound']:,}" for r in rows
           if "arena" in r and r["arena"] != r["lower_bound"]]
    return [_line(not off, f"host {isa}: arena equal to its lower bound on every model"
                  + (f" (not: {', '.join(off)})" if off else ""))]


def kinds_of(paths: list[str]) -> dict:
    return {os.path.splitext(os.path.basename(p))[0]: model_kind(p) for p in paths}
