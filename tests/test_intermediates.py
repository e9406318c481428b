"""Every shared model (../shared/models, float and int8) checked tensor by tensor,
not only at its output: with random weights some outputs barely depend on the
input (vww_mobilenetv1's final activations are ~1e-11), so a wrong backbone
could still give the stored output.

The intermediate tensors are exposed as graph outputs (a float model: every node
output; an int8 model: every quantized activation), the model compiled with mtvm
and run on the host, and each tensor compared with onnxruntime without graph
optimizations (mtvm.validate: the operators' own semantics):

- float: max abs error <= 1e-4 x the tensor's own largest magnitude;
- int8: within one quantization step. A tensor further off is checked again on
  mtvm's own inputs (the subgraph from the nearest quantized tensors, run by the
  reference): a step of rounding difference upstream may grow downstream
  (a float op between DequantizeLinear and QuantizeLinear that rounds a tie the
  other way, as denoise_unet_int8's Resize did before it multiplied in
  onnxruntime's order), but each step on its own must stay within one step.
"""
import glob
import os

import numpy as np
import onnx
import pytest

import mtvm
from mtvm.testing import expose_intermediates, models_dir, quantized_activations, subgraph
from mtvm.validate import output_steps, reference_outputs

MODELS_DIR = models_dir()
MODELS = sorted(os.path.splitext(os.path.basename(p))[0]
                for p in glob.glob(os.path.join(MODELS_DIR, "*.onnx")))
FLOAT_RTOL = 1e-4
# Models mtvm does not support yet: {name: reason} (xfail, never a silent skip).
UNSUPPORTED: dict[str, str] = {}

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not MODELS, reason=f"no models in {MODELS_DIR}")]


def _params():
    return [pytest.param(m, marks=pytest.mark.xfail(reason=UNSUPPORTED[m], strict=True))
            if m in UNSUPPORTED else m for m in MODELS]


def _producers(model):
    return {o: n for n in model.graph.node for o in n.output if o}


def _where(model, tensor: str) -> str:
    """'Conv "/o/Conv"' -- the node behind a tensor (through its QuantizeLinear)."""
    prod = _producers(model)
    n = prod.get(tensor)
    if n is None:
        return "graph input"
    text = f'{n.op_type} "{n.name}"'
    if n.op_type == "QuantizeLinear" and n.input[0] in prod:
        p = prod[n.input[0]]
        text = f'{p.op_type} "{p.name}" (+ QuantizeLinear)'
    return text


def _float_error(a, r) -> tuple[float, float]:
    a, r = np.asarray(a), np.asarray(r)
    assert a.shape == r.shape, f"shape {a.shape} != reference {r.shape}"
    if r.dtype.kind != "f":
        return float(np.abs(a.astype(np.int64) - r.astype(np.int64)).max(initial=0)), 0.0
    assert np.array_equal(np.isnan(a), np.isnan(r)), "NaN positions differ"
    fin = np.isfinite(r)
    err = float(np.abs(a[fin].astype(np.float64) - r[fin]).max(initial=0.0))
    mag = float(np.abs(r[fin]).max(initial=0.0))
    return err, FLOAT_RTOL * max(mag, 1e-30)


def _steps(a, r) -> np.ndarray:
    return np.abs(np.asarray(a).astype(np.int64) - np.asarray(r).astype(np.int64))


