"""riscv schedules (see mtvm/schedules/__init__.py). Every module of this package
is imported here, which registers its schedules: adding a schedule is adding
a module (or a class to one), nothing else."""
import importlib
import pkgutil

for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")
