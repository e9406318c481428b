"""Normalizations against onnx.reference: BatchNormalization as a standalone
kernel (statistics as run-time inputs, or folding disabled), InstanceNorm,
LayerNorm (axis, optional outputs), LpNormalization."""
import numpy as np
import pytest

from mtvm.testing import check_model, make_model

rng = np.random.default_rng(3)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def typed_output(model, shape):
    """Give output 0 a type (onnx shape inference leaves BatchNormalization-9 untyped)."""
    from onnx import TensorProto, helper
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info(
        model.graph.output[0].name, TensorProto.FLOAT, shape))
    return model


def bn_params(c):
    return {"s": randn(c), "b": randn(c), "m": randn(c),
            "v": (np.abs(randn(c)) + 0.5).astype(np.float32)}


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 6), (1, 8, 7)], ids=str)
def test_batchnorm_runtime_stats(shape):
    x, p = randn(*shape), bn_params(shape[1])
    model = make_model("BatchNormalization", {"x": x, **p}, {"epsilon": 1e-3}, opset=15)
    check_model(model, {"x": x, **p}, sanitize=shape == (1, 8, 7))


def test_batchnorm_opset11():
    """onnx.reference's BatchNormalization-9 recomputes the statistics from x
    (training); the spec's inference result is the one opset 15 gives."""
    import mtvm
    from mtvm.testing import assert_close, reference_outputs
    x, p = randn(2, 3, 4), bn_params(3)
    m11 = typed_output(make_model("BatchNormalization", {"x": x, **p}, {"epsilon": 1e-3},
                                  opset=11), x.shape)
    m15 = make_model("BatchNormalization", {"x": x, **p}, {"epsilon": 1e-3}, opset=15)
    got = mtvm.compile(m11).run_host({"x": x, **p})
    assert_close(list(got.values())[0], reference_outputs(m15, {"x": x, **p})[0])


@pytest.mark.parametrize("fuse", [False, True])
def test_batchnorm_constant_stats(fuse):
    x = randn(2, 4, 3, 3)
    model = make_model("BatchNormalization", {"x": x}, consts=bn_params(4), opset=15)
    check_model(model, {"x": x}, fuse=fuse)


def test_batchnorm_training_mode_is_an_error():
    import mtvm
    from mtvm.errors import MtvmError
    x = randn(2, 3)
    model = typed_output(make_model("BatchNormalization", {"x": x}, {"training_mode": 1},
                                    consts=bn_params(3), opset=15), (2, 3))
    # one output in training mode: the ONNX checker refuses it (it wants three)
    with pytest.raises(MtvmError, match="(?i)training_mode"):
        mtvm.compile(model)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 4, 6), (2, 2, 2, 3, 3)], ids=str)
def test_instance_norm(shape):
    x = randn(*shape) * 2 + 1
    model = make_model("InstanceNormalization", {"x": x},
                       consts={"s": randn(shape[1]), "b": randn(shape[1])})
    check_model(model, {"x": x}, sanitize=shape == (1, 4, 6))


# (shape, axis, scale shape, with B, number of outputs)
LAYER_NORM = [((2, 3, 8), -1, (8,), True, 1), ((2, 3, 8), 1, (3, 8), True, 1),
              ((4, 6), 0, (4, 6), False, 1), ((2, 5, 4), -1, (4,), True, 3),
              ((3, 4), 1, (1,), True, 2), ((2, 3, 4), 1, (4,), True, 1),
              ((2, 3, 4), -2, (3, 1), False, 1)]


@pytest.mark.parametrize("shape,axis,sshape,with_b,nout", LAYER_NORM, ids=str)
def test_layer_norm(shape, axis, sshape, with_b, nout):
    x = randn(*shape) + 0.5
    consts = {"s": randn(*sshape)}
    if with_b:
        consts["b"] = randn(*sshape)
    model = make_model("LayerNormalization", {"x": x}, {"axis": axis, "epsilon": 1e-4},
                       consts=consts, n_outputs=nout)
    check_model(model, {"x": x}, sanitize=nout == 3)


@pytest.mark.parametrize("shape,axis,p", [((3, 5), -1, 2), ((2, 4, 3), 1, 2), ((4, 6), 0, 2),
                                          ((2, 4, 3), -1, 1)], ids=str)
def test_lp_normalization(shape, axis, p):
    x = randn(*shape)
    if p == 1:
        x = np.abs(x)   # onnx.reference sums x, not |x|, for p=1
    check_model(make_model("LpNormalization", {"x": x}, {"axis": axis, "p": p}), {"x": x})
