"""Shared by the session tests: fixtures (imported by each test module) and
FaultyLink. Not a conftest.py on purpose: other test modules do
`from conftest import ...`, which a second conftest module would shadow.

Fixtures: a real host-driven project (the example model, profiling on) built
once per test run, its ASan/UBSan build, and a damaged link to its server.
"""
import os
import signal
import subprocess

import pytest

import mtvm

from mtvm.session.transport import SubprocessTransport, Transport

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE_MODEL = os.path.join(ROOT, "examples", "sensor_mlp.onnx")
EXAMPLE_NPZ = os.path.join(ROOT, "examples", "sensor_mlp.npz")


def _quiet(msg):
    pass


class FaultyLink(Transport):
    """A real server process behind a link the test can damage: `tx` and `rx`
    are functions bytes -> bytes applied to each write / each read chunk;
    restart() replaces the process (a device reboot); pause()/resume() stop it."""

    def __init__(self, argv, cwd=None):
        self.argv, self.cwd = argv, cwd
        self.inner = SubprocessTransport(argv, cwd=cwd)
        self.name = "faulty:" + self.inner.name
        self.tx = lambda b: b
        self.rx = lambda b: b
        self.sent = []          # what the client wrote, per write
        self.received = []      # what the device sent, per read

    def write(self, data):
        self.sent.append(bytes(data))
        self.inner.write(self.tx(bytes(data)))

    def read(self, max_bytes, timeout):
        data = self.inner.read(max_bytes, timeout)
        if data:
            self.received.append(data)
        return self.rx(data)             # called with b"" too: a filter may release held bytes

    def restart(self):
        self.inner.proc.kill()
        self.inner.close()
        self.inner = SubprocessTransport(self.argv, cwd=self.cwd)

    def pause(self):
        os.kill(self.inner.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.inner.proc.pid, signal.SIGCONT)

    def close(self):
        self.resume() if self.inner.proc.poll() is None else None
        self.inner.close()


# Built once per run, shared by the modules importing these fixtures.
_BUILT = {}


@pytest.fixture(scope="session")
def server_project(tmp_path_factory):
    """Host-driven project of the example model, built (profiling build)."""
    if "server_project" in _BUILT:
        return _BUILT["server_project"]
    d = tmp_path_factory.mktemp("proj") / "sensor"
    proj = mtvm.project.generate(EXAMPLE_MODEL, board="host", out_dir=d, profile=True,
                                 progress=_quiet)
    proj.build(progress=_quiet)
    _BUILT["server_project"] = proj
    return proj


@pytest.fixture(scope="session")
def asan_server(server_project, tmp_path_factory):
    """The same server built with -fsanitize=address,undefined (its own build dir)."""
    if "asan_server" in _BUILT:
        return _BUILT["asan_server"]
    build = tmp_path_factory.mktemp("asan")
    flags = "-fsanitize=address,undefined -fno-sanitize-recover=all -g -O1"
    subprocess.run(["make", "-j2", f"BUILD={build}", f"EXTRA_CFLAGS={flags}",
                    f"EXTRA_LDFLAGS={flags}"], cwd=server_project.dir, check=True,
                   capture_output=True)
    _BUILT["asan_server"] = str(build / "mtvm_app")
    return _BUILT["asan_server"]


@pytest.fixture
def link(server_project):
    exe = server_project.path(server_project.template_data["executable"])
    t = FaultyLink([exe], cwd=server_project.dir)
    yield t
    t.close()
