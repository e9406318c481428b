"""Running the model on the device: tensors in/out in chunks, RUN, TIME, PROFILE."""
from __future__ import annotations

import statistics
import struct
import zlib
import time as _time
from dataclasses import dataclass, field

import numpy as np

from . import quant_io
from .. import progress as _progress

from ..errors import MtvmError
from . import protocol as P
from .errors import DeviceError, SessionError, SessionTimeout


def fmt_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.3f} us"


def _fmt_shape(dtype, shape) -> str:
    return f"{np.dtype(dtype).name}{list(shape)}"


def profile_warmup(board: dict) -> int:
    """Runs the device makes right before each profiled one (Executor.profile's
    warmup) on a board: one where it has caches to warm (a host, a Cortex-M7 board),
    as a loop of inferences runs and as AutoTVM's time_evaluator measured; none
    under an emulator, whose instruction count has nothing to warm."""
    return 0 if board.get("emulated") else 1


@dataclass
class BenchmarkResult:
    """Device-timed seconds per inference, one entry per repeat."""
    per_repeat: list
    number: int
    ticks_per_second: int

    @property
    def mean(self):
        return statistics.fmean(self.per_repeat)

    @property
    def median(self):
        return statistics.median(self.per_repeat)

    @property
    def min(self):
        return min(self.per_repeat)

    @property
    def max(self):
        return max(self.per_repeat)

    @property
    def std(self):
        return statistics.pstdev(self.per_repeat)

    def __str__(self):
        ms = fmt_seconds
        return (f"{len(self.per_repeat)} x {self.number} runs (device timer, "
                f"{self.ticks_per_second} Hz): mean {ms(self.mean)}, median {ms(self.median)}, "
                f"min {ms(self.min)}, max {ms(self.max)}, std {ms(self.std)}")


@dataclass
class ProfileRow:
    """One kernel of a profile: its median ticks over the profiled runs."""
    index: int
    name: str
    kind: str
    ticks: int                  # median over the runs (the upper median for an even count)
    seconds: float
    share: float
    macs: int
    nodes: list = field(default_factory=list)     # the ONNX node(s) fused into the kernel
    min_ticks: int = 0
    max_ticks: int = 0

    @property
    def macs_per_tick(self) -> float:
        return self.macs / self.ticks if self.ticks else 0.0

    @property
    def spread(self) -> float:
        """(max - min) / median over the runs."""
        return (self.max_ticks - self.min_ticks) / self.ticks if self.ticks else 0.0


def _printable(text: str, width: int = 60) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= width else text[:width - 3] + "..."


@dataclass
class ProfileResult:
    """Per-kernel device ticks, the median of `runs` profiled runs.

    instructions_per_second: set when device time is instructions (QEMU with
    -icount: 1e9), so the table shows instructions and MACs per instruction.
    time_is_host_clock: the device timer follows the host's clock (QEMU without
    icount): no rate is shown, since MACs per host tick mean nothing."""
    rows: list
    ticks_per_second: int
    runs: int = 1
    instructions_per_second: float | None = None
    time_is_host_clock: bool = False

    @property
    def total_ticks(self) -> int:
        return sum(r.ticks for r in self.rows)

    def instructions(self, ticks) -> int:
        return int(round(ticks / self.ticks_per_second * self.instructions_per_second))

    def table(self) -> str:
        w = max([len(r.name) for r in self.rows] + [8])
        kw = max([len(r.kind) for r in self.rows] + [4])
        icount = bool(self.instructions_per_second and self.ticks_per_second)
        tps = self.ticks_per_second or 0
        if icount:
            unit, rate = "instructions", "MACs/instr"
        else:
            unit, rate = "us", "" if self.time_is_host_clock else "MACs/us"
        uw = max(len(unit), 10)
        head = (f"{'#':>3}  {'kernel':<{w}}  {'op':<{kw}}  {'ticks':>12}  {unit:>{uw}}  "
                f"{'spread':>6}  {'share':>6}  {'MACs':>10}  ")
        head += f"{rate:>10}  nodes" if rate else "nodes"
        lines = [head]

        def amount(ticks):
            if icount:
                return f"{self.instructions(ticks):>{uw}}"
            return f"{ticks / tps * 1e6 if tps else 0.0:>{uw}.2f}"
        for r in self.rows:
            line = (f"{r.index:>3}  {r.name:<{w}}  {r.kind:<{kw}}  {r.ticks:>12}  "
                    f"{amount(r.ticks)}  {r.spread * 100:>5.0f}%  {r.share * 100:>5.1f}%  "
                    f"{r.macs:>10}  ")
            if rate:
                per = (r.macs / self.instructions(r.ticks) if icount and self.instructions(r.ticks)
                       else r.macs / (r.ticks / tps * 1e6) if tps and r.ticks else 0.0)
                line += f"{per:>10.3f}  "
            lines.append(line + _printable(", ".join(r.nodes)))
        lines.append(f"{'':>3}  {'total':<{w}}  {'':<{kw}}  {self.total_ticks:>12}  "
                     f"{amount(self.total_ticks)}  {'':>6}  100.0%")
        return "\n".join(lines)

    __str__ = table


