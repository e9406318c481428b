"""memory.schedule: the execution order of lowest peak memory.

Synthetic models where the order matters (the arena shrinks and the C still
matches the reference), one where it does not (nothing changes), and the
search itself on random DAGs: a topological order, never above the original's
peak, equal to brute force when exhaustive."""
import itertools

import numpy as np
import onnx
import pytest
from hypothesis import given, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.interp import interpret
from mtvm.memory import inplace_steps, order_peak, schedule
from mtvm.testing import assert_close, check_model, models_dir, reference_outputs


def graph_model(nodes, inputs: dict, outputs: list, consts: dict) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(a, n) for n, a in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def conv(rng, consts, name, x, cin, cout, k=1):
    consts[name + "_w"] = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)
                           ).astype(np.float32)
    return helper.make_node("Conv", [x, name + "_w"], [name], pads=[k // 2] * 4, name=name)


def two_branches(shrinking_first: bool = False, b_channels: int = 16):
    """t feeds b (conv 4->16 channels, kept to the end) and a1 (conv 4->32) ->
    a (4x4 max pool, small). Listed b first, b's 16 KiB are live while a1's
    32 KiB are; a first leaves only a's 2 KiB beside b."""
    rng = np.random.default_rng(0)
    c = {}
    b = [conv(rng, c, "b", "t", 4, b_channels)]
    a = [conv(rng, c, "a1", "t", 4, 32),
         helper.make_node("MaxPool", ["a1"], ["a"], kernel_shape=[4, 4], strides=[4, 4])]
    nodes = [helper.make_node("Relu", ["x"], ["t"])] + (a + b if shrinking_first else b + a) + [
        helper.make_node("Flatten", ["a"], ["af"]), helper.make_node("Flatten", ["b"], ["bf"]),
        helper.make_node("Concat", ["af", "bf"], ["y"], axis=1)]
    return graph_model(nodes, {"x": [1, 4, 16, 16]}, ["y"], c)


def inception():
    """A stem and four branches joined by a Concat, listed head first (every
    branch's first node, then every second one, ...): each head's output waits
    while the other branches run."""
    rng = np.random.default_rng(1)
    c = {}
    branches = [
        [conv(rng, c, "b0", "t", 8, 8)],
        [conv(rng, c, "b1a", "t", 8, 24), conv(rng, c, "b1", "b1a", 24, 8, 3)],
        [conv(rng, c, "b2a", "t", 8, 24), conv(rng, c, "b2b", "b2a", 24, 16, 3),
         conv(rng, c, "b2", "b2b", 16, 4, 3)],
        [helper.make_node("MaxPool", ["t"], ["b3a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         conv(rng, c, "b3", "b3a", 8, 4)]]
    nodes = [conv(rng, c, "s", "x", 3, 8, 3), helper.make_node("Relu", ["s"], ["t"])]
    nodes += [b[i] for i in range(3) for b in branches if i < len(b)]
    nodes.append(helper.make_node("Concat", ["b0", "b1", "b2", "b3"], ["y"], axis=1))
    return graph_model(nodes, {"x": [1, 3, 16, 16]}, ["y"], c)


def data(m, seed=0):
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in m.graph.input}


def node_names(lib):
    return [n.name for n in lib.graph.nodes]


@pytest.mark.parametrize("io_in_workspace", [False, True])
def test_running_the_shrinking_branch_first_lowers_the_arena(io_in_workspace):
    m = two_branches()
    before = mtvm.compile(m, reorder=False, io_in_workspace=io_in_workspace)
    after = check_model(m, data(m), sanitize=True, io_in_workspace=io_in_workspace)
    assert node_names(after).index("a1") < node_names(after).index("b")
    assert after.plan.arena_bytes < before.plan.arena_bytes
    if not io_in_workspace:
        assert (before.plan.arena_bytes, after.plan.arena_bytes) == (51200, 38912)
    md = after.metadata
    assert md["workspace_bytes"] == after.plan.arena_bytes
    assert md["workspace_lower_bound_original_order"] == before.plan.lower_bound


def test_inception_block_runs_branch_by_branch():
    m = inception()
    before = mtvm.compile(m, reorder=False)
    after = check_model(m, data(m), sanitize=True)
    # (target "c": the arena also holds the AVX-512 band's scratch of the 16-column convs)
    assert (before.plan.arena_bytes, after.plan.arena_bytes) == (92160, 67584)
    # the first order found (earliest node first) places above the bound; the one
    # continuing the last branch reaches it
    assert after.plan.arena_bytes == after.plan.lower_bound
    assert after.plan.original_lower_bound == before.plan.lower_bound


@pytest.mark.parametrize("shrinking_first", [True, False])
def test_an_order_nothing_beats_is_kept(shrinking_first):
    # b as large as t: either order peaks at t + a1 + a (a tie keeps the order).
    m = two_branches(shrinking_first, b_channels=4)
    before = mtvm.compile(m, reorder=False)
    after = mtvm.compile(m)
    assert node_names(after) == node_names(before)
    assert after.sources == before.sources
    assert after.metadata["workspace_lower_bound_original_order"] == after.plan.lower_bound


def test_inplace_decided_by_the_order_stays_correct():
    # t is read by Exp and Tanh (either may run last and write over it) and by
    # the final Mul; a 1x1 conv grows one branch so the order matters.
    rng = np.random.default_rng(2)
    c = {}
    nodes = [helper.make_node("Sigmoid", ["x"], ["t"]), conv(rng, c, "big", "t", 8, 32),
             helper.make_node("ReduceMax", ["big"], ["r"], axes=[1], keepdims=1),
             helper.make_node("Exp", ["t"], ["e"]), helper.make_node("Tanh", ["t"], ["h"]),
             helper.make_node("Add", ["e", "h"], ["s"]), helper.make_node("Mul", ["s", "r"], ["y"])]
    m = graph_model(nodes, {"x": [1, 8, 8, 8]}, ["y"], c)
    before = mtvm.compile(m, reorder=False, fuse=False)
    after = check_model(m, data(m), sanitize=True, fuse=False)
    assert after.plan.arena_bytes <= before.plan.arena_bytes


# --- the search on random DAGs ------------------------------------------------

@st.composite
def problems(draw, max_nodes=7):
    """A random Problem: node v writes buffer v (read by its successors), reads
    some earlier nodes' buffers, may need scratch and may write over a buffer
    it reads; an optional model input (buffer n) lives from the start."""
    n = draw(st.integers(1, max_nodes))
    sizes = [draw(st.integers(0, 8)) * 16 for _ in range(n)]
    has_input = draw(st.booleans())
    size = sizes + ([draw(st.integers(1, 8)) * 16] if has_input else [])
    preds, reads, inplace = [], [], []
    for v in range(n):
        ps = draw(st.lists(st.integers(0, v - 1), max_size=3, unique=True)) if v else []
        rs = ps + ([n] if has_input and draw(st.booleans()) else [])
        preds.append(sum(1 << u for u in ps))
        reads.append(rs)
        inplace.append([(b, min(size[b], sizes[v])) for b in rs[:1] if draw(st.booleans())])
    readers = [sum(1 << v for v in range(n) if b in reads[v]) for b in range(len(size))]
    scratch = [draw(st.integers(0, 4)) * 16 for _ in range(n)]
    pinned = {b for b in range(n) if not readers[b] and draw(st.booleans())}
    return schedule.Problem(preds, size, [[v] for v in range(n)], reads, readers, scratch,
                            inplace, [n] if has_input else [], pinned)


def topological_orders(p):
    for order in itertools.permutations(range(p.n)):
        done = 0
        for v in order:
            if p.preds[v] & ~done:
                break
            done |= 1 << v
        else:
            yield list(order)


@settings(max_examples=300, deadline=None)
@given(problems())
def test_exact_search_equals_brute_force(p):
    order, peak, exact = schedule.best_order(p)
    assert exact
    orders = list(topological_orders(p))
    assert order in orders
    assert schedule.peak(p, order) == peak == min(schedule.peak(p, o) for o in orders)
    if schedule.peak(p, list(range(p.n))) == peak:     # ties keep the original order
        assert order == list(range(p.n))


@settings(max_examples=100, deadline=None)
@given(problems(max_nodes=40), st.integers(1, 8))
def test_bounded_search_is_topological_and_never_worse(p, beam):
    order, peak, _ = schedule.best_order(p, beam=beam)
    done = 0
    for v in order:
        assert not p.preds[v] & ~done
        done |= 1 << v
    assert done == (1 << p.n) - 1
    assert schedule.peak(p, order) == peak <= schedule.peak(p, list(range(p.n)))


@st.composite
def conv_dags(draw):
    """A random DAG of 1x1 convs (random widths), ReLUs and channel Concats on
    one 8x8 input; every tensor nobody reads is a model output."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    c, nodes, chans = {}, [], {"x": 4}
    for k in range(draw(st.integers(2, 9))):
        names = list(chans)
        kind = draw(st.sampled_from(["conv", "conv", "relu", "concat"]))
        a = draw(st.sampled_from(names))
        out = f"n{k}"
        if kind == "conv":
            chans[out] = draw(st.sampled_from([2, 4, 8, 16, 32]))
            nodes.append(conv(rng, c, out, a, chans[a], chans[out]))
        elif kind == "relu":
            chans[out] = chans[a]
            nodes.append(helper.make_node("Relu", [a], [out], name=out))
        else:
            b = draw(st.sampled_from(names))
            chans[out] = chans[a] + chans[b]
            nodes.append(helper.make_node("Concat", [a, b], [out], axis=1, name=out))
    read = {i for n in nodes for i in n.input}
    outputs = [o for o in chans if o not in read and o != "x"]
    return graph_model(nodes, {"x": [1, 4, 8, 8]}, outputs, c)


def model_peak_and_bound(lib, io_in_workspace=False):
    """The search's model of the compiled order's peak, and the planner's bound."""
    g = lib.graph
    scratch = {lk.step: lk.kernel.scratch_bytes for lk in lib.kernels if lk.kernel.scratch_bytes}
    p = schedule.problem(g, scratch, io_in_workspace)
    bound = order_peak(g, scratch, inplace_steps(g), io_in_workspace)
    return p, schedule.peak(p, list(range(p.n))), bound


@settings(max_examples=25, deadline=None)
@given(conv_dags(), st.booleans())
def test_random_models_never_get_a_larger_arena(m, io_in_workspace):
    before = mtvm.compile(m, reorder=False, io_in_workspace=io_in_workspace)
    after = mtvm.compile(m, io_in_workspace=io_in_workspace)
    assert after.plan.lower_bound <= before.plan.lower_bound == after.plan.original_lower_bound
    assert after.plan.arena_bytes <= before.plan.arena_bytes
    p, modelled, bound = model_peak_and_bound(before, io_in_workspace)
    assert bound == before.plan.lower_bound
    if not any(p.inplace):       # no in-place write left to the order: the model is exact
        assert modelled == bound
    x = data(m)
    for got, want in zip(interpret(after.graph, x).values(), reference_outputs(m, x)):
        assert_close(got, want)


def test_a_growing_inplace_write_that_raises_the_peak_is_dropped():
    # Order a1, pool, b: b may write its 16 KiB over t's 4 KiB (t's last read),
    # but that sizes t's buffer 16 KiB from the start, beside a1's 32 KiB.
    m = two_branches(shrinking_first=True)
    before = mtvm.compile(m, reorder=False)
    after = check_model(m, data(m), sanitize=True)
    assert node_names(after) == node_names(before)
    assert before.plan.root("b") == "t" and after.plan.root("b") == "b"
    assert (before.plan.arena_bytes, after.plan.arena_bytes) == (51200, 38912)


@pytest.mark.parametrize("name", ["ic_resnet8", "vww_mobilenetv1_int8", "kws_dscnn"])
def test_model_of_the_search_is_the_planners_bound_on_real_models(name):
    import os
    path = os.path.join(models_dir(), name + ".onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    for io_in_workspace in (False, True):
        _, modelled, bound = model_peak_and_bound(
            mtvm.compile(path, reorder=False, io_in_workspace=io_in_workspace), io_in_workspace)
        assert modelled == bound


def test_cli_reports_the_graph_orders_bound_and_no_reorder_keeps_it(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "m.onnx"
    onnx.save(two_branches(), path)

    def summary(*flags):
        p = subprocess.run([sys.executable, "-m", "mtvm", "compile", str(path), *flags],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        return next(line for line in p.stdout.splitlines() if "arena" in line)
    assert "arena 38.0 KiB (lower bound 38.0 KiB; 50.0 KiB with --no-reorder)" in summary()
    assert "arena 50.0 KiB (lower bound 50.0 KiB)," in summary("--no-reorder")
