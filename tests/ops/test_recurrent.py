"""RNN, GRU and LSTM against onnxruntime (within 1e-5) over every combination of
their attributes and optional inputs: direction, linear_before_reset, layout,
bias, initial states, peepholes, sequence lengths (one step, several, and a
run-time sequence_lens input), with batch sizes, hidden sizes (odd ones too)
and the outputs a graph uses cycled through the cases. Many cases are compiled
into one model (one C build per op and direction) to keep the run short.

onnxruntime runs only layout 0, so its model wraps each layout-1 node in
Transposes; onnx.reference ignores sequence_lens, activations and clip, so it
is not the oracle here. Where onnxruntime and the spec part (sequence length
0, activation defaults), the docstring of recurrent_reference says what mtvm
does. tests/data/torch_{gru,lstm}.onnx are PyTorch exports (see
tests/data/make_torch_rnn.py) with torch's own outputs.
"""
import itertools
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.errors import MtvmError
from mtvm.interp import interpret
from mtvm.testing import cpu_has, have, run_on_board

ort = pytest.importorskip("onnxruntime")

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
N_OUT = {"RNN": 2, "GRU": 2, "LSTM": 3}
TOL = 1e-5
DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")


def _models(cases, seed=0, dtype=np.float32):
    """(mtvm model, onnxruntime model, inputs) holding one node per case.
    A case: op, direction, H, I, S, B and optionally lbr, bias, init, lens (a
    run-time sequence_lens), peep, layout, weights_input (W and R given at run
    time), outs (indices of the outputs used;
    the others are omitted), and the attributes activations, activation_alpha,
    activation_beta, clip, input_forget."""
    rng = np.random.default_rng(seed)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes, ort_nodes, inits, ins, outs, feed = [], [], [], [], [], {}

    def rand(*shape, scale=1.0):
        return (rng.uniform(-scale, scale, shape)).astype(dtype)

    def graph_input(name, value):
        feed[name] = value
        ins.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))

    for c, cs in enumerate(cases):
        op, H, I, S, B = cs["op"], cs["H"], cs["I"], cs["S"], cs["B"]
        dirs, G, layout, p = 2 if cs["direction"] == "bidirectional" else 1, GATES[op], \
            cs.get("layout", 0), f"c{c}_"
        names = [p + "x", p + "w", p + "r"] + [""] * 5
        graph_input(p + "x", rand(*((B, S, I) if layout else (S, B, I))))
        if cs.get("weights_input"):   # W and R as run-time inputs: no GEMV schedule
            graph_input(p + "w", rand(dirs, G * H, I, scale=0.7))
            graph_input(p + "r", rand(dirs, G * H, H, scale=0.7))
        else:
            inits += [numpy_helper.from_array(rand(dirs, G * H, I, scale=0.7), p + "w"),
                      numpy_helper.from_array(rand(dirs, G * H, H, scale=0.7), p + "r")]
        if cs.get("bias"):
            inits.append(numpy_helper.from_array(rand(dirs, 2 * G * H), p + "b"))
            names[3] = p + "b"
        if cs.get("lens") is not None:
            graph_input(p + "sl", np.array(cs["lens"], np.int32))
            names[4] = p + "sl"
        state = (B, dirs, H) if layout else (dirs, B, H)
        if cs.get("init"):
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

    def model(ns):
        g = helper.make_graph(ns, "recurrent", ins, outs, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
        m.ir_version = 10
        return onnx.shape_inference.infer_shapes(m)
    return model(nodes), model(ort_nodes), feed


def _onnxruntime(model, feed) -> dict:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))


