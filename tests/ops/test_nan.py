"""NaN and +-inf propagate as in the ONNX reference (NumPy semantics: Relu(NaN) = NaN,
Clip(NaN) = NaN, Max(NaN, x) = NaN, a max pool over a window holding a NaN = NaN) in
every kernel and every fused activation tail, on each build of the generated C: the
host's SIMD (-O3 -march=native: AVX2 or AVX-512 micro-kernels), AVX2 on an AVX-512
host, and portable C (-O3 without -march: the scalar micro-kernels, gcc's own SSE2).

The special values sit at positions a vector body handles and at positions its tail
handles (sizes that are not a multiple of any vector width). Results are compared with
np.testing.assert_array_equal (NaN == NaN there), or for sums of products by their
NaN/+inf/-inf positions and the finite values within 1e-4."""
import os
import platform

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import mtvm
from mtvm.host_runner import HostModule
from mtvm.testing import have, make_model, models_dir, run_on_board, subgraph
from mtvm.testing import reference_outputs as onnx_reference

# NaN and inf in the inputs are the point here: NumPy's warnings about them are not.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning",
                                        "ignore:overflow:RuntimeWarning",
                                        "ignore:divide by zero:RuntimeWarning")

NAN, INF = np.float32(np.nan), np.float32(np.inf)


