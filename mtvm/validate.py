"""Comparing mtvm's outputs with a reference run of the ONNX model, shared by
`mtvm run --validate` and the tests.

The reference is onnxruntime with its graph optimizations turned off, i.e. the
ONNX operators' own semantics. Its default (optimized) mode fuses
QuantizeLinear/DequantizeLinear pairs into int8 kernels whose rounding differs
from the operators' and from one CPU to another (8 quantization steps on
ad_autoencoder_int8, over 100 on fomo_mbv2_int8), so a verdict against it would
depend on the machine. Without onnxruntime the ONNX reference evaluator is used.

Quantized outputs are compared in quantization steps: an integer output
(int8/uint8...) in integer units, a float output made by DequantizeLinear (or a
--float-io output) in units of its scale. They pass when every element is
within one step; float outputs pass within 1e-4 of the reference's magnitude.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import MtvmError
from .exact_reference import ExactReference

FLOAT_RTOL = 1e-4
# Ops that pass a quantized tensor's values through unchanged: an output behind
# them still has the scale of the DequantizeLinear before them.
_VALUE_PRESERVING = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"}


@dataclass
class Reference:
    """A reference run: its outputs (graph order) and what produced them."""
    outputs: list
    name: str


@dataclass
class Step:
    """One quantization step of a tensor: scale (a scalar, or per-axis along
    `axis`), in the units the tensor is compared in."""
    scale: np.ndarray
    axis: int | None = None
    integer: bool = False       # an integer tensor: one step is one unit

    def broadcast(self, shape) -> np.ndarray:
        s = np.asarray(self.scale, np.float64)
        if s.size == 1:
            return s.reshape(())
        if self.axis is not None and len(shape) and s.ndim == 1:
            axis = self.axis % len(shape)
            if shape[axis] == s.size:
                b = [1] * len(shape)
                b[axis] = s.size
                return s.reshape(b)
        return np.asarray(s.max())      # blocked or unexpected layout: the coarsest step

    def describe(self) -> str:
        s = np.asarray(self.scale)
        return f"{float(s.ravel()[0]):.3g}" if s.size == 1 else \
            f"{float(s.min()):.3g}..{float(s.max()):.3g} (axis {self.axis})"


@dataclass
class OutputCheck:
    """One output against its reference."""
    name: str
    max_abs: float
    rmse: float
    cosine: float
    tolerance: float            # in the output's units (float: abs error, quantized: 1 step)
    ok: bool
    step: Step | None = None    # set when the output was compared in quantization steps
    max_steps: float = 0.0      # largest difference, in steps
    off_by_one: int = 0         # elements exactly one step away
    beyond: int = 0             # elements more than one step away
    size: int = 0
    note: str = ""

    def describe(self) -> str:
        text = (f"{self.name}: max abs err {self.max_abs:.3g} (tolerance {self.tolerance:.3g}), "
                f"RMSE {self.rmse:.3g}, cosine {self.cosine:.8f}")
        if self.step is not None:
            text += (f"; in steps of {self.step.describe()}: max {self.max_steps:.3g}, "
                     f"{self.off_by_one} of {self.size} element(s) off by one")
            if self.beyond:
                text += f", {self.beyond} off by more"
        if self.note:
            text += f"; {self.note}"
        return f"{text}  {'OK' if self.ok else 'MISMATCH'}"


def compare(actual, ref, step: Step | None = None, rtol: float = FLOAT_RTOL,
            name: str = "output") -> OutputCheck:
    """actual vs ref. With a step (or for integer outputs: a step of 1) the
    difference is counted in quantization steps and passes within one step;
    float outputs pass within rtol * max(|ref|, 1). NaN/Inf must sit where
    the reference has them."""
    a_arr, r_arr = np.asarray(actual), np.asarray(ref)
    if a_arr.shape != r_arr.shape:
        return OutputCheck(name, float("inf"), float("inf"), 0.0, 0.0, False, size=a_arr.size,
                           note=f"shape {list(a_arr.shape)} != reference {list(r_arr.shape)}")
    a = a_arr.astype(np.float64)
    r = r_arr.astype(np.float64)
    same_nonfinite = np.array_equal(np.isnan(a), np.isnan(r)) and \
        np.array_equal(np.isposinf(a), np.isposinf(r)) and \
        np.array_equal(np.isneginf(a), np.isneginf(r))
    fin = np.isfinite(r) & np.isfinite(a)
    diff = np.where(fin, np.abs(a - r), 0.0)
    af, rf = np.where(fin, a, 0.0).ravel(), np.where(fin, r, 0.0).ravel()
    denom = np.linalg.norm(af) * np.linalg.norm(rf)
    check = OutputCheck(
        name, float(diff.max(initial=0.0)),
        float(np.sqrt(np.mean(diff ** 2))) if diff.size else 0.0,
        float(af @ rf / denom) if denom else (1.0 if not diff.any() else 0.0),
        0.0, True, size=int(a.size))
    if step is None and r_arr.dtype.kind in "iu" and a_arr.dtype.kind in "iu":
        step = Step(np.asarray(1.0), integer=True)
    if step is not None:
        unit = step.broadcast(a.shape)
        steps = diff / unit
        # both sides sit on the quantization grid: differences are whole steps
        # (up to float32 rounding of the scale), so count with a little slack
        check.step = step
        check.max_steps = float(np.round(steps.max(initial=0.0), 3))
        check.off_by_one = int(np.count_nonzero((steps > 0.5) & (steps <= 1.001)))
        check.beyond = int(np.count_nonzero(steps > 1.001))
        check.tolerance = float(np.max(unit))
        check.ok = check.beyond == 0
    elif r_arr.dtype.kind in "fc":
        scale = float(np.max(np.abs(rf), initial=0.0))
        check.tolerance = rtol * max(scale, 1.0)
        check.ok = check.max_abs <= check.tolerance
    else:                                   # bool, or integers against floats: exact
        check.ok = check.max_abs == 0
    if not same_nonfinite:
        check.ok = False
        check.note = "NaN/Inf positions differ from the reference"
    return check


def _to_model(model):
    import onnx
    if isinstance(model, onnx.ModelProto):
        return model
    return onnx.load(str(model))


def output_steps(model) -> dict:
    """{graph output name: Step} for the outputs a quantization op produces:
    DequantizeLinear (float, step = its scale) or QuantizeLinear (integer,
    step = 1), also through ops that only move values (Reshape, Transpose...)."""
    import onnx
    from onnx import numpy_helper
    m = _to_model(model)
    inits = {t.name: t for t in m.graph.initializer}
    consts = {n.output[0]: n.attribute[0].t for n in m.graph.node
              if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"}
    producer = {o: n for n in m.graph.node for o in n.output if o}
    steps = {}
    for out in m.graph.output:
        n, moved = producer.get(out.name), False
        while n is not None and n.op_type in _VALUE_PRESERVING and n.input:
            n, moved = producer.get(n.input[0]), True
        if n is None or n.domain not in ("", "ai.onnx"):
            continue
        if n.op_type == "QuantizeLinear":
            steps[out.name] = Step(np.asarray(1.0), integer=True)
        elif n.op_type == "DequantizeLinear" and len(n.input) > 1:
            t = inits.get(n.input[1]) or consts.get(n.input[1])
            if t is None:
                continue
            try:
                scale = numpy_helper.to_array(t).astype(np.float64)
            except (ValueError, TypeError):
                continue
            axis = next((onnx.helper.get_attribute_value(a) for a in n.attribute
                         if a.name == "axis"), 1)
            if moved and scale.size > 1:       # the axis may have moved: coarsest step
                scale, axis = np.asarray(scale.max()), None
            steps[out.name] = Step(scale, axis if scale.size > 1 else None)
    return steps


def _quantized_ops(m) -> bool:
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear")
               or n.op_type.startswith("QLinear") for n in m.graph.node)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def ort_session(model, optimized: bool = False):
    """An onnxruntime CPU session of the ONNX model (a path or a ModelProto) with its
    graph optimizations off -- the ONNX operators' own semantics, the reference --
    or on (optimized: QDQ layers run as onnxruntime's integer kernels, see
    IntegerKernels). Raises what onnxruntime raises."""
    import onnx
    import onnxruntime as ort
    opts = ort.SessionOptions()
    level = ort.GraphOptimizationLevel
    opts.graph_optimization_level = level.ORT_ENABLE_ALL if optimized else level.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    src = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])


def reference_outputs(model, inputs: dict) -> Reference:
    """Outputs of the ONNX model (a path or a ModelProto) on `inputs` ({name:
    array}): onnxruntime with graph optimizations off; the ONNX reference
    evaluator when onnxruntime is not installed or cannot run the model."""
    import onnx
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    why = "onnxruntime is not installed"
    if ort is not None:
        try:
            sess = ort_session(model)
            feeds = {i.name: inputs[i.name] for i in sess.get_inputs() if i.name in inputs}
            return Reference(sess.run(None, feeds), f"onnxruntime {ort.__version__} (graph "
                             "optimizations off: the ONNX operators' own semantics)")
        except Exception as e:          # onnxruntime cannot: the reference evaluator may
            why = f"onnxruntime {ort.__version__} cannot run the model: {_first_line(e)}"
    from onnx.reference import ReferenceEvaluator
    try:
        outs = ReferenceEvaluator(_to_model(model)).run(None, dict(inputs))
    except Exception as e:
        raise MtvmError(f"no reference for validation: {why}; the ONNX reference evaluator "
                        f"(onnx {onnx.__version__}) cannot either: {_first_line(e)}") from None
    return Reference([np.asarray(o) for o in outs],
                     f"the ONNX reference evaluator (onnx {onnx.__version__}; {why})")


def validate_outputs(model, inputs: dict, outputs: dict, float_io: dict | None = None,
                     rtol: float = FLOAT_RTOL) -> tuple[Reference, list[OutputCheck]]:
    """mtvm's `outputs` ({name: array}, graph order) against the reference on the
    same `inputs`. float_io: {tensor name: quantization dict} of the tensors
    that were given/returned as float (--float-io): those inputs are quantized
    for the reference, those outputs compared after dequantizing the reference,
    in steps of their scale."""
    from .session import quant_io
    float_io = float_io or {}
    m = _to_model(model)
    graph_dtypes = {}
    for vi in m.graph.input:
        try:
            import onnx
            graph_dtypes[vi.name] = onnx.helper.tensor_dtype_to_np_dtype(
                vi.type.tensor_type.elem_type)
        except Exception:
            pass
    feeds = {}
    for k, v in inputs.items():
        if k in float_io and k in graph_dtypes:
            v = quant_io.quantize(v, float_io[k], graph_dtypes[k], k)
        feeds[k] = v
    ref = reference_outputs(model, feeds)
    steps = output_steps(m)
    names = [o.name for o in m.graph.output]
    if len(ref.outputs) != len(outputs):
        raise MtvmError(f"the model has {len(ref.outputs)} output(s) ({', '.join(names)}), "
                        f"{len(outputs)} were given to validate")

    def aligned(ref_outputs: list) -> list:
        """A reference run's arrays in the order of `outputs` (by name, else by position)."""
        by_name = dict(zip(names, ref_outputs))
        return [by_name[n] if n in by_name else ref_outputs[i] for i, n in enumerate(outputs)]

    def check(name: str, a, r) -> OutputCheck:
        step = steps.get(name)
        if name in float_io and np.asarray(r).dtype.kind in "iu":
            q = float_io[name]
            r = quant_io.dequantize(r, q)
            step = Step(np.asarray(q["scale"], np.float64), q.get("axis"))
        return compare(a, r, step, rtol, name)

    checks = [check(name, a, r) for (name, a), r in zip(outputs.items(), aligned(ref.outputs))]
    off = {i for i, c in enumerate(checks) if not c.ok and c.step is not None and not c.note}
    for breaker in (TIE_BREAKERS if off and _quantized_ops(m) else ()):
        other = breaker.runner(m).run(feeds)
        if other is None:
            continue
        for i, ((name, a), r) in enumerate(zip(outputs.items(), aligned(other))):
            if i in off and check(name, a, r).ok:
                off.discard(i)
                checks[i].ok = True
                checks[i].note = (f"{checks[i].max_steps:g} steps from the float reference "
                                  f"but within one of {breaker.what}: the reference's "
                                  "float32 rounds ties the other way (docs/validation.md)")
        if not off:
            break
    return ref, checks


