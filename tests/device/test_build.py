"""Both project kinds compile and link for every board in boards/ (real
boards included), the size report adds up, and a model that does not fit is
refused with the numbers."""
import copy
import json
import os

import numpy as np
import pytest

import mtvm.project as P
from mtvm.boards import BOARDS_DIR, list_boards, load_board
from mtvm.errors import MtvmError

from device_utils import need_gcc, quiet

pytestmark = pytest.mark.device

CORTEX_M = [b for b in list_boards() if load_board(b).template == "cortex_m"]


@pytest.mark.parametrize("kind", ["host-driven", "standalone"])
@pytest.mark.parametrize("board", CORTEX_M)
def test_builds_for_every_board(board, kind, models, projects_dir):
    need_gcc()
    cm = models.get("small_cnn")
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 1, 8, 8)
    proj = P.generate(cm, board=board, out_dir=os.path.join(projects_dir, f"small-{board}-{kind}"),
                      kind=kind, sample=[x] if kind == "standalone" else None,
                      progress=quiet)
    rep = proj.template.build(proj, quiet)
    b = load_board(board)
    assert os.path.getsize(proj.path("build", "firmware.elf")) > 0
    assert os.path.getsize(proj.path("build", "firmware.hex")) > 0
    assert rep.flash_size == b.flash.size and rep.ram_size == b.ram.size
    assert 0 < rep.flash_used < b.flash.size and 0 < rep.ram_used < b.ram.size
    assert rep.stack == b.stack_bytes
    assert rep.weights >= cm.metadata["constant_bytes"] * 0.9
    assert rep.arena == cm.metadata["workspace_bytes"]
    if kind == "host-driven":
        assert rep.runtime_buffers >= 2 * b.data["max_packet_bytes"]
        assert rep.uart_ring >= 2 * b.data["max_packet_bytes"]
    text = rep.format(board)
    assert "flash" in text and "RAM" in text and "arena" in text
    with open(proj.path("build", "size.json")) as f:
        assert json.load(f)["flash_used"] == rep.flash_used


def test_model_too_big_is_refused_before_compiling(models, projects_dir):
    need_gcc()
    cm = models.get("small_cnn")
    board = copy.deepcopy(load_board("netduinoplus2").data)  # merged with its SoC
    board["memory"]["ram"]["size"] = "8K"       # smaller than the stack reserve
    proj = P.generate(cm, board=board, out_dir=os.path.join(projects_dir, "too-big"),
                      progress=quiet)
    with pytest.raises(MtvmError, match=r"does not fit on netduinoplus2:\n  RAM: arena"):
        proj.build(progress=quiet)


def test_link_overflow_is_reported_clearly(models, projects_dir):
    need_gcc()
    cm = models.get("small_cnn")
    board = copy.deepcopy(load_board("mps2-an386").data)  # merged with its SoC
    board["memory"]["flash"]["size"] = "4K"     # weights fit, code does not
    proj = P.generate(cm, board=board, out_dir=os.path.join(projects_dir, "tiny-flash"),
                      progress=quiet)
    with pytest.raises(MtvmError, match="does not fit on mps2-an386") as e:
        proj.build(progress=quiet)
    assert "FLASH" in str(e.value) or "flash" in str(e.value)


@pytest.mark.parametrize("board", ["nucleo-f746zg", "nrf52840dk"])
def test_real_board_flash_names_the_missing_tool(board, models, projects_dir):
    import shutil
    need_gcc()
    b = load_board(board)
    if shutil.which(b.runner.tool):
        pytest.skip(f"{b.runner.tool} is installed: flashing would try a real board")
    proj = P.generate(models.get("small_cnn"), board=board,
                      out_dir=os.path.join(projects_dir, f"flash-{board}"), progress=quiet)
    proj.build(progress=quiet)
    with pytest.raises(MtvmError, match="not installed") as e:
        proj.flash(progress=quiet)
    assert b.runner.install_hint() in str(e.value)