def _check(cases, seed=0, opt="-O2", dtype=np.float32, extra=None):
    """Compile the cases into one model, run its C on the host and the NumPy
    reference (the IR interpreter), compare both with onnxruntime."""
    model, ort_model, feed = _models(cases, seed, dtype)
    expected = _onnxruntime(ort_model, feed)
    lib = mtvm.compile(model)
    runs = {"C": lib.run_host(feed, opt=opt, extra=extra), "reference": interpret(lib.graph, feed)}
    bad = []
    for what, got in runs.items():
        for name, e in expected.items():
            assert got[name].shape == e.shape, f"{what} {name}: {got[name].shape} != {e.shape}"
            a = got[name].astype(np.float64)
            fin = np.isfinite(e)
            err = float(np.max(np.abs(a[fin] - e[fin]), initial=0))
            if not err <= TOL or not np.array_equal(a[~fin], e[~fin], equal_nan=True):
                case = cases[int(name[1:name.index("_")])]
                bad.append(f"{what} {name} (error {err:.3g}): {case}")
    assert not bad, f"{len(bad)} outputs differ from onnxruntime:\n" + "\n".join(bad[:20])
    return lib


def _product(op, direction):
    """Every combination of the attributes and optional inputs of `op` with
    `direction`; batch size, hidden size and the outputs used cycle."""
    cases = []
    lbrs = [0, 1] if op == "GRU" else [0]
    peeps = [0, 1] if op == "LSTM" else [0]
    outs = [None, (0,), (1,), (2,) if op == "LSTM" else (0, 1), (0, 2) if op == "LSTM" else (1,)]
    for lbr, bias, init, peep, layout, seq in itertools.product(
            lbrs, [0, 1], [0, 1], peeps, [0, 1], ["one", "several", "lens"]):
        n = len(cases)
        B = (1, 3, 2)[n % 3]
        S = 1 if seq == "one" else 5
        lens = None
        if seq == "lens":   # full, shorter, a single step; 0 is tested apart
            lens = [5, 3, 1][:B] if B > 1 else [4]
        case = dict(op=op, direction=direction, H=(1, 3, 4, 5, 8)[n % 5], I=(2, 3)[n % 2],
                    S=S, B=B, lbr=lbr, bias=bias, init=init, peep=peep, layout=layout,
                    lens=lens)
        if outs[n % len(outs)] is not None:
            case["outs"] = outs[n % len(outs)]
        cases.append(case)
    return cases


# -O0: the C of a few hundred kernels builds in a few seconds instead of 15 (the
# C is the same; warnings are still errors).
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_every_attribute_combination_matches_onnxruntime(op, direction):
    _check(_product(op, direction), seed=len(op) + len(direction), opt="-O0")


def test_gru_linear_before_reset_adds_recurrent_h_bias_once():
    """What every PyTorch GRU export uses; a large R_bh makes a double add plain."""
    cases = [dict(op="GRU", direction=d, H=4, I=3, S=6, B=2, lbr=1, bias=1, init=i)
             for d in ("forward", "bidirectional") for i in (0, 1)]
    _check(cases, seed=11)


ACTS = ["Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
        "HardSigmoid", "Elu", "Softsign", "Softplus"]


def _act_cases():
    cases = []
    for op, per in (("RNN", 1), ("GRU", 2), ("LSTM", 3)):
        base = dict(op=op, H=3, I=2, S=4, B=2, bias=1, init=1)
        for n in range(0, len(ACTS), per):
            acts = [ACTS[(n + j) % len(ACTS)] for j in range(per)]
            # alpha/beta are consumed in the order of the functions that take them
            cases.append(dict(base, direction="forward", activations=acts,
                              activation_alpha=[0.3, 0.6, 0.9], activation_beta=[0.2, 1.5]))
        both = (["LeakyRelu", "Sigmoid", "Tanh"][:per] + ["Tanh", "HardSigmoid", "Elu"][:per])
        cases.append(dict(base, direction="bidirectional", activations=both,
                          activation_alpha=[0.05, 0.25, 0.7]))
        # defaults of alpha/beta; lower-case names (onnxruntime's GRU and LSTM take them)
        names = ["HardSigmoid", "LeakyRelu", "Elu"][:per]
        cases.append(dict(base, direction="reverse",
                          activations=[n.lower() for n in names] if per > 1 else names))
        for clip in (0.3, 2.0):
            cases.append(dict(base, direction="bidirectional", clip=clip, lbr=1,
                              peep=op == "LSTM", lens=[4, 2]))
    lstm = dict(op="LSTM", H=3, I=2, S=4, B=2, bias=1, init=1)
    cases += [dict(lstm, direction=d, input_forget=1, peep=1, clip=cl)
              for d in ("forward", "bidirectional") for cl in (None, 0.5)]
    return cases


