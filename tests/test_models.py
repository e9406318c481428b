"""The float benchmark models of ../shared/models: compiled, run on the host
and compared with the stored onnxruntime outputs; their generated C compiles
warning-free for the host and for a Cortex-M4."""
import glob
import os
import subprocess

import numpy as np
import pytest

import mtvm
from mtvm.testing import assert_close
from mtvm.testing import have, models_dir as _models_dir

MODELS_DIR = _models_dir()

FLOAT_MODELS = ["kws_dscnn", "vww_mobilenetv1", "ic_resnet8", "ad_autoencoder"]
ARM_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-c"]

_compiled = {}


def compiled(name):
    path = os.path.join(MODELS_DIR, name + ".onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    if name not in _compiled:
        _compiled[name] = mtvm.compile(path)
    return _compiled[name]


def reference(name):
    data = np.load(os.path.join(MODELS_DIR, name + ".npz"))
    outs = [data[k] for k in sorted((k for k in data.files if k.startswith("out_")),
                                    key=lambda k: int(k[4:]))]
    return data["in_0"], outs


@pytest.mark.slow
@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_model_matches_reference(name):
    lib = compiled(name)
    x, expected = reference(name)
    got = lib.run_host([x])
    assert len(got) == len(expected)
    for a, e in zip(got.values(), expected):
        assert_close(a, e, rtol=1e-4, what=name)
    md = lib.metadata
    assert md["workspace_lower_bound"] <= md["workspace_bytes"]
    assert md["total_macs"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", FLOAT_MODELS)
@pytest.mark.parametrize("cc,flags", [("cc", []), ("arm-none-eabi-gcc", ARM_FLAGS)],
                         ids=["host", "cortex-m4"])
def test_generated_c_is_warning_free(name, cc, flags, tmp_path):
    if not have(cc):
        pytest.skip(f"{cc} not installed")
    lib = compiled(name)
    lib.export(tmp_path / "mlf")
    inc = [f"-I{tmp_path / 'mlf/codegen/host/include'}", f"-I{tmp_path / 'mlf/codegen/host/src'}"]
    for src in glob.glob(str(tmp_path / "mlf/codegen/host/src/*.c")):
        p = subprocess.run([cc, *flags, *STRICT, *inc, src, "-o", os.devnull],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr[-3000:]
