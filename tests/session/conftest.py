"""Fixtures: a real host-driven project (the example model, profiling on)
built once per test session, and a damaged link to its server process."""
import subprocess

import pytest

import mtvm

from session_helpers import EXAMPLE_MODEL, FaultyLink, _quiet


@pytest.fixture(scope="session")
def server_project(tmp_path_factory):
    """Host-driven project of the example model, built (profiling build)."""
    d = tmp_path_factory.mktemp("proj") / "sensor"
    proj = mtvm.project.generate(EXAMPLE_MODEL, board="host", out_dir=d, profile=True,
                                 progress=_quiet)
    proj.build(progress=_quiet)
    return proj


@pytest.fixture(scope="session")
def asan_server(server_project, tmp_path_factory):
    """The same server built with -fsanitize=address,undefined (its own build dir)."""
    build = tmp_path_factory.mktemp("asan")
    flags = "-fsanitize=address,undefined -fno-sanitize-recover=all -g -O1"
    subprocess.run(["make", "-j2", f"BUILD={build}", f"EXTRA_CFLAGS={flags}",
                    f"EXTRA_LDFLAGS={flags}"], cwd=server_project.dir, check=True,
                   capture_output=True)
    return str(build / "mtvm_app")


@pytest.fixture
def link(server_project):
    exe = server_project.path(server_project.template_data["executable"])
    t = FaultyLink([exe], cwd=server_project.dir)
    yield t
    t.close()
