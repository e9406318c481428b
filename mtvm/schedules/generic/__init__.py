"""generic schedules (see mtvm/schedules/__init__.py): portable C for every
target. Importing this package registers them."""
from . import conv_f32  # noqa: F401
