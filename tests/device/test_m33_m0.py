"""The two other Arm classes that ship most, on the cortex_m template under QEMU:
Cortex-M33 (Armv8-M mainline, DSP, single-precision FPU; nRF5340, STM32U5, RP2350)
on `mps2-an505`, booting Secure from 0x10000000 with its CMSDK UART0 at the Secure
alias, and Cortex-M0 (Armv6-M, no DSP, no FPU; RP2040, SAMD21, nRF51) on `microbit`
(nRF51822, nRF51 UART, 16 KiB RAM).

Host-driven sessions over the emulated UART's pty (pyserial, as for the other
Cortex-M boards) under -icount: the int8 shared models that fit, and a small int8
conv net built here (onnx.helper + onnxruntime's quantize_static), bit-exact with
the host build of the same model; a standalone app on each board; instructions per
MAC printed, not asserted (`pytest -p no:xdist -s` shows them).

Needs arm-none-eabi-gcc and qemu-system-arm with the machine (each test is skipped
with the reason when one is missing)."""
import functools
import os
import re
import subprocess

import numpy as np
import pytest

import mtvm
import mtvm.project as P
from mtvm.errors import MtvmError
from mtvm.testing import quantize_qdq

from device_utils import MODELS_DIR, QEMU, need_models, need_qemu, quiet

pytestmark = pytest.mark.device

M33, M0 = "mps2-an505", "microbit"


