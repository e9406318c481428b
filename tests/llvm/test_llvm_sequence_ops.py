"""The LLVM backend's loop nests of RNN, GRU, LSTM, ConvTranspose and Resize
(mtvm/codegen/llvm/loopnests_seq.py) against onnxruntime: small models built
with onnx.helper, several nodes per model (one compile and JIT each),
compiled with backend="llvm" and run in process through LLVM's JIT.

Recurrent ops: every pair of values of direction, linear_before_reset, bias,
initial states, peepholes, layout, sequence kind (one step, several, run-time
sequence_lens) and the outputs used; then the output sets against directions,
initial states and lengths (0 and out of range too); without Y (the state in
scratch memory); sequences longer than a chunk of input projections; run-time
weights; the scalar register tiles of targets without explicit vectors; the
activations with alpha/beta, clip, input_forget; float64. onnxruntime runs
only layout 0: its model wraps each layout-1 node in Transposes. ConvTranspose: 1-D, 2-D and
3-D, groups, strides, dilations, pads, output_padding, output_shape,
auto_pad, fused tails. Resize: every nearest_mode and coordinate
transformation mode, linear, cubic, antialias, axes, extrapolation, integer
and float64 inputs.
"""
import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.host_runner import HostModule
from mtvm.interp import interpret

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("llvmlite")

RTOL = 1e-4
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
N_OUT = {"RNN": 2, "GRU": 2, "LSTM": 3}


def _model(nodes, ins, outs, inits, opset=22):
    g = helper.make_graph(nodes, "llvm_seq", ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return onnx.shape_inference.infer_shapes(m)


def _onnxruntime(model, feed) -> dict:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))


def _compare(got: dict, expected: dict, describe) -> None:
    """Every output within RTOL of the largest expected magnitude (at least 1)."""
    bad = []
    for name, e in expected.items():
        a = got[name]
        assert a.shape == e.shape, f"{name}: shape {a.shape} != {e.shape}"
        fin = np.isfinite(e)
        err = float(np.max(np.abs(a[fin].astype(np.float64) - e[fin]), initial=0))
        scale = max(1.0, float(np.max(np.abs(e[fin]), initial=0)))
        if not err <= RTOL * scale or not np.array_equal(a[~fin], e[~fin], equal_nan=True):
            bad.append(f"{name} (error {err:.3g}): {describe(name)}")
    assert not bad, f"{len(bad)} outputs differ from onnxruntime:\n" + "\n".join(bad[:20])


def _run_llvm(model, feed) -> dict:
    return mtvm.compile(model, backend="llvm").run_host(feed)


# -- RNN, GRU, LSTM ------------------------------------------------------------------------

