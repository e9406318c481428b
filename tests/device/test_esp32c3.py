"""The ESP32-C3 board (esp32-c3-devkitm-1), compiled and linked only: nobody has run
it on the hardware (there is none here, and QEMU has no ESP32-C3 machine).

The riscv template with the chip's own files (project_templates/riscv/soc/esp32c3/:
an image the ROM boot loader copies into SRAM, a vector table for the interrupt
matrix, the watchdogs, the mpccr cycle counter) and the uart_esp32c3 driver. The
tests check that the generated project follows the board's data, that the firmware
builds with -Werror, that its ELF load segments land where the ROM can load them
(code on the instruction bus, data on the data bus after the code's bytes, below
the ROM's own data) and, when esptool is installed (pip install esptool), that
`esptool elf2image` turns it into a valid image of those segments.

Needs riscv64-unknown-elf-gcc with picolibc (Debian: gcc-riscv64-unknown-elf
picolibc-riscv64-unknown-elf); skipped with the reason when missing."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mtvm.project as P
from mtvm.boards import load_board

from device_utils import MODELS_DIR, need_models, quiet
from test_riscv import need_riscv_gcc

pytestmark = pytest.mark.device

BOARD = "esp32-c3-devkitm-1"
RISCV_GCC = "riscv64-unknown-elf-gcc"
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")

IRAM = (0x40380000, 0x5E710)          # SRAM1 on the instruction bus
DRAM = (0x3FC80000, 0x5E710)          # the same SRAM on the data bus
ROM_LOADER_DATA = 0x3FCCAE00          # the ROM boot loader's data while it loads
IRAM_DRAM_OFFSET = IRAM[0] - DRAM[0]


def esptool_command():
    """How to run esptool here, or None."""
    for name in ("esptool", "esptool.py"):
        if shutil.which(name):
            return [shutil.which(name)]
    if importlib.util.find_spec("esptool") is not None:
        return [sys.executable, "-m", "esptool"]
    return None


def load_segments(elf):
    """[(vaddr, filesz, memsz, flags)] of the ELF's PT_LOAD headers (readelf -lW)."""
    out = subprocess.run(["riscv64-unknown-elf-readelf", "-lW", elf], capture_output=True,
                         text=True, check=True).stdout
    segs = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[2], 16), int(f[4], 16), int(f[5], 16), " ".join(f[6:-1])))
    return segs


def symbols(elf):
    out = subprocess.run(["riscv64-unknown-elf-nm", elf], capture_output=True, text=True,
                         check=True).stdout
    return {f[2]: int(f[0], 16) for f in (ln.split() for ln in out.splitlines()) if len(f) == 3}


def test_board_data_and_generated_files(tmp_path):
    """No tools needed: the board loads (schemas, the riscv checks: an interrupt
    matrix instead of a PLIC), the C3's own files replace the generic ones, the
    generic ones stay what the other boards get, and the runner is esptool."""
    from mtvm.firmware import runners
    from mtvm.project.boards import template_dir
    b = load_board(BOARD)
    assert b.template == "riscv" and b.uart["driver"] == "esp32c3"
    assert b.data["interrupt_matrix"] == {"base": "0x600C2000", "cpu_interrupt": 1}
    assert "plic" not in b.data
    proj = P.generate(os.path.join(EXAMPLES, "sensor_mlp.onnx"), board=BOARD,
                      out_dir=str(tmp_path / "p"), progress=quiet)
    assert proj.metadata["target"]["name"] == "rv32imc"
    tdir = template_dir("riscv")
    for rel in ("src/start.S", "src/platform_riscv.c"):
        with open(os.path.join(tdir, "soc", "esp32c3", rel)) as f:
            assert open(proj.path(rel)).read() == f.read(), rel
    for rel in ("src/startup.c", "src/riscv.h"):          # the generic ones
        with open(os.path.join(tdir, rel)) as f:
            assert open(proj.path(rel)).read() == f.read(), rel
    ld = open(proj.path("link.ld")).read()
    assert "IRAM (rx)   : ORIGIN = 0x40380000, LENGTH = 386832" in ld
    assert "DRAM (rw)   : ORIGIN = 0x3fc80000, LENGTH = 386832" in ld
    cfg = open(proj.path("src", "board_config.h")).read()
    for line in ("#define MTVM_INTMATRIX_BASE 0x600c2000u", "#define MTVM_INTMATRIX_CPU_INT 1",
                 "#define MTVM_UART_RX_IRQ 21u", "#define MTVM_UART_BASE 0x60000000u",
                 "#define MTVM_SEMIHOSTING 0", "#define MTVM_TIMER_MTIME 0"):
        assert line in cfg
    mk = open(proj.path("Makefile")).read()
    assert "-march=rv32imc -mabi=ilp32" in mk and "uart_esp32c3.c" in mk
    assert "elf2image" in mk and "$(OBJCOPY) -O binary" not in mk
    # the other RISC-V boards keep the generic files
    fe = P.generate(os.path.join(EXAMPLES, "sensor_mlp.onnx"), board="sifive_e",
                    out_dir=str(tmp_path / "fe"), progress=quiet)
    for rel in ("src/start.S", "src/platform_riscv.c"):
        with open(os.path.join(tdir, rel)) as f:
            assert open(fe.path(rel)).read() == f.read(), rel
    assert "elf2image" not in open(fe.path("Makefile")).read()
    argv = runners.flash_command(b, "fw.elf", "fw.hex", "fw.bin")
    assert argv == ["esptool", "--chip", "esp32c3", "write-flash", "0x0", "fw.bin"]


