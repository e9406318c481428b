"""Validating a compiled model on a dataset (`mtvm validate`, docs/validation.md).

Every sample goes through mtvm -- the host build, or a device through a
session -- and through a reference: the same ONNX model in onnxruntime with its
graph optimizations off (the operators' own semantics, as mtvm.validate), or
another model (`--reference model_f32.onnx` for an int8 model). Per output the
result holds the max abs error, the RMSE, the mean relative L2 error (l2r) and
the cosine similarity; quantized outputs are also measured in quantization
steps (mtvm.validate's Step and compare); with labels, the top-1 accuracy of
both and their top-1 agreement.

    data = load_dataset("samples.npz", host.inputs)
    result = validate_dataset("kws.onnx", data, HostBuild("kws.onnx"))
    print(result.summary())
    write_report(result, "report.html")

Tolerances (Tolerances): against the same model, by default what `mtvm run
--validate` allows -- quantized outputs within one step, float outputs within
1e-4 of the output's magnitude -- checked on every sample; against another
model (float vs int8) only the tolerances that are stated, since that
difference is the quantization error, not a fault.
"""
from __future__ import annotations

import html
import json
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from . import progress as _progress
from .errors import MtvmError
from .validate import FLOAT_RTOL, TIE_BREAKERS, Step, compare, ort_session, output_steps

STEP_SLACK = 1e-3       # differences are whole steps up to float32 rounding of the scale


# -- inputs ---------------------------------------------------------------------------------
@dataclass
class TensorSpec:
    """A model input or output: name, static shape, dtype (and quantization, when
    its metadata has it)."""
    name: str
    shape: tuple
    dtype: np.dtype
    quantization: dict | None = None

    @classmethod
    def of(cls, t) -> "TensorSpec":
        """From a metadata.json entry (dict) or a session's TensorInfo."""
        if isinstance(t, dict):
            return cls(t["name"], tuple(t["shape"]), np.dtype(t["dtype"]), t.get("quantization"))
        return cls(t.name, tuple(t.shape), np.dtype(t.dtype), getattr(t, "quantization", None))

    def describe(self) -> str:
        return f"{self.dtype.name}{list(self.shape)}"


def specs(tensors) -> list[TensorSpec]:
    return [t if isinstance(t, TensorSpec) else TensorSpec.of(t) for t in tensors]


@dataclass
class Dataset:
    """Samples for a model: {input name: array with a leading sample axis}."""
    arrays: dict
    source: str

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values()))) if self.arrays else 0

    def sample(self, i: int) -> dict:
        return {k: v[i] for k, v in self.arrays.items()}

    def head(self, n: int) -> "Dataset":
        return Dataset({k: v[:n] for k, v in self.arrays.items()}, self.source)


def _fmt_shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _load(path: str):
    """The array(s) of an .npy or .npz file; MtvmError when it cannot be read."""
    import zipfile
    if path.endswith(".npz") and os.path.isfile(path) and not zipfile.is_zipfile(path):
        raise MtvmError(f"cannot read {path}: not an .npz file (a zip archive of .npy files)")
    try:
        if path.endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "pickle" in reason:
            reason = "not a NumPy array file, or it holds Python objects (not loaded)"
        raise MtvmError(f"cannot read {path}: {reason}") from None


def _check_dtype(spec: TensorSpec, a: np.ndarray, where: str) -> np.ndarray:
    """a as spec's dtype: floats for a float input (integers are converted),
    integers within range for an integer input; anything else is refused."""
    want = spec.dtype
    if a.dtype == want:
        return a
    ok = (want.kind == "f" and a.dtype.kind in "fiub") or \
        (want.kind in "iu" and a.dtype.kind in "iub") or (want.kind == "b" and a.dtype.kind == "b")
    if ok and want.kind in "iu" and a.size:
        info = np.iinfo(want)
        ok = info.min <= int(a.min()) and int(a.max()) <= info.max
        if not ok:
            raise MtvmError(f"input \"{spec.name}\": {where} has values {int(a.min())}.."
                            f"{int(a.max())}, outside {want.name}")
    if not ok:
        hint = " (quantize it first)" if want.kind in "iu" and a.dtype.kind == "f" else ""
        raise MtvmError(f"input \"{spec.name}\": {where} is {a.dtype.name}, the model takes "
                        f"{want.name}{hint}")
    return a.astype(want)


def _stacked(spec: TensorSpec, a: np.ndarray, where: str) -> np.ndarray:
    """An array of samples of spec: [N, *shape]; also the input's shape itself
    (one sample) and, for a batch-1 input, [N, *shape[1:]] (the sample axis in
    place of the batch axis)."""
    shape = tuple(spec.shape)
    if a.shape == shape:
        a = a[None]
    elif len(shape) and shape[0] == 1 and a.ndim == len(shape) and a.shape[1:] == shape[1:]:
        a = a.reshape((a.shape[0],) + shape)
    elif not (a.ndim == len(shape) + 1 and a.shape[1:] == shape):
        raise MtvmError(f"input \"{spec.name}\": {where} has shape {_fmt_shape(a.shape)}; "
                        f"expected [N, {', '.join(str(d) for d in shape)}] (N samples of the "
                        f"input's shape {_fmt_shape(shape)})")
    return _check_dtype(spec, a, where)