@functools.lru_cache(maxsize=None)
def qemu_machines() -> str:
    try:
        return subprocess.run([QEMU, "-machine", "help"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def need_machine(board: str):
    need_qemu()
    if not re.search(rf"^{re.escape(board)}\s", qemu_machines(), re.M):
        pytest.skip(f"{QEMU} has no machine {board} (qemu-system-arm -machine help)")


def tiny_int8_model(tmp_dir: str) -> str:
    """A sensor-sized int8 conv net of our own (fits the micro:bit's 16 KiB):
    1x2x16x16 -> Conv 3x3 8 + ReLU -> MaxPool 2 -> Conv 3x3 16 + ReLU -> global
    average pool -> Gemm 4, quantized by onnxruntime (QDQ, per-channel int8 weights,
    int8 activations; seeded calibration data). Written with its reference outputs
    (onnxruntime without graph optimizations) beside it, as the shared models are."""
    path = os.path.join(tmp_dir, "tiny_conv_int8.onnx")
    if os.path.exists(path):
        return path
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(18)

    def init(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale)
                                       .astype(np.float32), name)
    inits = [init("w1", (8, 2, 3, 3), 0.3), init("b1", (8,), 0.1),
             init("w2", (16, 8, 3, 3), 0.15), init("b2", (16,), 0.1),
             init("w3", (16, 4), 0.5), init("b3", (4,), 0.1)]
    nodes = [helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["output"])]
    g = helper.make_graph(nodes, "tiny_conv",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                         [1, 2, 16, 16])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4])],
                          inits)
    fp32 = os.path.join(tmp_dir, "tiny_conv.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), fp32)
    calib = [rng.standard_normal((1, 2, 16, 16)).astype(np.float32) for _ in range(8)]
    x = rng.standard_normal((1, 2, 16, 16)).astype(np.float32)
    return quantize_qdq(fp32, path, "input", calib, x, per_channel=True)


@pytest.fixture(scope="module")
def own_models(tmp_path_factory):
    return str(tmp_path_factory.mktemp("own_models"))


def model_path(name: str, own_dir: str) -> str:
    if name == "tiny_conv_int8":
        return tiny_int8_model(own_dir)
    need_models()
    return os.path.join(MODELS_DIR, f"{name}.onnx")


def reference(path: str):
    with np.load(path[:-5] + ".npz") as z:
        return z["in_0"], z["out_0"]


_compiled = {}


def compiled(path: str):
    """Each model compiled once (portable C: the host build the boards must match)."""
    if path not in _compiled:
        _compiled[path] = mtvm.compile(path)
    return _compiled[path]


def build(projects_dir, path, board, kind="host-driven", sample=None):
    need_machine(board)
    name = os.path.basename(path)[:-5]
    out = os.path.join(projects_dir, f"m33m0-{name}-{board}-{kind}")
    if os.path.exists(os.path.join(out, "build", "firmware.elf")):
        return P.load(out)
    proj = P.generate(path, board=board, out_dir=out, kind=kind, sample=sample, progress=quiet)
    proj.build(progress=quiet)
    return proj


def check_int8(path, y, x, ref):
    from mtvm.cli.run_cmd import dequantize_steps
    host = list(compiled(path).run_host([x]).values())[0]
    np.testing.assert_array_equal(y, host)                     # bit-exact with the host
    step = max(dequantize_steps(path).values())
    assert np.abs(y - ref).max() <= step * 1.001               # one output step of onnxruntime


@pytest.mark.parametrize("name,board", [
    ("kws_dscnn_int8", M33), ("ic_resnet8_int8", M33), ("vww_mobilenetv1_int8", M33),
    ("tiny_conv_int8", M33),
    ("kws_dscnn_int8", M0), ("har_cnn1d_int8", M0), ("tiny_conv_int8", M0)])
def test_int8_session_matches_the_host_build(name, board, projects_dir, own_models):
    """Build, start QEMU with -icount, run the reference input once through the session
    over the UART pty and time one run: bit-exact with the host build; prints
    instructions per MAC."""
    path = model_path(name, own_models)
    proj = build(projects_dir, path, board)
    x, ref = reference(path)
    proj.template.flash(proj, quiet, icount=True)
    try:
        with proj.session() as s:
            assert s.info().board == board
            y = list(s.executor.run([x]).values())[0]
            bench = s.executor.benchmark(number=1, repeat=1)
            assert s.stats["bad_packets"] == 0
        note = proj.template.timing(proj, bench)
    finally:
        proj.stop()
    assert y.shape == ref.shape
    check_int8(path, y, x, ref)
    n = proj.template.instructions_per_inference(bench)
    macs = proj.metadata["total_macs"]
    assert f"{n:,} instructions per inference" in note
    print(f"\n{name} on {board} ({proj.metadata['target']['name']}): {n:,} instructions, "
          f"{macs:,} MACs, {n / macs:.2f} instructions/MAC")


@pytest.mark.parametrize("name,board", [("kws_dscnn_int8", M0), ("tiny_conv_int8", M33)])
def test_standalone_app(name, board, projects_dir, own_models):
    """The untethered app: prints outputs equal to the host build's, the time (SysTick
    under -icount: instructions), a timer calibration loop and the stack high-water
    mark, then exits through semihosting with status 0."""
    path = model_path(name, own_models)
    x, _ = reference(path)
    proj = build(projects_dir, path, board, "standalone", sample=[x])
    r = proj.template.run_standalone(proj, timeout=120, icount=True)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "mtvm standalone: done (status 0)" in r.stdout
    m = re.search(r"^output 0 \S+ \w+\[[\d,]*\]: (.*)$", r.stdout, re.M)
    y = np.array([float(v) for v in m.group(1).split()], dtype=np.float32)
    host = list(compiled(path).run_host([x]).values())[0]
    np.testing.assert_array_equal(y, host.ravel())
    m = re.search(r"timer calibration: (\d+) instructions in (\d+) ticks at (\d+) Hz", r.stdout)
    assert m, r.stdout[-500:]
    n, ticks, hz = map(int, m.groups())
    assert hz == proj.board["clock_hz"]
    assert n * hz / 1e9 <= ticks <= n * hz / 1e9 + 4        # 1 instruction = 1 ns, exactly
    used, reserve = map(int, re.search(r"stack: (\d+) of (\d+) bytes used", r.stdout).groups())
    assert 0 < used < reserve == proj.board["stack_bytes"]


def test_a_model_too_big_for_the_microbit_is_refused_with_the_numbers(tmp_path):
    """vww_mobilenetv1_int8's float32 input alone is 110 KB: refused before compiling C."""
    need_models()
    proj = P.generate(os.path.join(MODELS_DIR, "vww_mobilenetv1_int8.onnx"), board=M0,
                      out_dir=str(tmp_path / "p"), progress=quiet)
    with pytest.raises(MtvmError, match=r"does not fit on microbit:\n  RAM: arena [\d,]+ .* "
                                        r"but microbit has 16,384"):
        proj.build(progress=quiet)


def test_generated_files_follow_the_boards(tmp_path, own_models):
    """No tools needed: the AN505 firmware links at the Secure aliases (vectors at
    0x10000000, INITSVTOR) and talks to UART0's Secure alias; the micro:bit's gets the
    nRF51 UART driver and its baud register value; each compiles for its class (DSP
    schedules on the M33, portable integer C for Armv6-M) with -std=c99 -Werror."""
    path = tiny_int8_model(own_models)
    m33 = P.generate(path, board=M33, out_dir=str(tmp_path / "m33"), progress=quiet)
    ld = open(m33.path("link.ld")).read()
    assert "ORIGIN = 0x10000000, LENGTH = 4194304" in ld
    assert "ORIGIN = 0x38000000, LENGTH = 4194304" in ld
    cfg = open(m33.path("src", "board_config.h")).read()
    for line in ("#define MTVM_UART_BASE 0x50200000u", "#define MTVM_UART_RX_IRQ 32u",
                 "#define MTVM_UART_PCLK_HZ 20000000u", "#define MTVM_BOARD_IRQS 124"):
        assert line in cfg
    assert "-mcpu=cortex-m33" in open(m33.path("Makefile")).read()
    assert m33.metadata["target"]["name"] == "cortex-m33"
    assert "dsp" in m33.metadata["target"]["features"]

    m0 = P.generate(path, board=M0, out_dir=str(tmp_path / "m0"), progress=quiet)
    cfg = open(m0.path("src", "board_config.h")).read()
    for line in ("#define MTVM_UART_BASE 0x40002000u", "#define MTVM_UART_RX_IRQ 2u",
                 "#define MTVM_UART_BAUD_REG 0x01d7e000u", "#define MTVM_UART_TX_PIN 24u"):
        assert line in cfg
    mk = open(m0.path("Makefile")).read()
    assert "-mcpu=cortex-m0" in mk and "uart_nrf_uart.c" in mk
    assert "-std=c99" in mk and "-Werror" in mk
    assert "ORIGIN = 0x20000000, LENGTH = 16384" in open(m0.path("link.ld")).read()
    assert m0.metadata["target"]["name"] == "cortex-m0"
    assert m0.metadata["target"]["features"] == []