def host_has(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return f" {flag}" in f.read()
    except OSError:
        return False


X86 = platform.machine() in ("x86_64", "AMD64")
# (name, optimization, extra flags) of every build the results are checked on.
BUILDS = [("native", "-O3", ["-march=native"]), ("portable", "-O3", [])]
if X86 and host_has("avx512f"):
    BUILDS.append(("avx2", "-O3", ["-mavx2", "-mfma"]))


def special(shape, nan=(), pinf=(), ninf=(), seed=0) -> np.ndarray:
    """Normal data with NaN, +inf and -inf at the given flat positions."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[list(nan)] = NAN
    flat[list(pinf)] = INF
    flat[list(ninf)] = -INF
    return x


def graph_model(nodes, inputs: dict, outputs, consts=None, opset=17) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes, "nan",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (consts or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def reference_outputs(model, inputs):
    with np.errstate(all="ignore"):
        return onnx_reference(model, inputs)


def run_builds(lib, inputs: dict):
    """(build name, outputs) for every build of BUILDS."""
    for name, opt, extra in BUILDS:
        yield name, HostModule(lib, opt=opt, extra=extra).run(inputs)


def assert_same_specials(got, expected, what: str) -> None:
    """Same NaN, +inf and -inf positions; finite values within 1e-4 of the magnitude."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, what
    for label, fn in (("NaN", np.isnan), ("+inf", lambda a: a == np.inf),
                      ("-inf", lambda a: a == -np.inf)):
        bad = np.flatnonzero(fn(got) != fn(expected))
        assert bad.size == 0, f"{what}: {label} positions differ at flat {bad[:10].tolist()}"
    fin = np.isfinite(expected)
    scale = max(float(np.max(np.abs(expected[fin]), initial=0.0)), 1.0)
    np.testing.assert_allclose(got[fin], expected[fin], rtol=0, atol=1e-4 * scale,
                               err_msg=what)


def kernel_source(lib) -> str:
    return next(t for p, t in lib.sources.items() if p.endswith("_kernels.c"))


# -- elementwise activations and Max/Min, standalone and as fused tails --------------

N = 67   # not a multiple of 4, 8 or 16: vector bodies and scalar tails
X = special((1, N), nan=[0, 3, 8, 15, 16, 31, 33, 48, 63, 64, 66], pinf=[5, 17, 40, 65],
            ninf=[6, 18, 41, 62], seed=1)
Y = special((1, N), nan=[0, 1, 9, 16, 32, 47, 63, 65], pinf=[6, 19, 41, 66],
            ninf=[5, 20, 40, 64], seed=2)


def test_activations_and_minmax():
    """Each node its own kernel (each output is a graph output): the generic
    elementwise loop, which gcc vectorizes."""
    nodes = [helper.make_node("Relu", ["x"], ["relu"]),
             helper.make_node("LeakyRelu", ["x"], ["leaky"], alpha=0.1),
             helper.make_node("Clip", ["x", "zero", "six"], ["clip06"]),
             helper.make_node("Clip", ["x", "zero"], ["clip_lo"]),
             helper.make_node("Clip", ["x", "", "six"], ["clip_hi"]),
             helper.make_node("HardSigmoid", ["x"], ["hsig"]),
             helper.make_node("HardSwish", ["x"], ["hswish"]),
             helper.make_node("Abs", ["x"], ["abs"]),
             helper.make_node("Celu", ["x"], ["celu"], alpha=0.5),
             helper.make_node("Sign", ["x"], ["sign"]),
             helper.make_node("Max", ["x", "y"], ["max_xy"]),
             helper.make_node("Max", ["y", "x"], ["max_yx"]),
             helper.make_node("Min", ["x", "y"], ["min_xy"]),
             helper.make_node("Min", ["y", "x"], ["min_yx"]),
             helper.make_node("Max", ["x", "zero"], ["max_x0"]),
             helper.make_node("Max", ["zero", "x"], ["max_0x"]),
             helper.make_node("Min", ["six", "x"], ["min_6x"]),
             helper.make_node("Max", ["x", "y", "x"], ["max3"]),
             helper.make_node("Min", ["y", "x", "y"], ["min3"]),
             helper.make_node("Max", ["x", "row"], ["max_bcast"])]
    outs = [n.output[0] for n in nodes]
    row = special((N,), nan=[7, 66], pinf=[8], ninf=[9], seed=3)
    consts = {"zero": np.float32(0), "six": np.float32(6), "row": row}
    m = graph_model(nodes, {"x": X, "y": Y}, outs, consts)
    lib = mtvm.compile(m)
    expected = reference_outputs(m, {"x": X, "y": Y})
    assert np.isnan(expected[0]).sum() == 11   # the reference keeps NaN through Relu
    for build, got in run_builds(lib, {"x": X, "y": Y}):
        for name, e in zip(outs, expected):
            if name == "celu":   # expf: rounding apart
                assert_same_specials(got[name], e, f"{name}, {build}")
            else:
                np.testing.assert_array_equal(got[name], e, err_msg=f"{name}, {build}")


def test_fused_tails_on_elementwise_anchors():
    """Relu, Clip, LeakyRelu, Max and Min fused as tails of an Add/Mul/Sub kernel
    (one kernel each), with NaN from either operand."""
    nodes = [helper.make_node("Add", ["x", "y"], ["a"]),
             helper.make_node("Relu", ["a"], ["relu"]),
             helper.make_node("Mul", ["x", "y"], ["b"]),
             helper.make_node("Clip", ["b", "zero", "six"], ["clip"]),
             helper.make_node("Sub", ["x", "y"], ["c"]),
             helper.make_node("Max", ["c", "zero"], ["maxc"]),
             helper.make_node("Sub", ["y", "x"], ["d"]),
             helper.make_node("Min", ["z", "d"], ["mind"]),
             helper.make_node("Add", ["y", "x"], ["e"]),
             helper.make_node("LeakyRelu", ["e"], ["leaky"], alpha=0.2)]
    outs = ["relu", "clip", "maxc", "mind", "leaky"]
    z = special((1, N), nan=[2, 30, 66], seed=4)
    inputs = {"x": X, "y": Y, "z": z}
    m = graph_model(nodes, inputs, outs, {"zero": np.float32(0), "six": np.float32(6)})
    lib = mtvm.compile(m)
    assert sorted((n.op, tuple(t.op for t in n.tail)) for n in lib.graph.nodes) == sorted(
        [("Add", ("Relu",)), ("Mul", ("Clip",)), ("Sub", ("Max",)), ("Sub", ("Min",)),
         ("Add", ("LeakyRelu",))])
    expected = reference_outputs(m, inputs)
    for build, got in run_builds(lib, inputs):
        for name, e in zip(outs, expected):
            np.testing.assert_array_equal(got[name], e, err_msg=f"{name}, {build}")


def test_rnn_relu_activation():
    """RNN with the Relu activation (the recurrent kernel's own C form): a NaN at step 1
    reaches every hidden unit then and after, as Relu(NaN) = NaN in NumPy (onnxruntime's
    RNN turns it into 0 while its Relu operator keeps it; onnx.reference has no Relu
    activation for RNN, so the reference is written out here)."""
    r = np.random.default_rng(15)
    S, I, H = 4, 3, 5
    w = r.standard_normal((1, H, I)).astype(np.float32)
    rw = r.standard_normal((1, H, H)).astype(np.float32)
    x = special((S, 1, I), nan=[4], seed=16)
    m = graph_model([helper.make_node("RNN", ["x", "w", "r"], ["y"], hidden_size=H,
                                      activations=["Relu"])], {"x": x}, ["y"],
                    {"w": w, "r": rw})
    h, want = np.zeros((1, H), np.float32), []
    for t in range(S):
        h = np.maximum(x[t] @ w[0].T + h @ rw[0].T, 0)
        want.append(h)
    want = np.stack(want)[:, None]
    assert np.isnan(want[0]).sum() == 0 and np.isnan(want[1:]).all()
    for build, got in run_builds(mtvm.compile(m), {"x": x}):
        assert_same_specials(got["y"], want, build)


# -- the conv and matrix schedules with a fused activation ----------------------------

def conv_relu_model(x, w_shape, attrs, act="Relu", seed=0):
    r = np.random.default_rng(seed)
    w = r.standard_normal(w_shape).astype(np.float32)
    b = r.standard_normal(w_shape[0]).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs)]
    consts = {"w": w, "b": b}
    if act == "Clip":
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
        consts.update(lo=np.float32(0), hi=np.float32(6))
    elif act == "Max":
        nodes.append(helper.make_node("Max", ["c", "lo"], ["y"]))
        consts.update(lo=np.float32(0))
    else:
        nodes.append(helper.make_node(act, ["c"], ["y"]))
    return graph_model(nodes, {"x": x}, ["y"], consts)


