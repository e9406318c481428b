"""Packet framing, byte-compatible with microTVM (see docs/runtime.md).

    FF FD | u32 length LE | payload | u16 CRC-16/CCITT-FALSE LE

The CRC covers the escaped bytes from FF FD through the payload; FF is sent as
FF FF after the start; FF FE is a no-op; FF FD always starts a new packet.
"""
from __future__ import annotations

import binascii
import struct

ESCAPE, START, NOP = 0xFF, 0xFD, 0xFE


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF)."""
    return binascii.crc_hqx(data, crc)


def escape(data: bytes) -> bytes:
    return data.replace(b"\xff", b"\xff\xff")


def encode(payload: bytes) -> bytes:
    """One packet on the wire."""
    body = b"\xff\xfd" + escape(struct.pack("<I", len(payload)) + payload)
    return body + escape(struct.pack("<H", crc16(body)))


# Events of the Unframer.
PACKET, BAD_CRC, TOO_LARGE = "packet", "bad_crc", "too_large"


class Unframer:
    """Receiving state machine, the same as c_runtime's. feed(bytes) returns a
    list of (event, payload) where event is PACKET, BAD_CRC or TOO_LARGE
    (payload: the first max_payload bytes)."""

    IDLE, LENGTH, PAYLOAD, CRC = range(4)

    def __init__(self, max_payload: int = 1 << 24):
        self.max_payload = max_payload
        self.state = self.IDLE
        self.escape = False
        self.bad_packets = 0
        self._reset_packet()

    def _reset_packet(self):
        self.length = 0
        self.counter = 0
        self.buf = bytearray()
        self.received = 0
        self.rx_crc = 0
        self.crc = crc16(b"\xff\xfd")

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        events = []
        for b in data:
            ev = self._push(b)
            if ev is not None:
                if ev[0] == BAD_CRC:
                    self.bad_packets += 1
                events.append(ev)
        return events

    def _crc_data(self, b: int) -> None:
        self.crc = crc16(b"\xff\xff" if b == ESCAPE else bytes((b,)), self.crc)

    def _push(self, b: int):
        if not self.escape:
            if b == ESCAPE:
                self.escape = True
                return None
            return self._data(b)
        self.escape = False
        if b == START:
            was = self.state
            self.state = self.LENGTH
            self._reset_packet()
            return (BAD_CRC, b"") if was != self.IDLE else None
        if b == NOP:
            return None
        if b == ESCAPE:
            if self.state == self.IDLE:
                self.escape = True      # noise between packets: the 2nd FF may start FF FD
                return None
            return self._data(b)
        if self.state != self.IDLE:
            self.state = self.IDLE
            return (BAD_CRC, b"")
        return None

    def _data(self, b: int):
        if self.state == self.LENGTH:
            self._crc_data(b)
            self.length |= b << (8 * self.counter)
            self.counter += 1
            if self.counter == 4:
                self.counter = 0
                self.state = self.PAYLOAD if self.length else self.CRC
            return None
        if self.state == self.PAYLOAD:
            self._crc_data(b)
            if self.received < self.max_payload:
                self.buf.append(b)
            self.received += 1
            if self.received == self.length:
                self.state = self.CRC
                self.counter = 0
            return None
        if self.state == self.CRC:
            self.rx_crc |= b << (8 * self.counter)
            self.counter += 1
            if self.counter < 2:
                return None
            self.state = self.IDLE
            if self.rx_crc != self.crc:
                return (BAD_CRC, bytes(self.buf))
            if self.length > self.max_payload:
                return (TOO_LARGE, bytes(self.buf))
            return (PACKET, bytes(self.buf))
        return None


def decode_all(wire: bytes) -> list[bytes]:
    """Payloads of all valid packets in a byte string."""
    return [p for ev, p in Unframer().feed(wire) if ev == PACKET]
