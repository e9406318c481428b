"""A man in the middle on a serial line: a relay thread between a device's
byte stream and a fresh pty that the client opens like any serial port
(mtvm.transport.serial(relay.path)). In each direction every byte is dropped
with probability `loss` and otherwise has one bit flipped with probability
`flip`, from a seeded RNG per direction (reproducible damage).

    relay = LossyRelay.for_process([exe], loss=0.01, flip=0.01, seed=1)  # host board
    relay = LossyRelay.for_tty(qemu_pty_path, ...)                       # QEMU's UART
    with mtvm.Session(mtvm.transport.serial(relay.path)) as s: ...
    relay.close()
"""
import os
import pty
import random
import select
import subprocess
import termios
import threading
import tty


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


class LossyRelay:
    def __init__(self, dev_read_fd, dev_write_fd, loss=0.0, flip=0.0, seed=0, on_close=None):
        self.dev_r, self.dev_w = dev_read_fd, dev_write_fd
        self.loss, self.flip = loss, flip
        self.rng = {"tx": random.Random(seed * 2 + 1), "rx": random.Random(seed * 2 + 2)}
        self.stats = {"tx": [0, 0, 0], "rx": [0, 0, 0]}    # bytes, dropped, flipped
        self.master, self.slave = pty.openpty()
        tty.setraw(self.slave)
        self.path = os.ttyname(self.slave)
        self._on_close = on_close
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    @classmethod
    def for_process(cls, argv, cwd=None, **kw):
        """A host-board device: argv runs with its stdin/stdout on the relay."""
        proc = subprocess.Popen([os.fspath(a) for a in argv], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd,
                                bufsize=0)

        def stop():
            proc.kill()
            proc.wait()
            proc.stdin.close()
            proc.stdout.close()
        relay = cls(proc.stdout.fileno(), proc.stdin.fileno(), on_close=stop, **kw)
        relay.proc = proc
        return relay

    @classmethod
    def for_tty(cls, path, **kw):
        """A device behind a tty (QEMU's UART pty), put in raw mode."""
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        attrs = termios.tcgetattr(fd)
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
        return cls(fd, fd, on_close=lambda: os.close(fd), **kw)

    def damage(self, data: bytes, direction: str) -> bytes:
        rng, st = self.rng[direction], self.stats[direction]
        out = bytearray()
        for b in data:
            st[0] += 1
            r = rng.random()
            if r < self.loss:
                st[1] += 1
                continue
            if r < self.loss + self.flip:
                st[2] += 1
                b ^= 1 << rng.randrange(8)
            out.append(b)
        return bytes(out)

    def _pump(self):
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.master, self.dev_r], [], [], 0.05)
                for fd in ready:
                    data = os.read(fd, 4096)
                    if not data:
                        return
                    if fd == self.master:         # client -> device
                        _write_all(self.dev_w, self.damage(data, "tx"))
                    else:                          # device -> client
                        _write_all(self.master, self.damage(data, "rx"))
            except OSError:
                if self._stop.is_set():
                    return
                # the client has not opened the pty yet or just closed it
                self._stop.wait(0.01)

    def close(self):
        self._stop.set()
        self._thread.join(timeout=2)
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass
        if self._on_close:
            self._on_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