def _one_sample(spec: TensorSpec, a: np.ndarray, where: str) -> np.ndarray:
    shape = tuple(spec.shape)
    if a.shape != shape:
        # the same elements up to dims of size 1 ([3, 96, 96] for [1, 3, 96, 96])
        if a.size == int(np.prod(shape, dtype=np.int64)) and \
                [d for d in a.shape if d != 1] == [d for d in shape if d != 1]:
            a = a.reshape(shape)
        else:
            raise MtvmError(f"input \"{spec.name}\": {where} has shape {_fmt_shape(a.shape)}; "
                            f"expected one sample of shape {_fmt_shape(shape)}")
    return _check_dtype(spec, a, where)


def _pick(specs_: list[TensorSpec], arrays: dict, path: str) -> dict:
    """{input name: array} from an .npz's arrays, keyed by input name or in_0, in_1..."""
    out = {}
    for i, s in enumerate(specs_):
        key = s.name if s.name in arrays else f"in_{i}" if f"in_{i}" in arrays else None
        if key is None:
            keys = s.name if s.name == f"in_{i}" else f"{s.name} or in_{i}"
            raise MtvmError(f"{path} has no array for input \"{s.name}\" (looked for {keys}); "
                            f"its arrays: {', '.join(arrays) or 'none'}")
        out[s.name] = np.asarray(arrays[key])
    return out


def load_dataset(path, inputs) -> Dataset:
    """Samples for a model with `inputs` (metadata entries, TensorInfos or
    TensorSpecs) from an .npz (one array per input, keyed by its name or in_0,
    in_1..., with a leading sample axis), an .npy (a one-input model) or a
    directory of .npy/.npz files holding one sample each (sorted by name).
    Integer data for float inputs is converted; anything else that does not
    fit raises MtvmError with one line."""
    path = os.fspath(path)
    inputs = specs(inputs)
    if not os.path.exists(path):
        raise MtvmError(f"data {path} not found")
    if os.path.isdir(path):
        return _load_dir(path, inputs)
    if not path.endswith((".npz", ".npy")):
        raise MtvmError(f"data {path}: expected an .npz, an .npy or a directory of them")
    data = _load(path)
    if isinstance(data, np.ndarray):
        if len(inputs) != 1:
            raise MtvmError(f"{path} holds one array; the model has {len(inputs)} inputs "
                            f"({', '.join(s.name for s in inputs)}): use an .npz keyed by "
                            "input name")
        data = {inputs[0].name: data}
    arrays = {s.name: _stacked(s, a, path) for s, a in zip(inputs, _pick(inputs, data,
                                                                          path).values())}
    counts = {k: len(v) for k, v in arrays.items()}
    if len(set(counts.values())) > 1:
        raise MtvmError(f"{path}: the inputs have different numbers of samples ("
                        + ", ".join(f"{k}: {n}" for k, n in counts.items()) + ")")
    if not arrays or not len(next(iter(arrays.values()))):
        raise MtvmError(f"{path} holds no samples")
    return Dataset(arrays, path)


def _load_dir(path: str, inputs: list[TensorSpec]) -> Dataset:
    files = sorted(f for f in os.listdir(path) if f.endswith((".npy", ".npz"))
                   and os.path.isfile(os.path.join(path, f)))
    if not files:
        raise MtvmError(f"{path} holds no .npy or .npz files (one sample each)")
    per_input = {s.name: [] for s in inputs}
    for f in files:
        full = os.path.join(path, f)
        data = _load(full)
        if isinstance(data, np.ndarray):
            if len(inputs) != 1:
                raise MtvmError(f"{full} holds one array; the model has {len(inputs)} inputs "
                                f"({', '.join(s.name for s in inputs)}): use .npz files keyed "
                                "by input name")
            data = {inputs[0].name: data}
        for s, a in zip(inputs, _pick(inputs, data, full).values()):
            per_input[s.name].append(_one_sample(s, a, full))
    return Dataset({k: np.stack(v) for k, v in per_input.items()}, path)