def test_activations_clip_and_input_forget_match_onnxruntime():
    _check(_act_cases(), seed=5)


def test_run_time_weights_take_the_loop_kernel_and_match_onnxruntime():
    """W and R as graph inputs: the op's own dot-product loops (the GEMV schedule
    needs them constant to store them transposed)."""
    cases = [dict(op=op, direction=d, H=4, I=3, S=5, B=2, bias=1, init=1, lbr=lbr,
                  weights_input=1, peep=op == "LSTM")
             for op in GATES for d in ("forward", "bidirectional") for lbr in (0, 1)
             if lbr == 0 or op == "GRU"]
    _check(cases, seed=11)
    model, _, _ = _models(cases[:1])
    assert not [o for o in mtvm.compile(model).metadata["operators"] if o.get("schedule")]


@pytest.mark.parametrize("op", sorted(GATES))
def test_gemv_schedule_over_several_column_blocks(op):
    """Hidden sizes whose gate rows span several GEMV column blocks (8 on the
    portable path, 32/64 with AVX2/AVX-512) and end in a partial block, with
    input widths of 1 and odd ones (the micro-kernel steps two taps at a time)."""
    cases = [dict(op=op, direction=d, H=H, I=I, S=3, B=2, bias=bias, init=1, lbr=lbr)
             for d, H, I, bias, lbr in (("forward", 37, 1, 1, 0), ("bidirectional", 23, 5, 0, 1),
                                        ("reverse", 70, 4, 1, 1))]
    _check(cases, seed=12)                          # portable: 8-column blocks
    _check(cases, seed=12, extra=["-march=native"])   # AVX2 / AVX-512 blocks on x86
    model, _, _ = _models(cases)
    names = {o.get("schedule") for o in mtvm.compile(model).metadata["operators"]}
    assert f"{op.lower()}_f32.gemv" in names


