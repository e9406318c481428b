"""User-facing errors. Each one is a single clear line that says what to do;
the CLI prints it without a traceback (unless --verbose)."""


class MtvmError(Exception):
    """An error the user can act on."""


class ModelLoadError(MtvmError):
    """The file is missing, corrupt, or not a valid ONNX model."""


class UnsupportedError(MtvmError):
    """The model uses an operator, attribute or dtype mtvm cannot compile."""


class ShapeError(MtvmError):
    """A shape is missing, symbolic, or inconsistent."""


class BuildError(MtvmError):
    """A C compiler or tool invocation failed."""


def node_context(model: str, node, opset: int | None = None) -> str:
    """'model.onnx: node "conv1" (Conv, opset 17)' for error messages."""
    op = node.op if not node.domain else f"{node.domain}.{node.op}"
    ver = f", opset {opset}" if opset is not None else ""
    return f'{model}: node "{node.name}" ({op}{ver})'