def scatter_specials(shape, seed):
    """Input whose NaN/inf land in the first, a middle and the last output
    columns/rows (vector bodies and tails of every schedule)."""
    size = int(np.prod(shape))
    r = np.random.default_rng(seed)
    pos = r.choice(size, size=max(3, size // 60), replace=False)
    third = len(pos) // 3
    return special(shape, nan=[0, size - 1, *pos[:third]], pinf=pos[third:2 * third],
                   ninf=pos[2 * third:], seed=seed)


# (id, x shape, w shape, attributes, fused activation, schedule named in the C)
CONV_CASES = [
    ("pointwise", (1, 8, 5, 7), (16, 8, 1, 1), {}, "Relu", "pointwise GEMM"),
    ("window", (1, 3, 9, 19), (10, 3, 3, 3), {"pads": [1, 1, 1, 1]}, "Relu",
     "window rows GEMM"),
    ("im2col", (1, 3, 9, 5), (10, 3, 3, 3), {"pads": [1, 1, 1, 1]}, "Max", "im2col GEMM"),
    ("depthwise", (1, 6, 7, 21), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}, "Relu",
     "depthwise"),
    ("depthwise_s2", (1, 5, 9, 9), (5, 1, 3, 3),
     {"group": 5, "pads": [1, 1, 1, 1], "strides": [2, 2]}, "Max", "depthwise"),
    ("direct", (1, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, "Relu", None),
    ("conv1d", (1, 3, 37), (5, 3, 3), {"pads": [1, 1]}, "Relu", None),
]


@pytest.mark.parametrize("name,x_shape,w_shape,attrs,act,schedule", CONV_CASES,
                         ids=[c[0] for c in CONV_CASES])
def test_conv_schedules_fused_activation(name, x_shape, w_shape, attrs, act, schedule):
    x = scatter_specials(x_shape, seed=len(name))
    m = conv_relu_model(x, w_shape, attrs, act, seed=len(name))
    lib = mtvm.compile(m)
    assert [(n.op, [t.op for t in n.tail]) for n in lib.graph.nodes] == [("Conv", [act])]
    if schedule:
        assert f"Schedule: {schedule}" in kernel_source(lib)
    expected = reference_outputs(m, {"x": x})[0]
    assert np.isnan(expected).any() and not np.isnan(expected).all()
    for build, got in run_builds(lib, {"x": x}):
        assert_same_specials(got["y"], expected, f"{name}, {build}")


def test_gemm_matmul_fused_activation():
    """Gemm batch 1 (the GEMV micro-kernel) and batch 3 (the register-blocked core,
    column blocks and leftover columns), MatMul, each with a fused Relu/Clip."""
    r = np.random.default_rng(5)
    w = r.standard_normal((24, 37)).astype(np.float32)
    b = r.standard_normal(37).astype(np.float32)
    x1 = special((1, 24), nan=[3], pinf=[7], seed=6)
    x3 = special((3, 24), nan=[0], ninf=[30], seed=7)     # rows 0 and 1
    nodes = [helper.make_node("Gemm", ["x1", "w", "b"], ["g1"]),
             helper.make_node("Relu", ["g1"], ["y1"]),
             helper.make_node("Gemm", ["x3", "w", "b"], ["g3"]),
             helper.make_node("Clip", ["g3", "lo", "hi"], ["y3"]),
             helper.make_node("MatMul", ["x3", "w"], ["mm"]),
             helper.make_node("Relu", ["mm"], ["y4"])]
    inputs = {"x1": x1, "x3": x3}
    m = graph_model(nodes, inputs, ["y1", "y3", "y4"],
                    {"w": w, "b": b, "lo": np.float32(-1), "hi": np.float32(1)})
    lib = mtvm.compile(m)
    assert all(len(n.tail) == 1 for n in lib.graph.nodes) and len(lib.graph.nodes) == 3
    assert "Schedule: GEMV" in kernel_source(lib)
    expected = reference_outputs(m, inputs)
    for build, got in run_builds(lib, inputs):
        for name, e in zip(["y1", "y3", "y4"], expected):
            assert_same_specials(got[name], e, f"{name}, {build}")


# -- pooling -------------------------------------------------------------------------

def np_pool(x, kernel, strides, pads, kind):
    """Independent NumPy 2-D pooling (the ONNX reference evaluator drops NaN in
    MaxPool and AveragePool: it pads with NaN and takes nanmax/nanmean)."""
    kh, kw = kernel
    sh, sw = strides
    pt, pl, pb, pr = pads
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)),
                constant_values=fill)
    inside = np.pad(np.ones(x.shape[2:]), ((pt, pb), (pl, pr)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    if kind == "max":
        return win.max(axis=(-2, -1)).astype(np.float32)
    count = np.lib.stride_tricks.sliding_window_view(inside, (kh, kw))[::sh, ::sw].sum((-2, -1))
    return (win.sum(axis=(-2, -1)) / count).astype(np.float32)


POOL_X = special((2, 3, 11, 19), nan=[0, 20, 37, 209, 250, 418, 1253], pinf=[5, 100, 700],
                 ninf=[6, 101, 419, 900, 1000], seed=8)


POOLS = [("max3x3s2", "MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2],
                                   "pads": [1, 1, 1, 1]}),
         ("max2x2s1", "MaxPool", {"kernel_shape": [2, 2], "strides": [1, 1]}),
         ("avg3x3s2", "AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2],
                                      "pads": [1, 1, 1, 1]})]


