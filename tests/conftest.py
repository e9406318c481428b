import os
import uuid

import pytest

from mtvm import testing

# -- no emulator survives the test run ----------------------------------------------------
# Every process a test starts inherits these variables: the run's id, and the pid of the
# pytest process (an xdist worker sets its own) that ran the test. At the end of a session
# each process looks for qemu-system-* processes carrying its marker: one still running is
# an emulator a test leaked (stop() missing); it fails the run, and is killed.
RUN_VAR, PROC_VAR = "MTVM_TEST_RUN", "MTVM_TEST_PROC"


def pytest_configure(config):
    os.environ.setdefault(RUN_VAR, uuid.uuid4().hex)
    os.environ[PROC_VAR] = str(os.getpid())


def _marked_qemus(var: str, value: str) -> list[tuple[int, str]]:
    """(pid, command line) of the qemu-system-* processes with var=value in their
    environment (Linux /proc; elsewhere none are found)."""
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    needle = f"{var}={value}".encode()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if not os.path.basename(argv[0]).startswith(b"qemu-system-"):
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            found.append((pid, b" ".join(a for a in argv if a).decode(errors="replace")))
    return found


def _kill(pids) -> None:
    import signal
    import time
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for pid in pids:       # reap our own children
        for _ in range(50):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            time.sleep(0.01)


def _report(session, leaks, where: str) -> None:
    lines = [f"{len(leaks)} emulator process(es) started by the tests still running at the "
             f"end of the {where} (a test did not stop its emulator); killed:"]
    lines += [f"  pid {pid}: {cmd[:300]}" for pid, cmd in leaks]
    text = "\n".join(lines)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(text, red=True)
    else:
        print(text)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_sessionfinish(session, exitstatus):
    worker = hasattr(session.config, "workerinput")
    leaks = _marked_qemus(PROC_VAR, str(os.getpid()))
    if not worker:   # the controller (or a run without xdist): any process of the run
        leaks += [p for p in _marked_qemus(RUN_VAR, os.environ[RUN_VAR]) if p not in leaks]
    leaks += getattr(session.config, "_mtvm_worker_leaks", [])
    if worker:
        session.config.workeroutput["mtvm_qemu_leaks"] = leaks
    _kill([pid for pid, _ in leaks])
    if leaks:
        _report(session, leaks, "xdist worker" if worker else "test session")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: a worker's leaked emulators fail the whole run."""
    leaks = getattr(node, "workeroutput", {}).get("mtvm_qemu_leaks") or []
    if leaks:
        stash = getattr(node.config, "_mtvm_worker_leaks", [])
        stash += [tuple(p) for p in leaks]
        node.config._mtvm_worker_leaks = stash


@pytest.fixture
def models_dir():
    d = testing.models_dir()
    if not os.path.isdir(d):
        pytest.skip(f"{d} not found (set MTVM_MODELS_DIR)")
    return d
