"""A normal (not editable) install: the sdist built from the checkout, a wheel
built from that sdist (python -m build), installed into a fresh virtual environment and used
from a directory outside the repository. The wheel must carry boards/,
c_runtime/ and project_templates/ (mtvm/_data/), or `mtvm boards` lists
nothing and `mtvm project generate` fails. One venv for the module (~1 min:
pip fetches numpy, onnx, cffi ... into it)."""
import os
import shutil
import subprocess
import sys
import venv
import zipfile

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
COPY_SKIP = shutil.ignore_patterns(".git", "build", "dist", ".hypothesis", ".pytest_cache",
                                   "*.egg-info", "__pycache__", "_data", ".venv", "venv")


def _run(cmd, cwd, timeout=300, env=None):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("packaging")
    # a copy of the checkout, so that building writes nothing into it
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=COPY_SKIP)
    # python -m build: the sdist, then the wheel from the unpacked sdist (as an index's
    # users would build it), each in an isolated build environment
    _run([sys.executable, "-m", "build", "--outdir", str(tmp / "dist"), str(src)], cwd=tmp)
    (wheel,) = (tmp / "dist").glob("mtvm-*.whl")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False, symlinks=True)    # clean: no system site-packages
    python = env_dir / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(wheel)],
         cwd=tmp, timeout=600)
    outside = tmp / "work"
    outside.mkdir()
    return wheel, env_dir, outside


def test_wheel_carries_the_data_directories(installed):
    wheel, _, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    for f in ("mtvm/_data/boards/host.json", "mtvm/_data/boards/mps2-an386.json",
              "mtvm/_data/boards/runners/qemu.json", "mtvm/_data/c_runtime/src/mtvm_server.c",
              "mtvm/_data/c_runtime/include/mtvm_protocol.h",
              "mtvm/_data/project_templates/host/template.py",
              "mtvm/_data/project_templates/cortex_m/link.ld.in"):
        assert f in names, f
    assert not any("__pycache__" in n for n in names)
    meta = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-')[0]}-"
                                       f"{wheel.name.split('-')[1]}.dist-info/METADATA").decode()
    assert "Requires-Dist: llvmlite; extra == \"llvm\"" in meta     # not installed for nothing
    assert "Requires-Dist: tqdm" in meta


def test_installed_mtvm_lists_boards_and_runs_a_project(installed):
    _, env_dir, outside = installed
    mtvm = str(env_dir / "bin" / "mtvm")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MTVM_BOARDS_PATH")}
    where = _run([str(env_dir / "bin" / "python"), "-c", "import mtvm.datadirs as d; "
                  "print(d.data_dir('boards'))"], cwd=outside, env=env).stdout
    assert "site-packages" in where and not where.startswith(ROOT)
    boards = _run([mtvm, "boards"], cwd=outside, env=env).stdout
    for name in ("host", "mps2-an386", "mps3-an547", "nrf52840dk"):
        assert f"\n{name} " in boards, boards
    shutil.copy(os.path.join(ROOT, "examples", "sensor_mlp.onnx"), outside)
    _run([mtvm, "project", "generate", "sensor_mlp.onnx", "--board", "host", "-o", "proj"],
         cwd=outside, env=env)
    _run([mtvm, "project", "build", "proj"], cwd=outside, env=env)
    out = _run([mtvm, "run", "proj"], cwd=outside, env=env).stdout
    assert "output probs: float32[1, 4]" in out
