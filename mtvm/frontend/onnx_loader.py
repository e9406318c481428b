"""ONNX -> Graph IR: load (with external data), check, inline local functions,
pin symbolic dims, canonicalize each node and infer static shapes."""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import ops  # noqa: F401  (registers every operator)
from ..errors import ModelLoadError, ShapeError, UnsupportedError, node_context, processing
from ..ir import MAX_TENSOR_BYTES, Graph, Node, Tensor, check_tensor_size
from ..ops.base import bind_attrs, get_op, normalize_axes
from ..passes.widen import as_computed

MIN_OPSET = 11
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _decode_names(model: onnx.ModelProto) -> None:
    """Protobuf hands back the string fields that are not valid UTF-8 (names,
    attribute strings) as bytes. Each such value becomes its text with the bad
    bytes written \\xNN (the same bytes always give the same name, so the graph's
    references stay consistent), made unique against the model's valid names."""
    from google.protobuf.message import Message
    valid: set[str] = set()
    bad: list[tuple[Message, object, int | None, bytes]] = []

    def walk(msg):
        for f, v in msg.ListFields():
            if isinstance(v, Message):
                walk(v)
            elif isinstance(v, (str, bytes)):
                if f.type == f.TYPE_STRING:
                    (bad.append((msg, f.name, None, v)) if isinstance(v, bytes) else valid.add(v))
            elif f.type == f.TYPE_MESSAGE:
                for x in v:
                    walk(x)
            elif f.type == f.TYPE_STRING:
                for k, x in enumerate(v):
                    (bad.append((msg, f.name, k, x)) if isinstance(x, bytes) else valid.add(x))

    walk(model)
    names: dict[bytes, str] = {}
    for msg, field, k, raw in bad:
        if raw not in names:
            text = raw.decode("utf-8", "backslashreplace")
            while text in valid:
                text += "_"
            valid.add(text)
            names[raw] = text
        if k is None:
            setattr(msg, field, names[raw])
        else:
            getattr(msg, field)[k] = names[raw]


def _dtype(elem_type: int, what: str) -> np.dtype:
    """The NumPy dtype of an ONNX element type, or a clear error."""
    if elem_type == onnx.TensorProto.STRING:
        raise UnsupportedError(f"{what} is a string tensor; string tensors are not supported")
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        name = onnx.TensorProto.DataType.Name(elem_type) \
            if elem_type in onnx.TensorProto.DataType.values() else None
        raise UnsupportedError(
            f"{what} has element type {elem_type}" + (f" ({name})" if name else
                                                      ", which ONNX does not define")
            + "; re-export the model with a numeric type") from None


def _tensor_value(t: onnx.TensorProto, what: str) -> np.ndarray:
    """An initializer's (or constant's) array, with clear errors for undefined
    types, string data, absurd sizes and data that does not match the dims."""
    dtype = _dtype(t.data_type, what)
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise ModelLoadError(f"{what} has a negative dimension {dims}")
    size = int(np.prod(dims, dtype=object))
    if size * dtype.itemsize > MAX_TENSOR_BYTES:
        raise ShapeError(f"{what} has shape {dims} ({size * dtype.itemsize} bytes), over the "
                         f"{MAX_TENSOR_BYTES >> 20} MiB mtvm accepts for one tensor")
    try:
        arr = numpy_helper.to_array(t)
    except Exception as e:  # ValueError (wrong data length), TypeError, ...
        raise ModelLoadError(f"{what}: its data does not match its element type "
                             f"{onnx.TensorProto.DataType.Name(t.data_type)} and shape {dims} "
                             f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    return arr


def _read(path_or_model, source: str) -> onnx.ModelProto:
    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model
    path = os.fspath(path_or_model)
    if not os.path.exists(path):
        raise ModelLoadError(f"{path}: no such file")
    try:
        return onnx.load(path, load_external_data=True)
    except Exception as e:  # protobuf raises DecodeError, external data OSError, ...
        raise ModelLoadError(f"{source}: not a valid ONNX model ({type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else 'unreadable'})") from e


def _attr_value(a: onnx.AttributeProto):
    if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        raise UnsupportedError("subgraph attributes (If/Loop/Scan bodies) are not supported")
    if a.type == onnx.AttributeProto.UNDEFINED:
        raise UnsupportedError(f"attribute \"{a.name}\" has no type (AttributeProto.UNDEFINED)")
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    if isinstance(v, onnx.TensorProto):
        return _tensor_value(v, f"attribute \"{a.name}\"")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode("utf-8", "backslashreplace") for x in v]
    if isinstance(v, list) and v and isinstance(v[0], onnx.TensorProto):
        raise UnsupportedError(f"attribute \"{a.name}\": lists of tensors are not supported")
    return v


