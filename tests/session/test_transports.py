"""The same server over the other transports: a pseudo-terminal (as QEMU's
UART), pyserial socket://, and plain TCP."""
import os
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

import mtvm

from session_helpers import EXAMPLE_NPZ, server_project  # noqa: F401 (fixture)


def exe(proj):
    return proj.path(proj.template_data["executable"])


def check(sess):
    with np.load(EXAMPLE_NPZ) as z:
        y = sess.executor.run({"x": z["in_0"]})
        np.testing.assert_allclose(y["probs"], z["out_0"], atol=1e-5)
    assert sess.echo(bytes(range(256))) == bytes(range(256))


def test_serial_over_a_pty(server_project):
    master, slave = os.openpty()
    path = os.ttyname(slave)
    proc = subprocess.Popen([exe(server_project)], stdin=master, stdout=master,
                            stderr=subprocess.DEVNULL)
    os.close(master)
    try:
        t = mtvm.transport.serial(path, baudrate=115200)
        os.close(slave)                           # pyserial holds its own descriptor now
        with mtvm.Session(t) as sess:
            assert sess.info().board == "host"
            check(sess)
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def tcp_device(server_project):
    """A TCP port whose each connection is a fresh server process (like a
    serial-to-network bridge in front of a board)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(2)
    procs = []

    def pump(src_read, dst_write):
        try:
            while True:
                data = src_read(4096)
                if not data:
                    break
                dst_write(data)
        except OSError:
            pass

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            p = subprocess.Popen([exe(server_project)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
            procs.append(p)

            def to_dev(d, p=p):
                p.stdin.write(d)
                p.stdin.flush()
            threading.Thread(target=pump, args=(conn.recv, to_dev), daemon=True).start()
            threading.Thread(target=pump, args=(lambda n, p=p: os.read(p.stdout.fileno(), n),
                                                conn.sendall), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()[1]
    srv.close()
    for p in procs:
        p.kill()
        p.wait()


def test_pyserial_socket_url(tcp_device):
    with mtvm.Session(mtvm.transport.serial(f"socket://127.0.0.1:{tcp_device}")) as sess:
        check(sess)


def test_tcp(tcp_device):
    with mtvm.Session(mtvm.transport.tcp("127.0.0.1", tcp_device)) as sess:
        check(sess)
    with mtvm.Session(mtvm.transport.open_url(f"tcp://127.0.0.1:{tcp_device}")) as sess:
        assert sess.echo(b"url") == b"url"


def test_cli_run_with_port(server_project, tcp_device, capsys):
    from mtvm.cli import main as cli
    assert cli(["run", server_project.dir, "--port", f"socket://127.0.0.1:{tcp_device}",
                "--benchmark", "3"]) == 0
    assert "benchmark:" in capsys.readouterr().out


def test_unreachable_port_is_a_clear_error():
    with pytest.raises(mtvm.session.SessionError, match="cannot"):
        mtvm.transport.tcp("127.0.0.1", 1, connect_timeout=1)
    with pytest.raises(mtvm.session.SessionError, match="cannot open serial port"):
        mtvm.transport.serial("/dev/does-not-exist", open_timeout=0.2)


def test_closing_a_process_whose_child_keeps_stderr_open():
    """A device process that exits while a child of it still writes to the inherited
    stderr: close() returns, the lines read before it are kept, and the thread reading
    stderr ends without an exception (it raised on the closed pipe before)."""
    from mtvm.session.transport import SubprocessTransport
    errors = []
    previous = threading.excepthook
    threading.excepthook = errors.append
    try:
        t = SubprocessTransport(["sh", "-c", "echo first >&2; (sleep 2; echo late >&2) & "
                                 "read line"])
        deadline = time.monotonic() + 5
        while not t.stderr_lines and time.monotonic() < deadline:
            time.sleep(0.01)
        t.close()
        t._err_thread.join(timeout=5)
    finally:
        threading.excepthook = previous
    assert t.stderr_lines[:1] == ["first"]
    assert not t._err_thread.is_alive()
    assert errors == []
