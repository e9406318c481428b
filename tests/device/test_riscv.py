"""RISC-V microcontrollers under QEMU: the riscv template on riscv32-virt
(RV32IMAFC, hard float, ns16550 UART) and sifive_e (FE310: RV32IMAC, soft
float, 16 KiB RAM, FE310 UART). Host-driven sessions over the emulated UART's
pty (pyserial, as for the Cortex-M boards) -- sensor_mlp and kws_dscnn_int8 on
both, a few more shared models on one -- int8 bit-exact with the host build and
float within 1e-4 of the reference; one standalone app; a model too big for the
FE310's 16 KiB refused; the real hifive1-revb compiled and linked; instructions
per MAC under -icount (printed: `pytest -p no:xdist -s` shows them; for the three int8
models of issue 18 also held under a ceiling, so the RV32 kernels stay in use).

Needs riscv64-unknown-elf-gcc with picolibc and qemu-system-riscv32 (Debian:
gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc);
skipped with the reason when one is missing."""
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import mtvm.project as P
from mtvm.boards import load_board
from mtvm.errors import MtvmError

from device_utils import MODELS_DIR, need_models, quiet, tolerance

pytestmark = pytest.mark.device

RISCV_GCC = "riscv64-unknown-elf-gcc"
QEMU_RV32 = "qemu-system-riscv32"
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def need_riscv():
    need_riscv_gcc()
    if shutil.which(QEMU_RV32) is None:
        pytest.skip(f"{QEMU_RV32} not installed (apt-get install qemu-system-misc)")


def need_riscv_gcc():
    """The RV32 cross compiler and its picolibc (what a build needs; no emulator)."""
    if shutil.which(RISCV_GCC) is None:
        pytest.skip(f"{RISCV_GCC} not installed (apt-get install gcc-riscv64-unknown-elf "
                    "picolibc-riscv64-unknown-elf)")
    specs = subprocess.run([RISCV_GCC, "-print-file-name=picolibc.specs"], capture_output=True,
                           text=True).stdout.strip()
    if not os.path.isabs(specs):
        pytest.skip("picolibc for riscv64-unknown-elf not installed "
                    "(apt-get install picolibc-riscv64-unknown-elf)")


def model_path(name: str) -> str:
    if name == "sensor_mlp":
        return os.path.join(EXAMPLES, "sensor_mlp.onnx")
    need_models()
    return os.path.join(MODELS_DIR, f"{name}.onnx")


def reference(name: str):
    with np.load(model_path(name)[:-5] + ".npz") as z:
        return z["in_0"], z["out_0"]


def build(projects_dir, name, board, kind="host-driven", sample=None):
    need_riscv()
    out = os.path.join(projects_dir, f"rv-{name}-{board}-{kind}")
    if os.path.exists(os.path.join(out, "build", "firmware.elf")):
        return P.load(out)
    proj = P.generate(model_path(name), board=board, out_dir=out, kind=kind, sample=sample,
                      progress=quiet)
    proj.build(progress=quiet)
    return proj


def host_output(proj, x):
    """The same model's portable C, built and run on the host."""
    import mtvm
    return list(mtvm.compile(model_path(proj.info["model_name"]))
                .run_host([x]).values())[0]


@pytest.mark.parametrize("board", ["riscv32-virt", "sifive_e"])
@pytest.mark.parametrize("name", ["sensor_mlp", "kws_dscnn_int8"])
def test_session_over_the_emulated_uart(name, board, projects_dir):
    session_case(projects_dir, name, board)


@pytest.mark.parametrize("name,board", [("har_cnn1d_int8", "sifive_e"),
                                        ("ad_autoencoder_int8", "sifive_e"),
                                        ("kws_crnn_int8", "riscv32-virt"),
                                        ("kwt_tiny_int8", "riscv32-virt"),
                                        ("fomo_mbv2_int8", "riscv32-virt"),
                                        ("denoise_unet_int8", "riscv32-virt"),
                                        ("ic_resnet8_int8", "riscv32-virt"),
                                        ("vww_mobilenetv1_int8", "riscv32-virt"),
                                        ("kws_dscnn", "riscv32-virt")])
def test_more_shared_models(name, board, projects_dir):
    session_case(projects_dir, name, board)


def session_case(projects_dir, name, board):
    """Build, start QEMU with -icount, run the reference input once through the session
    and time it: int8 bit-exact with the host build, float within 1e-4 of the reference;
    prints instructions per MAC."""
    proj = build(projects_dir, name, board)
    x, ref = reference(name)
    proj.template.flash(proj, quiet, icount=True)
    try:
        with proj.session() as s:
            info = s.info()
            assert info.board == board
            y = list(s.executor.run([x]).values())[0]
            bench = s.executor.benchmark(number=1, repeat=1)
            assert s.stats["bad_packets"] == 0
        note = proj.template.timing(proj, bench)
    finally:
        proj.stop()
    assert y.shape == ref.shape
    if name.endswith("_int8"):
        from mtvm.cli.run_cmd import dequantize_steps
        np.testing.assert_array_equal(y, host_output(proj, x))     # bit-exact
        step = max(dequantize_steps(model_path(name)).values())
        assert np.abs(y - ref).max() <= step * 1.001               # one output step
    else:
        assert np.abs(y - ref).max() <= tolerance(ref)
    n = proj.template.instructions_per_inference(bench)
    macs = proj.metadata["total_macs"]
    assert "minstret" in note and f"{n:,} instructions per inference" in note
    print(f"\n{name} on {board} ({proj.metadata['target']['name']}): {n:,} instructions, "
          f"{macs:,} MACs, {n / macs:.2f} instructions/MAC")
    if name in RV32_INT8_CEILING:   # the RV32 int8 kernels in use (portable: 5.9-6.1)
        assert n / macs <= RV32_INT8_CEILING[name], (name, board, n / macs)