class IntegerKernels:
    """The ONNX model (a path or a ModelProto) with onnxruntime's graph
    optimizations on, which run QDQ layers as its integer kernels (QLinearConv,
    MatMulInteger...); build once, run per sample. run() returns None when
    onnxruntime is missing or cannot run the model so.

    The reference (graph optimizations off) runs a quantized layer as ONNX
    defines it: dequantize, float32, quantize. Integer arithmetic puts a sum of
    exactly x.5 steps on one side of the tie, a float32 sum a hair off x.5 may
    put it on the other, and later layers can grow that one step to several."""

    def __init__(self, model):
        try:
            self.sess = ort_session(model, optimized=True)
        except Exception:
            self.sess = None

    def run(self, inputs: dict) -> list | None:
        if self.sess is None:
            return None
        try:
            return self.sess.run(None, {i.name: inputs[i.name] for i in self.sess.get_inputs()})
        except Exception:
            return None


@dataclass(frozen=True)
class TieBreaker:
    """Another exact-enough run of a quantized model, consulted when an output is
    more than the tolerance from the float reference."""
    samples_field: str      # the OutputResult list of the samples it settled
    what: str               # how a check's note names it
    described: str          # ... and a dataset's note
    runner: type            # runner(model).run(inputs) -> outputs (graph order) | None


# Tried in this order, by validate_outputs and mtvm.dataset_validation alike.
TIE_BREAKERS = (
    TieBreaker("integer_kernel_samples", "onnxruntime's integer kernels",
               "onnxruntime's integer kernels, graph optimizations on", IntegerKernels),
    TieBreaker("exact_arithmetic_samples", "the exact-arithmetic reference",
               "the exact-arithmetic reference in float64", ExactReference))
