"""Board data files: every board loads and validates, shared pieces resolve
by name, the table and runner commands come out right. No tools needed."""
import json
import os

import pytest

from mtvm.boards import BOARDS_DIR, board_from_dict, board_table, list_boards, load_board, \
    load_runner, parse_size
from mtvm.cli import main as cli_main
from mtvm.errors import MtvmError
from mtvm.firmware import runners

EMULATED = ["mps2-an385", "mps2-an386", "mps2-an500", "mps3-an547", "netduinoplus2"]
REAL = ["nucleo-l4r5zi", "nucleo-f746zg", "stm32f746g-disco", "nrf52840dk"]
CORTEX_M = [b for b in list_boards() if load_board(b).template == "cortex_m"]


def test_required_boards_exist():
    assert set(EMULATED + REAL) <= set(CORTEX_M)


@pytest.mark.parametrize("name", CORTEX_M)
def test_board_is_consistent(name):
    b = load_board(name)
    assert b.name == name == os.path.basename(b.path)[:-5]
    assert b.flash.size > 0 and b.ram.size > 0 and b.clock_hz > 0
    assert any(f.startswith("-mcpu=") for f in b.cflags) and "-mthumb" in b.cflags
    hard = "-mfloat-abi=hard" in b.cflags
    assert hard == (b.fpu is not None), "an FPU board builds hard-float, a no-FPU board soft"
    assert b.stack_bytes < b.ram.size
    assert 0 <= int(b.uart["rx_irq"]) < b.irqs
    assert b.data["max_packet_bytes"] >= 64
    if b.emulated:
        assert b.qemu_machine and b.timer == "systick" and b.usb is None
    else:
        assert b.runner.kind == "command" and b.timer == "dwt"
        assert b.usb["vid"] and b.usb["pid"]


def test_known_facts():
    assert load_board("mps2-an385").fpu is None
    assert load_board("mps2-an386").fpu == "fpv4-sp-d16"
    assert load_board("mps3-an547").mve
    assert load_board("netduinoplus2").uart["driver"] == "stm32_usart_v1"
    assert load_board("nrf52840dk").uart["driver"] == "nrf_uarte"


def test_sizes():
    assert parse_size("4M") == 4 << 20 and parse_size("640K") == 640 << 10
    assert parse_size("0x400") == 1024 and parse_size(12) == 12
    with pytest.raises(MtvmError):
        parse_size("lots")


def test_unknown_board_lists_known_ones():
    with pytest.raises(MtvmError, match="mps2-an386"):
        load_board("no-such-board")


def test_bad_driver_is_named():
    d = json.load(open(os.path.join(BOARDS_DIR, "mps2-an386.json")))
    d["uart"]["driver"] = "pl011"
    with pytest.raises(MtvmError, match="pl011"):
        board_from_dict(d)


def test_runner_expansion_and_missing_tool(tmp_path):
    b = load_board("nucleo-f746zg")
    argv = runners.flash_command(b, "fw.elf", "fw.hex", "fw.bin")
    assert argv == ["openocd", "-f", "board/st_nucleo_f7.cfg", "-c",
                    "program fw.elf verify reset exit"]
    nrf = load_board("nrf52840dk")
    assert "fw.hex" in runners.flash_command(nrf, "fw.elf", "fw.hex", "fw.bin")
    import shutil
    for name in ("nucleo-f746zg", "nrf52840dk"):
        board = load_board(name)
        if shutil.which(board.runner.tool):
            continue
        with pytest.raises(MtvmError, match="not installed") as e:
            runners.flash(board, "fw.elf", "fw.hex", "fw.bin", progress=lambda m: None)
        hint = board.runner.install_hint()
        assert hint in str(e.value)
    assert "apt-get install openocd" in load_runner("openocd").install_hint()
    assert "pip install pyocd" in load_runner("pyocd").install_hint()


def test_port_lookup_needs_a_board():
    b = load_board("nucleo-l4r5zi")
    with pytest.raises(MtvmError, match="0483:374b"):
        runners.find_port(b)     # no ST-LINK connected in CI


def test_table_and_cli(capsys):
    t = board_table()
    for name in EMULATED + REAL:
        assert name in t
    assert cli_main(["boards"]) == 0
    out = capsys.readouterr().out
    assert "qemu (mps2-an386)" in out and "openocd" in out
    assert cli_main(["boards", "mps3-an547"]) == 0
    assert "0x59303000" in capsys.readouterr().out
