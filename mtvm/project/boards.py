"""Boards (data files in boards/) and where templates and the C runtime live."""
from __future__ import annotations

import os
import re

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


_TEMPLATE_NAME = re.compile(r"[a-z0-9_]+")


def list_templates() -> list[str]:
    """The templates of project_templates/ (directories with a template.py)."""
    root = data_dir("project_templates", must_exist=False)
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return sorted(n for n in names if _TEMPLATE_NAME.fullmatch(n)
                  and os.path.isfile(os.path.join(root, n, "template.py")))


def template_dir(name: str) -> str:
    # A template's name selects a directory whose template.py is imported: a plain
    # word, never a path.
    if not isinstance(name, str) or not _TEMPLATE_NAME.fullmatch(name):
        raise MtvmError(f"template {name!r}: a template is a plain name ([a-z0-9_]+); "
                        f"known: {', '.join(list_templates())}")
    d = os.path.join(data_dir("project_templates"), name)
    if not os.path.isfile(os.path.join(d, "template.py")):
        raise MtvmError(f"template {name!r} not found (expected {d}/template.py); "
                        f"known: {', '.join(list_templates())}")
    return d
