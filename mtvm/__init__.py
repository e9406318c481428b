"""mtvm: ahead-of-time deployment of ONNX models to microcontrollers.

An ONNX model (float32 or int8) becomes standalone C (one function per fused
operator, an AOT entry function with microTVM's C interface, weights as const
data, one statically planned arena); a project puts that C on a board; a
session runs it *on the device* from Python.

Compiling
    compile(model, module_name="default", input_shapes=None, bind=None, profile=False,
            target=None, ...)
        -> CompiledModel: ONNX file/ModelProto -> C for a target ("c", the default:
        portable C with every ISA variant under #if; "host", "x86-64-v3",
        "cortex-m4", ... or a Target; `mtvm targets` lists them). `.export("kws.tar")` writes
        Model Library Format, `.run_host({name: array})` builds and runs it on
        this machine, `.metadata` has arena bytes, MACs, inputs and outputs.
    compile_graph(graph, ...)   the same from mtvm's IR (mtvm.ir.Graph)
    CompiledModel               the result of compile()

Projects and boards (mtvm.project, docs/projects.md)
    project.generate(model, board="host", out_dir=...) -> Project
    project.load(dir) -> Project: .build(), .flash(), .session(), .stop()
    project.list_boards(), project.load_board(name)    boards/*.json as data

Sessions with a device (mtvm.session, docs/runtime.md)
    Session(transport) -- .info(), .executor.run(inputs), .executor.benchmark(),
    .executor.profile(); transport.serial(port), transport.open_url("tcp://host:port") ...

Errors
    MtvmError and its kinds ModelLoadError, UnsupportedError, ShapeError,
    BuildError: one line a user can act on (the CLI prints it without a
    traceback). Session errors: session.SessionError, SessionTimeout, DeviceReset.

The command line is `mtvm` (`mtvm --help`; `mtvm ops` lists the operators).
Submodules are imported on first use, so `import mtvm` is cheap.
"""
import importlib
import importlib.util

__version__ = "0.1.0"

__all__ = ["compile", "compile_graph", "CompiledModel", "Target", "project", "session", "Session",
           "transport", "MtvmError", "ModelLoadError", "UnsupportedError", "ShapeError",
           "BuildError", "__version__"]

# name -> (module, attribute or None for the module itself), imported on first use
_LAZY = {
    "compile": (".compiler", "compile"),
    "compile_graph": (".compiler", "compile_graph"),
    "CompiledModel": (".model_library", "CompiledModel"),
    "Target": (".target", "Target"),
    "project": (".project", None),
    "session": (".session", None),
    "Session": (".session", "Session"),
    "transport": (".session", "transport"),
    "MtvmError": (".errors", "MtvmError"),
    "ModelLoadError": (".errors", "ModelLoadError"),
    "UnsupportedError": (".errors", "UnsupportedError"),
    "ShapeError": (".errors", "ShapeError"),
    "BuildError": (".errors", "BuildError"),
}


def __getattr__(name):
    module, attr = _LAZY.get(name, (f".{name}", None))
    if name not in _LAZY and (name.startswith("_")
                              or importlib.util.find_spec(f"{__name__}.{name}") is None):
        raise AttributeError(f"module 'mtvm' has no attribute {name!r}")
    mod = importlib.import_module(module, __name__)   # any submodule: mtvm.interp, ...
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