def _rnn_models(cases, seed=0, dtype=np.float32):
    """(model, onnxruntime model, inputs) with one node per case. A case: op,
    direction, H, I, S, B and optionally lbr, bias, init, lens (run-time
    sequence_lens), peep, layout, outs (indices of the outputs used),
    runtime_weights (W, R and B as graph inputs) and the attributes activations,
    activation_alpha, activation_beta, clip, input_forget."""
    rng = np.random.default_rng(seed)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes, ort_nodes, inits, ins, outs, feed = [], [], [], [], [], {}

    def rand(*shape, scale=1.0):
        return rng.uniform(-scale, scale, shape).astype(dtype)

    def graph_input(name, value):
        feed[name] = value
        ins.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))

    for c, cs in enumerate(cases):
        op, H, I, S, B = cs["op"], cs["H"], cs["I"], cs["S"], cs["B"]
        dirs = 2 if cs["direction"] == "bidirectional" else 1
        G, layout, p = GATES[op], cs.get("layout", 0), f"c{c}_"
        names = [p + "x", p + "w", p + "r"] + [""] * 5
        graph_input(p + "x", rand(*((B, S, I) if layout else (S, B, I))))
        wr = [(p + "w", rand(dirs, G * H, I, scale=0.7)),
              (p + "r", rand(dirs, G * H, H, scale=0.7))]
        if cs.get("bias"):
            wr.append((p + "b", rand(dirs, 2 * G * H)))
            names[3] = p + "b"
        for name, value in wr:   # run-time weights: graph inputs, not initializers
            if cs.get("runtime_weights"):
                graph_input(name, value)
            else:
                inits.append(numpy_helper.from_array(value, name))
        if cs.get("lens") is not None:
            graph_input(p + "sl", np.array(cs["lens"], np.int32))
            names[4] = p + "sl"
        state = (B, dirs, H) if layout else (dirs, B, H)
        if cs.get("init") == "zeros":   # a constant zero state, as PyTorch exports have
            inits += [numpy_helper.from_array(np.zeros(state, dtype), p + s)
                      for s in (("h0", "c0") if op == "LSTM" else ("h0",))]
            names[5:7] = [p + "h0", p + "c0" if op == "LSTM" else ""]
        elif cs.get("init"):
            graph_input(p + "h0", rand(*state))
            names[5] = p + "h0"
            if op == "LSTM":
                graph_input(p + "c0", rand(*state))
                names[6] = p + "c0"
        if cs.get("peep"):
            inits.append(numpy_helper.from_array(rand(dirs, 3 * H), p + "p"))
            names[7] = p + "p"
        while not names[-1]:
            names.pop()
        used = cs.get("outs", range(N_OUT[op]))
        onames = [f"{p}o{j}" if j in used else "" for j in range(N_OUT[op])]
        while not onames[-1]:
            onames.pop()
        outs += [helper.make_tensor_value_info(o, elem, None) for o in onames if o]
        attrs = {"hidden_size": H, "direction": cs["direction"]}
        if op == "GRU" and cs.get("lbr"):
            attrs["linear_before_reset"] = 1
        for a in ("activations", "activation_alpha", "activation_beta", "clip", "input_forget"):
            if cs.get(a) is not None:
                attrs[a] = cs[a]
        nodes.append(helper.make_node(op, names, onames, name=f"{op}_{c}",
                                      **attrs, **({"layout": 1} if layout else {})))
        if not layout:
            ort_nodes.append(nodes[-1])
            continue
        # onnxruntime: Transpose to layout 0, the node, Transpose back.
        tnames = [n + "_t" if n and j in (0, 5, 6) else n for j, n in enumerate(names)]
        ort_nodes += [helper.make_node("Transpose", [names[j]], [tnames[j]], perm=[1, 0, 2])
                      for j in (0, 5, 6) if j < len(names) and names[j]]
        ort_nodes.append(helper.make_node(op, tnames, [o and o + "_t" for o in onames],
                                          **attrs))
        ort_nodes += [helper.make_node("Transpose", [o + "_t"], [o],
                                       perm=[2, 0, 1, 3] if j == 0 else [1, 0, 2])
                      for j, o in enumerate(onames) if o]
    return _model(nodes, ins, outs, inits), _model(ort_nodes, ins, outs, inits), feed


def _check_rnn(cases, seed=0, ort_feed=None):
    model, ort_model, feed = _rnn_models(cases, seed)
    expected = _onnxruntime(ort_model, ort_feed(feed) if ort_feed else feed)
    _compare(_run_llvm(model, feed), expected,
             lambda name: cases[int(name[1:name.index("_")])])


def _pairwise(dims: dict) -> list[dict]:
    """Cases covering every pair of values of any two dimensions (greedy, in a
    fixed order: the same cases every run)."""
    names = list(dims)

    def pairs(c):
        return {(a, c[a], b, c[b]) for i, a in enumerate(names) for b in names[i + 1:]}
    todo = set().union(*(pairs(dict(zip(names, v))) for v in itertools.product(*dims.values())))
    cands = [dict(zip(names, v)) for v in itertools.product(*dims.values())]
    out = []
    while todo:
        best = max(cands, key=lambda c: len(pairs(c) & todo))
        out.append(best)
        todo -= pairs(best)
    return out


