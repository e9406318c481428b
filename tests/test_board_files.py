"""Board files: the SoC layer (boards/socs/) and the JSON Schemas that reject
typos (boards/schema/)."""
from __future__ import annotations

import json
import os

import jsonschema
import pytest

from mtvm.boards import list_boards, list_socs, load_board
from mtvm.errors import MtvmError
from mtvm.target import Target

HERE = os.path.dirname(os.path.abspath(__file__))
BOARDS = os.path.join(HERE, "..", "boards")


def test_schemas_are_valid_json_schemas():
    for kind in ("board", "soc"):
        with open(os.path.join(BOARDS, "schema", f"{kind}.schema.json")) as f:
            jsonschema.Draft202012Validator.check_schema(json.load(f))


def test_every_board_merges_to_what_its_single_file_said():
    """The boards before the SoC layer (tests/data/boards_before_soc_layer.json)
    and after: the same data, key by key."""
    with open(os.path.join(HERE, "data", "boards_before_soc_layer.json")) as f:
        before = json.load(f)
    # boards added since (the RISC-V ones) were written with the SoC layer
    assert set(before) <= set(list_boards())
    for name in sorted(before):
        now = dict(load_board(name).data)
        now.pop("soc", None)
        now.pop("ram_banks", None)   # added since: the memory banks of several pools
        if name == "host":           # -O3 since (docs/projects.md: the vectorizer)
            now["cflags"] = ["-O2" if f == "-O3" else f for f in now["cflags"]]
        assert json.dumps(now, sort_keys=True) == json.dumps(before[name], sort_keys=True), name


def test_boards_of_one_chip_share_its_soc_file():
    f746 = [load_board(n) for n in ("nucleo-f746zg", "stm32f746g-disco")]
    assert {b.data["soc"] for b in f746} == {"stm32f746"}
    with open(os.path.join(BOARDS, "nucleo-f746zg.json")) as f:
        own = json.load(f)
    assert "cpu" not in own and "memory" not in own and "cflags" not in own
    assert "stm32f746" in list_socs()
    assert Target.from_board(f746[0]).name == "cortex-m7"


def _board_dir(tmp_path, board: dict, soc: dict | None = None):
    d = tmp_path / "boards"
    (d / "socs").mkdir(parents=True)
    (d / f"{board['name']}.json").write_text(json.dumps(board))
    if soc is not None:
        (d / "socs" / f"{soc['name']}.json").write_text(json.dumps(soc))
    return d


def _mine(**changes) -> dict:
    with open(os.path.join(BOARDS, "nucleo-f746zg.json")) as f:
        d = json.load(f)
    d["name"] = "my-board"
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


@pytest.mark.parametrize("change,message", [
    ({"cflag": ["-O2"]}, "unknown key 'cflag' at top level (did you mean 'cflags'?)"),
    ({"dps": True}, "unknown key 'dps' at top level (did you mean 'dsp'?)"),
    ({"stack_bytes": "8 kilobytes"}, "stack_bytes"),
    ({"emulated": "no"}, "emulated: 'no' is not of type 'boolean'"),
    ({"uart": {"driver": "stm32_usart_v2", "bsae": "0x40004800"}},
     "unknown key 'bsae' at uart (did you mean 'base'?)"),
    ({"memory": {"flash": {"origin": "0x0800000g", "size": "1M"}}}, "memory.flash.origin"),
    ({"soc": "stm32f999"}, "unknown soc 'stm32f999'"),
])
def test_typos_are_one_clear_line(tmp_path, monkeypatch, change, message):
    d = _board_dir(tmp_path, _mine(**change))
    monkeypatch.setenv("MTVM_BOARDS_PATH", str(d))
    with pytest.raises(MtvmError) as e:
        load_board("my-board")
    text = str(e.value)
    assert message in text and "\n" not in text and "my-board.json" in text


def test_a_soc_file_is_checked_too(tmp_path, monkeypatch):
    soc = {"name": "mychip", "cpu": "cortex-m4", "fpuu": "fpv4-sp-d16"}
    d = _board_dir(tmp_path, _mine(soc="mychip"), soc)
    monkeypatch.setenv("MTVM_BOARDS_PATH", str(d))
    with pytest.raises(MtvmError, match=r"mychip.json: unknown key 'fpuu' at top level "
                                        r"\(did you mean 'fpu'\?\)"):
        load_board("my-board")


def test_an_extra_board_directory_with_its_own_soc(tmp_path, monkeypatch):
    with open(os.path.join(BOARDS, "socs", "stm32l4r5.json")) as f:
        soc = json.load(f)
    soc["name"] = "mychip"
    soc["memory"]["ram"]["size"] = "256K"
    board = _mine(soc="mychip", memory={"flash": {"size": "512K"}})  # override one field
    d = _board_dir(tmp_path, board, soc)
    monkeypatch.setenv("MTVM_BOARDS_PATH", str(d))
    b = load_board("my-board")
    assert b.cpu == "cortex-m4" and b.ram.size == 256 * 1024 and b.flash.size == 512 * 1024
    assert b.flash.origin == 0x08000000          # kept from the SoC: merged key by key
    assert "my-board" in list_boards() and "mychip" in list_socs()
    # and it still builds a project's board data, as the built-in ones do
    assert Target.from_board(b).name == "cortex-m4"


def test_the_wheel_ships_socs_and_schemas():
    """setup.py copies boards/ whole; check the new directories are there to copy."""
    assert os.path.isdir(os.path.join(BOARDS, "socs")) and \
        os.path.isfile(os.path.join(BOARDS, "schema", "board.schema.json"))
