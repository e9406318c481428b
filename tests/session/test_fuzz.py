"""Property-based fuzzing of the C server built with ASan/UBSan: random bytes
and random well-framed requests never crash it, and it keeps answering."""
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mtvm
from mtvm.session.framing import encode
from mtvm.session.transport import SubprocessTransport

from session_helpers import asan_server, server_project  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def fuzz_session(asan_server):
    t = SubprocessTransport([asan_server])
    s = mtvm.Session(t, timeout=2.0, retries=2)
    yield s, t
    alive = t.proc.poll() is None
    s.close()
    errors = [ln for ln in t.stderr_lines if "runtime error" in ln or "Sanitizer" in ln]
    assert alive and not errors, "\n".join(t.stderr_lines[-30:])


def request(msg, seq, body):
    if msg == 0x05 and len(body) >= 4:             # TIME: keep the run count small
        body = struct.pack("<I", struct.unpack_from("<I", body)[0] % 50) + body[4:]
    return encode(bytes([msg, 1]) + struct.pack("<H", seq) + body)


raw_bytes = st.binary(min_size=1, max_size=600)
# Bytes rich in the framing's special values.
special = st.lists(st.sampled_from([0xFF, 0xFD, 0xFE, 0x00, 0x01, 0x7F]), max_size=200).map(
    bytes)
framed = st.builds(request, st.integers(0, 12), st.integers(0, 0xFFFF),
                   st.binary(max_size=120))
framed_junk = st.builds(lambda b: encode(b), st.binary(max_size=80))
chunks = st.lists(st.one_of(raw_bytes, special, framed, framed_junk), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(chunks)
def test_server_survives_random_input(fuzz_session, parts):
    sess, t = fuzz_session
    for p in parts:
        t.write(p)
    assert t.proc.poll() is None, "\n".join(t.stderr_lines[-30:])
    sess.unframer = type(sess.unframer)()
    info = sess.connect()                # a fresh handshake always works afterwards
    assert info.model_name == "sensor_mlp"
    assert sess.echo(b"\xff\xfdalive") == b"\xff\xfdalive"
