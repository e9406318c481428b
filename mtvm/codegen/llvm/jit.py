"""Run an LLVM-backend model in this process through LLVM's MCJIT: no C
compiler, no shared library on disk. The entry is called through ctypes with
the same structs of pointers the C interface takes."""
from __future__ import annotations

import ctypes

import numpy as np

from ...errors import MtvmError

BLOB_ALIGN = 64    # bytes: where the JIT puts the weights and tables


class JITModule:
    """A model's code compiled for this machine and loaded in this process."""

    def __init__(self, model):
        from . import parse_and_optimize
        from .machine import _llvm
        llvm = _llvm()
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.model = model
        module, tm = parse_and_optimize(model.llvm_ir, model.target, jit=True)
        # The weights are symbols the code refers to: here, this object's buffers, on
        # cache lines (64 bytes; the code assumes 16): a weight table 16 bytes off a line
        # splits every other 32-byte load in two (an AVX2 conv tile of 4 vectors of
        # channels: 67 us instead of 46). The tuner measures with this alignment too.
        self._buffers = []
        for name, data in model.constant_blobs.items():
            buf = np.empty(len(data) + BLOB_ALIGN, np.uint8)
            start = (-buf.ctypes.data) % BLOB_ALIGN
            buf[start:start + len(data)] = np.frombuffer(data, np.uint8)
            self._buffers.append(buf)
            llvm.add_symbol(name, buf.ctypes.data + start)
        if model.profile:     # the platform timer hooks: this process's clock, in ns
            self._hooks = _timer_hooks()
            for name, fn in self._hooks.items():
                llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
        # libm's functions (tanhf, erff, ...) resolve against this process,
        # which has libm loaded (CPython links it).
        self.engine = llvm.create_mcjit_compiler(module, tm)
        self.engine.finalize_object()
        addr = self.engine.get_function_address(f"tvmgen_{model.module_name}_run")
        self._run = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(addr)

    def timer(self, arrays):
        """fn(n): run the model n times on these inputs, into outputs allocated
        once (what the tuner times; ctypes' call costs about a microsecond)."""
        md = self.model.metadata
        outs = [np.empty(o["shape"], o["dtype"]) for o in md["outputs"]]
        ins_s = (ctypes.c_void_p * max(len(arrays), 1))(*[a.ctypes.data for a in arrays])
        outs_s = (ctypes.c_void_p * max(len(outs), 1))(*[a.ctypes.data for a in outs])
        args = (ctypes.cast(ins_s, ctypes.c_void_p), ctypes.cast(outs_s, ctypes.c_void_p))
        run = self._run

        def fn(n: int) -> None:
            fn.keep = (arrays, outs, ins_s, outs_s)
            for _ in range(n):
                run(*args)
        return fn

    def profile_ticks(self) -> list[int]:
        """Nanoseconds of each kernel in the last run (a profiling build)."""
        if not self.model.profile:
            raise MtvmError("this model was not compiled with profile=True")
        n = max(len(self.model.kernels), 1)
        addr = self.engine.get_global_value_address(
            f"tvmgen_{self.model.module_name}_profile_ticks")
        return list((ctypes.c_uint64 * n).from_address(addr))

    def run(self, arrays) -> list[np.ndarray]:
        md = self.model.metadata
        outs = [np.empty(o["shape"], o["dtype"]) for o in md["outputs"]]
        ins_s = (ctypes.c_void_p * max(len(arrays), 1))(*[a.ctypes.data for a in arrays])
        outs_s = (ctypes.c_void_p * max(len(outs), 1))(*[a.ctypes.data for a in outs])
        status = self._run(ctypes.cast(ins_s, ctypes.c_void_p), ctypes.cast(outs_s, ctypes.c_void_p))
        if status != 0:
            raise MtvmError(f"model {self.model.module_name} returned status {status}")
        return outs


def _timer_hooks() -> dict:
    """mtvm_platform_timer_start / _stop_ticks for a profiling build run in this
    process: ticks are nanoseconds of time.perf_counter_ns."""
    import time
    state = {"t0": 0}

    @ctypes.CFUNCTYPE(None)
    def start():
        state["t0"] = time.perf_counter_ns()

    @ctypes.CFUNCTYPE(ctypes.c_uint64)
    def stop():
        return time.perf_counter_ns() - state["t0"]
    return {"mtvm_platform_timer_start": start, "mtvm_platform_timer_stop_ticks": stop}


__all__ = ["JITModule"]
