"""arm_dsp schedules (see mtvm/schedules/__init__.py). Importing this package registers them."""