class Executor:
    """sess.executor: set inputs, run, read outputs, benchmark, profile."""

    def __init__(self, session):
        self.sess = session
        self.last_run_ticks: int | None = None

    # -- tensors ----------------------------------------------------------------------
    def _input(self, key):
        info = self.sess.info()
        if isinstance(key, int):
            if not 0 <= key < len(info.inputs):
                raise MtvmError(f"input index {key} out of range: the model has "
                                f"{len(info.inputs)} input(s)")
            return info.inputs[key]
        for t in info.inputs:
            if t.name == key:
                return t
        raise MtvmError(f"the model has no input {key!r}; its inputs are "
                        + ", ".join(f"{t.name} {_fmt_shape(t.dtype, t.shape)}"
                                    for t in info.inputs))

    def check_input(self, t, array) -> np.ndarray:
        a = np.asarray(array)
        want = np.dtype(t.dtype)
        if tuple(a.shape) != tuple(t.shape):
            # Same elements in the same order, up to dims of size 1 (a 0-d
            # scalar for [1], [1] for a 0-d tensor, [3, 16] for [1, 3, 16]),
            # as run_host; other shapes (a transposed layout) are refused.
            if a.size == int(np.prod(t.shape, dtype=np.int64)) and \
                    [d for d in a.shape if d != 1] == [d for d in t.shape if d != 1]:
                a = a.reshape(t.shape)
        if tuple(a.shape) != tuple(t.shape):
            raise MtvmError(f"input \"{t.name}\": expected {_fmt_shape(want, t.shape)}, got "
                            f"{_fmt_shape(a.dtype, a.shape)} (shape mismatch)")
        if a.dtype != want:
            fits = a.dtype.kind == want.kind and np.can_cast(a.dtype, want, "same_kind")
            if fits and want.kind in "iu" and a.size:
                fits = np.iinfo(want).min <= a.min() and a.max() <= np.iinfo(want).max
            if not fits:
                raise MtvmError(f"input \"{t.name}\": expected {_fmt_shape(want, t.shape)}, got "
                                f"{_fmt_shape(a.dtype, a.shape)} (dtype mismatch)")
            a = a.astype(want)
        return np.ascontiguousarray(a).astype(want.newbyteorder("<"), copy=False)

    def set_input(self, key, array) -> None:
        t = self._input(key)
        data = self.check_input(t, array).tobytes()
        cap = self.sess.max_packet_bytes - P.REQUEST_HEADER_BYTES - 10
        off, bad = 0, 0
        while True:
            # Each chunk carries a CRC-32 of index|offset|data that the device
            # checks before storing it; the chunk size shrinks on a noisy line.
            def body(n, off=off):
                part = data[off:off + n]
                head = struct.pack("<HI", t.index, off)
                return head + struct.pack("<I", zlib.crc32(part, zlib.crc32(head))) + part, \
                    len(part)
            try:
                _, used = self._chunk_request(P.MsgType.WRITE_INPUT, body, cap)
            except DeviceError as e:
                if e.code != P.Status.BAD_DATA_CRC:
                    raise
                bad = self._bad_data(bad, f"input {t.name}", off)
                continue
            bad = 0
            off += used
            self._progress(off, len(data), f"input {t.name}")
            if off >= len(data):
                break

    def _chunk_request(self, msg, build, cap):
        """One chunk of a tensor transfer: build(n) -> (request body, bytes of
        data). While the chunk can still shrink, a chunk that gets no reply in
        2 attempts is sent again half as big (a new request); the last size
        gets the session's full retries. -> (reply body, bytes of data)."""
        while True:
            n = self.sess.chunk_limit(cap)
            body, used = build(n)
            last = n <= self.sess.MIN_CHUNK_BYTES
            resends = self.sess.stats["resends"]
            try:
                reply = self.sess.request(msg, body, attempts=None if last else 2)
            except SessionTimeout:
                if last:
                    raise
                self.sess.chunk_done(cap, used, False)
                continue
            self.sess.chunk_done(cap, used, self.sess.stats["resends"] == resends)
            return reply, used

    def _bad_data(self, bad: int, what: str, off: int) -> int:
        """A chunk whose CRC-32 failed: count it, shrink the chunk size, retry
        (a new request) up to sess.retries times in a row."""
        self.sess.stats["bad_data"] += 1
        self.sess.chunk_done(None, None, False)
        if bad >= self.sess.retries:
            raise SessionError(f"{what}: the chunk at byte {off} failed its CRC-32 "
                               f"{bad + 1} times in a row on {self.sess.transport.name}; "
                               "the link is too noisy")
        return bad + 1

    def get_output(self, key) -> np.ndarray:
        info = self.sess.info()
        if isinstance(key, int):
            t = info.outputs[key]
        else:
            matches = [o for o in info.outputs if o.name == key]
            if not matches:
                raise MtvmError(f"the model has no output {key!r}")
            t = matches[0]
        cap = self.sess.max_packet_bytes - P.REPLY_HEADER_BYTES - 4
        parts, off, bad = [], 0, 0
        while off < t.size_bytes:
            # The device sends a CRC-32 of index|offset|data with each chunk.
            def ask(n, off=off):
                n = min(n, t.size_bytes - off)
                return struct.pack("<HII", t.index, off, n), n
            body, n = self._chunk_request(P.MsgType.READ_OUTPUT, ask, cap)
            head = struct.pack("<HI", t.index, off)
            if len(body) != 4 + n or \
                    zlib.crc32(body[4:], zlib.crc32(head)) != struct.unpack_from("<I", body)[0]:
                bad = self._bad_data(bad, f"output {t.name}", off)
                continue
            bad = 0
            parts.append(body[4:])
            off += n
            self._progress(off, t.size_bytes, f"output {t.name}")
        return np.frombuffer(b"".join(parts), np.dtype(t.dtype).newbyteorder("<")) \
            .astype(t.dtype).reshape(t.shape)

    def _progress(self, done, total, what):
        if self.sess.progress is not None:
            self.sess.progress(done, total, what)

    # -- runs ---------------------------------------------------------------------------
    def run(self, inputs=None, float_io: bool = False) -> dict:
        """inputs: {name: array} or [arrays] in input order (or None: use what is
        on the device). Returns {output name: array}. With float_io, float inputs
        of a quantized model are quantized and its integer outputs dequantized
        with each tensor's scale and zero point (tensors without them pass as is)."""
        info = self.sess.info()
        if inputs is not None:
            if isinstance(inputs, dict):
                names = [t.name for t in info.inputs]
                unknown = [k for k in inputs if k not in names]
                if unknown:
                    raise MtvmError(f"unknown input(s) {unknown}; the model takes "
                                    + ", ".join(f"{t.name} {_fmt_shape(t.dtype, t.shape)}"
                                                for t in info.inputs))
                missing = [k for k in names if k not in inputs]
                if missing:
                    raise MtvmError(f"missing input(s) {missing}")
                items = [(k, inputs[k]) for k in names]
            else:
                arrays = list(inputs)
                if len(arrays) != len(info.inputs):
                    raise MtvmError(f"the model takes {len(info.inputs)} input(s), "
                                    f"got {len(arrays)}")
                items = list(enumerate(arrays))
            if float_io:
                items = [(k, self._quantize(self._input(k), a)) for k, a in items]
            checked = [(k, self.check_input(self._input(k), a)) for k, a in items]
            for k, a in checked:
                self.set_input(k, a)
        self.run_only()
        outs = {t.name: self.get_output(t.index) for t in info.outputs}
        if float_io:
            outs = {t.name: quant_io.dequantize(outs[t.name], t.quantization)
                    if quant_io.is_quantized(t) else outs[t.name] for t in info.outputs}
        return outs

    def _quantize(self, t, array):
        if not quant_io.is_quantized(t):
            return array
        return quant_io.quantize(array, t.quantization, t.dtype, t.name)

    def run_only(self) -> int:
        """RUN on the device's current inputs; returns the run's ticks."""
        body = self.sess.request(P.MsgType.RUN, timeout=self.sess.attempt_wait(1),
                                 busy_wait=self.sess.run_wait(1))
        ticks, _status = struct.unpack_from("<Qi", body)
        self.last_run_ticks = ticks
        tps = self.sess.info().ticks_per_second
        if tps:
            self.sess._run_seconds = ticks / tps
        return ticks

    def time(self, number: int = 1) -> float:
        """Seconds per inference, device-timed over `number` back-to-back runs."""
        body = self.sess.request(P.MsgType.TIME, struct.pack("<I", number),
                                 timeout=self.sess.attempt_wait(number),
                                 busy_wait=self.sess.run_wait(number))
        n, total, _status = struct.unpack_from("<IQi", body)
        tps = self.sess.info().ticks_per_second
        per = total / n / tps
        self.sess._run_seconds = per
        return per

    CHUNK_SECONDS = 0.5

    def _time_ticks(self, number: int) -> tuple[int, int]:
        """One TIME request: (runs, total device ticks)."""
        body = self.sess.request(P.MsgType.TIME, struct.pack("<I", number),
                                 timeout=self.sess.attempt_wait(number),
                                 busy_wait=self.sess.run_wait(number))
        n, total, _status = struct.unpack_from("<IQi", body)
        tps = self.sess.info().ticks_per_second
        if n and tps:
            self.sess._run_seconds = total / n / tps
        return n, total

    def benchmark(self, number: int = 10, repeat: int = 3, warmup: int = 1) -> BenchmarkResult:
        """Seconds per inference, device-timed: `repeat` times `number` back-to-back
        runs (after `warmup` runs). Each repeat's runs go to the device in chunks
        of about half a second of wall clock, so a progress bar moves (on a
        terminal) and an interrupt lands between chunks. The device times only
        its runs, so a repeat's figure (its chunks' ticks summed, over
        `number`) is the one a single TIME request of `number` runs gives."""
        if number < 1 or repeat < 1:
            raise MtvmError("benchmark: number and repeat must be >= 1")
        tps = self.sess.info().ticks_per_second
        wall_per_run = None
        if warmup:
            t0 = _time.monotonic()
            self._time_ticks(warmup)
            wall_per_run = (_time.monotonic() - t0) / warmup
        per = []
        with _progress.bar(number * repeat, f"benchmark {repeat} x {number}", unit="run") as bar:
            for _ in range(repeat):
                done = ticks = 0
                while done < number:
                    chunk = number - done
                    if wall_per_run is None:
                        chunk = 1
                    elif wall_per_run > 0:
                        chunk = max(1, min(chunk, int(self.CHUNK_SECONDS / wall_per_run)))
                    t0 = _time.monotonic()
                    n, t = self._time_ticks(chunk)
                    wall_per_run = (_time.monotonic() - t0) / max(n, 1)
                    done += n
                    ticks += t
                    bar.update(n)
                    if n == 0:
                        raise MtvmError(f"benchmark: the device ran 0 of {chunk} runs")
                per.append(ticks / done / tps)
        return BenchmarkResult(per, number, tps)

    def _profile_once(self, warmup: int = 0) -> list[int]:
        ticks, start, total = [], 0, None
        runs = 1 + warmup
        while total is None or start < total:
            body = self.sess.request(P.MsgType.PROFILE,
                                     struct.pack("<BH", runs if start == 0 else 0, start),
                                     timeout=self.sess.attempt_wait(runs) if start == 0 else None,
                                     busy_wait=self.sess.run_wait(runs))
            total, s0, count = struct.unpack_from("<HHH", body)
            ticks += list(struct.unpack_from(f"<{count}Q", body, 6))
            start = s0 + count
            if count == 0:
                break
        return ticks

    def profile(self, runs: int = 10, warmup: int = 0) -> ProfileResult:
        """Per-kernel device ticks: the median of `runs` profiled runs (the model
        must be compiled with profiling), each kernel with the ONNX node(s) it
        computes (from metadata.json). warmup: runs on the device right before
        each profiled one, so that a device with caches (a host, a Cortex-M7) is
        measured warm, as in a loop of inferences, not after the round trip to
        the host; nothing to warm under an emulator's instruction count."""
        info = self.sess.info()
        if not info.profiling:
            raise MtvmError("this build was not compiled with profiling; regenerate the "
                            "project with `mtvm project generate MODEL -o DIR --profile` "
                            "(from Python: mtvm.project.generate(..., profile=True))")
        if runs < 1:
            raise MtvmError("profile: runs must be >= 1")
        if not 0 <= warmup <= 254:
            raise MtvmError("profile: warmup must be 0..254 runs")
        per_run = []
        with _progress.bar(runs, "profile", unit="run") as bar:
            for _ in range(runs):
                per_run.append(self._profile_once(warmup))
                bar.update(1)
        kernels = self.sess.kernels()
        ops = {}
        md = self.sess.metadata
        if md:
            ops = {op["function"]: op for op in md.get("operators", [])}
        tps = info.ticks_per_second
        n_k = min(len(t) for t in per_run)
        med = [statistics.median_high(t[i] for t in per_run) for i in range(n_k)]
        tot = sum(med) or 1
        rows = []
        for i, t in enumerate(med):
            name, macs = kernels[i] if i < len(kernels) else (f"kernel{i}", 0)
            op = ops.get(name, {})
            kind = op.get("kind") or _kind_from_name(name)
            runs_i = [r[i] for r in per_run]
            rows.append(ProfileRow(i, name, kind, t, t / tps if tps else 0.0, t / tot, macs,
                                   list(op.get("nodes", [])), min(runs_i), max(runs_i)))
        return ProfileResult(rows, tps, runs)


def _kind_from_name(name: str) -> str:
    # tvmgen_<mod>_<NNN>_<op>[_<op>...]: the ops after the index
    parts = name.split("_")
    for i, p in enumerate(parts):
        if len(p) == 3 and p.isdigit():
            return "+".join(parts[i + 1:])
    return ""