def _cases(op):
    """Every pair of values of direction, sequence kind (one step, several,
    run-time lengths), bias, initial states, layout, linear_before_reset (GRU),
    peepholes (LSTM) and the outputs used (always with Y); batch, hidden and
    input sizes cycle."""
    dims = dict(direction=["forward", "reverse", "bidirectional"],
                seq=["one", "several", "lens"], bias=[0, 1], init=[0, 1], layout=[0, 1],
                outs={"RNN": [(0,), (0, 1)], "GRU": [(0,), (0, 1)],
                      "LSTM": [(0,), (0, 1), (0, 2), (0, 1, 2)]}[op])
    if op == "GRU":
        dims["lbr"] = [0, 1]
    if op == "LSTM":
        dims["peep"] = [0, 1]
    cases = []
    for n, c in enumerate(_pairwise(dims)):
        B = (1, 3, 2)[n % 3]
        seq = c.pop("seq")
        lens = None
        if seq == "lens":   # full, shorter, a single step
            lens = [5, 3, 1][:B] if B > 1 else [4]
        cases.append(dict(c, op=op, H=(1, 3, 4, 5, 8)[n % 5], I=(2, 3)[n % 2],
                          S=1 if seq == "one" else 5, B=B, lens=lens))
    return cases


@pytest.mark.parametrize("op", ["GRU", "LSTM", "RNN"])
def test_attribute_pairs_match_onnxruntime(op):
    _check_rnn(_cases(op), seed=len(op))


def test_where_the_state_lives_for_each_set_of_outputs():
    """Longer sequences with every output set that has Y (the C emitter and an
    earlier LLVM nest kept the state in the outputs), with and without initial
    states and lengths."""
    cases = []
    for op, outs in (("LSTM", [(0,), (0, 1), (0, 2)]), ("GRU", [(0,), (0, 1)])):
        for o, d, (init, lens) in itertools.product(outs, ("forward", "reverse", "bidirectional"),
                                                    ((0, None), (1, [7, 1, 0, 4]))):
            cases.append(dict(op=op, direction=d, H=6, I=5, S=7, B=4, bias=1, init=init,
                              lens=lens, outs=o, peep=op == "LSTM"))
    _check_rnn(cases, seed=7)


def test_like_pytorch_exports():
    """GRU with linear_before_reset and the hidden size of kws_crnn, LSTM with the
    one of lstm_forecast; bias, initial states given, absent, or constant zeros."""
    cases = [dict(op=op, direction=d, H=H, I=I, S=9, B=2, lbr=1, bias=1, init=i)
             for op, H, I in (("GRU", 64, 20), ("LSTM", 48, 8))
             for d in ("forward", "bidirectional") for i in (0, 1, "zeros")]
    _check_rnn(cases, seed=11)


ACTS = ["Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
        "HardSigmoid", "Elu", "Softsign", "Softplus"]


def test_activations_clip_and_input_forget_match_onnxruntime():
    cases = []
    for op, per in (("RNN", 1), ("GRU", 2), ("LSTM", 3)):
        base = dict(op=op, H=3, I=2, S=4, B=2, bias=1, init=1)
        for n in range(0, len(ACTS), per):
            acts = [ACTS[(n + j) % len(ACTS)] for j in range(per)]
            cases.append(dict(base, direction="forward", activations=acts,
                              activation_alpha=[0.3, 0.6, 0.9], activation_beta=[0.2, 1.5]))
        both = ["LeakyRelu", "Sigmoid", "Tanh"][:per] + ["Tanh", "HardSigmoid", "Elu"][:per]
        cases.append(dict(base, direction="bidirectional", activations=both,
                          activation_alpha=[0.05, 0.25, 0.7]))
        names = ["HardSigmoid", "LeakyRelu", "Elu"][:per]
        cases.append(dict(base, direction="reverse",
                          activations=[n.lower() for n in names] if per > 1 else names))
        for clip in (0.3, 2.0):
            cases.append(dict(base, direction="bidirectional", clip=clip, lbr=1,
                              peep=op == "LSTM", lens=[4, 2]))
    lstm = dict(op="LSTM", H=3, I=2, S=4, B=2, bias=1, init=1)
    cases += [dict(lstm, direction=d, input_forget=1, peep=1, clip=cl, outs=o)
              for d in ("forward", "bidirectional") for cl in (None, 0.5)
              for o in ((0,), (0, 1, 2))]
    _check_rnn(cases, seed=5)


