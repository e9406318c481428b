"""A compiled model: its C sources, metadata.json and IR dump, exported as a
Model Library Format directory or tar (microTVM's version-7 layout beside
mtvm's fields: docs/projects.md), and runnable on the host; and an MLF that
mtvm exported, read back (ModelLibrary) to generate a project from it."""
from __future__ import annotations

import datetime
import io
import json
import os
import re
import struct
import tarfile
import time

import numpy as np

from . import __version__
from .codegen.constants import content_key
from .codegen.names import interface_names
from .errors import MtvmError
from .ops.base import node_macs
from .passes.quantize import quantization_metadata

FORMAT_VERSION = 1
MLF_VERSION = 7          # the Model Library Format version of microTVM (TVM 0.8 - 0.18)
# An empty TVM parameter dict (tvm.runtime.save_param_dict({})): list magic,
# reserved, no names, no arrays. The weights are linked into the C, as TVM's
# AOT executor does, so the parameters file is empty.
_NDARRAY_LIST_MAGIC = 0xF7E58D4F05049CB7
EMPTY_PARAMS = struct.pack("<QQQQ", _NDARRAY_LIST_MAGIC, 0, 0, 0)
_CPU = 1                 # DLPack's kDLCPU: the "device" of microTVM's memory map


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
    backend = "c"           # what made the code: C sources (LLVMCompiledModel: "llvm")

    def __init__(self, module_name, source_graph, graph, plan, kernels, sources,
                 profile=False, external_workspace=False, io_in_workspace=False,
                 target=None, output_names="onnx", constants_section=None):
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
        self.output_names = output_names
        self.constants_section = constants_section
        self.metadata = self._metadata()
        if io_in_workspace:   # where the inputs and outputs live in the arena
            for entry in self.metadata["inputs"] + self.metadata["outputs"]:
                entry["workspace_offset"] = plan.offsets.get(plan.root(entry["name"]))
                if plan.pools:
                    entry["workspace_pool"] = plan.pool_of.get(plan.root(entry["name"]))
        self.metadata.update(mlf_metadata(self.metadata))

    @property
    def ir_text(self) -> str:
        return self.graph.dump()

    def _metadata(self) -> dict:
        g = self.graph
        from .schedules import workload_key
        ops = []
        for i, lk in enumerate(self.kernels):
            n = lk.kernel.node
            macs = node_macs(g, n)
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
        # Each constant is stored once however many kernels read it, and
        # constants of the same bytes once (codegen.constants.content_key).
        const_names = {b.name for lk in self.kernels for _, b in lk.params
                       if b is not None and b.const is not None}
        stored = {content_key(g.tensors[name].data): g.tensors[name].nbytes
                  for name in const_names}
        const_bytes = sum(stored.values())
        in_c, out_c = interface_names(g.inputs, g.outputs,   # as the header names them
                                      self.output_names)
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
            "output_names": self.output_names,
            "operators": ops,
            **quantization_metadata(g),   # int8 kernels, float fallbacks (+ notes)
        }
        if self.plan.pools:   # several pools (workspace_bytes is their sum)
            md["workspace_pools"] = [p.as_dict() for p in self.plan.pools]
        if self.constants_section:
            md["constants_section"] = self.constants_section
        notes = self.source_graph.notes + md.get("notes", [])
        if notes:
            md["notes"] = notes
        return md

    def files(self) -> dict[str, str]:
        """The text files of the MLF: {relative path: text} (blobs() has the binary ones)."""
        files = dict(self.sources)
        files["metadata.json"] = json.dumps(self.metadata, indent=2) + "\n"
        ir = self.graph.dump()
        files[f"src/{self.module_name}.ir.txt"] = ir
        files[f"src/{self.module_name}.relay"] = ir   # where microTVM keeps the model's IR
        return files

    def blobs(self) -> dict[str, bytes]:
        """The binary files of the MLF: the (empty) TVM parameter dict."""
        return {f"parameters/{self.module_name}.params": EMPTY_PARAMS}

    def export(self, path, force: bool = False) -> str:
        """Write the Model Library Format: a directory, or a tar if path ends in .tar."""
        data = {rel: text.encode("utf-8") for rel, text in self.files().items()}
        data.update(self.blobs())
        return write_mlf(path, data, force)

    def run_host(self, inputs, sanitize: bool = False, **build_opts) -> dict:
        """Build the C with the host compiler and run it: in-process through
        cffi, or (sanitize=True) as a separate ASan/UBSan process.
        inputs: {name: array} or a list in input order. Returns {name: array}."""
        from .host_runner import run_host
        return run_host(self, inputs, sanitize=sanitize, **build_opts)


