"""A compiled model: its C sources, metadata.json and IR dump, exported as a
Model Library Format directory or tar, and runnable on the host."""
from __future__ import annotations

import io
import json
import os
import tarfile

import numpy as np

from . import __version__
from .codegen.names import interface_names
from .errors import MtvmError
from .ops.base import get_op
from .passes.quantize import quantization_metadata

FORMAT_VERSION = 1


def _quant(t) -> dict | None:
    if t.quant is None:
        return None
    return {"scale": np.asarray(t.quant.scale).ravel().tolist(),
            "zero_point": np.asarray(t.quant.zero_point).ravel().tolist(),
            "axis": t.quant.axis}


def _io(g, names, c_names) -> list[dict]:
    out = []
    for name, c in zip(names, c_names):
        t = g.tensors[name]
        out.append({"name": name, "c_name": c, "shape": list(t.shape),
                    "dtype": np.dtype(t.dtype).name, "size_bytes": t.nbytes,
                    "quantization": _quant(t)})
    return out


class CompiledModel:
    def __init__(self, module_name, source_graph, graph, plan, kernels, sources,
                 profile=False, external_workspace=False, io_in_workspace=False,
                 target=None):
        from .target import Target
        self.module_name = module_name
        self.target = Target.resolve(target)
        self.source_graph = source_graph     # as imported
        self.graph = graph                   # after passes
        self.plan = plan
        self.kernels = kernels
        self.sources = sources               # {MLF relative path: text}
        self.profile = profile
        self.external_workspace = external_workspace
        self.io_in_workspace = io_in_workspace
        self.metadata = self._metadata()
        if io_in_workspace:   # where the inputs and outputs live in the arena
            for entry in self.metadata["inputs"] + self.metadata["outputs"]:
                entry["workspace_offset"] = plan.offsets.get(plan.root(entry["name"]))

    @property
    def ir_text(self) -> str:
        return self.graph.dump()

    def _metadata(self) -> dict:
        g = self.graph
        from .schedules import workload_key
        ops = []
        for i, lk in enumerate(self.kernels):
            n = lk.kernel.node
            ins = [g.tensors[x] if x else None for x in n.inputs]
            outs = [g.tensors[x] for x in n.outputs if x]
            macs = int(get_op(n.op, n.domain).macs(n, ins, outs))
            ops.append({"index": i, "function": lk.kernel.fname,
                        "kind": "+".join([n.op] + [t.op for t in n.tail]),
                        "nodes": [p.name for p in [n] + n.tail], "macs": macs,
                        "output_bytes": sum(g.tensors[o].nbytes for o in n.kernel_outputs if o),
                        "workspace_bytes": lk.kernel.scratch_bytes,
                        **({"schedule": lk.kernel.schedule, "knobs": lk.kernel.knobs,
                            "workload_key": workload_key(lk.kernel)}
                           if lk.kernel.schedule else {}),
                        "live_bytes": self.plan.live_bytes[lk.step]
                        if lk.step < len(self.plan.live_bytes) else 0})
        # Each constant is stored once however many kernels read it.
        const_names = {b.name for lk in self.kernels for _, b in lk.params
                       if b is not None and b.const is not None}
        const_bytes = sum(g.tensors[name].nbytes for name in const_names)
        in_c, out_c = interface_names(g.inputs, g.outputs)   # as the header names them
        md = {
            "format_version": FORMAT_VERSION,
            "generator": f"mtvm {__version__}",
            "model_name": self.source_graph.name,
            "module_name": self.module_name,
            "target": self.target.to_json(),
            "inputs": _io(g, g.inputs, in_c),
            "outputs": _io(g, g.outputs, out_c),
            "workspace_bytes": self.plan.arena_bytes,
            "workspace_lower_bound": self.plan.lower_bound,
            # the bound in the graph's node order, as reorder=False plans it
            "workspace_lower_bound_original_order": self.plan.original_lower_bound,
            "constant_bytes": int(const_bytes),
            "total_macs": sum(o["macs"] for o in ops),
            "profiling": self.profile,
            "external_workspace": self.external_workspace,
            "io_in_workspace": self.io_in_workspace,
            "operators": ops,
            **quantization_metadata(g),   # int8 kernels, float fallbacks (+ notes)
        }
        notes = self.source_graph.notes + md.get("notes", [])
        if notes:
            md["notes"] = notes
        return md

    def files(self) -> dict[str, str]:
        files = dict(self.sources)
        files["metadata.json"] = json.dumps(self.metadata, indent=2) + "\n"
        files[f"src/{self.module_name}.ir.txt"] = self.graph.dump()
        return files

    def export(self, path, force: bool = False) -> str:
        """Write the Model Library Format: a directory, or a tar if path ends in .tar."""
        path = os.fspath(path)
        files = self.files()
        if path.endswith(".tar"):
            if os.path.exists(path) and not force:
                raise MtvmError(f"{path} exists; pass force=True (--force) to overwrite it")
            with tarfile.open(path, "w") as tar:
                for rel, text in sorted(files.items()):
                    data = text.encode()
                    info = tarfile.TarInfo(rel)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
            return path
        if os.path.isdir(path) and os.listdir(path) and not force:
            raise MtvmError(f"{path} is not empty; pass force=True (--force) to overwrite it")
        for rel, text in files.items():
            full = os.path.join(path, rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
        return path

    def run_host(self, inputs, sanitize: bool = False, **build_opts) -> dict:
        """Build the C with the host compiler and run it: in-process through
        cffi, or (sanitize=True) as a separate ASan/UBSan process.
        inputs: {name: array} or a list in input order. Returns {name: array}."""
        from .host_runner import run_host
        return run_host(self, inputs, sanitize=sanitize, **build_opts)