def test_sequence_length_zero_and_out_of_range_lengths():
    """Length 0 runs no step: Y, Y_h and Y_c are 0 there (onnxruntime's reading);
    lengths past X's or negative are clamped (onnxruntime is given them clamped)."""
    cases = [dict(op=op, direction=d, H=3, I=2, S=4, B=4, bias=1, init=1,
                  lens=[0, 2, 99, -7], outs=o, lbr=lbr)
             for op in GATES for d in ("forward", "reverse", "bidirectional")
             for o, lbr in (((0,), 0), ((0, 1, 2)[:N_OUT[op]], 1))]

    def clamped(feed):
        return {n: np.clip(v, 0, 4) if n.endswith("_sl") else v for n, v in feed.items()}
    _check_rnn(cases, seed=3, ort_feed=clamped)


def test_float64():
    cases = [dict(op=op, direction="bidirectional", H=3, I=2, S=3, B=2, bias=1, init=1,
                  lbr=1, lens=[3, 2], peep=op == "LSTM") for op in GATES]
    model, _, feed = _rnn_models(cases, seed=9, dtype=np.float64)
    _, ort_model, _ = _rnn_models(cases, seed=9, dtype=np.float32)
    expected = _onnxruntime(ort_model, {n: v.astype(np.float32) if v.dtype == np.float64
                                        else v for n, v in feed.items()})
    got = _run_llvm(model, feed)
    for name, e in expected.items():
        assert got[name].dtype == np.float64
        np.testing.assert_allclose(got[name], e, atol=1e-5, rtol=RTOL, err_msg=name)