def check_intermediates(model, x, compiled_model=None):
    """(problems, notes, the reference's name): mtvm on `compiled_model` (default:
    `model` itself) against the reference on `model`, tensor by tensor."""
    int8 = any(n.op_type == "QuantizeLinear" for n in model.graph.node)
    exposed, names = expose_intermediates(
        model, quantized_activations(model) if int8 else None)
    assert names, f"{model.graph.name}: no intermediate tensor could be exposed"
    name = model.graph.name
    feeds = {model.graph.input[0].name: x}
    lib = mtvm.compile(exposed if compiled_model is None
                       else expose_intermediates(compiled_model, names)[0])
    got = lib.run_host(feeds)
    ref = reference_outputs(exposed, feeds)
    out_names = [o.name for o in exposed.graph.output]
    assert len(got) == len(out_names) == len(ref.outputs)
    got_by_name = dict(zip(out_names, got.values()))
    steps = output_steps(model)
    bad, notes = [], []
    for tname, a, r in zip(out_names, got.values(), ref.outputs):
        where = f"{name}: tensor {tname!r} of {_where(exposed, tname)}"
        if int8 and np.asarray(r).dtype.kind in "iu":
            d = _steps(a, r)
            if d.max(initial=0) <= 1:
                continue
            # Off by more than a step: the same step on mtvm's own inputs.
            sub = subgraph(exposed, tname, set(names) | set(feeds))
            sub_feeds = {i.name: (feeds[i.name] if i.name in feeds else got_by_name[i.name])
                         for i in sub.graph.input}
            alone = _steps(a, reference_outputs(sub, sub_feeds).outputs[0])
            notes.append(f"{where}: {d.max()} steps off end to end ({np.count_nonzero(d > 1)} "
                         f"of {d.size} elements beyond one), {alone.max()} on its own inputs")
            if alone.max(initial=0) > 1:
                bad.append(f"{where}: {alone.max()} steps off on its own inputs "
                           f"({np.count_nonzero(alone > 1)} of {alone.size} elements)")
        elif tname in steps and int8:       # a float output behind DequantizeLinear
            unit = steps[tname].broadcast(np.shape(a))
            d = np.abs(np.asarray(a, np.float64) - np.asarray(r, np.float64)) / unit
            if d.max(initial=0) > 1.001:
                notes.append(f"{where}: {d.max():.3g} steps off end to end")
        else:
            err, tol = _float_error(a, r)
            if err > tol:
                bad.append(f"{where}: max abs error {err:.3g} > {tol:.3g} "
                           f"({FLOAT_RTOL:g} x its magnitude)")
    return bad, notes, f"{len(names)} intermediate tensors vs {ref.name}"


def _load(name):
    model = onnx.load(os.path.join(MODELS_DIR, name + ".onnx"))
    model.graph.name = name         # for the messages
    return model, np.load(os.path.join(MODELS_DIR, name + ".npz"))["in_0"]


@pytest.mark.parametrize("name", _params())
def test_intermediate_tensors_match_onnxruntime(name):
    model, x = _load(name)
    bad, notes, what = check_intermediates(model, x)
    print(f"{name}: {what}")
    for n in notes:
        print("  " + n)
    assert not bad, "\n".join(bad)


def test_a_wrong_backbone_passes_the_output_check_but_not_this_one():
    """vww_mobilenetv1 with its first convolution's weights negated gives exactly
    the stored output (random weights: the output ignores the input), so only
    the intermediate tensors can tell."""
    from onnx import numpy_helper
    name = "vww_mobilenetv1"
    if name not in MODELS:
        pytest.skip(f"{name} not in {MODELS_DIR}")
    model, x = _load(name)
    wrong = onnx.load(os.path.join(MODELS_DIR, name + ".onnx"))
    w = [n for n in wrong.graph.node if n.op_type == "Conv"][0].input[1]
    for t in wrong.graph.initializer:
        if t.name == w:
            t.CopyFrom(numpy_helper.from_array(-numpy_helper.to_array(t), t.name))
    ref = np.load(os.path.join(MODELS_DIR, name + ".npz"))["out_0"]
    got = list(mtvm.compile(wrong).run_host([x]).values())[0]
    assert np.abs(got - ref).max() <= 1e-4        # the output check cannot see it
    bad, _, _ = check_intermediates(model, x, compiled_model=wrong)
    assert bad and "/f/f.0/Conv" in bad[0], bad
