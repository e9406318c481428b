"""Lowered graph + memory plan -> C sources of a Model Library Format module.

Files (under codegen/host/):
  include/tvmgen_<mod>.h        the public interface (microTVM interface-api=c)
  src/tvmgen_<mod>.c            the AOT entry: calls each kernel on planned buffers
  src/tvmgen_<mod>_kernels.c    one function per fused operator
  src/tvmgen_<mod>_constants.c  weights as const data
  src/tvmgen_<mod>_internal.h   declarations shared by the three
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import MtvmError
from ..ir import Graph
from ..memory import MemoryPlan
from ..ops.base import get_op
from .. import schedules
from ..target import GENERIC, Target
from . import constants as cst
from . import kernel_library
from .cwriter import (VOID, Assign, Block, Call, Cast, Comment, Const, Decl, ExprStmt, If, Index, RawExpr,
                      Return, Type, Var, call, ne, render_c)
from .kernel import Kernel
from .weight_layout import lay_out_weights
from .names import c_comment, c_name, interface_names, sanitize, unique_names

BYTES, VOID_P = Type("uint8", pointer=True), Type(VOID, pointer=True)
STATUS, WS = Var("status", Type("int32")), Var("ws", BYTES)
inputs, outputs = Var("inputs"), Var("outputs")


def _void(e) -> ExprStmt:
    """(void)e;: a value the function may not use."""
    return ExprStmt(Cast(Type(VOID), e))


def _braced(body: list) -> str:
    """A function body: { statements }."""
    return render_c(Block(body))


# Included before anything else by the operators' source (why: in the header).
FIRST_LIBRARY = "mtvm_no_trapping_math.h"
KERNEL_INCLUDES = "#include <math.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n"


@dataclass
class LoweredKernel:
    kernel: Kernel
    body: str
    step: int                      # index of the node in graph.nodes
    params: list                   # [(C declaration, Buf | None)]


def kernel_name(mod: str, i: int, node) -> str:
    parts = [node.op] + [t.op for t in node.tail]
    return f"tvmgen_{mod}_{i:03d}_" + "_".join(sanitize(p).lower() for p in parts)


def make_kernel(g: Graph, step: int, mod: str, inplace: dict | None = None,
                target: Target = GENERIC, config=None) -> Kernel:
    """The Kernel of node `step` (before emission): its buffers, target,
    schedule config and in-place decision."""
    n = g.nodes[step]
    k = Kernel(g, n, kernel_name(mod, step, n), target=target, config=config)
    v = (inplace or {}).get(step)
    k.inplace = v if isinstance(v, int) else None
    k.inplace_tail = v if isinstance(v, str) else None
    return k


def kernel_scratch(g: Graph, mod: str, inplace: dict | None = None,
                   target: Target = GENERIC, config=None) -> dict[int, int]:
    """{step: scratch bytes} of each kernel, from the schedules' (or ops') pure
    scratch_bytes; memory planning calls this, never the emitters."""
    out = {}
    for step, n in enumerate(g.nodes):
        if not n.has_kernel:
            continue
        out[step] = _scratch(make_kernel(g, step, mod, inplace, target, config))
    return out


def _scratch(k: Kernel) -> int:
    n = k.node
    if all(b is None or b.size == 0 for b in k.outs):
        return 0
    sched = schedules.choose(k)
    impl = sched if sched is not None else get_op(n.op, n.domain)
    return int(impl.scratch_bytes(k, **n.attrs))


def lower_kernels(g: Graph, mod: str, inplace: dict[int, int] | None = None,
                  target: Target = GENERIC, config=None) -> list[LoweredKernel]:
    """`inplace`: {node index: input index} of the kernels whose output is
    written over that input (memory.inplace_steps); their emitters see k.inplace.
    `target` and `config` (mtvm.schedules.ScheduleConfig) choose the schedules."""
    out = []
    for step, n in enumerate(g.nodes):
        if not n.has_kernel:
            continue
        k = make_kernel(g, step, mod, inplace, target, config)
        op = get_op(n.op, n.domain)
        if all(b is None or b.size == 0 for b in k.outs):
            # Empty outputs (a dimension of 0): nothing to compute.
            body = "\n".join(f"(void){b.c};" for b in k.outs if b is not None)
        else:
            sched = schedules.choose(k)
            impl = sched if sched is not None else op
            lay_out_weights(k, sched, n.attrs)
            planned = k.scratch_bytes = int(impl.scratch_bytes(k, **n.attrs))
            body = impl.emit(k, **n.attrs)
            if k.scratch_bytes != planned:   # the emitter sized it for itself: must agree
                raise AssertionError(f"{sched or n.op}: emitted {k.scratch_bytes} bytes of "
                                     f"scratch, scratch_bytes() said {planned}")
            # An output the body never writes (e.g. an empty split piece).
            unused = [b.c for b in k.outs
                      if b is not None and not re.search(rf"\b{b.c}\b", body)]
            if unused:
                body = "".join(f"(void){c};\n" for c in unused) + body
        out.append(LoweredKernel(k, body, step, k.params(body)))
    return out


def _indent(text: str, n: int = 4) -> str:
    pad = " " * n
    return "\n".join(pad + line if line.strip() else "" for line in text.splitlines())


def kernel_source(lk: LoweredKernel, g: Graph) -> str:
    n = lk.kernel.node
    parts = [n] + n.tail
    what = " + ".join(f'{c_comment(p.op)} "{c_comment(p.name)}"' for p in parts)
    shapes = ", ".join(f"{b.c}: {b.dtype.name}{list(b.shape)}" for _, b in lk.params if b is not None)
    sig = ",\n    ".join(d for d, _ in lk.params)
    return (f"/* ONNX {what}\n * {shapes} */\n"
            f"int32_t {lk.kernel.fname}(\n    {sig})\n{{\n{_indent(lk.body)}\n    return 0;\n}}\n")


class CModule:
    """Generates all C sources of one module."""

    def __init__(self, g: Graph, plan: MemoryPlan, kernels: list[LoweredKernel], mod: str,
                 profile: bool = False, external_workspace: bool = False,
                 io_in_workspace: bool = False, target: Target = GENERIC,
                 output_names: str = "onnx", constants_section: str | None = None):
        self.g, self.plan, self.kernels, self.mod = g, plan, kernels, mod
        # Several workspace pools (plan.pools), and the weights' linker section:
        # both None/empty by default (then the C is what it always was).
        self.pools = list(plan.pools)
        self.constants_section = constants_section
        self.target = target
        self.libraries: list[str] = [FIRST_LIBRARY]
        for lk in kernels:
            for name in lk.kernel.libraries:
                if name not in self.libraries:
                    self.libraries.append(name)
        self.MOD = mod.upper()
        self.profile, self.external_workspace = profile, external_workspace
        self.io_in_workspace = io_in_workspace
        ins, outs = interface_names(g.inputs, g.outputs, output_names)
        self.in_names, self.out_names = dict(zip(g.inputs, ins)), dict(zip(g.outputs, outs))
        taken = {f"{c.upper()}_SIZE" for c in ins + outs}
        clash = [p.name for p in self.pools if f"{p.name.upper()}_WORKSPACE_POOL_SIZE" in taken]
        if clash:
            raise MtvmError(f"workspace pool {clash[0]!r}: TVMGEN_{self.MOD}_"
                            f"{clash[0].upper()}_WORKSPACE_POOL_SIZE is also the size macro of "
                            "a model input or output; name the pool otherwise")
        used = []
        for lk in kernels:
            for _, b in lk.params:
                if b is not None and b.const is not None and b.name not in used:
                    used.append(b.name)
        # Constants with the same bytes (the zero biases of several convolutions,
        # a shift table shared by two layers) are stored once, under the first
        # one's symbol: `const_syms` maps every used name to its symbol,
        # `stored_consts` lists the names that are defined.
        key = {name: cst.content_key(g.tensors[name].data) for name in used}
        first: dict[tuple, str] = {}
        self.stored_consts = [name for name in used
                              if first.setdefault(key[name], name) == name]
        syms = dict(zip(self.stored_consts, (f"tvmgen_{mod}_c_{s}"
                                             for s in unique_names(self.stored_consts))))
        self.const_syms = {name: syms[first[key[name]]] for name in used}

    # -- public header ------------------------------------------------------------
    def header(self) -> str:
        g, M = self.g, self.MOD
        lines = [f"/* Generated by mtvm: the C interface of model \"{c_comment(g.name)}\", "
                 f"module \"{self.mod}\". */",
                 f"#ifndef TVMGEN_{M}_H_", f"#define TVMGEN_{M}_H_", "",
                 "#include <stdint.h>", "", "#ifdef __cplusplus", 'extern "C" {', "#endif", ""]
        for kind, names in (("Input", self.in_names), ("Output", self.out_names)):
            for onnx_name, c in names.items():
                t = g.tensors[onnx_name]
                lines.append(f"/* {kind} \"{c_comment(onnx_name)}\": {np.dtype(t.dtype).name}"
                             f"{list(t.shape)} */")
                lines.append(f"#define TVMGEN_{M}_{c.upper()}_SIZE {t.nbytes}")
        lines.append(f"#define TVMGEN_{M}_WORKSPACE_SIZE {self.plan.arena_bytes}")
        lines.append("")
        for kind, names in (("inputs", self.in_names), ("outputs", self.out_names)):
            lines.append(f"struct tvmgen_{self.mod}_{kind} {{")
            lines += [f"    void* {c};" for c in names.values()]
            lines.append("};")
        args = f"struct tvmgen_{self.mod}_inputs* inputs, struct tvmgen_{self.mod}_outputs* outputs"
        if self.pools:
            lines += self._pool_header()
            if self.external_workspace:
                args += f",\n    struct tvmgen_{self.mod}_workspace_pools* workspace_pools"
        elif self.external_workspace:
            # microTVM's name for the size of an external pool: TVMGEN_<MOD>_<POOL>_...
            lines += [f"#define TVMGEN_{M}_GLOBAL_WORKSPACE_WORKSPACE_POOL_SIZE "
                      f"{self.plan.arena_bytes}",
                      f"struct tvmgen_{self.mod}_workspace_pools {{",
                      f"    void* global_workspace;  /* TVMGEN_{M}_WORKSPACE_SIZE bytes, "
                      "16-byte aligned */", "};"]
            args += f",\n    struct tvmgen_{self.mod}_workspace_pools* workspace_pools"
        lines += ["", f"/* Runs the model once. Returns 0, or the failing kernel's status. */",
                  f"int32_t tvmgen_{self.mod}_run({args});"]
        if self.io_in_workspace:
            margs = (f"struct tvmgen_{self.mod}_inputs* inputs, "
                     f"struct tvmgen_{self.mod}_outputs* outputs")
            if self.external_workspace:
                margs += f",\n    struct tvmgen_{self.mod}_workspace_pools* workspace_pools"
            lines += ["", "/* The inputs and outputs live in the workspace (--io-in-workspace): this",
                      " * fills both structs with their addresses there. Write the inputs there and",
                      " * pass the same structs to run: nothing is copied. Other buffers work too",
                      " * (run copies the inputs in and the outputs out). */",
                      f"#define TVMGEN_{M}_IO_IN_WORKSPACE 1",
                      f"void tvmgen_{self.mod}_map_io({margs});"]
        if self.profile:
            lines += ["", f"/* Profiling build: ticks of each kernel in the last run. */",
                      f"#define TVMGEN_{M}_NUM_KERNELS {len(self.kernels)}",
                      f"extern uint64_t tvmgen_{self.mod}_profile_ticks[{max(len(self.kernels), 1)}];"]
        lines += ["", "#ifdef __cplusplus", "}", "#endif", f"#endif  /* TVMGEN_{M}_H_ */", ""]
        return "\n".join(lines)

    def _pool_header(self) -> list[str]:
        """Several pools (USMP's names): a size macro per pool and, when the
        application passes them (external), the struct of their pointers."""
        M = self.MOD
        lines = ["", "/* The activations are split over these workspace pools (--workspace-pools),",
                 " * the hottest buffers in the first; each needs 16-byte alignment. */"]
        for p in self.pools:
            lines.append(f"#define TVMGEN_{M}_{p.name.upper()}_WORKSPACE_POOL_SIZE {p.bytes}")
        if self.external_workspace:
            lines.append(f"struct tvmgen_{self.mod}_workspace_pools {{")
            lines += [f"    void* {p.name};  /* TVMGEN_{M}_{p.name.upper()}_WORKSPACE_POOL_SIZE "
                      "bytes */" for p in self.pools]
            lines.append("};")
        else:
            lines += ["/* Static arrays, each in its own section .mtvm.pool.<name> for the "
                      "linker script to place. */"]
        return lines

    def _ws(self, root: str) -> str:
        """The local pointer to the pool holding a tensor (ws: the one arena)."""
        return c_name(f"ws_{self.plan.pool_of[root]}") if self.pools else "ws"

    def _ws_scratch(self, step: int) -> str:
        return c_name(f"ws_{self.plan.scratch_pool[step]}") if self.pools else "ws"

    def _pool_arrays(self) -> list[str]:
        """Internal pools: one static, aligned array per (used) pool, in section
        .mtvm.pool.<name> (ELF targets) so a linker script can place it in a bank."""
        mod, M = self.mod, self.MOD
        align = self.target.arena_alignment
        lines = []
        for p in self.pools:
            if not p.bytes:
                continue
            decl = (f"static uint8_t tvmgen_{mod}_pool_{p.name}"
                    f"[TVMGEN_{M}_{p.name.upper()}_WORKSPACE_POOL_SIZE]")
            lines += [f"/* Workspace pool {p.name}: {p.bytes} of its {p.capacity} bytes. */",
                      "#if defined(__GNUC__) && defined(__ELF__)",
                      f"{decl} __attribute__((aligned({align}), section(\".mtvm.pool.{p.name}\")));",
                      "#elif defined(__GNUC__)",
                      f"{decl} __attribute__((aligned({align})));", "#else", f"{decl};", "#endif", ""]
        return lines

    def _pool_locals(self) -> list:
        """The run/map_io locals: a byte pointer to each used pool (C writer
        statements)."""
        used = [p for p in self.pools if p.bytes]
        if self.external_workspace:
            out = [Decl(Var(f"ws_{p.name}", BYTES),
                        Cast(BYTES, RawExpr(f"workspace_pools->{p.name}"))) for p in used]
            return out or [_void(RawExpr("workspace_pools"))]
        return [Decl(Var(f"ws_{p.name}", BYTES), RawExpr(f"tvmgen_{self.mod}_pool_{p.name}"))
                for p in used]

    # -- internal header, kernels, constants -----------------------------------------
    def internal_header(self) -> str:
        lines = [f"/* Generated by mtvm: declarations shared by module \"{self.mod}\"'s sources. */",
                 f"#ifndef TVMGEN_{self.MOD}_INTERNAL_H_", f"#define TVMGEN_{self.MOD}_INTERNAL_H_",
                 "", "#include <stdint.h>", ""]
        for name in self.stored_consts:
            lines.append(cst.declaration(self.const_syms[name], self.g.tensors[name].data))
        lines.append("")
        for lk in self.kernels:
            lines.append(f"int32_t {lk.kernel.fname}({', '.join(d for d, _ in lk.params)});")
        lines += ["", "#endif", ""]
        return "\n".join(lines)

    def kernels_source(self) -> str:
        head = (f"/* Generated by mtvm: the operators of model \"{c_comment(self.g.name)}\" "
                f"for target {self.target.name}. */\n#include \"{FIRST_LIBRARY}\"\n"
                + KERNEL_INCLUDES)
        head += "".join(f'#include "{name}"\n' for name in self.libraries
                        if name.endswith(".h") and name != FIRST_LIBRARY
                        and kernel_library.for_target(name, self.target))
        head += f'#include "tvmgen_{self.mod}_internal.h"\n\n'
        helpers: dict[str, str] = {}
        for lk in self.kernels:
            for name, code in lk.kernel.helpers.items():
                helpers.setdefault(name, code)
        head += "".join(code.rstrip("\n") + "\n\n" for code in helpers.values())
        text = head + "\n".join(kernel_source(lk, self.g) for lk in self.kernels)
        return kernel_library.specialize_source(text, self.libraries, self.target)

    def constants_source(self) -> str:
        parts = [f"/* Generated by mtvm: the weights of model \"{c_comment(self.g.name)}\" "
                 "(const: flash). */",
                 f'#include "tvmgen_{self.mod}_internal.h"', "", cst.ENDIAN_CHECK]

        def attribute_macro(name: str, why: str, when: str, attribute: str) -> list[str]:
            """#define name as the GNU attribute where the compiler is `when`, else empty."""
            return [f"/* {why} */", f"#if defined(__GNUC__) && {when}",
                    f"#define {name} __attribute__(({attribute}))", "#else", f"#define {name}",
                    "#endif", ""]
        sect = f"TVMGEN_{self.MOD}_CONSTANTS_SECTION" if self.constants_section else ""
        if sect:
            parts += attribute_macro(sect, f"The weights go to linker section "
                                     f"{self.constants_section} (--constants-section).",
                                     "defined(__ELF__)",
                                     f'section("{self.constants_section}")')
        align = f"TVMGEN_{self.MOD}_CONSTANT_ALIGN" if self.target.vector_constants else ""
        if align:   # (x86 compilers only: on a microcontroller the padding would be flash)
            parts += attribute_macro(align, "Weights of a cache line or more start on one: the "
                                     "x86 kernels' vector loads then never split a line.",
                                     "(defined(__x86_64__) || defined(__i386__))", "aligned(64)")
        for name in self.stored_consts:
            sym = self.const_syms[name]
            data = self.g.tensors[name].data
            text = cst.definition(sym, data, name)
            attrs = ([sect] if sect else []) + ([align] if align and data.nbytes >= 64 else [])
            if attrs:
                head = f"\nconst union {sym}_u {sym} = "
                assert text.count(head) == 1
                text = text.replace(head, f"\nconst union {sym}_u {sym} {' '.join(attrs)} = ")
            parts.append(text)
        return "\n".join(parts)

    # -- the AOT entry ---------------------------------------------------------------
    def _pointer(self, buf) -> str:
        name, ct = buf.name, buf.ctype
        root = self.plan.root(name)
        if buf.const is not None:
            return f"{self.const_syms[name]}.data"
        if self.io_in_workspace and root in self.plan.offsets:
            return f"({ct}*)({self._ws(root)} + {self.plan.arena_offset(name)})"
        if root in self.in_names:
            return f"({ct}*)inputs->{self.in_names[root]}"
        if root in self.out_names:
            return f"({ct}*)outputs->{self.out_names[root]}"
        return f"({ct}*)({self._ws(root)} + {self.plan.arena_offset(name)})"

    def entry_source(self) -> str:
        mod, M = self.mod, self.MOD
        lines = [f"/* Generated by mtvm: the AOT entry of model \"{c_comment(self.g.name)}\". */",
                 "#include <stdint.h>", "#include <string.h>", f'#include "tvmgen_{mod}.h"',
                 f'#include "tvmgen_{mod}_internal.h"', ""]
        ws_bytes = self.plan.arena_bytes
        if self.profile:
            lines += ["/* Platform timer hooks (mtvm_platform.h). */",
                      "void mtvm_platform_timer_start(void);",
                      "uint64_t mtvm_platform_timer_stop_ticks(void);", "",
                      f"uint64_t tvmgen_{mod}_profile_ticks[{max(len(self.kernels), 1)}];", ""]
        args = f"struct tvmgen_{mod}_inputs* inputs, struct tvmgen_{mod}_outputs* outputs"
        if self.external_workspace:
            args += f", struct tvmgen_{mod}_workspace_pools* workspace_pools"
        elif self.pools:
            lines += self._pool_arrays()
        elif ws_bytes:
            lines += ["/* All activations live in this one statically planned arena. */",
                      "#if defined(__GNUC__)",
                      f"static uint8_t tvmgen_{mod}_workspace[TVMGEN_{M}_WORKSPACE_SIZE] "
                      f"__attribute__((aligned({self.target.arena_alignment})));", "#else",
                      f"static uint8_t tvmgen_{mod}_workspace[TVMGEN_{M}_WORKSPACE_SIZE];",
                      "#endif", ""]
        io_ws = [(kind, c, self.plan.offsets[onnx_name], self.g.tensors[onnx_name].nbytes,
                  self._ws(onnx_name))
                 for kind, names in (("inputs", self.in_names), ("outputs", self.out_names))
                 for onnx_name, c in names.items()
                 if self.io_in_workspace and onnx_name in self.plan.offsets]
        if self.io_in_workspace:
            margs = (f"struct tvmgen_{mod}_inputs* inputs, struct tvmgen_{mod}_outputs* outputs")
            if self.external_workspace:
                margs += f", struct tvmgen_{mod}_workspace_pools* workspace_pools"
            base = ("(uint8_t*)workspace_pools->global_workspace" if self.external_workspace
                    else f"tvmgen_{mod}_workspace")
            if self.pools:
                body = [*self._pool_locals(), _void(inputs), _void(outputs)]
                body += [_void(Var(f"ws_{p.name}")) for p in self.pools if p.bytes]
            else:
                body = [Decl(WS, RawExpr(base)), _void(WS), _void(inputs), _void(outputs)]
            body += [Assign(RawExpr(f"{kind}->{c}"), RawExpr(b) + off)
                     for kind, c, off, _, b in io_ws]
            lines += [f"void tvmgen_{mod}_map_io({margs})", _braced(body), ""]
        body = [Decl(STATUS)] if self.kernels else []   # none when no outputs are left
        if self.pools:
            body += self._pool_locals()
        elif self.external_workspace:
            body.append(Decl(WS, Cast(BYTES, RawExpr("workspace_pools->global_workspace"))))
            if not ws_bytes:
                body.append(_void(WS))
        elif ws_bytes:
            body.append(Decl(WS, RawExpr(f"tvmgen_{mod}_workspace")))
        body += [Comment("a model may use neither directly"), _void(inputs), _void(outputs)]
        for kind, c, off, size, b in io_ws:
            if kind == "inputs" and size:
                at = RawExpr(b) + off
                body.append(If(ne(Cast(VOID_P, RawExpr(f"inputs->{c}")), Cast(VOID_P, at)),
                               [ExprStmt(call("memcpy", at, RawExpr(f"inputs->{c}"), size))]))
        for i, lk in enumerate(self.kernels):
            args_c = [RawExpr(f"{self._ws_scratch(lk.step)} + {self.plan.scratch[lk.step]}"
                              if b is None else self._pointer(b)) for _, b in lk.params]
            if self.profile:
                body.append(ExprStmt(call("mtvm_platform_timer_start")))
            fname = lk.kernel.fname   # escaped already (names.c_identifier)
            body.append(Assign(STATUS, Call(fname, args_c) if c_name(fname) == fname else
                               RawExpr(f"{fname}({', '.join(map(render_c, args_c))})")))
            if self.profile:
                body.append(Assign(Index(Var(f"tvmgen_{mod}_profile_ticks"), Const(i)),
                                   call("mtvm_platform_timer_stop_ticks")))
            body.append(If(ne(STATUS, 0), [Return(STATUS)]))
        for kind, c, off, size, b in io_ws:
            if kind == "outputs" and size:
                at = RawExpr(b) + off
                body.append(If(ne(Cast(VOID_P, RawExpr(f"outputs->{c}")), Cast(VOID_P, at)),
                               [ExprStmt(call("memcpy", RawExpr(f"outputs->{c}"), at, size))]))
        body.append(Return(Const(0)))
        lines += [f"int32_t tvmgen_{mod}_run({args})", _braced(body), ""]
        return "\n".join(lines)

    def sources(self) -> dict[str, str]:
        m = self.mod
        return {
            f"codegen/host/include/tvmgen_{m}.h": self.header(),
            f"codegen/host/src/tvmgen_{m}_internal.h": self.internal_header(),
            f"codegen/host/src/tvmgen_{m}.c": self.entry_source(),
            f"codegen/host/src/tvmgen_{m}_kernels.c": self.kernels_source(),
            f"codegen/host/src/tvmgen_{m}_constants.c": self.constants_source(),
            **kernel_library.module_files(self.libraries, self.target),
        }
