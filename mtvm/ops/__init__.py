"""Operator definitions, one family per module. Importing this package
registers every operator found in it (modules starting with _ are skipped)."""
import importlib
import pkgutil

from .base import REGISTRY, Op, get_op, node_macs, register, supported_ops  # noqa: F401

for _m in pkgutil.iter_modules(__path__):
    if not _m.name.startswith("_") and _m.name != "base":
        importlib.import_module(f"{__name__}.{_m.name}")
