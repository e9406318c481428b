"""--io-in-workspace: the model's inputs and outputs get arena offsets; the
application writes the input where tvmgen_<mod>_map_io says and reads the output
there (nothing copied), or passes its own buffers (run copies)."""
import os
import subprocess

import numpy as np
import pytest
from onnx import helper

import mtvm
from mtvm.testing import assert_close, make_model, reference_outputs

MAIN_C = r"""
#include <stdio.h>
#include <string.h>
#include "tvmgen_default.h"
int main(int argc, char** argv) {
    struct tvmgen_default_inputs in;
    struct tvmgen_default_outputs out;
    FILE* f;
    (void)argc;
    tvmgen_default_map_io(&in, &out);
    f = fopen(argv[1], "rb");
    if (fread(in.x, 1, TVMGEN_DEFAULT_X_SIZE, f) != TVMGEN_DEFAULT_X_SIZE) return 2;
    fclose(f);
    if (tvmgen_default_run(&in, &out) != 0) return 3;
    f = fopen(argv[2], "wb");
    fwrite(out.y0, 1, TVMGEN_DEFAULT_Y0_SIZE, f);
    fclose(f);
    return 0;
}
"""


def model():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    m = make_model("Conv", {"x": x}, {"pads": [1, 1, 1, 1]},
                   consts={"w": rng.standard_normal((8, 8, 3, 3)).astype(np.float32)})
    m.graph.node.append(helper.make_node("Relu", ["y0"], ["r"]))
    m.graph.node[0].output[0] = "c"
    m.graph.node[1].input[0] = "c"
    m.graph.node[1].output[0] = "y0"
    return m, x


def test_io_planned_in_the_arena_and_mapped(tmp_path):
    m, x = model()
    lib = mtvm.compile(m, io_in_workspace=True)
    md = lib.metadata
    assert md["io_in_workspace"]
    offs = [e["workspace_offset"] for e in md["inputs"] + md["outputs"]]
    assert all(o is not None for o in offs)
    assert lib.plan.arena_bytes == lib.plan.lower_bound
    assert lib.plan.arena_bytes >= md["inputs"][0]["size_bytes"] + md["outputs"][0]["size_bytes"]
    expected = reference_outputs(m, {"x": x})[0]
    # copies: the runner passes its own buffers
    assert_close(lib.run_host({"x": x}, sanitize=True)["y0"], expected)
    # no copies: the application uses the arena addresses
    lib.export(str(tmp_path / "mlf"))
    src = tmp_path / "mlf" / "codegen" / "host" / "src"
    inc = tmp_path / "mlf" / "codegen" / "host" / "include"
    (tmp_path / "main.c").write_text(MAIN_C)
    exe = tmp_path / "app"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fsanitize=address",
                    "-I", str(inc), "-I", str(src), str(tmp_path / "main.c")]
                   + [str(src / f) for f in os.listdir(src) if f.endswith(".c")]
                   + ["-o", str(exe), "-lm"], check=True)
    x.tofile(tmp_path / "x.bin")
    subprocess.run([str(exe), str(tmp_path / "x.bin"), str(tmp_path / "y.bin")], check=True)
    y = np.fromfile(tmp_path / "y.bin", np.float32).reshape(expected.shape)
    assert_close(y, expected)
