"""HostModule.run, the in-process call of a model's shared library: inputs by name or
in order, converted where they are not contiguous arrays of the model's dtype and
shape, wrong ones named; each call returns new output arrays."""
import numpy as np
import pytest

import mtvm
from mtvm.errors import MtvmError
from mtvm.host_runner import HostModule
from mtvm.testing import assert_close, make_model, reference_outputs

rng = np.random.default_rng(3)


@pytest.fixture(scope="module")
def conv():
    """A two-input model (Conv with its weights as an input), so order and names count."""
    x = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    m = make_model("Conv", {"x": x, "w": w}, {"pads": [1, 1, 1, 1]})
    lib = mtvm.compile(m)
    return m, lib, HostModule(lib, opt="-O1"), x, w


def test_inputs_by_name_in_order_and_converted(conv):
    m, lib, mod, x, w = conv
    expected = reference_outputs(m, {"x": x, "w": w})[0]
    (name,) = [o["name"] for o in lib.metadata["outputs"]]
    as_given = [
        {"x": x, "w": w},
        [x, w],
        # a view that is not contiguous: copied
        {"x": np.asfortranarray(x), "w": w[:, :, ::-1, :][:, :, ::-1, :]},
        # float64 and a list: converted
        {"x": x.astype(np.float64), "w": w.tolist()},
        # the right number of values in another shape: reshaped
        {"x": x.reshape(-1), "w": w},
    ]
    for inputs in as_given:
        got = mod.run(inputs)
        assert list(got) == [name]
        assert_close(got[name], expected, what=str(type(inputs)))


def test_each_call_returns_new_outputs(conv):
    _, _, mod, x, w = conv
    a = mod.run({"x": x, "w": w})
    b = mod.run({"x": -x, "w": w})
    (name,) = a
    assert a[name] is not b[name] and not np.shares_memory(a[name], b[name])
    # -x gives -y (no bias): the first result was not written over by the second call
    np.testing.assert_allclose(a[name], -b[name], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("inputs, message", [
    ({"x": np.zeros((1, 3, 6, 5), np.float32)}, "missing input(s) w"),
    ({"x": np.zeros((1, 3, 5, 5), np.float32), "w": np.zeros((4, 3, 3, 3), np.float32)},
     'input "x": expected shape [1, 3, 6, 5], got [1, 3, 5, 5]'),
    ({"x": np.zeros((1, 3, 6, 5), np.complex64), "w": np.zeros((4, 3, 3, 3), np.float32)},
     'input "x": expected dtype float32, got complex64'),
    ([np.zeros((1, 3, 6, 5), np.float32)], "the model takes 2 input(s), got 1"),
])
def test_wrong_inputs_are_named(conv, inputs, message):
    with pytest.raises(MtvmError) as e:
        conv[2].run(inputs)
    assert message in str(e.value)