def load_labels(path, count: int) -> np.ndarray:
    """Class indices, one per sample: an .npy/.npz of shape [N] (or [N, 1]), or
    [N, classes] (one-hot or scores: the argmax is the label)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MtvmError(f"labels {path} not found")
    data = _load(path)
    if isinstance(data, dict):
        if len(data) != 1 and "labels" not in data:
            raise MtvmError(f"{path} holds {len(data)} arrays ({', '.join(data)}); expected "
                            "one, or one named labels")
        data = data["labels"] if "labels" in data else next(iter(data.values()))
    a = np.asarray(data)
    if a.ndim == 2 and a.shape[1] > 1:
        a = a.argmax(axis=1)
    elif a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise MtvmError(f"labels {path} have shape {_fmt_shape(a.shape)}; expected [N] class "
                        "indices or [N, classes]")
    if a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
        a = a.astype(np.int64)
    if a.dtype.kind not in "iub":
        raise MtvmError(f"labels {path} are {a.dtype.name}; expected integer class indices")
    if len(a) != count:
        raise MtvmError(f"labels {path} has {len(a)} label(s), the data {count} sample(s)")
    if len(a) and int(a.min()) < 0:
        raise MtvmError(f"labels {path} hold a negative class index ({int(a.min())})")
    return a.astype(np.int64)


# -- what runs the samples ----------------------------------------------------------------
class HostBuild:
    """The model compiled for this machine (target "c" unless given) and loaded
    as a shared library (mtvm.host_runner); with backend="llvm", its object code
    run through LLVM's JIT (LLVMCompiledModel.run_host)."""

    def __init__(self, model, **compile_options):
        from .compiler import compile as mtvm_compile
        from .host_runner import HostModule
        from .model_library import CompiledModel
        self.compiled = model if isinstance(model, CompiledModel) else \
            mtvm_compile(model, **compile_options)
        md = self.compiled.metadata
        self.inputs = specs(md["inputs"])
        self.outputs = specs(md["outputs"])
        self.module = None
        if self.compiled.backend == "c":
            with _progress.waiting(f"building {md['model_name']} for the host"):
                self.module = HostModule(self.compiled)
        self.name = f"mtvm host build (target {self.compiled.target.name}" + (
            ")" if self.module else f", {self.compiled.backend} backend, JIT)")
        self.ticks: list[int] = []
        self.ticks_per_second = 0

    def run(self, sample: dict) -> dict:
        return self.module.run(sample) if self.module else self.compiled.run_host(sample)


class DeviceRun:
    """A device through an open session (sess.executor.run per sample), with
    each run's device-timer ticks."""

    def __init__(self, session, where: str = ""):
        self.session = session
        info = session.info()
        self.inputs = specs(info.inputs)
        self.outputs = specs(info.outputs)
        self.ticks_per_second = info.ticks_per_second
        self.ticks: list[int] = []
        self.name = f"mtvm on {where or info.board} (session)"

    def run(self, sample: dict) -> dict:
        ex = self.session.executor
        outs = ex.run(sample)
        if ex.last_run_ticks is not None:
            self.ticks.append(int(ex.last_run_ticks))
        return outs


class ReferenceModel:
    """An ONNX model run by onnxruntime with its graph optimizations off, one
    session for all samples (mtvm.validate.reference_outputs per sample when
    onnxruntime cannot run it: that falls back to the ONNX reference evaluator)."""

    def __init__(self, model):
        import onnx
        self.model = model
        m = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
        inits = {t.name for t in m.graph.initializer}
        self.input_names = [i.name for i in m.graph.input if i.name not in inits]
        self.input_dtypes = {}
        for i in m.graph.input:
            try:
                self.input_dtypes[i.name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(
                    i.type.tensor_type.elem_type))
            except Exception:
                pass
        self.output_names = [o.name for o in m.graph.output]
        self.sess = None
        self.name = ""
        try:
            import onnxruntime as ort
            self.sess = ort_session(model)
            self.name = (f"onnxruntime {ort.__version__} "
                         "(graph optimizations off: the ONNX operators' own semantics)")
        except Exception:
            self.sess = None

    def feeds(self, sample: dict, input_order: list[str], bound: dict | None = None) -> dict:
        """The sample as this model's inputs: by name, else by position; `bound`:
        the values of inputs compiled in as constants (--bind)."""
        if bound:
            sample = {**{k: np.asarray(v) for k, v in bound.items()}, **sample}
            input_order = input_order + [k for k in bound if k not in input_order]
        if len(self.input_names) != len(input_order):
            extra = [n for n in self.input_names if n not in input_order]
            raise MtvmError(f"the reference model takes {len(self.input_names)} input(s) "
                            f"({', '.join(self.input_names)}), the compiled model "
                            f"{len(input_order)} ({', '.join(input_order)})"
                            + (f": no data for {', '.join(extra)} (an input bound with "
                               "--bind cannot be fed to the reference)" if extra else ""))
        out = {}
        for i, name in enumerate(self.input_names):
            a = np.asarray(sample[name] if name in sample else sample[input_order[i]])
            want = self.input_dtypes.get(name)
            if want is not None and a.dtype != want and a.dtype.kind == want.kind:
                a = a.astype(want)
            out[name] = a
        return out

    def run(self, feeds: dict) -> list | None:
        if self.sess is not None:
            try:
                return self.sess.run(None, feeds)
            except Exception:       # leave it to reference_outputs (it says why)
                self.sess = None
        from .validate import reference_outputs
        ref = reference_outputs(self.model, feeds)
        self.name = ref.name
        return ref.outputs


