"""The pipeline: ONNX -> IR -> passes -> kernels -> memory plan -> C module."""
from __future__ import annotations

import os
import re

import numpy as np

from . import passes
from .passes.single_channel_conv import im2col_single_channel_convs
from .codegen.c_codegen import CModule, kernel_scratch, lower_kernels
from .codegen.names import KEYWORDS, OUTPUT_NAMES, RESERVED, sanitize
from .errors import MtvmError, internal_error
from .frontend import load_onnx
from .ir import Graph, Node
from .memory import plan_memory
from .memory.schedule import choose_order
from .model_library import CompiledModel
from .schedules import ScheduleConfig
from .schedules.free_scratch import free_scratch_config
from .target import Target


def materialize_outputs(g: Graph) -> Graph:
    """Every graph output must be written by a kernel: a constant, a view (a node without
    a kernel) or a graph input that is also an output gets an explicit copy. The copy
    keeps the output's ONNX name (its source is renamed), so outputs are found by the
    names the model gives them; only a graph input that is also an output, and an output
    listed twice, take "<name>_out<i>" (two tensors cannot share a name)."""
    from dataclasses import replace
    g = g.copy()
    produced = {o for n in g.nodes for o in n.kernel_outputs}
    for i, name in enumerate(g.outputs):
        if name in produced and name not in g.outputs[:i]:
            continue
        t = g.tensors[name]
        if name in g.outputs[:i] or name in g.inputs:
            new = f"{name}_out{i}"
            g.tensors[new] = t.__class__(new, t.shape, t.dtype)
            g.nodes.append(Node("Identity", f"output_copy_{i}", [name], [new]))
            g.outputs[i] = new
            continue
        src = g.fresh_name(f"{name}_src")
        g.tensors[src] = replace(t, name=src)
        for n in g.nodes:
            for node in [n] + list(n.tail):
                node.inputs = [src if x == name else x for x in node.inputs]
                node.outputs = [src if x == name else x for x in node.outputs]
        g.tensors[name] = t.__class__(name, t.shape, t.dtype, quant=t.quant)
        g.nodes.append(Node("Identity", f"output_copy_{i}", [src], [name]))
    return g


_POOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
_SECTION_NAME = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_.]{0,62}")


def check_workspace_pools(pools) -> list[tuple[str, int]]:
    """[(name, bytes), ...] (or {name: bytes}; None or empty: the one arena)
    checked: names are plain C identifiers (they become struct members, macros,
    section and linker-script names), unique regardless of case; sizes
    positive integers."""
    if pools is None:
        return []
    items = list(pools.items()) if isinstance(pools, dict) else list(pools)
    out, seen = [], set()
    for item in items:
        try:
            name, size = item
        except (TypeError, ValueError):
            raise MtvmError(f"workspace pool {item!r}: expected (name, bytes)") from None
        if not (isinstance(name, str) and _POOL_NAME.fullmatch(name)) or name in KEYWORDS \
                or name in RESERVED:
            raise MtvmError(f"workspace pool name {name!r}: use a C identifier of letters, "
                            "digits and _ (at most 32, starting with a letter, not a C "
                            "keyword), e.g. sram1")
        if name.lower() in seen:
            raise MtvmError(f"workspace pool {name!r} is given twice (names are compared "
                            "without regard to case)")
        seen.add(name.lower())
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size <= 0:
            raise MtvmError(f"workspace pool {name}: size {size!r} must be a positive number "
                            "of bytes")
        out.append((name, int(size)))
    return out


def check_section_name(name) -> str | None:
    """A linker section name for the weights: a plain name (.qspi_weights,
    ExtFlashSection), never anything that could end the attribute."""
    if name is None:
        return None
    if not (isinstance(name, str) and _SECTION_NAME.fullmatch(name)):
        raise MtvmError(f"constants section {name!r}: use a plain section name of letters, "
                        "digits, _ and . (at most 63, e.g. .qspi_weights)")
    return name


def compile_graph(graph: Graph, module_name: str = "default", profile: bool = False,
                  external_workspace: bool = False, fuse: bool = True,
                  source_graph: Graph | None = None,
                  io_in_workspace: bool = False, reorder: bool = True,
                  target=None, schedule_config=None,
                  output_names: str = "onnx", workspace_pools=None,
                  constants_section: str | None = None, backend: str = "c") -> CompiledModel:
    """reorder: run independent branches in the order of lowest peak memory
    (memory.schedule); False keeps the graph's node order. target, output_names,
    workspace_pools, constants_section, backend: see compile()."""
    target = Target.resolve(target)
    check_backend(backend, external_workspace=external_workspace,
                  io_in_workspace=io_in_workspace, workspace_pools=workspace_pools)
    if output_names not in OUTPUT_NAMES:
        raise MtvmError(f"output_names {output_names!r}: use one of {', '.join(OUTPUT_NAMES)}")
    workspace_pools = check_workspace_pools(workspace_pools)
    constants_section = check_section_name(constants_section)
    try:
        if backend == "llvm":
            return _compile_graph_llvm(graph, module_name, fuse, source_graph, reorder,
                                       target, output_names, constants_section,
                                       ScheduleConfig.resolve(schedule_config), profile)
        return _compile_graph(graph, module_name, profile, external_workspace, fuse,
                              source_graph, io_in_workspace, reorder, target,
                              schedule_config, output_names, workspace_pools,
                              constants_section)
    except MtvmError:
        raise
    except Exception as e:   # a bug: one line naming the node (the traceback with --verbose)
        raise internal_error(e, graph.source, "compiling") from e


