"""Build hook: the wheel carries the repository's top-level data directories
(boards/, c_runtime/, project_templates/) as package data under mtvm/_data/,
where mtvm.datadirs finds them in an installed mtvm. The metadata is in
pyproject.toml."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_DIRS = ("boards", "c_runtime", "project_templates")   # = mtvm.datadirs.NAMES
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", "*.o", "*.elf", "build")


class BuildPyWithData(build_py):
    """build_py, plus copies of the data directories in mtvm/_data/ (not for an
    editable install, which uses the checkout's own directories)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in DATA_DIRS:
            src = os.path.join(HERE, name)
            if not os.path.isdir(src):
                raise SystemExit(f"setup.py: {src} is missing (an sdist without MANIFEST.in?)")
            dst = os.path.join(self.build_lib, "mtvm", "_data", name)
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(src, dst, ignore=SKIP)


setup(cmdclass={"build_py": BuildPyWithData})