# -- writing ------------------------------------------------------------------------------
def write_mlf(path, files: dict[str, bytes], force: bool = False) -> str:
    """Writes {relative path: bytes} as a directory, or a tar if path ends in .tar."""
    path = os.fspath(path)
    if path.endswith(".tar"):
        if os.path.exists(path) and not force:
            raise MtvmError(f"{path} exists; pass force=True (--force) to overwrite it")
        with tarfile.open(path, "w") as tar:
            for rel, data in sorted(files.items()):
                info = tarfile.TarInfo(rel)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path
    if os.path.isdir(path) and os.listdir(path) and not force:
        raise MtvmError(f"{path} is not empty; pass force=True (--force) to overwrite it")
    for rel, data in files.items():
        full = os.path.join(path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    return path


# -- microTVM's metadata.json (Model Library Format version 7) ------------------------------
def tvm_target_string(target: dict) -> str:
    """The TVM target string microTVM would write for mtvm's target (its JSON form):
    TVM's "c" target with its keys and -mcpu/-march."""
    name, isa, cpu = target.get("name"), target.get("isa", "c"), target.get("cpu")
    if isa == "c" or not cpu:
        return "c -keys=cpu"
    if str(isa).startswith("armv"):
        return f"c -keys=arm_cpu,cpu -mcpu={cpu}"
    if isa == "x86_64" or str(isa).startswith("rv"):   # an x86 level, a RISC-V ISA string
        return f"c -keys=cpu -march={cpu}"
    return f"c -keys=cpu -mcpu={cpu}" if name else "c -keys=cpu"


def export_datetime() -> str:
    """Now (UTC), or $SOURCE_DATE_EPOCH for reproducible files, as microTVM writes it."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = time.time()
    if epoch and epoch.strip().isdigit():
        when = int(epoch)
    stamp = datetime.datetime.fromtimestamp(when, datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%SZ")


def mlf_metadata(md: dict) -> dict:
    """The keys of microTVM's metadata.json (MLF version 7) for mtvm's metadata `md`:
    {"version": 7, "modules": {<mod>: {...}}}. Tensors are keyed by their C names,
    the struct members of the header (microTVM's header sanitizes these keys)."""
    def tensors(entries):
        return {t["c_name"]: {"size": int(t["size_bytes"]), "dtype": t["dtype"]}
                for t in entries}

    main = {"device": _CPU,
            "workspace_size_bytes": int(md["workspace_bytes"]),
            "constants_size_bytes": int(md["constant_bytes"]),
            "io_size_bytes": int(sum(t["size_bytes"] for t in md["inputs"] + md["outputs"])),
            "inputs": tensors(md["inputs"]),
            "outputs": tensors(md["outputs"])}
    operators = [{"function_name": op["function"],
                  "workspace": [{"device": _CPU,
                                 "workspace_size_bytes": int(op.get("workspace_bytes") or 0)}]}
                 for op in md.get("operators", [])]
    module = {"model_name": md["model_name"],
              "export_datetime": export_datetime(),
              "memory": {"functions": {"main": [main], "operator_functions": operators}},
              "target": [tvm_target_string(md["target"])],
              "executors": ["aot"],
              "style": "full-model"}
    return {"version": MLF_VERSION, "modules": {md["module_name"]: module}}


# -- reading one back (mtvm project generate MODEL.tar) --------------------------------------
_MODULE = re.compile(r"[a-z][a-z0-9_]*")
_REQUIRED = ("module_name", "model_name", "inputs", "outputs", "workspace_bytes", "target",
             "operators")


def is_model_library(path) -> bool:
    """Whether `path` is to be read as a Model Library Format: a .tar, or a
    directory (an .onnx file is not; load_model_library says what is wrong)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return True
    return path.endswith(".tar") or (os.path.isfile(path) and tarfile.is_tarfile(path))


def _member_path(name: str, where: str) -> str:
    rel = name.replace("\\", "/")
    while rel.startswith("./"):
        rel = rel[2:]
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or ".." in parts or not parts:
        raise MtvmError(f"{where}: member {name!r} is outside the archive; not a Model "
                        "Library Format mtvm can use")
    return "/".join(parts)


def _read_files(path: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    if os.path.isdir(path):
        for d, dirs, names in os.walk(path):
            for n in dirs + names:
                full = os.path.join(d, n)
                if os.path.islink(full):
                    raise MtvmError(f"{path}: {os.path.relpath(full, path)} is a symbolic link "
                                    "(a Model Library Format directory holds plain files only)")
            for n in names:
                full = os.path.join(d, n)
                with open(full, "rb") as f:
                    files[os.path.relpath(full, path).replace(os.sep, "/")] = f.read()
        return files
    if not os.path.exists(path):
        raise MtvmError(f"model library {path} not found")
    try:
        with tarfile.open(path, "r:*") as tar:
            for m in tar.getmembers():
                if m.isdir():
                    continue
                if not m.isfile():
                    raise MtvmError(f"{path}: member {m.name!r} is not a regular file (a link "
                                    "or device); not a Model Library Format mtvm can use")
                files[_member_path(m.name, path)] = tar.extractfile(m).read()
    except (tarfile.TarError, EOFError, OSError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else "not a readable tar"
        raise MtvmError(f"{path} is not a Model Library Format: {why}")
    return files


class ModelLibrary:
    """A Model Library Format that mtvm exported, read back from a tar or a directory:
    what mtvm.project.generate needs of a compiled model (module_name, metadata,
    target, profile, sources, export). Its files are used as they are."""

    def __init__(self, path, files: dict[str, bytes], metadata: dict):
        from .target import Target
        self.path = os.path.abspath(os.fspath(path))
        self._files = files
        self.metadata = metadata
        self.module_name = metadata["module_name"]
        try:
            self.target = Target.parse(metadata["target"]["name"])
        except (MtvmError, KeyError, TypeError) as e:
            raise MtvmError(f"{path}: metadata.json names a target mtvm does not know ({e})")
        self.profile = bool(metadata.get("profiling"))
        self.external_workspace = bool(metadata.get("external_workspace"))
        self.io_in_workspace = bool(metadata.get("io_in_workspace"))
        self.output_names = metadata.get("output_names", "onnx")
        self.sources = {rel: data.decode("utf-8", "replace") for rel, data in files.items()
                        if rel.startswith("codegen/host/")
                        and rel.endswith((".c", ".h"))}

    def __repr__(self):
        return f"<mtvm ModelLibrary {self.path} (module {self.module_name})>"

    def files(self) -> dict[str, bytes]:
        return dict(self._files)

    def export(self, path, force: bool = False) -> str:
        """Writes the same files (a directory, or a tar if path ends in .tar)."""
        return write_mlf(path, self._files, force)


def load_model_library(path) -> ModelLibrary:
    """Reads a Model Library Format that mtvm exported (a tar or a directory). One
    line of error for anything else: no metadata.json, another tool's MLF (TVM's),
    a newer mtvm's, or missing files."""
    path = os.fspath(path)
    files = _read_files(path)
    if "metadata.json" not in files:
        raise MtvmError(f"{path} is not a Model Library Format: it has no metadata.json")
    try:
        md = json.loads(files["metadata.json"].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise MtvmError(f"{path}: metadata.json is not valid JSON ({e})")
    if not isinstance(md, dict):
        raise MtvmError(f"{path}: metadata.json is not a JSON object")
    generator = md.get("generator")
    if not (isinstance(generator, str) and generator.startswith("mtvm")
            and isinstance(md.get("format_version"), int)):
        what = (f"version {md.get('version')}, modules "
                f"{', '.join(map(str, md['modules']))}" if isinstance(md.get("modules"), dict)
                else "no mtvm fields")
        raise MtvmError(f"{path} is a Model Library Format that mtvm did not write ({what}): "
                        "mtvm generates projects only from its own MLFs (their kernels and "
                        "metadata); compile the ONNX model with mtvm instead")
    if md["format_version"] > FORMAT_VERSION:
        raise MtvmError(f"{path} was written by a newer mtvm ({generator}, metadata format "
                        f"{md['format_version']}; this mtvm reads {FORMAT_VERSION}); upgrade "
                        "mtvm or recompile the model")
    missing = [k for k in _REQUIRED if k not in md]
    if missing:
        raise MtvmError(f"{path}: metadata.json lacks {', '.join(missing)}; re-export it "
                        "with mtvm")
    mod = md["module_name"]
    if not (isinstance(mod, str) and _MODULE.fullmatch(mod)):
        raise MtvmError(f"{path}: metadata.json module_name {mod!r} is not a module name "
                        "mtvm writes; re-export it with mtvm")
    need = [f"codegen/host/include/tvmgen_{mod}.h", f"codegen/host/src/tvmgen_{mod}.c"]
    missing = [f for f in need if f not in files]
    if missing:
        raise MtvmError(f"{path}: {', '.join(missing)} missing; not a complete Model Library "
                        "Format (re-export it with mtvm)")
    return ModelLibrary(path, files, md)
