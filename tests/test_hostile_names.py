"""Names from a model or a user never become code.

A conv/relu/add model whose graph, node, tensor, input and output names are
hostile (a comment that closes itself and declares a constructor, a string
that closes itself, a trailing backslash, trigraphs, newlines, `$(shell ...)`,
non-ASCII, empty, very long, C keywords, names that differ only in what the
sanitizer drops) is compiled, built with -Werror, run in process and as a host
project; none of the injected code runs (it would create a marker file), the
results are right and metadata.json keeps the original names. Then the
functions of mtvm.codegen.names, property-based.
"""
import json
import os
import re
import shutil
import string
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper

import mtvm
import mtvm.project
from mtvm.codegen import names
from mtvm.errors import MtvmError
from mtvm.testing import assert_close, reference_outputs


def quiet(msg):
    pass


def attacks(marker: str) -> dict:
    """Strings that would run `touch marker` if written into C, a Makefile or a
    linker script unescaped, each aimed at one context."""
    touch = f'extern int system(const char*); system("touch {marker}");'
    ctor = f"__attribute__((constructor)) static void mtvm_pwn(void) {{ {touch} }}"
    return {
        "comment": f"*/ {ctor} /*",                                 # /* ... */
        "comment_nl": f"x\n*/ {ctor}\n/* y",
        "splice": f"*??/\n/ {ctor} /*",                             # ??/ = backslash-newline
        "string": f'"; {ctor} static const char* mtvm_s = "',       # "..."
        "make": f"m\n$(shell touch {marker})\nall:\n\ttouch {marker}\n",  # Makefile lines
        "backslash": "name\\",                                      # splices the next line
        "trigraph": "??/",
    }


