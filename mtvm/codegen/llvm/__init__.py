"""The LLVM backend: object code through llvmlite, and host runs with no C compiler.

    mtvm.compile("model.onnx", backend="llvm", target="cortex-m4")

lowers each kernel's C writer body (Op.ir_body, or a loop nest of
loopnests.py) to LLVM IR, adds the weights, the arena and the AOT entry
(module.py), and compiles it for the target with LLVM's -O3 (machine.py):
an object file in the MLF (codegen/host/lib/lib0.o, as microTVM's llvm
target writes) next to the same C header, or in-process code through
LLVM's JIT for run_host (jit.py).

Not every kernel has an LLVM form yet: ops whose emitters still write C text
(the int8 kernels, most layout and indexing ops) do not, and a model using
one gets a one-line error naming the node. docs/llvm.md lists what lowers.
"""
from __future__ import annotations

from ...errors import MtvmError, node_context
from ...ops.base import get_op
from ..c_codegen import CModule, make_kernel
from .cparse import NotLowerable
from .machine import abi, llvm_target, optimize, target_machine, triple_cpu_features
from .module import IRKernel, LLVMModule

def refuses_inplace(target):
    """refuses(node, graph): whether the LLVM loop nest of a node reads its whole
    input while writing, so must never run in place (the planner's no_inplace).
    Conv always; a QConv on x86, whose pair-product tiles read the input where it
    lies -- elsewhere QConv copies what it reads first (an im2col column of the
    pixels it writes, a padded plane of the channel it writes), as the C
    kernels do, and may take its input's buffer as they do. A depthwise QConv
    copies its planes on every target."""
    from .loopnests_int8 import pair_mode
    x86 = pair_mode(llvm_target(target))[0] == "x86"

    def refuses(node, graph) -> bool:
        if node.op == "Conv":
            return True
        if node.op == "QConv" and node.domain == "mtvm":
            w = graph.tensors[node.inputs[1]]
            return not w.is_const or bool(x86 and node.attrs.get("folded", 1))
        return False
    return refuses


def scratch_bytes(k) -> int:
    """Bytes of scratch kernel k's loop nest asks for (loopnests.SCRATCH), planned
    in the arena like the C kernels' and passed as its last parameter."""
    from .loopnests import SCRATCH
    n = k.node
    fn = SCRATCH.get((n.domain, n.op))
    if fn is None or all(b is None or b.size == 0 for b in k.outs):
        return 0
    return int(fn(k, **n.attrs))


def llvm_scratch(g, mod: str, inplace, target, config=None) -> dict[int, int]:
    """{step: scratch bytes} of every kernel: what memory planning reserves."""
    out = {}
    for step, n in enumerate(g.nodes):
        if n.has_kernel:
            b = scratch_bytes(make_kernel(g, step, mod, inplace, target, config))
            if b:
                out[step] = b
    return out


def ir_body(k) -> list:
    """The C writer statements of kernel k for the LLVM backend."""
    from .loopnests import LOOP_NESTS
    n = k.node
    if all(b is None or b.size == 0 for b in k.outs):
        return []
    nest = LOOP_NESTS.get((n.domain, n.op))
    body = nest(k, **n.attrs) if nest is not None else get_op(n.op, n.domain).ir_body(k, **n.attrs)
    if body is None:
        raise NotLowerable("its emitter still writes C text")
    return list(body)


def names_used(node, out: set | None = None) -> set:
    """Every name an IR tree refers to (Vars, and the identifiers of C text in
    its escape hatches): what Kernel.params picks the parameters from, without
    rendering the tree (its tables may hold millions of weights)."""
    import dataclasses
    import re

    from ..cwriter import Raw, RawExpr, Var
    out = set() if out is None else out
    if isinstance(node, Var):
        out.add(node.name)
    elif isinstance(node, (Raw, RawExpr)):
        out.update(re.findall(r"[A-Za-z_]\w*", node.text))
    elif isinstance(node, (list, tuple)):
        for x in node:
            names_used(x, out)
    elif dataclasses.is_dataclass(node):
        for f in dataclasses.fields(node):
            v = getattr(node, f.name)
            if isinstance(v, (list, tuple)) or dataclasses.is_dataclass(v):
                names_used(v, out)
    return out


