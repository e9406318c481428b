"""Several workspace pools (--workspace-pools) and the weights' linker section
(--constants-section): the planner's split, the generated C (internal static
pools in sections .mtvm.pool.<name>, external pools passed to run), bit-exact
results against the one-arena build on the host and on mps2-an386 (QEMU), and
the one-line errors."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mtvm
from mtvm import testing
from mtvm.errors import MtvmError
from mtvm.memory import split_pools
from mtvm.memory.planner import ALIGN

MODEL = "kws_dscnn_int8"
# kws_dscnn_int8's one arena is 10,256 bytes: a 9,600-byte activation (written in
# place by every conv) and small ones. 1 KiB + 16 KiB forces a real split: the
# small hot buffers in sram1, the big one (which no longer fits there) in sram2.
POOLS = [("sram1", 1024), ("sram2", 16384)]


@pytest.fixture(scope="module")
def kws():
    models_dir = testing.models_dir()
    if not os.path.isdir(models_dir):
        pytest.skip(f"{models_dir} not found (set MTVM_MODELS_DIR)")
    path = os.path.join(models_dir, f"{MODEL}.onnx")
    with np.load(os.path.join(models_dir, f"{MODEL}.npz")) as z:
        x = z["in_0"]
    single = mtvm.compile(path)
    return path, x, single, single.run_host([x])["output"]


def _overlap(a, b):
    (oa, sa, fa, la), (ob, sb, fb, lb) = a, b
    return fa <= lb and fb <= la and oa < ob + sb and ob < oa + sa


# -- the planner ---------------------------------------------------------------------------
def test_split_puts_the_hottest_buffers_first_and_respects_each_pool():
    # key: (bytes, first, last); accesses per key
    buffers = {"big_cold": (4096, 0, 9), "hot_a": (256, 2, 3), "hot_b": (256, 3, 4),
               "scratch": (512, 5, 5), "mid": (1024, 1, 6), "tail": (2048, 7, 9)}
    accesses = {"big_cold": 2, "hot_a": 2, "hot_b": 2, "scratch": 2, "mid": 3, "tail": 2}
    pools = [("fast", 1024), ("slow", 8192)]
    where, offsets = split_pools(buffers, accesses, pools)
    assert set(where) == set(buffers)
    # accesses per live step: scratch 2, hot_* 1, tail 0.67, mid 0.43, big_cold 0.2
    assert where["scratch"] == where["hot_a"] == where["hot_b"] == 0
    assert where["big_cold"] == 1
    for p, (_, cap) in enumerate(pools):
        placed = [(offsets[p][k], -(-buffers[k][0] // ALIGN) * ALIGN) + buffers[k][1:]
                  for k in offsets[p]]
        assert all(o + s <= cap for o, s, _, _ in placed)
        assert not any(_overlap(a, b) for i, a in enumerate(placed) for b in placed[i + 1:])


def test_too_small_pools_are_one_line_naming_pools_and_bytes():
    buffers = {"a": (4096, 0, 2), "b": (4096, 1, 3)}
    with pytest.raises(MtvmError) as e:
        split_pools(buffers, {}, [("sram1", 2048), ("sram2", 4096)])
    msg = str(e.value)
    assert "\n" not in msg
    assert "sram1:2048" in msg and "sram2:4096" in msg and "6144 bytes in all" in msg
    assert "8192 bytes live at once" in msg and "4096-byte buffer" in msg


# -- compiling -----------------------------------------------------------------------------
def test_pools_split_the_arena_and_run_bit_exact_on_the_host(kws):
    path, x, single, y1 = kws
    cm = mtvm.compile(path, workspace_pools=POOLS)
    pools = {p["name"]: p for p in cm.metadata["workspace_pools"]}
    assert pools["sram1"]["used_bytes"] > 0 and pools["sram2"]["used_bytes"] > 0   # a real split
    assert all(p["used_bytes"] <= p["size_bytes"] for p in pools.values())
    assert cm.metadata["workspace_bytes"] == sum(p["used_bytes"] for p in pools.values())
    h = cm.sources["codegen/host/include/tvmgen_default.h"]
    for name, p in pools.items():
        assert f"#define TVMGEN_DEFAULT_{name.upper()}_WORKSPACE_POOL_SIZE {p['used_bytes']}" in h
    entry = cm.sources["codegen/host/src/tvmgen_default.c"]
    assert 'section(".mtvm.pool.sram1")' in entry and 'section(".mtvm.pool.sram2")' in entry
    assert "tvmgen_default_workspace[" not in entry
    np.testing.assert_array_equal(cm.run_host([x], sanitize=True)["output"], y1)
    # the inputs and outputs in the pools too
    io = mtvm.compile(path, workspace_pools=POOLS, io_in_workspace=True)
    assert {e["workspace_pool"] for e in io.metadata["inputs"] + io.metadata["outputs"]} <= \
        {"sram1", "sram2"}
    np.testing.assert_array_equal(io.run_host([x])["output"], y1)


def test_the_default_is_one_arena(kws):
    path, _, single, _ = kws
    assert "workspace_pools" not in single.metadata
    assert "constants_section" not in single.metadata
    assert not any(w in t for w in (".mtvm.pool", "workspace_pools", "section(", " ws_")
                   for rel, t in single.sources.items()
                   if rel.startswith("codegen/host/src/tvmgen_default"))


@pytest.mark.parametrize("pools, what", [
    ([("1abc", 10)], "pool name '1abc'"), ([("int", 10)], "pool name 'int'"),
    ([("a b", 10)], "pool name 'a b'"), ([("SRAM", 10), ("sram", 20)], "given twice"),
    ([("sram", 0)], "positive number of bytes"), ([("sram", "x")], "positive number"),
])
def test_bad_pools_are_refused(kws, pools, what):
    with pytest.raises(MtvmError, match=re.escape(what)):
        mtvm.compile(kws[0], workspace_pools=pools)


@pytest.mark.parametrize("name", ['x")));int y;', "a b", "", "/*", ".a" + "b" * 80, "9x"])
def test_bad_constants_section_names_are_refused(kws, name):
    with pytest.raises(MtvmError, match="constants section"):
        mtvm.compile(kws[0], constants_section=name)


def test_cli_too_small_pools_one_line(kws, tmp_path):
    r = subprocess.run([sys.executable, "-m", "mtvm", "compile", kws[0], "-o",
                        str(tmp_path / "m"), "--workspace-pools", "sram1:4096,sram2:2K"],
                       capture_output=True, text=True)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "sram1:4096, sram2:2048 (6144 bytes in all) are too small" in lines[0]
    assert "10256 bytes live at once" in lines[0]
    r = subprocess.run([sys.executable, "-m", "mtvm", "compile", kws[0], "-o",
                        str(tmp_path / "m2"), "--workspace-pools", "sram1"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "expected NAME:BYTES" in r.stderr


EXTERNAL_MAIN = r"""
#include <stdio.h>
#include <stdint.h>
#include "tvmgen_default.h"
/* The application's banks (a linker script would place these sections). */
static uint8_t bank1[TVMGEN_DEFAULT_SRAM1_WORKSPACE_POOL_SIZE]
    __attribute__((aligned(16), section(".bank1")));
