"""x86 schedules (see mtvm/schedules/__init__.py): AVX2 / AVX-512 variants.
Importing this package registers them."""
from . import conv_f32  # noqa: F401
