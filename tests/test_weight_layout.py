"""The weight-layout step (mtvm/codegen/weight_layout.py) and the integer
convolution's schedules (mtvm/schedules/*/qconv_s8.py): Conv and QConv keep the
model's plain weights in the IR, each target's schedule is chosen by the target
and lays the weights out for its micro-kernels before emission, and the int8
layers are tunable."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import numpy_helper
import onnx

import mtvm
from mtvm import schedules
from mtvm.interp import interpret
from mtvm.ops.quantized.conv import pack_conv_weights
from mtvm.tune.space import layers_of


def _model(models_dir, name="kws_dscnn_int8"):
    return os.path.join(models_dir, name + ".onnx")


def _qconvs(lib):
    return [lk for lk in lib.kernels if lk.kernel.node.op == "QConv"]


def test_qconv_keeps_the_plain_weights_and_its_schedule_lays_them_out(models_dir):
    path = _model(models_dir)
    m = onnx.load(path)
    model_weights = [numpy_helper.to_array(i) for i in m.graph.initializer
                     if i.data_type == onnx.TensorProto.INT8 and len(i.dims) == 4]
    lib = mtvm.compile(path, target="cortex-m4")
    convs = _qconvs(lib)
    assert len(convs) >= 9
    for lk in convs:
        n, k = lk.kernel.node, lk.kernel
        plain = lib.graph.tensors[n.inputs[1]].data
        # the IR's weights are one of the model's weight tensors, as the model has them
        assert any(w.shape == plain.shape and np.array_equal(w, plain) for w in model_weights)
        if n.attrs.get("folded", 1):
            assert k.schedule == "qconv_s8.im2col"
            assert np.array_equal(k.ins[1].const, pack_conv_weights(plain, n.attrs["group"]))
            assert k.ins[1].name != n.inputs[1]
        else:
            assert k.schedule == "qconv_s8.depthwise"
            assert k.ins[1].const is plain or np.array_equal(k.ins[1].const, plain)
    # the reference of the compiled graph (plain weights) is the compiled code's output
    ref = np.load(os.path.join(models_dir, "kws_dscnn_int8.npz"))
    x = {lib.graph.inputs[0]: ref["in_0"]}
    want = interpret(lib.graph, x)
    got = mtvm.compile(path).run_host(x)
    for name in lib.graph.outputs:
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("target, folded_schedule", [
    ("cortex-m55", "qconv_s8.im2col_mve"),
    ("rv32imac", "qconv_s8.im2col_rv32x4"),
    ("cortex-m0", "qconv_s8.im2col"),
    ("x86-64-v3", "qconv_s8.im2col"),
])
def test_the_target_chooses_the_int8_conv_schedule(models_dir, target, folded_schedule):
    lib = mtvm.compile(_model(models_dir, "ic_resnet8_int8"), target=target)
    chosen = {lk.kernel.schedule for lk in _qconvs(lib)}
    assert folded_schedule in chosen
    for s in chosen:
        assert schedules.get_schedule(s).family in ("generic", {
            "cortex-m55": "arm_mve", "rv32imac": "riscv", "x86-64-v3": "x86"}.get(target,
                                                                               "generic"))


@pytest.mark.parametrize("target, depthwise_schedule", [
    ("cortex-m55", "qconv_s8.depthwise_mve"),
    ("rv32imac", "qconv_s8.depthwise_rv32"),
    ("cortex-m4", "qconv_s8.depthwise"),
])
def test_the_target_chooses_the_int8_depthwise_schedule(models_dir, target,
                                                        depthwise_schedule):
    lib = mtvm.compile(_model(models_dir), target=target)
    dw = [lk.kernel for lk in _qconvs(lib) if not lk.kernel.node.attrs.get("folded", 1)]
    assert dw and {k.schedule for k in dw} == {depthwise_schedule}
    assert all(1 not in k.plain_ins for k in dw)     # depthwise reads the plain weights


def test_int8_conv_layers_are_tunable(models_dir):
    """The tuner's space of an int8 model: the x86 hosts choose between the direct
    kernels and the column (x86_direct), the M55 between Helium and the DSP pairs,
    RV32 between four and two pixels per block; each candidate is distinct code."""
    path = _model(models_dir, "ic_resnet8_int8")
    for target, other in (("x86-64-v4", "x86_direct=False"),
                          ("cortex-m55", "qconv_s8.im2col"),
                          ("rv32imac", "qconv_s8.im2col")):
        layers = [lay for lay in layers_of(mtvm.compile(path, target=target))
                  if lay.kind.startswith("QConv")]
        assert layers, target
        choices = {c.describe(lay.default) for lay in layers for c in lay.candidates}
        assert any(other in c for c in choices), (target, choices)
        assert all(len({c.ident for c in lay.candidates}) == len(lay.candidates)
                   for lay in layers)


def test_the_column_instead_of_the_x86_kernels_is_bit_exact(models_dir):
    """Forcing the other x86 candidate (the int16 column instead of the direct AVX2 /
    VNNI kernels) gives the same integers, run here."""
    path = _model(models_dir, "ic_resnet8_int8")
    ref = np.load(os.path.join(models_dir, "ic_resnet8_int8.npz"))
    base = mtvm.compile(path)
    x = {base.graph.inputs[0]: ref["in_0"]}
    lib = mtvm.compile(path, schedule_config={"qconv_s8.im2col": {"x86_direct": False}})
    assert lib.sources != base.sources
    want, got = base.run_host(x), lib.run_host(x)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_float_conv_weights_are_laid_out_only_for_the_gemm_plans(models_dir):
    from mtvm.ops import conv
    lib = mtvm.compile(_model(models_dir, "kws_dscnn"), target="cortex-m4")
    plans = set()
    for lk in (lk for lk in lib.kernels if lk.kernel.node.op == "Conv"):
        k, n = lk.kernel, lk.kernel.node
        plain = lib.graph.tensors[n.inputs[1]].data
        assert k.plain(1).const is not None and k.plain(1).size == plain.size
        if 1 in k.plain_ins:      # a GEMM-like plan: blocks of gemm_mr channels
            plans.add("packed")
            want = conv.packed_weights(plain, n.attrs.get("group", 1), k.knobs["gemm_mr"])
            assert np.array_equal(k.ins[1].const, want)
        else:                     # depthwise: the plain weights
            plans.add("plain")
            assert np.array_equal(k.ins[1].const.ravel(), plain.ravel())
    assert plans == {"packed", "plain"}
