"""Where mtvm's data directories are: `boards/`, `c_runtime/` and
`project_templates/`. They live at the top of the repository; a wheel carries
copies of them as package data under `mtvm/_data/` (setup.py's build_py).

A checkout (an editable install, or running from the repository) uses its own
directories, so edits there take effect at once; an installed wheel uses its
package data.
"""
from __future__ import annotations

import os

from .errors import MtvmError

#: the data directories, as named in the repository and under mtvm/_data/
NAMES = ("boards", "c_runtime", "project_templates")

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_CHECKOUT = os.path.dirname(_PACKAGE)
_PACKAGE_DATA = os.path.join(_PACKAGE, "_data")


def _is_checkout(root: str) -> bool:
    # the repository's own pyproject.toml beside the package, not some other
    # project's directory of the same name in site-packages
    try:
        with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as f:
            return 'name = "mtvm"' in f.read()
    except OSError:
        return False


def data_dir(name: str, must_exist: bool = True) -> str:
    """The absolute path of data directory `name` (one of NAMES): the
    checkout's top-level directory when mtvm runs from a checkout, else the
    installed package data. When neither exists: one line naming what is
    missing (an MtvmError), or with must_exist=False the package-data path."""
    if name not in NAMES:
        raise ValueError(f"unknown mtvm data directory {name!r}")
    candidates = []
    if _is_checkout(_CHECKOUT):
        candidates.append(os.path.join(_CHECKOUT, name))
    candidates.append(os.path.join(_PACKAGE_DATA, name))
    for d in candidates:
        if os.path.isdir(d):
            return d
    if not must_exist:
        return candidates[-1]
    raise MtvmError(f"mtvm's {name}/ directory is missing (looked in "
                    f"{' and '.join(candidates)}): reinstall mtvm (pip install mtvm's wheel or "
                    "`pip install -e .` in a checkout)")
