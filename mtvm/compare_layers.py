"""`mtvm run DIR --input x.npy --compare-layers`: every intermediate tensor of
the model on the device, against the host build and onnxruntime, layer by
layer; names the first layer that computes a wrong output.

The debug build: a host-driven project beside DIR's model (DIR/compare-layers/)
for the same board, template and compile options, from a copy of the ONNX
model in which the output of every kernel of DIR's build is also a graph
output. The session reads them all after one run with READ_OUTPUT (no new
request: any device, any template, the protocol as it is). The kernels, their
fusion, schedules, target and weights are DIR's; what differs is where the
intermediates live (each in its own output buffer, not the arena) and so the
in-place writes, and the extra RAM they take. A fault of the arena plan
itself (two live tensors overlapping) therefore does not show here; a wrong
kernel, weight, schedule or compiler does. The debug project is kept and
reused (rebuilt incrementally) while DIR's model and metadata are unchanged.

Per layer (kernel, execution order) it reports, for the kernel's output:

- vs host: the device against the same debug model built for the host
  (CompiledModel.run_host);
- vs ref: the device against onnxruntime (graph optimizations off) on the
  copy of the model, end to end (upstream differences included);
- alone: the device against onnxruntime running only this layer's ONNX nodes
  on the device's own inputs to the layer (mtvm.testing.subgraph), so a
  difference made upstream does not count here.

Tolerances (mtvm.validate.compare): integer tensors within one step (of 1),
float ones within 1e-4 x their magnitude, a float tensor made by
DequantizeLinear within one of its steps. A layer FAILs when "alone" is out of
tolerance (when the reference cannot run it alone: when "vs host" is); one
that is right alone but off end to end shows "inputs differ" (a difference
made upstream, or int8 rounding of one step that grew). The first failing
layer is named with its ONNX nodes and their ops; the exit code is 1 when a
layer fails.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

import numpy as np

from .errors import MtvmError

DEBUG_DIR = "compare-layers"
STAMP = "compare_layers.json"


@dataclass
class LayerCheck:
    index: int                  # kernel index in DIR's build
    function: str
    kind: str
    tensor: str                 # the kernel's output (an ONNX tensor)
    onnx_nodes: list = field(default_factory=list)      # [(name, op_type)] of this layer
    vs_host: object = None      # mtvm.validate.OutputCheck
    vs_ref: object = None
    alone: object = None
    note: str = ""
    kernel_nodes: list = field(default_factory=list)   # metadata operators[i]["nodes"]
    dtype: str = ""
    shape: tuple = ()

    @property
    def ok(self) -> bool:
        """The layer computes right: on its own inputs (else: like the host build)."""
        if self.alone is not None:
            return self.alone.ok
        return self.vs_host is None or self.vs_host.ok

    @property
    def status(self) -> str:
        if not self.ok:
            return "FAIL"
        if any(c is not None and not c.ok for c in (self.vs_host, self.vs_ref)):
            return "inputs differ"     # right on its own inputs, off end to end
        return "OK"

    def where(self) -> str:
        nodes = ", ".join(f"{n} ({op})" for n, op in self.onnx_nodes) or "-"
        return f"layer {self.index} {self.kind} [{self.function}]: ONNX nodes {nodes}"


def _err(c) -> str:
    if c is None:
        return "-"
    if c.step is not None:
        return f"{c.max_steps:g} st" + ("" if c.ok else " !")
    return f"{c.max_abs:.2g}/{c.tolerance:.2g}" + ("" if c.ok else " !")


def _sha(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def _compile_options(md: dict) -> dict:
    from .target import Target
    t = md.get("target") or {}
    return {"module_name": md.get("module_name", "default"),
            "target": Target.parse(t["name"]) if t.get("name") else None,
            "io_in_workspace": bool(md.get("io_in_workspace")),
            "external_workspace": bool(md.get("external_workspace"))}


def debug_model(model_path: str, md: dict):
    """(the ONNX copy with every kernel output exposed, the exposed names,
    DIR's kernels as [(index, function, kind, output tensor, IR node names)], notes)."""
    import onnx
    from . import compile as mtvm_compile
    from .testing import expose_intermediates
    model = onnx.load(model_path)
    opts = _compile_options(md)
    orig = mtvm_compile(model_path, **opts)
    notes = []
    kinds = [o["kind"] for o in orig.metadata["operators"]]
    if kinds != [o["kind"] for o in md["operators"]]:
        notes.append("recompiling the model did not give the project's kernels (was it "
                     "generated with other compile options?): the layers are this compile's")
    kernels = []
    for i, lk in enumerate(orig.kernels):
        outs = [o for o in lk.kernel.node.kernel_outputs if o]
        op = orig.metadata["operators"][i]
        kernels.append((i, lk.kernel.fname, op["kind"], outs[0] if outs else None,
                        list(op.get("nodes", []))))
    want = [k[3] for k in kernels if k[3]]
    exposed, names = expose_intermediates(model, want)
    outputs = {o.name for o in model.graph.output}
    produced = {o for n in model.graph.node for o in n.output if o}
    # ONNX tensors whose shape ONNX's shape inference does not know: mtvm's own
    late = [t for t in want if t not in names and t not in outputs and t in produced
            and t in orig.graph.tensors]
    for t in late:
        tt = orig.graph.tensors[t]
        exposed.graph.output.append(onnx.helper.make_tensor_value_info(
            t, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(tt.dtype)), list(tt.shape)))
        names.append(t)
    missing = [t for t in want if t not in names and t not in outputs]
    if missing:
        notes.append(f"{len(missing)} kernel output(s) are not tensors of the ONNX graph "
                     f"(made by mtvm's passes) and are not compared: {', '.join(missing[:4])}"
                     + (" ..." if len(missing) > 4 else ""))
    return exposed, names, kernels, notes