@pytest.mark.parametrize("op", ["GRU", "LSTM", "RNN"])
def test_without_y_the_state_lives_in_scratch(op):
    """Y unused: only Y_h (and Y_c) out of the node; the state is in scratch memory
    either way, for every direction, layout, initial state and lengths."""
    outs = {"RNN": [(1,)], "GRU": [(1,)], "LSTM": [(1,), (2,), (1, 2)]}[op]
    cases = []
    for n, (o, d, (init, lens), lbr) in enumerate(itertools.product(
            outs, ("forward", "reverse", "bidirectional"), ((0, None), (1, [7, 1, 0, 4])),
            (0, 1) if op == "GRU" else (0,))):
        cases.append(dict(op=op, direction=d, H=(6, 9)[n % 2], I=5, S=7, B=4, bias=1,
                          init=init, lens=lens, outs=o, lbr=lbr, peep=op == "LSTM",
                          layout=n // 2 % 2))
    _check_rnn(cases, seed=13)


def test_long_sequences_and_wide_gate_rows():
    """More steps than scratch holds input projections for (4 at a time): chunk
    boundaries with and without run-time lengths, in both directions; hidden sizes
    whose gate rows fill several blocks of vectors and leave a remainder."""
    cases = [dict(op=op, direction=d, H=H, I=I, S=19, B=3, bias=1, init=1, lbr=lbr,
                  lens=lens, peep=op == "LSTM", outs=(0, 1))
             for op, H, I in (("GRU", 37, 11), ("LSTM", 40, 3), ("RNN", 24, 9))
             for d, lens, lbr in (("forward", None, 0), ("bidirectional", [19, 9, 8], 1),
                                  ("reverse", [16, 17, 0], 0))]
    _check_rnn(cases, seed=17)


def test_runtime_weights():
    """W, R and B as graph inputs (not constants: no transposed tables, the
    products read the matrices as given)."""
    cases = [dict(op=op, direction=d, H=5, I=3, S=6, B=2, bias=1, init=1, lbr=lbr,
                  lens=[6, 4] if d == "bidirectional" else None, peep=op == "LSTM",
                  runtime_weights=True, layout=layout)
             for op in GATES for d, lbr, layout in (("forward", 0, 0), ("bidirectional", 1, 1),
                                                     ("reverse", 1, 0))]
    _check_rnn(cases, seed=19)


def test_scalar_tiles(monkeypatch):
    """The products in scalar register tiles (a target without explicit vectors, as
    an Arm Cortex-M), checked on the host."""
    from mtvm.codegen.llvm import loopnests_seq
    monkeypatch.setattr(loopnests_seq, "_vector_lanes", lambda target: 0)
    cases = [dict(op=op, direction=d, H=H, I=7, S=11, B=2, bias=1, init=1, lbr=lbr,
                  lens=[11, 5], peep=op == "LSTM", outs=outs)
             for op, H in (("GRU", 13), ("LSTM", 6), ("RNN", 19))
             for d, lbr, outs in (("forward", 0, (0, 1)), ("bidirectional", 1, (1,)))]
    _check_rnn(cases, seed=23)


# -- ConvTranspose ---------------------------------------------------------------------------

CONV_T = [  # (x shape, output channels per group, attributes, bias, fused tail)
    ((1, 3, 5, 4), 2, dict(kernel_shape=[2, 2], strides=[2, 2]), True, "Relu"),
    ((2, 4, 4, 5), 3, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                           output_padding=[1, 1]), True, None),
    ((1, 4, 3, 3), 2, dict(kernel_shape=[3, 2], strides=[1, 3], dilations=[2, 1], group=2,
                           pads=[0, 2, 1, 0]), False, None),
    ((1, 6, 4, 4), 1, dict(kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1], group=3),
     True, "Sigmoid"),
    ((1, 2, 3, 4), 3, dict(kernel_shape=[3, 3], strides=[3, 2], auto_pad="SAME_UPPER"),
     True, None),
    ((1, 2, 3, 3), 2, dict(kernel_shape=[3, 3], strides=[2, 2], output_shape=[8, 7]),
     False, "Relu"),
    ((1, 2, 2, 2), 2, dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]),
     True, None),   # pads larger than the kernel's reach: taps that never land
    ((1, 3, 7), 2, dict(kernel_shape=[4], strides=[2], pads=[1, 2]), True, "Relu"),
    ((2, 4, 6), 2, dict(kernel_shape=[3], strides=[3], dilations=[2], group=2,
                        output_padding=[2]), False, None),
    ((1, 2, 5), 3, dict(kernel_shape=[1], strides=[1]), True, None),
    ((1, 2, 3, 2, 3), 2, dict(kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[0, 1, 1, 1, 0, 0]),
     True, None),
    # input channels in blocks of 4 and a remainder; kernel 4 stride 2 (taps in two groups)
    ((1, 6, 3, 4), 3, dict(kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1]), True, "Relu"),
    ((2, 9, 5), 2, dict(kernel_shape=[5], strides=[2], pads=[2, 1], output_padding=[1]),
     False, None),
    ((1, 8, 4, 3), 2, dict(kernel_shape=[2, 2], strides=[2, 2], group=2), True, None),
]


def test_conv_transpose_matches_onnxruntime():
    rng = np.random.default_rng(1)
    nodes, ins, outs, inits, feed = [], [], [], [], {}
    for c, (xs, cog, attrs, bias, tail) in enumerate(CONV_T):
        p = f"c{c}_"
        g = attrs.get("group", 1)
        feed[p + "x"] = rng.standard_normal(xs).astype(np.float32)
        ins.append(helper.make_tensor_value_info(p + "x", TensorProto.FLOAT, xs))
        w = rng.standard_normal((xs[1], cog, *attrs["kernel_shape"])).astype(np.float32)
        inits.append(numpy_helper.from_array(w, p + "w"))
        names = [p + "x", p + "w"]
        if bias:
            inits.append(numpy_helper.from_array(
                rng.standard_normal(cog * g).astype(np.float32), p + "b"))
            names.append(p + "b")
        y = p + ("y" if tail is None else "t")
        nodes.append(helper.make_node("ConvTranspose", names, [y], **attrs))
        if tail is not None:
            nodes.append(helper.make_node(tail, [y], [p + "y"]))
        outs.append(helper.make_tensor_value_info(p + "y", TensorProto.FLOAT, None))
    model = _model(nodes, ins, outs, inits)
    _compare(_run_llvm(model, feed), _onnxruntime(model, feed),
             lambda name: CONV_T[int(name[1:name.index("_")])])


