"""The float benchmark models of ../shared/models: compiled, run on the host
and compared with the stored onnxruntime outputs; their generated C compiles
warning-free for the host and for a Cortex-M4."""
import glob
import os
import platform
import subprocess

import numpy as np
import pytest

import mtvm
from mtvm.testing import assert_close
from mtvm.testing import cpu_has, have, models_dir as _models_dir

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


# The float models whose convolutions take the AVX2 schedules (window, pointwise in and
# out of place, im2col, band, depthwise) and their epilogue kernel.
AVX2_MODELS = ["kws_dscnn", "vww_mobilenetv1", "ic_resnet8", "fomo_mbv2", "denoise_unet",
               "har_cnn1d"]


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or not cpu_has("avx2"),
                    reason="an AVX2 build")
@pytest.mark.parametrize("name", AVX2_MODELS)
def test_model_matches_reference_avx2(name):
    """Built as on an AVX2 host without AVX-512 (-O3 -march=x86-64-v3), against the
    stored onnxruntime outputs."""
    from mtvm.host_runner import HostModule
    lib = compiled(name)
    x, expected = reference(name)
    got = HostModule(lib, opt="-O3", extra=["-march=x86-64-v3"]).run([x])
    for a, e in zip(got.values(), expected):
        assert_close(a, e, rtol=1e-4, what=f"{name}, AVX2 build")


@pytest.mark.slow
@pytest.mark.parametrize("name", FLOAT_MODELS)
@pytest.mark.parametrize("cc,flags", [("cc", []), ("cc", ["-O3", "-march=native"]),
                                       ("cc", ["-O3", "-march=x86-64-v3"]),
                                       ("arm-none-eabi-gcc", ARM_FLAGS)],
                         ids=["host", "host-native", "host-avx2", "cortex-m4"])
def test_generated_c_is_warning_free(name, cc, flags, tmp_path):
    if not have(cc):
        pytest.skip(f"{cc} not installed")
    if "-march=x86-64-v3" in flags and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("an x86 build")
    lib = compiled(name)
    lib.export(tmp_path / "mlf")
    inc = [f"-I{tmp_path / 'mlf/codegen/host/include'}", f"-I{tmp_path / 'mlf/codegen/host/src'}"]
    for src in glob.glob(str(tmp_path / "mlf/codegen/host/src/*.c")):
        p = subprocess.run([cc, *STRICT, *flags, *inc, src, "-o", os.devnull],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr[-3000:]


@pytest.mark.slow
def test_light_resnet50_builds_native_and_matches(tmp_path, monkeypatch):
    """The compile-time target's model (25 M parameters, opset 9: converted by the
    frontend) builds as bench/compile_time.py builds it (cc -O3 -march=native, all
    warnings errors: the AVX-512 schedules inline differently in a big file) and
    gives onnx's stored output."""
    import onnx
    from onnx import numpy_helper
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    path = os.path.join(d, "light_resnet50.onnx")
    if not os.path.exists(path):
        pytest.skip("onnx's light_resnet50 test model is not installed")
    monkeypatch.setenv("MTVM_CACHE_DIR", str(tmp_path))
    lib = mtvm.compile(path)
    assert any("converted to opset 11" in n for n in lib.metadata["notes"])
    out = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "light_resnet50_output_0.pb")))
    # onnx.backend's dummy input for light models: arange scaled into [0, 1)
    shape = lib.metadata["inputs"][0]["shape"]
    n = int(np.prod(shape))
    x = (np.arange(n).reshape(shape) / n).astype(np.float32)
    got = list(lib.run_host([x], opt="-O3", extra=["-march=native"]).values())[0]
    assert_close(got, out, rtol=1e-4, what="light_resnet50")
