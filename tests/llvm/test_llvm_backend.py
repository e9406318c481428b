"""The LLVM backend (mtvm.codegen.llvm): the C writer's IR lowered with llvmlite,
run in-process through LLVM's JIT, and object code for every target.

What these check against: the C semantics of the lowering (unsigned size_t,
NaN comparisons, lazy && and ?:), the ONNX reference for each op's attribute
combinations, the shared models' reference outputs with no C compiler on
PATH, and the ELF headers of the object files per target."""
from __future__ import annotations

import json
import os
import struct
import re
import subprocess
import sys
import tarfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import mtvm
from mtvm.codegen.cwriter import (
    Assign,
    Binary,
    Const,
    Decl,
    For,
    Function,
    Index,
    Return,
    Type,
    Var,
    and_,
    call,
    lt,
    ne,
    select,
)
from mtvm.codegen.llvm.cparse import NotLowerable, parse_assignments, parse_expr
from mtvm.errors import MtvmError

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "..", "shared", "models")
FLOAT_MODELS = ["ad_autoencoder", "fomo_mbv2", "har_cnn1d", "ic_resnet8", "kws_dscnn",
                "kwt_tiny", "vww_mobilenetv1"]
rng = np.random.default_rng(7)


# -- the lowering of the C writer's IR ---------------------------------------------------------

def _jit(fn: Function):
    """The function compiled by the JIT, callable through ctypes."""
    import ctypes

    import llvmlite.ir as ir

    from mtvm.codegen.llvm import parse_and_optimize
    from mtvm.codegen.llvm.lower import FunctionLowering
    from mtvm.target import host_target
    m = ir.Module("t")
    FunctionLowering(m, 64).function(fn)
    mod, tm = parse_and_optimize(str(m), host_target(), jit=True)
    import llvmlite.binding as llvm
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    _jit.keep.append(engine)
    return engine.get_function_address(fn.name), ctypes


_jit.keep = []


def test_size_t_is_unsigned_and_float_compares_follow_c():
    # out[0] = (size_t)(i - 1) / 2 for i = 0 wraps around; NaN < x false; NaN != NaN true.
    x = Var("x", Type("float32", pointer=True, const=True))
    out = Var("out", Type("uint64", pointer=True))
    i = Var("i")
    body = [Decl(i, Const(0)),
            Assign(out[0], Binary("/", i - 1, Const(2))),
            Assign(out[1], lt(x[0], x[1])),
            Assign(out[2], ne(x[0], x[0])),
            Assign(out[3], select(lt(x[1], Const(0.0, "float32")), Const(1, "uint64"),
                                  Const(2, "uint64")))]
    addr, ctypes = _jit(Function("k", [x, out], body))
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(addr)
    xs = np.array([np.nan, -1.0], np.float32)
    o = np.zeros(4, np.uint64)
    f(xs.ctypes.data, o.ctypes.data)
    assert o.tolist() == [(2 ** 64 - 1) // 2, 0, 1, 1]


def test_and_and_ternary_do_not_evaluate_the_side_not_taken():
    # i < n && p[i] > 0 must not load p[n] (p is NULL when n == 0).
    p = Var("p", Type("float32", pointer=True, const=True))
    n = Var("n")
    out = Var("out", Type("int32", pointer=True))
    body = [Assign(out[0], and_(lt(Const(0), n), Binary(">", Index(p, Const(0)),
                                                         Const(0.0, "float32")))),
            Assign(out[1], select(lt(Const(0), n), call("fabsf", Index(p, Const(0))),
                                  Const(-1.0, "float32")))]
    addr, ctypes = _jit(Function("k2", [p, n, out], body))
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)(addr)
    o = np.zeros(2, np.int32)
    f(None, 0, o.ctypes.data)    # a NULL load would crash the test process
    assert o.tolist() == [0, -1]
    v = np.array([-3.0], np.float32)
    f(v.ctypes.data, 1, o.ctypes.data)
    assert o.tolist() == [0, 3]


