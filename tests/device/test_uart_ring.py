"""The cortex_m template's UART receive ring (src/uart_ring.c), compiled for
the host: order, wrap-around of the free-running indices, and counting
(not corrupting) bytes that arrive when it is full."""
import os
import shutil
import subprocess

import pytest

RING_C = os.path.join(os.path.dirname(__file__), "..", "..", "project_templates", "cortex_m",
                      "src", "uart_ring.c")

TEST_MAIN = r"""
#include <stdio.h>
#include "uart.h"

int main(void)
{
    uint8_t out[64];
    size_t n, i;
    unsigned round, next_in = 0, next_out = 0;
    /* many rounds: the indices wrap the ring many times */
    for (round = 0; round < 1000; ++round) {
        unsigned k = (round * 7u) % 17u + 1u;
        for (i = 0; i < k; ++i) mtvm_uart_ring_push((uint8_t)(next_in++));
        n = mtvm_uart_read(out, (round % 3u) ? sizeof out : 5u);
        for (i = 0; i < n; ++i) {
            if (out[i] != (uint8_t)(next_out++)) { printf("order\n"); return 1; }
        }
    }
    while ((n = mtvm_uart_read(out, sizeof out)) > 0) {
        for (i = 0; i < n; ++i) {
            if (out[i] != (uint8_t)(next_out++)) { printf("drain\n"); return 1; }
        }
    }
    if (next_in != next_out || mtvm_uart_dropped() != 0) { printf("count\n"); return 1; }
    /* full: 32 bytes fit, 3 more are dropped and counted */
    for (i = 0; i < 35; ++i) mtvm_uart_ring_push((uint8_t)i);
    n = mtvm_uart_read(out, sizeof out);
    if (n != 32 || out[0] != 0 || out[31] != 31 || mtvm_uart_dropped() != 3) {
        printf("full %u %u\n", (unsigned)n, (unsigned)mtvm_uart_dropped());
        return 1;
    }
    printf("ok\n");
    return 0;
}
"""


def test_uart_ring(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    (tmp_path / "board_config.h").write_text("#define MTVM_UART_RX_RING_BYTES 32u\n")
    (tmp_path / "main.c").write_text(TEST_MAIN)
    src_dir = os.path.dirname(RING_C)
    exe = tmp_path / "ring"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", f"-I{tmp_path}",
                    f"-I{src_dir}", RING_C, str(tmp_path / "main.c"), "-o", str(exe)],
                   check=True)
    p = subprocess.run([str(exe)], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout
