"""`mtvm analyze --report DIR`: report.html (self-contained: figures embedded
as base64 PNG data URIs, inline CSS, nothing fetched at view time), the same
figures as PNG files, and report.json with the numbers.

matplotlib is an optional extra (`pip install mtvm[report]`); without it
`--report` says so in one line and the text summary still works."""
from __future__ import annotations

import base64
import html
import json
import os

from ..errors import MtvmError
from .data import (Budget, Timeline, budgets, layer_rows, load_profile, model_sources,
                   profile_json, timeline, timeline_from_metadata)

__all__ = ["write_report", "require_matplotlib", "load_profile", "profile_json",
           "timeline", "timeline_from_metadata", "budgets", "layer_rows", "Timeline", "Budget"]

INSTALL_HINT = "pip install mtvm[report]"


def require_matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise MtvmError(f"the figures (--report, --profile-plot) are drawn with matplotlib, "
                        f"which is not installed: {INSTALL_HINT}") from None
    matplotlib.use("Agg")       # headless: never open a window
    import matplotlib.pyplot as plt
    return plt


def _kib(n) -> str:
    return "-" if n is None else f"{n:,} B" if n < 4096 else f"{n / 1024:,.1f} KiB"


# -- figures -----------------------------------------------------------------------------
def _fig_timeline(plt, tl: Timeline, ram: int | None, board: str):
    import numpy as np
    n = len(tl.kernels)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.38 * n + 2.5), 4.6), dpi=110)
    x = np.arange(n)
    bottom = np.zeros(n)
    # the largest tensors get their own legend entries; the rest share a colour
    big = sorted(tl.series, key=lambda k: -max(tl.series[k], default=0))[:10]
    cmap = plt.get_cmap("tab20")
    for j, (name, vals) in enumerate(tl.series.items()):
        v = np.asarray(vals, float)
        if not v.any():
            continue
        scratch = name.startswith("(")
        ax.bar(x, v, 0.8, bottom=bottom, color="#bbbbbb" if scratch else cmap(j % 20),
               hatch="//" if scratch else None, edgecolor="white", linewidth=0.4,
               label=(name if len(name) <= 40 else "..." + name[-37:]) if name in big else None)
        bottom += v
    peak = float(bottom.max(initial=0))
    ax.axhline(tl.lower_bound, color="black", ls=":", lw=1.2,
               label=f"lower bound {tl.lower_bound:,} B")
    if tl.arena_bytes != tl.lower_bound:
        ax.axhline(tl.arena_bytes, color="tab:red", ls="--", lw=1.2,
                   label=f"arena {tl.arena_bytes:,} B")
    top = max(peak, tl.arena_bytes, 1) * 1.18
    if ram:
        if ram <= 4 * top:
            ax.axhline(ram, color="tab:purple", lw=1.5, label=f"{board} RAM {ram:,} B")
            top = ram * 1.08
        else:
            ax.annotate(f"{board} RAM {_kib(ram)} is {ram / max(peak, 1):,.0f}x the peak "
                        f"(line off the scale, above)", xy=(0.99, 0.97),
                        xycoords="axes fraction", ha="right", va="top", fontsize=8,
                        color="tab:purple")
    ax.set_ylim(0, top)
    ax.set_xticks(x)
    ax.set_xticklabels(tl.kernels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("arena bytes live")
    ax.set_title(f"Memory timeline: peak {int(peak):,} B, arena {tl.arena_bytes:,} B")
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def _fig_budgets(plt, b: Budget):
    fig, axes = plt.subplots(2, 1, figsize=(8.5, 3.4), dpi=110)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    for ax, which, size in ((axes[0], "flash", b.flash_size), (axes[1], "ram", b.ram_size)):
        items = getattr(b, which)
        used = b.used(which)
        cap = size or max(used, 1)
        left = 0.0
        for j, (name, n, _) in enumerate(items):
            w = 100.0 * n / cap
            ax.barh(0, w, left=left, color=colors[j % len(colors)], label=f"{name} {_kib(n)}")
            left += w
        ax.set_xlim(0, max(100.0, left * 1.05))
        ax.axvline(100.0, color="black", lw=1.5)
        ax.set_yticks([])
        label = "Flash" if which == "flash" else "RAM"
        cap_text = f"of {_kib(size)}" if size else "(board size unknown: % of the total)"
        ax.set_title(f"{label}: {_kib(used)} {cap_text}"
                     + (f" = {100.0 * used / size:.1f} %" if size else ""), fontsize=9)
        ax.set_xlabel("% of the board's " + label, fontsize=8)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def _fig_layers(plt, rows: list[dict]):
    import numpy as np
    n = len(rows)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.38 * n + 2.0), 3.6), dpi=110)
    x = np.arange(n)
    ax.bar(x, [r["macs"] for r in rows], color="tab:blue")
    ax.set_ylabel("MACs")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['index']} {r['kind'].split('+')[0]}" for r in rows],
                       rotation=60, ha="right", fontsize=7)
    ax.set_title("MACs per kernel")
    fig.tight_layout()
    return fig