def test_loops_and_early_return():
    x = Var("x", Type("int32", pointer=True, const=True))
    i = Var("i")
    s = Var("s", Type("int32"))
    body = [Decl(s, Const(0, "int32")),
            For(i, Const(10), [Assign(s, x[i], "+="),
                               *[]], begin=Const(2), step=3),
            Return(s)]
    addr, ctypes = _jit(Function("k3", [x], body, ret=Type("int32")))
    f = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(addr)
    xs = np.arange(10, dtype=np.int32)
    assert f(xs.ctypes.data) == 2 + 5 + 8


def test_c_text_is_read_back_or_refused():
    e = parse_expr("(x > 0.0f ? x : 0.5f * expf(x)) + (float)INT64_C(3)")
    assert "Ternary" in repr(e) and "expf" in repr(e)
    a = parse_assignments("v = v * 2.0f; v += ep0[(i / 12) % 3];")
    assert len(a) == 2 and a[1].op == "+="
    with pytest.raises(NotLowerable):
        parse_expr("x = y++")


# -- operators against the ONNX reference -----------------------------------------------------

def _model(nodes, inputs: dict, consts: dict, path, opset=17):
    ins = [h.make_tensor_value_info(k, T.FLOAT, v.shape) for k, v in inputs.items()]
    inits = [h.make_tensor(k, T.FLOAT, v.shape, v.ravel()) for k, v in consts.items()]
    outs_probe = [h.make_tensor_value_info(o, T.FLOAT, None) for o in nodes[-1].output]
    probe = h.make_model(h.make_graph(nodes, "t", ins, outs_probe, inits),
                         opset_imports=[h.make_opsetid("", opset)])
    ref = ReferenceEvaluator(probe).run(None, inputs)
    outs = [h.make_tensor_value_info(o, T.FLOAT, r.shape) for o, r in zip(nodes[-1].output, ref)]
    m = h.make_model(h.make_graph(nodes, "t", ins, outs, inits),
                     opset_imports=[h.make_opsetid("", opset)])
    onnx.save(m, str(path))
    return ref


def _check(tmp_path, nodes, inputs, consts=None, tol=1e-4):
    path = tmp_path / "m.onnx"
    ref = _model(nodes, inputs, consts or {}, path)
    got = mtvm.compile(str(path), backend="llvm").run_host(inputs)
    for r, y in zip(ref, got.values()):
        assert y.shape == r.shape
        np.testing.assert_allclose(y, r, rtol=tol, atol=tol * max(1.0, float(np.abs(r).max())))


