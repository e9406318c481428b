"""Boards (data files in boards/) and where templates and the C runtime live."""
from __future__ import annotations

import os

from ..errors import MtvmError

REPO_ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
BOARDS_DIR = os.environ.get("MTVM_BOARDS_DIR", os.path.join(REPO_ROOT, "boards"))
TEMPLATES_DIR = os.path.join(REPO_ROOT, "project_templates")
C_RUNTIME_DIR = os.path.join(REPO_ROOT, "c_runtime")


def list_boards() -> list[str]:
    from .. import boards as _boards
    return _boards.list_boards()


def load_board(board) -> dict:
    """A board's data: by name (boards/<name>.json, MTVM_BOARDS_PATH), by path to a
    .json file, or a dict. Validated by mtvm.boards."""
    from .. import boards as _boards
    if isinstance(board, dict):
        b = _boards.board_from_dict(dict(board))
    else:
        b = _boards.load_board(os.fspath(board))
    data = b.to_dict()
    data.setdefault("name", b.name)
    data.setdefault("template", b.template)
    return data


def template_dir(name: str) -> str:
    d = os.path.join(TEMPLATES_DIR, name)
    if not os.path.isfile(os.path.join(d, "template.py")):
        raise MtvmError(f"template {name!r} not found (expected {d}/template.py)")
    return d
