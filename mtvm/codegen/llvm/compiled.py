"""A model compiled by the LLVM backend: the MLF holds the C header, the LLVM
IR (src/), the object code for the target (lib/lib0.o) and its weights
(lib/lib1.o, written directly as ELF); run_host runs it through the JIT."""
from __future__ import annotations

from ...model_library import CompiledModel


class LLVMCompiledModel(CompiledModel):
    backend = "llvm"

    def __init__(self, *args, llvm_ir: str, blobs: dict, **kw):
        self.llvm_ir = llvm_ir
        self.constant_blobs = blobs     # symbol -> bytes: weights and tables the code reads
        self._object: bytes | None = None
        self._jit = None
        super().__init__(*args, **kw)
        self.metadata["backend"] = "llvm"
        # The nests' knobs are keyed by this backend's workload keys (not the C backend's).
        from . import workload_key
        by_fn = {lk.kernel.fname: lk.kernel for lk in self.kernels}
        for op in self.metadata.get("operators", []):
            if op.get("schedule"):
                op["workload_key"] = workload_key(by_fn[op["function"]])

    def object_code(self) -> bytes:
        """The ELF object of the whole module for self.target (cached)."""
        if self._object is None:
            from . import object_code
            self._object = object_code(self.llvm_ir, self.target)
        return self._object

    def data_object(self) -> bytes:
        """The weights and tables as an ELF object for self.target."""
        from .elf_data import data_object
        from .machine import llvm_target
        return data_object(self.constant_blobs, llvm_target(self.target),
                           self.constants_section or f".rodata.tvmgen_{self.module_name}")

    def blobs(self) -> dict[str, bytes]:
        return {**super().blobs(), "codegen/host/lib/lib0.o": self.object_code(),
                "codegen/host/lib/lib1.o": self.data_object()}

    def run_host(self, inputs, sanitize: bool = False, **build_opts) -> dict:
        """Run in this process through LLVM's JIT (no C compiler involved).
        sanitize and build options belong to the C backend."""
        from ...errors import MtvmError
        from ...host_runner import normalize_inputs
        if sanitize or build_opts:
            raise MtvmError("run_host(sanitize=..., build options) is for the C backend; "
                            "an LLVM-backend model runs through the JIT")
        if not self.target.runs_on_host():
            raise MtvmError(f"this model was compiled for {self.target.name}, "
                            "which is not this machine; compile it for target host to run here")
        if self._jit is None:
            from .jit import JITModule
            self._jit = JITModule(self)
        outs = self._jit.run(normalize_inputs(self, inputs))
        return {o["name"]: a for o, a in zip(self.metadata["outputs"], outs)}


__all__ = ["LLVMCompiledModel"]