def test_pool_windows():
    x = POOL_X
    nodes = [helper.make_node(op, ["x"], [name], **attrs) for name, op, attrs in POOLS]
    lib = mtvm.compile(graph_model(nodes, {"x": x}, [name for name, _, _ in POOLS]))
    expected = {name: np_pool(x, a["kernel_shape"], a["strides"], a.get("pads", [0] * 4),
                              "max" if op == "MaxPool" else "avg")
                for name, op, a in POOLS}
    assert all(np.isnan(e).any() and np.isinf(e).any() for e in expected.values())
    for build, got in run_builds(lib, {"x": x}):
        for name, op, _ in POOLS:
            if op == "MaxPool":
                np.testing.assert_array_equal(got[name], expected[name],
                                              err_msg=f"{name}, {build}")
            else:
                assert_same_specials(got[name], expected[name], f"{name}, {build}")


def test_maxpool_indices_point_at_the_first_nan():
    """The Indices output: the first NaN of a window holding one (np.argmax), else
    the first maximum."""
    x = special((1, 1, 4, 6), nan=[1, 2, 9, 20], pinf=[3], ninf=[16], seed=9)
    m = make_model("MaxPool", {"x": x}, {"kernel_shape": [2, 2], "strides": [2, 2]},
                   n_outputs=2)
    lib = mtvm.compile(m)
    y, idx = lib.run_host({"x": x}).values()
    np.testing.assert_array_equal(y, np_pool(x, (2, 2), (2, 2), (0, 0, 0, 0), "max"))
    flat = x.reshape(-1)
    want = []
    for oh in range(2):
        for ow in range(3):
            taps = [(2 * oh + i) * 6 + 2 * ow + j for i in range(2) for j in range(2)]
            want.append(taps[int(np.argmax(flat[taps]))])
    assert want[:2] == [1, 2]
    assert idx.reshape(-1).tolist() == want


