"""Helpers to check mtvm against the ONNX reference: build a one-node model,
compile it, run the generated C on the host and compare."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

# Tolerances per dtype family: float32 ~1e-4 relative (scaled by the output's
# magnitude), integers exact.
FLOAT_RTOL = 1e-4


def make_model(op_type: str, inputs: dict, attrs: dict | None = None, n_outputs: int = 1,
               consts: dict | None = None, opset: int = 17, domain: str = "",
               input_order: list[str] | None = None) -> onnx.ModelProto:
    """One-node model. inputs: {name: array} become graph inputs; consts:
    {name: array} become initializers; input_order lists the node's inputs
    (names of either, "" for omitted), defaulting to inputs then consts."""
    consts = consts or {}
    order = input_order or list(inputs) + list(consts)
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, order, outs, name=f"{op_type.lower()}_0", domain=domain,
                            **(attrs or {}))
    g = helper.make_graph(
        [node], f"test_{op_type}",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype),
                                       np.shape(a)) for n, a in inputs.items()],
        [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in consts.items()])
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = min(m.ir_version, 10)
    return onnx.shape_inference.infer_shapes(m)


def conv_relu_conv(hw: int, seed: int, name: str = "two_convs") -> onnx.ModelProto:
    """A float Conv + Relu (8 -> 16 channels, 3x3, same padding) then a 3x3 stride-2
    Conv (16 -> 16) on an hw x hw input "x", output "y": two conv workloads of one
    schedule, what the tuning and schedule tests search and apply."""
    from onnx import TensorProto
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    w1 = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c0"], ["r0"]),
         helper.make_node("Conv", ["r0", "w1"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
        name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, hw // 2, hw // 2])],
        [numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(w1, "w1")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def reference_outputs(model: onnx.ModelProto, inputs: dict) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator
    return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, inputs)]


def assert_close(actual, expected, rtol: float = FLOAT_RTOL, what: str = "") -> None:
    """Float: max abs error <= rtol * max(|expected|, 1); integers and bool: exact."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "fc":
        scale = max(float(np.max(np.abs(expected[np.isfinite(expected)]), initial=0.0)), 1.0)
        same_nonfinite = np.array_equal(np.isnan(actual), np.isnan(expected)) and \
            np.array_equal(np.isinf(actual) & (actual > 0), np.isinf(expected) & (expected > 0))
        assert same_nonfinite, f"{what}: NaN/Inf positions differ"
        fin = np.isfinite(expected)
        err = float(np.max(np.abs(actual[fin].astype(np.float64) - expected[fin]), initial=0.0))
        assert err <= rtol * scale, f"{what}: max abs error {err:.3g} > {rtol} * {scale:.3g}"
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def check_model(model: onnx.ModelProto, inputs: dict, rtol: float = FLOAT_RTOL,
                sanitize: bool = False, **compile_opts):
    """Compile `model`, run it on the host (and under ASan/UBSan with sanitize),
    and compare every output with onnx.reference. Returns the CompiledModel."""
    import mtvm
    lib = mtvm.compile(model, **compile_opts)
    expected = reference_outputs(model, inputs)
    runs = [lib.run_host(inputs)]
    if sanitize:
        runs.append(lib.run_host(inputs, sanitize=True))
    for got in runs:
        for (name, a), e in zip(got.items(), expected):
            assert_close(a, e, rtol, what=f"{model.graph.name}:{name}")
    # The interpreter of the optimized IR must agree too (it is the spec).
    from .interp import interpret
    for a, e in zip(interpret(lib.graph, inputs).values(), expected):
        assert_close(a, e, rtol, what=f"{model.graph.name}: interp")
    return lib


def models_dir() -> str:
    """../shared/models beside the checkout (or $MTVM_MODELS_DIR)."""
    import os
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.environ.get("MTVM_MODELS_DIR",
                          os.path.normpath(os.path.join(here, "..", "shared", "models")))


