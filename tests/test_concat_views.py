"""Concat written in place by its producers (memory.planner.concat_views): each
input of a channel Concat is a view of the output at its byte offset, so the
producers write straight into it and no kernel copies. Checked on synthetic
models against onnx.reference (under ASan/UBSan, by both backends and on the
emulated Cortex-M4), with the cases that must keep the copy: slices that are
not contiguous or not aligned, a tensor in two Concats, a model output, an
in-place write over an input, and a view that would raise the peak."""
import os

import numpy as np
import pytest
from onnx import helper

import mtvm
from mtvm.memory import planner, schedule
from mtvm.testing import (assert_close, check_model, have, models_dir, reference_outputs,
                          run_on_board)
from test_schedule import conv, data, graph_model


def concat_kernels(lib) -> list[str]:
    return [lk.kernel.fname for lk in lib.kernels if lk.kernel.node.op == "Concat"]


def viewed(lib) -> list[str]:
    return [n.name for n in lib.graph.nodes if n.concat_views]


def without_views(m, monkeypatch, **opts):
    """The same model compiled with every Concat copied (the feature off)."""
    with monkeypatch.context() as mp:
        mp.setattr(schedule, "concat_views", lambda *a, **k: None)
        return mtvm.compile(m, **opts)


def branches_joined(axis=1, out_channels=(8, 16, 4), tail="Conv", cin=4, hw=8):
    """x -> stem -> convs of out_channels channels -> Concat(axis) -> tail."""
    rng = np.random.default_rng(3)
    c = {}
    nodes = [conv(rng, c, "s", "x", cin, 8, 3), helper.make_node("Relu", ["s"], ["t"])]
    names = []
    for i, co in enumerate(out_channels):
        nodes.append(conv(rng, c, f"b{i}", "t", 8, co, 1 + 2 * (i % 2)))
        names.append(f"b{i}")
    nodes.append(helper.make_node("Concat", names, ["cat"], axis=axis, name="cat"))
    total = sum(out_channels)
    if tail == "Conv":
        nodes.append(conv(rng, c, "y", "cat", total if axis == 1 else 8, 4))
    else:
        nodes.append(helper.make_node(tail, ["cat"], ["y"]))
    return graph_model(nodes, {"x": [1, cin, hw, hw]}, ["y"], c)


def test_producers_write_the_concat_and_no_kernel_copies(monkeypatch):
    m = branches_joined()
    before = without_views(m, monkeypatch)
    after = check_model(m, data(m), sanitize=True)
    assert viewed(after) == ["cat"] and not concat_kernels(after)
    assert concat_kernels(before) and len(after.kernels) == len(before.kernels) - 1
    # the copy's output no longer lives beside its inputs
    assert after.plan.lower_bound < before.plan.lower_bound
    assert after.plan.arena_bytes <= before.plan.arena_bytes
    plan = after.plan
    offs = [plan.arena_offset(f"b{i}") for i in range(3)]
    assert [plan.root(f"b{i}") for i in range(3)] == ["cat"] * 3
    assert offs == [plan.offsets["cat"] + d for d in (0, 8 * 64 * 4, 24 * 64 * 4)]


@pytest.mark.parametrize("tail", ["Relu", "Sigmoid"])
def test_a_consumer_may_still_write_over_the_whole_concat(tail):
    m = branches_joined(tail=tail)
    lib = check_model(m, data(m), sanitize=True)
    assert viewed(lib) == ["cat"]


