"""mtvm quick start: compile the example model, put it in a host project, run
it through a session on the (host-simulated) device, print outputs and
device-timed latency, check against onnxruntime.

    python examples/quickstart.py [MODEL.onnx] [--out build/quickstart]
"""
import argparse
import os
import sys

import numpy as np

import mtvm

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=os.path.join(HERE, "sensor_mlp.onnx"))
    ap.add_argument("--out", default=os.path.join("build", "quickstart"))
    args = ap.parse_args(argv)

    # 1. compile + generate a host-driven project (profiling on), 2. build it
    proj = mtvm.project.generate(args.model, board="host", out_dir=args.out, force=True,
                                 profile=True)
    proj.build()

    # 3. a session with the device: here a local process speaking the wire protocol
    sample = os.path.splitext(args.model)[0] + ".npz"
    with proj.session() as sess:
        info = sess.info()
        print(info)
        if os.path.exists(sample):
            with np.load(sample) as z:
                x = {t.name: z[f"in_{i}"] for i, t in enumerate(info.inputs)}
                ref = [z[f"out_{i}"] for i in range(len(info.outputs))]
        else:
            rng = np.random.default_rng(0)
            x = {t.name: rng.standard_normal(t.shape).astype(t.dtype) for t in info.inputs}
            ref = None
        y = sess.executor.run(x)
        for name, a in y.items():
            print(f"output {name}: {np.array2string(a.ravel(), precision=5, threshold=16)}")
        if ref is not None:
            err = max(float(np.abs(a - r).max()) for a, r in zip(y.values(), ref))
            print(f"max abs error vs the reference in {os.path.basename(sample)}: {err:.3g}")
        print("benchmark:", sess.executor.benchmark(number=10, repeat=3))
        print(sess.executor.profile().table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
