"""The Cortex-M timer: SysTick's 24-bit counter extended by the wrap count
never runs backwards (a wrap the interrupt handler has not counted yet made
the standalone app print `time per inference: 245956587649247353 us`).

The wrap arithmetic (src/systick_count.h) is checked exhaustively on the host
against every interleaving of a wrap with the reader; the firmware is run
under QEMU with a short SysTick period so that it wraps thousands of times
while it reads the timer in a loop."""
import os
import re
import shutil
import subprocess

import pytest

import mtvm.project as P
from mtvm.firmware import qemu

from device_utils import need_qemu, quiet

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEMPLATE_SRC = os.path.join(ROOT, "project_templates", "cortex_m", "src")

# Every reader interleaving for a counter of period 8: the handler has counted
# the wraps up to time `counted`; the reader reads the counter at t0, the
# pending bit at t1 and the counter again at t2 (interrupts masked, so the
# count holds still). The composed time must lie in [t0, t2].
HOST_CHECK = r"""
#include <stdio.h>
#include "systick_count.h"

#define RELOAD 7u
#define PERIOD (RELOAD + 1u)
static uint32_t counter_at(uint32_t t) { return RELOAD - t % PERIOD; }
static uint32_t wraps_by(uint32_t t) { return t / PERIOD; }

int main(void)
{
    uint32_t counted, t0, t1, t2;
    unsigned long checked = 0, bad = 0;
    for (counted = 0; counted < 40u; ++counted) {
        for (t0 = counted; t0 < 48u; ++t0) {
            for (t1 = t0; t1 < 48u; ++t1) {
                for (t2 = t1; t2 < 48u; ++t2) {
                    uint64_t got;
                    int pending;
                    /* the handler counted every wrap up to `counted`, and it
                     * would have run before a second wrap became due */
                    if (wraps_by(counted) + 1u < wraps_by(t2)) {
                        continue;
                    }
                    if (wraps_by(t0) < wraps_by(counted)) {
                        continue;
                    }
                    pending = wraps_by(t1) > wraps_by(counted);
                    got = mtvm_systick_compose(wraps_by(counted), counter_at(t0), pending,
                                               counter_at(t2), RELOAD);
                    ++checked;
                    if (got < t0 || got > t2) {
                        if (bad++ < 5u) {
                            printf("counted %u t0 %u t1 %u t2 %u -> %lu\n", counted, t0, t1, t2,
                                   (unsigned long)got);
                        }
                    }
                }
            }
        }
    }
    printf("%lu checked, %lu wrong\n", checked, bad);
    return bad != 0;
}
"""


def test_systick_wrap_arithmetic_on_the_host(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    src = tmp_path / "check.c"
    src.write_text(HOST_CHECK)
    exe = str(tmp_path / "check")
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-I", TEMPLATE_SRC,
                    str(src), "-o", exe], check=True)
    p = subprocess.run([exe], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout
    checked, wrong = map(int, re.search(r"(\d+) checked, (\d+) wrong", p.stdout).groups())
    assert checked > 10000 and wrong == 0


def _sane_time(text: str) -> int:
    m = re.search(r"time per inference: (\d+) us \((\d+) ticks at (\d+) Hz\)", text)
    assert m, text[-500:]
    us, ticks, hz = map(int, m.groups())
    assert 0 < us < 10_000_000 and us == pytest.approx(ticks * 1e6 / hz, abs=1), m.group(0)
    return us


@pytest.mark.device
def test_standalone_time_is_sane_every_run_across_systick_wraps(models, tmp_path):
    """A SysTick period of 16384 ticks (0.65 ms): every inference spans about a
    thousand wraps and the self-check reads the timer 10^6 times in a row."""
    need_qemu()
    proj = P.generate(models.get("small_cnn"), board="mps2-an386",
                      out_dir=str(tmp_path / "timer"), kind="standalone", progress=quiet)
    proj.run_command(["make", "-j2", "DEFINES=-DMTVM_SYSTICK_RELOAD=0x3FFFu "
                      "-DMTVM_TIMER_SELFCHECK_READS=1000000"], "make", progress=quiet)
    elf = proj.path("build", "firmware.elf")
    for _ in range(4):
        r = qemu.run_to_exit("mps2-an386", elf, timeout=60)
        assert r.status == 0, r.output + r.stderr
        _sane_time(r.output)
        m = re.search(r"timer self-check: (\d+) of (\d+) reads ran backwards over (\d+) ticks",
                      r.output)
        assert m, r.output[-500:]
        backwards, reads, span = map(int, m.groups())
        assert reads == 1_000_000 and span > 20 * 16384
        assert backwards == 0, m.group(0)