# instructions/MAC the RV32 int8 kernels (c_runtime/kernels/riscv/) stay under (measured
# 2.88 on riscv32-virt / 2.95 on sifive_e, 2.79, 3.06: docs/boards.md; before the
# requantizing assembly blocks and the depthwise strips 3.10/3.17, 2.88, 3.43)
RV32_INT8_CEILING = {"kws_dscnn_int8": 3.05, "ic_resnet8_int8": 2.9, "vww_mobilenetv1_int8": 3.2}


def test_standalone_app_on_sifive_e(projects_dir):
    """kws_dscnn_int8 in the FE310's 16 KiB: the app prints the outputs (equal to the
    host build's), the time in instructions (minstret under -icount) and its stack."""
    x, _ = reference("kws_dscnn_int8")
    proj = build(projects_dir, "kws_dscnn_int8", "sifive_e", "standalone", sample=[x])
    r = proj.template.run_standalone(proj, timeout=120, icount=True)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "mtvm standalone: done (status 0)" in r.stdout
    m = re.search(r"^output 0 \S+ \w+\[[\d,]*\]: (.*)$", r.stdout, re.M)
    y = np.array([float(v) for v in m.group(1).split()], dtype=np.float32)
    np.testing.assert_array_equal(y, host_output(proj, x).ravel())
    m = re.search(r"timer calibration: (\d+) instructions in (\d+) ticks at (\d+) Hz "
                  r"\(minstret\)", r.stdout)
    assert m, r.stdout[-500:]
    n, ticks, hz = map(int, m.groups())
    assert hz == 10**9 and n <= ticks <= n + 64          # exact, but for the timer calls
    used, reserve = map(int, re.search(r"stack: (\d+) of (\d+) bytes used", r.stdout).groups())
    assert 0 < used < reserve == 2048
    assert os.path.getsize(proj.path("build", "firmware.elf")) > 0
    with open(proj.path("build", "size.json")) as f:
        assert json.load(f)["ram_size"] == 16 * 1024


def test_a_model_too_big_for_sifive_e_is_refused_with_the_numbers(projects_dir):
    need_riscv()
    out = os.path.join(projects_dir, "rv-kws_dscnn-sifive_e")
    proj = P.generate(model_path("kws_dscnn"), board="sifive_e", out_dir=out, progress=quiet)
    with pytest.raises(MtvmError, match=r"does not fit on sifive_e:\n  RAM: arena 46,080 .* "
                                        r"but sifive_e has 16,384"):
        proj.build(progress=quiet)


def test_hifive1_revb_compiles_and_links(projects_dir):
    """A real board, compiled and linked only (nobody has run it on the hardware):
    kws_dscnn_int8 in the FE310-G002's 16 KiB, flashed by openocd."""
    from mtvm.firmware import runners
    proj = build(projects_dir, "kws_dscnn_int8", "hifive1-revb")
    with open(proj.path("build", "size.json")) as f:
        rep = json.load(f)
    assert rep["ram_used"] <= rep["ram_size"] == 16 * 1024
    assert "0x20010000" in open(proj.path("link.ld")).read()
    assert "#define MTVM_SEMIHOSTING 0" in open(proj.path("src", "board_config.h")).read()
    argv = runners.flash_command(load_board("hifive1-revb"), "fw.elf", "fw.hex", "fw.bin")
    assert argv[:3] == ["openocd", "-f", "board/sifive-hifive1-revb.cfg"]


def test_generated_files_follow_the_board(tmp_path):
    """No tools needed: the linker script, board_config.h and the Makefile come from
    the board's data (sifive_e: FE310 memory, PLIC source 3, 10 MHz mtime under QEMU)."""
    proj = P.generate(model_path("sensor_mlp"), board="sifive_e", out_dir=str(tmp_path / "p"),
                      progress=quiet)
    ld = open(proj.path("link.ld")).read()
    assert "ORIGIN = 0x20400000, LENGTH = 12582912" in ld
    assert "ORIGIN = 0x80000000, LENGTH = 16384" in ld
    cfg = open(proj.path("src", "board_config.h")).read()
    for line in ("#define MTVM_UART_RX_IRQ 3u", "#define MTVM_PLIC_BASE 0x0c000000u",
                 "#define MTVM_MTIME_HZ 10000000u", "#define MTVM_UART_TX_PIN 17u",
                 "#define MTVM_EMULATED 1"):
        assert line in cfg
    mk = open(proj.path("Makefile")).read()
    assert "-march=rv32imac -mabi=ilp32" in mk and "uart_fe310_uart.c" in mk
    assert proj.metadata["target"]["name"] == "rv32imac"
    # the receive ring is the cortex_m template's, written from there
    from mtvm.project.boards import template_dir
    ring = open(os.path.join(template_dir("cortex_m"), "src", "uart_ring.c")).read()
    assert open(proj.path("src", "uart_ring.c")).read() == ring
    virt = P.generate(model_path("sensor_mlp"), board="riscv32-virt",
                      out_dir=str(tmp_path / "v"), progress=quiet)
    assert virt.metadata["target"]["name"] == "rv32imafc"
    assert "uart_ns16550.c" in open(virt.path("Makefile")).read()

