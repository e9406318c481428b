"""mtvm: ahead-of-time deployment of ONNX models to microcontrollers."""
__version__ = "0.1.0"

from .errors import MtvmError  # noqa: E402,F401
from .compiler import compile, compile_graph  # noqa: E402,F401
from .session import Session, transport  # noqa: E402,F401
from . import project  # noqa: E402,F401
