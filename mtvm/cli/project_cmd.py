"""`mtvm project generate|build|flash|stop`: projects for a board (docs/projects.md)."""
from __future__ import annotations

from .options import add_compile_options, compile_kwargs


def add_parser(sub) -> None:
    p = sub.add_parser("project", help="generate, build, flash or stop a board project",
                       description="Projects: a model + a board + a template = a buildable "
                       "directory (see docs/projects.md).")
    ps = p.add_subparsers(dest="project_command", required=True, metavar="ACTION")

    g = ps.add_parser("generate", help="create a project directory from a model")
    g.add_argument("model", help="ONNX file, or a Model Library Format mtvm exported (a .tar "
                   "or a directory from `mtvm compile -o`): used as it is, not recompiled")
    g.add_argument("--board", default="host", help="board name (see `mtvm boards`; "
                   "default: host)")
    g.add_argument("-o", "--output", required=True, metavar="DIR", help="project directory")
    g.add_argument("--template", metavar="NAME", help="project template: cmake (a CMake "
                   "project: model and runtime libraries, an example app), or the board's own "
                   "(host, cortex_m: a Makefile; the default)")
    g.add_argument("--kind", choices=["host-driven", "standalone"], default="host-driven",
                   help="host-driven: RPC server for `mtvm run`; standalone: runs an embedded "
                   "sample and prints the outputs (default: host-driven)")
    g.add_argument("--sample", metavar="FILE", help="standalone: the sample input (.npz with "
                   "the input names or in_0.., or .npy); default: MODEL's .npz beside it")
    g.add_argument("--force", action="store_true", help="regenerate into a non-empty directory: "
                   "replaces only the files mtvm wrote and nobody changed (see "
                   ".mtvm-manifest.json); other files are kept")
    g.add_argument("--overwrite-edited", action="store_true", help="with --force: also replace "
                   "files that were edited since mtvm generated them")
    add_compile_options(g)
    g.set_defaults(func=generate)

    for name, fn, text in (("build", build, "compile the project"),
                           ("flash", flash, "program the board (emulated: start QEMU)"),
                           ("stop", stop, "stop what flash started (an emulator)")):
        q = ps.add_parser(name, help=text)
        q.add_argument("dir", help="project directory")
        q.set_defaults(func=fn)


# Compile options and the value that means "not given" (an MLF is already compiled).
_COMPILE_DEFAULTS = {"target": None, "module_name": "default", "input_shape": [], "bind": [],
                     "profile": False, "external_workspace": False, "no_fuse": False,
                     "no_reorder": False, "io_in_workspace": False, "output_names": "onnx",
                     "tuning_records": None, "workspace_pools": None, "constants_section": None}


def _generate_from_mlf(args):
    """`mtvm project generate build/model.tar`: the MLF's files as they are."""
    from .. import project
    given = [f"--{k.replace('_', '-')}" for k, default in _COMPILE_DEFAULTS.items()
             if getattr(args, k, default) != default]
    if given:
        from ..errors import MtvmError
        raise MtvmError(f"{args.model} is a compiled Model Library Format, and "
                        f"{', '.join(given)} are options for compiling an ONNX model "
                        "(recompile the model with them, or leave them out)")
    return project.generate(args.model, board=args.board, out_dir=args.output, kind=args.kind,
                            sample=args.sample, force=args.force,
                            overwrite_edited=args.overwrite_edited, template=args.template)


def generate(args) -> int:
    from .. import project
    from ..model_library import is_model_library
    if is_model_library(args.model):
        return _report(args, _generate_from_mlf(args))
    kw = compile_kwargs(args)
    module_name, profile = kw.pop("module_name"), kw.pop("profile")
    proj = project.generate(args.model, board=args.board, out_dir=args.output, kind=args.kind,
                            sample=args.sample, force=args.force, profile=profile,
                            module_name=module_name, compile_options=kw,
                            overwrite_edited=args.overwrite_edited, template=args.template)
    return _report(args, proj)


def _report(args, proj) -> int:
    md = proj.metadata
    print(f"generated {proj.kind} project for model {md['model_name']} on board "
          f"{proj.board['name']} (template {proj.info['template']}): {proj.dir}")
    print(f"  {len(md['operators'])} kernels, arena {md['workspace_bytes']} B, "
          f"constants {md['constant_bytes']} B" + (", profiling" if proj.info["profile"] else ""))
    print(f"next: mtvm project build {args.output}")
    return 0


def build(args) -> int:
    from .. import project
    project.load(args.dir).build()
    return 0


def flash(args) -> int:
    from .. import project
    project.load(args.dir).flash(detach=True)     # runs on after this command
    return 0


def stop(args) -> int:
    from .. import project
    proj = project.load(args.dir)
    stopped = proj.stop()
    print(f"stopped {stopped}" if stopped else f"nothing was running for {proj.dir}")
    return 0