@pytest.mark.parametrize("op", sorted(GATES))
def test_input_projection_batched_over_steps(op, monkeypatch):
    """Batch 1 with 16 inputs or more: W x of `input_steps` steps at a time as one GEMM
    (sequences shorter than a block, one block, several and a partial last one; every
    direction and layout; 4, 8 and 12 steps), portable and with the x86 SIMD kernels;
    batch 2 and a run-time sequence_lens keep it per step, and stay right."""
    from mtvm import host_runner
    cases = []
    for n, (d, S, layout) in enumerate(itertools.product(
            ("forward", "reverse", "bidirectional"), (1, 5, 8, 13), (0, 1))):
        cases.append(dict(op=op, direction=d, H=(5, 16, 9)[n % 3], I=(16, 37)[n % 2], S=S,
                          B=1, bias=n % 2, init=(n // 2) % 2, lbr=n % 2 * (op == "GRU"),
                          peep=n % 2 * (op == "LSTM"), layout=layout))
    cases += [dict(op=op, direction="bidirectional", H=6, I=20, S=7, B=2, bias=1, init=1),
              dict(op=op, direction="forward", H=6, I=20, S=7, B=1, bias=1, lens=[5])]
    sched = f"{op.lower()}_f32.gemv"
    for steps in (8, 4, 12):
        monkeypatch.setattr(mtvm, "compile", _with_config(mtvm.compile, {sched: {
            "input_steps": steps}}))
        lib = _check(cases, seed=13 + steps)
        _check(cases, seed=13 + steps, extra=["-march=native"])
        src = "".join(lib.sources[f] for f in lib.sources if f.endswith("_kernels.c"))
        # every case but the last two (batch 2; sequence_lens) projects its steps
        assert src.count(f"W x of {steps} steps") == len(cases) - 2
    if cpu_has("avx2"):
        flags = host_runner.SANITIZE_FLAGS
        monkeypatch.setattr(host_runner, "SANITIZE_FLAGS", flags + ["-march=x86-64-v3"])
        model, _, feed = _models(cases, 3)
        mtvm.compile(model).run_host(feed, sanitize=True)


def _with_config(compile_, config):
    def compile_with(model, *a, **kw):
        kw.setdefault("schedule_config", config)
        return compile_(model, *a, **kw)
    return compile_with


def test_sequence_length_zero_gives_zero_states():
    """onnxruntime's reading: an entry of length 0 runs no step; Y, Y_h and Y_c
    are 0 there (not the initial state)."""
    cases = [dict(op=op, direction=d, H=3, I=2, S=4, B=3, bias=1, init=1, lens=[0, 2, 4])
             for op in GATES for d in ("forward", "reverse", "bidirectional")]
    _check(cases, seed=3)


def test_float64_matches_onnxruntime():
    """double C. onnxruntime runs these ops only in float: it gets the same
    values rounded to float, the C in double must agree within 1e-5 (and with
    the reference in double to the last bits)."""
    cases = [dict(op=op, direction="bidirectional", H=3, I=2, S=3, B=2, bias=1, init=1,
                  lbr=1, lens=[3, 2], peep=op == "LSTM") for op in GATES]
    model, _, feed = _models(cases, seed=9, dtype=np.float64)
    _, ort_model, feed32 = _models(cases, seed=9, dtype=np.float32)
    expected = _onnxruntime(ort_model, feed32)
    lib = mtvm.compile(model)
    got, ref = lib.run_host(feed), interpret(lib.graph, feed)
    for name, e in expected.items():
        assert got[name].dtype == np.float64
        np.testing.assert_allclose(got[name], e, atol=TOL, rtol=0, err_msg=name)
        np.testing.assert_allclose(got[name], ref[name], atol=1e-12, rtol=0, err_msg=name)


def test_out_of_range_run_time_sequence_lens_read_nothing_outside_x():
    """sequence_lens is data: values past X's length or negative are clamped in
    the C (onnxruntime refuses them), checked under ASan/UBSan."""
    cases = [dict(op=op, direction="reverse", H=3, I=2, S=4, B=3, bias=1, init=1,
                  lens=[99, -7, 2]) for op in GATES]
    model, _, feed = _models(cases, seed=2)
    lib = mtvm.compile(model)
    clamped = dict(feed)
    for c in range(len(cases)):
        clamped[f"c{c}_sl"] = np.array([4, 0, 2], np.int32)
    _, ort_model, _ = _models(cases, seed=2)
    expected = _onnxruntime(ort_model, clamped)
    got = lib.run_host(feed, sanitize=True)
    for name, e in expected.items():
        np.testing.assert_allclose(got[name], e, atol=TOL, rtol=0, err_msg=name)


def _one_node_error(op, attrs=None, *, S=4, B=2, H=3, I=2, dirs=1, w_rows=None, lens=None,
                    h0_shape=None):
    G = GATES[op]
    inits = [numpy_helper.from_array(np.zeros((dirs, w_rows or G * H, I), np.float32), "w"),
             numpy_helper.from_array(np.zeros((dirs, G * H, H), np.float32), "r")]
    names = ["x", "w", "r"]
    if lens is not None:
        inits.append(numpy_helper.from_array(np.array(lens, np.int32), "sl"))
        names += ["", "sl"]
    if h0_shape is not None:
        inits.append(numpy_helper.from_array(np.zeros(h0_shape, np.float32), "h0"))
        names += [""] * (5 - len(names)) + ["h0"]
    node = helper.make_node(op, names, ["y"], name="rnn_node", hidden_size=H,
                            **(attrs or {}))
    g = helper.make_graph([node], "bad", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (S, B, I))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, ["s", "d", "b", "h"])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
    m.ir_version = 10
    with pytest.raises(MtvmError) as e:
        mtvm.compile(m)
    msg = str(e.value)
    assert "\n" not in msg and 'node "rnn_node"' in msg and op in msg and "opset 22" in msg
    return msg


