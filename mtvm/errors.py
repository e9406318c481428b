"""User-facing errors. Each one is a single clear line that says what to do;
the CLI prints it without a traceback (unless --verbose)."""
from contextlib import contextmanager


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


class InternalError(MtvmError):
    """A bug in mtvm: an unexpected exception, reported as one line that names
    the node being compiled and asks for a report (the traceback with --verbose)."""


@contextmanager
def processing(node, model: str, opset: int | None = None):
    """Marks `node` as the one being compiled: an exception escaping from the
    block remembers the innermost such node, for internal_error()."""
    try:
        yield
    except Exception as e:
        if not hasattr(e, "mtvm_node"):
            try:
                e.mtvm_node = (node, model, opset)
            except AttributeError:
                pass
        raise


def internal_error(e: BaseException, model: str, stage: str) -> InternalError:
    """One line for an unexpected exception `e` raised while compiling `model`
    (in `stage`): the node being processed -- the innermost one marked with
    processing(), else the innermost IR node in the traceback's frames."""
    where = ""
    if getattr(e, "mtvm_node", None):
        node, src, opset = e.mtvm_node
        where = f" at {node_context(src, node, opset).removeprefix(f'{src}: ')}"
    else:
        from .ir import Node
        tb, found = e.__traceback__, None
        while tb is not None:
            for v in tb.tb_frame.f_locals.values():
                if isinstance(v, Node):
                    found = v
                    break
            tb = tb.tb_next
        if found is not None:
            where = f" at {node_context(model, found).removeprefix(f'{model}: ')}"
    what = " ".join(str(e).split())[:200]
    kind = "out of memory" if isinstance(e, MemoryError) else "internal error"
    return InternalError(f"{model}: {kind} while {stage}{where} ({type(e).__name__}"
                         f"{': ' + what if what else ''}); this is a bug in mtvm: please "
                         "report it with the model (run with --verbose for the traceback)")


def node_context(model: str, node, opset: int | None = None) -> str:
    """'model.onnx: node "conv1" (Conv, opset 17)' for error messages."""
    op = node.op if not node.domain else f"{node.domain}.{node.op}"
    ver = f", opset {opset}" if opset is not None else ""
    return f'{model}: node "{node.name}" ({op}{ver})'