def _compile_graph(graph, module_name, profile, external_workspace, fuse, source_graph,
                   io_in_workspace, reorder, target, schedule_config,
                   output_names="onnx", workspace_pools=(),
                   constants_section=None) -> CompiledModel:
    mod = sanitize(module_name).lower()
    g = passes.optimize(graph, fuse=fuse)
    g = im2col_single_channel_convs(g, target)
    g = materialize_outputs(g)
    schedule_config = ScheduleConfig.resolve(schedule_config)

    def ordered(config):   # the node order and its plan, the kernels' scratch under config
        return choose_order(g, lambda h, inplace: kernel_scratch(h, mod, inplace, target,
                                                                 config),
                            io_in_workspace=io_in_workspace, reorder=reorder)
    s = ordered(schedule_config)
    if not workspace_pools:   # faster knobs whose scratch fits under the arena
        more = free_scratch_config(s, mod, target, schedule_config)
        if more is not None:
            s2 = ordered(more)
            if s2.plan.arena_bytes <= s.plan.arena_bytes:
                s, schedule_config = s2, more
    g, plan = s.graph, s.plan
    if workspace_pools:   # the chosen order's buffers, split over the pools
        plan = plan_memory(g, s.scratch, inplace=s.inplace, io_in_workspace=io_in_workspace,
                           pools=workspace_pools)
        plan.original_lower_bound = s.plan.original_lower_bound
    kernels = lower_kernels(g, mod, s.inplace, target, schedule_config)
    for lk in kernels:   # the plan was made from the pure scratch sizes
        if lk.kernel.scratch_bytes != s.scratch.get(lk.step, 0):
            raise AssertionError(f"kernel {lk.kernel.fname}: {lk.kernel.scratch_bytes} bytes "
                                 f"of scratch emitted, {s.scratch.get(lk.step, 0)} planned")
    cmod = CModule(g, plan, kernels, mod, profile=profile, external_workspace=external_workspace,
                   io_in_workspace=io_in_workspace, target=target, output_names=output_names,
                   constants_section=constants_section)
    return CompiledModel(mod, source_graph or graph, g, plan, kernels, cmod.sources(),
                         profile=profile, external_workspace=external_workspace,
                         io_in_workspace=io_in_workspace, target=target,
                         output_names=output_names, constants_section=constants_section)


BACKENDS = ("c", "llvm")


