"""Byte transports between the host and a device.

A Transport moves raw bytes; framing and retries live above it. Interface:

    write(data: bytes) -> None
    read(max_bytes: int, timeout: float) -> bytes   # b"" on timeout
    close() -> None
    (raises TransportClosed when the other end is gone)

Ready-made: subprocess(argv) (a host-built device over its stdin/stdout),
serial(url) (pyserial serial_for_url: /dev/ttyUSB0, a pty, socket://h:p,
loop://), tcp(host, port).
"""
from __future__ import annotations

import logging
import os
import select
import socket
import subprocess as _sp
import threading
import time

from .errors import SessionError, TransportClosed

log = logging.getLogger("mtvm.transport")


class Transport:
    """Base class; subclasses implement write/read/close."""

    name = "transport"

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def read(self, max_bytes: int, timeout: float) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}>"


class SubprocessTransport(Transport):
    """Runs argv and talks over its stdin/stdout; stderr lines go to logging."""

    def __init__(self, argv, cwd=None, env=None):
        self.argv = [os.fspath(a) for a in argv]
        self.name = " ".join(self.argv)
        try:
            self.proc = _sp.Popen(self.argv, stdin=_sp.PIPE, stdout=_sp.PIPE, stderr=_sp.PIPE,
                                  cwd=cwd, env=env, bufsize=0)
        except OSError as e:
            raise SessionError(f"cannot start {self.argv[0]}: {e}") from e
        self._fd = self.proc.stdout.fileno()
        self.stderr_lines: list[str] = []
        self._err_thread = threading.Thread(target=self._pump_stderr, daemon=True)
        self._err_thread.start()

    def _pump_stderr(self):
        try:
            for line in iter(self.proc.stderr.readline, b""):
                text = line.decode(errors="replace").rstrip()
                self.stderr_lines.append(text)
                log.debug("%s: %s", os.path.basename(self.argv[0]), text)
        except (OSError, ValueError):
            # close() closed the pipe under a read that had not ended (a process that
            # kept its stderr open past the join's wait): the session is over
            pass

    def write(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as e:
            raise TransportClosed(self._closed_message()) from e

    def read(self, max_bytes: int, timeout: float) -> bytes:
        try:
            r, _, _ = select.select([self._fd], [], [], max(timeout, 0))
        except (ValueError, OSError) as e:
            raise TransportClosed(self._closed_message()) from e
        if not r:
            return b""
        data = os.read(self._fd, max_bytes)
        if not data:
            raise TransportClosed(self._closed_message())
        return data

    def _closed_message(self) -> str:
        code = self.proc.poll()
        if code is None:
            try:
                code = self.proc.wait(timeout=1.0)
            except _sp.TimeoutExpired:
                code = None
        tail = "; ".join(self.stderr_lines[-3:])
        return (f"device process {os.path.basename(self.argv[0])} exited"
                + (f" with status {code}" if code is not None else "") + (f": {tail}" if tail else ""))

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=2.0)
            except _sp.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # the last lines of stderr read before the pipe closes (the process has ended:
        # the read sees end of file unless a child of it still holds the pipe)
        self._err_thread.join(timeout=0.5)
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass


class SerialTransport(Transport):
    """pyserial's serial_for_url: a device node, a pty, socket://, loop://, rfc2217://."""

    def __init__(self, url: str, baudrate: int = 115200, open_timeout: float = 5.0, **kw):
        import serial
        self.name = url
        deadline = time.monotonic() + open_timeout
        while True:
            try:
                self.ser = serial.serial_for_url(url, baudrate=baudrate, timeout=0.1, **kw)
                break
            except (serial.SerialException, OSError) as e:
                if time.monotonic() > deadline:
                    raise SessionError(f"cannot open serial port {url}: {e}") from e
                time.sleep(0.1)
        self._serial = serial

    def write(self, data: bytes) -> None:
        try:
            self.ser.write(data)
            self.ser.flush()
        except (self._serial.SerialException, OSError) as e:
            raise TransportClosed(f"serial port {self.name} closed: {e}") from e

    def read(self, max_bytes: int, timeout: float) -> bytes:
        try:
            timeout = max(timeout, 0)
            if self.ser.timeout != timeout:
                self.ser.timeout = timeout
            first = self.ser.read(1)
            if not first:
                return b""
            n = min(self.ser.in_waiting, max_bytes - 1)
            return first + (self.ser.read(n) if n > 0 else b"")
        except (self._serial.SerialException, OSError) as e:
            raise TransportClosed(f"serial port {self.name} closed: {e}") from e

    def close(self) -> None:
        try:
            self.ser.close()
        except Exception:   # noqa: BLE001 - closing a dead port must not raise
            pass


class TCPTransport(Transport):
    def __init__(self, host: str, port: int, connect_timeout: float = 5.0):
        self.name = f"{host}:{port}"
        try:
            self.sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as e:
            raise SessionError(f"cannot connect to {host}:{port}: {e}") from e
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def write(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise TransportClosed(f"connection to {self.name} closed: {e}") from e

    def read(self, max_bytes: int, timeout: float) -> bytes:
        self.sock.settimeout(max(timeout, 1e-3))
        try:
            data = self.sock.recv(max_bytes)
        except socket.timeout:
            return b""
        except OSError as e:
            raise TransportClosed(f"connection to {self.name} closed: {e}") from e
        if not data:
            raise TransportClosed(f"connection to {self.name} closed by the device")
        return data

    def close(self) -> None:
        self.sock.close()


def subprocess(argv, cwd=None, env=None) -> SubprocessTransport:   # noqa: A001
    """A device that is a local process (the host board)."""
    return SubprocessTransport(argv, cwd=cwd, env=env)


def serial(url: str, baudrate: int = 115200, **kw) -> SerialTransport:
    """A serial port by pyserial URL: '/dev/ttyACM0', '/dev/pts/5', 'socket://host:port'."""
    return SerialTransport(url, baudrate=baudrate, **kw)


def tcp(host: str, port: int, **kw) -> TCPTransport:
    return TCPTransport(host, port, **kw)


def open_url(url: str, **kw) -> Transport:
    """'tcp://h:p' -> tcp; anything else -> serial (pyserial URL or device path)."""
    if url.startswith("tcp://"):
        host, _, port = url[len("tcp://"):].rpartition(":")
        return tcp(host, int(port))
    return serial(url, **kw)