def cpu_has(flag: str) -> bool:
    """Whether this host's CPU reports `flag` (avx2, avx512f, ...) in /proc/cpuinfo
    (False where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            return f" {flag}" in f.read()
    except OSError:
        return False


def have(tool: str) -> bool:
    import shutil
    return shutil.which(tool) is not None


def run_on_board(lib, inputs: dict, out_dir, board: str = "mps2-an386") -> dict:
    """One inference of compiled model `lib` on an emulated board: a host-driven
    project generated in out_dir, built, flashed (QEMU), run over the serial
    session, and the emulator stopped. Returns {output name: array}."""
    import mtvm.project
    proj = mtvm.project.generate(lib, board=board, out_dir=str(out_dir))
    proj.build()
    return run_once(proj, inputs)


def run_once(proj, inputs, progress=None) -> dict:
    """One inference of a built host-driven project: flashed (an emulator started),
    run over the serial session, and stopped. Returns {output name: array}."""
    proj.flash(progress=progress)
    try:
        with proj.session() as s:
            return s.executor.run(inputs)
    finally:
        proj.stop()


def quantize_qdq(fp32_path: str, path: str, input_name: str, calibration: list, sample,
                 per_channel: bool = False, uint8: bool = False) -> str:
    """onnxruntime's quantize_static (QDQ) of the float model at fp32_path into path,
    calibrated on the arrays `calibration` fed to input `input_name`, int8 (uint8:
    activations and weights uint8), and beside it path's .npz: in_0 = sample, out_<i> =
    onnxruntime's outputs of the quantized model on it (graph optimizations off).
    Returns path."""
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(calibration)

        def get_next(self):
            v = next(self.it, None)
            return None if v is None else {input_name: v}
    qtype = QuantType.QUInt8 if uint8 else QuantType.QInt8
    quantize_static(fp32_path, path, Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=per_channel, activation_type=qtype, weight_type=qtype)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ys = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]).run(
        None, {input_name: sample})
    np.savez(path[:-5] + ".npz", in_0=sample, **{f"out_{i}": y for i, y in enumerate(ys)})
    return path


# -- intermediate tensors of whole models ----------------------------------------------------
def quantized_activations(model: onnx.ModelProto) -> list[str]:
    """Outputs of the QuantizeLinear nodes that quantize activations (not
    weights): the 8-bit tensors of a QDQ model, in graph order."""
    consts = {i.name for i in model.graph.initializer}
    consts |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    return [n.output[0] for n in model.graph.node
            if n.op_type == "QuantizeLinear" and n.input[0] not in consts]


def expose_intermediates(model: onnx.ModelProto, names: list[str] | None = None):
    """A copy of `model` whose intermediate tensors are graph outputs too:
    `names`, or every node output (Constant nodes aside). Only tensors whose
    type and shape shape inference knows can be exposed. Returns (model, the
    exposed names in graph order)."""
    m = onnx.shape_inference.infer_shapes(model)
    vi = {v.name: v for v in m.graph.value_info}
    have_out = {o.name for o in m.graph.output}
    if names is None:
        names = [o for n in m.graph.node if n.op_type != "Constant" for o in n.output if o]
    exposed = []
    for name in names:
        v = vi.get(name)
        if name in have_out or v is None or name in exposed:
            continue
        tt = v.type.tensor_type
        if not tt.elem_type or not tt.HasField("shape") or \
                not all(d.HasField("dim_value") for d in tt.shape.dim):
            continue
        exposed.append(name)
    m.graph.output.extend(vi[o] for o in exposed)
    return m, exposed


def subgraph(model: onnx.ModelProto, output: str, frontier) -> onnx.ModelProto:
    """The part of `model` that computes `output` from the tensors in
    `frontier` (they become its inputs, with the model's value infos), so a
    reference can run one step on mtvm's own inputs (no compounding of an
    upstream difference)."""
    producer = {o: n for n in model.graph.node for o in n.output if o}
    infos = {v.name: v for v in list(model.graph.value_info) + list(model.graph.input)
             + list(model.graph.output)}
    inits = {i.name for i in model.graph.initializer}
    frontier = set(frontier) - {output}
    nodes, inputs, seen, stack = set(), [], set(), [output]
    while stack:
        t = stack.pop()
        if t in seen or not t:
            continue
        seen.add(t)
        if t in frontier and t not in inits:
            inputs.append(t)
            continue
        n = producer.get(t)
        if n is not None and id(n) not in nodes:
            nodes.add(id(n))
            stack += list(n.input)
    keep = [n for n in model.graph.node if id(n) in nodes]
    used = {i for n in keep for i in n.input}
    g = helper.make_graph(keep, f"{model.graph.name}_{len(keep)}", [infos[i] for i in inputs],
                          [infos[output]], [i for i in model.graph.initializer if i.name in used])
    sub = helper.make_model(g, opset_imports=model.opset_import)
    sub.ir_version = model.ir_version
    return sub
