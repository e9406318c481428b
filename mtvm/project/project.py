"""A generated project directory: build, flash, open a session, stop."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

from ..errors import BuildError, MtvmError
from .boards import template_dir

PROJECT_FILE = "mtvm_project.json"


def load_template(name: str):
    """The hook module project_templates/<name>/template.py."""
    d = template_dir(name)
    mod_name = f"mtvm_template_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, os.path.join(d, "template.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod


def default_progress(msg: str) -> None:
    print(f"[mtvm] {msg}", file=sys.stderr, flush=True)


class Project:
    """A generated project directory (see docs/projects.md): the model's C, the
    C runtime and a board template's files, plus mtvm_project.json.

        proj = mtvm.project.generate("kws.onnx", board="mps2-an386", out_dir="kws-an386")
        proj.build()
        with proj.flash():                 # an emulator: stopped at the end of the block
            with proj.session() as sess:
                y = sess.executor.run({"input": x})

    A Project is also a context manager: leaving `with proj:` (or `with
    proj.flash():`) stops whatever flash() started. An emulator started from
    Python belongs to the process that started it and stops when that process
    exits, even without stop(); `mtvm project flash` starts a detached one that
    runs until `mtvm project stop DIR`.
    """

    def __init__(self, directory: str):
        self.dir = os.path.abspath(directory)
        path = os.path.join(self.dir, PROJECT_FILE)
        if not os.path.exists(path):
            raise MtvmError(f"{directory} is not an mtvm project (no {PROJECT_FILE}); "
                            "create one with `mtvm project generate`")
        with open(path) as f:
            self.info = json.load(f)
        self.kept_files: list[str] = []     # generate(): files it kept (edited / not mtvm's)
        self.board = self.info["board_data"]
        self.kind = self.info["kind"]
        self.template = load_template(self.info["template"])
        md_path = self.path("model", "metadata.json")
        with open(md_path) as f:
            self.metadata = json.load(f)

    def __repr__(self):
        return f"<mtvm Project {self.dir} ({self.kind}, board {self.board['name']})>"

    def __enter__(self) -> "Project":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def template_data(self) -> dict:
        return self.info.setdefault("template_data", {})

    def path(self, *rel) -> str:
        return os.path.join(self.dir, *rel)

    def save(self) -> None:
        with open(self.path(PROJECT_FILE), "w") as f:
            json.dump(self.info, f, indent=2)
            f.write("\n")

    # -- steps --------------------------------------------------------------------------
    def build(self, progress=None) -> "Project":
        """Compiles the project with its template's tools (host cc, or make with
        arm-none-eabi-gcc and a flash/RAM report that the linker checked).
        Raises BuildError with the tool's output, or MtvmError naming the
        memory region that overflowed. progress: a callable for status lines
        (default: stderr). Returns the project."""
        progress = progress or default_progress
        t0 = time.monotonic()
        self.template.build(self, progress)
        progress(f"built {self.dir} in {time.monotonic() - t0:.1f} s")
        return self

    def flash(self, progress=None, detach: bool = False, **kw) -> "Project":
        """Puts the firmware on the board: runs the board's flash tool, or for an
        emulated board starts QEMU with its UART on a pty (any emulator this
        project ran before is stopped first). The host board has nothing to
        flash. Returns the project, so `with proj.flash():` stops the emulator
        at the end of the block.

        detach: the emulator outlives this Python process (what `mtvm project
        flash` does; stop it with stop() or `mtvm project stop DIR`). By
        default it is stopped when this process exits. Template options
        (cortex_m: icount, gdb) are passed through."""
        progress = progress or default_progress
        hook = getattr(self.template, "flash", None)
        if hook is not None:
            if detach:
                kw["detach"] = True
            hook(self, progress, **kw)
        return self

    def stop(self) -> str | None:
        """Stops what flash() started (an emulator: only the process recorded in
        the project's build/qemu.json, checked to still be that QEMU). Returns
        a description of what was stopped, or None when nothing was running.
        Safe to call more than once."""
        hook = getattr(self.template, "stop", None)
        if hook is not None:
            return hook(self)
        return None

    def running(self) -> bool:
        """True when an emulator flash() started for this project is running."""
        hook = getattr(self.template, "running", None)
        return bool(hook and hook(self))

    def open_transport(self, port=None, **kw):
        if self.kind != "host-driven":
            raise MtvmError(f"{self.dir} is a {self.kind} project: it runs untethered and "
                            "has no session; generate a host-driven project to use `mtvm run`")
        return self.template.open_transport(self, port=port, **kw)

    def session(self, port=None, timeout: float | None = None, retries: int | None = None,
                progress=None, **kw):
        """An open mtvm.Session to the device (use as a context manager).

        An emulated board whose emulator is not running (and no port given) is
        flashed first, and the session owns that emulator: closing the session
        stops it. When the device does not answer, the error carries the
        emulator's log (guest errors, a CPU lock-up, its exit)."""
        from ..session import Session
        from ..session.errors import SessionTimeout, TransportClosed
        owned = False
        if port is None and getattr(self.template, "running", None) is not None \
                and self.board.get("emulated") and self.kind == "host-driven" \
                and not self.running():
            self.flash(progress=lambda msg: None)   # `progress` here is for transfers
            owned = True
        try:
            transport = self.open_transport(port=port, **kw)
        except BaseException:
            if owned:
                self.stop()
            raise
        if owned:
            close = transport.close

            def close_and_stop():
                try:
                    close()
                finally:
                    self.stop()
            transport.close = close_and_stop
        opts = {}
        if timeout is not None:
            opts["timeout"] = timeout
        elif "session_timeout" in self.board:
            opts["timeout"] = float(self.board["session_timeout"])
        if retries is not None:
            opts["retries"] = retries
        try:
            return Session(transport, metadata=self.metadata, progress=progress, **opts)
        except (SessionTimeout, TransportClosed) as e:
            diag = self.diagnostics()
            transport.close()
            if diag:
                raise type(e)(f"{e}\n{diag}") from e
            raise
        except BaseException:
            transport.close()
            raise

    def diagnostics(self) -> str:
        """What the board's side said (an emulator's log tail), or ""."""
        hook = getattr(self.template, "diagnostics", None)
        try:
            return hook(self) if hook is not None else ""
        except Exception:
            return ""

    # -- helpers for templates ----------------------------------------------------------
    def run_command(self, argv, what: str, progress=None, cwd=None, env=None) -> str:
        """Runs a tool in the project directory; BuildError with its output on failure."""
        from .. import progress as _progress
        (progress or default_progress)(what)
        try:
            with _progress.waiting(what):      # elapsed seconds, on a terminal only
                p = subprocess.run(argv, cwd=cwd or self.dir, capture_output=True, text=True,
                                   env=env)
        except OSError as e:
            raise BuildError(f"{what}: cannot run {argv[0]}: {e}") from e
        if p.returncode != 0:
            raise BuildError(f"{what} failed ({' '.join(argv)}):\n"
                             f"{(p.stdout + p.stderr)[-4000:]}")
        return p.stdout


def load(directory) -> Project:
    return Project(os.fspath(directory))