def build(projects_dir, model, kind="host-driven", sample=None):
    need_riscv_gcc()
    out = os.path.join(projects_dir, f"c3-{os.path.basename(model)[:-5]}-{kind}")
    proj = P.generate(model, board=BOARD, out_dir=out, kind=kind, sample=sample,
                      progress=quiet)
    proj.build(progress=quiet)
    return proj


def check_layout(proj):
    """Every load segment in SRAM as the ROM boot loader can load it: the code on the
    instruction bus, the rest on the data bus after the code's bytes and below the
    ROM's data; the vector table 256-byte aligned, the UART's entry its handler."""
    elf = proj.path("build", "firmware.elf")
    segs = load_segments(elf)
    code = [s for s in segs if "E" in s[3]]
    data = [s for s in segs if "E" not in s[3]]
    assert len(code) == 1 and data, segs
    c_addr, c_file, c_mem, _ = code[0]
    assert IRAM[0] <= c_addr and c_addr + c_mem <= IRAM[0] + IRAM[1]
    code_end_alias = c_addr + c_mem - IRAM_DRAM_OFFSET
    for addr, filesz, memsz, _ in data:
        assert code_end_alias <= addr, (hex(addr), hex(code_end_alias))   # no overlap
        assert addr + filesz <= ROM_LOADER_DATA, hex(addr + filesz)
        assert addr + memsz <= DRAM[0] + DRAM[1]
    sym = symbols(elf)
    assert sym["_start"] == c_addr
    vt = sym["mtvm_vector_table"]
    assert vt % 256 == 0
    dis = subprocess.run(["riscv64-unknown-elf-objdump", "-d", elf, f"--start-address={vt}",
                          f"--stop-address={vt + 8}"], capture_output=True, text=True,
                         check=True).stdout
    assert re.search(r"j\s+\w+\s+<mtvm_trap_entry>", dis), dis          # entry 0: exceptions
    assert re.search(r"j\s+\w+\s+<mtvm_uart_irq_entry>", dis), dis      # entry 1: UART0
    return elf


def check_image(proj):
    """esptool elf2image's output: the ROM's image format, one segment per load
    segment (DRAM and IRAM), checksum and hash valid."""
    esptool = esptool_command()
    if esptool is None:
        pytest.skip("esptool not installed (pip install esptool): the ELF was checked, "
                    "the flash image was not made")
    image = proj.path("build", "firmware.bin")
    if not os.path.exists(image):     # make found no esptool on the PATH
        subprocess.run(["make", "image", "ESPTOOL=" + " ".join(esptool)], cwd=proj.dir,
                       check=True, capture_output=True)
    info = subprocess.run(esptool + ["--chip", "esp32c3", "image-info", image],
                          capture_output=True, text=True)
    if info.returncode != 0:          # esptool < 5 spells it image_info
        info = subprocess.run(esptool + ["--chip", "esp32c3", "image_info", image],
                              capture_output=True, text=True)
    assert info.returncode == 0, info.stdout + info.stderr
    text = info.stdout
    assert re.search(r"Entry point: 0x4038", text), text
    kinds = re.findall(r"^\s*\d+\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+(\w+)", text,
                       re.M)
    assert sorted(k for _, k in kinds) == ["DRAM", "IRAM"], text
    assert "Checksum" in text and "(valid)" in text and "invalid" not in text.lower(), text


def test_kws_compiles_links_and_makes_an_image(projects_dir):
    """kws_dscnn_int8, host-driven (the session over UART0, its RX interrupt through
    the interrupt matrix): -Werror build, the load segments in the C3's SRAM, the
    esptool image."""
    need_models()
    proj = build(projects_dir, os.path.join(MODELS_DIR, "kws_dscnn_int8.onnx"))
    check_layout(proj)
    check_image(proj)


def test_standalone_app_compiles_and_links(projects_dir):
    """The standalone app (sensor_mlp with its sample): builds and lays out the same."""
    x = np.load(os.path.join(EXAMPLES, "sensor_mlp.npz"))["in_0"]
    proj = build(projects_dir, os.path.join(EXAMPLES, "sensor_mlp.onnx"), "standalone",
                 sample=[x])
    check_layout(proj)
    check_image(proj)
