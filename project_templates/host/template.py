"""The host template: a native executable. Host-driven projects speak the
mtvm protocol on stdin/stdout (the session starts the executable as a
subprocess); standalone projects print the sample's outputs and exit."""
from __future__ import annotations

import os
import subprocess

from mtvm.errors import MtvmError
from mtvm.session import transport

EXECUTABLE = "build/mtvm_app"


def generate(ctx) -> None:
    ctx.render("Makefile.in", "Makefile")
    main = "main_standalone.c" if ctx.kind == "standalone" else "main_host_driven.c"
    ctx.render(f"src/{main}", "src/main.c")
    ctx.copy("src/platform_posix.c")
    ctx.template_data["executable"] = EXECUTABLE


def build(project, progress) -> None:
    jobs = str(max(os.cpu_count() or 1, 1))
    project.run_command(["make", "-j", jobs], f"building {project.dir} with make "
                        f"({project.board.get('cc', 'cc')})", progress)


def executable(project) -> str:
    exe = project.path(project.template_data.get("executable", EXECUTABLE))
    if not os.path.exists(exe):
        raise MtvmError(f"{project.dir} is not built yet; run `mtvm project build {project.dir}`")
    return exe


def flash(project, progress, **kw) -> None:
    executable(project)
    progress("host board: nothing to flash (the executable starts with each session)")


def open_transport(project, port=None, **kw):
    if port:
        return transport.open_url(port, **kw)
    return transport.subprocess([executable(project)], cwd=project.dir)


def run_standalone(project, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Runs a standalone app; returns the completed process (stdout text)."""
    return subprocess.run([executable(project)], capture_output=True, text=True,
                          timeout=timeout, cwd=project.dir)
