"""Boards (data files in boards/) and where templates and the C runtime live."""
from __future__ import annotations

import json
import os

from ..errors import MtvmError

REPO_ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
BOARDS_DIR = os.environ.get("MTVM_BOARDS_DIR", os.path.join(REPO_ROOT, "boards"))
TEMPLATES_DIR = os.path.join(REPO_ROOT, "project_templates")
C_RUNTIME_DIR = os.path.join(REPO_ROOT, "c_runtime")


def list_boards() -> list[str]:
    if not os.path.isdir(BOARDS_DIR):
        return []
    return sorted(f[:-5] for f in os.listdir(BOARDS_DIR) if f.endswith(".json"))


def load_board(board) -> dict:
    """A board by name (boards/<name>.json), by path to a .json, or a dict."""
    if isinstance(board, dict):
        data = dict(board)
    else:
        path = board if str(board).endswith(".json") else os.path.join(BOARDS_DIR,
                                                                        f"{board}.json")
        if not os.path.exists(path):
            raise MtvmError(f"unknown board {board!r}; known boards: "
                            + (", ".join(list_boards()) or "(none)"))
        with open(path) as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise MtvmError(f"{path}: invalid JSON: {e}") from e
        data.setdefault("name", os.path.splitext(os.path.basename(path))[0])
    for key in ("name", "template"):
        if key not in data:
            raise MtvmError(f"board {data.get('name', board)!r} has no {key!r}")
    return data


def template_dir(name: str) -> str:
    d = os.path.join(TEMPLATES_DIR, name)
    if not os.path.isfile(os.path.join(d, "template.py")):
        raise MtvmError(f"template {name!r} not found (expected {d}/template.py)")
    return d
