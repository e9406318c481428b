"""Build a compiled model with the host C compiler and run it.

In-process: the sources become a shared library loaded with cffi (fast; what
most tests use). Sanitized: the sources plus a small harness main become an
executable built with -fsanitize=address,undefined and run as its own process
(ASan cannot be loaded into an already running Python).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from .errors import BuildError, MtvmError

WARN_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror"]
# The external workspace's alignment: a cache line, as the model's own arena is aligned on
# x86 (Target.arena_alignment), so that its 512-bit loads never split one.
WORKSPACE_ALIGN = 64
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                  "-fno-omit-frame-pointer", "-g"]

# Timer hooks for profiling builds on the host (a board provides its own).
HOST_TIMER_C = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <time.h>
static uint64_t mtvm_host_t0;
static uint64_t mtvm_host_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
void mtvm_platform_timer_start(void) { mtvm_host_t0 = mtvm_host_now_ns(); }
uint64_t mtvm_platform_timer_stop_ticks(void) { return mtvm_host_now_ns() - mtvm_host_t0; }
"""


def cache_dir() -> str:
    d = os.environ.get("MTVM_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "mtvm")
    os.makedirs(d, exist_ok=True)
    return d


def _write_mlf(model, root: str) -> list[str]:
    for rel, text in model.files().items():
        full = os.path.join(root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    srcs = [os.path.join(root, r) for r in model.sources if r.endswith(".c")]
    if model.profile:
        timer = os.path.join(root, "host_timer.c")
        with open(timer, "w") as f:
            f.write(HOST_TIMER_C)
        srcs.append(timer)
    return srcs


def compile_c(cmd: list[str], what: str) -> None:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise BuildError(f"{what}: {cmd[0]} failed:\n{p.stderr[-4000:]}")


def _cc() -> str:
    return os.environ.get("CC", "cc")


def target_flags(model) -> list[str]:
    """The flags that make the host compiler see the model's target (none for
    target "c"); one line when the model was compiled for another machine."""
    t = model.target
    if not t.runs_on_host():
        from .target import host_target
        raise MtvmError(f"model {model.module_name} was compiled for target {t.name}, which "
                        f"does not run on this machine ({host_target().name}); compile it "
                        f"with target=\"host\" or \"c\" to run it here")
    return t.cflags()


def build_shared(model, opt: str = "-O2", extra: list[str] | None = None) -> str:
    """The model as a shared library in the cache; returns its path."""
    if model.backend != "c":
        raise MtvmError(f"model {model.module_name} was compiled by the {model.backend} "
                        "backend: it runs on the host through its run_host (the JIT), "
                        "not as a shared library built from C")
    flags = [opt, "-fPIC", "-shared"] + WARN_FLAGS + target_flags(model) + (extra or [])
    key = hashlib.sha256(("\0".join(flags) + _cc()).encode())
    for rel, text in sorted(model.sources.items()):
        key.update(rel.encode() + b"\0" + text.encode())
    key.update(str(model.profile).encode())
    out = os.path.join(cache_dir(), "lib", key.hexdigest()[:24], "model.so")
    if os.path.exists(out):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(out)) as tmp:
        srcs = _write_mlf(model, tmp)
        inc = os.path.join(tmp, "codegen/host/include")
        tmp_so = os.path.join(tmp, "model.so")
        compile_c([_cc()] + flags + ["-I", inc] + srcs + ["-o", tmp_so, "-lm"],
                  f"building model {model.module_name}")
        os.replace(tmp_so, out)
    return out


def _cdef(model) -> str:
    m = model.module_name
    md = model.metadata
    fields = {kind: " ".join("void* %s;" % t["c_name"] for t in md[kind])
              for kind in ("inputs", "outputs")}
    lines = [f"struct tvmgen_{m}_{kind} {{ {f} }};" for kind, f in fields.items()]
    args = f"struct tvmgen_{m}_inputs*, struct tvmgen_{m}_outputs*"
    if model.external_workspace:
        lines.append(f"struct tvmgen_{m}_workspace_pools {{ void* global_workspace; }};")
        args += f", struct tvmgen_{m}_workspace_pools*"
    lines.append(f"int32_t tvmgen_{m}_run({args});")
    if model.profile:
        lines.append(f"uint64_t tvmgen_{m}_profile_ticks[{max(len(model.kernels), 1)}];")
    return "\n".join(lines)


def normalize_inputs(model, inputs) -> list[np.ndarray]:
    """Inputs as contiguous arrays in input order, checked against the model."""
    spec = model.metadata["inputs"]
    if isinstance(inputs, dict):
        missing = [s["name"] for s in spec if s["name"] not in inputs]
        if missing:
            raise MtvmError(f"missing input(s) {', '.join(missing)}; the model takes "
                            + ", ".join(f"{s['name']} {s['dtype']}{s['shape']}" for s in spec))
        arrays = [inputs[s["name"]] for s in spec]
    else:
        arrays = list(inputs)
        if len(arrays) != len(spec):
            raise MtvmError(f"the model takes {len(spec)} input(s), got {len(arrays)}")
    out = []
    for s, a in zip(spec, arrays):
        a = np.asarray(a)
        if tuple(a.shape) != tuple(s["shape"]) and a.size != int(np.prod(s["shape"])):
            raise MtvmError(f"input \"{s['name']}\": expected shape {s['shape']}, "
                            f"got {list(a.shape)}")
        if a.dtype != np.dtype(s["dtype"]):
            if not np.can_cast(a.dtype, s["dtype"], "same_kind"):
                raise MtvmError(f"input \"{s['name']}\": expected dtype {s['dtype']}, "
                                f"got {a.dtype.name}")
            a = a.astype(s["dtype"])
        out.append(np.ascontiguousarray(a.reshape(s["shape"])))
    return out


class HostModule:
    """A model's shared library loaded in this process."""

    def __init__(self, model, **build_opts):
        import cffi
        self.model = model
        self.ffi = cffi.FFI()
        self.ffi.cdef(_cdef(model))
        self.lib = self.ffi.dlopen(build_shared(model, **build_opts))
        ws = model.metadata["workspace_bytes"]
        self._ws = np.zeros(ws + WORKSPACE_ALIGN, np.uint8) if model.external_workspace \
            else None
        self._call = None

    def run(self, inputs) -> dict:
        """Run the model on inputs (a dict by input name, or a sequence in input
        order); returns new output arrays by output name."""
        if self._call is None:
            self._call = _PreparedCall(self.ffi, self.lib, self.model, self._ws)
        return self._call(inputs)

    def profile_ticks(self) -> list[int]:
        return list(getattr(self.lib, f"tvmgen_{self.model.module_name}_profile_ticks"))


def call_run(ffi, lib, model, arrays, workspace=None) -> list[np.ndarray]:
    """Call tvmgen_<mod>_run of a loaded library on contiguous input arrays (in
    input order); returns new output arrays. `workspace` (a uint8 array with
    WORKSPACE_ALIGN spare bytes) is passed as the arena of an external-workspace build,
    from its first aligned byte."""
    return _PreparedCall(ffi, lib, model, workspace).run_arrays(arrays)


class _PreparedCall:
    """A loaded model's call, its cffi argument structs made once (HostModule keeps
    one: on a model of tens of microseconds, building them and checking the inputs
    each call took about 4 us; call_run makes one for a single call). Inputs that already are contiguous arrays of
    the model's dtype and shape are passed as they are; any other input goes through
    normalize_inputs, which converts or names what is wrong. One call at a time, as
    the model's arena is one."""

    def __init__(self, ffi, lib, model, workspace):
        md, m = model.metadata, model.module_name
        self.ffi, self.model = ffi, model
        self.fn = getattr(lib, f"tvmgen_{m}_run")
        self.ins = [(s["name"], s["c_name"], tuple(s["shape"]), np.dtype(s["dtype"]))
                    for s in md["inputs"]]
        self.outs = [(o["name"], o["c_name"], tuple(o["shape"]), np.dtype(o["dtype"]))
                     for o in md["outputs"]]
        self.ins_s = ffi.new(f"struct tvmgen_{m}_inputs*")
        self.outs_s = ffi.new(f"struct tvmgen_{m}_outputs*")
        self.args = [self.ins_s, self.outs_s]
        if workspace is not None:
            pools = ffi.new(f"struct tvmgen_{m}_workspace_pools*")
            self._base = ffi.from_buffer(workspace)   # kept: the pointer outlives this call
            offset = (-int(ffi.cast("uintptr_t", self._base))) % WORKSPACE_ALIGN
            pools.global_workspace = ffi.cast("void*", self._base + offset)
            self.args.append(pools)

    def _arrays(self, inputs) -> list:
        if isinstance(inputs, dict):
            arrays = [inputs.get(name) for name, _, _, _ in self.ins]
            if all(type(a) is np.ndarray and a.dtype == dt and a.shape == shape
                   and a.flags.c_contiguous for a, (_, _, shape, dt) in zip(arrays, self.ins)):
                return arrays
        return normalize_inputs(self.model, inputs)

    def run_arrays(self, arrays) -> list[np.ndarray]:
        """The call on contiguous input arrays in input order: new outputs in order."""
        ffi = self.ffi
        outs = [np.empty(shape, dt) for _, _, shape, dt in self.outs]
        keep = []   # cffi buffers must outlive the call
        for struct, specs, values in ((self.ins_s, self.ins, arrays),
                                      (self.outs_s, self.outs, outs)):
            for (_, c_name, _, _), a in zip(specs, values):
                p = ffi.from_buffer(a)
                keep.append(p)
                setattr(struct, c_name, p)
        status = self.fn(*self.args)
        if status != 0:
            raise MtvmError(f"model {self.model.module_name} returned status {status}")
        return outs

    def __call__(self, inputs) -> dict:
        outs = self.run_arrays(self._arrays(inputs))
        return {name: a for (name, _, _, _), a in zip(self.outs, outs)}


_loaded: dict[int, HostModule] = {}


def run_host(model, inputs, sanitize: bool = False, **build_opts) -> dict:
    if sanitize:
        return run_sanitized(model, inputs)
    key = id(model)
    if key not in _loaded or _loaded[key].model is not model:
        _loaded[key] = HostModule(model, **build_opts)
    return _loaded[key].run(inputs)


# What the test harnesses (here and in mtvm.conformance) share: file I/O.
HARNESS_PRELUDE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
static void* load(const char* path, size_t n) {
    void* p = malloc(n ? n : 1);
    FILE* f = fopen(path, "rb");
    if (!p || !f || fread(p, 1, n, f) != n) { fprintf(stderr, "cannot read %s\n", path); exit(2); }
    fclose(f);
    return p;
}
static void save(const char* path, const void* p, size_t n) {
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { fprintf(stderr, "cannot write %s\n", path); exit(2); }
    fclose(f);
}
"""

HARNESS_C = "/* Test harness: read each input from a file, run once, write each output. */" \
    + HARNESS_PRELUDE + r"""
#include "tvmgen_@MOD@.h"

int main(int argc, char** argv) {
    struct tvmgen_@MOD@_inputs in;
    struct tvmgen_@MOD@_outputs out;
    int a = 1;
    (void)argc;
@LOAD@
@ALLOC@
@WS@
    int32_t status = tvmgen_@MOD@_run(&in, &out@WSARG@);
    if (status != 0) { fprintf(stderr, "status %d\n", (int)status); return 3; }
@SAVE@
    return 0;
}
"""


def run_sanitized(model, inputs) -> dict:
    """Build with ASan+UBSan and run in a separate process; any report fails."""
    md, m = model.metadata, model.module_name
    arrays = normalize_inputs(model, inputs)
    load = "\n".join(f"    in.{s['c_name']} = load(argv[a++], {s['size_bytes']});"
                     for s in md["inputs"])
    alloc = "\n".join(f"    out.{s['c_name']} = calloc({max(s['size_bytes'], 1)}, 1);"
                      for s in md["outputs"])
    save = "\n".join(f"    save(argv[a++], out.{s['c_name']}, {s['size_bytes']});"
                     for s in md["outputs"])
    ws, wsarg = "", ""
    if model.external_workspace:
        ws = (f"    struct tvmgen_{m}_workspace_pools pools;\n"
              f"    pools.global_workspace = aligned_alloc(16, "
              f"({md['workspace_bytes']} + 16) / 16 * 16);")
        wsarg = ", &pools"
    src = (HARNESS_C.replace("@LOAD@", load).replace("@ALLOC@", alloc).replace("@SAVE@", save)
           .replace("@WS@", ws).replace("@WSARG@", wsarg).replace("@MOD@", m))
    tmp = tempfile.mkdtemp(prefix="mtvm-asan-")
    try:
        srcs = _write_mlf(model, tmp)
        harness = os.path.join(tmp, "harness.c")
        with open(harness, "w") as f:
            f.write(src)
        exe = os.path.join(tmp, "model_test")
        inc = os.path.join(tmp, "codegen/host/include")
        compile_c([_cc(), "-O1"] + SANITIZE_FLAGS + WARN_FLAGS[1:] + target_flags(model)
                  + ["-std=c11", "-I", inc]
                  + srcs + [harness, "-o", exe, "-lm"], f"building sanitized {m}")
        argv = [exe]
        for i, a in enumerate(arrays):
            p = os.path.join(tmp, f"in{i}.bin")
            a.tofile(p)
            argv.append(p)
        outs = [os.path.join(tmp, f"out{i}.bin") for i in range(len(md["outputs"]))]
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
        p = subprocess.run(argv + outs, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise BuildError(f"sanitized run of {m} failed ({p.returncode}):\n{p.stderr[-4000:]}")
        return {s["name"]: np.fromfile(path, s["dtype"]).reshape(s["shape"])
                for s, path in zip(md["outputs"], outs)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
