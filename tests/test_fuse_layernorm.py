"""fuse_layernorm: a LayerNormalization written out as its arithmetic (exports before
opset 17) becomes the op -- one kernel, the outputs those of onnxruntime running the
written-out graph; near misses (an inner axis, Pow by 3, an intermediate read
elsewhere) stay as they are."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mtvm
from mtvm.testing import assert_close, reference_outputs

rng = np.random.default_rng(12)


def _model(shape=(2, 7, 24), axes=(-1,), square="Pow", scale=True, bias=True,
           keepdims=1, extra_use=False, power=2.0, opset=13):
    d = shape[-len(axes):]
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=list(axes), keepdims=keepdims),
             helper.make_node("Sub", ["x", "m"], ["d"])]
    inits = [numpy_helper.from_array(np.array(1e-5, np.float32), "eps")]
    if square == "Pow":
        nodes.append(helper.make_node("Pow", ["d", "two"], ["p"]))
        inits.append(numpy_helper.from_array(np.array(power, np.float32), "two"))
    else:
        nodes.append(helper.make_node("Mul", ["d", "d"], ["p"]))
    nodes += [helper.make_node("ReduceMean", ["p"], ["v"], axes=list(axes), keepdims=keepdims),
              helper.make_node("Add", ["v", "eps"], ["e"]),
              helper.make_node("Sqrt", ["e"], ["s"]),
              helper.make_node("Div", ["d", "s"], ["n"])]
    out = "n"
    if scale:
        inits.append(numpy_helper.from_array((rng.random(d) + 0.5).astype(np.float32), "g"))
        nodes.append(helper.make_node("Mul", [out, "g"], ["ng"]))
        out = "ng"
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(d).astype(np.float32), "b"))
        nodes.append(helper.make_node("Add", [out, "b"], ["nb"]))
        out = "nb"
    nodes.append(helper.make_node("Relu", [out], ["y"]))
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_use:
        outs.append(helper.make_tensor_value_info("v", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(shape))], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("kw", [dict(), dict(square="Mul"), dict(scale=False),
                                dict(bias=False), dict(scale=False, bias=False),
                                dict(shape=(1, 5, 4, 6), axes=(-2, -1)),
                                dict(shape=(3, 10), axes=(1,))],
                         ids=["pow", "mul", "no-scale", "no-bias", "plain", "two-axes", "2d"])
def test_written_out_layernorm_is_one_op(kw):
    m = _model(**kw)
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    x = {"x": (rng.standard_normal(shape) * 3 + 1).astype(np.float32)}
    lib = mtvm.compile(m)
    kinds = [o["kind"] for o in lib.metadata["operators"]]
    assert kinds[0].startswith("LayerNormalization") and len(kinds) == 1, kinds
    got = list(lib.run_host(x).values())[0]
    assert_close(got, reference_outputs(m, x)[0], rtol=1e-4, what=str(kw))


@pytest.mark.parametrize("kw", [dict(axes=(1,)), dict(power=3.0), dict(extra_use=True)],
                         ids=["inner-axis", "cube", "variance-read"])
def test_near_misses_stay(kw):
    m = _model(**kw)
    kinds = [o["kind"] for o in mtvm.compile(m).metadata["operators"]]
    assert not any(k.startswith("LayerNormalization") for k in kinds), kinds