# -- tolerances and results ---------------------------------------------------------------
@dataclass
class Tolerances:
    """What passes. None: not checked. Per sample: max_steps (quantized
    outputs, largest difference in quantization steps), rtol (float outputs:
    max abs error <= rtol * max(|reference|, 1)), min_cosine. Over the
    dataset: max_abs, max_rmse, max_l2r (mean relative L2), min_agreement and
    min_accuracy (top-1, fractions 0..1; accuracy needs labels). NaN/Inf
    positions must match whenever a per-sample tolerance is checked, shapes always."""
    max_steps: float | None = None
    rtol: float | None = None
    max_abs: float | None = None
    max_rmse: float | None = None
    max_l2r: float | None = None
    min_cosine: float | None = None
    min_agreement: float | None = None
    min_accuracy: float | None = None

    @classmethod
    def defaults(cls, same_model: bool = True, **stated) -> "Tolerances":
        """Against the same model: one step, FLOAT_RTOL (mtvm.validate's), plus what
        is stated; against another model only what is stated."""
        base = {"max_steps": 1.0, "rtol": FLOAT_RTOL} if same_model else {}
        base.update({k: v for k, v in stated.items() if v is not None})
        return cls(**base)

    def stated(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class OutputResult:
    """One output over the dataset."""
    name: str
    shape: list
    dtype: str
    compared_as: str = "float"          # "float", "steps of <scale>", "integer steps", "exact"
    step: Step | None = None
    samples: int = 0
    elements: int = 0
    max_abs: float = 0.0
    worst_sample: int = 0               # the sample of max_abs
    rmse: float = 0.0
    l2r: float = 0.0                    # mean over samples of |mtvm - ref| / |ref|
    cosine: float = 1.0                 # mean over samples
    min_cosine: float = 1.0
    max_steps: float | None = None      # quantized outputs: in steps
    off_by_one: int = 0                 # elements exactly one step away
    beyond: int = 0                     # elements more than one step away
    failed_samples: list = field(default_factory=list)   # outside the per-sample tolerance
    nonfinite_samples: list = field(default_factory=list)
    # samples more than max_steps off the float reference and accepted (see
    # _accept_by_tie_breaker): within them of onnxruntime's integer kernels, or
    # else of the exact-arithmetic reference (mtvm.exact_reference)
    integer_kernel_samples: list = field(default_factory=list)
    exact_arithmetic_samples: list = field(default_factory=list)
    note: str = ""
    failures: list = field(default_factory=list)
    _sq: float = 0.0
    _l2r: list = field(default_factory=list)
    _cos: list = field(default_factory=list)
    _bad: dict = field(default_factory=dict)      # {reason: [samples]}
    _max: list = field(default_factory=list)      # per sample: max abs error
    _steps: list = field(default_factory=list)    # per sample: max steps (quantized)

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if not k.startswith("_") and k != "step"}
        if self.step is not None:
            d["step"] = self.step.describe()
        d["ok"] = self.ok
        d = {k: _json_number(v) for k, v in d.items()}
        d["per_sample"] = {"max_abs": [_json_number(v) for v in self._max],
                           "cosine": list(self._cos)}
        if self._steps:
            d["per_sample"]["max_steps"] = list(self._steps)
        return d


@dataclass
class Top1:
    """Top-1 of one output: agreement of mtvm with the reference, accuracies with labels."""
    output: str
    samples: int
    agree: int
    correct: int | None = None          # mtvm's, with labels
    reference_correct: int | None = None

    @property
    def agreement(self) -> float:
        return self.agree / self.samples if self.samples else 1.0

    @property
    def accuracy(self) -> float | None:
        return None if self.correct is None else self.correct / max(self.samples, 1)

    @property
    def reference_accuracy(self) -> float | None:
        return None if self.reference_correct is None else \
            self.reference_correct / max(self.samples, 1)

    def describe(self) -> str:
        text = (f"top-1 of {self.output}: agreement {self.agree}/{self.samples} "
                f"({self.agreement:.1%})")
        if self.correct is not None:
            text += (f"; accuracy mtvm {self.accuracy:.1%}, reference "
                     f"{self.reference_accuracy:.1%} ({self.samples} labels)")
        return text

    def to_dict(self) -> dict:
        return {"output": self.output, "samples": self.samples, "agree": self.agree,
                "agreement": self.agreement, "accuracy": self.accuracy,
                "reference_accuracy": self.reference_accuracy}


@dataclass
class HostAgreement:
    """A device's outputs against the host build's on the same samples."""
    samples: int = 0
    identical: int = 0                  # samples whose every output is bit-identical
    max_abs: float = 0.0
    required: bool = False              # a difference fails the validation

    @property
    def exact(self) -> bool:
        return self.identical == self.samples

    def describe(self) -> str:
        if self.exact:
            return f"device vs host build: bit-identical on {self.samples}/{self.samples} samples"
        return (f"device vs host build: bit-identical on {self.identical}/{self.samples} "
                f"samples, max abs difference {self.max_abs:.3g}")

    def to_dict(self) -> dict:
        return {"samples": self.samples, "identical": self.identical, "exact": self.exact,
                "max_abs": self.max_abs, "required": self.required}


