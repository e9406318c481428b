"""Generating a project never deletes or overwrites what mtvm did not write.

Before: `mtvm project generate -o DIR --force` ran rmtree(DIR) -- the user's
sources, .git, the model itself when it sat in DIR, the current directory
with `-o .` -- and `-o` naming a file, a dangling symlink or a path under a
file ended in a traceback. Now regeneration replaces only the files of the
manifest (.mtvm-manifest.json) that nobody changed and reports the rest."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import mtvm
from mtvm.cli import main as cli
from mtvm.errors import MtvmError

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "sensor_mlp.onnx")


def quiet(msg):
    pass


def test_force_keeps_the_users_files_and_edits(tmp_path):
    d = tmp_path / "p"
    p = mtvm.project.generate(EXAMPLE, out_dir=d, progress=quiet)
    manifest = json.loads((d / ".mtvm-manifest.json").read_text())["files"]
    assert "src/main.c" in manifest and "model/metadata.json" in manifest
    (d / ".git").mkdir()
    (d / ".git" / "config").write_text("[core]\n")
    (d / "notes.md").write_text("mine")
    (d / "src" / "my_sensor.c").write_text("int sensor;\n")
    main_c = d / "src" / "main.c"
    main_c.write_text(main_c.read_text() + "/* my change */\n")
    (d / "build").mkdir(exist_ok=True)
    (d / "build" / "stale.o").write_text("x")
    desc = d / "src" / "mtvm_model_desc.c"
    desc.write_text("stale but unedited?")     # edited too: must be kept
    lines = []
    p2 = mtvm.project.generate(EXAMPLE, out_dir=d, force=True, progress=lines.append)
    assert (d / ".git" / "config").read_text() == "[core]\n"
    assert (d / "notes.md").read_text() == "mine"
    assert (d / "src" / "my_sensor.c").read_text() == "int sensor;\n"
    assert main_c.read_text().endswith("/* my change */\n")
    assert desc.read_text() == "stale but unedited?"
    assert not (d / "build").exists()                    # build output: mtvm's
    assert sorted(p2.kept_files) == ["src/main.c", "src/mtvm_model_desc.c"]
    said = "\n".join(lines)
    assert "kept 2 file(s)" in said and "src/main.c" in said and "--overwrite-edited" in said
    # asked to: the edited files are replaced, the user's own files still stay
    p3 = mtvm.project.generate(EXAMPLE, out_dir=d, force=True, overwrite_edited=True,
                               progress=quiet)
    assert p3.kept_files == []
    assert "/* my change */" not in main_c.read_text()
    assert desc.read_text() != "stale but unedited?"
    assert (d / "notes.md").read_text() == "mine" and (d / ".git" / "config").exists()


def test_regenerating_removes_only_unedited_stale_files(tmp_path):
    d = tmp_path / "p"
    mtvm.project.generate(EXAMPLE, out_dir=d, kind="standalone", progress=quiet)
    sample = d / "src" / "mtvm_sample.c"
    assert sample.exists()
    p = mtvm.project.generate(EXAMPLE, out_dir=d, kind="host-driven", force=True,
                              progress=quiet)
    assert p.kind == "host-driven" and not sample.exists()       # mtvm's, unchanged
    mtvm.project.generate(EXAMPLE, out_dir=d, kind="standalone", force=True, progress=quiet)
    sample.write_text(sample.read_text() + "/* tuned */\n")
    p = mtvm.project.generate(EXAMPLE, out_dir=d, kind="host-driven", force=True,
                              progress=quiet)
    assert sample.read_text().endswith("/* tuned */\n") and p.kept_files == ["src/mtvm_sample.c"]
    p.build(progress=quiet)           # the kept file does not break the build (wildcard)


def test_refuses_directories_it_must_not_write(tmp_path, monkeypatch):
    model_dir = tmp_path / "work"
    model_dir.mkdir()
    model = model_dir / "m.onnx"
    shutil.copy(EXAMPLE, model)
    (model_dir / "src.c").write_text("mine")
    with pytest.raises(MtvmError, match="contains .*m.onnx"):
        mtvm.project.generate(model, out_dir=model_dir, force=True, progress=quiet)
    monkeypatch.chdir(model_dir)
    for out in (".", str(tmp_path)):              # the current directory, a parent of it
        with pytest.raises(MtvmError, match="current directory or one of its parents"):
            mtvm.project.generate(EXAMPLE, out_dir=out, force=True, progress=quiet)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("x")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path / "work")
    with pytest.raises(MtvmError, match="refusing"):
        mtvm.project.generate(EXAMPLE, out_dir=home, force=True, progress=quiet)
    assert sorted(os.listdir(model_dir)) == ["m.onnx", "src.c"]
    assert os.listdir(home) == [".bashrc"]
    # a non-empty directory that is not a project: refused without --force
    other = tmp_path / "other"
    other.mkdir()
    (other / "Makefile").write_text("all:\n")
    with pytest.raises(MtvmError, match="not empty and not an mtvm project"):
        mtvm.project.generate(EXAMPLE, out_dir=other, progress=quiet)
    p = mtvm.project.generate(EXAMPLE, out_dir=other, force=True, progress=quiet)
    assert (other / "Makefile").read_text() == "all:\n" and p.kept_files == ["Makefile"]
    # never mtvm's: kept even when edited generated files are to be replaced
    p = mtvm.project.generate(EXAMPLE, out_dir=other, force=True, overwrite_edited=True,
                              progress=quiet)
    assert (other / "Makefile").read_text() == "all:\n" and p.kept_files == ["Makefile"]


def _cli_error(args, capsys) -> str:
    assert cli(args) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize("command", ["project", "compile"])
def test_bad_output_paths_are_one_line(tmp_path, capsys, command):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    dangling = tmp_path / "dangling"
    os.symlink(tmp_path / "missing", dangling)
    cases = {str(a_file): "exists and is not a directory",
             str(dangling): "symbolic link",
             str(a_file / "sub" / "dir"): "which is a file"}
    for out, words in cases.items():
        args = (["project", "generate", EXAMPLE, "-o", out] if command == "project"
                else ["compile", EXAMPLE, "-o", out])
        assert words in _cli_error(args, capsys)
    if command == "compile":
        assert "under" in _cli_error(["compile", EXAMPLE, "-o", str(a_file / "m.tar")], capsys)
        (tmp_path / "d.tar").mkdir()
        assert "is a directory" in _cli_error(["compile", EXAMPLE, "-o",
                                               str(tmp_path / "d.tar")], capsys)
    assert a_file.read_text() == "x" and os.path.islink(dangling)


def test_cli_force_reports_kept_files(tmp_path):
    d = str(tmp_path / "p")
    run = [sys.executable, "-m", "mtvm", "project", "generate", EXAMPLE, "-o", d]
    assert subprocess.run(run, capture_output=True).returncode == 0
    with open(os.path.join(d, "src", "main.c"), "a") as f:
        f.write("/* mine */\n")
    r = subprocess.run(run + ["--force"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "kept 1 file(s)" in r.stderr and "src/main.c" in r.stderr
    r = subprocess.run(run + ["--force", "--overwrite-edited"], capture_output=True, text=True)
    assert r.returncode == 0 and "kept 1 file" not in r.stderr
    with open(os.path.join(d, "src", "main.c")) as f:
        assert "/* mine */" not in f.read()