static uint8_t bank2[TVMGEN_DEFAULT_SRAM2_WORKSPACE_POOL_SIZE] __attribute__((aligned(16)));
static float input[TVMGEN_DEFAULT_INPUT_SIZE / sizeof(float)];
static float output[TVMGEN_DEFAULT_OUTPUT_SIZE / sizeof(float)];
int main(int argc, char** argv) {
    struct tvmgen_default_inputs in = { .input = input };
    struct tvmgen_default_outputs out = { .output = output };
    struct tvmgen_default_workspace_pools pools = { .sram1 = bank1, .sram2 = bank2 };
    FILE* f;
    (void)argc;
    f = fopen(argv[1], "rb");
    if (fread(input, 1, sizeof input, f) != sizeof input) return 2;
    fclose(f);
    if (tvmgen_default_run(&in, &out, &pools) != 0) return 3;
    f = fopen(argv[2], "wb");
    fwrite(output, 1, sizeof output, f);
    fclose(f);
    return 0;
}
"""


def test_external_pools_from_a_c_program(kws, tmp_path):
    """USMP's interface: struct tvmgen_default_workspace_pools { void* sram1; void* sram2; }
    and tvmgen_default_run(inputs, outputs, pools), from a C99 -Werror program."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    path, x, _, y1 = kws
    cm = mtvm.compile(path, workspace_pools=POOLS, external_workspace=True)
    h = cm.sources["codegen/host/include/tvmgen_default.h"]
    assert re.search(r"struct tvmgen_default_workspace_pools \{\n    void\* sram1;.*\n"
                     r"    void\* sram2;.*\n\};", h)
    assert "struct tvmgen_default_workspace_pools* workspace_pools);" in h
    assert ".mtvm.pool." not in cm.sources["codegen/host/src/tvmgen_default.c"]
    mlf = tmp_path / "mlf"
    cm.export(str(mlf))
    (tmp_path / "main.c").write_text(EXTERNAL_MAIN)
    srcs = sorted(str(p) for p in (mlf / "codegen" / "host" / "src").glob("*.c"))
    exe = tmp_path / "app"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1",
                    "-I", str(mlf / "codegen" / "host" / "include"), str(tmp_path / "main.c"),
                    *srcs, "-lm", "-o", str(exe)], check=True, capture_output=True)
    x.astype(np.float32).tofile(tmp_path / "x.bin")
    subprocess.run([str(exe), str(tmp_path / "x.bin"), str(tmp_path / "y.bin")], check=True)
    y = np.fromfile(tmp_path / "y.bin", np.float32).reshape(y1.shape)
    np.testing.assert_array_equal(y, y1)