def _const_node_value(node: onnx.NodeProto) -> np.ndarray:
    if len(node.attribute) != 1:
        raise ModelLoadError(f"Constant must have exactly one value attribute, it has "
                             f"{len(node.attribute)}")
    a = node.attribute[0]
    v = _attr_value(a)
    if a.name == "value_float":
        return np.array(v, np.float32)
    if a.name == "value_floats":
        return np.array(v, np.float32)
    if a.name in ("value_int", "value_ints"):
        return np.array(v, np.int64)
    if a.name == "value":
        return v
    raise UnsupportedError(f"Constant with attribute {a.name} is not supported")


def _pin_shapes(model: onnx.ModelProto, input_shapes: dict, source: str,
                bound=()) -> None:
    """bound: the names of input_shapes that come from --bind (named so in errors)."""
    flag = lambda name: "--bind" if name in bound else "--input-shape"  # noqa: E731
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    for name in input_shapes:
        if name not in names:
            raise ShapeError(f"{source}: {flag(name)} names \"{name}\", which is not an input "
                             f"(inputs: {', '.join(names)})")
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        if vi.name in input_shapes:
            shape = input_shapes[vi.name]
            if len(shape) != len(dims):
                raise ShapeError(f"{source}: {flag(vi.name)} {vi.name} has rank {len(shape)}, "
                                 f"the model's input has rank {len(dims)}")
            fixed = [d.dim_value if d.HasField("dim_value") else None for d in dims]
            if any(f is not None and f != int(v) for f, v in zip(fixed, shape)):
                given = ",".join(str(int(v)) for v in shape)
                model_dims = ",".join("?" if f is None else str(f) for f in fixed)
                raise ShapeError(f"{source}: {flag(vi.name)} {vi.name}:{given} contradicts the "
                                 f"model's fixed shape [{model_dims}] of input \"{vi.name}\"; "
                                 "only symbolic dims (?) can be pinned")
            for d, v in zip(dims, shape):
                d.Clear()
                d.dim_value = int(v)
        elif any(not d.HasField("dim_value") for d in dims):
            shown = ",".join(d.dim_param or "?" if not d.HasField("dim_value") else str(d.dim_value)
                             for d in dims)
            example = ",".join(str(d.dim_value) if d.HasField("dim_value") else "1" for d in dims)
            raise ShapeError(f"{source}: input \"{vi.name}\" has symbolic shape [{shown}]; "
                             f"pin it with --input-shape {vi.name}:{example}")


def _upgrade_opset(model: onnx.ModelProto, opset: int, source: str) -> onnx.ModelProto:
    """Older opsets (many model-zoo files are opset 7-10) go through onnx's own
    version converter, so the rest of mtvm sees one operator semantics per op."""
    from onnx import version_converter
    try:
        model = version_converter.convert_version(model, MIN_OPSET)
        # The converter adds initializers that are not graph inputs (IR >= 4).
        model.ir_version = max(model.ir_version, 4)
        _keep_resize_10_semantics(model.graph)
        return model
    except Exception as e:  # the converter raises bare RuntimeErrors with C++ text
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnsupportedError(
            f"{source}: opset {opset} is older than {MIN_OPSET}, the oldest mtvm reads, and "
            f"onnx.version_converter could not convert it to opset {MIN_OPSET}: {reason}; "
            "re-export the model with a newer opset") from None


