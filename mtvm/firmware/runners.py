"""Real boards: program the firmware with the board's flash runner (openocd,
pyocd, nrfjprog ..., from boards/runners/*.json) and find the board's serial
port by its USB vendor/product id."""
from __future__ import annotations

import shutil
import subprocess

from ..boards import Board
from ..errors import MtvmError


def flash_command(board: Board, elf: str, hex_path: str, bin_path: str) -> list[str]:
    r = board.runner
    if r is None or r.kind == "qemu":
        raise MtvmError(f"board {board.name} has no flash runner")
    values = dict(board.runner_args)
    values.update(elf=elf, hex=hex_path, bin=bin_path)
    return r.expand(values)


def flash(board: Board, elf: str, hex_path: str, bin_path: str, progress=print,
          timeout: float = 300.0) -> None:
    argv = flash_command(board, elf, hex_path, bin_path)
    if shutil.which(argv[0]) is None:
        raise MtvmError(f"{argv[0]} (the flash runner of {board.name}) is not installed: "
                        f"{board.runner.install_hint()}")
    progress(f"flashing {board.name}: {' '.join(argv)}")
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise MtvmError(f"{argv[0]} did not finish within {timeout:.0f} s") from None
    if p.returncode != 0:
        raise MtvmError(f"{argv[0]} failed ({p.returncode}) flashing {board.name}:\n"
                        f"{(p.stdout + p.stderr).strip()[-3000:]}")


def find_port(board: Board) -> str:
    """The serial device of a connected board, by the board's USB vid/pid."""
    usb = board.usb or {}
    if not usb.get("vid"):
        raise MtvmError(f"board {board.name} has no USB vid/pid; pass the port (--port)")
    vid, pid = int(str(usb["vid"]), 0), int(str(usb.get("pid", "0")), 0)
    from serial.tools import list_ports
    ports = [p for p in list_ports.comports() if p.vid == vid and (not pid or p.pid == pid)]
    if not ports:
        raise MtvmError(f"no serial port with USB id {vid:04x}:{pid:04x} "
                        f"({usb.get('product', board.name)}) found; is the board connected? "
                        f"Pass the port explicitly with --port")
    if len(ports) > 1:
        names = ", ".join(f"{p.device} (serial {p.serial_number})" for p in ports)
        raise MtvmError(f"several {board.name} boards are connected ({names}); choose one "
                        f"with --port")
    return ports[0].device
