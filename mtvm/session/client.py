"""The host side of a session: requests with sequence numbers, timeouts,
retries and reset detection over any Transport (see docs/runtime.md)."""
from __future__ import annotations

import logging
import random
import struct
import time
from dataclasses import dataclass, field

from . import protocol as P
from . import protocol_table as T
from .errors import DeviceError, DeviceReset, SessionError, SessionTimeout, TransportClosed
from .framing import BAD_CRC, PACKET, TOO_LARGE, Unframer, encode

log = logging.getLogger("mtvm.session")
device_log = logging.getLogger("mtvm.device")
wire_log = logging.getLogger("mtvm.wire")     # DEBUG: a hex log of every byte on the wire
PAD = bytes(T.PAD_BYTES)          # zero bytes after every packet (see protocol_table)


@dataclass
class TensorInfo:
    index: int
    name: str
    dtype: str
    shape: tuple
    size_bytes: int
    is_output: bool
    quantization: dict | None = None   # scale/zero_point/axis, from metadata.json when known

    def __str__(self):
        q = ""
        if self.quantization:
            q = (f", scale {self.quantization['scale'][0]:.6g} zero point "
                 f"{self.quantization['zero_point'][0]}")
        return f"{self.name}: {self.dtype}{list(self.shape)} ({self.size_bytes} bytes{q})"


@dataclass
class DeviceInfo:
    protocol_version: int
    runtime_version: str
    board: str
    model_name: str
    module_name: str
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    num_kernels: int = 0
    profiling: bool = False
    max_packet_bytes: int = 0
    workspace_bytes: int = 0
    ticks_per_second: int = 0

    def __str__(self):
        lines = [f"model {self.model_name} (module {self.module_name}) on board {self.board}",
                 f"runtime {self.runtime_version}, protocol {self.protocol_version}, "
                 f"max packet {self.max_packet_bytes} B, timer {self.ticks_per_second} Hz",
                 f"workspace {self.workspace_bytes} B, {self.num_kernels} kernels"
                 + (", profiling build" if self.profiling else "")]
        lines += [f"  input  {t}" for t in self.inputs]
        lines += [f"  output {t}" for t in self.outputs]
        return "\n".join(lines)

    def __getitem__(self, key):          # dict-style access too: info["board"]
        return getattr(self, key)


def _read_str(body: bytes, pos: int) -> tuple[str, int]:
    n = body[pos]
    return body[pos + 1:pos + 1 + n].decode(errors="replace"), pos + 1 + n


def _msg_name(msg: int) -> str:
    try:
        return P.MsgType(msg).name
    except ValueError:
        return f"request 0x{int(msg):02x}"


# _wait's answer when the request or its reply arrived damaged (resend at once)
_DAMAGED = object()


