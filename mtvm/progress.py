"""Progress bars (tqdm) for the steps that can take more than a second: a
benchmark or a profile on a slow board, opening a port and waiting for a board
to boot, building a project.

Shown on stderr only when it is a terminal, so pipes, logs and CI stay clean;
MTVM_PROGRESS=1 forces them on (e.g. to see them in a log), MTVM_PROGRESS=0 off.
A bar appears only once its step has lasted `delay` seconds (default 1, or
MTVM_PROGRESS_DELAY): quick steps print nothing.

    with progress.bar(200, "benchmark", unit="run") as b:
        b.update(50)
    with progress.waiting("opening /dev/ttyACM0"):
        sess = open_it()
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time



def _delay_from_env(default: float = 1.0) -> float:
    try:
        return max(0.0, float(os.environ.get("MTVM_PROGRESS_DELAY", default)))
    except ValueError:
        return default


DELAY = _delay_from_env()     # MTVM_PROGRESS_DELAY=0: every bar at once (tests, logs)


def enabled(stream=None) -> bool:
    """True when bars are shown on `stream` (default stderr)."""
    env = os.environ.get("MTVM_PROGRESS", "")
    if env in ("0", "1"):
        return env == "1"
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class _NoBar:
    n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str = "") -> None:
        pass

    def set_description_str(self, s: str = "") -> None:
        pass


@contextlib.contextmanager
def bar(total: int, desc: str, unit: str = "it", stream=None, delay: float = DELAY,
        position: int | None = None):
    """A bar of `total` steps (update(n) after each n). A no-op when not shown.
    position: its line among bars shown at once (0 the first)."""
    stream = stream if stream is not None else sys.stderr
    if not enabled(stream):
        yield _NoBar()
        return
    from tqdm import tqdm
    b = tqdm(total=total, desc=desc, unit=unit, file=stream, leave=False, delay=delay,
             dynamic_ncols=True, mininterval=0.2, position=position)
    try:
        yield b
    finally:
        b.close()


@contextlib.contextmanager
def waiting(desc: str, stream=None, delay: float = DELAY):
    """A step of unknown length (a port opening, a board booting, a build): the
    elapsed seconds, refreshed by a background thread until the block ends."""
    stream = stream if stream is not None else sys.stderr
    if not enabled(stream):
        yield _NoBar()
        return
    from tqdm import tqdm
    b = tqdm(total=None, desc=desc, file=stream, leave=False, delay=delay,
             bar_format="{desc}: {elapsed}{postfix}", dynamic_ncols=True)
    done = threading.Event()
    t0 = time.monotonic()

    def tick():
        while not done.wait(0.25):
            if time.monotonic() - t0 >= delay:
                b.refresh()
    th = threading.Thread(target=tick, name="mtvm-progress", daemon=True)
    th.start()
    try:
        yield b
    finally:
        done.set()
        th.join()
        b.close()


def write(msg: str, stream=None) -> None:
    """A status line that does not break a bar being shown."""
    stream = stream if stream is not None else sys.stderr
    if enabled(stream):
        from tqdm import tqdm
        tqdm.write(msg, file=stream)
    else:
        print(msg, file=stream, flush=True)


class Transfers:
    """A session's `progress(done, total, what)` callback (tensors going over a
    slow serial link): one bar per transfer, in bytes, shown after `delay`."""

    def __init__(self, stream=None, delay: float = DELAY):
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.bars = {}

    def __call__(self, done: int, total: int, what: str) -> None:
        if not enabled(self.stream):
            return
        b = self.bars.get(what)
        if b is None:
            from tqdm import tqdm
            b = self.bars[what] = tqdm(total=total, desc=what, unit="B", unit_scale=True,
                                       file=self.stream, leave=False, delay=self.delay,
                                       dynamic_ncols=True, mininterval=0.2)
        b.update(max(0, min(done, total) - b.n))
        if done >= total:
            b.close()
            del self.bars[what]

    def close(self) -> None:
        for b in self.bars.values():
            b.close()
        self.bars.clear()
