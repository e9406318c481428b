import os

import pytest

from mtvm import testing


@pytest.fixture
def models_dir():
    d = testing.models_dir()
    if not os.path.isdir(d):
        pytest.skip(f"{d} not found (set MTVM_MODELS_DIR)")
    return d
