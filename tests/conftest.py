import os
import shutil

import pytest

MODELS_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "models")
if not os.path.isdir(MODELS_DIR):
    MODELS_DIR = os.environ.get("MTVM_MODELS_DIR", MODELS_DIR)


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


@pytest.fixture
def models_dir():
    if not os.path.isdir(MODELS_DIR):
        pytest.skip("../shared/models not found (set MTVM_MODELS_DIR)")
    return MODELS_DIR
