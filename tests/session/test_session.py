"""The session API against the real C server in a real process."""
import logging
import struct
import zlib

import numpy as np
import pytest

import mtvm
from mtvm.errors import MtvmError
from mtvm.session import DeviceError, MsgType, Status
from mtvm.session.protocol import pack_request

from session_helpers import EXAMPLE_MODEL, EXAMPLE_NPZ, _quiet, server_project  # noqa: F401


@pytest.fixture
def sess(server_project):
    with server_project.session() as s:
        yield s


def reference():
    with np.load(EXAMPLE_NPZ) as z:
        return z["in_0"], z["out_0"]


def test_info(sess, server_project):
    info = sess.info()
    assert info.model_name == "sensor_mlp" and info.board == "host"
    assert info.module_name == "default"
    assert [(t.name, t.dtype, t.shape) for t in info.inputs] == [("x", "float32", (1, 3, 16))]
    assert [(t.name, t.dtype, t.shape) for t in info.outputs] == [("probs", "float32", (1, 4))]
    assert info.max_packet_bytes == 4096 and info.ticks_per_second == 10**9
    assert info.profiling and info.num_kernels == len(server_project.metadata["operators"])
    assert info.workspace_bytes == server_project.metadata["workspace_bytes"]
    assert info["runtime_version"] == mtvm.session.protocol.RUNTIME_VERSION
    assert "sensor_mlp" in str(info)


def test_run_matches_reference(sess):
    x, ref = reference()
    y = sess.executor.run({"x": x})
    assert list(y) == ["probs"]
    np.testing.assert_allclose(y["probs"], ref, atol=1e-5)
    assert sess.executor.last_run_ticks > 0
    # positional inputs and re-running on the inputs already on the device
    np.testing.assert_allclose(sess.executor.run([x])["probs"], ref, atol=1e-5)
    np.testing.assert_allclose(sess.executor.run()["probs"], ref, atol=1e-5)


def test_float64_input_is_cast(sess):
    x, ref = reference()
    np.testing.assert_allclose(sess.executor.run({"x": x.astype(np.float64)})["probs"], ref,
                               atol=1e-5)


def test_wrong_shape_names_input_and_both_shapes(sess):
    with pytest.raises(MtvmError, match=r'input "x": expected float32\[1, 3, 16\], got '
                                        r'float32\[16, 3\]'):
        sess.executor.run({"x": np.zeros((16, 3), np.float32)})
    with pytest.raises(MtvmError, match=r'got float32\[1, 3, 15\]'):
        sess.executor.run({"x": np.zeros((1, 3, 15), np.float32)})


def test_shapes_that_differ_only_by_dims_of_size_1_are_accepted(sess):
    """As run_host: the same elements in the same order ([3, 16] for [1, 3, 16])."""
    x, ref = reference()
    np.testing.assert_allclose(sess.executor.run({"x": x.reshape(3, 16)})["probs"], ref,
                               atol=1e-5)


def test_wrong_dtype_is_rejected(sess):
    with pytest.raises(MtvmError, match=r'input "x".*got int8\[1, 3, 16\].*dtype'):
        sess.executor.run({"x": np.zeros((1, 3, 16), np.int8)})
    with pytest.raises(MtvmError, match="unknown input"):
        sess.executor.run({"y": np.zeros((1, 3, 16), np.float32)})


def test_echo_binary(sess):
    data = bytes(range(256)) + b"\xff\xfd\xff\xfe\xff"
    assert sess.echo(data) == data
    assert sess.echo(b"") == b""


def test_benchmark_and_profile_are_device_timed(sess):
    x, _ = reference()
    sess.executor.run({"x": x})
    res = sess.executor.benchmark(number=5, repeat=3)
    assert len(res.per_repeat) == 3 and res.min > 0 and res.min <= res.median <= res.max
    assert "median" in str(res)
    prof = sess.executor.profile()
    assert len(prof.rows) == sess.info().num_kernels
    assert all(r.ticks > 0 for r in prof.rows)
    assert abs(sum(r.share for r in prof.rows) - 1) < 1e-9
    assert [r.kind for r in prof.rows][1:] == ["Gemm+Relu", "Gemm", "Softmax"]
    assert any(r.macs > 0 for r in prof.rows)
    assert "total" in prof.table()


def test_device_error_statuses(sess):
    with pytest.raises(DeviceError) as e:
        sess.request(MsgType.READ_OUTPUT, struct.pack("<HII", 7, 0, 4))
    assert e.value.code == Status.BAD_INDEX and "BAD_INDEX" in str(e.value)
    with pytest.raises(DeviceError) as e:
        head = struct.pack("<HI", 0, 190)
        sess.request(MsgType.WRITE_INPUT,
                     head + struct.pack("<I", zlib.crc32(b"12345", zlib.crc32(head))) + b"12345")
    assert e.value.code == Status.OUT_OF_RANGE
    with pytest.raises(DeviceError) as e:      # a data CRC-32 that does not match
        sess.request(MsgType.WRITE_INPUT, struct.pack("<HII", 0, 0, 1234) + b"12345")
    assert e.value.code == Status.BAD_DATA_CRC
    with pytest.raises(DeviceError) as e:
        sess.request(0x33)
    assert e.value.code == Status.UNKNOWN_REQUEST
    with pytest.raises(DeviceError) as e:
        sess.request(MsgType.TIME, struct.pack("<I", 0))
    assert e.value.code == Status.BAD_ARGUMENT
    with pytest.raises(DeviceError) as e:
        sess.request(MsgType.RUN, b"extra")
    assert e.value.code == Status.BAD_LENGTH
    assert sess.echo(b"still fine") == b"still fine"


