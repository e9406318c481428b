"""The emulator belongs to its project and to the process that started it:
a script that exits (or is killed) without stop() leaves no QEMU behind,
`with proj.flash():` and `with proj.session():` stop what they started,
`mtvm project stop` says what it stopped and `generate --force` stops a
running one; stop() kills only the pid recorded in the project if it is
still that QEMU. A board that never answers shows the emulator's log, a
board's UART on TCP works through --port tcp://, and a test that leaks an
emulator fails the test run."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import mtvm.project as P
from mtvm.errors import MtvmError
from mtvm.firmware import qemu
from mtvm.session.errors import SessionError

from device_utils import need_qemu, quiet

pytestmark = pytest.mark.device

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
STATE = os.path.join("build", "qemu.json")
X = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 1, 8, 8)


@pytest.fixture(scope="module")
def proj(models, tmp_path_factory):
    need_qemu()
    p = P.generate(models.get("small_cnn"), board="mps2-an386", kind="host-driven",
                   out_dir=str(tmp_path_factory.mktemp("life") / "small-an386"), progress=quiet)
    p.build(progress=quiet)
    yield p
    p.stop()


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "mtvm", *args], capture_output=True, text=True,
                          timeout=120, **kw)


@pytest.mark.parametrize("ending", ["exit", "SIGKILL"])
def test_script_without_stop_leaves_no_emulator(proj, ending):
    script = textwrap.dedent(f"""
        import os, sys, time
        import mtvm.project as P
        from mtvm.firmware import qemu
        p = P.load({proj.dir!r}).flash(progress=lambda m: None)
        inst = qemu.load_state(p.path({STATE!r}))
        assert inst.alive()
        print(inst.pid, flush=True)
        if {ending!r} == "SIGKILL":
            time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(child.stdout.readline())
        if ending == "SIGKILL":
            child.send_signal(signal.SIGKILL)     # no atexit: the kernel's death signal
        child.wait(30)
        assert wait_gone(pid), f"QEMU {pid} outlived its script ({ending})"
    finally:
        child.kill()
        child.wait()
        proj.stop()


def test_with_flash_and_with_session_own_the_emulator(proj):
    with proj.flash(progress=quiet):
        pid = qemu.load_state(proj.path(STATE)).pid
        assert pid_alive(pid)
    assert wait_gone(pid) and not proj.running()
    # a session on an emulated board that is not running starts and owns one
    with proj.session() as s:
        y = list(s.executor.run([X]).values())[0]
        pid = qemu.load_state(proj.path(STATE)).pid
    assert wait_gone(pid) and not proj.running()
    assert y.shape == (1, 5) and abs(float(y.sum()) - 1.0) < 1e-5
    # an emulator flash() started stays up across sessions until stop()
    proj.flash(progress=quiet)
    try:
        pid = qemu.load_state(proj.path(STATE)).pid
        with proj.session() as s:
            s.info()
        assert pid_alive(pid)
    finally:
        assert proj.stop() == f"QEMU mps2-an386 (pid {pid}, " \
            f"{os.path.relpath(proj.path('build', 'firmware.elf'))})"
    assert proj.stop() is None


def test_cli_flash_detaches_and_stop_says_what_it_stopped(proj):
    r = cli("project", "flash", proj.dir)
    assert r.returncode == 0, r.stderr
    pid = qemu.load_state(proj.path(STATE)).pid
    try:
        assert pid_alive(pid)                     # outlives the command
        r = cli("project", "stop", proj.dir)
        assert r.returncode == 0, r.stderr
        assert f"stopped QEMU mps2-an386 (pid {pid}" in r.stdout
        assert wait_gone(pid)
        r = cli("project", "stop", proj.dir)
        assert r.returncode == 0 and "nothing was running" in r.stdout
    finally:
        qemu.stop(proj.path(STATE))


def test_stop_kills_only_that_qemu(proj):
    """A stale pid file whose pid is now another program: stop() leaves it alone."""
    other = subprocess.Popen(["sleep", "30"])
    try:
        proj.flash(progress=quiet)
        inst = qemu.load_state(proj.path(STATE))
        proj.stop()
        state = dict(inst.__dict__, pid=other.pid)
        import json
        with open(proj.path(STATE), "w") as f:
            json.dump(state, f)
        assert proj.stop() is None
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_generate_force_stops_the_running_emulator(proj, models, tmp_path):
    d = str(tmp_path / "regen")
    shutil.copytree(proj.dir, d, ignore=shutil.ignore_patterns("qemu.*"))
    p = P.load(d)
    r = cli("project", "flash", d)
    assert r.returncode == 0, r.stderr
    pid = qemu.load_state(p.path(STATE)).pid
    try:
        p2 = P.generate(models.get("small_cnn"), board="mps2-an386", out_dir=d, force=True,
                        progress=quiet)
        assert wait_gone(pid), "generate --force left the project's QEMU running"
        assert p2.stop() is None
    finally:
        os.kill(pid, signal.SIGKILL) if pid_alive(pid) else None


