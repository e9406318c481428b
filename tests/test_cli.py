"""The command line: exit codes, one-line errors, outputs."""
import subprocess
import sys

import numpy as np
import onnx

from mtvm.testing import make_model


def mtvm(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mtvm", *args], capture_output=True, text=True,
                          cwd=cwd)


def test_compile_writes_mlf_and_dumps_ir(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model("Relu", {"x": np.zeros((2, 3), np.float32)}), path)
    p = mtvm("compile", str(path), "-o", str(tmp_path / "out"), "--dump-ir", "--module-name", "kws")
    assert p.returncode == 0, p.stderr
    assert "Relu(%x)" in p.stdout and "arena" in p.stdout
    assert (tmp_path / "out/codegen/host/include/tvmgen_kws.h").exists()
    again = mtvm("compile", str(path), "-o", str(tmp_path / "out"))
    assert again.returncode == 1 and "not empty" in again.stderr


def test_errors_are_one_line_without_traceback(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("this is not protobuf")
    p = mtvm("compile", str(bad), "-o", str(tmp_path / "o"))
    assert p.returncode == 1
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1
    assert p.stderr.startswith("error: bad.onnx: not a valid ONNX model")
    v = mtvm("--verbose", "compile", str(bad), "-o", str(tmp_path / "o"))
    assert "Traceback" in v.stderr


def test_bad_input_shape_option(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model("Relu", {"x": np.zeros((2, 3), np.float32)}), path)
    p = mtvm("compile", str(path), "--input-shape", "x=1,2")
    assert p.returncode == 1 and "expected NAME:D1,D2" in p.stderr


def test_analyze(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model("Sigmoid", {"x": np.zeros((2, 3), np.float32)}), path)
    p = mtvm("analyze", str(path))
    assert p.returncode == 0 and "Sigmoid" in p.stdout and "MACs" in p.stdout


def test_compile_memory_table_and_io_in_workspace(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(make_model("Relu", {"x": np.zeros((2, 3), np.float32)}), path)
    p = mtvm("compile", str(path), "--memory", "--io-in-workspace")
    assert p.returncode == 0, p.stderr
    assert "live bytes" in p.stdout and "lower bound" in p.stdout
    assert "inputs/outputs in the arena" in p.stdout


# -- issue 11: the CLI behaves -----------------------------------------------------------------
import os  # noqa: E402
import pydoc  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402

import pytest  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "sensor_mlp.onnx")


@pytest.fixture(scope="module")
def host_project(tmp_path_factory):
    """The example model in a built host-driven project, without profiling."""
    d = tmp_path_factory.mktemp("cli") / "proj"
    for args in (("project", "generate", EXAMPLE, "--board", "host", "-o", str(d)),
                 ("project", "build", str(d))):
        p = mtvm(*args)
        assert p.returncode == 0, p.stderr
    return d


def test_version_and_verbose_after_the_subcommand(tmp_path):
    import mtvm as pkg
    p = mtvm("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"mtvm {pkg.__version__}"
    bad = tmp_path / "bad.onnx"
    bad.write_text("this is not protobuf")
    for args in (("compile", str(bad), "--verbose"), ("compile", "-v", str(bad)),
                 ("project", "build", str(tmp_path), "--verbose")):
        p = mtvm(*args)
        assert p.returncode == 1 and "Traceback" in p.stderr, (args, p.stderr)
    quiet = mtvm("project", "build", str(tmp_path))      # without it: one line
    assert quiet.returncode == 1 and quiet.stderr.count("\n") == 1


def test_help_of_the_package_lists_the_api():
    import mtvm as pkg
    text = pydoc.render_doc(pkg, renderer=pydoc.plaintext)
    for name in ("compile(", "CompiledModel", "Session", "project.generate", "MtvmError",
                 "mtvm ops"):
        assert name in text, name
    assert {"compile", "project", "Session", "MtvmError"} <= set(pkg.__all__)
    for name in pkg.__all__:
        assert getattr(pkg, name) is not None


def test_ops_lists_operators_and_the_unsupported_op_error_is_short(tmp_path):
    p = mtvm("ops")
    assert p.returncode == 0, p.stderr
    rows = {line.split()[0]: line.split()[1:] for line in p.stdout.splitlines()[2:-1]}
    assert rows["Conv"][:2] == ["ai.onnx", "11-" + rows["Conv"][1].split("-")[1]]
    assert rows["QLinearSoftmax"][0] == "com.microsoft"
    assert "GRU" in rows and "If" in rows and "QConv" not in rows   # mtvm's own kernels: not
    one = mtvm("ops", "gru")
    assert [line.split()[0] for line in one.stdout.splitlines()[2:-1]] == ["GRU"]
    h, f32 = onnx.helper, onnx.TensorProto.FLOAT
    node = h.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="com.example")
    m = h.make_model(h.make_graph([node], "g", [h.make_tensor_value_info("x", f32, [2])],
                                  [h.make_tensor_value_info("y", f32, [2])]),
                     opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.example", 1)])
    onnx.save(m, tmp_path / "m.onnx")
    e = mtvm("compile", str(tmp_path / "m.onnx"))
    assert e.returncode == 1 and e.stderr.count("\n") == 1 and len(e.stderr) < 200, e.stderr
    assert "`mtvm ops`" in e.stderr and "Frobnicate" in e.stderr


def test_bind_of_an_unknown_input_names_bind(tmp_path):
    np.save(tmp_path / "v.npy", np.zeros(2, np.float32))
    p = mtvm("compile", EXAMPLE, "--bind", f"foo={tmp_path / 'v.npy'}")
    assert p.returncode == 1
    assert '--bind names "foo", which is not an input (inputs: x)' in p.stderr, p.stderr
    assert "--input-shape" not in p.stderr


def test_analyze_reads_what_compile_writes(tmp_path, host_project):
    for out in ("m.tar", "mlf"):
        p = mtvm("compile", EXAMPLE, "-o", str(tmp_path / out))
        assert p.returncode == 0, p.stderr
    for target in (tmp_path / "m.tar", tmp_path / "mlf", host_project):
        a = mtvm("analyze", str(target))
        assert a.returncode == 0, (target, a.stderr)
        assert "Gemm" in a.stdout and "total 1,668 MACs" in a.stdout
    (tmp_path / "junk.tar").write_bytes(b"not a tar")
    bad = mtvm("analyze", str(tmp_path / "junk.tar"))
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert "not a tar written by mtvm compile" in bad.stderr


def _closed_stdout(*args):
    """`mtvm ARGS | head -0`: the reader of stdout has gone before mtvm writes."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "mtvm", *args], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    return p


def test_a_closed_pipe_is_quiet():
    for args in (("boards",), ("ops",), ("analyze", EXAMPLE)):
        p = _closed_stdout(*args)
        assert p.stderr == "", (args, p.stderr)
        assert p.returncode == 141, args


def test_run_refuses_session_options_on_a_standalone_project(tmp_path):
    d = tmp_path / "sa"
    p = mtvm("project", "generate", EXAMPLE, "--kind", "standalone", "-o", str(d))
    assert p.returncode == 0, p.stderr
    for args in (("--input", "x.npy"), ("--validate",), ("--benchmark", "5"), ("--profile",),
                 ("-o", "out.npz")):
        r = mtvm("run", str(d), *args)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, (args, r.stderr)
        assert "standalone project" in r.stderr and "prints its own outputs" in r.stderr
        assert args[0] in r.stderr


def test_profile_hint_is_the_cli_flag(host_project):
    p = mtvm("run", str(host_project), "--profile")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "`mtvm project generate MODEL -o DIR --profile`" in p.stderr, p.stderr


def test_ctrl_c_is_one_line_and_exit_130(host_project):
    # twice: while Python imports mtvm (a traceback before), and during a long benchmark
    for wait_for in ("numpy", "output probs"):
        # -X importtime shows when numpy is being imported; unbuffered stdout shows the
        # session's first lines at once
        trace = ["-X", "importtime"] if wait_for == "numpy" else []
        p = subprocess.Popen([sys.executable, *trace, "-m", "mtvm", "run", str(host_project),
                              "--benchmark", "100000000"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
        stream = p.stderr if wait_for == "numpy" else p.stdout
        seen = ""
        while wait_for not in seen:
            # the raw descriptor: a buffered readline could hold the awaited line in its
            # buffer while select() waits on the empty pipe
            ready, _, _ = select.select([stream], [], [], 60)
            chunk = os.read(stream.fileno(), 65536).decode(errors="replace") if ready else ""
            assert chunk, f"no {wait_for!r} from mtvm run: {seen[-500:]}"
            seen += chunk
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        err = "\n".join(line for line in err.splitlines() if not line.startswith("import time:"))
        assert p.returncode == 130, (wait_for, err)
        assert err.strip() == "mtvm: interrupted", (wait_for, err)


def test_an_interrupt_another_error_swallowed_is_still_an_interrupt(monkeypatch, capsys):
    """A Ctrl-C that C code turned into another error (numpy's extension, interrupted
    while it imports datetime, raises ImportError) is still reported as the interrupt:
    one line and exit 130, where it printed numpy's traceback. And main() puts Python's
    handler back."""
    import threading
    import time

    from mtvm import cli
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are the main thread's")

    def interrupted_import():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)   # (the handler raises at once)
        except KeyboardInterrupt:
            raise ImportError("PyCapsule_Import could not import module \"datetime\"")
        raise AssertionError("no interrupt")
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        monkeypatch.setattr(cli, "build_parser", interrupted_import)
        assert cli.main(["run"]) == 130
        assert capsys.readouterr().err == "mtvm: interrupted\n"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        # and an ImportError with no interrupt is not one: a fault of mtvm's own, in
        # one line (exit 2) that says how to get the traceback, which --verbose raises
        monkeypatch.setattr(cli, "build_parser", lambda: (_ for _ in ()).throw(ImportError("x")))
        assert cli.main(["run"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "(ImportError: x)" in err and "--verbose" in err
        with pytest.raises(ImportError):
            cli.main(["run", "--verbose"])
    finally:
        signal.signal(signal.SIGINT, before)


def test_an_error_naming_a_hostile_node_stays_one_line(tmp_path):
    """A node name holding newlines and escape sequences is shown escaped: the
    error is still one line of printable text."""
    h, f32 = onnx.helper, onnx.TensorProto.FLOAT
    node = h.make_node("Frobnicate", ["x"], ["y"], name="a\nerror: forged\r\x1b[2Jb",
                       domain="com.example")
    m = h.make_model(h.make_graph([node], "g", [h.make_tensor_value_info("x", f32, [2])],
                                  [h.make_tensor_value_info("y", f32, [2])]),
                     opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.example", 1)])
    onnx.save(m, tmp_path / "m.onnx")
    e = mtvm("compile", str(tmp_path / "m.onnx"))
    assert e.returncode == 1 and e.stderr.count("\n") == 1, e.stderr
    assert e.stderr.rstrip("\n").isprintable() and "\\n" in e.stderr