def test_bad_protocol_version(sess):
    from mtvm.session.framing import encode
    payload = bytearray(pack_request(MsgType.ECHO, 4242, b"v"))
    payload[1] = 9
    sess.transport.write(encode(bytes(payload)))
    st, _ = sess._wait(MsgType.ECHO, 4242, __import__("time").monotonic() + 2, True)
    assert st == Status.BAD_VERSION


def test_reset_zeroes_tensors(sess):
    x, _ = reference()
    sess.executor.run({"x": x})
    sess.reset()
    assert not sess.executor.get_output(0).any()
    assert sess.echo(b"x") == b"x"


def test_device_logs_reach_python_logging(server_project, caplog):
    caplog.set_level(logging.DEBUG, logger="mtvm.device")
    with server_project.session() as s:
        s.echo(b"x")
    assert any("mtvm runtime" in r.getMessage() and "ready" in r.getMessage()
               for r in caplog.records if r.name == "mtvm.device")


def test_chunked_transfer_with_a_64_byte_device(tmp_path):
    """A device announcing 64-byte packets: inputs/outputs/profile go in chunks."""
    board = dict(mtvm.project.load_board("host"), name="host-64", max_packet_bytes=64)
    proj = mtvm.project.generate(EXAMPLE_MODEL, board=board, out_dir=tmp_path / "p",
                                 profile=True, progress=_quiet).build(progress=_quiet)
    x, ref = reference()
    with proj.session() as s:
        assert s.info().max_packet_bytes == 64
        y = s.executor.run({"x": x})
        np.testing.assert_allclose(y["probs"], ref, atol=1e-5)
        assert s.stats["requests"] > 192 // 54       # the input took several WRITE_INPUTs
        assert len(s.executor.profile().rows) == s.info().num_kernels
        with pytest.raises(mtvm.session.SessionError, match="max packet size"):
            s.echo(b"z" * 100)


def test_profile_pages_with_many_kernels(tmp_path):
    """9 kernels at 64-byte packets: PROFILE replies come in pages of 6."""
    import onnx
    from onnx import TensorProto, helper
    names = ["x"] + [f"s{i}" for i in range(9)]
    nodes = [helper.make_node("Softmax", [a], [b], name=f"softmax{i}", axis=-1)
             for i, (a, b) in enumerate(zip(names, names[1:]))]
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 40])],
                          [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [2, 40])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = str(tmp_path / "chain.onnx")
    onnx.save(m, path)
    board = dict(mtvm.project.load_board("host"), name="host-64", max_packet_bytes=64)
    proj = mtvm.project.generate(path, board=board, out_dir=tmp_path / "p", profile=True,
                                 progress=_quiet).build(progress=_quiet)
    x = np.random.default_rng(0).standard_normal((2, 40)).astype(np.float32)
    ref = x
    for _ in range(9):
        e = np.exp(ref - ref.max(-1, keepdims=True))
        ref = e / e.sum(-1, keepdims=True)
    with proj.session() as s:
        np.testing.assert_allclose(s.executor.run({"x": x})["s8"], ref, atol=1e-6)
        prof = s.executor.profile()
        assert len(prof.rows) == 9 and all(r.kind == "Softmax" for r in prof.rows)
        assert [k for k, _ in s.kernels()] == [r.name for r in prof.rows]


def test_scalar_input_and_output(tmp_path):
    """A model with a 0-d input and output: the session takes a 0-d array and
    a one-element array (as run_host does; it used to refuse the latter with
    'expected int64[], got int64[1]') and returns a 0-d array."""
    from onnx import TensorProto, helper, numpy_helper, save
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "three"], ["y"], name="mul")], "scalar",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [])],
        [numpy_helper.from_array(np.array(3, np.int64), "three")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
         str(tmp_path / "scalar.onnx"))
    proj = mtvm.project.generate(str(tmp_path / "scalar.onnx"), board="host",
                                 out_dir=tmp_path / "proj", progress=_quiet)
    proj.build(progress=_quiet)
    with proj.session() as s:
        assert s.info().inputs[0].shape == () and s.info().outputs[0].shape == ()
        for x in (np.array(5), np.array([5]), 5):
            y = s.executor.run({"x": x})["y"]
            assert y.shape == () and y.dtype == np.int64 and int(y) == 15
        with pytest.raises(MtvmError, match=r"expected int64\[\], got int64\[2\]"):
            s.executor.run({"x": np.array([5, 6])})