def _fig_time(plt, rows: list[dict], profile: dict):
    import numpy as np
    n = len(rows)
    fig, ax = plt.subplots(figsize=(8.0, max(3.0, 0.26 * n + 1.2)), dpi=110)
    y = np.arange(n)
    tps = profile.get("ticks_per_second") or 0
    vals = [(r.get("ticks") or 0) / tps * 1e6 if tps else (r.get("ticks") or 0) for r in rows]
    ax.barh(y, vals, color="tab:orange")
    ax.set_yticks(y)
    ax.set_yticklabels([f"{r['index']} {r['kind'].split('+')[0]}" for r in rows], fontsize=7)
    ax.invert_yaxis()
    unit = profile.get("unit")
    ax.set_xlabel("us (device timer)" if tps else ("instructions" if unit == "instructions"
                                                  else "ticks"))
    ax.set_title("Time per kernel (the tuning records' chosen candidates)"
                 if profile.get("source") == "tuning records"
                 else f"Time per kernel (median of {profile.get('runs', 1)} run(s))")
    fig.tight_layout()
    return fig


def plot_profile(md: dict, profile: dict, path: str) -> None:
    """`mtvm run --profile N --profile-plot FILE.png`: the per-kernel time bar chart
    of the report, on its own. profile: profile_json's form."""
    plt = require_matplotlib()
    fig = _fig_time(plt, layer_rows(md, profile=profile), profile)
    try:
        fig.savefig(path)
    except OSError as e:
        raise MtvmError(f"--profile-plot {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)


# -- page --------------------------------------------------------------------------------
_CSS = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; }
td, th { border: 1px solid #ddd; padding: 2px 6px; } th { background: #f3f3f3; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #eee; }
.note { color: #555; font-size: 0.85em; }
code { font-size: 0.9em; }
"""


def _table(head: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(
            f"<td class=\"n\">{html.escape(str(c))}</td>" if i in numeric
            else f"<td>{html.escape(str(c))}</td>" for i, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _img(fig_id: str, png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure id="{fig_id}"><img alt="{html.escape(alt)}" '
            f'src="data:image/png;base64,{data}"></figure>')


def write_report(out_dir: str, md: dict, lib=None, board=None, profile: dict | None = None,
                 mlf_dir: str | None = None) -> str:
    """Writes out_dir/report.html, the PNGs and report.json; returns the HTML's path.
    lib: the CompiledModel (the plan gives the timeline by tensor and the
    parameters per layer); without it, what metadata.json holds."""
    plt = require_matplotlib()
    import io
    os.makedirs(out_dir, exist_ok=True)
    tl = timeline(lib) if lib is not None else timeline_from_metadata(md)
    ram = board.ram.size if board is not None and board.ram else None
    bud = budgets(md, board, model_sources(lib, mlf_dir))
    rows = layer_rows(md, lib, profile)
    figs = [("timeline", "Memory timeline: arena bytes live at each kernel, stacked by tensor",
             _fig_timeline(plt, tl, ram, bud.board)),
            ("budgets", "Flash and RAM budgets against the board", _fig_budgets(plt, bud)),
            ("macs", "MACs per kernel", _fig_layers(plt, rows))]
    if profile:
        figs.append(("time", "Device time per kernel", _fig_time(plt, rows, profile)))
    pngs = {}
    for fig_id, _, fig in figs:
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        pngs[fig_id] = buf.getvalue()
        with open(os.path.join(out_dir, f"{fig_id}.png"), "wb") as f:
            f.write(pngs[fig_id])
    title = f"mtvm analyze: {md.get('model_name', 'model')} on {bud.board}"
    total_t = sum(r.get("ticks") or 0 for r in rows)
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}"
             f"</title><style>{_CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
             "<p>" + html.escape(
                 f"{md.get('generator', 'mtvm')}; target {md.get('target', {}).get('name', '?')}"
                 if isinstance(md.get("target"), dict) else md.get("generator", "mtvm"))
             + "</p>",
             _table(["", ""], [
                 ["kernels", len(rows)], ["total MACs", f"{md['total_macs']:,}"],
                 ["arena (workspace_bytes)", f"{md['workspace_bytes']:,} B"],
                 ["arena lower bound", f"{md.get('workspace_lower_bound', 0):,} B"],
                 ["timeline peak", f"{tl.peak:,} B"],
                 ["weights (constant_bytes)", f"{md['constant_bytes']:,} B"]]
                 + ([["profiled time", f"{total_t:,} ticks"]] if profile else []), {1})]
    descr = {"timeline": "Each bar is one kernel, in execution order; each coloured block a "
                         "tensor of the arena live while that kernel runs (16-byte aligned, as "
                         "planned), hatched grey the kernel's scratch. Its peak is the arena's "
                         "lower bound; the planner's arena is at least that.",
             "budgets": "Weights from metadata; code estimated by compiling the model's C and "
                        "the runtime with the board's compiler and flags (-O2): the linked "
                        "firmware is the truth (`mtvm project build` prints its sizes). RAM: "
                        "arena, input/output buffers, the host-driven runtime's packet "
                        "buffers, the board's stack reserve.",
             "macs": "", "time": "From the profile given with --profile-json (`mtvm run DIR "
                                 "--profile N --profile-json FILE`)."}
    for fig_id, caption, _ in figs:
        parts.append(f"<h2>{html.escape(caption)}</h2>")
        if descr.get(fig_id):
            parts.append(f"<p class=\"note\">{html.escape(descr[fig_id])}</p>")
        parts.append(_img(fig_id, pngs[fig_id], caption))
        if fig_id == "budgets":
            parts.append(_table(["memory", "item", "bytes", "source"],
                                [["flash", n, f"{b:,}", s] for n, b, s in bud.flash]
                                + [["RAM", n, f"{b:,}", s] for n, b, s in bud.ram], {2}))
            for note in bud.notes:
                parts.append(f"<p class=\"note\">{html.escape(note)}</p>")
    parts.append("<h2>Layers</h2>")
    head = ["#", "kernel", "op", "ONNX nodes", "MACs", "params", "param bytes", "output bytes",
            "scratch", "live bytes", "schedule"] + (["ticks", "us", "share"] if profile else [])
    trs = []
    for r in rows:
        sched = r["schedule"] + ("" if not r["knobs"] else " " + ", ".join(
            f"{k}={v}" for k, v in r["knobs"].items()))
        tr = [r["index"], r["function"], r["kind"], ", ".join(r["nodes"]), f"{r['macs']:,}",
              "-" if r["params"] is None else f"{r['params']:,}",
              "-" if r["param_bytes"] is None else f"{r['param_bytes']:,}",
              f"{r['output_bytes']:,}", f"{r['scratch_bytes']:,}", f"{r['live_bytes']:,}", sched]
        if profile:
            t = r.get("ticks")
            tr += ["-" if t is None else f"{t:,}",
                   "-" if r.get("seconds") is None else f"{r['seconds'] * 1e6:.2f}",
                   "-" if not t or not total_t else f"{100.0 * t / total_t:.1f} %"]
        trs.append(tr)
    parts.append(_table(head, trs, {0, 4, 5, 6, 7, 8, 9, 11, 12, 13}))
    parts.append("<h2>Execution order</h2><ol start=\"0\">")
    for r in rows:
        where = ""
        if r["outputs"]:
            where = " &rarr; " + ", ".join(f"<code>{html.escape(o)}</code>" for o in r["outputs"])
            if r["offset"] is not None:
                where += f" (arena offset {r['offset']:,})"
        parts.append(f"<li><b>{html.escape(r['kind'])}</b> "
                     f"<code>{html.escape(r['function'])}</code>"
                     f" [{html.escape(', '.join(r['nodes']))}]{where}</li>")
    parts.append("</ol>")
    for note in md.get("notes", []):
        parts.append(f"<p class=\"note\">{html.escape(str(note))}</p>")
    parts.append("</body></html>")
    path = os.path.join(out_dir, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    summary = {"model_name": md.get("model_name"), "board": bud.board,
               "workspace_bytes": md["workspace_bytes"],
               "workspace_lower_bound": md.get("workspace_lower_bound"),
               "timeline": {"kernels": tl.kernels, "totals": tl.totals, "peak": tl.peak,
                            "series": tl.series},
               "budgets": {"flash": bud.flash, "ram": bud.ram, "flash_size": bud.flash_size,
                           "ram_size": bud.ram_size, "notes": bud.notes},
               "layers": rows, "figures": [f"{i}.png" for i in pngs]}
    with open(os.path.join(out_dir, "report.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, default=str)
    return path
