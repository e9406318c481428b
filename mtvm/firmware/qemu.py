"""QEMU as a flash target: "flashing" an emulated board starts
qemu-system-arm (or the board's runner's emulator: qemu-system-riscv32) with
the firmware and the board's first UART on a pseudo-terminal, in the
background. The pty path and the process id are
recorded in a state file so that a later `mtvm run` (which opens the pty
with pyserial, exactly like a USB serial port) and `mtvm project stop` find
them, across processes.

With icount=True QEMU runs with `-icount shift=0`: every instruction takes
1 ns of virtual time, so the board's timer (SysTick on the emulated clock)
measures instruction counts instead of host speed.

run_to_exit() is the other way to run a firmware: UART to a file, wait for
the program to end through semihosting, return its status and output (the
standalone tests use it).

Who owns the emulator: by default the Python process that started it. It
is stopped when that process exits (an atexit hook, and on Linux the kernel
sends it SIGTERM when its parent dies: PR_SET_PDEATHSIG), so a script or a
test that forgets stop() leaves nothing running. start(detach=True) is for
`mtvm project flash`: the emulator outlives the command, recorded in the
state file (the project's pid file) for `mtvm run` and `mtvm project stop`.
Every emulator carries MTVM_QEMU_STATE=<state file> in its environment, so
it can be found and attributed (the test suite checks none survives).
(PR_SET_PDEATHSIG fires when the *thread* that started QEMU ends: start an
emulator that must outlive a worker thread with detach=True and stop it.)
"""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from ..errors import MtvmError

QEMU = "qemu-system-arm"
# The Debian/Ubuntu package of each emulator binary (for the "not installed" error).
QEMU_PACKAGES = {"qemu-system-arm": "qemu-system-arm", "qemu-system-riscv32": "qemu-system-misc",
                 "qemu-system-riscv64": "qemu-system-misc"}
_PTY_RE = re.compile(r"char device redirected to (/dev/\S+) \(label (\w+)\)")


def find_qemu(binary: str = QEMU) -> str:
    """binary: the emulator (qemu-system-arm, or a board's runner tool such as
    qemu-system-riscv32)."""
    path = shutil.which(binary)
    if path is None:
        raise MtvmError(f"{binary} not found: install it (Debian/Ubuntu: apt-get install "
                        f"{QEMU_PACKAGES.get(binary, binary)}) to run the emulated boards")
    return path


def qemu_command(machine: str, elf: str, serial: str = "pty", icount: bool = False,
                 extra: list[str] | None = None, monitor: str | None = None,
                 guest_errors: bool = True, binary: str = QEMU,
                 machine_args: list[str] | None = None) -> list[str]:
    """monitor: a unix socket path for QEMU's monitor (see monitor_command).
    guest_errors: QEMU logs the guest's invalid accesses and unimplemented
    devices on stderr (shown when a board does not answer). binary: the
    emulator; machine_args: what the board adds after the machine (e.g. the
    RISC-V virt board's `-bios none`)."""
    mon = f"unix:{monitor},server=on,wait=off" if monitor else "none"
    argv = [find_qemu(binary), "-machine", machine, *(machine_args or []), "-nographic",
            "-monitor", mon, "-serial", serial, "-semihosting-config", "enable=on,target=native",
            "-kernel", os.path.abspath(elf)]
    if guest_errors:
        argv += ["-d", "guest_errors,unimp"]
    if icount:
        # shift=0: 1 instruction = 1 ns of virtual time. (sleep=off would let
        # the idle core race through virtual time and burn a host CPU while
        # it waits for the serial line; the count inside a run is the same.)
        argv += ["-icount", "shift=0"]
    return argv + list(extra or [])


def board_emulator(board) -> dict:
    """How an emulated board (an mtvm.boards.Board) is started, as keyword
    arguments of start(), run_to_exit() and qemu_command(): the binary is its
    runner's tool (qemu-system-arm, qemu-system-riscv32), machine_args its
    runner_args' "machine_args" (e.g. ["-bios", "none"])."""
    runner = getattr(board, "runner", None)
    binary = runner.tool if runner is not None and runner.kind == "qemu" else QEMU
    return {"binary": binary,
            "machine_args": list(getattr(board, "runner_args", {}).get("machine_args") or [])}