def prepare(proj, progress=None):
    """The debug project of `proj` (generated, or reused when up to date), not built.
    Returns (debug Project, the exposed ONNX model, its CompiledModel, DIR's
    kernels (see debug_model), notes)."""
    from . import compile as mtvm_compile
    from . import project as mtvm_project
    progress = progress or (lambda msg: None)
    model_path = proj.info.get("model_path")
    if not model_path or not os.path.exists(model_path):
        raise MtvmError(f"--compare-layers needs the ONNX model; {model_path or 'no path'} "
                        f"recorded in {proj.dir}/mtvm_project.json is not there (a project "
                        "generated from a compiled model library has none)")
    md = proj.metadata
    exposed, names, kernels, notes = debug_model(model_path, md)
    out_dir = proj.path(DEBUG_DIR)
    stamp = {"model_sha256": _sha(model_path),
             "metadata_sha256": _sha(proj.path("model", "metadata.json")),
             "exposed": names, "board": proj.info["board"], "template": proj.info["template"]}
    stamp_path = os.path.join(out_dir, STAMP)
    fresh = False
    try:
        with open(stamp_path) as f:
            fresh = json.load(f) == stamp and os.path.exists(os.path.join(out_dir,
                                                                          "mtvm_project.json"))
    except (OSError, ValueError):
        pass
    lib = mtvm_compile(exposed, **_compile_options(md))
    if [o["kind"] for o in lib.metadata["operators"]] != [k[2] for k in kernels]:
        notes.append("the debug build's kernels differ from the project's (exposing the "
                     "intermediates changed the fusion): layers are matched by output tensor")
    if not fresh:
        progress(f"generating the debug build (every kernel output readable) in {out_dir}")
        mtvm_project.generate(lib, board=proj.info["board"], out_dir=out_dir,
                              kind="host-driven", force=True, overwrite_edited=True,
                              template=proj.info["template"], progress=progress)
        with open(stamp_path, "w") as f:
            json.dump(stamp, f, indent=1)
    return mtvm_project.load(out_dir), exposed, lib, kernels, notes


def _layer_nodes(exposed, tensor: str, frontier) -> list[tuple[str, str]]:
    from .testing import subgraph
    sub = subgraph(exposed, tensor, frontier)
    return [(n.name or n.output[0], n.op_type) for n in sub.graph.node
            if n.op_type != "Constant"]