def test_global_pools_and_fused_relu():
    """GlobalMaxPool over planes whose NaN is first, last, in the middle or absent,
    GlobalAveragePool, and a MaxPool with a fused Relu."""
    x = special((1, 6, 5, 7), nan=[0, 35 + 34, 70 + 17, 175 + 3, 175 + 20],
                pinf=[105 + 4], ninf=[140 + 6], seed=10)
    nodes = [helper.make_node("GlobalMaxPool", ["x"], ["gmax"]),
             helper.make_node("GlobalAveragePool", ["x"], ["gavg"]),
             helper.make_node("MaxPool", ["x"], ["mp"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["mp"], ["mp_relu"])]
    m = graph_model(nodes, {"x": x}, ["gmax", "gavg", "mp_relu"])
    lib = mtvm.compile(m)
    assert any(n.op == "MaxPool" and [t.op for t in n.tail] == ["Relu"]
               for n in lib.graph.nodes)
    gmax = x.max(axis=(2, 3), keepdims=True)
    gavg = x.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(np.float32)
    mp = np.maximum(np_pool(x, (3, 3), (1, 1), (1, 1, 1, 1), "max"), 0)
    assert np.isnan(gmax).sum() == 4
    for build, got in run_builds(lib, {"x": x}):
        np.testing.assert_array_equal(got["gmax"], gmax, err_msg=build)
        assert_same_specials(got["gavg"], gavg, build)
        np.testing.assert_array_equal(got["mp_relu"], mp, err_msg=build)


# -- reductions, ArgMax, Softmax -------------------------------------------------------

ROW = 37   # >= 16: ReduceSum/Mean take the eight-lane loop, with a tail of 5
# One row per pattern: none, NaN first, NaN last, NaN in the lanes + inf, +inf and
# -inf, all -inf, a NaN beside +inf.
ROWS = np.stack([
    special((ROW,), seed=20),
    special((ROW,), nan=[0], seed=21),
    special((ROW,), nan=[ROW - 1], seed=22),
    special((ROW,), nan=[9], pinf=[3], ninf=[33], seed=23),
    special((ROW,), pinf=[4], ninf=[20], seed=24),
    np.full(ROW, -INF),
    special((ROW,), nan=[30], pinf=[31], seed=25),
    special((ROW,), pinf=[12, 36], seed=26),
])

REDUCE_OPS = ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean", "ReduceL1",
              "ReduceSumSquare", "ReduceLogSumExp", "ReduceProd"]