class Session:
    """A connection to a device running the mtvm RPC server.

    timeout, retries: a request gets (retries + 1) x timeout seconds of wall
    clock, whatever arrives. Within that, each try waits a few round trips as
    measured on this link (at most `timeout`) before resending the same seq, and
    a request or reply that arrived damaged is resent at once -- so a noisy
    line slows a session down instead of failing it. run_timeout: the first
    RUN/TIME wait (later ones adapt to the measured run time).
    """

    def __init__(self, transport, timeout: float = 1.0, retries: int = 4,
                 run_timeout: float = 60.0, metadata: dict | None = None,
                 connect: bool = True, progress=None):
        from .executor import Executor
        self.transport = transport
        self.timeout = timeout
        self.retries = retries
        self.run_timeout = run_timeout
        self.metadata = metadata           # the model's metadata.json, if known (op kinds)
        self.progress = progress           # progress(done, total, what) for long transfers
        self.unframer = Unframer()
        self.seq = random.randrange(1, 0xFFFF)
        self.nonce: int | None = None
        self._info: DeviceInfo | None = None
        self._kernels = None
        # "new": handshake on the next call; "ok"; "check": a request timed out,
        # the next call first checks the device's nonce; "reset": the device
        # rebooted, every call raises DeviceReset until reconnect().
        self._state = "new"
        self._reset_message = ""
        self._old_nonces: set = set()
        self._run_seconds: float | None = None
        # Seconds per byte on the wire (the reply time of requests answered at the first
        # try, over their bytes plus a fixed cost): sets how long a resend waits.
        self._seconds_per_byte: float | None = None
        self.chunk_bytes: int | None = None     # tensor chunk size now (None: the largest)
        self._chunk_streak = 0
        self._busy_until = None
        self.stats = {"requests": 0, "resends": 0, "bad_packets": 0, "stale": 0, "busy": 0,
                      "bad_data": 0, "cancels": 0, "naks": 0}
        self.executor = Executor(self)
        if connect:
            self.connect()

    # -- lifecycle ---------------------------------------------------------------
    def connect(self) -> DeviceInfo:
        """Handshake: assign a fresh nonce, read the device's info. The only
        place a session takes on a device that rebooted (see reconnect)."""
        if self.nonce is not None:
            self._old_nonces.add(self.nonce)
        self.nonce = None
        self._state = "new"
        self.unframer = Unframer()
        token = random.randrange(1, 1 << 32)
        try:
            body = self._request(P.MsgType.INFO, struct.pack("<HI", 0, token),
                                 check_nonce=False)
        except DeviceError as e:
            if e.code == P.Status.BAD_VERSION:
                raise SessionError(f"the device on {self.transport.name} speaks another mtvm "
                                   f"protocol than this mtvm ({P.PROTOCOL_VERSION}): "
                                   "regenerate and rebuild its project") from None
            raise
        self.nonce = token
        info = self._parse_summary(body)
        if info.protocol_version != P.PROTOCOL_VERSION:
            raise SessionError(f"the device on {self.transport.name} speaks mtvm protocol "
                               f"{info.protocol_version}, this mtvm speaks "
                               f"{P.PROTOCOL_VERSION}: regenerate and rebuild its project")
        self._state = "ok"
        self._info = info
        self.chunk_bytes = None
        for i in range(sum(info._counts)):
            t = self._parse_tensor(self.request(P.MsgType.INFO, struct.pack("<H", 1 + i)))
            (info.outputs if t.is_output else info.inputs).append(t)
        for kind, lst in (("inputs", info.inputs), ("outputs", info.outputs)):
            known = {m["name"]: m for m in (self.metadata or {}).get(kind, [])}
            for k, t in enumerate(lst):
                t.index = k
                t.quantization = known.get(t.name, {}).get("quantization")
        self._kernels = None
        return info

    def reconnect(self) -> DeviceInfo:
        """Takes on the device as it is now, after a DeviceReset (its inputs
        are zeroed: write them again). Until this is called every request of
        a session whose device rebooted raises DeviceReset."""
        return self.connect()

    def _ready(self) -> None:
        """Before a request: handshake, or (after a timeout) check that the
        device is the one this session set up; never adopts a new nonce."""
        if self._state == "reset":
            raise DeviceReset(self._reset_message)
        if self._state == "new":
            self.connect()
        elif self._state == "check":
            self._request(P.MsgType.INFO, struct.pack("<H", 0))     # DeviceReset if rebooted
            self._state = "ok"

    def close(self) -> None:
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- info ----------------------------------------------------------------------
    def info(self) -> DeviceInfo:
        if self._state != "ok" or self._info is None:
            self._ready()
        return self._info

    def kernels(self) -> list[tuple[str, int]]:
        """[(kernel name, MACs)] in execution order (read from the device once)."""
        if self._kernels is None:
            info = self.info()
            first = 1 + len(info.inputs) + len(info.outputs)
            out = []
            for k in range(info.num_kernels):
                body = self.request(P.MsgType.INFO, struct.pack("<H", first + k))
                macs = struct.unpack_from("<Q", body)[0]
                name, _ = _read_str(body, 8)
                out.append((name, macs))
            self._kernels = out
        return self._kernels

    def echo(self, data: bytes) -> bytes:
        return self.request(P.MsgType.ECHO, bytes(data))

    def reset(self) -> None:
        """Soft reset of the device runtime: zeroes tensors, keeps this session."""
        self.request(P.MsgType.RESET, struct.pack("<I", self.nonce or 0))

    @staticmethod
    def _parse_summary(body: bytes) -> DeviceInfo:
        (proto, n_in, n_out, n_k, prof, _, max_packet, ws, tps) = struct.unpack_from(
            "<HHHHBBIIQ", body)
        pos = 26
        rt, pos = _read_str(body, pos)
        board, pos = _read_str(body, pos)
        model, pos = _read_str(body, pos)
        module, pos = _read_str(body, pos)
        info = DeviceInfo(proto, rt, board, model, module, num_kernels=n_k,
                          profiling=bool(prof), max_packet_bytes=max_packet,
                          workspace_bytes=ws, ticks_per_second=tps)
        info._counts = (n_in, n_out)
        info.inputs, info.outputs = [], []
        return info

    @staticmethod
    def _parse_tensor(body: bytes) -> TensorInfo:
        is_out, dtype, ndim, _, size = struct.unpack_from("<BBBBI", body)
        dims = struct.unpack_from(f"<{ndim}I", body, 8)
        name, _ = _read_str(body, 8 + 4 * ndim)
        return TensorInfo(0, name, P.DTYPE_NAMES.get(dtype, f"dtype{dtype}"), tuple(dims),
                          size, bool(is_out))

    # -- requests ------------------------------------------------------------------
    @property
    def max_packet_bytes(self) -> int:
        return self._info.max_packet_bytes if self._info else P.MIN_PACKET_BYTES

    def request(self, msg: int, body: bytes = b"", timeout: float | None = None,
                busy_wait: float | None = None, attempts: int | None = None) -> bytes:
        """Sends one request (retrying as needed); returns the reply body.
        timeout: wait per attempt; busy_wait: how long to wait once the device
        said BUSY (it is executing the request); attempts: sends before
        SessionTimeout (default retries + 1; a smaller number is a partial try
        that the caller retries itself, e.g. with a smaller chunk). Raises
        DeviceError on an error status, DeviceReset, SessionTimeout.

        If a request that runs the model (RUN, TIME, PROFILE) ends in any
        other way than a reply -- KeyboardInterrupt, a timeout after its
        BUSY -- the device is told to CANCEL and awaited idle before the exception goes on."""
        if self._state != "ok":
            self._ready()
        if int(msg) not in (P.MsgType.RUN, P.MsgType.TIME, P.MsgType.PROFILE):
            return self._request(msg, body, timeout=timeout, busy_wait=busy_wait,
                                 attempts=attempts, partial=attempts is not None)
        try:
            return self._request(msg, body, timeout=timeout, busy_wait=busy_wait)
        except (DeviceError, DeviceReset, TransportClosed):
            raise
        except SessionError:
            if self._busy_until is not None:     # it said BUSY: it may still be running
                self.cancel()
            raise
        except BaseException:                    # KeyboardInterrupt and the like
            self.cancel()
            raise

    CANCEL_WAIT = 5.0

    def cancel(self, wait: float | None = None) -> bool:
        """Stops what the device is running (a TIME between two runs) and waits
        until it is idle (its CANCEL reply), at most `wait` seconds (default
        CANCEL_WAIT). True once the device answered. Interrupting this
        (a second Ctrl-C) gives up waiting."""
        wait = self.CANCEL_WAIT if wait is None else wait
        self.stats["cancels"] += 1
        seq = self._next_seq()
        wire = encode(P.pack_request(P.MsgType.CANCEL, seq)) + PAD
        end = time.monotonic() + wait
        try:
            while time.monotonic() < end:
                self.transport.write(wire)
                attempt_end = min(end, time.monotonic() + self.timeout)
                try:
                    reply = self._wait(P.MsgType.CANCEL, seq, attempt_end, False)
                except DeviceReset:
                    return False
                if reply is not None:
                    return True
        except (SessionError, OSError) as e:
            log.debug("cancel failed: %s", e)
            return False
        log.warning("the device on %s did not confirm a CANCEL within %.1f s",
                    self.transport.name, wait)
        if self._state == "ok":
            self._state = "check"
        return False

    # -- tensor chunk size: halves when a transfer needed a resend, doubles back
    # after CHUNK_GROW_AFTER clean ones (on a noisy line a big packet almost
    # never arrives intact; small ones do).
    MIN_CHUNK_BYTES = 32
    CHUNK_GROW_AFTER = 8

    def chunk_limit(self, cap: int) -> int:
        """Bytes of tensor data for the next WRITE_INPUT/READ_OUTPUT chunk."""
        return cap if self.chunk_bytes is None else max(1, min(cap, self.chunk_bytes))

    def chunk_done(self, cap: int | None, used: int | None, clean: bool) -> None:
        """After a chunk: clean (no resend, data CRC good) or not."""
        if not clean:
            now = used if used is not None else (self.chunk_bytes or self.max_packet_bytes)
            self.chunk_bytes = max(self.MIN_CHUNK_BYTES, now // 2)
            self._chunk_streak = 0
            return
        self._chunk_streak += 1
        if self.chunk_bytes is not None and self._chunk_streak >= self.CHUNK_GROW_AFTER:
            self._chunk_streak = 0
            self.chunk_bytes *= 2
            if cap is not None and self.chunk_bytes >= cap:
                self.chunk_bytes = None

    def _next_seq(self) -> int:
        self.seq = self.seq % 0xFFFF + 1          # 1..65535, never 0 (LOG uses 0)
        return self.seq

    def _request(self, msg, body: bytes, timeout: float | None = None,
                 check_nonce: bool = True, busy_wait: float | None = None,
                 attempts: int | None = None, partial: bool = False) -> bytes:
        seq = self._next_seq()
        payload = P.pack_request(msg, seq, body)
        if self._info is not None and len(payload) > self._info.max_packet_bytes:
            raise SessionError(f"{_msg_name(msg)} request of {len(payload)} bytes exceeds "
                               f"the device's max packet size {self._info.max_packet_bytes}")
        wire = encode(payload) + PAD
        adaptive = timeout is None
        budget = (self.retries + 1 if attempts is None else attempts) * \
            (self.timeout if adaptive else timeout)
        if adaptive:
            # Each try waits a few round trips as measured on this link (at most
            # self.timeout), and tries go on until the wall-clock budget is spent: a
            # lost packet on a noisy line costs milliseconds, not a whole timeout.
            reply_bytes = self.max_packet_bytes if msg == P.MsgType.READ_OUTPUT else len(wire)
            timeout = self._try_timeout(len(wire) + reply_bytes)
        attempts = self.retries + 1 if attempts is None else attempts
        if adaptive and not partial:
            attempts = 1 << 30                      # bounded by the budget alone
        name = _msg_name(msg)
        self.stats["requests"] += 1
        t0 = time.monotonic()
        # A wall-clock budget, whatever arrives: (retries + 1) x timeout, moved
        # only by a BUSY for this request (the device is running it).
        self._busy_until = None
        budget_end = t0 + budget
        attempt = sent = 0
        while attempt < attempts and time.monotonic() < budget_end:
            if sent:
                self.stats["resends"] += 1
                log.debug("resending %s seq %d (attempt %d)", name, seq, attempt + 1)
            sent += 1
            attempt += 1
            if wire_log.isEnabledFor(logging.DEBUG):
                wire_log.debug("tx %s", wire.hex(" "))
            self.transport.write(wire)
            end = time.monotonic() + timeout
            if self._busy_until is None:
                end = min(end, budget_end)
            elif busy_wait is not None:     # running on the device: ask again now and then
                end = max(end, self._busy_try_end(busy_wait))
            reply = self._wait(msg, seq, end, check_nonce, busy_wait)
            if self._busy_until is not None:
                budget_end = max(budget_end, self._busy_until)
            if reply is _DAMAGED:
                # A damaged request (NAK) or reply (bad CRC) is known at once: resending it
                # costs no timeout, so on a noisy line it does not use up an attempt -- the
                # wall-clock budget bounds it. A partial try (a chunk that can still shrink)
                # counts it, so that the caller shrinks the chunk instead.
                if not partial:
                    attempt -= 1
                continue
            if reply is None:
                if self._busy_until is not None and time.monotonic() < self._busy_until:
                    attempt -= 1        # still running on the device: not a failed try
                continue
            status, rbody = reply
            if sent == 1 and self._busy_until is None:
                self._measure(time.monotonic() - t0, len(wire) + len(rbody))
            if status != P.Status.OK:
                raise DeviceError(status, f"{P.status_message(status)} (request {name})")
            return rbody
        if self._state == "ok" and not partial:
            self._state = "check"
        raise SessionTimeout(
            f"no valid reply to {name} from {self.transport.name} after "
            f"{sent} attempt(s) in {time.monotonic() - t0:.1f} s "
            f"(timeout {timeout:g} s each); is the device running and the port right?")

    # Tries of a request while the device runs it (after its BUSY), over busy_wait.
    BUSY_TRIES = 8

    def _busy_try_end(self, busy_wait: float) -> float:
        """When a try made now, while the device runs the request, stops waiting:
        busy_wait / BUSY_TRIES ahead, not past the request's busy budget."""
        return min(self._busy_until, time.monotonic() + busy_wait / self.BUSY_TRIES)

    # a request's fixed cost (the device's turnaround, the OS), counted as this many bytes
    _FIXED_BYTES = 256

    def _measure(self, seconds: float, nbytes: int) -> None:
        """Learn the link's speed from a reply that came at the first try."""
        spb = seconds / (nbytes + self._FIXED_BYTES)
        old = self._seconds_per_byte
        # a slow reply counts at once (better to wait too long than resend too early)
        self._seconds_per_byte = spb if old is None or spb > old else 0.9 * old + 0.1 * spb

    def _try_timeout(self, nbytes: int) -> float:
        """How long one try of a request of about nbytes (request + reply) waits."""
        if self._seconds_per_byte is None:
            return self.timeout
        est = self._seconds_per_byte * (nbytes + self._FIXED_BYTES)
        return min(self.timeout, max(0.02, 8 * est))

    def _wait(self, msg, seq, deadline, check_nonce, busy_wait=None):
        """The (status, body) of the reply to seq, or None to resend. The
        deadline is wall clock: bytes that are not the reply (noise, a debug
        print, the wrong baud rate) do not move it; a BUSY for seq moves the
        request's budget busy_wait seconds ahead (self._busy_until) and this
        try's deadline busy_wait / BUSY_TRIES."""
        want = int(msg) | P.REPLY_FLAG
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            data = self.transport.read(65536, min(left, 0.5))
            if not data:
                continue
            if wire_log.isEnabledFor(logging.DEBUG):
                wire_log.debug("rx %s", data.hex(" "))
            corrupted = False
            result = None
            for ev, payload in self.unframer.feed(data):
                if ev == BAD_CRC:
                    self.stats["bad_packets"] += 1
                    corrupted = True
                    continue
                if ev == TOO_LARGE:
                    self.stats["bad_packets"] += 1
                    continue
                hdr = P.unpack_reply(payload)
                if hdr is None:
                    continue
                rtype, _, rseq, nonce, status, rbody = hdr
                if self.nonce is not None and nonce != self.nonce and (check_nonce or
                                                                       rtype == P.MsgType.LOG):
                    if rseq != seq and nonce in self._old_nonces:
                        self.stats["stale"] += 1        # from before a reconnect
                        continue
                    self._state = "reset"
                    self.unframer = Unframer()
                    self._reset_message = (
                        f"device {self.transport.name} restarted (nonce {nonce:#010x}, "
                        f"expected {self.nonce:#010x}): the inputs written before are lost; "
                        "call reconnect() to go on with it")
                    raise DeviceReset(self._reset_message)
                if rtype == P.MsgType.LOG:
                    self._device_log(rbody)
                elif rtype == P.MsgType.NAK:
                    self.stats["naks"] += 1
                    corrupted = True                    # our request arrived damaged
                elif rtype == P.MsgType.BUSY:
                    if rseq == seq and busy_wait is not None:
                        # The device runs it: the request's budget moves busy_wait
                        # ahead, this try's wait busy_wait / BUSY_TRIES -- a reply
                        # lost after the BUSY (its frame's delimiter dropped on a
                        # noisy line) is asked for again then, not after the whole
                        # busy_wait (60 s before a run was measured); the device
                        # answers a repeated seq from its cache, without running again.
                        self.stats["busy"] += 1
                        self._busy_until = time.monotonic() + busy_wait
                        deadline = max(deadline, self._busy_try_end(busy_wait))
                elif rtype == want and rseq == seq and result is None:
                    result = (status, rbody)
                else:
                    self.stats["stale"] += 1            # a late duplicate of an older reply
            if result is not None:
                return result
            if corrupted:
                return _DAMAGED                          # resend now instead of timing out

    @staticmethod
    def _device_log(body: bytes) -> None:
        if not body:
            return
        level = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING}.get(body[0],
                                                                             logging.ERROR)
        device_log.log(level, "[device] %s", body[1:].decode(errors="replace"))

    # -- model runs (used by the Executor) ------------------------------------------
    def run_wait(self, number: int = 1) -> float:
        """Seconds to wait, after the device said BUSY, for a request that runs
        the model `number` times: run_timeout until a run was measured, then
        4x the expected time plus timeout."""
        if self._run_seconds is None:
            return max(self.run_timeout, self.timeout)
        return max(self.timeout, 4 * self._run_seconds * number + self.timeout)

    def attempt_wait(self, number: int = 1) -> float:
        """Wait per attempt for a model-running request before its BUSY arrives
        (a lost BUSY must not make a long run look like a dead device)."""
        if self._run_seconds is None:
            return self.timeout
        return max(self.timeout, 2 * self._run_seconds * number + self.timeout)
