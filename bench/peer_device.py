"""Cortex-M figures of the peer compiler emx-onnx-cgen beside mtvm's, in the same app.

    python bench/peer_device.py [--board mps2-an386] [--work DIR] [--out FILE] [MODEL ...]

For each model, mtvm's standalone project for the board is generated and built as
bench/device.py does, then copied; in the copy the model library (the MLF's
codegen/host/src/*.c) is replaced by emx-onnx-cgen's C for the same model (its
default options but one: every weight in the C, EMX_DEVICE_OPTIONS, as a board has
no file to load weights from) with a `tvmgen_default_run` that calls its entry
function, and an _sbrk over the board's second RAM bank (mps2-an386's 16 MB PSRAM)
for the tensors it malloc()s. Both firmwares therefore have the same startup, UART,
timer, sample input and app, are built with the same arm-none-eabi-gcc flags (the
template's -O2; -Wno-error in the peer's copy, as its C warns), and run under QEMU
with `-icount shift=0`, where the app's SysTick time per inference converts to
instructions exactly (calibrated by the app's loop of known length, as in
bench/device.py).

Figures per model, for both: instructions per inference, flash of the whole
firmware, flash of the model alone (text + data of the model's object files: code,
weights and tables), static RAM (without the stack reserve) and the stack's
high-water mark (mtvm's tensors are in the statically planned arena, in static RAM;
the peer's are locals on the stack, the larger ones on its heap, not counted here).
Figures, not pass/fail; a model the peer cannot compile or run is reported with
its error.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from device import (CALIBRATION_RE, STACK_RE, TIME_RE, board_parser, model_paths,  # noqa: E402
                    quiet, report)
from peer import ENTRY_RE, available  # noqa: E402

DEFAULT_WORK = os.path.join(HERE, "..", "build", "bench-peer-device")
MODEL_SRC = os.path.join("model", "codegen", "host", "src")
PEER_STACK = 256 << 10
# For a board: every weight in the C (by default those past 100 KiB go to a model.bin
# that the entry function fopen()s). Its temporaries above 1 KiB stay malloc()ed (all
# on the stack would not fit a U-Net's in 4 MiB: it does not reuse their memory).
EMX_DEVICE_OPTIONS = ["--large-weight-threshold", "0"]
FIELD_RE = re.compile(r"struct tvmgen_default_(inputs|outputs) \{\s*void\* (\w+);\s*\}")


def model_flash(project_dir: str, size_tool: str) -> int:
    """text + data of the model's object files (build/obj/model/...)."""
    objs = glob.glob(os.path.join(project_dir, "build", "obj", "model", "**", "*.o"),
                     recursive=True)
    r = subprocess.run([size_tool, *objs], capture_output=True, text=True, check=True)
    total = 0
    for line in r.stdout.splitlines()[1:]:
        text, data = line.split()[:2]
        total += int(text) + int(data)
    return total


def _heap_bank(board) -> tuple[int, int]:
    """(origin, size) of the board's second RAM bank (mps2-an386: its 16 MB PSRAM)."""
    bank = board.data["ram_banks"][1]
    size = bank["size"]
    scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1], 1)
    return int(bank["origin"], 16), int(size.rstrip("KM")) * scale


def firmware_figures(project_dir: str, template, project) -> dict:
    """Runs the built firmware under QEMU (icount): instructions and sizes."""
    import mtvm
    try:
        r = template.run_standalone(project, icount=True)
    except mtvm.MtvmError as e:
        return {"error": str(e).strip().splitlines()[0][:100]}
    m, cal = TIME_RE.search(r.stdout or ""), CALIBRATION_RE.search(r.stdout or "")
    if r.returncode != 0 or m is None or cal is None:
        return {"error": f"status {r.returncode}: {(r.stdout or '')[-160:]!r}"}
    with open(os.path.join(project_dir, "build", "size.json")) as f:
        size = json.load(f)
    stack = STACK_RE.search(r.stdout)
    with open(os.path.join(project_dir, "link.ld")) as f:   # RAM without the stack reserve
        reserve = int(re.search(r"__mtvm_stack_bytes = (\d+);", f.read()).group(1))
    return {"instructions": int(m.group(1)) * int(cal.group(1)) / int(cal.group(2)),
            "flash": size.get("flash_used"), "ram": size.get("ram_used") - reserve,
            "stack": int(stack.group(1)) if stack else None}


def _adapter(header: str, entry: str, heap: tuple[int, int]) -> str:
    """C defining tvmgen_default_run over the peer's entry function (one input, one
    output, the struct fields named as the model's interface header names them), and
    the _sbrk under its malloc(): the board's second RAM bank (heap: origin, size)."""
    fields = dict(FIELD_RE.findall(header))
    if set(fields) != {"inputs", "outputs"}:
        raise ValueError("not a one-input, one-output model interface")
    return ("\n/* mtvm bench: the C interface the app calls, over the peer's entry. */\n"
            '#include "tvmgen_default.h"\n#include <errno.h>\n#include <stddef.h>\n'
            "void* _sbrk(ptrdiff_t incr);\n"
            "void* _sbrk(ptrdiff_t incr)\n{\n"
            f"    static char* brk = (char*){heap[0]:#x};\n"
            "    char* old = brk;\n"
            f"    if (incr > (char*){heap[0] + heap[1]:#x} - brk) {{\n"
            "        errno = ENOMEM;\n        return (void*)-1;\n    }\n"
            "    brk += incr;\n    return old;\n}\n"
            "int32_t tvmgen_default_run(struct tvmgen_default_inputs* inputs,\n"
            "                           struct tvmgen_default_outputs* outputs)\n{\n"
            f"    {entry}(inputs->{fields['inputs']}, outputs->{fields['outputs']});\n"
            "    return 0;\n}\n")


