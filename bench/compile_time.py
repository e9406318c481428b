"""Compile time of a big float model: ONNX -> C -> built host binary.

    python bench/compile_time.py [MODEL.onnx]

Default model: light_resnet50 from onnx's backend test data (25 M float
parameters, made by ConstantOfShape nodes, so all zeros: the compile-time test of
dense random weights is tests/test_mlf.py's; opset 9: mtvm converts it to
opset 11 itself). The build is the
host shared library of bench/host.py (cc -O3 -march=native), made in a fresh
cache directory so nothing is reused; the outputs are checked against
onnxruntime. Target: under 60 s in all.
"""
from __future__ import annotations

import glob
import os
import sys
import tempfile
import time


def default_model() -> str | None:
    import onnx
    pattern = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                           "light_resnet50.onnx")
    found = glob.glob(pattern)
    return found[0] if found else None


def measure(path: str) -> dict:
    import numpy as np
    import onnxruntime as ort

    import mtvm
    from mtvm.host_runner import build_shared
    row = {"model": os.path.splitext(os.path.basename(path))[0]}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["MTVM_CACHE_DIR"] = cache
        t0 = time.perf_counter()
        lib = mtvm.compile(path)
        t1 = time.perf_counter()
        build_shared(lib, opt="-O3", extra=["-march=native"])
        t2 = time.perf_counter()
        row.update(to_c_s=t1 - t0, build_s=t2 - t1, total_s=t2 - t0,
                   const_bytes=lib.metadata["constant_bytes"],
                   arena=lib.metadata["workspace_bytes"],
                   lower_bound=lib.metadata["workspace_lower_bound"],
                   notes=lib.metadata.get("notes", []))
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {i.name: np.random.default_rng(0).random(
            [d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
            for i in sess.get_inputs()}
        ref = sess.run(None, feeds)
        got = list(lib.run_host(feeds, opt="-O3", extra=["-march=native"]).values())
        row["max_rel_err"] = max(float(np.max(np.abs(g - r)) / (np.max(np.abs(r)) or 1.0))
                                 for g, r in zip(got, ref))
    return row


def markdown(row: dict) -> str:
    lines = [f"{row['model']} ({row['const_bytes'] / 2**20:.1f} MiB of constants after "
             f"folding): ONNX -> C "
             f"{row['to_c_s']:.1f} s, C -> host shared library (cc -O3 -march=native) "
             f"{row['build_s']:.1f} s, **{row['total_s']:.1f} s in all** (target 60 s); "
             f"arena {row['arena']:,} B, lower bound {row['lower_bound']:,} B; max error vs "
             f"onnxruntime {row['max_rel_err']:.1e} (relative to the largest output; random input)."]
    lines += [f"note: {n}" for n in row["notes"]]
    return "\n\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = argv[0] if argv else default_model()
    if not path:
        print("light_resnet50.onnx not found in onnx's backend test data; pass a model",
              file=sys.stderr)
        return 1
    print(markdown(measure(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
