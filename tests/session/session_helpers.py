"""Shared by the session tests (a uniquely named module: `conftest` is ambiguous
when several test directories have one)."""
import os
import signal

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
            data = self.rx(data)
        return data

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
