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

# Every reader interleaving for a counter of period 8 (reload 7): the counter
# shows 7, 6, ..., 1, 0, 7, ...; reaching 0 (time e_k = 8k + 7) is wrap k. An
# emulator may keep showing 0 for `lag` ticks and post the pending bit only
# then (p_k = e_k + lag; lag 0 is the hardware). The handler has counted the
# wraps posted up to time `counted`; with interrupts masked the reader reads
# the counter at t0, the pending bit at t1 and the counter again at t2, and
# reads again one tick later while the reading is ambiguous. The time it
# composes must be t + 1 for some t in [first t0, last t2].
HOST_CHECK = r"""
#include <stdio.h>
#include "systick_count.h"

#define RELOAD 7u
#define PERIOD (RELOAD + 1u)
static uint32_t lag;

static int wrap_at(uint32_t k) { return (int)(k * PERIOD + RELOAD); }
static uint32_t value_at(uint32_t t)
{
    uint32_t k;
    for (k = 0; k < 16u; ++k) {
        if ((int)t >= wrap_at(k) && (int)t < wrap_at(k) + (int)lag) {
            return 0u;                         /* the emulator has not got there */
        }
    }
    return RELOAD - t % PERIOD;
}
static uint32_t reached_by(uint32_t t)         /* wraps whose counter reached 0 by t */
{
    uint32_t k, n = 0;
    for (k = 0; k < 16u; ++k) {
        n += wrap_at(k) <= (int)t ? 1u : 0u;
    }
    return n;
}
static uint32_t posted_by(uint32_t t)          /* wraps whose pending bit is set by t */
{
    uint32_t k, n = 0;
    for (k = 0; k < 16u; ++k) {
        n += wrap_at(k) + (int)lag <= (int)t ? 1u : 0u;
    }
    return n;
}

int main(void)
{
    uint32_t counted, t0, t1, t2;
    unsigned long checked = 0, bad = 0;
    for (lag = 0; lag < 4u; ++lag) {
        for (counted = 0; counted < 40u; ++counted) {
            for (t0 = counted; t0 < 48u; ++t0) {
                for (t1 = t0; t1 < 48u; ++t1) {
                    for (t2 = t1; t2 < 48u; ++t2) {
                        uint32_t a = t0, b = t1, c = t2, tries = 0;
                        uint64_t got;
                        uint32_t before, after;
                        int pending;
                        for (;;) {
                            before = value_at(a);
                            pending = posted_by(b) > posted_by(counted);
                            after = value_at(c);
                            if (!mtvm_systick_ambiguous(before, pending, after) || ++tries > 20u) {
                                break;
                            }
                            a = b = c = c + 1u;
                        }
                        /* one pending bit: at most one wrap since the handler ran */
                        if (reached_by(c) > posted_by(counted) + 1u) {
                            continue;
                        }
                        got = mtvm_systick_compose(posted_by(counted), before, pending, after,
                                                   RELOAD);
                        ++checked;
                        if (got < (uint64_t)t0 + 1u || got > (uint64_t)c + 1u) {
                            if (bad++ < 5u) {
                                printf("lag %u counted %u t0 %u t1 %u t2 %u -> %lu\n", lag,
                                       counted, t0, t1, t2, (unsigned long)got);
                            }
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
def test_timer_never_runs_backwards_across_thousands_of_wraps(models, tmp_path):
    """A SysTick period of 16384 ticks (0.65 ms) and 10^6 timer reads in rounds
    with interrupts masked (a wrap stays pending during a round), under
    -icount so that the emulator's timer is exact: no read runs backwards.
    (Before: one backward read per wrap, a whole period back.)"""
    need_qemu()
    proj = P.generate(models.get("small_cnn"), board="mps2-an386",
                      out_dir=str(tmp_path / "timer"), kind="standalone", progress=quiet)
    proj.run_command(["make", "-j2", "DEFINES=-DMTVM_SYSTICK_RELOAD=0x3FFFu "
                      "-DMTVM_TIMER_SELFCHECK_READS=1000000"], "make", progress=quiet)
    r = qemu.run_to_exit("mps2-an386", proj.path("build", "firmware.elf"), timeout=60,
                         icount=True)
    assert r.status == 0, r.output + r.stderr
    m = re.search(r"timer self-check: (\d+) of (\d+) reads ran backwards over (\d+) ticks",
                  r.output)
    assert m, r.output[-500:]
    backwards, reads, span = map(int, m.groups())
    assert reads == 1_000_000 and span > 20 * 16384
    assert backwards == 0, m.group(0)


@pytest.mark.device
def test_standalone_time_is_sane_every_run(models, tmp_path):
    """The standalone app as built, five runs without icount (the timer on the
    host's clock): every run prints a time that is positive and below a second.
    (Before: a negative time across a wrap, and 0 ticks when the emulator had
    not yet loaded the counter after reset.)"""
    need_qemu()
    proj = P.generate(models.get("small_cnn"), board="mps2-an386",
                      out_dir=str(tmp_path / "sane"), kind="standalone", progress=quiet)
    proj.build(progress=quiet)
    for _ in range(5):
        r = qemu.run_to_exit("mps2-an386", proj.path("build", "firmware.elf"), timeout=60)
        assert r.status == 0, r.output + r.stderr
        assert 0 < _sane_time(r.output) < 1_000_000