def ort_outputs(model, inputs):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model.SerializeToString(), so,
                             providers=["CPUExecutionProvider"])
    return s.run(None, inputs)


def test_reductions_argmax_softmax():
    """Every reduction along the rows (axis 1: contiguous) and along the columns
    (axis 0: strided), ArgMax/ArgMin (first and last index), Softmax, LogSoftmax and
    Hardmax, against the ONNX reference (NumPy: a NaN anywhere gives NaN, np.argmax
    points at the first NaN). onnxruntime drops a NaN in ReduceMax/ArgMax/Hardmax
    depending on its position; where it is deterministic (Softmax, LogSoftmax,
    ReduceLogSumExp over infinities) it is checked too."""
    x, xt = ROWS, np.ascontiguousarray(ROWS.T)
    nodes, outs = [], []
    axes = {"ax0": np.array([0], np.int64), "ax1": np.array([1], np.int64)}
    for op in REDUCE_OPS:
        for src, ax in (("x", "ax1"), ("xt", "ax0")):
            name = f"{op}_{src}"
            nodes.append(helper.make_node(op, [src, ax], [name], keepdims=0))
            outs.append(name)
    for op in ("ArgMax", "ArgMin"):
        for last in (0, 1):
            for src, ax in (("x", 1), ("xt", 0)):
                name = f"{op}_{last}_{src}"
                nodes.append(helper.make_node(op, [src], [name], axis=ax,
                                              select_last_index=last))
                outs.append(name)
    for op in ("Softmax", "LogSoftmax", "Hardmax"):
        for src, ax in (("x", 1), ("xt", 0)):
            nodes.append(helper.make_node(op, [src], [f"{op}_{src}"], axis=ax))
            outs.append(f"{op}_{src}")
    inputs = {"x": x, "xt": xt}
    m = graph_model(nodes, inputs, outs, axes, opset=18)
    lib = mtvm.compile(m)
    expected = dict(zip(outs, reference_outputs(m, inputs)))
    # The ONNX reference's ReduceLogSumExp gives NaN for a row of -inf only (its
    # max - max); onnxruntime and mtvm give log(0) + ... = -inf.
    for src in ("x", "xt"):
        expected[f"ReduceLogSumExp_{src}"][5] = -INF
    ort = dict(zip(outs, ort_outputs(m, inputs)))
    for name in outs:
        if name.startswith(("Softmax", "LogSoftmax", "ReduceLogSumExp", "ReduceSum",
                            "ReduceMean", "ReduceL1")):
            assert_same_specials(ort[name], expected[name], f"{name}: onnxruntime")
    assert np.isnan(expected["ReduceMax_x"]).tolist() == \
        [False, True, True, True, False, False, True, False]
    assert expected["ArgMax_0_x"].reshape(-1).tolist()[1:4] == [0, ROW - 1, 9]
    for build, got in run_builds(lib, inputs):
        for name in outs:
            if name.startswith(("ReduceMax", "ReduceMin", "Arg", "Hardmax")):
                np.testing.assert_array_equal(got[name], expected[name],
                                              err_msg=f"{name}, {build}")
            else:
                assert_same_specials(got[name], expected[name], f"{name}, {build}")


def test_topk_ranks_nan_above_every_number():
    """TopK as the ONNX reference and onnxruntime: NaN is larger than +inf (first with
    largest=1, last with largest=0), equal values and NaNs in index order. Before,
    the selection's comparisons skipped NaN and could pick an element twice."""
    x, xt = ROWS, np.ascontiguousarray(ROWS.T)
    nodes, outs = [], []
    for largest in (1, 0):
        for src, ax, k in (("x", 1, 5), ("xt", 0, ROW)):
            v, i = f"v{largest}_{src}", f"i{largest}_{src}"
            nodes.append(helper.make_node("TopK", [src, f"k{k}"], [v, i], axis=ax,
                                          largest=largest))
            outs += [v, i]
    inputs = {"x": x, "xt": xt}
    consts = {"k5": np.array([5], np.int64), f"k{ROW}": np.array([ROW], np.int64)}
    m = graph_model(nodes, inputs, outs, consts, opset=18)
    expected = reference_outputs(m, inputs)
    for name, o, e in zip(outs, ort_outputs(m, inputs), expected):
        np.testing.assert_array_equal(o, e, err_msg=f"{name}: onnxruntime")
    assert np.isnan(expected[0][1, 0]) and np.isnan(expected[6][-1, 1])
    lib = mtvm.compile(m)
    for build, got in run_builds(lib, inputs):
        for name, e in zip(outs, expected):
            np.testing.assert_array_equal(got[name], e, err_msg=f"{name}, {build}")