# -- Resize, Upsample -------------------------------------------------------------------------

RESIZE = [  # (x shape, attributes, scales or None, sizes or None, roi or None)
    *[((1, 2, 3, 5), dict(mode="nearest", nearest_mode=nm, coordinate_transformation_mode=ctm),
       [1, 1, 2.5, 1.6], None, None)
      for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
      for ctm in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                  "half_pixel_symmetric")],
    ((1, 1, 6, 7), dict(mode="nearest"), [1, 1, 0.5, 0.6], None, None),
    ((2, 3, 4), dict(mode="nearest", nearest_mode="floor"), None, [2, 5, 9], None),
    *[((1, 2, 4, 5), dict(mode="linear", coordinate_transformation_mode=ctm),
       [1, 1, 2, 1.5], None, None)
      for ctm in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                  "half_pixel_symmetric")],
    ((1, 2, 8, 6), dict(mode="linear"), [1, 1, 0.5, 0.75], None, None),
    ((1, 1, 5, 4), dict(mode="linear", coordinate_transformation_mode="align_corners"),
     None, [1, 1, 3, 7], None),
    ((1, 2, 1, 4), dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
     None, [1, 2, 1, 9], None),   # an output axis of size 1
    ((1, 1, 4, 4), dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                        extrapolation_value=-3.5), None, [1, 1, 5, 6],
     [0, 0, -0.2, 0.1, 1, 1, 1.3, 0.9]),
    ((1, 1, 4, 4), dict(mode="nearest", coordinate_transformation_mode="tf_crop_and_resize"),
     None, [1, 1, 6, 3], [0, 0, 0.1, -0.3, 1, 1, 0.8, 1.2]),
    ((1, 2, 4, 5), dict(mode="cubic"), [1, 1, 1.5, 2], None, None),
    ((1, 1, 6, 6), dict(mode="linear", antialias=1), [1, 1, 0.5, 0.5], None, None),
    ((1, 1, 4, 6), dict(mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_larger"),
     None, [7, 7], None),
    # integer upsamplings: on the C backend the float Resize's last axis then runs as
    # loops over periods with constant taps (QResize's nest, float_io), in blocks
    *[((1, 3, 5, 37), dict(mode="linear", coordinate_transformation_mode=ctm),
       [1, 1, 2, 2], None, None)
      for ctm in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")],
    ((1, 2, 4, 70), dict(mode="linear"), [1, 1, 3, 3], None, None),
    ((2, 3, 40), dict(mode="linear"), [1, 1, 2], None, None),          # 1-D
    ((1, 2, 6, 33), dict(mode="cubic"), [1, 1, 2, 2], None, None),
]


@pytest.mark.parametrize("backend", ["llvm", "c"])
def test_resize_matches_onnxruntime(backend):
    rng = np.random.default_rng(2)
    nodes, ins, outs, inits, feed = [], [], [], [], {}
    for c, (xs, attrs, scales, sizes, roi) in enumerate(RESIZE):
        p = f"c{c}_"
        feed[p + "x"] = rng.standard_normal(xs).astype(np.float32)
        ins.append(helper.make_tensor_value_info(p + "x", TensorProto.FLOAT, xs))
        names = [p + "x", "", ""]
        if roi is not None:
            inits.append(numpy_helper.from_array(np.array(roi, np.float32), p + "roi"))
            names[1] = p + "roi"
        if scales is not None:
            inits.append(numpy_helper.from_array(np.array(scales, np.float32), p + "sc"))
            names[2] = p + "sc"
        else:
            inits.append(numpy_helper.from_array(np.array(sizes, np.int64), p + "sz"))
            names.append(p + "sz")
        nodes.append(helper.make_node("Resize", names, [p + "y"], **attrs))
        outs.append(helper.make_tensor_value_info(p + "y", TensorProto.FLOAT, None))
    model = _model(nodes, ins, outs, inits, opset=19)
    lib = mtvm.compile(model, backend=backend)
    describe = lambda name: RESIZE[int(name[1:name.index("_")])]   # noqa: E731
    reference = interpret(lib.graph, feed)
    expected = _onnxruntime(model, feed)
    expected = {n: e for n, e in expected.items() if not _ort_parts(*describe(n))}
    runs = [lib.run_host(feed)]
    if backend == "c":   # built for the host's vectors too, and under ASan/UBSan
        assert "for (size_t jb = 0;" in lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
        runs += [HostModule(lib, opt="-O3", extra=["-march=native"]).run(feed),
                 lib.run_host(feed, sanitize=True)]
    for got in runs:
        _compare(got, reference, describe)
        _compare(got, expected, describe)


@pytest.mark.parametrize("ctm", ["half_pixel", "asymmetric", "pytorch_half_pixel"])
def test_c_x2_bilinear_resize_is_bit_exact_with_onnxruntime(ctm):
    """The U-Net's float upsampling on the C backend: onnxruntime's taps, weights and
    sums, bit for bit (the last input weighed twice by 0.5 where it clamps). Where
    the weights are exact (not align_corners, whose weights onnxruntime computes
    otherwise: within 1e-6 there, as test_resize_matches_onnxruntime checks)."""
    x = np.random.default_rng(6).standard_normal((1, 4, 9, 40)).astype(np.float32)
    model = _model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear",
                                     coordinate_transformation_mode=ctm)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")],
                   opset=19)
    lib = mtvm.compile(model)
    got = HostModule(lib, opt="-O2", extra=["-ffp-contract=off"]).run({"x": x})
    np.testing.assert_array_equal(got["y"], _onnxruntime(model, {"x": x})["y"])


