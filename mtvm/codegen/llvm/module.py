"""A lowered, planned graph as one LLVM module: kernels, weights, arena, AOT entry.

What the C backend writes into four C files (mtvm.codegen.c_codegen) in one
llvmlite.ir.Module instead:
  - one function per fused operator, lowered from its C writer body (lower.py);
  - the weights as constant globals (in a named section on request);
  - the activations' arena as one 16-byte aligned global;
  - `int32_t tvmgen_<mod>_run(struct tvmgen_<mod>_inputs*, struct
    tvmgen_<mod>_outputs*)`, the same C interface: each struct is an array of
    `void*` in the header's order, so the C header is the module's header too.
Nothing from the model becomes a symbol: kernels are named as in C
(tvmgen_<mod>_<step>_<op>), weights by their index.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import llvmlite.ir as ir
import numpy as np

from ..constants import content_key
from ..cwriter import Const, Function, Return, Table, Type, Var
from .lower import FunctionLowering, NotLowerable

I8 = ir.IntType(8)
I32 = ir.IntType(32)


@dataclass
class IRKernel:
    """One kernel in the C writer's IR: its Kernel, statements and parameters
    ([(C declaration, Buf | None)] as Kernel.params gives them). The constant
    tables at the top of its body (re-laid-out weights) become parameters too,
    so that kernels of the same shape share one function whatever their weights."""
    kernel: object
    body: list
    step: int
    params: list
    tables: list = field(default_factory=list)

    def __post_init__(self):
        self.tables = [s for s in self.body if isinstance(s, Table)]
        self.body = [s for s in self.body if not isinstance(s, Table)]

    def function(self) -> Function:
        args = []
        for decl, buf in self.params:
            if buf is None:   # the kernel's scratch, planned in the arena
                args.append(Var("scratch", Type("uint8", pointer=True, restrict=True)))
                continue
            output = any(buf is o for o in self.kernel.outs)
            args.append(Var(buf.c, Type(buf.dtype, pointer=True, const=not output,
                                        restrict="restrict" in decl)))
        args += [Var(t.var.name, Type(t.var.type.dtype, pointer=True, const=True, restrict=True))
                 for t in self.tables]
        return Function(self.kernel.fname, args, [*self.body, Return(Const(0, "int32"))],
                        ret=Type("int32"))

    @property
    def may_contract(self) -> bool:
        """Whether a * b + c may become one fused multiply-add (LLVM's `contract`):
        only in a kernel of float tensors alone. A kernel that reads or writes
        integers (the quantized ones) rounds float results to integers, where one
        rounding fewer moves x.5 ties that the C backend (-std=c99 does not
        contract) and the reference round as written: QResize on the host was 1
        step off on 11 of 17,920 values of a UNet (bench/variants.py --seed 22)."""
        k = self.kernel
        bufs = [b for b in [*k.ins, *k.outs, *k.eps] if b is not None]
        return k.node.domain != "mtvm" and all(b.dtype.kind == "f" for b in bufs)

    def shape_key(self, fn: Function) -> str:
        """Equal for two kernels that compute the same function of their parameters."""
        return repr((fn.params, fn.body, fn.ret))   # structural: the IR's dataclass reprs


class LLVMModule:
    """Builds the module of one compiled graph for a target (index_bits: size_t)."""

    def __init__(self, g, plan, kernels: list[IRKernel], mod: str, in_names: dict,
                 out_names: dict, index_bits: int, triple: str, data_layout: str,
                 constants_section: str | None = None, calling_convention: str = "",
                 intrinsics: frozenset | None = None, profile: bool = False):
        self.g, self.plan, self.kernels, self.mod = g, plan, kernels, mod
        self.profile = profile
        self.in_names, self.out_names = in_names, out_names
        self.module = ir.Module(name=f"tvmgen_{mod}")
        self.module.triple = triple
        self.module.data_layout = data_layout
        self.index_bits = index_bits
        self.constants_section = constants_section
        self.lowering = FunctionLowering(self.module, index_bits, calling_convention, intrinsics)
        self._consts: dict[str, ir.GlobalVariable] = {}
        self._by_content: dict[tuple, ir.GlobalVariable] = {}
        # On a 32-bit core an arena address costs a movw/movt pair, and an offset past
        # 4 KiB from it another movw per load: there the kernels are external, so
        # LLVM cannot specialize them to the constant addresses the entry passes and
        # they index their buffers from a register, as the C backend's kernels do
        # (-13 % M4 instructions on kws_dscnn_int8). On x86 the 32-bit displacement
        # is free and internal kernels may be inlined.
        self.kernel_linkage = "internal" if index_bits == 64 else None

    def text(self) -> str:
        """The module's LLVM IR (build first)."""
        return str(self.module)

    def build(self) -> ir.Module:
        fns, by_shape = [], {}
        for ik in self.kernels:
            f = ik.function()
            key = ik.shape_key(f)
            if key not in by_shape:   # a kernel of the same shape: the same function
                try:
                    by_shape[key] = self.lowering.function(f, linkage=self.kernel_linkage,
                                                           contract=ik.may_contract)
                except NotLowerable as e:
                    e.kernel = ik
                    raise
            fns.append(by_shape[key])
        self.shared_kernels = len(self.kernels) - len(by_shape)
        self._entry(fns)
        return self.module

    # -- data ----------------------------------------------------------------------------
    def _constant(self, buf) -> ir.GlobalVariable:
        """One global per distinct constant: buffers of the same bytes share it."""
        if buf.name not in self._consts:
            data = np.ascontiguousarray(buf.const, dtype=buf.dtype)
            key = content_key(data)
            if key not in self._by_content:
                self._by_content[key] = self.lowering.blob(
                    f"tvmgen_{self.mod}_c_{len(self._by_content)}", data.tobytes(),
                    self.constants_section)
            self._consts[buf.name] = self._by_content[key]
        return self._consts[buf.name]

    def _arena(self) -> ir.GlobalVariable | None:
        size = self.plan.arena_bytes
        if not size:
            return None
        arr = ir.ArrayType(I8, size)
        gv = ir.GlobalVariable(self.module, arr, f"tvmgen_{self.mod}_workspace")
        gv.linkage = "internal"
        gv.initializer = ir.Constant(arr, None)
        gv.align = 16
        return gv

    # -- the AOT entry -----------------------------------------------------------------------
    def _entry(self, fns) -> None:
        ptr = I8.as_pointer()
        fty = ir.FunctionType(I32, [ptr.as_pointer(), ptr.as_pointer()])
        fn = ir.Function(self.module, fty, f"tvmgen_{self.mod}_run")
        fn.attributes.add("nounwind")
        cconv = self.lowering.cconv
        if cconv:
            fn.calling_convention = cconv
        inputs, outputs = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        arena = self._arena()
        in_index = {name: i for i, name in enumerate(self.in_names)}
        out_index = {name: i for i, name in enumerate(self.out_names)}

        def pointer(buf, step) -> ir.Value:
            if buf is None:
                return arena.gep([ir.Constant(I32, 0), ir.Constant(I32, self.plan.scratch[step])])
            root = self.plan.root(buf.name)
            if buf.const is not None:
                p = self._constant(buf).gep([ir.Constant(I32, 0), ir.Constant(I32, 0)])
            elif root in in_index:
                p = b.load(b.gep(inputs, [ir.Constant(I32, in_index[root])]))
            elif root in out_index:
                p = b.load(b.gep(outputs, [ir.Constant(I32, out_index[root])]))
            else:
                p = arena.gep([ir.Constant(I32, 0),
                               ir.Constant(I32, self.plan.arena_offset(buf.name))])
            return b.bitcast(p, self.lowering.llvm_type(Type(buf.dtype, pointer=True)))

        start, stop, ticks = self._profile_hooks() if self.profile else (None, None, None)
        tables = 0
        for i, (ik, kfn) in enumerate(zip(self.kernels, fns)):
            args = [pointer(buf, ik.step) for _, buf in ik.params]
            for t in ik.tables:
                gv = self.lowering.blob(f"tvmgen_{self.mod}_t_{tables}", t.data.tobytes(),
                                        self.constants_section)
                tables += 1
                args.append(b.bitcast(gv, self.lowering.llvm_type(
                    Type(t.var.type.dtype, pointer=True))))
            if start is not None:
                b.call(start, [], cconv=cconv or None)
            status = b.call(kfn, args, cconv=cconv or None)
            if stop is not None:
                b.store(b.call(stop, [], cconv=cconv or None),
                        ticks.gep([ir.Constant(I32, 0), ir.Constant(I32, i)]))
            fail = b.icmp_signed("!=", status, ir.Constant(I32, 0))
            with b.if_then(fail, likely=False):
                b.ret(status)
        b.ret(ir.Constant(I32, 0))

    def _profile_hooks(self):
        """A profiling build (the C backend's contract, mtvm_platform.h): each kernel's
        call between the platform's timer start and stop, its ticks stored in
        tvmgen_<mod>_profile_ticks[kernel], which the runtime and sessions read."""
        cconv = self.lowering.cconv
        i64 = ir.IntType(64)
        hooks = []
        for name, ret in (("mtvm_platform_timer_start", ir.VoidType()),
                          ("mtvm_platform_timer_stop_ticks", i64)):
            f = ir.Function(self.module, ir.FunctionType(ret, []), name)
            if cconv:
                f.calling_convention = cconv
            hooks.append(f)
        arr = ir.ArrayType(i64, max(len(self.kernels), 1))
        ticks = ir.GlobalVariable(self.module, arr, f"tvmgen_{self.mod}_profile_ticks")
        ticks.initializer = ir.Constant(arr, None)
        ticks.align = 8
        return hooks[0], hooks[1], ticks


__all__ = ["IRKernel", "LLVMModule"]