# -- a whole model -----------------------------------------------------------------------

def kws_model():
    path = os.path.join(models_dir(), "kws_dscnn.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    return onnx.shape_inference.infer_shapes(onnx.load(path))


def test_kws_dscnn_nan_input_matches_onnxruntime():
    """The float kws_dscnn with NaN (and +-inf) in its input: its output and the
    output of its fifth conv block (Conv + fused Relu, a 4-D tensor where the NaN
    has spread over part of the plane) have onnxruntime's NaN pattern. Before,
    the fused Relu turned NaN into 0 and the model returned a probability vector."""
    model = kws_model()
    name = model.graph.input[0].name
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = special(shape, nan=[3 * 10 + 4], pinf=[400], ninf=[250], seed=12)
    relus = [n.output[0] for n in model.graph.node if n.op_type == "Relu"]
    part = subgraph(model, relus[4], [name])
    for m in (model, part):
        lib = mtvm.compile(m)
        expected = ort_outputs(m, {name: x})[0]
        got = list(lib.run_host({name: x}).values())[0]
        assert_same_specials(got, expected, m.graph.name)
        if m is model:
            assert np.isnan(expected).all()
        else:
            assert 0 < np.isnan(expected).mean() < 1


# -- on the Cortex-M4 (emulated) -------------------------------------------------------

@pytest.mark.device
@pytest.mark.skipif(not (have("qemu-system-arm") and have("arm-none-eabi-gcc")),
                    reason="needs qemu-system-arm and arm-none-eabi-gcc")
def test_nan_on_cortex_m4(tmp_path):
    """A small model of the same kernels built with the board's flags (-O2, FPU, no
    fast-math) on mps2-an386 (Cortex-M4F, QEMU): NaN and inf as on the host."""
    x = special((1, 4, 6, 10), nan=[0, 13, 59, 120, 239], pinf=[30, 200], ninf=[31, 150],
                seed=13)
    r = np.random.default_rng(14)
    w = r.standard_normal((8, 4, 3, 3)).astype(np.float32)
    dw = r.standard_normal((8, 1, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["relu"]),
             helper.make_node("Conv", ["relu", "dw"], ["d"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["d", "lo", "hi"], ["clip"]),
             helper.make_node("MaxPool", ["x"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Max", ["x", "lo"], ["mx"]),
             helper.make_node("ReduceMax", ["x", "ax"], ["rmax"], keepdims=0),
             helper.make_node("ReduceMean", ["clip", "ax"], ["rmean"], keepdims=0),
             helper.make_node("Softmax", ["rmax"], ["prob"])]
    outs = ["clip", "mp", "mx", "rmax", "rmean", "prob"]
    m = graph_model(nodes, {"x": x}, outs,
                    {"w": w, "dw": dw, "lo": np.float32(0), "hi": np.float32(6),
                     "ax": np.array([3], np.int64)}, opset=18)
    lib = mtvm.compile(m)
    expected = dict(zip(outs, reference_outputs(m, {"x": x})))
    expected["mp"] = np_pool(x, (2, 2), (2, 2), (0, 0, 0, 0), "max")
    assert np.isnan(expected["prob"]).any() and not np.isnan(expected["prob"]).all()
    got = run_on_board(lib, {"x": x}, tmp_path / "proj")
    for name in outs:
        assert_same_specials(got[name], expected[name], f"{name} on mps2-an386")