def hostile_model(marker: str):
    """y_add = Add(Relu(Conv(x, W, b)), z); y_sig = Sigmoid(w): every name hostile."""
    a = attacks(marker)
    long_name = "L" * 5000 + a["comment"]
    x, z, w = a["comment"], "é中文", "workspace"         # inputs
    y_relu, y_add, y_sig = "out.1", "out_1", "int"        # outputs (.1 and _1 collide)
    conv_out = a["backslash"]
    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    nodes = [
        helper.make_node("Conv", [x, long_name, a["trigraph"]], [conv_out], name=a["splice"],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", [conv_out], [y_relu], name=a["string"]),
        helper.make_node("Add", [y_relu, z], [y_add], name=a["make"]),
        helper.make_node("Sigmoid", [w], [y_sig], name=""),
    ]
    shape = [1, 3, 5, 5]
    g = helper.make_graph(
        nodes, a["comment_nl"] + a["make"] + "??/",
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 2, 5, 5]),
         helper.make_tensor_value_info(z, TensorProto.FLOAT, shape),
         helper.make_tensor_value_info(w, TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
         for n, s in ((y_relu, shape), (y_add, shape), (y_sig, [4]))],
        [numpy_helper.from_array(W, long_name), numpy_helper.from_array(b, a["trigraph"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    inputs = {x: rng.standard_normal((1, 2, 5, 5)).astype(np.float32),
              z: rng.standard_normal(shape).astype(np.float32),
              w: rng.standard_normal(4).astype(np.float32)}
    return m, inputs


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    marker = str(d / "INJECTED")
    m, inputs = hostile_model(marker)
    module = attacks(marker)["make"]          # --module-name is a user string too
    cm = mtvm.compile(m, module_name=module)
    return cm, m, inputs, marker, d


def test_injected_code_never_runs_and_results_are_right(hostile):
    cm, m, inputs, marker, _ = hostile
    got = cm.run_host(inputs)                 # -std=c99 -Wall -Wextra -Werror, in process
    assert not os.path.exists(marker)
    assert list(got) == [o.name for o in m.graph.output]
    for (name, a), e in zip(got.items(), reference_outputs(m, inputs)):
        assert_close(a, e, what=name)


@pytest.mark.parametrize("kind", ["comment", "comment_nl", "splice"])
def test_a_constructor_in_a_node_name_does_not_run(kind, tmp_path):
    """The issue's report: ASCII names only, so nothing but the escaping is tested."""
    marker = str(tmp_path / "INJECTED")
    evil = attacks(marker)[kind]
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name=evil)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    cm = mtvm.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    x = np.array([-1, 2, -3, 4], np.float32)
    np.testing.assert_array_equal(cm.run_host({"x": x})["y"], np.maximum(x, 0))
    assert not os.path.exists(marker)


def test_generated_files_are_ascii_and_names_stay_data(hostile):
    cm, m, _, _, _ = hostile
    for rel, text in cm.files().items():
        if rel.endswith((".c", ".h")):
            assert text.isascii(), rel
            code, _ = _lex(text)
            assert "mtvm_pwn" not in code and "system" not in code, rel
    h = cm.sources[f"codegen/host/include/tvmgen_{cm.module_name}.h"]
    members = re.findall(r"^    void\* (\w+);", h, re.M)
    assert re.fullmatch(r"t_+attribute_+constructor_+static_[0-9a-f]{8}", members[0])
    assert members[1:] == ["u00e9u4e2du6587", "workspace_1", "out_1", "out_1_1", "int_"]
    sizes = re.findall(r"#define (TVMGEN_\w+_SIZE) ", h)
    assert len(sizes) == len(set(sizes)) == 7  # six tensors and the workspace, all distinct
    assert re.fullmatch(r"[a-z][a-z0-9_]*", cm.module_name)


def test_metadata_and_ir_keep_the_original_names(hostile):
    cm, m, _, _, d = hostile
    out = cm.export(d / "mlf")
    md = json.loads((d / "mlf" / "metadata.json").read_text())
    assert [t["name"] for t in md["inputs"]] == [i.name for i in m.graph.input]
    assert [t["name"] for t in md["outputs"]] == [o.name for o in m.graph.output]
    assert md["model_name"] == m.graph.name
    assert [t["c_name"] for t in md["inputs"] + md["outputs"]] == re.findall(
        r"^    void\* (\w+);", cm.sources[f"codegen/host/include/tvmgen_{cm.module_name}.h"],
        re.M)
    assert any(m.graph.node[0].name in op["nodes"] for op in md["operators"])
    ir = (d / "mlf" / "src" / f"{cm.module_name}.ir.txt").read_text()
    lines = ir.splitlines()
    assert ir.isascii() or set(ir) - set(map(chr, range(128))) == {"\u2937"}   # the tail arrow
    assert all(ln.startswith(("graph ", "  ", "}")) for ln in lines), ir
    assert len(lines) == 1 + 3 + 1 + sum(1 + len(n.tail) for n in cm.graph.nodes) + 3 + 1
    assert os.path.isdir(out)


def test_c_is_warning_free_under_strict_flags_and_cpp(hostile, tmp_path):
    """-trigraphs -Wtrigraphs -Wcomment -pedantic and GNU mode (where `linux`
    is a macro); the header from C++ as well."""
    cm = hostile[0]
    cm.export(tmp_path / "mlf")
    src = tmp_path / "mlf" / "codegen" / "host" / "src"
    inc = tmp_path / "mlf" / "codegen" / "host" / "include"
    cc = os.environ.get("CC", "cc")
    for std in ("-std=c99", "-std=gnu11"):
        for c in sorted(src.glob("*.c")):
            subprocess.run([cc, std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-trigraphs",
                            "-Wtrigraphs", "-Wcomment", "-fsyntax-only", f"-I{inc}", f"-I{src}",
                            str(c)], check=True, capture_output=True, text=True)
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx:
        t = tmp_path / "use.cpp"
        t.write_text(f'#include "tvmgen_{cm.module_name}.h"\nint main() {{ return 0; }}\n')
        subprocess.run([cxx, "-Wall", "-Wextra", "-Werror", "-fsyntax-only", f"-I{inc}", str(t)],
                       check=True, capture_output=True, text=True)


def test_host_project_builds_and_runs(hostile):
    cm, m, inputs, marker, d = hostile
    proj = mtvm.project.generate(cm, board="host", out_dir=d / "proj", progress=quiet)
    for rel in ("Makefile", "src/main.c", "src/mtvm_model_desc.c"):
        text = open(proj.path(rel), encoding="utf-8").read()
        assert text.isascii(), rel
    makefile = open(proj.path("Makefile")).read()
    assert "$(shell" not in makefile and "\ttouch" not in makefile
    assert [ln for ln in makefile.splitlines() if ln.startswith("#")] == \
        [ln for ln in makefile.splitlines()[:3]]      # the model name stays in line 1's comment
    proj.build(progress=quiet)
    assert not os.path.exists(marker)
    with proj.session() as sess:
        info = sess.info()
        assert [t.name for t in info.inputs] == [i.name for i in m.graph.input]
        # (the runtime cuts a long name to what its INFO reply holds)
        assert info.model_name and cm.metadata["model_name"].startswith(info.model_name)
        got = sess.executor.run([inputs[i.name] for i in m.graph.input])
    assert not os.path.exists(marker)
    for (name, a), e in zip(got.items(), reference_outputs(m, inputs)):
        assert_close(a, e, what=name)


def test_every_generated_c_string_is_escaped(hostile):
    """The descriptor's string tables: every literal is one literal of escaped
    ASCII, and decoding its escapes gives the name back."""
    cm = hostile[0]
    from mtvm.project.generate import descriptor_source
    src = descriptor_source(cm.metadata)
    code, lits = _lex(src)
    assert "mtvm_pwn" not in code and "system" not in code
    decoded = [_c_unescape(s) for s in lits]
    for t in cm.metadata["inputs"] + cm.metadata["outputs"]:
        assert t["name"] in decoded
    assert cm.metadata["model_name"] in decoded


def _lex(text: str) -> tuple[str, list[str]]:
    """C text outside comments and string literals, and the literals' bodies
    (after trigraph replacement and line splicing, as a C compiler sees it)."""
    for tri, ch in (("??/", "\\"), ("??=", "#"), ("??'", "^"), ("??(", "["), ("??)", "]"),
                    ("??!", "|"), ("??<", "{"), ("??>", "}"), ("??-", "~")):
        text = text.replace(tri, ch)
    text = text.replace("\\\n", "")
    code, lits, i = [], [], 0
    while i < len(text):
        if text.startswith("/*", i):
            i = text.index("*/", i + 2) + 2
            code.append(" ")
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
        elif text[i] == '"':
            j = i + 1
            while text[j] != '"':
                assert text[j] != "\n", "newline in a string literal"
                j += 2 if text[j] == "\\" else 1
            lits.append(text[i + 1:j])
            code.append('""')
            i = j + 1
        else:
            code.append(text[i])
            i += 1
    return "".join(code), lits


def _c_unescape(body: str) -> str:
    out, i = bytearray(), 0
    while i < len(body):
        if body[i] == "\\":
            if body[i + 1] in "01234567":
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
            else:
                out += body[i + 1].encode()
                i += 2
        else:
            out += body[i].encode()
            i += 1
    return out.decode("utf-8", "surrogatepass")


@pytest.mark.parametrize("graph_name,module", [("g", ""), ("default", "int"),
                                                 ("a" * 3000, "é中文" * 40)],
                         ids=["empty-module", "keywords", "long-non-ascii"])
def test_empty_keyword_and_long_names(graph_name, module):
    x = np.arange(-3, 3, dtype=np.float32)
    g = helper.make_graph([helper.make_node("Relu", ["default"], ["int"], name="")], graph_name,
                          [helper.make_tensor_value_info("default", TensorProto.FLOAT, [6])],
                          [helper.make_tensor_value_info("int", TensorProto.FLOAT, [6])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    cm = mtvm.compile(m, module_name=module)
    assert re.fullmatch(r"[a-z][a-z0-9_]{0,63}", cm.module_name)
    np.testing.assert_array_equal(cm.run_host({"default": x})["int"], np.maximum(x, 0))


def test_board_strings_that_a_makefile_cannot_take_are_refused(tmp_path):
    x = np.ones(4, np.float32)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    cm = mtvm.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert cm.run_host({"x": x})["y"].tolist() == [1, 1, 1, 1]
    from mtvm.project.boards import load_board
    board = load_board("host")
    for key, value in (("cflags", ["-O2", "$(shell touch x)"]), ("cflags", ["-DA=1 # c"]),
                       ("ldflags", ["-lm\nall:"]), ("cc", "cc;touch x")):
        bad = dict(board, **{key: value})
        with pytest.raises(MtvmError, match="Makefile"):
            mtvm.project.generate(cm, board=bad, out_dir=tmp_path / key, progress=quiet)
    with pytest.raises(MtvmError, match="board name"):
        mtvm.project.generate(cm, board=dict(board, name='h"st'), out_dir=tmp_path / "n",
                              progress=quiet)
    # names that select files (a template's template.py is imported) are plain words
    arm = load_board("mps2-an386")
    for bad in (dict(board, template="../../tmp/evil"), dict(board, template="/tmp"),
                dict(arm, uart=dict(arm["uart"], driver="../../../tmp/x"))):
        with pytest.raises(MtvmError, match="plain name"):
            mtvm.project.generate(cm, board=bad, out_dir=tmp_path / "t", progress=quiet)
    assert not (tmp_path / "t").exists()


# -- the functions, property-based ------------------------------------------------------------
texts = st.text(max_size=60) | st.text("*/?\\\"\n\r ab$#", max_size=30)


def _comment_is_closed_only_by_us(body: str) -> bool:
    """Phases 1-3 of C translation on `/* body */`: trigraphs, line splicing,
    then the comment must end exactly at our `*/`."""
    text = "/* " + body + " */"
    for tri, ch in (("??/", "\\"), ("??=", "#"), ("??'", "^"), ("??(", "["), ("??)", "]"),
                    ("??!", "|"), ("??<", "{"), ("??>", "}"), ("??-", "~")):
        text = text.replace(tri, ch)
    text = text.replace("\\\n", "")
    return text.find("*/", 2) == len(text) - 2 and "/*" not in text[2:]


@settings(max_examples=400, deadline=None)
@given(texts)
def test_c_comment_cannot_close_or_splice(text):
    body = names.c_comment(text)
    assert body.isascii() and body.isprintable()
    assert "??" not in body and not body.endswith("\\")
    assert _comment_is_closed_only_by_us(body)
    assert len(body) <= names.COMMENT_MAX + 3


@settings(max_examples=400, deadline=None)
@given(texts)
def test_c_string_literal_round_trips(text):
    lit = names.c_string_literal(text)
    assert lit.isascii() and lit.isprintable() and "??" not in lit
    assert lit[0] == lit[-1] == '"'
    assert re.fullmatch(r'"(?:[^"\\]|\\["\\?]|\\[0-7]{3})*"', lit)
    assert _c_unescape(lit[1:-1]) == text


@settings(max_examples=400, deadline=None)
@given(st.lists(texts, max_size=8))
def test_identifiers_are_ascii_unique_and_never_reserved(items):
    out = names.unique_names(items)
    assert out == names.unique_names(items)                      # deterministic
    assert len({s.lower() for s in out}) == len(out)             # unique, also upper-cased
    for s in out:
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", s), s
        assert s not in names.KEYWORDS and s not in names.RESERVED
        assert not names._RESERVED_PREFIX.match(s) and not s.endswith("_t")
        assert len(s) <= names.IDENT_MAX + 8


def test_identifier_examples():
    assert names.unique_names(["a.b", "a_b", "A_B", "int", "default", "é中文", "", "0x"]) == \
        ["a_b", "a_b_1", "A_B_2", "int_", "default_", "u00e9u4e2du6587", "t", "t0x"]
    assert names.c_name("EINVAL") == "t_EINVAL" and names.c_name("uint8_t") == "uint8_t_"
    assert names.c_name("linux") == "linux_" and names.c_name("_X") == "t_X"
    long = names.c_name("x" * 500)
    assert len(long) == names.IDENT_MAX and long != names.c_name("x" * 499)
    assert names.interface_names(["Workspace"], ["workspace"]) == (["Workspace_1"],
                                                                  ["workspace_2"])


@given(texts)
def test_make_words_take_only_safe_characters(text):
    try:
        w = names.make_word(text, "x")
    except MtvmError:
        assert not text or set(text) - set(string.ascii_letters + string.digits + "_=+,.:/@%-")
    else:
        assert w == text and not set(w) & set("$#\"'\\ \t\n;`|&<>(){}")


@given(texts)
def test_labels_and_ir_names(text):
    lab = names.label(text)
    assert re.fullmatch(r"[A-Za-z0-9_.+-]{1,64}", lab)
    ir = names.ir_name(text)
    assert ir.isascii() and "\n" not in ir and "\r" not in ir
    assert (json.loads(ir) if ir.startswith('"') else ir) == text


def test_standalone_app_prints_names_as_data(hostile):
    """The standalone app prints model and tensor names with non-printable bytes
    as '?': a newline in a name cannot forge lines of its output."""
    cm, m, inputs, marker, d = hostile
    proj = mtvm.project.generate(cm, board="host", out_dir=d / "app", kind="standalone",
                                 sample={i.name: inputs[i.name] for i in m.graph.input},
                                 progress=quiet)
    proj.build(progress=quiet)
    p = subprocess.run([proj.path("build", "mtvm_app")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert not os.path.exists(marker)
    lines = p.stdout.splitlines()
    # a model line, one line per output, the time, done: nothing else
    assert len(lines) == 2 + len(m.graph.output) + 1, p.stdout
    assert lines[0].startswith("mtvm standalone: model ") and "?" in lines[0]
    assert all(ln.startswith(f"output {i} ") for i, ln in enumerate(lines[1:4]))
    assert p.stdout.isascii()
