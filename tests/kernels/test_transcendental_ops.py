"""The float ops that now take the kernel library's branch-free e^x (Sigmoid), its rational
tanh (Tanh, Gelu's tanh form) or the erf expression (Erf, Gelu, the Div+Erf+Add+Mul+Mul chain of exported GELUs, fused into one
kernel): compiled for the portable target and built portable, -O3 -march=native and
-O3 -march=x86-64-v3, against float64 over a sweep and the special values."""
from __future__ import annotations

import math
import os

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import mtvm
from mtvm.host_runner import HostModule
from mtvm.testing import make_model

BUILDS = [("-O2", []), ("-O3", ["-march=native"]), ("-O3", ["-march=x86-64-v3"])]
SPECIALS = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-30, -1e-30, 1e-40, -1e-40, 3.6, 3.6001,
            -3.6001, 4.0, 88.0, -88.0, 89.0, -89.0, 104.0, -104.0, 1e30, -1e30]
X = np.concatenate([np.linspace(-12, 12, 4801), SPECIALS]).astype(np.float32)
X64 = X.astype(np.float64)
ERF = np.vectorize(math.erf, otypes=[np.float64])


def _builds(model, x):
    lib = mtvm.compile(model)
    feeds = {lib.metadata["inputs"][0]["name"]: x}
    for opt, extra in BUILDS:
        if extra and os.uname().machine != "x86_64":
            continue
        yield f"{opt} {' '.join(extra)}", list(HostModule(lib, opt=opt, extra=extra)
                                               .run(feeds).values())[0]


def _check(got, expected, rel, what, abs_scale=None):
    assert np.array_equal(np.isnan(got), np.isnan(expected)), what
    finite = ~np.isnan(expected)
    g, e = got[finite].astype(np.float64), expected[finite]
    assert np.array_equal(np.signbit(g[e == 0]), np.signbit(e[e == 0])), f"{what}: signed zeros"
    assert np.array_equal(g[np.isinf(e)], e[np.isinf(e)]), f"{what}: infinities"
    g, e = g[np.isfinite(e)], e[np.isfinite(e)]
    scale = np.abs(e) if abs_scale is None else abs_scale[finite][np.isfinite(expected[finite])]
    err = np.abs(g - e) - rel * scale
    bad = np.flatnonzero(err > 1.5e-45)        # within a subnormal step of the bound
    assert bad.size == 0, f"{what}: got {g[bad[:5]]}, expected {e[bad[:5]]}"


@pytest.mark.parametrize("op", ["Erf", "Sigmoid", "Tanh"])
def test_erf_and_sigmoid_are_within_their_relative_error(op):
    with np.errstate(over="ignore"):
        expected = ERF(X64) if op == "Erf" else np.tanh(X64) if op == "Tanh" else \
            1 / (1 + np.exp(-X64))
    expected = np.where(np.isnan(X64), np.nan, expected)
    if op == "Sigmoid":   # e^-x overflows float below x = -88.72: 1 / inf = 0, as with expf
        expected[X64 < -88.7228394] = 0.0
    model = make_model(op, {"x": X}, {}, opset=13)
    for build, got in _builds(model, X):
        # erf: 5e-7 (the expression); sigmoid: e^-x within 1e-7, then 1 / (1 + .); tanh:
        # mtvm_tanh_f32's rational function, 4e-7
        _check(got, expected, 3e-7 if op == "Sigmoid" else 5e-7, f"{op} {build}")
        if op == "Erf":
            assert np.all(np.abs(got[~np.isnan(got)]) <= 1)
            big = np.abs(X64) > 3.6
            assert np.array_equal(got[big], np.sign(X[big])), build


def _gelu64(x):
    return np.where(np.isnan(x), np.nan, 0.5 * x * (1 + ERF(x / math.sqrt(2))))


def test_gelu_op_and_the_exported_chain_fused_into_one_kernel():
    """Gelu (opset 20) and Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5 as
    exporters write it, which mtvm fuses into one kernel (the Erf in the tail). In
    float, 1 + erf(x / sqrt 2) cancels for negative x: an absolute error of a few
    ulps of max(|x|, 1) is what the formula allows."""
    with np.errstate(invalid="ignore", over="ignore"):
        expected = _gelu64(X64)
        scale = np.maximum(np.abs(np.nan_to_num(X64, posinf=0, neginf=0)), 1)
    expected[np.isinf(X64)] = np.where(X64[np.isinf(X64)] > 0, np.inf, np.nan)  # -inf * 0
    gelu = make_model("Gelu", {"x": X}, {}, opset=20)
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    consts = [numpy_helper.from_array(np.array(v, np.float32), n)
              for n, v in (("sqrt2", math.sqrt(2)), ("one", 1.0), ("half", 0.5))]
    g = helper.make_graph(nodes, "gelu_chain",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, X.shape)],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, X.shape)],
                          consts)
    chain = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    chain.ir_version = 8
    lib = mtvm.compile(chain)
    assert len(lib.graph.nodes) == 1                 # Div + Erf + Add + Mul + Mul, one kernel
    for name, model in (("Gelu", gelu), ("chain", chain)):
        for build, got in _builds(model, X):
            _check(got, expected, 2e-6, f"{name} {build}", abs_scale=scale)