@dataclass
class ValidationResult:
    model: str
    runner: str
    reference: str
    samples: int
    data: str
    tolerances: Tolerances
    outputs: list
    top1: Top1 | None = None
    host: HostAgreement | None = None
    failures: list = field(default_factory=list)
    seconds: float = 0.0
    device_seconds: list = field(default_factory=list)    # per run, device timer
    timer_note: str = ""                                  # what the device's times mean
    mtvm_outputs: dict = field(default_factory=dict)      # {name: [N, ...]}
    reference_outputs: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def table(self) -> str:
        rows = [("output", "compared", "max abs", "RMSE", "l2r", "cosine", "min cos",
                 "max steps", "off by 1", ">1 step", "samples ok", "verdict")]
        for o in self.outputs:
            q = o.max_steps is not None
            bad = len(o.failed_samples)
            rows.append((o.name, o.compared_as, f"{o.max_abs:.3g}", f"{o.rmse:.3g}",
                         f"{o.l2r:.3g}", f"{o.cosine:.6f}", f"{o.min_cosine:.6f}",
                         f"{o.max_steps:g}" if q else "-",
                         f"{o.off_by_one}/{o.elements}" if q else "-",
                         f"{o.beyond}" if q else "-", f"{o.samples - bad}/{o.samples}",
                         "OK" if o.ok else "FAIL"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        fmt = lambda r: "  ".join(c.ljust(w) if i < 2 else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        return "\n".join([fmt(rows[0]), fmt(tuple("-" * w for w in widths))]
                         + [fmt(r) for r in rows[1:]])

    def summary(self) -> str:
        lines = [f"validation of {self.model} on {self.samples} sample(s) from {self.data}",
                 f"  mtvm:      {self.runner}", f"  reference: {self.reference}", "",
                 self.table(), ""]
        if self.top1 is not None:
            lines.append(self.top1.describe())
        if self.host is not None:
            lines.append(self.host.describe())
        if self.device_seconds:
            from .session.executor import fmt_seconds
            s = sorted(self.device_seconds)
            lines.append(f"device time per run (device timer): median "
                         f"{fmt_seconds(s[len(s) // 2])}, min {fmt_seconds(s[0])}, "
                         f"max {fmt_seconds(s[-1])}")
            if self.timer_note:
                lines.append(f"  timer: {self.timer_note}")
        for o in self.outputs:
            if o.note:
                lines.append(f"{o.name}: {o.note}")
        stated = ", ".join(f"{k} {v:g}" for k, v in self.tolerances.stated().items())
        lines.append(f"tolerances: {stated or 'none (report only)'}")
        lines += [f"FAIL: {f}" for f in self.failures]
        lines.append(f"{'PASS' if self.ok else 'FAIL'} ({self.seconds:.1f} s)")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "model": self.model, "runner": self.runner, "reference": self.reference,
            "data": self.data, "samples": self.samples, "passed": self.ok,
            "failures": list(self.failures), "tolerances": self.tolerances.stated(),
            "outputs": [o.to_dict() for o in self.outputs],
            "top1": self.top1.to_dict() if self.top1 else None,
            "host_agreement": self.host.to_dict() if self.host else None,
            "device_seconds": self.device_seconds, "timer_note": self.timer_note,
            "seconds": self.seconds,
        }


def _json_number(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


# -- the comparison -----------------------------------------------------------------------
def _l2r(a: np.ndarray, r: np.ndarray) -> float:
    a, r = a.astype(np.float64).ravel(), r.astype(np.float64).ravel()
    fin = np.isfinite(a) & np.isfinite(r)
    num = float(np.linalg.norm(np.where(fin, a - r, 0.0)))
    den = float(np.linalg.norm(np.where(fin, r, 0.0)))
    return num / den if den else (0.0 if num == 0 else float("inf"))


def _as_reference_units(actual, ref, spec: TensorSpec, step):
    """An integer mtvm output against a float reference (another, float
    model): dequantized with the output's quantization, compared in its steps."""
    a, r = np.asarray(actual), np.asarray(ref)
    if a.dtype.kind in "iu" and r.dtype.kind == "f" and spec.quantization:
        from .session import quant_io
        q = spec.quantization
        return quant_io.dequantize(a, q), r, Step(np.asarray(q["scale"], np.float64),
                                                  q.get("axis"))
    return a, r, step


def _add_sample(o: OutputResult, i: int, actual, ref, step, tol: Tolerances) -> None:
    rtol = tol.rtol if tol.rtol is not None else FLOAT_RTOL
    c = compare(actual, ref, step, rtol, o.name)
    o.samples += 1
    if c.note.startswith("shape"):
        o._bad.setdefault("shape", []).append(i)
        o.note = o.note or f"sample {i}: {c.note}"
        o.max_abs = o.rmse = o.l2r = float("inf")
        o._cos.append(0.0)
        o._max.append(float("inf"))
        return
    if c.note:
        o.nonfinite_samples.append(i)
        o.note = o.note or f"sample {i}: {c.note}"
    if c.max_abs > o.max_abs or o.samples == 1:
        o.max_abs, o.worst_sample = c.max_abs, i
    o.elements += c.size
    o._sq += c.rmse ** 2 * c.size
    o._l2r.append(_l2r(np.asarray(actual), np.asarray(ref)))
    o._cos.append(c.cosine)
    o._max.append(c.max_abs)
    bad = None
    if c.step is not None:
        o.step = c.step
        o.compared_as = "integer steps" if c.step.integer else \
            f"steps of {c.step.describe()}"
        o.max_steps = max(o.max_steps or 0.0, c.max_steps)
        o._steps.append(c.max_steps)
        o.off_by_one += c.off_by_one
        o.beyond += c.beyond
        if tol.max_steps is not None and c.max_steps > tol.max_steps + STEP_SLACK:
            bad = "steps"
    elif np.asarray(ref).dtype.kind in "fc":
        if tol.rtol is not None and c.max_abs > c.tolerance:
            bad = "rtol"
    else:                               # bool, integers against floats
        o.compared_as = "exact"
        if (tol.rtol is not None or tol.max_steps is not None) and c.max_abs != 0:
            bad = "exact"
    if bad:
        o._bad.setdefault(bad, []).append(i)
    if tol.min_cosine is not None and c.cosine < tol.min_cosine:
        o._bad.setdefault("cosine", []).append(i)


def _accept_by_tie_breaker(off: list, i: int, outs: dict, other_outs: list | None,
                           steps: dict, tol: Tolerances, accepted: str) -> list:
    """Sample i of the quantized outputs `off` ([(result, spec, reference index)])
    is more than max_steps from the float reference. Each output passes that is
    within max_steps of other_outs, another run of the model that does not round
    the float reference's ties (mtvm.validate.TIE_BREAKERS); the sample is added
    to its result's list named `accepted`. Returns the outputs still off."""
    if other_outs is None:
        return off
    rtol = tol.rtol if tol.rtol is not None else FLOAT_RTOL
    still = []
    for o, s, j in off:
        a, r, step = _as_reference_units(outs[s.name], other_outs[j], s, steps.get(s.name))
        c = compare(a, r, step, rtol, o.name)
        if c.step is None or c.note or c.max_steps > tol.max_steps + STEP_SLACK:
            still.append((o, s, j))
            continue
        o._bad["steps"].remove(i)
        if not o._bad["steps"]:
            del o._bad["steps"]
        getattr(o, accepted).append(i)
    return still


def _finish(o: OutputResult, tol: Tolerances, per_sample_checked: bool) -> None:
    if o._cos:
        o.cosine = float(np.mean(o._cos))
        o.min_cosine = float(np.min(o._cos))
    if o.elements and math.isfinite(o.rmse):
        o.rmse = math.sqrt(o._sq / o.elements)
        o.l2r = float(np.mean(o._l2r)) if o._l2r else 0.0
    n = o.samples
    if per_sample_checked and o.nonfinite_samples:
        o._bad["nonfinite"] = list(o.nonfinite_samples)
    o.failed_samples = sorted({i for v in o._bad.values() for i in v})
    by = [(len(getattr(o, b.samples_field)), b.described) for b in TIE_BREAKERS
          if getattr(o, b.samples_field)]
    if by and not o.note:
        o.note = (f"{sum(k for k, _ in by)} of {n} sample(s) more than {tol.max_steps:g} "
                  f"step(s) from the reference pass, within {tol.max_steps:g} of "
                  + " or ".join(f"{what} ({k} sample(s))" for k, what in by) +
                  ": the reference runs each quantized layer in float32, which rounds some "
                  "x.5 ties the other way, and such one-step differences grow through the "
                  "layers that follow")
    why = {
        "shape": lambda: "with an output shape unlike the reference's",
        "steps": lambda: (f"more than {tol.max_steps:g} quantization step(s) off "
                          f"(max {o.max_steps:g})"),
        "rtol": lambda: f"beyond rtol {tol.rtol:g} (max abs error {o.max_abs:.3g})",
        "exact": lambda: "not exactly equal",
        "cosine": lambda: f"below cosine {tol.min_cosine:g} (min {o.min_cosine:.6f})",
        "nonfinite": lambda: "with NaN/Inf where the reference has none, or the reverse",
    }
    for key, samples in o._bad.items():
        o.failures.append(f"{o.name}: {len(samples)} of {n} sample(s) {why[key]()} "
                          f"(first: sample {samples[0]})")
    if "shape" in o._bad:
        return
    for attr, limit, label in (("max_abs", tol.max_abs, "max abs error"),
                               ("rmse", tol.max_rmse, "RMSE"), ("l2r", tol.max_l2r, "l2r")):
        value = getattr(o, attr)
        if limit is not None and not value <= limit:
            o.failures.append(f"{o.name}: {label} {value:.3g} > {limit:g}")


def _top1(name: str, mine: np.ndarray, ref: np.ndarray, labels) -> Top1:
    n = len(mine)
    a = mine.reshape(n, -1).argmax(axis=1)
    r = ref.reshape(n, -1).argmax(axis=1)
    t = Top1(name, n, int(np.count_nonzero(a == r)))
    if labels is not None:
        classes = mine.reshape(n, -1).shape[1]
        if len(labels) and int(labels.max()) >= classes:
            raise MtvmError(f"a label is {int(labels.max())}, but output \"{name}\" has "
                            f"{classes} classes")
        t.correct = int(np.count_nonzero(a == labels))
        t.reference_correct = int(np.count_nonzero(r == labels))
    return t


def _is_scores(spec: TensorSpec) -> bool:
    """An output that looks like class scores: one dim above 1 (e.g. [1, 12])."""
    return len([d for d in spec.shape if d != 1]) == 1


def validate_dataset(model, data: Dataset, runner, reference=None, labels=None,
                     tolerances: Tolerances | None = None, label_output: str | None = None,
                     host=None, host_exact: bool = False, limit: int | None = None,
                     bound: dict | None = None, desc: str = "validate") -> ValidationResult:
    """Runs every sample of `data` through `runner` (HostBuild, DeviceRun, or
    anything with inputs/outputs/name/run) and through the reference (`reference`:
    another ONNX model, default `model` itself) and compares them per output.

    labels: class indices per sample (load_labels) for top-1 accuracy; the top-1
    output is `label_output` (default: the first output); top-1 agreement is
    reported for it when there are labels or it looks like class scores.
    host: a HostBuild to compare a device's outputs with (host_exact: any
    difference fails). tolerances: default Tolerances.defaults(same model or not).
    bound: {input name: value} of the inputs compiled in as constants (bind=), fed
    to the reference. limit: only the first samples."""
    t0 = time.monotonic()
    model_name = os.fspath(model) if isinstance(model, (str, os.PathLike)) else "model"
    same_model = reference is None
    tol = tolerances if tolerances is not None else Tolerances.defaults(same_model)
    ref_model = ReferenceModel(reference if reference is not None else model)
    if limit is not None:
        data = data.head(limit)
    n = len(data)
    if n == 0:
        raise MtvmError(f"{data.source} holds no samples")
    if labels is not None:
        labels = np.asarray(labels)
        if len(labels) < n:
            raise MtvmError(f"{len(labels)} label(s) for {n} sample(s)")
        labels = labels[:n]
    input_order = [s.name for s in runner.inputs]
    missing = [s for s in input_order if s not in data.arrays]
    if missing:
        raise MtvmError(f"the data has no samples for input(s) {', '.join(missing)}")
    in_specs = {s.name: s for s in runner.inputs}
    data = Dataset({k: _check_dtype(in_specs[k], np.asarray(v), data.source)
                    if k in in_specs else v for k, v in data.arrays.items()}, data.source)
    out_specs = runner.outputs
    steps = output_steps(model)
    ref_names = ref_model.output_names
    if len(ref_names) != len(out_specs):
        raise MtvmError(f"the reference has {len(ref_names)} output(s) ({', '.join(ref_names)}),"
                        f" the model {len(out_specs)} ({', '.join(s.name for s in out_specs)})")
    ref_index = [ref_names.index(s.name) if s.name in ref_names else i
                 for i, s in enumerate(out_specs)]
    if label_output is not None and label_output not in [s.name for s in out_specs]:
        raise MtvmError(f"--label-output {label_output}: the model has no such output; its "
                        f"outputs: {', '.join(s.name for s in out_specs)}")
    label_spec = next((s for s in out_specs if s.name == label_output), out_specs[0]) \
        if out_specs else None
    want_top1 = label_spec is not None and (labels is not None or label_output is not None
                                            or _is_scores(label_spec))
    if want_top1 and labels is not None and len(labels):
        classes = int(np.prod(label_spec.shape, dtype=np.int64))
        if int(labels.max()) >= classes:
            raise MtvmError(f"a label is {int(labels.max())}, but output \"{label_spec.name}\" "
                            f"has {classes} classes")
    if tol.min_accuracy is not None and labels is None:
        raise MtvmError("a minimum accuracy needs labels (--labels)")
    if tol.min_agreement is not None and not want_top1:
        raise MtvmError(f"top-1 agreement needs an output of class scores; "
                        f"{label_spec.name if label_spec else 'the model'} is not one "
                        "(--label-output NAME)")
    results = [OutputResult(s.name, list(s.shape), s.dtype.name) for s in out_specs]
    mine = {s.name: [] for s in out_specs}
    refs = {s.name: [] for s in out_specs}
    host_agree = HostAgreement(required=host_exact) if host is not None else None
    tie_breakers = None                 # [(TieBreaker, its runner)], built when first needed
    with _progress.bar(n, desc, unit="sample") as bar:
        for i in range(n):
            sample = data.sample(i)
            outs = runner.run(sample)
            feeds = ref_model.feeds(sample, input_order, bound)
            ref_outs = ref_model.run(feeds)
            for o, s, j in zip(results, out_specs, ref_index):
                a, r, step = _as_reference_units(outs[s.name], ref_outs[j], s, steps.get(s.name))
                _add_sample(o, i, a, r, step, tol)
                mine[s.name].append(np.asarray(outs[s.name]))
                refs[s.name].append(np.asarray(ref_outs[j]))
            off = [(o, s, j) for o, s, j in zip(results, out_specs, ref_index)
                   if i in o._bad.get("steps", ())]
            if off and same_model:
                if tie_breakers is None:
                    tie_breakers = [(b, b.runner(model)) for b in TIE_BREAKERS]
                for breaker, runner_of_breaker in tie_breakers:
                    off = _accept_by_tie_breaker(off, i, outs, runner_of_breaker.run(feeds),
                                                 steps, tol, breaker.samples_field)
                    if not off:
                        break
            if host_agree is not None:
                h = host.run(sample)
                same = True
                for s in out_specs:
                    a, b = np.asarray(outs[s.name]), np.asarray(h[s.name])
                    if a.shape != b.shape:
                        same, host_agree.max_abs = False, float("inf")
                        continue
                    eq = np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
                    same &= eq
                    if not eq:
                        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
                        host_agree.max_abs = max(host_agree.max_abs,
                                                 float(np.nanmax(d, initial=0.0)))
                host_agree.samples += 1
                host_agree.identical += int(same)
            bar.update(1)
    per_sample = any(v is not None for v in (tol.max_steps, tol.rtol, tol.min_cosine))
    for o in results:
        _finish(o, tol, per_sample)
    stacked = {k: _stack(v) for k, v in mine.items()}
    ref_stacked = {k: _stack(v) for k, v in refs.items()}
    ref_name = ref_model.name
    if reference is not None:
        what = os.fspath(reference) if isinstance(reference, (str, os.PathLike)) else \
            "the reference model"
        ref_name = f"{what} in {ref_name}"
    result = ValidationResult(model_name, runner.name, ref_name, n, data.source, tol, results,
                              host=host_agree, mtvm_outputs=stacked,
                              reference_outputs=ref_stacked)
    if want_top1:
        if stacked[label_spec.name].shape == ref_stacked[label_spec.name].shape:
            result.top1 = _top1(label_spec.name, stacked[label_spec.name],
                                ref_stacked[label_spec.name], labels)
    tps = getattr(runner, "ticks_per_second", 0)
    if tps and getattr(runner, "ticks", None):
        result.device_seconds = [t / tps for t in runner.ticks[-n:]]
    result.failures = [f for o in results for f in o.failures]
    if result.top1 is not None:
        t = result.top1
        if tol.min_agreement is not None and t.agreement < tol.min_agreement:
            result.failures.append(f"top-1 agreement {t.agreement:.1%} < "
                                   f"{tol.min_agreement:.1%}")
        if tol.min_accuracy is not None and t.accuracy < tol.min_accuracy:
            result.failures.append(f"top-1 accuracy {t.accuracy:.1%} < "
                                   f"{tol.min_accuracy:.1%}")
    elif tol.min_agreement is not None or tol.min_accuracy is not None:
        result.failures.append(f"no top-1: output \"{label_spec.name}\" has another shape "
                               "than the reference's")
    if host_agree is not None and host_exact and not host_agree.exact:
        result.failures.append(host_agree.describe())
    result.seconds = time.monotonic() - t0
    return result


def _stack(arrays: list) -> np.ndarray:
    try:
        return np.stack(arrays)
    except ValueError:              # shapes differ (a broken output): keep what there is
        return np.asarray(arrays, dtype=object)


# -- reports ------------------------------------------------------------------------------
def write_report(result: ValidationResult, path) -> str:
    """result as JSON (a path ending in .json) or a self-contained HTML page (.html/.htm)."""
    path = os.fspath(path)
    if path.endswith(".json"):
        text = json.dumps(result.to_dict(), indent=2) + "\n"
    elif path.endswith((".html", ".htm")):
        text = html_report(result)
    else:
        raise MtvmError(f"--report {path}: expected a path ending in .json or .html")
    d = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(d, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise MtvmError(f"cannot write the report {path}: {e.strerror or e}") from None
    return path


_CSS = """body{font-family:sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #bbb;padding:.3em .6em}
th{background:#eee}td.n{text-align:right;font-family:monospace}
.ok{color:#070;font-weight:bold}.fail{color:#b00;font-weight:bold}"""


def html_report(result: ValidationResult) -> str:
    e = lambda x: html.escape(str(x))  # noqa: E731
    verdict = ('<span class="ok">PASS</span>' if result.ok else
               '<span class="fail">FAIL</span>')
    rows = []
    for o in result.outputs:
        q = o.max_steps is not None
        cells = [e(o.name), e(o.compared_as)] + [
            f'<td class="n">{e(v)}</td>' for v in (
                f"{o.max_abs:.4g}", f"{o.rmse:.4g}", f"{o.l2r:.4g}", f"{o.cosine:.6f}",
                f"{o.min_cosine:.6f}", f"{o.max_steps:g}" if q else "-",
                f"{o.off_by_one}/{o.elements}" if q else "-", f"{o.beyond}" if q else "-",
                f"{o.samples - len(o.failed_samples)}"
                f"/{o.samples}")]
        cls = "ok" if o.ok else "fail"
        rows.append("<tr><td>" + "</td><td>".join(cells[:2]) + "</td>" + "".join(cells[2:])
                    + f'<td class="{cls}">{"OK" if o.ok else "FAIL"}</td></tr>')
    extra = []
    if result.top1 is not None:
        extra.append(e(result.top1.describe()))
    if result.host is not None:
        extra.append(e(result.host.describe()))
    stated = ", ".join(f"{k} {v:g}" for k, v in result.tolerances.stated().items())
    extra.append("tolerances: " + e(stated or "none (report only)"))
    extra += [f'<span class="fail">FAIL</span>: {e(f)}' for f in result.failures]
    head = ("<tr><th>output</th><th>compared</th><th>max abs</th><th>RMSE</th><th>l2r</th>"
            "<th>cosine (mean)</th><th>cosine (min)</th><th>max steps</th><th>off by one</th>"
            "<th>&gt;1 step</th><th>samples ok</th><th>verdict</th></tr>")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>mtvm validate: {e(os.path.basename(result.model))}</title>"
            f"<style>{_CSS}</style></head><body>\n"
            f"<h1>mtvm validate: {e(os.path.basename(result.model))} {verdict}</h1>\n"
            f"<p>{result.samples} sample(s) from {e(result.data)}<br>mtvm: {e(result.runner)}"
            f"<br>reference: {e(result.reference)}</p>\n"
            f"<table>{head}\n" + "\n".join(rows) + "</table>\n"
            + "".join(f"<p>{x}</p>\n" for x in extra) + "</body></html>\n")