CONV_CASES = [  # (C, M, group, kernel, stride, dilation, pad, size)
    (8, 16, 1, 3, 1, 1, 1, 10), (8, 16, 1, 3, 2, 1, 1, 11), (8, 8, 8, 3, 1, 1, 1, 9),
    (8, 8, 8, 3, 2, 1, 1, 9), (4, 6, 2, 3, 1, 2, 2, 12), (16, 32, 1, 1, 1, 1, 0, 7),
    (3, 8, 1, 5, 2, 1, 2, 13), (8, 16, 1, 1, 2, 1, 0, 8), (5, 7, 1, 3, 1, 1, 0, 5),
    (6, 6, 3, 2, 1, 3, 1, 17), (4, 4, 4, 7, 1, 1, 3, 4), (6, 6, 6, 5, 1, 1, 2, 11),
    (5, 5, 5, 3, 1, 1, 1, 25),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("tail", [None, "Relu", "residual"])
def test_conv_2d(tmp_path, case, tail):
    c, m, g, k, s, d, p, size = case
    x = rng.standard_normal((1, c, size, size + 3)).astype(np.float32)
    w = rng.standard_normal((m, c // g, k, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c" if tail else "y"], group=g,
                         strides=[s, s], dilations=[d, d], pads=[p, p, p, p])]
    consts = {"w": w, "b": b}
    if tail == "Relu":
        nodes.append(h.make_node("Relu", ["c"], ["y"]))
    elif tail == "residual":
        out = ReferenceEvaluator(h.make_model(h.make_graph(
            nodes, "t", [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
            [h.make_tensor_value_info("c", T.FLOAT, None)],
            [h.make_tensor(n, T.FLOAT, v.shape, v.ravel()) for n, v in consts.items()]),
            opset_imports=[h.make_opsetid("", 17)])).run(None, {"x": x})[0]
        consts["r"] = rng.standard_normal(out.shape).astype(np.float32)
        nodes.append(h.make_node("Add", ["c", "r"], ["y"]))
    _check(tmp_path, nodes, {"x": x}, consts)


@pytest.mark.parametrize("k,d,p,s,g", [(5, 2, 4, 1, 1), (3, 1, 0, 2, 1), (3, 1, 1, 1, 6)])
def test_conv_1d(tmp_path, k, d, p, s, g):
    x = rng.standard_normal((2, 6, 23)).astype(np.float32)
    w = rng.standard_normal((12, 6 // g, k)).astype(np.float32)
    _check(tmp_path, [h.make_node("Conv", ["x", "w"], ["y"], dilations=[d], pads=[p, p],
                                  strides=[s], group=g)], {"x": x}, {"w": w})


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[2, 3], dilations=[2, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {})])
def test_pools(tmp_path, op, attrs):
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    _check(tmp_path, [h.make_node(op, ["x"], ["y"], **attrs)], {"x": x})


@pytest.mark.parametrize("attrs,with_c", [({}, False), (dict(alpha=0.5, beta=2.0), True),
                                          (dict(transA=1), True), (dict(transB=1), False)])
def test_gemm(tmp_path, attrs, with_c):
    a = rng.standard_normal((5, 3) if attrs.get("transA") else (3, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5) if attrs.get("transB") else (5, 4)).astype(np.float32)
    consts = {"b": b, **({"c": rng.standard_normal((1, 4)).astype(np.float32)} if with_c else {})}
    ins = ["a", "b"] + (["c"] if with_c else [])
    _check(tmp_path, [h.make_node("Gemm", ins, ["y"], **attrs)], {"a": a}, consts)


@pytest.mark.parametrize("sa,sb", [((2, 3, 4, 5), (2, 3, 5, 6)), ((3, 4, 5), (5, 2)),
                                   ((5,), (5, 3)), ((4, 5), (5,)), ((1, 4, 5), (3, 5, 2))])
def test_matmul(tmp_path, sa, sb):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    _check(tmp_path, [h.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b})


def test_layout_ops_with_fused_tails(tmp_path):
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    nodes = [h.make_node("Transpose", ["a"], ["t"], perm=[0, 2, 3, 1]),
             h.make_node("Mul", ["t", "s"], ["u"]),
             h.make_node("Concat", ["u", "u"], ["v"], axis=1),
             h.make_node("Sigmoid", ["v"], ["y"])]
    _check(tmp_path, nodes, {"a": a}, {"s": np.array([0.5], np.float32)})


def test_gather_counts_negative_indices_from_the_end(tmp_path):
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    idx = h.make_tensor("i", T.INT64, [3], [0, -1, 2])
    path = tmp_path / "g.onnx"
    m = h.make_model(h.make_graph([h.make_node("Gather", ["x", "i"], ["y"], axis=1)], "g",
                                  [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
                                  [h.make_tensor_value_info("y", T.FLOAT, (3, 3, 4))], [idx]),
                     opset_imports=[h.make_opsetid("", 17)])
    onnx.save(m, str(path))
    y = mtvm.compile(str(path), backend="llvm").run_host({"x": x})["y"]
    np.testing.assert_array_equal(y, x[:, [0, 4, 2]])


def test_structured_ops_match_the_c_backend_bit_for_bit(tmp_path):
    """Softmax, LayerNormalization and a reduction come from the same IR as the
    C backend's: same operations in the same order, within an ulp or two of the
    outputs' scale (the libm calls may differ: over 300 random inputs the largest
    difference was 2.4e-7, on means near zero of values near 1). Its own generator:
    with the module's, the input depended on which tests ran before in the worker."""
    x = np.random.default_rng(23).standard_normal((2, 3, 8)).astype(np.float32)
    nodes = [h.make_node("Tanh", ["x"], ["t"]), h.make_node("Softmax", ["t"], ["s"]),
             h.make_node("LayerNormalization", ["s", "sc", "bi"], ["l"], axis=-1),
             h.make_node("ReduceMean", ["l"], ["y"], axes=[1], keepdims=1)]
    consts = {"sc": np.linspace(0.5, 1.5, 8).astype(np.float32),
              "bi": np.linspace(-0.1, 0.1, 8).astype(np.float32)}
    path = tmp_path / "s.onnx"
    _model(nodes, {"x": x}, consts, path)
    c = mtvm.compile(str(path)).run_host({"x": x})["y"]
    lv = mtvm.compile(str(path), backend="llvm").run_host({"x": x})["y"]
    np.testing.assert_allclose(lv, c, rtol=2e-6, atol=5e-7)


def test_quantized_kernels_round_float_steps_as_the_c_backend(tmp_path):
    """A QDQ linear Resize (QResize: float interpolation, then rounding): weights of
    1/4 and 3/4 between values on the same grid put many results on exact x.5
    ties, which a fused multiply-add would round the other way. Integer kernels
    are not contracted (IRKernel.may_contract), so the LLVM backend computes what
    the C backend computes, bit for bit, on a host with FMA too."""
    from onnx import numpy_helper as nh
    consts = {"s": np.float32(0.05), "z": np.int8(0), "scales": np.float32([1, 1, 2, 2])}
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             h.make_node("Resize", ["xd", "", "scales"], ["r"], mode="linear",
                         coordinate_transformation_mode="half_pixel"),
             h.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"]),
             h.make_node("DequantizeLinear", ["rq", "s", "z"], ["y"])]
    g = h.make_graph(nodes, "qresize", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 32, 32])],
                     [nh.from_array(np.asarray(v), k) for k, v in consts.items()])
    path = tmp_path / "qresize.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    x = (np.random.default_rng(8).integers(-100, 100, (1, 8, 16, 16)) * 0.05).astype(np.float32)
    c = mtvm.compile(str(path))
    assert any(k.kernel.node.op == "QResize" for k in c.kernels)
    np.testing.assert_array_equal(mtvm.compile(str(path), backend="llvm").run_host({"x": x})["y"],
                                  c.run_host({"x": x})["y"])


