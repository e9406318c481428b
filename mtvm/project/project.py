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
    def __init__(self, directory: str):
        self.dir = os.path.abspath(directory)
        path = os.path.join(self.dir, PROJECT_FILE)
        if not os.path.exists(path):
            raise MtvmError(f"{directory} is not an mtvm project (no {PROJECT_FILE}); "
                            "create one with `mtvm project generate`")
        with open(path) as f:
            self.info = json.load(f)
        self.board = self.info["board_data"]
        self.kind = self.info["kind"]
        self.template = load_template(self.info["template"])
        md_path = self.path("model", "metadata.json")
        with open(md_path) as f:
            self.metadata = json.load(f)

    def __repr__(self):
        return f"<mtvm Project {self.dir} ({self.kind}, board {self.board['name']})>"

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
        progress = progress or default_progress
        t0 = time.monotonic()
        self.template.build(self, progress)
        progress(f"built {self.dir} in {time.monotonic() - t0:.1f} s")
        return self

    def flash(self, progress=None) -> "Project":
        progress = progress or default_progress
        hook = getattr(self.template, "flash", None)
        if hook is not None:
            hook(self, progress)
        return self

    def stop(self) -> None:
        hook = getattr(self.template, "stop", None)
        if hook is not None:
            hook(self)

    def open_transport(self, port=None, **kw):
        if self.kind != "host-driven":
            raise MtvmError(f"{self.dir} is a {self.kind} project: it runs untethered and "
                            "has no session; generate a host-driven project to use `mtvm run`")
        return self.template.open_transport(self, port=port, **kw)

    def session(self, port=None, timeout: float | None = None, retries: int | None = None,
                progress=None, **kw):
        """An open mtvm.Session to the device (use as a context manager)."""
        from ..session import Session
        transport = self.open_transport(port=port, **kw)
        opts = {}
        if timeout is not None:
            opts["timeout"] = timeout
        elif "session_timeout" in self.board:
            opts["timeout"] = float(self.board["session_timeout"])
        if retries is not None:
            opts["retries"] = retries
        try:
            return Session(transport, metadata=self.metadata, progress=progress, **opts)
        except BaseException:
            transport.close()
            raise

    # -- helpers for templates ----------------------------------------------------------
    def run_command(self, argv, what: str, progress=None, cwd=None, env=None) -> str:
        """Runs a tool in the project directory; BuildError with its output on failure."""
        (progress or default_progress)(what)
        try:
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