def bench_model(path: str, board: str, work: str) -> dict:
    import mtvm
    import mtvm.project as P
    from mtvm.boards import load_board
    from mtvm.target import Target
    name = os.path.splitext(os.path.basename(path))[0]
    npz = os.path.splitext(path)[0] + ".npz"
    row = {"model": name}
    b = load_board(board)
    size_tool = b.data.get("cc", "arm-none-eabi-gcc").replace("gcc", "size")
    ours = os.path.join(work, f"{name}-{board}-mtvm")
    theirs = os.path.join(work, f"{name}-{board}-emx")
    try:
        lib = mtvm.compile(path, target=Target.from_board(b))
        proj = P.generate(lib, board=board, out_dir=ours, kind="standalone", sample=npz,
                          force=True, progress=quiet)
        proj.build(progress=quiet)
        row["mtvm"] = firmware_figures(ours, proj.template, proj)
        row["mtvm"]["model_flash"] = model_flash(ours, size_tool)
    except mtvm.MtvmError as e:
        row["mtvm"] = {"error": str(e).strip().splitlines()[0][:100]}
        return row
    # The peer's C in a copy of the same project
    if os.path.exists(theirs):
        shutil.rmtree(theirs)
    shutil.copytree(ours, theirs, ignore=shutil.ignore_patterns("build"))
    c_file = os.path.join(work, f"{name}-emx.c")
    r = subprocess.run(["emx-onnx-cgen", "compile", "--color", "never", *EMX_DEVICE_OPTIONS,
                        path, c_file],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip().splitlines()
        row["emx"] = {"error": f"emx-onnx-cgen failed: {msg[-1][:90] if msg else r.returncode}"}
        return row
    with open(c_file) as f:
        code = f.read()
    entry = ENTRY_RE.search(code)
    src = os.path.join(theirs, MODEL_SRC)
    with open(os.path.join(theirs, "model", "codegen", "host", "include",
                           "tvmgen_default.h")) as f:
        header = f.read()
    if entry is None:
        row["emx"] = {"error": "no float entry function found"}
        return row
    for old in glob.glob(os.path.join(src, "*.c")):
        os.remove(old)
    with open(os.path.join(src, "tvmgen_default.c"), "w") as f:
        f.write(code + _adapter(header, entry.group(1), _heap_bank(b)))
    # The peer keeps its smaller tensors in the entry function's locals: a 256 KiB stack
    # instead of the board's 16 KiB
    ld = os.path.join(theirs, "link.ld")
    with open(ld) as f:
        script = f.read()
    with open(ld, "w") as f:
        f.write(re.sub(r"__mtvm_stack_bytes = \d+;", f"__mtvm_stack_bytes = {PEER_STACK};",
                       script))
    mk = os.path.join(theirs, "Makefile")   # the peer's C warns: not an error here
    with open(mk) as f:
        makefile = f.read()
    with open(mk, "w") as f:
        f.write(makefile.replace(" -Werror ", " -Wno-error "))
    peer = P.load(theirs)
    try:
        peer.build(progress=quiet)
    except mtvm.MtvmError as e:
        tail = str(e).strip().splitlines()
        row["emx"] = {"error": f"build failed: {tail[-1][:90] if tail else e}"}
        return row
    row["emx"] = firmware_figures(theirs, peer.template, peer)
    if "error" not in row["emx"]:
        row["emx"]["model_flash"] = model_flash(theirs, size_tool)
    return row


def _ratio(a, b) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def _ram(f: dict) -> str:
    return f"{f['ram']:,} + {f['stack']:,}" if f.get("stack") is not None else f"{f['ram']:,} + ?"


def table(rows: list[dict], board: str) -> str:
    head = ["model", "mtvm instr", "emx instr", "mtvm/emx instr", "mtvm model flash B",
            "emx model flash B", "mtvm/emx model flash", "mtvm firmware flash B",
            "emx firmware flash B", "mtvm RAM + stack B", "emx RAM + stack B"]
    lines = [f"{board}, QEMU -icount shift=0, arm-none-eabi-gcc -O2, the same app and flags "
             "for both; model flash: text + data of the model's objects", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        a, e = r.get("mtvm", {}), r.get("emx", {})
        if "error" in a:
            lines.append(f"| {r['model']} | mtvm error: {a['error']} |" + " |" * (len(head) - 2))
            continue
        if "error" in e:
            lines.append(f"| {r['model']} | {a['instructions'] / 1e6:.2f} M | {e['error']} | - | "
                         f"{a['model_flash']:,} | - | - | {a['flash']:,} | - | {_ram(a)} | - |")
            continue
        lines.append(
            f"| {r['model']} | {a['instructions'] / 1e6:.2f} M | {e['instructions'] / 1e6:.2f} M"
            f" | {_ratio(a['instructions'], e['instructions'])} | {a['model_flash']:,} | "
            f"{e['model_flash']:,} | {_ratio(a['model_flash'], e['model_flash'])} | "
            f"{a['flash']:,} | {e['flash']:,} | {_ram(a)} | {_ram(e)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = board_parser(__doc__.splitlines()[0], DEFAULT_WORK)
    p.add_argument("--out", help="also write the table to this file")
    args = p.parse_args(argv)
    if not available():
        print("emx-onnx-cgen is not installed (pip install emx-onnx-cgen)", file=sys.stderr)
        return 2
    os.makedirs(args.work, exist_ok=True)
    rows = []
    for q in model_paths(args):
        rows.append(bench_model(q, args.board, args.work))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    report(table(rows, args.board), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
