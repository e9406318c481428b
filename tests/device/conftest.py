"""Fixtures of the device tests (helpers in device_utils.py)."""
import pytest

from device_utils import ModelCache


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return ModelCache(str(tmp_path_factory.mktemp("models")))


@pytest.fixture(scope="session")
def projects_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("projects"))