def compare(exposed, lib, kernels, device: dict, inputs: dict) -> tuple[list, str]:
    """The layer checks of the device's outputs ({name: array}) and the reference's name."""
    from .testing import subgraph
    from .validate import compare as compare_arrays
    from .validate import output_steps, reference_outputs
    if lib.target.runs_on_host():
        host = lib.run_host(inputs)
    else:                       # compiled for the board's ISA: the portable C on this host
        from . import compile as mtvm_compile
        opts = {**_compile_options(lib.metadata), "target": None}
        host = mtvm_compile(exposed, **opts).run_host(inputs)
    out_names = [o.name for o in exposed.graph.output]
    ref = reference_outputs(exposed, inputs)
    ref_by = dict(zip(out_names, ref.outputs))
    host_by = dict(zip(out_names, host.values()))
    frontier = set(out_names) | set(inputs)
    checks = []
    steps = output_steps(exposed)     # float tensors made by DequantizeLinear: in its steps
    for index, fname, kind, tensor, nodes in kernels:
        if tensor is None or tensor not in ref_by or tensor not in device:
            continue
        c = LayerCheck(index, fname, kind, tensor, _layer_nodes(exposed, tensor, frontier),
                       kernel_nodes=nodes)
        a, step = device[tensor], steps.get(tensor)
        c.vs_host = compare_arrays(a, host_by[tensor], step, name=tensor)
        c.vs_ref = compare_arrays(a, ref_by[tensor], step, name=tensor)
        sub = subgraph(exposed, tensor, frontier)
        feeds = {}
        for i in sub.graph.input:
            if i.name in inputs:
                feeds[i.name] = inputs[i.name]
            elif i.name in device:
                feeds[i.name] = device[i.name]
        if len(feeds) == len(sub.graph.input):
            try:
                alone = reference_outputs(sub, feeds).outputs[0]
                c.alone = compare_arrays(a, alone, step, name=tensor)
            except MtvmError as e:
                c.note = f"no reference for the layer alone: {e}"
        checks.append(c)
    return checks, ref.name


def table(checks: list) -> str:
    rows = [("#", "kernel", "ONNX node", "output", "vs host", "vs ref", "alone", "")]
    for c in checks:
        node = ", ".join(c.kernel_nodes) or c.tensor
        node = node if len(node) <= 32 else node[:29] + "..."
        rows.append((str(c.index), c.kind, node, f"{c.dtype}{list(c.shape)}", _err(c.vs_host),
                     _err(c.vs_ref), _err(c.alone), c.status))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows)


def run(proj, inputs: dict, progress=None, port=None, timeout=None, retries=None) -> int:
    """Build and run the debug build of `proj` on its device, compare, print.
    Returns 0 when every layer is within tolerance, else 1."""
    progress = progress or print
    dbg, exposed, lib, kernels, notes = prepare(proj, progress)
    dbg.build(progress=progress)
    with dbg.session(port=port, timeout=timeout, retries=retries) as sess:
        device = sess.executor.run(inputs)
        board = sess.info().board
    checks, ref_name = compare(exposed, lib, kernels, device, inputs)
    for c in checks:
        a = np.asarray(device[c.tensor])
        c.dtype, c.shape = a.dtype.name, a.shape
    print(f"compare layers: {len(checks)} kernel outputs of {proj.metadata['model_name']} on "
          f"{board} (debug build {dbg.dir}) vs the host build and {ref_name}")
    print("  errors: max abs error/tolerance, or max difference in quantization steps (st); "
          "alone = the layer's ONNX nodes run by the reference on the device's own inputs")
    print(table(checks))
    for n in notes:
        print(f"note: {n}")
    for c in checks:
        if c.note:
            print(f"note: layer {c.index}: {c.note}")
    bad = [c for c in checks if not c.ok]
    if not bad:
        drift = [c for c in checks if c.status != "OK"]
        if drift:
            print(f"every layer is right on its own inputs; the outputs differ end to end "
                  f"from layer {drift[0].index} on ({drift[0].where()}): rounding that "
                  "grows downstream, or the host build/reference differ there")
        else:
            print(f"all {len(checks)} layers within tolerance")
        return 0
    first = bad[0]
    why = []
    if first.alone is not None and not first.alone.ok:
        why.append(f"on its own inputs: {first.alone.describe()}")
    if first.vs_host is not None and not first.vs_host.ok:
        why.append(f"vs the host build: {first.vs_host.describe()}")
    print(f"first layer out of tolerance: {first.where()}")
    for w in why:
        print(f"  {w}")
    if len(bad) > 1:
        print(f"  ({len(bad) - 1} later layer(s) wrong on their own inputs too: "
              f"{', '.join(str(c.index) for c in bad[1:8])}{' ...' if len(bad) > 8 else ''})")
    return 1
