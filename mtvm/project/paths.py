"""Output paths the user names (-o): checked before anything is written, so a
path that cannot be a directory or a file ends in one clear line, and the
directories a project generator must never write into or clear."""
from __future__ import annotations

import os

from ..errors import MtvmError


def check_output(path, what: str = "output directory", is_file: bool = False) -> str:
    """The absolute path, or MtvmError when it cannot be created or written as
    `what` (a directory, or a file when is_file): an existing file where a
    directory is wanted (or the reverse), a dangling symbolic link, a path
    under a file."""
    raw = os.fspath(path)
    if not raw:
        raise MtvmError(f"the {what} is an empty path")
    full = os.path.abspath(raw)
    if os.path.islink(full) and not os.path.exists(full):
        raise MtvmError(f"{raw}: the {what} is a symbolic link to {os.readlink(full)!r}, "
                        f"which does not exist; remove the link or choose another path")
    # the nearest existing ancestor must be a directory
    parent = os.path.dirname(full)
    while parent and not os.path.exists(parent):
        if os.path.islink(parent):
            raise MtvmError(f"{raw}: {parent} is a symbolic link to a missing target")
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    if parent and not os.path.isdir(parent):
        raise MtvmError(f"{raw}: cannot create the {what} under {parent}, which is a file")
    if os.path.exists(full):
        if is_file and os.path.isdir(full):
            raise MtvmError(f"{raw} is a directory; the {what} must be a file path")
        if not is_file and not os.path.isdir(full):
            raise MtvmError(f"{raw} exists and is not a directory; the {what} must be a "
                            f"directory (choose another path)")
    return full


def _real(p: str) -> str:
    return os.path.normcase(os.path.realpath(p))


def _is_within(child: str, parent: str) -> bool:
    child, parent = _real(child), _real(parent)
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def check_project_dir(out_dir: str, keep=()) -> None:
    """Refuses a project directory that generation must not write into: the
    filesystem root, the home directory, the current directory or one of its
    parents, or a directory holding one of `keep` (the model, its sample)."""
    real = _real(out_dir)
    home = os.path.expanduser("~")
    if real == _real(os.sep) or (home and home != "~" and real == _real(home)):
        raise MtvmError(f"refusing to generate a project in {out_dir}: choose a new "
                        f"subdirectory (e.g. -o {os.path.join(out_dir, 'mtvm_project')})")
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    if cwd is not None and _is_within(cwd, out_dir):
        raise MtvmError(f"refusing to generate a project in {out_dir}: it is the current "
                        f"directory or one of its parents; choose a new subdirectory "
                        f"(e.g. -o ./mtvm_project)")
    for path in keep:
        if path and _is_within(path, out_dir):
            raise MtvmError(f"refusing to generate a project in {out_dir}: it contains "
                            f"{path}; choose a directory that holds none of your inputs")
