"""Python framing against the shared golden vectors (the C test reads the
same file), plus properties: round trips through noise and arbitrary splits."""
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from mtvm.session.framing import BAD_CRC, PACKET, TOO_LARGE, Unframer, crc16, decode_all, encode

VECTORS = os.path.join(os.path.dirname(__file__), "..", "runtime", "framing_vectors.txt")


def unhex(s):
    return b"" if s == "-" else bytes.fromhex(s)


def vectors():
    with open(VECTORS) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                yield line.split()


def test_golden_vector_one():
    assert encode(b"one").hex(" ") == "ff fd 03 00 00 00 6f 6e 65 58 f4"


def test_crc_check_value():
    assert crc16(b"123456789") == 0x29B1          # CRC-16/CCITT-FALSE


def test_vectors():
    n = 0
    for kind, name, a, b in vectors():
        n += 1
        if kind == "E":
            payload, wire = unhex(a), unhex(b)
            assert encode(payload) == wire, name
            assert decode_all(wire) == [payload], name
        else:
            want = [] if b == "none" else [unhex(p) for p in b.split(",")]
            assert decode_all(unhex(a)) == want, name
    assert n >= 20


def test_bad_crc_and_too_large_events():
    w = bytearray(encode(b"hello"))
    w[-1] ^= 1
    assert Unframer().feed(bytes(w)) == [(BAD_CRC, b"hello")]
    assert Unframer(max_payload=2).feed(encode(b"hello")) == [(TOO_LARGE, b"he")]


noise = st.binary(max_size=20).map(lambda b: b.replace(b"\xff", b""))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(noise, st.binary(max_size=300)), max_size=5), st.data())
def test_round_trip_through_noise_and_splits(items, data):
    wire = b"".join(n + encode(p) for n, p in items)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    u, got, prev = Unframer(), [], 0
    for c in cuts + [len(wire)]:
        got += [p for ev, p in u.feed(wire[prev:c]) if ev == PACKET]
        prev = c
    assert got == [p for _, p in items]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=50))
def test_after_any_garbage_a_retry_decodes(garbage, payload):
    """Whatever came before (even half a packet), at most one packet is lost:
    a resent packet always decodes."""
    evs = Unframer().feed(garbage + encode(payload) + encode(payload))
    assert (PACKET, payload) in evs


def test_half_escape_eats_one_start():
    # inside a packet, a dangling FF makes the next FF FD read as data FF + FD:
    # that packet is lost (the client's retry recovers), the next one decodes.
    garbage = b"\xff\xfd\x10\x00\x00\x00ab\xff"
    evs = Unframer().feed(garbage + encode(b"p1") + encode(b"p2"))
    assert [p for ev, p in evs if ev == PACKET] == [b"p2"]