def test_internal_pools_and_constants_in_their_sections_host_object(kws, tmp_path):
    cc, readelf = shutil.which("cc") or shutil.which("gcc"), shutil.which("readelf")
    if cc is None or readelf is None:
        pytest.skip("no cc/readelf")
    cm = mtvm.compile(kws[0], workspace_pools=POOLS, constants_section=".ext_flash")
    assert cm.metadata["constants_section"] == ".ext_flash"
    mlf = tmp_path / "mlf"
    cm.export(str(mlf))
    inc = str(mlf / "codegen" / "host" / "include")
    sections = ""
    for name in ("tvmgen_default.c", "tvmgen_default_constants.c"):
        obj = tmp_path / (name + ".o")
        subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", "-I", inc,
                        str(mlf / "codegen" / "host" / "src" / name), "-o", str(obj)],
                       check=True, capture_output=True)
        sections += subprocess.run([readelf, "-SW", str(obj)], capture_output=True,
                                   text=True, check=True).stdout
    assert ".mtvm.pool.sram1" in sections and ".mtvm.pool.sram2" in sections
    assert ".ext_flash" in sections


# -- on mps2-an386 (QEMU) ------------------------------------------------------------------
def _arm_tools():
    for tool in ("arm-none-eabi-gcc", "arm-none-eabi-readelf", "qemu-system-arm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")


def _sections(elf):
    out = subprocess.run(["arm-none-eabi-readelf", "-SW", elf], capture_output=True, text=True,
                         check=True).stdout
    secs = {}
    for m in re.finditer(r"\]\s+(\S+)\s+(\w+)\s+([0-9a-f]{8})\s+[0-9a-f]+\s+([0-9a-f]+)", out):
        secs[m.group(1)] = (m.group(2), int(m.group(3), 16), int(m.group(4), 16))
    return secs