def ir_kernels(g, mod: str, inplace, target, model: str, config=None) -> list[IRKernel]:
    """The IRKernel of every kernel; config: a ScheduleConfig of the nests' knobs
    (loopnests.NEST_KNOBS, by nest name or per workload key)."""
    out = []
    for step, n in enumerate(g.nodes):
        if not n.has_kernel:
            continue
        k = make_kernel(g, step, mod, inplace, target, config)
        try:
            k.scratch_bytes = scratch_bytes(k)
            body = ir_body(k)
            params = k.params(" ".join(sorted(names_used(body))))
        except NotLowerable as e:
            raise unlowerable(model, g, n, e) from None
        out.append(IRKernel(k, body, step, params))
    return out


def unlowerable(model: str, g, n, e: Exception) -> MtvmError:
    """The one line for a kernel the LLVM backend cannot lower."""
    tail = "".join(f" + {t.op}" for t in n.tail)
    return MtvmError(f"{node_context(model, n, g.opset)}{' fused with' + tail if tail else ''}: "
                     f"no LLVM lowering yet ({e}); compile with --backend c")


def compile_llvm(g, plan, inplace, mod: str, target, *, model: str, output_names: str,
                 constants_section: str | None, config=None, profile: bool = False):
    """(kernels, sources, llvm IR text, blobs {symbol: bytes}, target) of a planned graph."""
    target = llvm_target(target)
    kernels = ir_kernels(g, mod, inplace, target, model, config)
    triple, *_ = triple_cpu_features(target)
    tm = target_machine(target)
    # CModule gives the C header (the same interface) from the same kernels.
    cmod = CModule(g, plan, kernels, mod, target=target, output_names=output_names,
                   profile=profile)
    cconv, intrinsics = abi(target)
    lm = LLVMModule(g, plan, kernels, mod, cmod.in_names, cmod.out_names,
                    8 * (target.pointer_bytes or 8), triple, str(tm.target_data),
                    constants_section=constants_section, calling_convention=cconv,
                    intrinsics=intrinsics, profile=profile)
    try:
        lm.build()
        text = lm.text()
    except NotLowerable as e:
        raise unlowerable(model, g, e.kernel.kernel.node, e) from None
    sources = {f"codegen/host/include/tvmgen_{mod}.h": cmod.header(),
               f"codegen/host/src/tvmgen_{mod}.ll": text}
    return kernels, sources, text, lm.lowering.blobs, target


def parse_and_optimize(ir_text: str, target, jit: bool = False):
    """The verified, -O3 optimized llvmlite module and its target machine."""
    from .machine import _llvm
    llvm = _llvm()
    m = llvm.parse_assembly(ir_text)
    m.verify()
    tm = target_machine(target, jit=jit)
    optimize(m, tm)
    return m, tm


def object_code(ir_text: str, target) -> bytes:
    """An ELF relocatable object of the module's code for the target (its
    weights: elf_data.data_object)."""
    m, tm = parse_and_optimize(ir_text, target)
    obj = tm.emit_object(m)
    if abi(target)[0] == "arm_aapcs_vfpcc":
        from .elf_arm import mark_vfp_args
        obj = mark_vfp_args(obj)
    return obj


def check_config(config) -> None:
    """A ScheduleConfig for this backend: its per-schedule knobs must name the
    nests' knob sets (a C schedule's name would silently do nothing)."""
    from .loopnests import NEST_KNOBS
    names = sorted({s.name for s in NEST_KNOBS.values()})
    bad = sorted(set(config.knobs) - set(names)) if config is not None else []
    if bad:
        raise MtvmError(f"schedule_config for --backend llvm: {', '.join(bad)} "
                        f"{'is' if len(bad) == 1 else 'are'} not a knob set of this backend "
                        f"(its knob sets: {', '.join(names)})")


def workload_key(k) -> str:
    """The LLVM backend's workload key of kernel k (loopnests.workload_key)."""
    from .loopnests import workload_key as key
    return key(k)


__all__ = ["refuses_inplace", "compile_llvm", "object_code", "parse_and_optimize",
           "NotLowerable", "check_config", "workload_key"]
