from .onnx_loader import load_onnx  # noqa: F401
