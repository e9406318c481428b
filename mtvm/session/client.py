"""The host side of a session: requests with sequence numbers, timeouts,
retries and reset detection over any Transport (see docs/runtime.md)."""
from __future__ import annotations

import logging
import random
import struct
import time
from dataclasses import dataclass, field

from . import protocol as P
from .errors import DeviceError, DeviceReset, SessionError, SessionTimeout
from .framing import BAD_CRC, PACKET, TOO_LARGE, Unframer, encode

log = logging.getLogger("mtvm.session")
device_log = logging.getLogger("mtvm.device")
wire_log = logging.getLogger("mtvm.wire")     # DEBUG: a hex log of every byte on the wire


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


class Session:
    """A connection to a device running the mtvm RPC server.

    timeout: seconds to wait for a reply before resending (same seq);
    retries: resends before SessionTimeout; run_timeout: the first RUN/TIME
    wait (later ones adapt to the measured run time).
    """

    MAX_STRETCH = 30.0

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
        self._need_sync = True
        self._run_seconds: float | None = None
        self.stats = {"requests": 0, "resends": 0, "bad_packets": 0, "stale": 0, "busy": 0}
        self.executor = Executor(self)
        if connect:
            self.connect()

    # -- lifecycle ---------------------------------------------------------------
    def connect(self) -> DeviceInfo:
        """Handshake: assign a fresh nonce, read the device's info."""
        self.nonce = None
        token = random.randrange(1, 1 << 32)
        body = self._request(P.MsgType.INFO, struct.pack("<HI", 0, token), check_nonce=False)
        self.nonce = token
        self._need_sync = False
        info = self._parse_summary(body)
        if info.protocol_version != P.PROTOCOL_VERSION:
            self._need_sync = True
            raise SessionError(f"the device on {self.transport.name} speaks mtvm protocol "
                               f"{info.protocol_version}, this mtvm speaks "
                               f"{P.PROTOCOL_VERSION}: regenerate and rebuild its project")
        self._info = info
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

    def close(self) -> None:
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- info ----------------------------------------------------------------------
    def info(self) -> DeviceInfo:
        if self._need_sync or self._info is None:
            self.connect()
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
                busy_wait: float | None = None) -> bytes:
        """Sends one request (retrying as needed); returns the reply body.
        timeout: wait per attempt; busy_wait: how long to wait once the device
        said BUSY (it is executing the request). Raises DeviceError on an
        error status, DeviceReset, SessionTimeout."""
        if self._need_sync:
            self.connect()
        return self._request(msg, body, timeout=timeout, busy_wait=busy_wait)

    def _next_seq(self) -> int:
        self.seq = self.seq % 0xFFFF + 1          # 1..65535, never 0 (LOG uses 0)
        return self.seq

    def _request(self, msg, body: bytes, timeout: float | None = None,
                 check_nonce: bool = True, busy_wait: float | None = None) -> bytes:
        seq = self._next_seq()
        payload = P.pack_request(msg, seq, body)
        if self._info is not None and len(payload) > self._info.max_packet_bytes:
            raise SessionError(f"{_msg_name(msg)} request of {len(payload)} bytes exceeds "
                               f"the device's max packet size {self._info.max_packet_bytes}")
        wire = encode(payload)
        timeout = self.timeout if timeout is None else timeout
        name = _msg_name(msg)
        self.stats["requests"] += 1
        t0 = time.monotonic()
        for attempt in range(self.retries + 1):
            if attempt:
                self.stats["resends"] += 1
                log.debug("resending %s seq %d (attempt %d)", name, seq, attempt + 1)
            if wire_log.isEnabledFor(logging.DEBUG):
                wire_log.debug("tx %s", wire.hex(" "))
            self.transport.write(wire)
            reply = self._wait(msg, seq, time.monotonic() + timeout, check_nonce, timeout,
                               busy_wait)
            if reply is None:
                continue
            status, rbody = reply
            if status != P.Status.OK:
                raise DeviceError(status, f"{P.status_message(status)} (request {name})")
            return rbody
        self._need_sync = True
        raise SessionTimeout(
            f"no valid reply to {name} from {self.transport.name} after "
            f"{self.retries + 1} attempts in {time.monotonic() - t0:.1f} s "
            f"(timeout {timeout:g} s each); is the device running and the port right?")

    def _wait(self, msg, seq, deadline, check_nonce, quiet=None, busy_wait=None):
        """The (status, body) of the reply to seq, or None to resend. While
        bytes are arriving (slow links, big replies) the deadline moves to
        `quiet` seconds after the last byte, up to MAX_STRETCH seconds; a BUSY
        for seq moves it busy_wait seconds ahead."""
        want = int(msg) | P.REPLY_FLAG
        limit = deadline + self.MAX_STRETCH
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            data = self.transport.read(65536, min(left, 0.5))
            if not data:
                continue
            if wire_log.isEnabledFor(logging.DEBUG):
                wire_log.debug("rx %s", data.hex(" "))
            if quiet is not None:
                deadline = max(deadline, min(time.monotonic() + quiet, limit))
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
                    self._need_sync = True
                    self.unframer = Unframer()
                    raise DeviceReset(
                        f"device {self.transport.name} restarted (nonce {nonce:#010x}, "
                        f"expected {self.nonce:#010x}); inputs written before are lost")
                if rtype == P.MsgType.LOG:
                    self._device_log(rbody)
                elif rtype == P.MsgType.BUSY:
                    if rseq == seq and busy_wait is not None:
                        self.stats["busy"] += 1
                        deadline = time.monotonic() + busy_wait
                        limit = deadline + self.MAX_STRETCH
                elif rtype == want and rseq == seq and result is None:
                    result = (status, rbody)
                else:
                    self.stats["stale"] += 1            # a late duplicate of an older reply
            if result is not None:
                return result
            if corrupted:
                return None                              # resend now instead of timing out

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
