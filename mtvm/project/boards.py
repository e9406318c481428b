"""Boards (data files in boards/) and where templates and the C runtime live."""
from __future__ import annotations

import os

from ..datadirs import data_dir
from ..errors import MtvmError

# A checkout's top-level directories, or an installed wheel's package data
# (mtvm.datadirs); extra board directories come from MTVM_BOARDS_PATH.
TEMPLATES_DIR = data_dir("project_templates", must_exist=False)
C_RUNTIME_DIR = data_dir("c_runtime", must_exist=False)


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
    d = os.path.join(data_dir("project_templates"), name)
    if not os.path.isfile(os.path.join(d, "template.py")):
        raise MtvmError(f"template {name!r} not found (expected {d}/template.py)")
    return d
