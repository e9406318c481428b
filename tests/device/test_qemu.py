"""Firmware running on the emulated boards: the standalone app's printed
outputs, host-driven sessions over the QEMU UART pty (pyserial, as with a USB
port), instruction counts under -icount, and the emulator's lifecycle."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import mtvm.project as P
from mtvm.boards import load_board
from mtvm.errors import MtvmError
from mtvm.firmware import qemu

from device_utils import need_qemu, quiet, tolerance

pytestmark = pytest.mark.device


def build_project(models, projects_dir, model, board, kind="host-driven", sample=None):
    need_qemu()
    out = os.path.join(projects_dir, f"{model}-{board}-{kind}")
    if os.path.exists(os.path.join(out, "build", "firmware.elf")):
        return P.load(out)
    proj = P.generate(models.get(model), board=board, out_dir=out, kind=kind, sample=sample,
                      progress=quiet)
    proj.build(progress=quiet)
    return proj


def parse_standalone(text: str) -> dict:
    outs = {}
    for m in re.finditer(r"^output (\d+) (\S+) (\w+)\[[\d,]*\]: (.*)$", text, re.M):
        outs[m.group(2)] = np.array([float(v) for v in m.group(4).split()], dtype=np.float32)
    return outs


@pytest.mark.parametrize("board", ["mps2-an386", "netduinoplus2"])
def test_standalone_kws_prints_the_reference(board, models, projects_dir):
    x, ref = models.reference("kws_dscnn")
    proj = build_project(models, projects_dir, "kws_dscnn", board, "standalone", sample=[x])
    b = load_board(board)
    r = qemu.run_to_exit(b.qemu_machine, proj.path("build", "firmware.elf"), timeout=120)
    assert r.status == 0, f"exit status {r.status}\n{r.output}\n{r.stderr}"
    assert "mtvm standalone: done (status 0)" in r.output
    assert re.search(r"time per inference: \S+ us \(\d+ ticks at \d+ Hz\)", r.output)
    y = parse_standalone(r.output)["output"]
    assert np.abs(y - ref.ravel()).max() <= tolerance(ref)
    used, reserve = map(int, re.search(r"stack: (\d+) of (\d+) bytes used", r.output).groups())
    assert 0 < used < reserve == b.stack_bytes


def session_check(proj, model, models):
    x, ref = models.reference(model)
    proj.flash(progress=quiet)
    try:
        with proj.session() as s:
            info = s.info()
            assert info.board == proj.board["name"]
            y = list(s.executor.run([x]).values())[0]
            assert s.stats["bad_packets"] == 0
    finally:
        proj.stop()
    assert y.shape == ref.shape
    err = float(np.abs(y - ref).max())
    assert err <= tolerance(ref), f"{model} on {proj.board['name']}: max abs err {err}"


@pytest.mark.parametrize("model", ["kws_dscnn", "ad_autoencoder", "ic_resnet8",
                                   "vww_mobilenetv1", "har_cnn1d", "kws_crnn", "kwt_tiny",
                                   "lstm_forecast", "fomo_mbv2", "denoise_unet"])
def test_float_models_on_an386(model, models, projects_dir):
    session_check(build_project(models, projects_dir, model, "mps2-an386"), model, models)


@pytest.mark.parametrize("board", ["mps2-an385", "mps2-an500", "mps3-an547", "netduinoplus2"])
def test_kws_on_other_emulated_boards(board, models, projects_dir):
    session_check(build_project(models, projects_dir, "kws_dscnn", board), "kws_dscnn", models)


def run_once(proj, x) -> np.ndarray:
    """Flash (start the emulator), run x once over the serial session, stop: the
    first output."""
    proj.flash(progress=quiet)
    try:
        with proj.session() as s:
            return list(s.executor.run([x]).values())[0]
    finally:
        proj.stop()


def test_int8_kws_on_netduinoplus2_is_bit_identical_to_the_host(models, projects_dir):
    proj = build_project(models, projects_dir, "kws_dscnn_int8", "netduinoplus2")
    x, ref = models.reference("kws_dscnn_int8")
    host = list(models.get("kws_dscnn_int8").run_host([x]).values())[0]
    y = run_once(proj, x)
    np.testing.assert_array_equal(y, host)
    assert np.abs(y - ref).max() <= 1.5 / 255       # within one output step of onnxruntime


def test_icount_benchmark_counts_instructions(models, projects_dir):
    proj = build_project(models, projects_dir, "kws_dscnn", "mps2-an386")
    x, _ = models.reference("kws_dscnn")
    proj.template.flash(proj, quiet, icount=True)
    try:
        with proj.session() as s:
            s.executor.run([x])
            a = s.executor.benchmark(number=2, repeat=2)
            b = s.executor.benchmark(number=1, repeat=1)
        note = proj.template.timing(proj, a)
        # the CLI path: `mtvm run DIR --benchmark N` on the same running emulator
        cli = subprocess.run([sys.executable, "-m", "mtvm", "run", proj.dir, "--benchmark", "1",
                              "--repeat", "1"], capture_output=True, text=True, timeout=120)
    finally:
        proj.stop()
    n = proj.template.instructions_per_inference(a)
    # a 1-run and a 2-run figure agree within a few 40-instruction SysTick ticks of
    # the per-call overhead (one CI run saw 110 instructions apart)
    assert proj.template.instructions_per_inference(b) == pytest.approx(n, abs=400)
    assert max(a.per_repeat) - min(a.per_repeat) < 1e-6          # deterministic
    macs = proj.metadata["total_macs"]
    assert macs < n < 40 * macs, f"{n} instructions for {macs} MACs"
    assert f"{n:,} instructions per inference" in note
    assert cli.returncode == 0, cli.stderr
    assert "icount" in cli.stdout and "instructions per inference" in cli.stdout


def test_standalone_timer_calibration_under_icount(models, projects_dir):
    """The standalone app times a loop of a known instruction count after the model;
    under -icount shift=0 with the 25 MHz SysTick that is 40 instructions per tick."""
    x, _ = models.reference("kws_dscnn")
    proj = build_project(models, projects_dir, "kws_dscnn", "mps2-an386", "standalone",
                         sample=[x])
    r = proj.template.run_standalone(proj, icount=True)
    m = re.search(r"timer calibration: (\d+) instructions in (\d+) ticks at (\d+) Hz", r.stdout)
    assert m, r.stdout[-500:]
    n, ticks, hz = map(int, m.groups())
    assert (n, hz) == (2_000_000, 25_000_000)
    assert n / ticks == pytest.approx(1e9 / hz, rel=1e-3)


def test_device_reset_is_detected_over_the_serial_link(models, projects_dir):
    from mtvm.session.errors import DeviceReset
    proj = build_project(models, projects_dir, "kws_dscnn", "mps2-an386")
    x, ref = models.reference("kws_dscnn")
    proj.flash(progress=quiet)
    try:
        with proj.session() as s:
            s.executor.run([x])
            qemu.monitor_command(proj.path("build", "qemu.json"), "system_reset")
            with pytest.raises(DeviceReset):
                s.executor.run([x])
            s.reconnect()                                  # explicit: the only way on
            y = list(s.executor.run([x]).values())[0]
    finally:
        proj.stop()
    assert np.abs(y - ref).max() <= tolerance(ref)


def test_flash_records_pty_and_stop_ends_qemu(models, projects_dir):
    proj = build_project(models, projects_dir, "kws_dscnn", "mps2-an386")
    inst = proj.template.flash(proj, quiet)
    try:
        state = qemu.load_state(proj.path("build", "qemu.json"))
        assert state.pid == inst.pid and os.path.exists(state.pty) and state.alive()
        assert not state.icount
        # a second flash replaces the first emulator instead of leaking it
        inst2 = proj.template.flash(proj, quiet)
        assert inst2.pid != inst.pid and not qemu._pid_is(inst.pid, inst.elf)
        t = proj.open_transport()
        t.close()
    finally:
        proj.stop()
    assert not qemu._pid_is(inst2.pid, inst2.elf)
    assert not os.path.exists(proj.path("build", "qemu.json"))
    with pytest.raises(MtvmError, match="not running"):
        proj.open_transport()


def test_standalone_project_runs_through_the_cli(models, projects_dir):
    x, ref = models.reference("kws_dscnn")
    proj = build_project(models, projects_dir, "kws_dscnn", "mps2-an386", "standalone",
                         sample=[x])
    with pytest.raises(MtvmError, match="standalone"):
        proj.open_transport()
    cli = subprocess.run([sys.executable, "-m", "mtvm", "run", proj.dir], capture_output=True,
                         text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    y = parse_standalone(cli.stdout)["output"]
    assert np.abs(y - ref.ravel()).max() <= tolerance(ref)


@pytest.mark.parametrize("model", ["kws_dscnn_int8", "ad_autoencoder_int8", "ic_resnet8_int8",
                                   "vww_mobilenetv1_int8"])
def test_int8_models_on_an386(model, models, projects_dir):
    """The integer kernels' DSP path on the M4: the same bytes as the host build's portable
    path, and within one output quantization step of onnxruntime."""
    from mtvm.cli.run_cmd import dequantize_steps
    proj = build_project(models, projects_dir, model, "mps2-an386")
    x, ref = models.reference(model)
    host = list(models.get(model).run_host([x]).values())[0]
    y = run_once(proj, x)
    np.testing.assert_array_equal(y, host)
    step = max(dequantize_steps(models.path(model)).values())
    assert np.abs(y - ref).max() <= step * 1.001, f"{model}: more than one step ({step}) off"
