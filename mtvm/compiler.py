"""The pipeline: ONNX -> IR -> passes -> kernels -> memory plan -> C module."""
from __future__ import annotations

import os



from . import passes
from .codegen.c_codegen import CModule, lower_kernels
from .codegen.names import sanitize
from .errors import MtvmError, internal_error
from .frontend import load_onnx
from .ir import Graph, Node
from .memory.schedule import choose_order
from .model_library import CompiledModel


def materialize_outputs(g: Graph) -> Graph:
    """Every graph output must be written by a kernel: a constant or graph
    input that is also an output gets an explicit copy."""
    g = g.copy()
    produced = {o for n in g.nodes for o in n.kernel_outputs}
    for i, name in enumerate(g.outputs):
        if name in produced and name not in g.outputs[:i]:
            continue
        src = name
        new = f"{name}_out{i}"
        g.tensors[new] = g.tensors[name].__class__(new, g.tensors[name].shape, g.tensors[name].dtype)
        g.nodes.append(Node("Identity", f"output_copy_{i}", [src], [new]))
        g.outputs[i] = new
    return g


def compile_graph(graph: Graph, module_name: str = "default", profile: bool = False,
                  external_workspace: bool = False, fuse: bool = True,
                  source_graph: Graph | None = None,
                  io_in_workspace: bool = False, reorder: bool = True) -> CompiledModel:
    """reorder: run independent branches in the order of lowest peak memory
    (memory.schedule); False keeps the graph's node order."""
    try:
        return _compile_graph(graph, module_name, profile, external_workspace, fuse,
                              source_graph, io_in_workspace, reorder)
    except MtvmError:
        raise
    except Exception as e:   # a bug: one line naming the node (the traceback with --verbose)
        raise internal_error(e, graph.source, "compiling") from e


def _compile_graph(graph, module_name, profile, external_workspace, fuse, source_graph,
                   io_in_workspace, reorder) -> CompiledModel:
    mod = sanitize(module_name).lower()
    g = passes.optimize(graph, fuse=fuse)
    g = materialize_outputs(g)
    s = choose_order(g, lambda h, inplace: lower_kernels(h, mod, inplace),
                     io_in_workspace=io_in_workspace, reorder=reorder)
    g, plan, kernels = s.graph, s.plan, s.kernels
    cmod = CModule(g, plan, kernels, mod, profile=profile, external_workspace=external_workspace,
                   io_in_workspace=io_in_workspace)
    return CompiledModel(mod, source_graph or graph, g, plan, kernels, cmod.sources(),
                         profile=profile, external_workspace=external_workspace,
                         io_in_workspace=io_in_workspace)


def compile(model, module_name: str = "default", input_shapes: dict | None = None,
            bind: dict | None = None, profile: bool = False, external_workspace: bool = False,
            fuse: bool = True, io_in_workspace: bool = False,
            reorder: bool = True) -> CompiledModel:
    """Compile an ONNX model (path or ModelProto) to a C module.

    input_shapes pins symbolic dims ({"input": (1, 3, 96, 96)}); bind turns
    graph inputs into compile-time constants ({"shape": np.array([...])});
    io_in_workspace places the model's inputs and outputs in the arena (see
    docs/performance.md); reorder=False keeps the graph's node order instead
    of the order of lowest peak memory.
    """
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
                         io_in_workspace=io_in_workspace, reorder=reorder)


__all__ = ["compile", "compile_graph"]