@pytest.mark.device
def test_two_pools_on_mps2_an386_match_the_one_arena_build(kws, tmp_path):
    """Internal pools through a session: sram1 in the RAM bank (SSRAM2/3), sram2 in
    the board's second bank (PSRAM at 0x21000000); the weights in their section."""
    _arm_tools()
    import mtvm.project as P
    path, x, _, y1 = kws
    proj = P.generate(path, board="mps2-an386", out_dir=str(tmp_path / "p"),
                      compile_options={"workspace_pools": POOLS,
                                       "constants_section": ".mtvm_weights"},
                      progress=lambda m: None)
    proj.build(progress=lambda m: None)
    secs = _sections(proj.path("build", "firmware.elf"))
    kind, addr, size = secs[".mtvm.pool.sram2"]
    assert kind == "NOBITS" and 0x21000000 <= addr < 0x22000000 and size >= 9600
    kind, addr, _ = secs[".mtvm.pool.sram1"]
    assert kind == "NOBITS" and 0x20000000 <= addr < 0x20400000
    kind, addr, size = secs[".mtvm_weights"]
    # flash: kws_dscnn_int8's 22 KB of int8 weights and its per-channel constants
    assert kind == "PROGBITS" and addr < 0x00400000 and size >= 25000
    y = list(testing.run_once(proj, [x], progress=lambda m: None).values())[0]
    np.testing.assert_array_equal(y, y1)


@pytest.mark.device
def test_external_pools_standalone_on_mps2_an386(kws, tmp_path):
    """External pools through `mtvm project generate` (the descriptor passes its own
    buffers, in the pools' sections) from an exported MLF; the standalone app prints
    the one-arena build's outputs."""
    _arm_tools()
    import mtvm.project as P
    from mtvm.boards import load_board
    from mtvm.firmware import qemu
    path, x, _, y1 = kws
    cm = mtvm.compile(path, workspace_pools=POOLS, external_workspace=True,
                      target="cortex-m4")
    mlf = str(tmp_path / "kws.tar")
    cm.export(mlf)
    proj = P.generate(mlf, board="mps2-an386", out_dir=str(tmp_path / "p"), kind="standalone",
                      sample=[x], progress=lambda m: None)
    proj.build(progress=lambda m: None)
    secs = _sections(proj.path("build", "firmware.elf"))
    assert 0x21000000 <= secs[".mtvm.pool.sram2"][1] < 0x22000000
    r = qemu.run_to_exit(load_board("mps2-an386").qemu_machine,
                         proj.path("build", "firmware.elf"), timeout=120)
    assert r.status == 0, r.output
    m = re.search(r"^output 0 output float32\[1,12\]: (.*)$", r.output, re.M)
    y = np.array([float(v) for v in m.group(1).split()], np.float32)
    np.testing.assert_array_equal(y, y1.ravel())


@pytest.mark.device
def test_the_issues_split_sram1_32k_sram2_64k_on_mps2_an386(tmp_path):
    """Issue 15's example, `sram1:32768,sram2:65536`, on a model whose arena needs
    both (vww_mobilenetv1_int8: 55,328 bytes in one arena), through a session on
    mps2-an386: the same outputs as the one-arena host build."""
    _arm_tools()
    import mtvm.project as P
    models_dir = testing.models_dir()
    path = os.path.join(models_dir, "vww_mobilenetv1_int8.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    with np.load(os.path.join(models_dir, "vww_mobilenetv1_int8.npz")) as z:
        x = z["in_0"]
    y1 = list(mtvm.compile(path).run_host([x]).values())[0]
    pools = [("sram1", 32768), ("sram2", 65536)]
    proj = P.generate(path, board="mps2-an386", out_dir=str(tmp_path / "p"),
                      compile_options={"workspace_pools": pools}, progress=lambda m: None)
    used = {p["name"]: p["used_bytes"] for p in proj.metadata["workspace_pools"]}
    assert used["sram1"] > 0 and used["sram2"] > 0, used   # a real split
    proj.build(progress=lambda m: None)
    secs = _sections(proj.path("build", "firmware.elf"))
    assert ".mtvm.pool.sram1" in secs and ".mtvm.pool.sram2" in secs, sorted(secs)
    assert 0 < secs[".mtvm.pool.sram1"][2] <= 32768 and 0 < secs[".mtvm.pool.sram2"][2] <= 65536
    y = list(testing.run_once(proj, [x], progress=lambda m: None).values())[0]
    np.testing.assert_array_equal(y, y1)
    print("pools used:", used)
