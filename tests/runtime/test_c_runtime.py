"""The C runtime as C: strict host and arm-none-eabi builds, no malloc/stdio,
the generated protocol header up to date, and the framing vectors in C."""
import glob
import os
import re
import shutil
import subprocess

import pytest

from mtvm.session import protocol

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
RT = os.path.join(ROOT, "c_runtime")
SOURCES = sorted(glob.glob(os.path.join(RT, "src", "*.c"))) + [
    os.path.join(RT, "template", "mtvm_platform_template.c")]
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wshadow", "-Wconversion",
          "-Wno-sign-conversion"]
ARM = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]


def compile_all(cc, flags, tmp_path):
    for src in SOURCES:
        out = tmp_path / (os.path.basename(src) + ".o")
        p = subprocess.run([cc] + flags + ["-I", os.path.join(RT, "include"), "-c", src,
                                           "-o", str(out)], capture_output=True, text=True)
        assert p.returncode == 0, f"{cc} {os.path.basename(src)}:\n{p.stderr}"


def test_protocol_header_is_generated_from_the_table():
    with open(protocol.HEADER_PATH) as f:
        assert f.read() == protocol.render_c_header(), (
            "c_runtime/include/mtvm_protocol.h is stale: run "
            "`python -m mtvm.session.protocol --write-header`")


def test_status_codes_are_category_and_code():
    for s in protocol.Status:
        assert s.value >> 8 <= 0xFF and (s.value == 0 or s.value & 0xFF)
    assert protocol.Status.PACKET_TOO_LARGE == 0x0102


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_host_build_is_warning_free(tmp_path, opt):
    compile_all("gcc", STRICT + [opt], tmp_path)


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="no arm-none-eabi-gcc")
def test_arm_build_is_warning_free(tmp_path):
    compile_all("arm-none-eabi-gcc", STRICT + ARM + ["-Os"], tmp_path)


def test_no_malloc_no_stdio():
    for path in glob.glob(os.path.join(RT, "**", "*.[ch]"), recursive=True):
        with open(path) as f:
            text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        for bad in ("malloc", "calloc", "free(", "printf", "<stdio.h>", "<stdlib.h>"):
            assert bad not in text, f"{os.path.relpath(path, ROOT)} uses {bad}"
        for inc in re.findall(r"#include\s*<([^>]+)>", text):
            assert inc in ("stdint.h", "stddef.h", "string.h"), f"{path} includes <{inc}>"


def test_framing_vectors_in_c(tmp_path):
    exe = tmp_path / "test_framing"
    p = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-g",
                        "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                        "-D_POSIX_C_SOURCE=200809L", "-I", os.path.join(RT, "include"),
                        os.path.join(HERE, "test_framing.c"),
                        os.path.join(RT, "src", "mtvm_framing.c"), "-o", str(exe)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([str(exe), os.path.join(HERE, "framing_vectors.txt")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert " 0 failures" in p.stdout


def test_vectors_file_is_what_its_generator_writes(tmp_path):
    src = os.path.join(HERE, "make_framing_vectors.py")
    with open(os.path.join(HERE, "framing_vectors.txt")) as f:
        before = f.read()
    shutil.copy(src, tmp_path / "make_framing_vectors.py")
    subprocess.run(["python", str(tmp_path / "make_framing_vectors.py")], check=True,
                   capture_output=True)
    assert (tmp_path / "framing_vectors.txt").read_text() == before