@pytest.mark.parametrize("op,kwargs,words", [
    ("GRU", dict(lens=[4, 5]), "sequence_lens [4, 5] are not all in [0, 4]"),
    ("LSTM", dict(lens=[-1, 2]), "sequence_lens"),
    ("RNN", dict(attrs={"activations": ["Tanh", "Tanh"]}), "needs 1 activations, got 2"),
    ("GRU", dict(attrs={"activations": ["Sigmoid", "Gelu"]}), "activation 'Gelu' is not supp"),
    ("GRU", dict(attrs={"activations": ["Sigmoid", "*/ x\nint y;"]}), "'*/ x\\nint y;'"),
    ("LSTM", dict(attrs={"activations": ["Affine", "Tanh", "Tanh"]}), "needs its alpha"),
    ("RNN", dict(attrs={"activations": ["ThresholdedRelu"]}), "needs its alpha"),
    ("GRU", dict(attrs={"direction": "sideways"}), "direction 'sideways'"),
    ("LSTM", dict(attrs={"layout": 2}), "layout 2"),
    ("GRU", dict(attrs={"clip": -1.0}), "clip must be a positive"),
    ("GRU", dict(w_rows=7), "W has shape [1, 7, 2], expected [1, 9, 2]"),
    ("GRU", dict(h0_shape=(2, 2, 3)), "initial_h has shape [2, 2, 3], expected [1, 2, 3]"),
    ("LSTM", dict(S=0), "X has shape [0, 2, 2]: an empty sequence"),
])
def test_invalid_recurrent_nodes_fail_with_one_clear_line(op, kwargs, words):
    assert words in _one_node_error(op, **kwargs)


def test_macs_are_reported():
    cases = [dict(op="LSTM", direction="bidirectional", H=3, I=2, S=4, B=2)]
    model, _, _ = _models(cases)
    md = mtvm.compile(model).metadata
    assert [o["macs"] for o in md["operators"]] == [4 * 2 * 2 * 12 * (2 + 3)]


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_pytorch_export_matches_torch_and_onnxruntime(kind):
    """A PyTorch nn.GRU / nn.LSTM (2 layers, bidirectional, batch_first) exported
    to ONNX: mtvm matches torch's own outputs and onnxruntime."""
    model = onnx.load(os.path.join(DATA, f"torch_{kind}.onnx"))
    data = np.load(os.path.join(DATA, f"torch_{kind}.npz"))
    ops = {n.op_type for n in model.graph.node}
    assert kind.upper() in ops
    if kind == "gru":
        assert all(helper.get_attribute_value(a) == 1 for n in model.graph.node
                   if n.op_type == "GRU" for a in n.attribute if a.name == "linear_before_reset")
    feed = {i.name: data[f"in_{i.name}"] for i in model.graph.input}
    got = mtvm.compile(model).run_host(feed)
    from_ort = _onnxruntime(model, feed)
    for o in model.graph.output:
        np.testing.assert_allclose(got[o.name], data[f"out_{o.name}"], atol=TOL, rtol=0,
                                   err_msg=f"{kind} {o.name} vs torch")
        np.testing.assert_allclose(got[o.name], from_ort[o.name], atol=TOL, rtol=0,
                                   err_msg=f"{kind} {o.name} vs onnxruntime")