def test_one_dimensional_and_token_concats():
    # [1, C, T] over channels and [1, T, D] over tokens: both contiguous slices
    rng = np.random.default_rng(4)
    w = {"wa": rng.standard_normal((8, 4, 3)).astype(np.float32),
         "wb": rng.standard_normal((12, 4, 1)).astype(np.float32),
         "p": rng.standard_normal((16, 8)).astype(np.float32),
         "q": rng.standard_normal((16, 8)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], pads=[1, 1]),
             helper.make_node("Conv", ["x", "wb"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
             helper.make_node("Transpose", ["c"], ["ct"], perm=[0, 2, 1]),   # [1, 16, 20]
             helper.make_node("MatMul", ["ct_s", "p"], ["u"]),
             helper.make_node("MatMul", ["ct_s", "q"], ["v"]),
             helper.make_node("Concat", ["u", "v"], ["tok"], axis=1),        # [1, 32, 8]
             helper.make_node("Tanh", ["tok"], ["y"])]
    nodes.insert(4, helper.make_node("Slice", ["ct", "st", "en", "ax"], ["ct_s"]))
    w.update(st=np.array([0], np.int64), en=np.array([16], np.int64), ax=np.array([2], np.int64))
    m = graph_model(nodes, {"x": [1, 4, 16]}, ["y"], w)
    lib = check_model(m, data(m), sanitize=True)
    assert len(viewed(lib)) == 2 and not concat_kernels(lib)


@pytest.mark.parametrize("case", ["not contiguous", "unaligned", "model output"])
def test_concats_that_keep_their_copy(case):
    if case == "not contiguous":       # over rows: each input is 8 runs of the output
        m = branches_joined(axis=2, out_channels=(8, 8))
    elif case == "unaligned":          # 3x3 planes of floats: 36-byte slices
        m = branches_joined(out_channels=(1, 2), hw=3)
    else:
        m = branches_joined()
        m.graph.output.append(helper.make_tensor_value_info("cat", 1, [1, 28, 8, 8]))
    lib = check_model(m, data(m), sanitize=True)
    assert viewed(lib) == [] and len(concat_kernels(lib)) == 1


def test_a_tensor_in_two_concats_is_a_view_in_one():
    rng = np.random.default_rng(5)
    c = {}
    nodes = [conv(rng, c, "a", "x", 4, 8), conv(rng, c, "b", "x", 4, 8),
             conv(rng, c, "d", "x", 4, 4),
             helper.make_node("Concat", ["a", "b"], ["c1"], axis=1, name="c1"),
             helper.make_node("Concat", ["a", "d"], ["c2"], axis=1, name="c2"),
             conv(rng, c, "y1", "c1", 16, 4), conv(rng, c, "y2", "c2", 12, 4),
             helper.make_node("Add", ["y1", "y2"], ["y"])]
    m = graph_model(nodes, {"x": [1, 4, 8, 8]}, ["y"], c)
    lib = check_model(m, data(m), sanitize=True)
    # (here neither: a view of either keeps a alive inside its Concat, a rise of the peak)
    assert len(viewed(lib)) + len(concat_kernels(lib)) == 2
    g = lib.graph.copy()
    c1, c2 = (next(n for n in g.nodes if n.name == k) for k in ("c1", "c2"))
    io = set(g.inputs) | set(g.outputs)
    assert planner._concat_can_view(g, c2, {}, io) is not None
    c1.concat_views = True
    assert planner._concat_can_view(g, c2, {}, io) is None


def test_an_input_written_over_after_the_concat_keeps_the_copy():
    # b is read again after the Concat by Relu + Add, which writes its output over b
    # in place (b's last reader): b cannot also be a slice of cat, whose bytes
    # that write would run into.
    rng = np.random.default_rng(6)
    c = {}
    nodes = [conv(rng, c, "a", "x", 4, 8), conv(rng, c, "b", "x", 4, 8),
             helper.make_node("Concat", ["a", "b"], ["cat"], axis=1, name="cat"),
             conv(rng, c, "u", "cat", 16, 8),
             helper.make_node("Relu", ["b"], ["rb"]),
             helper.make_node("Add", ["u", "rb"], ["v"]),
             conv(rng, c, "y", "v", 8, 4),
             helper.make_node("Mul", ["y", "y"], ["z"])]
    m = graph_model(nodes, {"x": [1, 4, 8, 8]}, ["z"], c)
    lib = check_model(m, data(m), sanitize=True)
    assert lib.plan.root("v") == "b" and viewed(lib) == []


def test_an_input_written_over_its_own_input_is_written_into_the_slice_instead(monkeypatch):
    # a (a pointwise conv) would write over t in place; with the view it writes into cat
    rng = np.random.default_rng(8)
    c = {}
    nodes = [conv(rng, c, "t", "x", 4, 8, 3), conv(rng, c, "a", "t", 8, 8),
             conv(rng, c, "b", "x", 4, 8),
             helper.make_node("Concat", ["a", "b"], ["cat"], axis=1, name="cat"),
             conv(rng, c, "y", "cat", 16, 4)]
    m = graph_model(nodes, {"x": [1, 4, 8, 8]}, ["y"], c)
    assert without_views(m, monkeypatch).plan.root("a") == "t"
    lib = check_model(m, data(m), sanitize=True)
    assert viewed(lib) == ["cat"] and lib.plan.root("a") == "cat"


def test_a_skip_connection_view_that_would_raise_the_peak_is_not_taken():
    # U-Net: e1 (large) is written first and waits for the decoder; with the view
    # the whole concat would be live from e1 on.
    rng = np.random.default_rng(7)
    c = {"sc": np.array([1, 1, 2, 2], np.float32)}
    nodes = [conv(rng, c, "e1", "x", 4, 16, 3),
             helper.make_node("MaxPool", ["e1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             conv(rng, c, "m1", "p", 16, 64, 3), conv(rng, c, "m2", "m1", 64, 64, 3),
             conv(rng, c, "m", "m2", 64, 16),
             helper.make_node("Resize", ["m", "", "sc"], ["u"], mode="nearest"),
             helper.make_node("Concat", ["u", "e1"], ["cat"], axis=1, name="cat"),
             conv(rng, c, "y", "cat", 32, 4, 3)]
    m = graph_model(nodes, {"x": [1, 4, 16, 16]}, ["y"], c)
    lib = check_model(m, data(m), sanitize=True)
    assert viewed(lib) == []
    g = lib.graph.copy()
    scratch = {lk.step: lk.kernel.scratch_bytes for lk in lib.kernels}
    assert planner.order_peak(g, scratch, {}) == lib.plan.lower_bound   # no in-place here
    next(n for n in g.nodes if n.op == "Concat").concat_views = True
    assert planner.order_peak(g, scratch, {}) > lib.plan.lower_bound


def test_llvm_backend_writes_the_slices_too(monkeypatch):
    pytest.importorskip("llvmlite")
    m = branches_joined()
    x = data(m)
    lib = mtvm.compile(m, backend="llvm")
    assert viewed(lib) == ["cat"]
    for got, want in zip(lib.run_host(x).values(), reference_outputs(m, x)):
        assert_close(got, want)


def test_workspace_pools_and_io_in_workspace_keep_the_views():
    m = branches_joined()
    x = data(m)
    for opts in ({"workspace_pools": [("sram1", 16384), ("sram2", 65536)]},
                 {"io_in_workspace": True}):
        lib = mtvm.compile(m, **opts)
        assert viewed(lib) == ["cat"], opts
        for got, want in zip(lib.run_host(x).values(), reference_outputs(m, x)):
            assert_close(got, want, what=str(opts))


@pytest.mark.device
def test_views_on_the_cortex_m4(tmp_path):
    if not (have("arm-none-eabi-gcc") and have("qemu-system-arm")):
        pytest.skip("needs arm-none-eabi-gcc and qemu-system-arm")
    m = branches_joined()
    x = data(m)
    lib = mtvm.compile(m, target="cortex-m4")
    assert viewed(lib) == ["cat"]
    got = run_on_board(lib, x, tmp_path)
    for a, e in zip(got.values(), reference_outputs(m, x)):
        assert_close(a, e, rtol=1e-4)


@pytest.mark.parametrize("name", ["denoise_unet", "denoise_unet_int8"])
def test_unet_decoder_concats_are_written_in_place(name, monkeypatch):
    path = os.path.join(models_dir(), name + ".onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    before = without_views(path, monkeypatch)
    after = mtvm.compile(path)
    assert viewed(after) and after.plan.arena_bytes < before.plan.arena_bytes
    assert after.plan.arena_bytes == after.plan.lower_bound
    ref = np.load(os.path.join(models_dir(), name + ".npz"))
    got = after.run_host([ref["in_0"]])
    want = before.run_host([ref["in_0"]])
    for a, b in zip(got.values(), want.values()):    # the same arithmetic, bit for bit
        np.testing.assert_array_equal(a, b)
    assert_close(next(iter(got.values())), ref["out_0"], rtol=1e-4)
