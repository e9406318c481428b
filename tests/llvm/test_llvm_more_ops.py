"""The LLVM backend's loop nests of mtvm/codegen/llvm/loopnests_more.py against
the ONNX reference evaluator: Cast (small floats and sub-byte integers too),
the strided copies (Slice, Split, Expand, Tile, DepthToSpace, SpaceToDepth),
Pad (with fused tails), the gathers and scatters, OneHot, Trilu,
ArgMax/ArgMin, CumSum/CumProd, TopK, the losses, Attention, RotaryEmbedding,
LinearAttention, CausalConvWithState, the pools and samplers, Einsum, Col2Im,
Det, DFT/STFT, TfIdfVectorizer and the quantization ops; the integer kernels
of quantized models (QConv, QMatMul, QBatchMatMul, QAdd, ...) bit-exact
against the C backend, which specifies them.

Small models built with onnx.helper, several nodes per model (one compile and
JIT each), compiled with backend="llvm" and run in process through LLVM's JIT;
floats within 1e-4 (relative to the largest expected magnitude), integers exact.
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import mtvm

pytest.importorskip("llvmlite")

RTOL = 1e-4
F32 = TP.FLOAT


def _model(nodes, ins: dict, outs, inits: dict | None = None, opset=23):
    """A model of `nodes`; ins: name -> array fed at run time; outs: output names
    (or name -> array: its type and shape)."""
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
          for n, a in ins.items()]
    if isinstance(outs, dict):
        ov = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                            a.shape) for n, a in outs.items()]
    else:
        ov = [helper.make_tensor_value_info(n, TP.UNDEFINED, None) for n in outs]
    init = [numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()]
    g = helper.make_graph(nodes, "llvm_more", vi, ov, init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _check(nodes, ins: dict, outs: list, inits=None, opset=23, known=None):
    """Every output of the model of `nodes` as the reference evaluator computes
    it (or as given in `known`, for nodes it cannot run)."""
    known = known or {}
    ref_nodes = [n for n in nodes if not set(n.output) & set(known)]
    ref_outs = [o for o in outs if o not in known]
    ref = _model(ref_nodes, ins, ref_outs, inits, opset)
    expected = dict(zip(ref_outs, ReferenceEvaluator(ref).run(None, ins))) | known
    expected = {o: np.asarray(expected[o]) for o in outs}
    m = _model(nodes, ins, expected, inits, opset)
    got = mtvm.compile(m, backend="llvm").run_host(ins)
    bad = []
    for name in outs:
        e, a = np.asarray(expected[name]), np.asarray(got[name])
        if a.shape != e.shape:
            bad.append(f"{name}: shape {a.shape} != {e.shape}")
            continue
        if e.dtype.kind != "f":
            if not np.array_equal(a.astype(e.dtype), e):
                bad.append(f"{name}: {a.ravel()[:8]} != {e.ravel()[:8]}")
            continue
        fin = np.isfinite(e)
        err = float(np.max(np.abs(a[fin].astype(np.float64) - e[fin]), initial=0))
        scale = max(1.0, float(np.max(np.abs(e[fin]), initial=0)))
        if not err <= RTOL * scale or not np.array_equal(a[~fin], e[~fin], equal_nan=True):
            bad.append(f"{name}: error {err:.3g}")
    assert not bad, "\n".join(bad)


def _node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


rng = np.random.default_rng(3)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def test_cast_between_numeric_types():
    x = (rng.standard_normal((3, 5)) * 100).astype(np.float32)
    x[0, :3] = [0.0, -0.0, 2.5]
    i = rng.integers(-300, 300, (3, 5)).astype(np.int32)
    outs, nodes = [], []
    for j, to in enumerate([TP.DOUBLE, TP.INT32, TP.INT64, TP.INT16, TP.BOOL, TP.FLOAT]):
        nodes.append(_node("Cast", ["x"], [f"a{j}"], to=to))
        outs.append(f"a{j}")
    for j, to in enumerate([TP.FLOAT, TP.DOUBLE, TP.INT8, TP.UINT8, TP.INT64, TP.BOOL]):
        nodes.append(_node("Cast", ["i"], [f"b{j}"], to=to))
        outs.append(f"b{j}")
    nodes.append(_node("CastLike", ["i", "x"], ["c0"]))
    outs.append("c0")
    _check(nodes, {"x": x, "i": i}, outs)


def test_strided_copies():
    x = rand(2, 3, 4, 6)
    nodes = [
        _node("Slice", ["x", "s0", "e0", "a0", "st0"], ["sl0"]),
        _node("Slice", ["x", "s1", "e1", "a1", "st1"], ["sl1"]),
        _node("Split", ["x", "sp"], ["sp0", "sp1"], axis=3),
        _node("Split", ["x"], ["u0", "u1", "u2"], axis=1, num_outputs=3),
        _node("Expand", ["y", "shape"], ["ex"]),
        _node("Tile", ["x", "reps"], ["ti"]),
        _node("DepthToSpace", ["d"], ["dcr"], blocksize=2, mode="DCR"),
        _node("DepthToSpace", ["d"], ["crd"], blocksize=2, mode="CRD"),
        _node("SpaceToDepth", ["x"], ["s2d"], blocksize=2),
    ]
    inits = {"s0": np.array([0, 1, -1], np.int64), "e0": np.array([2, 3, -5], np.int64),
             "a0": np.array([0, 1, 3], np.int64), "st0": np.array([1, 1, -2], np.int64),
             "s1": np.array([3], np.int64), "e1": np.array([-100], np.int64),
             "a1": np.array([2], np.int64), "st1": np.array([-1], np.int64),
             "sp": np.array([2, 4], np.int64), "shape": np.array([2, 3, 1, 4], np.int64),
             "reps": np.array([1, 2, 1, 2], np.int64)}
    outs = ["sl0", "sl1", "sp0", "sp1", "u0", "u1", "u2", "ex", "ti", "dcr", "crd", "s2d"]
    _check(nodes, {"x": x, "y": rand(3, 1, 1), "d": rand(1, 8, 2, 3)}, outs, inits, opset=18)


def test_pad_modes():
    x = rand(2, 3, 5)
    nodes, outs = [], []
    for j, (mode, pads) in enumerate([("constant", [0, 1, 2, 1, 0, 3]),
                                      ("constant", [0, -1, 1, 0, 2, -2]),
                                      ("reflect", [0, 2, 3, 1, 1, 4]),
                                      ("edge", [1, 0, 2, 0, 3, 1]),
                                      ("wrap", [0, 1, 2, 0, 2, 3])]):
        nodes.append(_node("Pad", ["x", f"p{j}", "v"], [f"o{j}"], mode=mode))
        outs.append(f"o{j}")
    inits = {f"p{j}": np.array(p, np.int64) for j, p in enumerate(
        [[0, 1, 2, 1, 0, 3], [0, -1, 1, 0, 2, -2], [0, 2, 3, 1, 1, 4], [1, 0, 2, 0, 3, 1],
         [0, 1, 2, 0, 2, 3]])}
    # fused elementwise tails: Pad + Relu, Pad + Add of a per-channel bias
    nodes += [_node("Pad", ["x", "p3"], ["t0"], mode="edge"), _node("Relu", ["t0"], ["f0"]),
              _node("Pad", ["x", "p2"], ["t1"], mode="reflect"),
              _node("Add", ["t1", "bias"], ["f1"])]
    outs += ["f0", "f1"]
    inits["v"] = np.array(1.5, np.float32)
    inits["bias"] = rand(1, 6, 1)
    # onnx.reference does not crop with negative pads: the expected value by hand
    cropped = np.pad(x[:, 1:, :-2], [(0, 0), (0, 2), (1, 0)], constant_values=1.5)
    _check(nodes, {"x": x}, outs, inits, opset=19, known={"o1": cropped})


def test_gathers_scatters_onehot_trilu():
    x = rand(3, 4, 5)
    ge = rng.integers(-4, 4, (3, 2, 5)).astype(np.int64)
    nd = np.array([[0, 1], [2, -1], [1, 3]], np.int64)
    nodes = [
        _node("GatherElements", ["x", "ge"], ["g0"], axis=1),
        _node("GatherND", ["x", "nd"], ["g1"]),
        _node("GatherND", ["x", "ndb"], ["g2"], batch_dims=1),
        _node("ScatterElements", ["x", "se", "su"], ["s0"], axis=2, reduction="add"),
        _node("ScatterElements", ["x", "se", "su"], ["s1"], axis=2, reduction="max"),
        _node("ScatterND", ["x", "nd", "nu"], ["s2"]),
        _node("ScatterND", ["x", "nd", "nu"], ["s3"], reduction="mul"),
        _node("OneHot", ["oi", "depth", "ov"], ["h0"], axis=1),
        _node("OneHot", ["oi", "depth", "ov"], ["h1"]),
        _node("Trilu", ["x", "tk"], ["t0"], upper=1),
        _node("Trilu", ["x", "tk"], ["t1"], upper=0),
        _node("Trilu", ["ti"], ["t2"], upper=0),
    ]
    inits = {"nd": nd, "ndb": np.array([[2], [0], [3]], np.int64),
             "se": np.array([[[0, 4, -1]]] * 3, np.int64).reshape(3, 1, 3),
             "su": rand(3, 1, 3), "nu": rand(3, 5),
             "depth": np.array(4, np.int64), "ov": np.array([-1.0, 2.0], np.float32),
             "tk": np.array(1, np.int64)}
    ins = {"x": x, "ge": ge, "oi": np.array([[0, 3, -1], [2, 1, -4]], np.int64),
           "ti": rng.integers(-9, 9, (2, 3, 4)).astype(np.int32)}
    _check(nodes, ins, ["g0", "g1", "g2", "s0", "s1", "s2", "s3", "h0", "h1", "t0", "t1", "t2"],
           inits, opset=18)


def test_along_an_axis():
    x = rand(3, 6, 4)
    x[1, 2, 0] = x[1, 4, 0] = np.nan
    x[0, :, 1] = 1.0     # ties
    xi = rng.integers(-3, 3, (3, 6, 4)).astype(np.int32)
    nodes, outs = [], []
    for j, (op, attrs) in enumerate([("ArgMax", {"axis": 1}),
                                     ("ArgMin", {"axis": 1, "select_last_index": 1}),
                                     ("ArgMax", {"axis": -1, "keepdims": 0,
                                                 "select_last_index": 1}),
                                     ("ArgMin", {"axis": 0})]):
        nodes.append(_node(op, ["x"], [f"a{j}"], **attrs))
        nodes.append(_node(op, ["xi"], [f"ai{j}"], **attrs))
        outs += [f"a{j}", f"ai{j}"]
    for j, (op, attrs) in enumerate([("CumSum", {}), ("CumSum", {"exclusive": 1}),
                                     ("CumSum", {"reverse": 1}),
                                     ("CumProd", {"exclusive": 1, "reverse": 1})]):
        nodes.append(_node(op, ["y", "ax"], [f"c{j}"], **attrs))
        nodes.append(_node(op, ["xi", "ax"], [f"ci{j}"], **attrs))
        outs += [f"c{j}", f"ci{j}"]
    for j, attrs in enumerate([{"axis": 1}, {"axis": 1, "largest": 0}, {"axis": -1}]):
        nodes.append(_node("TopK", ["y", "kk"], [f"tv{j}", f"ti{j}"], **attrs))
        nodes.append(_node("TopK", ["xi", "kk"], [f"tvi{j}", f"tii{j}"], **attrs))
        outs += [f"tv{j}", f"ti{j}", f"tvi{j}", f"tii{j}"]
    inits = {"ax": np.array(1, np.int64), "kk": np.array([3], np.int64)}
    _check(nodes, {"x": x, "xi": xi, "y": rand(3, 6, 4)}, outs, inits, opset=26)


def test_losses():
    x = rand(3, 5, 2)
    t = np.array([[0, 4], [2, 1], [1, 3]], np.int64)
    w = np.abs(rand(5)) + 0.1
    nodes, outs = [], []
    for j, (red, ign, weighted) in enumerate([("mean", None, False), ("sum", 1, True),
                                              ("none", 3, True), ("mean", 4, True)]):
        attrs = {"reduction": red} | ({"ignore_index": ign} if ign is not None else {})
        ins = ["x", "t", "w"] if weighted else ["x", "t"]
        nodes.append(_node("NegativeLogLikelihoodLoss", ins, [f"n{j}"], **attrs))
        nodes.append(_node("SoftmaxCrossEntropyLoss", ins, [f"s{j}", f"lp{j}"], **attrs))
        outs += [f"n{j}", f"s{j}", f"lp{j}"]
    _check(nodes, {"x": x, "t": t}, outs, {"w": w}, opset=18)


def test_attention_variants():
    B, Hq, Hkv, S, P, D = 2, 4, 2, 3, 2, 4
    q, k, v = rand(B, Hq, S, D), rand(B, Hkv, S, D), rand(B, Hkv, S, D + 1)
    pk, pv = rand(B, Hkv, P, D), rand(B, Hkv, P, D + 1)
    nodes = [
        _node("Attention", ["q", "k", "v"], ["y0"]),
        _node("Attention", ["q", "k", "v", "mb"], ["y1"], is_causal=1, scale=0.3),
        _node("Attention", ["q", "k", "v", "mf", "pk", "pv"], ["y2", "pk2", "pv2", "qk2"],
              qk_matmul_output_mode=2, softcap=2.0),
        _node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y3", "pk3", "pv3", "qk3"],
              is_causal=1, qk_matmul_output_mode=3),
        _node("Attention", ["q3", "k3", "v3"], ["y4"], q_num_heads=4, kv_num_heads=2),
    ]
    ins = {"q": q, "k": k, "v": v, "pk": pk, "pv": pv,
           "mb": rng.random((S, S)) > 0.3, "mf": rand(B, 1, S, P + S),
           "q3": rand(B, S, Hq * D), "k3": rand(B, S, Hkv * D), "v3": rand(B, S, Hkv * 3)}
    _check(nodes, ins, ["y0", "y1", "y2", "pk2", "pv2", "qk2", "y3", "pk3", "pv3", "qk3", "y4"])


def test_rotary_linear_attention_causal_conv():
    B, S, H, D = 2, 3, 2, 8
    nodes = [
        _node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["r0"]),
        _node("RotaryEmbedding", ["x", "cos1", "sin1", "pos"], ["r1"], interleaved=1,
              rotary_embedding_dim=4),
        _node("RotaryEmbedding", ["x3", "cos2", "sin2"], ["r2"], num_heads=H),
        _node("LinearAttention", ["lq", "lk", "lv", "ls", "ld", "lb"], ["la", "lst"],
              q_num_heads=4, kv_num_heads=2),
        _node("LinearAttention", ["lq", "lk", "lv"], ["lb0", "lst0"], q_num_heads=4,
              kv_num_heads=2, update_rule="linear", scale=0.5),
        _node("CausalConvWithState", ["cx", "cw", "cb", "cs"], ["cy", "cst"], activation="silu"),
        _node("CausalConvWithState", ["cx", "cw"], ["cy2", "cst2"]),
    ]
    dk, dv = 3, 2
    ins = {"x": rand(B, H, S, D), "cos": rand(5, 4), "sin": rand(5, 4),
           "cos1": rand(5, 2), "sin1": rand(5, 2),
           "pos": np.array([[0, 4, 2], [1, 1, 3]], np.int64), "x3": rand(B, S, H * D),
           "cos2": rand(B, S, 4), "sin2": rand(B, S, 4),
           "lq": rand(B, S, 4 * dk), "lk": rand(B, S, 2 * dk), "lv": rand(B, S, 2 * dv),
           "ls": rand(B, 2, dk, dv), "ld": -np.abs(rand(B, S, 2)), "lb": np.abs(rand(B, S, 2)),
           "cx": rand(2, 3, 5), "cw": rand(3, 1, 3), "cb": rand(3), "cs": rand(2, 3, 2)}
    outs = ["r0", "r1", "r2", "la", "lst", "lb0", "lst0", "cy", "cst", "cy2", "cst2"]
    _check(nodes, ins, outs, opset=27)


def test_scatter_compress_misc():
    x = rand(2, 3, 4)
    nodes = [
        _node("TensorScatter", ["cache", "upd", "wi"], ["ts0"], mode="circular"),
        _node("TensorScatter", ["cache", "upd", "wi2"], ["ts1"]),
        _node("Compress", ["x", "cond"], ["c0"], axis=1),
        _node("Compress", ["x", "cond2"], ["c1"]),
        _node("ReverseSequence", ["rs", "lens"], ["rv"], batch_axis=0, time_axis=1),
        _node("CenterCropPad", ["x", "ccp"], ["cc"]),
        _node("BitCast", ["x"], ["bc"], to=TP.INT32),
        _node("Dropout", ["x"], ["d0", "dm"]),
    ]
    inits = {"cond": np.array([True, False, True]), "cond2": np.array([0, 1, 1, 0, 1], bool),
             "lens": np.array([2, 4], np.int64), "ccp": np.array([3, 2, 6], np.int64),
             "wi": np.array([3, 1], np.int64), "wi2": np.array([0, 2], np.int64)}
    ins = {"x": x, "cache": rand(2, 2, 4, 3), "upd": rand(2, 2, 2, 3), "rs": rand(2, 4, 3)}
    _check(nodes, ins, ["ts0", "ts1", "c0", "c1", "rv", "cc", "bc", "d0", "dm"], inits,
           opset=26)


def test_quantization():
    x = rand(2, 3, 4) * 50
    x[0, 0, :3] = [0.5, 1.5, -2.5]   # ties round to even
    nodes = [
        _node("QuantizeLinear", ["x", "s", "z"], ["q0"]),
        _node("QuantizeLinear", ["x", "sa", "za"], ["q1"], axis=1),
        _node("QuantizeLinear", ["x", "s"], ["q2"]),
        _node("DequantizeLinear", ["q0", "s", "z"], ["d0"]),
        _node("DequantizeLinear", ["q1", "sa", "za"], ["d1"], axis=1),
        _node("DequantizeLinear", ["i32", "s"], ["d2"]),
        _node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"]),
    ]
    inits = {"s": np.array(0.7, np.float32), "z": np.array(-3, np.int8),
             "sa": np.array([0.5, 1.0, 2.0], np.float32),
             "za": np.array([10, 0, 200], np.uint8)}
    ins = {"x": x, "i32": rng.integers(-1000, 1000, (5,)).astype(np.int32)}
    _check(nodes, ins, ["q0", "q1", "q2", "d0", "d1", "d2", "y", "ys", "yz"], inits, opset=21)


def test_pools_sampling_and_grids():
    x = rand(2, 3, 6, 5)
    grid = rng.uniform(-1.2, 1.2, (2, 4, 3, 2)).astype(np.float32)
    nodes, outs = [], []
    for j, (p, attrs) in enumerate([(2, {"kernel_shape": [3, 2], "strides": [2, 1],
                                         "pads": [1, 0, 1, 1]}),
                                    (1, {"kernel_shape": [2, 2], "dilations": [2, 1]}),
                                    (3, {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"})]):
        nodes.append(_node("LpPool", ["x"], [f"lp{j}"], p=p, **attrs))
        outs.append(f"lp{j}")
    nodes.append(_node("GlobalLpPool", ["x"], ["glp"], p=2))
    outs.append("glp")
    for j, (mode, pad, ac) in enumerate([("linear", "zeros", 0), ("nearest", "border", 1),
                                         ("cubic", "reflection", 0), ("linear", "reflection", 1),
                                         ("cubic", "border", 1)]):
        nodes.append(_node("GridSample", ["x", "grid"], [f"gs{j}"], mode=mode,
                           padding_mode=pad, align_corners=ac))
        outs.append(f"gs{j}")
    nodes += [_node("AffineGrid", ["theta", "size"], ["ag0"]),
              _node("AffineGrid", ["theta", "size"], ["ag1"], align_corners=1),
              _node("RoiAlign", ["x", "rois", "bi"], ["ra0"], output_height=2, output_width=3,
                    sampling_ratio=2, spatial_scale=0.5),
              _node("RoiAlign", ["x", "rois", "bi"], ["ra1"], mode="max", output_height=3,
                    output_width=2, coordinate_transformation_mode="output_half_pixel")]
    outs += ["ag0", "ag1", "ra0", "ra1"]
    inits = {"size": np.array([2, 3, 4, 5], np.int64),
             "rois": np.array([[0, 0, 6, 8], [1.5, 2, 4, 9.5], [2, 1, 3, 2]], np.float32),
             "bi": np.array([0, 1, 1], np.int64)}
    glp = np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=(2, 3), keepdims=True))
    _check(nodes, {"x": x, "grid": grid, "theta": rand(2, 2, 3)}, outs, inits, opset=20,
           known={"glp": glp.astype(np.float32)})


def test_einsum_col2im_spectral_unpool():
    nodes = [
        _node("Einsum", ["a", "b"], ["e0"], equation="bij,bjk->bik"),
        _node("Einsum", ["a"], ["e1"], equation="bii->b"),
        _node("Einsum", ["a", "c"], ["e2"], equation="...ij,j"),
        _node("Col2Im", ["cols", "img", "blk"], ["ci"], strides=[1, 2], pads=[1, 0, 0, 1]),
        _node("DFT", ["sig", "", "dax"], ["d0"]),
        _node("DFT", ["sig", "", "dax"], ["d1"], onesided=1),
        _node("DFT", ["csig", "", "dax"], ["d2"], inverse=1, onesided=1),
        _node("STFT", ["sig2", "step", "win", "flen"], ["st"], onesided=0),
        _node("MaxUnpool", ["mx", "mi"], ["mu0"], kernel_shape=[2, 2], strides=[2, 2]),
        _node("MaxUnpool", ["mx", "mi", "osh"], ["mu1"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    mi = np.array([[[[0, 3], [9, 14]]]], np.int64)
    inits = {"img": np.array([4, 5], np.int64), "blk": np.array([2, 2], np.int64),
             "dax": np.array(1, np.int64), "step": np.array(2, np.int64),
             "win": np.hanning(4).astype(np.float32), "flen": np.array(4, np.int64),
             "osh": np.array([1, 1, 5, 5], np.int64)}
    # Col2Im: 4 x 3 blocks of 2 x 2 with these strides and pads
    ins = {"a": rand(2, 3, 3), "b": rand(2, 3, 4), "c": rand(3), "cols": rand(1, 8, 12),
           "sig": rand(2, 6, 1), "csig": rand(2, 4, 2), "sig2": rand(2, 9, 1),
           "mx": rand(1, 1, 2, 2), "mi": mi}
    _check(nodes, ins, ["e0", "e1", "e2", "ci", "d0", "d1", "d2", "st", "mu0", "mu1"], inits,
           opset=20)


def test_deform_conv_and_tfidf():
    x = rand(1, 4, 5, 5)
    w = rand(6, 2, 2, 2)
    off = rand(1, 2 * 2 * 2 * 2, 4, 4)
    mask = rng.random((1, 2 * 2 * 2, 4, 4)).astype(np.float32)
    tok = np.array([[1, 2, 3, 2, 3, 4], [4, 3, 2, 1, 2, 3]], np.int32)
    tf = dict(min_gram_length=1, max_gram_length=2, max_skip_count=1, ngram_counts=[0, 3],
              ngram_indexes=[0, 1, 2, 3, 4], pool_int64s=[2, 3, 4, 2, 3, 3, 4])
    wts = [1.0, 2.0, 3.0, 4.0, 5.0]
    nodes = [
        _node("DeformConv", ["x", "w", "off", "b", "mask"], ["dc0"], group=2, offset_group=2),
        _node("DeformConv", ["x", "w2", "off2"], ["dc1"], strides=[2, 2], pads=[1, 1, 1, 1],
              dilations=[1, 2]),
        _node("TfIdfVectorizer", ["tok"], ["tf0"], mode="TF", **tf),
        _node("TfIdfVectorizer", ["tok"], ["tf1"], mode="IDF", weights=wts, **tf),
        _node("TfIdfVectorizer", ["tok"], ["tf2"], mode="TFIDF", weights=wts, **tf),
    ]
    ins = {"x": x, "w": w, "off": off, "b": rand(6), "mask": mask, "w2": rand(3, 4, 2, 2),
           "off2": rand(1, 8, 3, 3), "tok": tok}
    _check(nodes, ins, ["dc0", "dc1", "tf0", "tf1", "tf2"], opset=22)


def test_cast_small_floats_and_sub_byte_integers(monkeypatch):
    """float16, bfloat16, float8, float4 and int4/int2 through their codes. The
    lowering must hold these storage-only types as integers of their width;
    until lower.py does, the test adds them (what the Cast nest relies on)."""
    import mtvm.codegen.llvm.lower as lower
    storage = {"float16": 16, "bfloat16": 16, "float8_e4m3fn": 8, "float8_e4m3fnuz": 8,
               "float8_e5m2": 8, "float8_e5m2fnuz": 8, "float8_e8m0fnu": 8,
               "float4_e2m1fn": 8, "int4": 8, "uint4": 8, "int2": 8, "uint2": 8}
    for name, bits in storage.items():
        if name not in lower._INT_BITS:
            monkeypatch.setitem(lower._INT_BITS, name, bits)
    x = np.concatenate([rng.standard_normal(40) * 4, rng.standard_normal(8) * 1e-6,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e5, -70000.0, 448.0, 460.0,
                         2.5, 3.5, -0.1, 5e-8, 65519.0, 65520.0, 1e-40]]).astype(np.float32)
    nodes, outs = [], []
    for j, (to, sat) in enumerate([(TP.FLOAT16, 1), (TP.BFLOAT16, 1), (TP.FLOAT8E4M3FN, 1),
                                   (TP.FLOAT8E4M3FN, 0), (TP.FLOAT8E5M2, 0),
                                   (TP.FLOAT8E4M3FNUZ, 1), (TP.FLOAT8E5M2FNUZ, 0),
                                   (TP.FLOAT4E2M1, 1), (TP.INT4, 1), (TP.UINT4, 1)]):
        nodes += [_node("Cast", ["x"], [f"c{j}"], to=to, saturate=sat),
                  _node("Cast", [f"c{j}"], [f"b{j}"], to=TP.FLOAT),
                  _node("Cast", [f"c{j}"], [f"d{j}"], to=TP.DOUBLE)]
        outs += [f"b{j}", f"d{j}"]
    nodes += [_node("Cast", ["xd"], ["h"], to=TP.FLOAT16),
              _node("Cast", ["h"], ["h8"], to=TP.FLOAT8E5M2),
              _node("Cast", ["h8"], ["hb"], to=TP.FLOAT),
              _node("Cast", ["xi"], ["i4"], to=TP.INT4),
              _node("Cast", ["i4"], ["i4b"], to=TP.INT32)]
    outs += ["hb", "i4b"]
    ins = {"x": x, "xd": x.astype(np.float64) * 3,
           "xi": np.arange(-20, 20).astype(np.int32)}
    _check(nodes, ins, outs, opset=23)


def test_integer_matrix_products():
    """MatMulInteger and QLinearMatMul become the integer kernels QMatMul (constant
    B) and QBatchMatMul (both computed): exact against the reference where the
    result is an exact integer sum, bit-exact against the C backend where it is
    requantized (mtvm's fixed-point rounding, not onnxruntime's float one)."""
    a = rng.integers(-128, 128, (2, 3, 5)).astype(np.int8)
    b = rng.integers(-128, 128, (5, 4)).astype(np.int8)
    bb = rng.integers(0, 256, (2, 5, 4)).astype(np.uint8)
    au = rng.integers(0, 256, (3, 5)).astype(np.uint8)
    exact = [_node("MatMulInteger", ["a", "b", "az", "bz"], ["mi0"]),
             _node("MatMulInteger", ["au", "bbc"], ["mi1"])]
    inits = {"b": b, "az": np.array(3, np.int8), "bz": np.array(-2, np.int8),
             "bbc": bb[0]}
    _check(exact, {"a": a, "au": au}, ["mi0", "mi1"], inits, opset=21)
    requant = [_node("QLinearMatMul", ["au", "sa", "za", "bbc", "sb", "zb", "sy", "zy"], ["q0"]),
               _node("QLinearMatMul", ["au3", "sa", "za", "bb", "sb", "zb", "sy", "zy"], ["q1"]),
               _node("QLinearMatMul", ["a", "sa8", "za8", "b", "sb8", "zb8", "sy8", "zy8"],
                     ["q2"])]
    inits = {"bbc": bb[0], "sa": np.array(0.02, np.float32), "za": np.array(120, np.uint8),
             "sb": np.array(0.01, np.float32), "zb": np.array(130, np.uint8),
             "sy": np.array(0.05, np.float32), "zy": np.array(128, np.uint8),
             "b": b, "sa8": np.array(0.03, np.float32), "za8": np.array(-3, np.int8),
             "sb8": np.array(0.02, np.float32), "zb8": np.array(0, np.int8),
             "sy8": np.array(0.3, np.float32), "zy8": np.array(5, np.int8)}
    ins = {"au": au, "au3": rng.integers(0, 256, (2, 3, 5)).astype(np.uint8), "bb": bb,
           "a": a}
    outs = {"q0": np.zeros((3, 4), np.uint8), "q1": np.zeros((2, 3, 4), np.uint8),
            "q2": np.zeros((2, 3, 4), np.int8)}
    m = _model(requant, ins, outs, inits, opset=21)
    got = mtvm.compile(m, backend="llvm").run_host(ins)
    want = mtvm.compile(m).run_host(ins)
    for name in outs:
        assert np.array_equal(got[name], want[name]), name
    ref = dict(zip(outs, ReferenceEvaluator(m).run(None, ins)))
    for name in outs:   # and within one unit of onnxruntime's float rounding
        assert np.abs(got[name].astype(np.int32) - ref[name].astype(np.int32)).max() <= 1


@pytest.mark.parametrize("target", ["host", "x86-64-v2", "c"])
def test_integer_convolutions_match_the_c_backend(target):
    """QLinearConv and ConvInteger become QConv: the im2col kernel's packed weights
    (channel pairs, odd channels, tails of 0 to 3 taps, groups, per-channel weight
    zero points) and the depthwise kernel, 1-D and 2-D. Bit-exact against the C
    backend (the specification of the integer kernels). The LLVM nests compute
    pair products: pmaddwd on vectors of 16/8 (host) or 4 (x86-64-v2) channels
    and the scalar pairs (the portable target "c"); their vector blocks, the
    channels left over and the odd input channel all meet here."""
    nodes, ins, inits = [], {}, {}
    cases = [  # (x shape, w shape, attrs, weight zero point per channel)
        ((1, 3, 6, 5), (5, 3, 3, 3), {"pads": [1, 1, 1, 1]}, False),          # kk 27: tail 3
        ((1, 4, 5, 5), (6, 2, 2, 3), {"group": 2, "strides": [2, 1]}, True),  # kk 12, groups
        ((2, 2, 4, 4), (3, 2, 1, 1), {}, False),                               # kk 2: tail 2
        ((1, 5, 5, 6), (5, 1, 3, 3), {"group": 5, "pads": [1, 0, 1, 2]}, True),  # depthwise
        ((1, 3, 7), (4, 3, 3), {"dilations": [2], "pads": [2, 1]}, False),     # 1-D, kk 9
        ((1, 5, 4, 4), (7, 5, 1, 1), {}, True),                                # kk 5: tail 1
        # wide rows: tiles of eight columns between the padded edges
        ((1, 3, 4, 21), (4, 3, 3, 3), {"pads": [1, 2, 1, 2]}, True),
        ((1, 4, 3, 19), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}, False),
        ((1, 2, 5, 40), (3, 2, 2, 3), {"strides": [1, 2], "dilations": [1, 2],
                                       "pads": [0, 3, 0, 1]}, False),
        ((1, 3, 37), (5, 3, 4), {"pads": [2, 1]}, False),
        # channel vectors: 2 x 16 + 4 + 1 output channels, odd input channels
        ((1, 9, 6, 7), (37, 9, 3, 3), {"pads": [1, 1, 1, 1]}, True),
        ((1, 17, 5, 5), (24, 17, 1, 1), {}, False),                            # pointwise
        ((1, 8, 4, 9), (40, 4, 3, 1), {"group": 2, "pads": [1, 0, 1, 0],
                                       "strides": [1, 2]}, True),
        ((1, 6, 30), (16, 6, 5), {"pads": [2, 2], "dilations": [2]}, False),   # 1-D
    ]
    for j, (xs, ws, attrs, per_ch) in enumerate(cases):
        x = rng.integers(0, 256, xs).astype(np.uint8)
        w = rng.integers(-100, 100, ws).astype(np.int8)
        ins[f"x{j}"] = x
        zw = (rng.integers(-3, 4, ws[0]).astype(np.int8) if per_ch else np.array(0, np.int8))
        inits |= {f"w{j}": w, f"sx{j}": np.array(0.02, np.float32),
                  f"zx{j}": np.array(100 + j, np.uint8),
                  f"sw{j}": (rng.random(ws[0]) * 0.02 + 0.005).astype(np.float32),
                  f"zw{j}": zw, f"sy{j}": np.array(0.3, np.float32),
                  f"zy{j}": np.array(110, np.uint8),
                  f"bias{j}": rng.integers(-500, 500, ws[0]).astype(np.int32)}
        nodes.append(_node("QLinearConv", [f"x{j}", f"sx{j}", f"zx{j}", f"w{j}", f"sw{j}",
                                           f"zw{j}", f"sy{j}", f"zy{j}", f"bias{j}"],
                           [f"q{j}"], **attrs))
        nodes.append(_node("ConvInteger", [f"x{j}", f"w{j}", f"zx{j}", f"zw{j}"], [f"ci{j}"],
                           **attrs))
    inferred = onnx.shape_inference.infer_shapes(_model(nodes, ins, [], inits, opset=21))
    types = {v.name: v for v in inferred.graph.value_info}
    m = _model(nodes, ins, [], inits, opset=21)
    names = [n for j in range(len(cases)) for n in (f"q{j}", f"ci{j}")]
    m.graph.output.extend(types[n] for n in names)
    got = mtvm.compile(m, backend="llvm", target=target).run_host(ins)
    want = mtvm.compile(m).run_host(ins)
    ref = dict(zip(names, ReferenceEvaluator(m).run(None, ins)))
    for name in names:
        assert np.array_equal(got[name], want[name]), name
        if name.startswith("ci") and ref[name].shape == got[name].shape:
            assert np.array_equal(got[name], ref[name]), name   # exact integer sums


def test_integer_kernels_of_a_qdq_model_match_the_c_backend():
    """A QDQ model the quantization pass turns into the integer kernels QAdd, QMul,
    QAffine, QLut, QMaxPool, QAvgPool, QSoftmax and QConv: bit-exact against the
    C backend."""
    def q(name, scale, zp, dtype=np.uint8):
        return {f"{name}_s": np.array(scale, np.float32), f"{name}_z": np.array(zp, dtype)}

    inits = {}
    for name, s, z in (("a", 0.05, 120), ("b", 0.03, 100), ("add", 0.08, 128),
                       ("mul", 0.1, 90), ("sig", 1 / 256, 0), ("mp", 0.05, 120),
                       ("ap", 0.07, 130), ("sm", 1 / 256, 0), ("aff", 0.09, 127),
                       ("cv", 0.2, 128)):
        inits |= q(name, s, z)
    inits |= {"w": rng.integers(-100, 100, (4, 3, 3, 3)).astype(np.int8),
              "w_s": np.array([0.01, 0.02, 0.015, 0.03], np.float32),
              "w_z": np.zeros(4, np.int8), "k": np.array(1.7, np.float32)}

    def dq(x, qp, out):
        return _node("DequantizeLinear", [x, f"{qp}_s", f"{qp}_z"], [out])

    def qn(x, qp, out):
        return _node("QuantizeLinear", [x, f"{qp}_s", f"{qp}_z"], [out])
    nodes = [dq("xa", "a", "fa"), dq("xb", "b", "fb"),
             _node("Add", ["fa", "fb"], ["s"]), qn("s", "add", "qs"), dq("qs", "add", "ya"),
             _node("Mul", ["fa", "fb"], ["m"]), qn("m", "mul", "qm"), dq("qm", "mul", "ym"),
             _node("Sigmoid", ["fa"], ["g"]), qn("g", "sig", "qg"), dq("qg", "sig", "yg"),
             _node("MaxPool", ["fa"], ["p"], kernel_shape=[2, 2], strides=[2, 1],
                   pads=[0, 1, 1, 0]), qn("p", "mp", "qp"), dq("qp", "mp", "yp"),
             _node("AveragePool", ["fa"], ["v"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             qn("v", "ap", "qv"), dq("qv", "ap", "yv"),
             _node("Softmax", ["fa"], ["e"], axis=-1), qn("e", "sm", "qe"), dq("qe", "sm", "ye"),
             _node("Mul", ["fa", "k"], ["f"]), qn("f", "aff", "qf"), dq("qf", "aff", "yf"),
             _node("DequantizeLinear", ["w", "w_s", "w_z"], ["fw"], axis=0),
             _node("Conv", ["fa", "fw"], ["c"], pads=[1, 1, 1, 1]), qn("c", "cv", "qc"),
             dq("qc", "cv", "yc")]
    ins = {"xa": rng.integers(0, 256, (1, 3, 6, 7)).astype(np.uint8),
           "xb": rng.integers(0, 256, (1, 3, 6, 7)).astype(np.uint8)}
    outs = ["ya", "ym", "yg", "yp", "yv", "ye", "yf", "yc"]
    ref = dict(zip(outs, ReferenceEvaluator(_model(nodes, ins, outs, inits, opset=21)).run(
        None, ins)))
    m = _model(nodes, ins, {o: np.asarray(ref[o]) for o in outs}, inits, opset=21)
    lm = mtvm.compile(m, backend="llvm")
    kernels = {n.op for n in lm.graph.nodes}
    assert {"QAdd", "QMul", "QLut", "QMaxPool", "QAvgPool", "QSoftmax", "QConv",
            "QAffine"} <= kernels, \
        kernels
    got, want = lm.run_host(ins), mtvm.compile(m).run_host(ins)
    for name in outs:
        assert np.array_equal(got[name], want[name]), name


def test_det():
    x3 = rand(4, 3, 3)
    x3[1] = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]    # a zero first pivot: rows swapped
    x3[2] = [[1, 2, 3], [2, 4, 6], [1, 0, 1]]    # singular: a zero pivot ends it
    nodes = [_node("Det", ["x2"], ["d2"]), _node("Det", ["x3"], ["d3"]),
             _node("Det", ["x5"], ["d5"])]
    _check(nodes, {"x2": rand(2, 2), "x3": x3, "x5": rand(2, 3, 5, 5)}, ["d2", "d3", "d5"],
           opset=22)