@pytest.mark.parametrize("fault", ["bad-write", "hang"])
def test_board_that_never_answers_shows_the_emulators_log(proj, tmp_path, fault):
    """A firmware that writes to an unmapped address at boot (QEMU logs the
    guest error, the fault handler ends the run) or that never starts its
    server: the error carries the emulator's log, not only a timeout."""
    d = str(tmp_path / "broken")
    shutil.copytree(proj.dir, d, ignore=shutil.ignore_patterns("qemu.*"))
    with open(os.path.join(d, "src", "main.c")) as f:
        text = f.read()
    bad = ("*(volatile uint32_t*)(uintptr_t)0x70000000u = 1u;" if fault == "bad-write"
           else "for (;;) { mtvm_wfi(); }")
    text = text.replace("    mtvm_platform_init();\n    mtvm_server_init(",
                        f"    mtvm_platform_init();\n    {bad}\n    mtvm_server_init(", 1)
    with open(os.path.join(d, "src", "main.c"), "w") as f:
        f.write(text)
    p = P.load(d).build(progress=quiet)
    with pytest.raises(MtvmError) as e:
        with p.session(timeout=1.0, retries=1):
            pass
    msg = str(e.value)
    assert "qemu.log" in msg or "QEMU's output" in msg, msg
    if fault == "bad-write":
        assert "Invalid write at addr 0x70000000" in msg and "mtvm: abort" in msg, msg
    else:
        assert isinstance(e.value, SessionError)
        assert "the emulator (still running) logged in" in msg, msg
        assert "char device redirected to" in msg, msg
    assert not p.running()


def test_port_tcp_url_on_a_cortex_m_project(proj):
    """--port tcp://127.0.0.1:PORT: QEMU with the UART on a TCP socket."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = qemu.qemu_command("mps2-an386", proj.path("build", "firmware.elf"),
                             f"tcp:127.0.0.1:{port},server=on,wait=off")
    emu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        # QEMU takes one client at a time: the probe above has gone
        time.sleep(0.2)
        with proj.session(port=f"tcp://127.0.0.1:{port}") as sess:
            y = list(sess.executor.run([X]).values())[0]
        assert abs(float(y.sum()) - 1.0) < 1e-5
        assert not proj.running()          # an explicit port starts no emulator
        r = cli("run", proj.dir, "--port", f"tcp://127.0.0.1:{port}")
        assert "Traceback" not in r.stderr and r.returncode == 0, r.stderr
    finally:
        emu.kill()
        emu.wait()


LEAKY_TEST = '''
import subprocess
import time

def test_leaks_an_emulator():
    p = subprocess.Popen(["qemu-system-arm", "-machine", "mps2-an386", "-nographic",
                          "-monitor", "none", "-serial", "none", "-S"],
                         stdin=subprocess.DEVNULL, start_new_session=True)
    # An emulator left running, not one still being exec'd: on a loaded machine the
    # session could end before /proc shows the new program (a race of this test only).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{p.pid}/cmdline", "rb") as f:
            if f.read().startswith(b"qemu-system-"):
                break
        time.sleep(0.05)
'''


@pytest.mark.parametrize("workers", [None, pytest.param(1, marks=pytest.mark.slow)])
def test_a_leaked_emulator_fails_the_test_run(tmp_path, workers):
    """tests/conftest.py's session-end check, in a pytest run of its own (and
    with an xdist worker: the worker finds it, the controller fails the run)."""
    need_qemu()
    xdist = ["-n", str(workers)] if workers else []
    if workers:
        pytest.importorskip("xdist")
    shutil.copy(os.path.join(ROOT, "tests", "conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_leak.py").write_text(LEAKY_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTVM_TEST_")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *xdist,
                        str(tmp_path / "test_leak.py")], capture_output=True, text=True,
                       cwd=str(tmp_path), env=env, timeout=120)
    assert r.returncode != 0, r.stdout
    assert "1 passed" in r.stdout
    assert "emulator process(es) started by the tests still running" in r.stdout
    assert "qemu-system-arm -machine mps2-an386" in r.stdout


def test_ctrl_c_during_a_benchmark_leaves_the_board_idle(proj, tmp_path):
    """Ctrl-C during `mtvm run --benchmark` on a flashed (detached) board: one
    line, exit 130, and the board is left idle -- the next `mtvm run` is
    answered at once (it used to wait out the benchmark, 25 s, and fail)."""
    import select
    np.save(tmp_path / "x.npy", X)
    r = cli("project", "flash", proj.dir)
    assert r.returncode == 0, r.stderr
    try:
        p = subprocess.Popen([sys.executable, "-m", "mtvm", "run", proj.dir, "--benchmark",
                              "100000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        seen = ""
        while "output " not in seen:           # the device's info: the session is up
            ready, _, _ = select.select([p.stdout], [], [], 60)
            chunk = os.read(p.stdout.fileno(), 65536).decode(errors="replace") if ready else ""
            assert chunk, f"no device info from mtvm run: {seen[-500:]}"
            seen += chunk
        time.sleep(2.0)                          # well inside the benchmark
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 130, err
        assert "Traceback" not in err and err.strip().splitlines()[-1] == "mtvm: interrupted", err
        t0 = time.monotonic()
        r = cli("run", proj.dir, "--input", str(tmp_path / "x.npy"))
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        assert "output" in r.stdout and took < 20, (took, r.stdout, r.stderr)
    finally:
        qemu.stop(proj.path(STATE))