@dataclass
class QemuInstance:
    pid: int
    pty: str
    argv: list
    elf: str
    log: str
    icount: bool
    started: float
    monitor: str | None = None
    detached: bool = False
    owner: int | None = None          # pid of the process that started it

    def alive(self) -> bool:
        return _pid_is(self.pid, self.elf)

    def describe(self) -> str:
        machine = self.argv[self.argv.index("-machine") + 1] if "-machine" in self.argv else "?"
        return f"QEMU {machine} (pid {self.pid}, {os.path.relpath(self.elf)})"


# Emulators this process started and owns: state path -> pid. Stopped at exit.
_owned: dict[str, int] = {}


def _stop_owned() -> None:
    for state_path in list(_owned):
        try:
            stop(state_path)
        except Exception:       # at exit: never raise
            pass


atexit.register(_stop_owned)


def _die_with_parent(parent: int):
    """preexec_fn (Linux): SIGTERM to the child when the parent dies."""
    def hook():
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)          # PR_SET_PDEATHSIG
        except Exception:
            return
        if os.getppid() != parent:                  # the parent died already
            os._exit(1)
    return hook


def _pid_is(pid: int, elf: str) -> bool:
    """True when pid is still our QEMU (not a recycled pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True            # no /proc: trust the pid
    text = [c.decode(errors="replace") for c in cmd]
    return (any(os.path.basename(c).startswith("qemu-system-") for c in text[:1])
            and os.path.abspath(elf) in text)


def load_state(state_path: str) -> QemuInstance | None:
    try:
        with open(state_path) as f:
            return QemuInstance(**json.load(f))
    except (OSError, ValueError, TypeError):
        return None


def start(machine: str, elf: str, state_path: str, icount: bool = False,
          timeout: float = 10.0, extra: list[str] | None = None,
          detach: bool = False, binary: str = QEMU,
          machine_args: list[str] | None = None) -> QemuInstance:
    """Start QEMU in the background; returns once the UART's pty is known. A
    QEMU started earlier from the same state file is stopped first.

    detach=False (the default): the emulator belongs to this process -- it is
    stopped when the process exits or dies. detach=True: it runs in its own
    session and outlives the caller until stop(state_path)."""
    if not os.path.isfile(elf):
        raise MtvmError(f"{elf} does not exist: build the project first")
    stop(state_path)
    log = os.path.splitext(state_path)[0] + ".log"
    monitor = os.path.splitext(state_path)[0] + ".monitor"
    if len(os.path.abspath(monitor)) > 100:      # unix socket paths are short (108)
        import hashlib
        tag = hashlib.sha1(os.path.abspath(state_path).encode()).hexdigest()[:12]
        monitor = os.path.join("/tmp", f"mtvm-qemu-{tag}.monitor")
    if os.path.exists(monitor):
        os.remove(monitor)
    argv = qemu_command(machine, elf, "pty", icount, extra, monitor=monitor, binary=binary,
                        machine_args=machine_args)
    os.makedirs(os.path.dirname(os.path.abspath(state_path)), exist_ok=True)
    env = dict(os.environ, MTVM_QEMU_STATE=os.path.abspath(state_path))
    opts = {"start_new_session": True}
    if not detach:
        opts = {"start_new_session": False}
        if sys.platform.startswith("linux"):
            opts["preexec_fn"] = _die_with_parent(os.getpid())
    with open(log, "wb") as logf:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                env=env, **opts)
    if not detach:
        _owned[os.path.abspath(state_path)] = proc.pid
    deadline = time.monotonic() + timeout
    pty = None
    while time.monotonic() < deadline:
        with open(log, errors="replace") as f:
            text = f.read()
        for path, label in _PTY_RE.findall(text):
            if label == "serial0":
                pty = path
        if pty:
            break
        if proc.poll() is not None:
            raise MtvmError(f"QEMU exited ({proc.returncode}) before opening the UART pty:\n"
                            f"{' '.join(argv)}\n{text.strip()}")
        time.sleep(0.05)
    if pty is None:
        proc.kill()
        proc.wait()
        _owned.pop(os.path.abspath(state_path), None)
        raise MtvmError(f"QEMU did not report its UART pty within {timeout} s (log: {log})")
    inst = QemuInstance(pid=proc.pid, pty=pty, argv=argv, elf=os.path.abspath(elf), log=log,
                        icount=icount, started=time.time(), monitor=monitor, detached=detach,
                        owner=None if detach else os.getpid())
    with open(state_path, "w") as f:
        json.dump(asdict(inst), f, indent=2)
    return inst


def running(state_path: str) -> QemuInstance:
    """The QEMU recorded in state_path, or a clear error when there is none."""
    inst = load_state(state_path)
    if inst is None:
        raise MtvmError("the emulator is not running: `mtvm project flash DIR` starts it")
    if not inst.alive():
        tail = ""
        try:
            with open(inst.log, errors="replace") as f:
                tail = f.read().strip()[-2000:]
        except OSError:
            pass
        raise MtvmError(f"the emulator (pid {inst.pid}) has exited; `mtvm project flash DIR` "
                        f"restarts it" + (f"\nQEMU's output:\n{tail}" if tail else ""))
    return inst


def log_tail(state_path: str, chars: int = 2000) -> str:
    """The emulator's state and the end of its log (its stdout and stderr:
    guest errors, a CPU lock-up, its exit), for an error message."""
    inst = load_state(state_path)
    log = inst.log if inst else os.path.splitext(state_path)[0] + ".log"
    try:
        with open(log, errors="replace") as f:
            text = f.read().strip()
    except OSError:
        return ""
    if inst is None:
        state = "not running"
    else:
        state = "still running" if inst.alive() else "exited"
    if len(text) > chars:
        text = "..." + text[-chars:]
    return (f"the emulator ({state}) logged in {os.path.relpath(log)}:\n{text}" if text
            else f"the emulator ({state}) logged nothing ({os.path.relpath(log)})")


def stop(state_path: str, timeout: float = 5.0) -> QemuInstance | None:
    """Stop the QEMU recorded in state_path (only that process: its command
    line must still be that QEMU with that firmware). Returns the instance
    that was running, or None."""
    _owned.pop(os.path.abspath(state_path), None)
    inst = load_state(state_path)
    if inst is None:
        return None
    was = inst.alive()
    if was:
        try:
            os.kill(inst.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and _pid_is(inst.pid, inst.elf):
                try:   # reap it if it is our child
                    os.waitpid(inst.pid, os.WNOHANG)
                except ChildProcessError:
                    pass
                time.sleep(0.05)
            if _pid_is(inst.pid, inst.elf):
                os.kill(inst.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:   # reap a child that exited by itself
        os.waitpid(inst.pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass
    for path in (state_path, inst.monitor):
        try:
            if path:
                os.remove(path)
        except OSError:
            pass
    return inst if was else None


def monitor_command(state_path: str, command: str, timeout: float = 5.0) -> str:
    """Sends one command to the running QEMU's human monitor (e.g.
    "system_reset": a device reset, as when a board's reset button is
    pressed); returns its answer."""
    import socket
    inst = running(state_path)
    if not inst.monitor:
        raise MtvmError("this QEMU was started without a monitor socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(inst.monitor)
        data = b""
        while b"(qemu)" not in data:          # the banner and first prompt
            data += sock.recv(4096)
        sock.sendall(command.encode() + b"\n")
        data = b""
        while data.count(b"(qemu)") < 1:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    text = data.decode(errors="replace").replace("\r", "")
    return text.split("(qemu)")[0].replace(command, "", 1).strip()


@dataclass
class RunResult:
    status: int | None        # semihosting exit status; None on timeout
    output: str               # what the firmware wrote on its UART
    stderr: str
    seconds: float


def run_to_exit(machine: str, elf: str, timeout: float = 60.0, icount: bool = False,
                workdir: str | None = None, binary: str = QEMU,
                machine_args: list[str] | None = None) -> RunResult:
    """Run a firmware that ends itself through semihosting; capture its UART."""
    workdir = workdir or os.path.dirname(os.path.abspath(elf))
    out_path = os.path.join(workdir, "uart0.txt")
    if os.path.exists(out_path):
        os.remove(out_path)
    argv = qemu_command(machine, elf, f"file:{out_path}", icount, binary=binary,
                        machine_args=machine_args)
    t0 = time.monotonic()
    try:
        opts = {}
        if sys.platform.startswith("linux"):
            opts["preexec_fn"] = _die_with_parent(os.getpid())
        env = dict(os.environ, MTVM_QEMU_STATE=os.path.abspath(out_path))
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                           env=env, **opts)
        status, err = p.returncode, p.stdout.decode(errors="replace") + p.stderr.decode(
            errors="replace")
    except subprocess.TimeoutExpired as e:
        status, err = None, ((e.stderr or b"") + (e.stdout or b"")).decode(errors="replace")
    try:
        with open(out_path, errors="replace") as f:
            output = f.read()
    except OSError:
        output = ""
    return RunResult(status, output, err, time.monotonic() - t0)
