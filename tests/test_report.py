"""`mtvm analyze --report DIR`: the HTML report of kws_dscnn_int8 on
nucleo-l4r5zi (its numbers, its figures, rendered by headless Chromium), a
profile saved by `mtvm run --profile-json` in the report, and the one-line
hint without matplotlib."""
import base64
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from mtvm.cli import main as cli
from mtvm.testing import models_dir

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "sensor_mlp.onnx")
KWS = os.path.join(models_dir(), "kws_dscnn_int8.onnx")
BOARD = "nucleo-l4r5zi"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

matplotlib = pytest.importorskip("matplotlib", reason="mtvm[report] not installed")


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def kws_report(tmp_path_factory):
    if not os.path.exists(KWS):
        pytest.skip(f"{KWS} not found")
    out = str(tmp_path_factory.mktemp("report") / "kws-report")
    assert cli(["analyze", KWS, "--board", BOARD, "--report", out]) == 0
    return out


def test_report_files_and_numbers(kws_report):
    import mtvm
    files = set(os.listdir(kws_report))
    assert {"report.html", "report.json", "timeline.png", "budgets.png", "macs.png"} <= files
    for png in ("timeline.png", "budgets.png", "macs.png"):
        with open(os.path.join(kws_report, png), "rb") as f:
            assert f.read(8) == PNG_MAGIC
    with open(os.path.join(kws_report, "report.json")) as f:
        rep = json.load(f)
    md = mtvm.compile(KWS, target="cortex-m4").metadata
    # the timeline's peak is the arena: the plan's live bytes at every kernel, by tensor
    assert rep["timeline"]["peak"] == md["workspace_bytes"] == rep["workspace_bytes"]
    assert rep["timeline"]["totals"] == [o["live_bytes"] for o in md["operators"]]
    assert "(not attributed)" not in rep["timeline"]["series"]
    assert len(rep["timeline"]["series"]) > 2          # stacked by tensor
    # budgets against the board's files: 2 MiB flash, 640 KiB RAM, its stack
    b = rep["budgets"]
    assert (b["flash_size"], b["ram_size"]) == (2 << 20, 640 << 10)
    items = {name: n for name, n, _ in b["flash"] + b["ram"]}
    assert items["weights"] == md["constant_bytes"] and items["arena"] == md["workspace_bytes"]
    assert items["stack"] == 8192
    if shutil.which("arm-none-eabi-gcc"):
        assert 1000 < items["model code"] < 100_000 and items["runtime code"] > 1000
    rows = rep["layers"]
    assert [r["kind"] for r in rows] == [o["kind"] for o in md["operators"]]
    assert sum(r["macs"] for r in rows) == md["total_macs"]
    assert rows[1]["params"] > 0 and rows[1]["outputs"]
    # the page: self-contained, every figure embedded
    with open(os.path.join(kws_report, "report.html"), encoding="utf-8") as f:
        page = f.read()
    imgs = re.findall(r'<figure id="(\w+)"><img alt="[^"]*" src="data:image/png;base64,([^"]+)"',
                      page)
    assert [i for i, _ in imgs] == ["timeline", "budgets", "macs"]
    for _, data in imgs:
        assert base64.b64decode(data)[:8] == PNG_MAGIC
    assert not re.search(r'(src|href)="(https?:)?//', page), "the page fetches something"
    assert "Execution order" in page and "/f/f.0/Conv" in page


def test_report_renders_in_headless_chromium(kws_report, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium not installed (apt-get install chromium)")
    # the report plus a probe that writes, once loaded, each image's decoded size
    with open(os.path.join(kws_report, "report.html"), encoding="utf-8") as f:
        page = f.read()
    probe = ("<script>window.addEventListener('load', function () {"
             "var out = []; document.querySelectorAll('figure img').forEach(function (i) {"
             "out.push(i.parentNode.id + ':' + i.naturalWidth + 'x' + i.naturalHeight); });"
             "var p = document.createElement('pre'); p.id = 'probe';"
             "p.textContent = out.join(' '); document.body.appendChild(p); });</script>")
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", probe + "</body>"), encoding="utf-8")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([browser, *flags, "--virtual-time-budget=5000", "--dump-dom",
                          probed.as_uri()], capture_output=True, text=True, timeout=60)
    m = re.search(r'<pre id="probe">([^<]*)</pre>', dom.stdout)
    assert m, f"no probe in the DOM Chromium rendered: {dom.stderr[-500:]}"
    sizes = dict(item.split(":") for item in m.group(1).split())
    assert set(sizes) == {"timeline", "budgets", "macs"}
    for fig, wh in sizes.items():
        w, h = (int(v) for v in wh.split("x"))
        assert w > 300 and h > 200, f"figure {fig} did not decode: {wh}"
    shot = tmp_path / "shot.png"
    subprocess.run([browser, *flags, "--window-size=1280,1600", f"--screenshot={shot}",
                    (tmp_path / "probed.html").as_uri()], capture_output=True, timeout=60)
    assert shot.exists(), "Chromium wrote no screenshot"
    img = matplotlib.image.imread(str(shot))            # floats in [0, 1], RGB(A)
    rgb = np.asarray(img)[..., :3]
    assert rgb.shape[0] >= 1000 and rgb.shape[1] >= 1000
    non_white = np.mean(np.any(rgb < 0.9, axis=-1))
    colourful = np.mean(np.ptp(rgb, axis=-1) > 0.15)     # the figures' coloured bars
    assert non_white > 0.03, f"screenshot almost blank ({non_white:.1%} non-white)"
    assert colourful > 0.005, f"no coloured figure in the screenshot ({colourful:.2%})"