def check_backend(backend, **options) -> None:
    """One line for a backend mtvm lacks, or an option the LLVM backend does not
    have yet (they are all C-backend features today). A schedule config (and so
    tuning records) it has: the knobs of its loop nests (codegen.llvm.loopnests)."""
    if backend not in BACKENDS:
        raise MtvmError(f"backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if backend == "llvm":
        used = [name for name, value in options.items() if value]
        if used:
            raise MtvmError(f"--backend llvm does not support {', '.join(used)} yet; "
                            "use --backend c for them")


def _need_llvmlite() -> None:
    try:
        import llvmlite  # noqa: F401
    except ImportError:
        raise MtvmError("--backend llvm needs llvmlite: pip install 'mtvm[llvm]' "
                        "(or pip install llvmlite)") from None


def _compile_graph_llvm(graph, module_name, fuse, source_graph, reorder, target,
                        output_names, constants_section, config=None,
                        profile: bool = False) -> CompiledModel:
    _need_llvmlite()
    from .codegen.llvm import check_config, compile_llvm, llvm_scratch, refuses_inplace
    from .codegen.llvm.compiled import LLVMCompiledModel
    from .memory.planner import no_inplace
    check_config(config)
    mod = sanitize(module_name).lower()
    g = passes.optimize(graph, fuse=fuse, backend="llvm")
    g = materialize_outputs(g)
    # The LLVM kernels' scratch is their loop nests' (llvm_scratch), and the nests
    # that read their whole input while writing never overwrite it
    # (refuses_inplace).
    from .codegen.llvm.machine import llvm_target
    tg = llvm_target(Target.resolve(target))
    with no_inplace(refuses_inplace(tg)):
        s = choose_order(g, lambda h, inplace: llvm_scratch(h, mod, inplace, tg, config),
                         reorder=reorder)
    g, plan = s.graph, s.plan
    kernels, sources, text, blobs, target = compile_llvm(
        g, plan, s.inplace, mod, target, model=graph.source, output_names=output_names,
        constants_section=constants_section, config=config, profile=profile)
    return LLVMCompiledModel(mod, source_graph or graph, g, plan, kernels, sources,
                             target=target, output_names=output_names, profile=profile,
                             constants_section=constants_section, llvm_ir=text, blobs=blobs)


def compile(model, module_name: str = "default", input_shapes: dict | None = None,
            bind: dict | None = None, profile: bool = False, external_workspace: bool = False,
            fuse: bool = True, io_in_workspace: bool = False,
            reorder: bool = True, target=None, schedule_config=None,
            output_names: str = "onnx", tuning_records=None, workspace_pools=None,
            constants_section: str | None = None, backend: str = "c") -> CompiledModel:
    """Compile an ONNX model (path or ModelProto) to a C module.

    input_shapes pins symbolic dims ({"input": (1, 3, 96, 96)}); bind turns
    graph inputs into compile-time constants ({"shape": np.array([...])});
    io_in_workspace places the model's inputs and outputs in the arena (see
    docs/performance.md); reorder=False keeps the graph's node order instead
    of the order of lowest peak memory.

    target (mtvm.target): what the C runs on -- "c" (the default: portable C
    with every ISA variant under #if), "host", "x86-64-v3", "cortex-m4", ...
    or a Target; the schedules are chosen for it and the C of other targets
    left out. schedule_config (mtvm.schedules.ScheduleConfig or its dict
    form) sets schedule knobs per schedule or per kernel; with backend="llvm"
    the knob sets are its loop nests' (llvm.conv2d_f32, llvm.matmul_f32:
    codegen.llvm.loopnests.NEST_KNOBS).

    output_names: "onnx" (the default) names the members of struct
    tvmgen_<mod>_outputs after the ONNX outputs (sanitized); "microtvm" names
    them as microTVM does: `output`, or `output0`, `output1`, ... (docs/projects.md,
    "Model Library Format and microTVM").

    tuning_records: a `mtvm tune` records file (or several, or records already
    loaded): each layer gets the best schedule and knobs measured for it on
    this target with this backend (`mtvm tune --backend llvm` measures the
    LLVM backend's loop nests); layers without records keep the default
    (docs/tuning.md).

    workspace_pools: [("sram1", 32768), ("sram2", 65536)] (or a dict) splits the
    arena over several pools (RAM banks), the hottest buffers in the first:
    struct tvmgen_<mod>_workspace_pools and tvmgen_<mod>_run(inputs, outputs,
    pools) with external_workspace, else one static array per pool in section
    .mtvm.pool.<name> (docs/compiler.md, "Several workspace pools").
    constants_section: a linker section name for the weights' const arrays.

    backend: "c" (the default: C sources) or "llvm" (LLVM IR compiled by
    llvmlite: an object file in the MLF, run_host through the JIT with no C
    compiler; see docs/llvm.md for the ops it lowers so far).
    """
    workspace_pools = check_workspace_pools(workspace_pools)   # before loading: one line
    constants_section = check_section_name(constants_section)
    target = Target.resolve(target)           # a bad target: one line, before loading
    check_backend(backend)
    schedule_config = ScheduleConfig.resolve(schedule_config)
    if tuning_records is not None:
        from .tune.apply import config_for
        if backend == "llvm":    # the records of the target LLVM compiles for, of this backend
            _need_llvmlite()
            from .codegen.llvm.machine import llvm_target
            schedule_config = config_for(tuning_records, llvm_target(target),
                                         base=schedule_config, backend="llvm")
        else:
            schedule_config = config_for(tuning_records, target, base=schedule_config)
    try:
        graph = load_onnx(model, input_shapes=input_shapes, bind=bind)
    except MtvmError:
        raise
    except Exception as e:   # a bug: one line naming the node (the traceback with --verbose)
        source = os.path.basename(os.fspath(model)) if isinstance(model, (str, os.PathLike)) \
            else "model"
        raise internal_error(e, source, "loading") from e
    if isinstance(model, (str, os.PathLike)):
        graph.name = sanitize(os.path.splitext(os.path.basename(os.fspath(model)))[0])
    return compile_graph(graph, module_name, profile=profile,
                         external_workspace=external_workspace, fuse=fuse,
                         io_in_workspace=io_in_workspace, reorder=reorder, target=target,
                         schedule_config=schedule_config, output_names=output_names,
                         workspace_pools=workspace_pools, constants_section=constants_section,
                         backend=backend)


__all__ = ["compile", "compile_graph"]