def _keep_resize_10_semantics(graph) -> None:
    """Upsample (opset 7-9) and Resize-10 map the output index to the input by
    plain scaling (asymmetric) and pick the nearest pixel by floor; onnx's
    converter makes them Resize-11 without saying so, whose defaults are
    half_pixel and round_prefer_floor (a bilinear result differs by up to a
    whole input step). The converted nodes get the old meaning explicitly."""
    for n in graph.node:
        if n.op_type == "Resize" and n.domain in ("", "ai.onnx"):
            names = {a.name for a in n.attribute}
            if "coordinate_transformation_mode" not in names:
                n.attribute.append(onnx.helper.make_attribute("coordinate_transformation_mode",
                                                              "asymmetric"))
            if "nearest_mode" not in names:
                n.attribute.append(onnx.helper.make_attribute("nearest_mode", "floor"))
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _keep_resize_10_semantics(a.g)
            for g in a.graphs:
                _keep_resize_10_semantics(g)


_SCAN8 = "mtvm_scan8_"


def _mark_scan8(model: onnx.ModelProto, opset: int, source: str) -> dict:
    """Scan before opset 9 has a leading batch axis on its states and scan
    inputs (and an optional sequence_lens), which onnx.version_converter drops
    without adapting the shapes. Each such Scan is renamed with a marker so
    _batch_scan8 can adapt the converted node: {marker: original name}."""
    if opset >= 9:
        return {}
    scans = {}
    for i, n in enumerate(model.graph.node):
        if n.op_type == "Scan" and n.domain in ("", "ai.onnx"):
            if n.input and n.input[0]:
                raise UnsupportedError(f'{source}: node "{n.name}" (Scan, opset {opset}): '
                                       "sequence_lens is not supported; re-export the model "
                                       "with opset 9 or newer")
            marker = f"{_SCAN8}{i}"
            scans[marker] = n.name
            n.name = marker
    if scans:   # the converter also drops the batch axis from the graph's declarations
        keep = onnx.GraphProto()
        keep.input.extend(model.graph.input)
        keep.output.extend(model.graph.output)
        scans[_SCAN8] = keep
    return scans