# -- whole models, no C compiler ---------------------------------------------------------------

NO_CC_SCRIPT = r"""
import shutil, sys, numpy as np, mtvm
assert shutil.which("cc") is None and shutil.which("gcc") is None, "a C compiler is on PATH"
out = {}
for name in sys.argv[3:]:
    ref = np.load(f"{sys.argv[1]}/{name}.npz")
    m = mtvm.compile(f"{sys.argv[1]}/{name}.onnx", backend="llvm")
    ins = {s["name"]: ref[f"in_{i}"] for i, s in enumerate(m.metadata["inputs"])}
    for k, v in m.run_host(ins).items():
        out[f"{name}/{k}"] = v
np.savez(sys.argv[2], **out)
"""
INT8_MODELS = ["ad_autoencoder_int8", "denoise_unet_int8", "fomo_mbv2_int8", "har_cnn1d_int8",
               "ic_resnet8_int8", "kws_crnn_int8", "kws_dscnn_int8", "kwt_tiny_int8",
               "vww_mobilenetv1_int8"]


@pytest.mark.skipif(not os.path.isdir(MODELS), reason="needs ../shared/models")
def test_shared_models_run_with_no_c_compiler_on_path(tmp_path):
    """PATH holds only a directory with python in it: the host target comes from
    /proc/cpuinfo, the code from llvmlite, libm's functions from this process.
    Float models within 1e-4 of their reference; int8 models bit for bit what
    the C backend computes (built here, where a compiler is)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(sys.executable, bindir / "python3")
    env = {"PATH": str(bindir), "HOME": str(tmp_path),
           "PYTHONPATH": os.path.join(HERE, "..", "..")}
    outs = tmp_path / "outs.npz"
    models = FLOAT_MODELS + INT8_MODELS
    p = subprocess.run([str(bindir / "python3"), "-c", NO_CC_SCRIPT, os.path.abspath(MODELS),
                        str(outs), *models], capture_output=True, text=True, env=env,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    got = dict(np.load(outs))
    for name in models:
        path = os.path.join(MODELS, name + ".onnx")
        ref = np.load(path[:-5] + ".npz")
        if name in INT8_MODELS:
            c = mtvm.compile(path)
            ins = {s["name"]: ref[f"in_{i}"] for i, s in enumerate(c.metadata["inputs"])}
            for k, v in c.run_host(ins).items():
                np.testing.assert_array_equal(got[f"{name}/{k}"], v, err_msg=name)
            continue
        md = mtvm.compile(path, backend="llvm").metadata
        for i, o in enumerate(md["outputs"]):
            r = ref[f"out_{i}"]
            err = float(np.abs(got[f"{name}/{o['name']}"] - r).max() / (np.abs(r).max() + 1e-12))
            assert err <= 1e-4, (name, err)


# -- object code -------------------------------------------------------------------------------

EM_386, EM_ARM, EM_X86_64, EM_RISCV = 3, 40, 62, 243
EF_ARM_ABI_FLOAT_HARD, EF_RISCV_FLOAT_ABI_SINGLE = 0x400, 0x2


def _section(data: bytes, name: bytes) -> bytes | None:
    """The contents of a 32-bit ELF section by name."""
    shoff, = struct.unpack_from("<I", data, 32)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 46)
    heads = [struct.unpack_from("<IIIIII", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]
    for sh_name, _, _, _, off, size in heads:
        start = strtab[4] + sh_name
        if data[start:data.index(b"\0", start)] == name:
            return data[off:off + size]
    return None


def _elf(data: bytes) -> tuple[int, int, int]:
    """(ELF class bits, e_machine, e_flags) of a relocatable object."""
    assert data[:4] == b"\x7fELF"
    bits = 32 if data[4] == 1 else 64
    e_type, machine = struct.unpack_from("<HH", data, 16)
    assert e_type == 1   # ET_REL
    flags = struct.unpack_from("<I", data, 36 if bits == 32 else 48)[0]
    return bits, machine, flags


@pytest.mark.parametrize("target,bits,machine,flag", [
    ("cortex-m4", 32, EM_ARM, EF_ARM_ABI_FLOAT_HARD),
    ("cortex-m0", 32, EM_ARM, 0), ("cortex-m3", 32, EM_ARM, 0),
    ("cortex-m33", 32, EM_ARM, EF_ARM_ABI_FLOAT_HARD),
    ("cortex-m55", 32, EM_ARM, EF_ARM_ABI_FLOAT_HARD),
    ("rv32imac", 32, EM_RISCV, 0), ("rv32imafc", 32, EM_RISCV, EF_RISCV_FLOAT_ABI_SINGLE),
    ("x86-64-v3", 64, EM_X86_64, 0)])
def test_object_code_for_each_target_in_the_mlf(tmp_path, target, bits, machine, flag):
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    path = tmp_path / "c.onnx"
    _model([h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            h.make_node("Sigmoid", ["c"], ["y"])], {"x": x}, {"w": w}, path)
    lib = mtvm.compile(str(path), backend="llvm", target=target)
    tar = tmp_path / "m.tar"
    lib.export(str(tar))
    with tarfile.open(tar) as t:
        names = t.getnames()
        obj = t.extractfile("codegen/host/lib/lib0.o").read()
        data = t.extractfile("codegen/host/lib/lib1.o").read()
        header = t.extractfile("codegen/host/include/tvmgen_default.h").read().decode()
        md = json.loads(t.extractfile("metadata.json").read())
    assert "codegen/host/src/tvmgen_default.ll" in names
    assert not [n for n in names if n.endswith(".c")]
    assert "int32_t tvmgen_default_run(struct tvmgen_default_inputs* inputs" in header
    assert md["backend"] == "llvm" and md["target"]["name"] == target
    got_bits, got_machine, flags = _elf(obj)
    assert (got_bits, got_machine) == (bits, machine)
    # The weights' object: same class and machine, and (RISC-V) the same float ABI.
    assert _elf(data)[:2] == (bits, machine)
    if machine == EM_RISCV:
        assert _elf(data)[2] & 0x6 == flags & 0x6
    if machine == EM_RISCV:
        assert flags & 0x6 == flag
    if machine == EM_ARM:
        # LLVM records the float ABI as build attribute Tag_ABI_VFP_args (28): 1 when
        # floats pass in VFP registers (what arm-none-eabi-gcc -mfloat-abi=hard links with).
        attrs = _section(obj, b".ARM.attributes")
        assert attrs is not None and (b"\x1c\x01" in attrs) == bool(flag)
    assert b"tvmgen_default_run" in obj


def test_constants_section_is_honoured(tmp_path):
    # Weights large enough that LLVM keeps them as data (not folded into the code).
    x = rng.standard_normal((1, 64)).astype(np.float32)
    path = tmp_path / "g.onnx"
    _model([h.make_node("Gemm", ["x", "w"], ["y"])], {"x": x},
           {"w": rng.standard_normal((64, 48)).astype(np.float32)}, path)
    lib = mtvm.compile(str(path), backend="llvm", target="cortex-m4",
                       constants_section=".qspi_weights")
    # The weights live in lib1.o (written directly as ELF), in that section.
    data = lib.data_object()
    sect = _section(data, b".qspi_weights")
    assert sect is not None and len(sect) == 64 * 48 * 4
    assert _elf(data)[:2] == (32, EM_ARM)


# -- errors --------------------------------------------------------------------------------------

def test_an_op_without_lowering_is_one_line_naming_the_node(tmp_path):
    """A 3-D (volumetric) 3x3x3 Conv: the C backend runs it; the LLVM backend's
    conv tiles are 1-D and 2-D (a pointwise one of any rank is a row)."""
    x = rng.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3, 3)).astype(np.float32)
    path = tmp_path / "c3.onnx"
    onnx.save(h.make_model(h.make_graph(
        [h.make_node("Conv", ["x", "w"], ["y"], name="conv3d")], "c",
        [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
        [h.make_tensor_value_info("y", T.FLOAT, (1, 3, 2, 2, 2))],
        [h.make_tensor("w", T.FLOAT, w.shape, w.ravel())]),
        opset_imports=[h.make_opsetid("", 17)]), str(path))
    mtvm.compile(str(path)).run_host({"x": x})     # the C backend's
    with pytest.raises(MtvmError) as e:
        mtvm.compile(str(path), backend="llvm")
    msg = str(e.value)
    assert "\n" not in msg
    assert re.fullmatch(r'c3\.onnx: node "conv3d" \(Conv, opset 17\): no LLVM lowering yet '
                        r'\(3-D windows\); compile with --backend c', msg), msg


@pytest.mark.parametrize("option", [dict(external_workspace=True), dict(io_in_workspace=True)])
def test_c_backend_options_are_refused_in_one_line(tmp_path, option):
    path = tmp_path / "r.onnx"
    _model([h.make_node("Relu", ["x"], ["y"])], {"x": np.ones((2, 2), np.float32)}, {}, path)
    with pytest.raises(MtvmError, match="--backend llvm does not support"):
        mtvm.compile(str(path), backend="llvm", **option)


def test_cli_compile_with_backend_llvm(tmp_path):
    path = tmp_path / "r.onnx"
    _model([h.make_node("Relu", ["x"], ["y"])], {"x": np.ones((2, 2), np.float32)}, {}, path)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "mtvm", "compile", str(path), "--backend", "llvm",
                        "--target", "cortex-m4", "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (out / "codegen" / "host" / "lib" / "lib0.o").stat().st_size > 0


@pytest.mark.skipif(not os.path.isdir(MODELS), reason="needs ../shared/models")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55", "rv32imac", "host"])
def test_int8_convolutions_run_in_place_where_they_copy_first(target):
    """Pointwise and depthwise QConvs whose nests copy what they read first (the
    im2col columns of Arm and RISC-V, every target's padded depthwise planes)
    take their input's buffer as the C kernels do: kws_dscnn_int8's arena is at
    most the C backend's on the microcontrollers (run there bit for bit by
    tests/device/test_llvm_boards.py); on x86, whose pointwise tiles read the
    input in place, only the depthwise layers are, and the host run is bit-exact."""
    path = os.path.join(MODELS, "kws_dscnn_int8.onnx")
    c = mtvm.compile(path, target=target)
    lib = mtvm.compile(path, backend="llvm", target=target)
    if target != "host":
        assert lib.metadata["workspace_bytes"] <= c.metadata["workspace_bytes"] < 12000
        return
    assert lib.metadata["workspace_bytes"] > c.metadata["workspace_bytes"]
    x = np.load(os.path.join(MODELS, "kws_dscnn_int8.npz"))["in_0"]
    name = c.metadata["inputs"][0]["name"]
    want = c.run_host({name: x})
    for k, v in lib.run_host({name: x}).items():
        np.testing.assert_array_equal(v, want[k])


def test_a_profiling_build_times_each_kernel_between_the_platform_hooks(tmp_path):
    """--profile: the entry calls mtvm_platform_timer_start / _stop_ticks around each
    kernel and stores the ticks in tvmgen_<mod>_profile_ticks, the C backend's
    contract (the header declares it); the board runs are in tests/device."""
    path = tmp_path / "r.onnx"
    _model([h.make_node("Relu", ["x"], ["t"]), h.make_node("Sigmoid", ["t"], ["y"])],
           {"x": np.ones((2, 2), np.float32)}, {}, path)
    lib = mtvm.compile(str(path), backend="llvm", profile=True, fuse=False)
    ir_text = lib.llvm_ir
    n = len(lib.kernels)
    assert n == 2 and lib.metadata["profiling"] is True
    assert len(re.findall(r'call void @"?mtvm_platform_timer_start"?\(\)', ir_text)) == n
    assert len(re.findall(r'call i64 @"?mtvm_platform_timer_stop_ticks"?\(\)', ir_text)) == n
    assert re.search(rf'@"?tvmgen_default_profile_ticks"? = global \[{n} x i64\]', ir_text)
    header = lib.sources["codegen/host/include/tvmgen_default.h"]
    assert f"extern uint64_t tvmgen_default_profile_ticks[{n}];" in header
    x = {"x": np.full((2, 2), -1.0, np.float32)}
    np.testing.assert_allclose(lib.run_host(x)["y"], np.full((2, 2), 0.5, np.float32))
    assert all(t > 0 for t in lib._jit.profile_ticks())      # ns, through the JIT
    plain = mtvm.compile(str(path), backend="llvm", fuse=False)
    assert "mtvm_platform_timer" not in plain.llvm_ir