def test_report_with_a_saved_profile(tmp_path, capsys):
    d = str(tmp_path / "proj")
    assert cli(["project", "generate", EXAMPLE, "--board", "host", "-o", d, "--profile"]) == 0
    assert cli(["project", "build", d]) == 0
    prof, plot = str(tmp_path / "prof.json"), str(tmp_path / "prof.png")
    assert cli(["run", d, "--profile", "3", "--profile-json", prof, "--profile-plot", plot]) == 0
    with open(plot, "rb") as f:          # the bar chart of `mtvm run --profile`
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(prof) as f:
        p = json.load(f)
    assert p["runs"] == 3 and p["kernels"] and all(k["ticks"] >= 0 for k in p["kernels"])
    out = str(tmp_path / "rep")
    assert cli(["analyze", EXAMPLE, "--board", "host", "--report", out,
                "--profile-json", prof]) == 0
    assert os.path.exists(os.path.join(out, "time.png"))
    with open(os.path.join(out, "report.json")) as f:
        rows = json.load(f)["layers"]
    assert [r["ticks"] for r in rows] == [k["ticks"] for k in p["kernels"]]
    with open(os.path.join(out, "report.html"), encoding="utf-8") as f:
        assert '<figure id="time">' in f.read()
    capsys.readouterr()
    assert cli(["run", d, "--profile-json", prof]) == 1
    assert "give --profile too" in capsys.readouterr().err
    assert cli(["run", d, "--profile-plot", plot]) == 1
    assert "--profile-plot saves what --profile measures" in capsys.readouterr().err


def test_without_matplotlib_one_line_and_the_summary_still_works(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from mtvm.cli import main\n"
            f"sys.exit(main(sys.argv[1:]))\n")
    run = lambda *a: subprocess.run([sys.executable, "-c", code, *a],  # noqa: E731
                                    capture_output=True, text=True)
    p = run("analyze", EXAMPLE, "--report", str(tmp_path / "r"))
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert "pip install mtvm[report]" in p.stderr
    assert not (tmp_path / "r").exists()
    p = run("analyze", EXAMPLE)
    assert p.returncode == 0 and "MACs" in p.stdout, p.stderr


def test_report_time_from_tuning_records(tmp_path, capsys):
    """Without a profile, `analyze --report --tuning-records` shows each layer's time as
    `mtvm tune` measured its chosen candidate (here on the host board, 2 trials)."""
    import mtvm
    from mtvm.report.data import profile_from_records
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_schedules import two_convs
    model, _ = two_convs()
    path = str(tmp_path / "two_convs.onnx")
    import onnx
    onnx.save(model, path)
    recs = str(tmp_path / "recs.jsonl")
    mtvm.tune(path, board="host", records=recs, trials=2, progress=False,
              workdir=str(tmp_path / "work"))
    md = mtvm.compile(path, target="host", tuning_records=recs).metadata
    prof = profile_from_records(md, recs)
    timed = {k["index"] for k in prof["kernels"]}
    assert timed and timed <= {o["index"] for o in md["operators"]}
    assert all(k["ticks"] > 0 for k in prof["kernels"]) and prof["unit"] == "ticks"
    out = str(tmp_path / "rep")
    assert cli(["analyze", path, "--board", "host", "--target", "host", "--report", out,
                "--tuning-records", recs]) == 0
    assert os.path.exists(os.path.join(out, "time.png"))
    with open(os.path.join(out, "report.json")) as f:
        rows = json.load(f)["layers"]
    assert {r["index"] for r in rows if r.get("ticks")} == timed