@pytest.mark.device
@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="QEMU or arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("what", ["gru", "lstm", "activations"])
def test_on_mps2_an386_matches_onnxruntime(what, tmp_path):
    """The same C on a Cortex-M4 (newlib's expf, tanhf, expm1f, log1pf) under QEMU:
    the PyTorch exports, and every activation with clip in one model."""
    if what == "activations":
        model, ort_model, feed = _models(_act_cases(), seed=5)
    else:
        model = ort_model = onnx.load(os.path.join(DATA, f"torch_{what}.onnx"))
        data = np.load(os.path.join(DATA, f"torch_{what}.npz"))
        feed = {i.name: data[f"in_{i.name}"] for i in model.graph.input}
    expected = _onnxruntime(ort_model, feed)
    got = run_on_board(mtvm.compile(model), feed, tmp_path / "proj")
    for name, e in expected.items():
        np.testing.assert_allclose(got[name], e, atol=TOL, rtol=0, err_msg=name)


@pytest.mark.device
@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="QEMU or arm-none-eabi-gcc not installed")
def test_m4f_schedules_start_the_gates_from_the_bias_and_match_onnxruntime(tmp_path):
    """Built for the Cortex-M4F itself (the sixteen-column VFP GEMVs, mtvm/schedules/
    arm_dsp/recurrent_f32.py): RNN, LSTM and GRU with linear_before_reset gates as
    (Wb + Rb) + W x, then + R h in place (mtvm_f32_gemv16_packed_init_vfp; without a bias
    W x alone first), GRU's R_h h from Rb_h apart (R_h packed apart); GRU without
    linear_before_reset with its pass over the rows; the activations a row range at a time
    (odd counts: the last value in C), an LSTM with peepholes value by value; the weights
    packed; hidden sizes with and without a partial block of sixteen gate rows, both
    directions, initial states, batch 2 with sequence lengths."""
    from mtvm.boards import load_board
    from mtvm.target import Target
    cases = []
    # GRU without linear_before_reset reads R's columns 2H.. apart: packed apart
    for n, (op, H, bias, lbr) in enumerate([
            ("LSTM", 16, 1, 0), ("LSTM", 5, 1, 0), ("LSTM", 6, 0, 0), ("RNN", 16, 1, 0),
            ("RNN", 17, 0, 0), ("GRU", 16, 1, 0), ("GRU", 20, 1, 0), ("GRU", 21, 0, 1),
            ("GRU", 24, 1, 1)]):
        cases.append(dict(op=op, direction=("bidirectional", "forward", "reverse")[n % 3],
                          H=H, I=(12, 3)[n % 2], S=4, B=(1, 2)[n % 2], bias=bias, lbr=lbr,
                          init=n % 2, peep=op == "LSTM" and n == 1,
                          lens=[4, 2] if n % 2 else None))
    model, ort_model, feed = _models(cases, seed=21)
    expected = _onnxruntime(ort_model, feed)
    lib = mtvm.compile(model, target=Target.from_board(load_board("mps2-an386")))
    src = lib.sources["codegen/host/src/tvmgen_default_kernels.c"]
    # R h in place in the 5 RNN/LSTM, W x from the bias in the 3 with one; GRU with
    # linear_before_reset: R_zr h in place in both, W x and R_h h from the bias in one
    assert src.count("mtvm_f32_gemv16_packed_init_vfp(") == 5 + 3 + 2 + 2
    assert src.count("mtvm_sigmoid_f32_inplace(") == 2 + 4    # LSTM without peepholes, GRU
    assert src.count("mtvm_tanh_f32_inplace(") == 2 * 2 + 2 + 4
    got = run_on_board(lib, feed, tmp_path / "proj")
    for name, e in expected.items():
        np.testing.assert_allclose(got[name], e, atol=TOL, rtol=0, err_msg=name)