def _ort_parts(xs, attrs, scales, sizes, roi) -> bool:
    """Where onnxruntime parts from the spec (and mtvm's NumPy reference, which the
    C backend matches too): align_corners with scales (it takes the scale, not the
    sizes' ratio) and asymmetric round_prefer_ceil (a tie it computes in float)."""
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    return scales is not None and (ctm == "align_corners" or (
        ctm == "asymmetric" and attrs.get("nearest_mode") == "round_prefer_ceil"))


@pytest.mark.parametrize("backend", ["llvm", "c"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_matches_onnxruntime(mode, backend):
    x = np.random.default_rng(4).standard_normal((1, 2, 3, 4)).astype(np.float32)
    model = _model([helper.make_node("Upsample", ["x", "s"], ["y"], mode=mode)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   [numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "s")], opset=9)
    got = _run_llvm(model, {"x": x}) if backend == "llvm" else \
        mtvm.compile(model).run_host({"x": x})
    _compare(got, _onnxruntime(model, {"x": x}), str)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.float64])
def test_resize_other_dtypes_match_the_reference(dtype):
    """Integer Resize rounds (rint) and saturates like the C emitter (within one unit of
    the reference, which sums in double where the kernels sum in float); float64 in
    double."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-128, 255, (1, 2, 3, 5)).astype(dtype)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [helper.make_node("Resize", ["x", "", "s"], [f"y_{m}"], mode=m)
             for m in ("nearest", "linear", "cubic")]
    model = _model(nodes, [helper.make_tensor_value_info("x", elem, x.shape)],
                   [helper.make_tensor_value_info(n.output[0], elem, None) for n in nodes],
                   [numpy_helper.from_array(np.array([1, 1, 2.5, 1.6], np.float32), "s")],
                   opset=19)
    lib = mtvm.compile(model, backend="llvm")
    got, ref = lib.run_host({"x": x}), interpret(lib.graph, {"x": x})
    for name, e in ref.items():
        assert got[name].dtype == np.dtype(dtype)
        np.testing.assert_allclose(got[name].astype(np.float64), e, rtol=1e-12,
                                   atol=1e-12 if dtype == np.float64 else 1, err_msg=name)
