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
            "`python -m mtvm.session.gen_header`")


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
        # The kernel library (c_runtime/kernels/) may use libm and the ISA headers.
        allowed = ("stdint.h", "stddef.h", "string.h") + (
            ("math.h", "immintrin.h", "arm_acle.h", "arm_mve.h") if f"{os.sep}kernels{os.sep}" in path
            else ())
        for inc in re.findall(r"#include\s*<([^>]+)>", text):
            assert inc in allowed, f"{path} includes <{inc}>"


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


def test_float_printing_round_trips(tmp_path):
    """mtvm_fmt_f64 (libc-free, used by standalone apps) prints float32 values
    with 9 significant digits: parsing them back gives the same float32
    (at most 1 ulp off: the scaling is plain double arithmetic)."""
    import numpy as np
    rng = np.random.default_rng(0)
    vals = np.concatenate([
        np.array([0.0, 1.0, -1.0, 0.1, 123456789.0, 1e-45, 1.17549435e-38, 3.4028235e38,
                  -2.5e-7, 65504.0], np.float32),
        (rng.standard_normal(3000) * 10.0 ** rng.integers(-38, 38, 3000)).astype(np.float32)])
    vals = vals[np.isfinite(vals)]
    bits = ", ".join(f"0x{b:08x}u" for b in vals.view(np.uint32))
    src = tmp_path / "fmt.c"
    src.write_text(f"""
#include <stdio.h>
#include <string.h>
#include "mtvm_standalone.h"
void mtvm_platform_write(const uint8_t* d, size_t n) {{ fwrite(d, 1, n, stdout); }}
void mtvm_platform_abort(int32_t c) {{ (void)c; }}
void mtvm_platform_timer_start(void) {{}}
uint64_t mtvm_platform_timer_stop_ticks(void) {{ return 0; }}
uint64_t mtvm_platform_ticks_per_second(void) {{ return 1; }}
static const uint32_t bits[] = {{ {bits} }};
int main(void) {{
    char buf[64];
    size_t i;
    for (i = 0; i < sizeof(bits) / sizeof(bits[0]); ++i) {{
        float f; memcpy(&f, &bits[i], 4);
        mtvm_fmt_f64(buf, 0, sizeof(buf), (double)f);
        puts(buf);
    }}
    mtvm_fmt_i64(buf, 0, sizeof(buf), -9223372036854775807LL - 1); puts(buf);
    mtvm_fmt_u64(buf, 0, sizeof(buf), 18446744073709551615ULL); puts(buf);
    mtvm_fmt_f64(buf, 0, 8, 1.0 / 3.0); puts(buf);  /* truncated to the buffer */
    return 0;
}}
""")
    exe = tmp_path / "fmt"
    p = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-I",
                        os.path.join(RT, "include"), str(src),
                        os.path.join(RT, "src", "mtvm_standalone.c"),
                        os.path.join(RT, "src", "mtvm_model.c"), "-o", str(exe)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    back = np.array([float(s) for s in lines[:len(vals)]], np.float32)
    ulps = np.abs(back.view(np.int32).astype(np.int64) - vals.view(np.int32).astype(np.int64))
    assert ulps.max() <= 1, (vals[ulps.argmax()], lines[ulps.argmax()])
    assert (ulps == 0).mean() > 0.99
    assert lines[len(vals):] == ["-9223372036854775808", "18446744073709551615", "3.33333"]


@pytest.mark.parametrize("max_packet", [64, 512])
def test_server_in_c(tmp_path, max_packet):
    """test_server.c: replay, BUSY, paging, errors, profiling-build timing, in-process."""
    exe = tmp_path / "test_server"
    srcs = [os.path.join(RT, "src", f) for f in ("mtvm_server.c", "mtvm_framing.c",
                                                 "mtvm_model.c")]
    p = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-g",
                        "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                        f"-DMTVM_MAX_PACKET_BYTES={max_packet}", "-I",
                        os.path.join(RT, "include"), os.path.join(HERE, "test_server.c")]
                       + srcs + ["-o", str(exe)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([str(exe)], capture_output=True, text=True)
    assert p.returncode == 0 and " 0 failures" in p.stdout, p.stdout + p.stderr