def _batch_scan8(model: onnx.ModelProto, scans: dict) -> None:
    """The converted Scan runs on batch element 0: Squeeze the batch axis off
    its inputs, Unsqueeze it back onto its outputs (batch size 1 only, checked
    when the Squeeze's shape is inferred)."""
    if not scans:
        return
    keep = scans.pop(_SCAN8)
    for now, before in ((model.graph.input, keep.input), (model.graph.output, keep.output)):
        del now[:]
        now.extend(before)
    del model.graph.value_info[:]
    nodes = []
    for n in model.graph.node:
        if n.name not in scans:
            nodes.append(n)
            continue
        name = scans[n.name] or "Scan"
        ins, outs = list(n.input), list(n.output)
        for k, x in enumerate(ins):
            if x:
                ins[k] = f"{x}{n.name}_unbatched"
                nodes.append(helper.make_node("Squeeze", [x], [ins[k]], axes=[0],
                                              name=f"{name}/squeeze{k}"))
        c = onnx.NodeProto()
        c.CopyFrom(n)
        c.name = name
        del c.input[:], c.output[:]
        c.input.extend(ins)
        c.output.extend(f"{o}{n.name}_unbatched" if o else "" for o in outs)
        nodes.append(c)
        for k, o in enumerate(outs):
            if o:
                nodes.append(helper.make_node("Unsqueeze", [c.output[k]], [o], axes=[0],
                                              name=f"{name}/unsqueeze{k}"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def load_onnx(path_or_model, input_shapes: dict | None = None,
              bind: dict | None = None) -> Graph:
    """Read an ONNX model into the IR.

    input_shapes: {input name: shape} pinning symbolic dims.
    bind: {input name: array} turns graph inputs into compile-time constants.
    """
    source = os.path.basename(os.fspath(path_or_model)) \
        if not isinstance(path_or_model, onnx.ModelProto) else (path_or_model.graph.name or "model")
    model = _read(path_or_model, source)
    if isinstance(path_or_model, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(path_or_model)   # names are fixed below: the caller's proto stays
    _decode_names(model)
    _give_shapes(model, input_shapes, source)
    _check(model, source)
    if model.functions:
        from onnx import inliner
        model = inliner.inline_local_functions(model)
    bind = dict(bind or {})
    _pin_shapes(model, {k: v for k, v in (input_shapes or {}).items() if k not in bind}
                | {k: np.shape(v) for k, v in bind.items()}, source, bound=set(bind))

    opsets = {(o.domain or ""): o.version for o in model.opset_import}
    opset = opsets.get("", opsets.get("ai.onnx", 0))
    notes = []
    if opset and opset < MIN_OPSET:
        scans = _mark_scan8(model, opset, source)
        model = _upgrade_opset(model, opset, source)
        _batch_scan8(model, scans)
        notes.append(f"the model's opset {opset} was converted to opset {MIN_OPSET}, the "
                     "oldest mtvm reads, with onnx.version_converter")
        opsets = {(o.domain or ""): o.version for o in model.opset_import}
        opset = MIN_OPSET
    g = Graph(model.graph.name or "model", {}, [], [], [], opset, source, notes)

    for init in model.graph.initializer:
        arr = _tensor_value(init, f"{source}: initializer \"{init.name}\"")
        g.tensors[init.name] = Tensor(init.name, tuple(arr.shape), arr.dtype, arr)
    for vi in model.graph.input:
        if vi.name in g.tensors:
            continue  # initializer listed as input (IR < 4): a constant
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise UnsupportedError(f"{source}: input \"{vi.name}\" is not a tensor "
                                   "(sequences, maps and optionals are not supported)")
        dtype = _dtype(tt.elem_type, f"{source}: input \"{vi.name}\"")
        shape = tuple(d.dim_value for d in tt.shape.dim)
        if vi.name in bind:
            arr = np.asarray(bind[vi.name], dtype)
            g.tensors[vi.name] = Tensor(vi.name, tuple(arr.shape), arr.dtype, arr)
            continue
        g.tensors[vi.name] = Tensor(vi.name, shape, dtype)
        check_tensor_size(g.tensors[vi.name], f"{source}: input \"{vi.name}\"")
        g.inputs.append(vi.name)

    _add_nodes(g, model.graph.node, opsets, opset, source)

    for vo in model.graph.output:
        if vo.name not in g.tensors:
            raise ModelLoadError(f"{source}: output \"{vo.name}\" is never produced")
        _check_declared(g, vo, source)
        g.outputs.append(vo.name)
    return g


def in_forked_child(produce) -> tuple[bytes | None, str | None]:
    """Runs produce() -> bytes in a forked child with stderr silenced and hands
    its bytes back: onnx's C++ shape inference aborts the whole process on some
    malformed models (a failed assertion), which must not take this one with it.
    -> (the bytes, None), or (None, how the child ended) when produce() raised
    or the child died."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: report through the pipe, never return
        status = 1
        try:
            os.close(r)
            import faulthandler
            faulthandler.disable()   # an abort's report (and the C++ assertion text)
            null = os.open(os.devnull, os.O_WRONLY)   # belongs to the caller's error,
            os.dup2(null, 2)                          # not to stderr
            os.write(w, produce())
            status = 0
        finally:
            os._exit(status)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        return None, (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else
                      f"exit status {os.WEXITSTATUS(status)}")
    return b"".join(chunks), None


def _checker_error(model: onnx.ModelProto, full: bool) -> str | None:
    """The ONNX checker's complaint about the model, or None. Run in a forked
    child where the OS allows (in_forked_child), so a checker that aborts ends
    in an error line, not a crash."""
    def check() -> str | None:
        try:
            onnx.checker.check_model(model, full_check=full)
            return None
        except Exception as e:
            return " ".join(str(e).split()) or type(e).__name__
    if not hasattr(os, "fork"):
        return check()
    out, how = in_forked_child(lambda: (check() or "").encode("utf-8", "replace"))
    if how is not None:
        return (f"it crashed checking the model ({how}; a malformed model onnx's shape "
                "inference does not survive)")
    return out.decode() or None


def _give_shapes(model: onnx.ModelProto, input_shapes, source: str) -> None:
    """Graph inputs and outputs declared without a shape (the checker requires one;
    onnxruntime runs such models): an input takes its --input-shape, an output what
    shape inference finds for it. Whatever stays unknown, the checker reports."""
    def shapeless(vi):
        return vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape")
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if not shapeless(vi) or vi.name in inits:
            continue
        if not (input_shapes and vi.name in input_shapes):
            raise ModelLoadError(f'{source}: input "{vi.name}" is declared without a shape -- '
                                 f"give it with --input-shape {vi.name}:D0,D1,...")
        for d in input_shapes[vi.name]:
            vi.type.tensor_type.shape.dim.add().dim_value = int(d)
    missing = [vi for vi in model.graph.output if shapeless(vi)]
    if not missing or model.ByteSize() > (1 << 30):
        return
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:        # the checker below says what is wrong
        return
    found = {vi.name: vi for vi in inferred.graph.output}
    for vi in missing:
        inf = found.get(vi.name)
        if inf is not None and inf.type.tensor_type.HasField("shape"):
            vi.type.tensor_type.shape.CopyFrom(inf.type.tensor_type.shape)


def _check(model: onnx.ModelProto, source: str) -> None:
    """What the ONNX checker and onnxruntime reject, mtvm rejects: the checker
    with strict shape inference (types and shapes that contradict the graph,
    bad attributes), and node names used twice."""
    for full in (True, False):
        text = _checker_error(model, full)
        if text is None:
            break
        # Models over 2 GB cannot be checked in memory. ONNX's inference of a
        # function-defined op's body (an error nested in another) has false
        # alarms (MeanVarianceNormalization at IR 7): mtvm infers that op
        # itself, so the model only has to pass the plain check.
        if "2GB" in text:
            break
        if not (full and text.count("Inference error(s)") > 1):
            raise ModelLoadError(f"{source}: the ONNX checker rejects the model: "
                                 f"{text[:400]}")
    seen: dict[str, int] = {}
    for i, n in enumerate(model.graph.node):
        if n.name and n.name in seen:
            raise ModelLoadError(f'{source}: node name "{n.name}" is used by nodes {seen[n.name]} '
                                 f"({model.graph.node[seen[n.name]].op_type}) and {i} "
                                 f"({n.op_type}); node names must be unique: rename one")
        seen.setdefault(n.name, i)


def _check_declared(g: Graph, vo, source: str) -> None:
    """A graph output's declared element type and fixed dims must be what the
    graph computes (a model that says otherwise is invalid, and a caller going
    by its declaration would misread the output)."""
    t = g.tensors[vo.name]
    tt = vo.type.tensor_type
    if not vo.type.HasField("tensor_type"):
        return
    if tt.elem_type:
        declared = _dtype(tt.elem_type, f"{source}: output \"{vo.name}\"")
        if declared != np.dtype(t.dtype):
            raise ShapeError(f"{source}: output \"{vo.name}\" is declared "
                             f"{declared.name} but the graph computes {np.dtype(t.dtype).name}; "
                             "fix the output's type in the model")
    if tt.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if len(dims) != len(t.shape) or any(d is not None and d != s
                                            for d, s in zip(dims, t.shape)):
            shown = ",".join("?" if d is None else str(d) for d in dims)
            raise ShapeError(f"{source}: output \"{vo.name}\" is declared with shape "
                             f"[{shown}] but the graph computes {list(t.shape)}; fix the "
                             "output's shape in the model")


def _add_nodes(g: Graph, nodes, opsets: dict, opset: int, source: str, prefix: str = "") -> None:
    for i, pn in enumerate(nodes):
        node = Node(pn.op_type, pn.name or f"{prefix}{pn.op_type}_{i}", list(pn.input),
                    list(pn.output), {}, "" if pn.domain == "ai.onnx" else pn.domain)
        with processing(node, source, opsets.get(node.domain, opset)):
            _add_one(g, pn, node, opsets, opset, source, prefix)


def _add_one(g: Graph, pn, node: Node, opsets: dict, opset: int, source: str,
             prefix: str) -> None:
        try:
            if pn.op_type == "If" and node.domain == "" and _inline_if(g, pn, opsets, opset,
                                                                        source):
                return
            if pn.op_type == "Loop" and node.domain == "":
                _unroll_loop(g, pn, opsets, opset, source, f"{prefix}{node.name}")
                return
            if pn.op_type == "Scan" and node.domain == "":
                _unroll_scan(g, pn, opsets, opset, source, f"{prefix}{node.name}")
                return
            node.attrs = {a.name: _attr_value(a) for a in pn.attribute}
            if pn.op_type == "Constant" and node.domain == "":
                arr = np.asarray(_const_node_value(pn))
                g.tensors[pn.output[0]] = Tensor(pn.output[0], tuple(arr.shape), arr.dtype, arr)
                return
            _add_node(g, node, opsets.get(node.domain, opset))
        except (UnsupportedError, ShapeError, ModelLoadError) as e:
            if str(e).startswith(f"{source}: "):
                raise   # from a nested node (a subgraph's): it names that node
            ctx = node_context(source, node, opsets.get(node.domain, opset))
            raise type(e)(f"{ctx}: {e}") from e


def _inline_if(g: Graph, pn, opsets: dict, opset: int, source: str) -> bool:
    """An If whose condition is known at compile time becomes its taken branch
    (its nodes added in place, its outputs copied to the If's); on a run-time
    condition both branches run and Where selects."""
    from ..ops.base import static_value
    cond = static_value(g, pn.input[0]) if pn.input and pn.input[0] else None
    if cond is None:
        # A run-time condition: both branches are computed (ONNX subgraphs have
        # no side effects) and each output selected with Where.
        branches = {a.name: a.g for a in pn.attribute}
        outs = []
        for key in ("then_branch", "else_branch"):
            br = branches[key]
            for init in br.initializer:
                arr = _tensor_value(init, f"initializer \"{init.name}\"")
                g.tensors[init.name] = Tensor(init.name, tuple(arr.shape), arr.dtype, arr)
            _add_nodes(g, br.node, opsets, opset, source, prefix=f"{pn.name or 'If'}/{key}/")
            outs.append([o.name for o in br.output])
        for t_out, e_out, dst in zip(outs[0], outs[1], pn.output):
            if dst:
                _add_node(g, Node("Where", f"{pn.name or 'If'}/{dst}",
                                  [pn.input[0], t_out, e_out], [dst]), opset)
        return True
    want = "then_branch" if bool(np.asarray(cond).ravel()[0]) else "else_branch"
    branch = next(a.g for a in pn.attribute if a.name == want)
    for init in branch.initializer:
        arr = _tensor_value(init, f"initializer \"{init.name}\"")
        g.tensors[init.name] = Tensor(init.name, tuple(arr.shape), arr.dtype, arr)
    _add_nodes(g, branch.node, opsets, opset, source, prefix=f"{pn.name or 'If'}/")
    for src, dst in zip(branch.output, pn.output):
        if dst:
            _add_node(g, Node("Identity", f"{pn.name or 'If'}/{dst}", [src.name], [dst]),
                      opset)
    return True


def _renamed_body(body, mapping: dict, tag: str) -> list:
    """Copies of a subgraph's nodes with its own names suffixed by `tag` (and
    its inputs renamed per `mapping`); names from the outer scope are kept."""
    names = dict(mapping)
    for n in body.node:
        for o in n.output:
            if o:
                names[o] = f"{o}{tag}"
    out = []
    for n in body.node:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        del c.input[:]
        c.input.extend(names.get(i, i) for i in n.input)
        del c.output[:]
        c.output.extend(names.get(o, o) for o in n.output)
        c.name = f"{n.name or n.op_type}{tag}"
        out.append(c)
    return out, names


def _unroll_scan(g: Graph, pn, opsets: dict, opset: int, source: str, name: str) -> None:
    """Scan over a static sequence length: unrolled at compile time. Iteration
    t reads element t of each scan input (a Gather), runs a renamed copy of the
    body, and the scan outputs are stacked with Unsqueeze + Concat."""
    from onnx import helper as h
    a = {x.name: x for x in pn.attribute}
    body = a["body"].g
    M = a["num_scan_inputs"].i
    ins = list(pn.input)
    if opset < 9:
        raise UnsupportedError("Scan before opset 9 (with sequence_lens) is not supported")
    N = len(ins) - M
    in_axes = list(a["scan_input_axes"].ints) if "scan_input_axes" in a else [0] * M
    in_dirs = list(a["scan_input_directions"].ints) if "scan_input_directions" in a else [0] * M
    K = len(body.output) - N
    out_axes = list(a["scan_output_axes"].ints) if "scan_output_axes" in a else [0] * K
    out_dirs = (list(a["scan_output_directions"].ints) if "scan_output_directions" in a
                else [0] * K)
    first = g.tensors[ins[N]]
    ax0 = in_axes[0] + len(first.shape) if in_axes[0] < 0 else in_axes[0]
    T = first.shape[ax0]
    state = ins[:N]
    collected: list[list[str]] = [[] for _ in range(K)]
    for t in range(T):
        tag = f"@{name}#{t}"
        mapping = {body.input[i].name: state[i] for i in range(N)}
        pre = []
        for j in range(M):
            src = ins[N + j]
            rank = len(g.tensors[src].shape)
            ax = in_axes[j] + rank if in_axes[j] < 0 else in_axes[j]
            idx = g.add_const(f"{src}{tag}_index", np.array(t if not in_dirs[j] else T - 1 - t,
                                                            np.int64))
            sl = f"{src}{tag}_slice"
            pre.append(h.make_node("Gather", [src, idx], [sl], axis=ax, name=f"{sl}_gather"))
            mapping[body.input[N + j].name] = sl
        nodes, names = _renamed_body(body, mapping, tag)
        _add_nodes(g, pre + nodes, opsets, opset, source)
        outs = [names.get(o.name, o.name) for o in body.output]
        state = outs[:N]
        for k in range(K):
            collected[k].append(outs[N + k])
    post = []
    for i in range(N):
        if pn.output[i]:
            post.append(h.make_node("Identity", [state[i]], [pn.output[i]],
                                    name=f"{name}/final{i}"))
    for k in range(K):
        dst = pn.output[N + k] if N + k < len(pn.output) else ""
        if not dst:
            continue
        parts = collected[k][::-1] if out_dirs[k] else collected[k]
        rank = len(g.tensors[parts[0]].shape) + 1
        ax = out_axes[k] + rank if out_axes[k] < 0 else out_axes[k]
        axes = g.add_const(f"{dst}_axes", np.array([ax], np.int64))
        ups = []
        for t, p in enumerate(parts):
            u = f"{p}_stacked"
            post.append(h.make_node("Unsqueeze", [p, axes], [u], name=f"{u}_unsqueeze"))
            ups.append(u)
        post.append(h.make_node("Concat", ups, [dst], axis=ax, name=f"{dst}_concat"))
    # Built in the opset-13 form (Unsqueeze axes as an input).
    _add_nodes(g, post, {**opsets, "": max(opset, 13)}, max(opset, 13), source)


def _unroll_loop(g: Graph, pn, opsets: dict, opset: int, source: str, name: str) -> None:
    """Loop with a trip count and condition known at compile time: unrolled
    (each iteration a renamed copy of the body); scan outputs are stacked."""
    from onnx import helper as h

    from ..ops.base import static_value
    body = next(a.g for a in pn.attribute if a.name == "body")
    ins = list(pn.input) + [""] * 2
    trip = static_value(g, ins[0]) if ins[0] else None
    cond = static_value(g, ins[1]) if ins[1] else np.array(True)
    if (ins[0] and trip is None) or cond is None or (trip is None and not ins[1]):
        raise UnsupportedError("Loop: the trip count and condition must be known at compile "
                               "time (bind the inputs that decide them)")
    trip = int(np.asarray(trip).ravel()[0]) if trip is not None else 1 << 20
    N = len(pn.input) - 2
    state = list(pn.input[2:])
    K = len(body.output) - 1 - N
    collected: list[list[str]] = [[] for _ in range(K)]
    t = 0
    while t < trip and bool(np.asarray(cond).ravel()[0]):
        tag = f"@{name}#{t}"
        it = g.add_const(f"{name}{tag}_iter", np.array(t, np.int64))
        cin = g.add_const(f"{name}{tag}_cond", np.array(True))
        mapping = {body.input[0].name: it, body.input[1].name: cin}
        mapping.update({body.input[2 + i].name: state[i] for i in range(N)})
        nodes, names = _renamed_body(body, mapping, tag)
        _add_nodes(g, nodes, opsets, opset, source)
        outs = [names.get(o.name, o.name) for o in body.output]
        cond = static_value(g, outs[0])
        if cond is None:
            raise UnsupportedError("Loop: its condition is computed at run time")
        state = outs[1:1 + N]
        for k in range(K):
            collected[k].append(outs[1 + N + k])
        t += 1
        if t > 4096:
            raise UnsupportedError("Loop: more than 4096 iterations are not unrolled")
    post = []
    for i in range(N):
        if pn.output[i]:
            post.append(h.make_node("Identity", [state[i]], [pn.output[i]],
                                    name=f"{name}/final{i}"))
    axes = g.add_const(f"{name}_axes0", np.array([0], np.int64))
    for k in range(K):
        dst = pn.output[N + k] if N + k < len(pn.output) else ""
        if not dst:
            continue
        if not collected[k]:
            raise UnsupportedError("Loop: zero iterations give an empty scan output")
        ups = []
        for p in collected[k]:
            post.append(h.make_node("Unsqueeze", [p, axes], [f"{p}_stacked"],
                                    name=f"{p}_stacked_unsqueeze"))
            ups.append(f"{p}_stacked")
        post.append(h.make_node("Concat", ups, [dst], axis=0, name=f"{dst}_concat"))
    _add_nodes(g, post, {**opsets, "": max(opset, 13)}, max(opset, 13), source)


def _add_node(g: Graph, node: Node, opset: int) -> None:
    op = get_op(node.op, node.domain)
    if op is None:
        raise UnsupportedError("operator not supported by mtvm (`mtvm ops` lists the "
                               "supported operators)")
    if opset < op.min_opset:
        raise UnsupportedError(f"opset {opset} is older than {op.min_opset}, the oldest this "
                               "operator supports; convert the model with onnx.version_converter")
    for name in node.inputs:
        if name and name not in g.tensors:
            raise ModelLoadError(f"input \"{name}\" is not produced by any earlier node "
                                 "(the graph is not topologically sorted)")
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    if "auto_pad" in node.attrs and auto_pad not in AUTO_PADS:
        raise UnsupportedError(f"auto_pad={auto_pad!r} is not one of {', '.join(AUTO_PADS)}")
    if auto_pad != "NOTSET" and any(node.attrs.get("pads") or []):
        raise ShapeError(f"auto_pad={auto_pad} and explicit pads {list(node.attrs['pads'])} "
                         "contradict each other (ONNX allows one or the other); drop one")
    op.canonicalize(node, g, opset)
    bind_attrs(op.reference, node.attrs, "reference")
    ins = [g.tensors[n] if n else None for n in node.inputs]
    normalize_axes(op, node, ins)
    # float16/bfloat16 tensors are computed in float32 (passes/widen.py): only
    # ops that handle those types themselves (Cast) see them.
    op.check(node, ins if getattr(op, "sees_small_floats", False) else
             [None if t is None else as_computed(t) for t in ins])
    consts = [t.data if t is not None else None for t in ins]
    try:
        results = op.infer(node, ins, consts)
    except (UnsupportedError, ShapeError, MemoryError, RecursionError):
        raise
    except Exception as e:
        why = " ".join(str(e).split())[:300]
        raise ShapeError(f"inputs of shapes {[None if t is None else list(t.shape) for t in ins]}"
                         f" are invalid for this operator ({type(e).__name__}: {why})") from e
    for name, (shape, dtype) in zip(node.outputs, results):
        if name:
            g.tensors[name] = Tensor(name, tuple(int(d) for d in shape), np.dtype(dtype))
            check_tensor_size(g.tensors[name], f"output \"{name}\"", constant=all(
                t is None or t.is_const for t in ins))
    g.nodes.append(node)
