"""bench/bounds.py: the limits of issue 13 read off a run's tables (pure functions)."""
import os
import sys

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))

import bounds  # noqa: E402


def _host(model, ratio, arena=100, lower=100):
    return {"model": model, "ratio": ratio, "arena": arena, "lower_bound": lower}


def test_host_limits_met_and_missed():
    ok = bounds.host_lines([_host("a", 0.5), _host("b", 0.9)], "native")
    assert all(line.startswith("- met") for line in ok), ok
    missed = bounds.host_lines([_host("a", 0.9), _host("b", 1.3)], "AVX2")
    assert "**missed**: host AVX2: geometric mean" in missed[0]
    assert "**missed**: host AVX2: highest b 1.30" in missed[1]
    assert "**missed**" in bounds.host_lines([{"model": "c", "error": "x"}], "native")[0]


def test_host_arena_above_its_bound_is_named():
    line = bounds.arena_lines([_host("a", 0.5), _host("b", 0.5, 200, 100)], "native")[0]
    assert line.startswith("- **missed**") and "b 200 > 100" in line


def _dev(model, per_mac, arena=10, lower=10):
    return {"model": model, "per_mac": per_mac, "arena": arena, "lower_bound": lower}


def test_device_limits_by_kind():
    kinds = {"f": (False, False), "q": (True, False), "r": (False, True), "qr": (True, True)}
    rows = [_dev("f", 2.4), _dev("q", 1.6), _dev("r", 2.9), _dev("qr", 1.8)]
    lines = bounds.device_lines(rows, kinds, "m4")
    text = "\n".join(lines)
    assert "- **missed**: m4: int8 models <= 1.5 instructions/MAC (highest q 1.60)" in text
    assert "- met: m4: float models <= 2.5" in text
    assert "- met: m4: float recurrent models <= 3.0" in text
    # a QDQ model's LSTM is float in the model: the recurrent limit
    assert "- met: m4: int8 with a float recurrent layer models <= 3.0" in text
    assert "above the limit: q 1.60" in text


def test_peer_instructions_and_int8_flash():
    kinds = {"a": (True, False), "b": (False, False), "c": (True, False)}
    rows = [{"model": "a", "mtvm": {"instructions": 1, "model_flash": 106},
             "emx": {"instructions": 5, "model_flash": 100}},
            {"model": "b", "mtvm": {"instructions": 9, "model_flash": 300},
             "emx": {"instructions": 5, "model_flash": 100}},
            {"model": "c", "mtvm": {"instructions": 1, "model_flash": 1},
             "emx": {"error": "failed"}}]
    text = "\n".join(bounds.peer_lines(rows, kinds, "m4"))
    assert "**missed**: m4: fewer instructions than emx-onnx-cgen on all 2 models it " \
           "compiles (not: b)" in text
    assert "**missed**: m4: int8 model flash within 5 % of emx-onnx-cgen's on 1 models " \
           "(highest a 1.06); above: a 1.06" in text       # b is float: no flash limit
    assert "not compared" in text and "c" in text.splitlines()[-1]


def test_model_kind_from_operators(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    for ops, expect in ((["Relu"], (False, False)), (["QuantizeLinear"], (True, False)),
                        (["GRU"], (False, True))):
        nodes = [helper.make_node(op, ["x"], ["y"]) for op in ops]
        path = str(tmp_path / f"{ops[0]}.onnx")
        onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y])), path)
        assert bounds.model_kind(path) == expect
