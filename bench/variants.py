"""Models of the shared families that mtvm was not tuned on, drawn from a seed.

    python bench/variants.py --out DIR [--seed N] [--families mbv2,cnn1d,...]

../shared/models holds one model per family; mtvm is judged on other models of the same
families. This writes, for each family, a model with the family's structure and layer
kinds but its own sizes -- resolutions, widths, kernel sizes, strides, dilations,
sequence lengths, hidden sizes, heads -- all drawn from --seed, as NAME.onnx with
NAME.npz (in_0 a sample input, out_<i> onnxruntime's outputs), float and int8 (QDQ, per
channel, onnxruntime's quantize_static calibrated on random inputs). Weights are random
(He-scaled, with per-channel gains standing in for folded batch norms): the figures that
matter here -- instructions a MAC, time beside onnxruntime, arena, flash -- depend on
shapes, not on what the weights learnt.

The benches take the directory: `python bench/run_all.py --models-dir DIR`,
`python bench/device.py --models-dir DIR`, `python bench/peer_device.py --models-dir DIR`.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FAMILIES = ("mbv2", "mbv1", "dscnn", "resnet", "cnn1d", "autoencoder", "unet", "crnn",
            "lstm", "transformer")
OPSET = 17


class Graph:
    """A float ONNX graph built layer by layer; tensors are names, shapes tracked here."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list = []
        self.inits: list = []
        self.shape: dict[str, tuple] = {}
        self._n = 0

    def _name(self, kind: str) -> str:
        self._n += 1
        return f"{kind}_{self._n}"

    def const(self, value, kind: str = "c") -> str:
        name = self._name(kind)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list, shape: tuple, **attrs) -> str:
        out = self._name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        self.shape[out] = tuple(shape)
        return out

    def weights(self, shape: tuple, fan_in: int) -> np.ndarray:
        w = self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        gain = self.rng.uniform(0.5, 1.5, (shape[0],) + (1,) * (len(shape) - 1))
        return (w * gain).astype(np.float32)

    def bias(self, n: int) -> np.ndarray:
        return (0.1 * self.rng.standard_normal(n)).astype(np.float32)

    # -- layers ---------------------------------------------------------------------
    def act(self, x: str, kind: str | None) -> str:
        if kind is None:
            return x
        if kind == "relu":
            return self.node("Relu", [x], self.shape[x])
        if kind == "relu6":
            return self.node("Clip", [x, self.const(np.float32(0)), self.const(np.float32(6))],
                             self.shape[x])
        raise ValueError(kind)

    def conv(self, x: str, cout: int, k, stride=1, dilation=1, group=1, act="relu",
             pads=None) -> str:
        """Conv of 1 or 2 spatial dims (by x's rank), 'same'-style padding by default."""
        n, cin, *sp = self.shape[x]
        d = len(sp)
        k = (k,) * d if isinstance(k, int) else tuple(k)
        s = (stride,) * d if isinstance(stride, int) else tuple(stride)
        dil = (dilation,) * d if isinstance(dilation, int) else tuple(dilation)
        if pads is None:
            pads = [dil[i] * (k[i] - 1) // 2 for i in range(d)] * 2
        out_sp = [(sp[i] + pads[i] + pads[i + d] - dil[i] * (k[i] - 1) - 1) // s[i] + 1
                  for i in range(d)]
        w = self.const(self.weights((cout, cin // group) + k, cin // group * int(np.prod(k))),
                       "w")
        y = self.node("Conv", [x, w, self.const(self.bias(cout), "b")], (n, cout, *out_sp),
                      kernel_shape=list(k), strides=list(s), dilations=list(dil),
                      pads=list(pads), group=group)
        return self.act(y, act)

    def conv_transpose(self, x: str, cout: int, k: int, stride: int, pad: int,
                       act="relu") -> str:
        n, cin, h, w = self.shape[x]
        oh, ow = [(v - 1) * stride - 2 * pad + k for v in (h, w)]
        wt = self.const(self.weights((cin, cout, k, k), cin * k * k // stride ** 2), "w")
        y = self.node("ConvTranspose", [x, wt, self.const(self.bias(cout), "b")],
                      (n, cout, oh, ow), kernel_shape=[k, k], strides=[stride, stride],
                      pads=[pad] * 4)
        return self.act(y, act)

    def resize2x(self, x: str, mode: str) -> str:
        n, c, h, w = self.shape[x]
        scales = self.const(np.array([1, 1, 2, 2], np.float32))
        attrs = {"mode": mode}
        if mode == "linear":
            attrs["coordinate_transformation_mode"] = "half_pixel"
        else:
            attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        return self.node("Resize", [x, "", scales], (n, c, 2 * h, 2 * w), **attrs)

    def pool(self, x: str, op: str, k: int, stride: int | None = None) -> str:
        n, c, *sp = self.shape[x]
        s = stride or k
        return self.node(op, [x], (n, c, *[(v - k) // s + 1 for v in sp]),
                         kernel_shape=[k] * len(sp), strides=[s] * len(sp))

    def global_pool(self, x: str) -> str:
        n, c, *sp = self.shape[x]
        return self.node("GlobalAveragePool", [x], (n, c) + (1,) * len(sp))

    def flatten(self, x: str) -> str:
        s = self.shape[x]
        return self.node("Flatten", [x], (s[0], int(np.prod(s[1:]))), axis=1)

    def gemm(self, x: str, n_out: int, act=None) -> str:
        m, k = self.shape[x]
        w = self.const(self.weights((n_out, k), k), "w")
        y = self.node("Gemm", [x, w, self.const(self.bias(n_out), "b")], (m, n_out), transB=1)
        return self.act(y, act)

    def linear(self, x: str, n_out: int, act=None) -> str:
        """MatMul by a constant and Add of a bias over the last axis (torch's Linear on 3-D)."""
        *lead, k = self.shape[x]
        w = self.const(self.weights((n_out, k), k).T.copy(), "w")
        y = self.node("MatMul", [x, w], (*lead, n_out))
        y = self.node("Add", [y, self.const(self.bias(n_out), "b")], (*lead, n_out))
        return self.act(y, act)

    def add(self, a: str, b: str) -> str:
        return self.node("Add", [a, b], self.shape[a])

    def concat(self, xs: list, axis: int) -> str:
        s = list(self.shape[xs[0]])
        s[axis] = sum(self.shape[x][axis] for x in xs)
        return self.node("Concat", xs, tuple(s), axis=axis)

    def reshape(self, x: str, shape: tuple) -> str:
        return self.node("Reshape", [x, self.const(np.array(shape, np.int64))], shape)

    def transpose(self, x: str, perm: list) -> str:
        s = self.shape[x]
        return self.node("Transpose", [x], tuple(s[p] for p in perm), perm=perm)

    def layer_norm(self, x: str) -> str:
        d = self.shape[x][-1]
        g = self.const(self.rng.uniform(0.8, 1.2, d).astype(np.float32))
        return self.node("LayerNormalization", [x, g, self.const(self.bias(d))], self.shape[x],
                         axis=-1, epsilon=1e-5)

    def gelu(self, x: str) -> str:
        """GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt(2)))."""
        s = self.shape[x]
        e = self.node("Erf", [self.node("Div", [x, self.const(np.float32(np.sqrt(2)))], s)], s)
        e = self.node("Add", [e, self.const(np.float32(1))], s)
        return self.node("Mul", [self.node("Mul", [x, e], s), self.const(np.float32(0.5))], s)

    def model(self, name: str, x: str, outputs: list) -> onnx.ModelProto:
        vi = [helper.make_tensor_value_info(o, TensorProto.FLOAT, self.shape[o]) for o in outputs]
        g = helper.make_graph(self.nodes, name,
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT,
                                                             self.shape[x])], vi, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        return m

    def input(self, shape: tuple) -> str:
        self.shape["input"] = tuple(shape)
        return "input"


def _div8(v: float) -> int:
    """v rounded to a multiple of 8 as MobileNets' width multipliers do: to the nearest,
    at least 8, and never more than 10 % below v."""
    d = max(8, int(v + 4) // 8 * 8)
    return d + 8 if d < 0.9 * v else d


# -- the families ----------------------------------------------------------------------
def mbv2(g: Graph) -> list:
    """A FOMO-style detector: MobileNetV2 inverted residuals cut at 1/8 resolution and a
    per-cell class softmax."""
    r = g.rng
    h, w = [(64, 64), (80, 96), (96, 96), (72, 88)][r.integers(4)]
    alpha = r.choice([0.25, 0.35, 0.5])
    x = g.conv(g.input((1, 3, h, w)), _div8(32 * alpha), 3, stride=2, act="relu6")
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2)]:
        for i in range(n):
            cin, cout = g.shape[x][1], _div8(c * alpha)
            y = g.conv(x, cin * t, 1, act="relu6") if t != 1 else x
            y = g.conv(y, cin * t, 3, stride=s if i == 0 else 1, group=cin * t, act="relu6")
            y = g.conv(y, cout, 1, act=None)
            x = g.add(x, y) if (i > 0 or s == 1) and cin == cout else y
    x = g.conv(x, 32, 1, act="relu")
    x = g.conv(x, int(r.integers(2, 5)), 1, act=None)
    return [g.node("Softmax", [x], g.shape[x], axis=1)]


def mbv1(g: Graph) -> list:
    """A visual-wake-words MobileNetV1: depthwise-separable blocks with stride-2 steps."""
    r = g.rng
    res = int(r.choice([64, 80, 96]))
    alpha = r.choice([0.25, 0.35])
    x = g.conv(g.input((1, 3, res, res)), _div8(32 * alpha), 3, stride=2)
    for c, s in [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1),
                 (1024, 2)][: int(r.integers(5, 9))]:
        cin = g.shape[x][1]
        x = g.conv(x, cin, 3, stride=s, group=cin)
        x = g.conv(x, _div8(c * alpha), 1)
    return [g.gemm(g.flatten(g.global_pool(x)), 2)]


def dscnn(g: Graph) -> list:
    """A keyword-spotting DS-CNN on MFCC frames: a strided first conv, depthwise-separable
    blocks, average pooling and a classifier."""
    r = g.rng
    t, f = [(49, 10), (40, 13), (62, 20), (49, 40)][r.integers(4)]
    c = int(r.choice([32, 48, 64, 72]))
    k = [(10, 4), (3, 3), (5, 5)][r.integers(3)]
    x = g.conv(g.input((1, 1, t, f)), c, k, stride=2)
    for i in range(int(r.integers(3, 6))):
        x = g.conv(x, c, 3, stride=2 if (i == 0 and r.random() < 0.5) else 1, group=c)
        x = g.conv(x, c, 1)
    return [g.node("Softmax", [g.gemm(g.flatten(g.global_pool(x)), 12)], (1, 12), axis=1)]


def resnet(g: Graph) -> list:
    """An image-classification ResNet of basic blocks with 1x1 projection shortcuts."""
    r = g.rng
    res = int(r.choice([24, 32, 40]))
    widths = [[16, 32, 64], [8, 16, 32], [12, 24, 48]][r.integers(3)]
    x = g.conv(g.input((1, 3, res, res)), widths[0], 3)
    for i, c in enumerate(widths):
        s = 1 if i == 0 else 2
        y = g.conv(x, c, 3, stride=s)
        y = g.conv(y, c, 3, act=None)
        sc = x if s == 1 and g.shape[x][1] == c else g.conv(x, c, 1, stride=s, act=None)
        x = g.act(g.add(y, sc), "relu")
    x = g.pool(x, "AveragePool", g.shape[x][2])
    return [g.gemm(g.flatten(x), 10)]


def cnn1d(g: Graph) -> list:
    """A 1-D CNN over IMU windows: dilated and depthwise-separable 1-D convs, max pooling,
    a temporal mean and a classifier."""
    r = g.rng
    c, t = int(r.choice([3, 6, 9])), int(r.choice([64, 96, 128, 200]))
    x = g.conv(g.input((1, c, t)), int(r.choice([16, 24, 32])), int(r.choice([3, 5, 7, 9])))
    x = g.pool(x, "MaxPool", 2)
    cw = g.shape[x][1]
    x = g.conv(x, cw, int(r.choice([3, 5])), dilation=int(r.choice([1, 2, 4])), group=cw)
    x = g.conv(x, int(r.choice([32, 48, 64])), 1)
    x = g.conv(x, g.shape[x][1], 3, dilation=2, stride=int(r.choice([1, 2])))
    x = g.pool(x, "MaxPool", 2)
    m = g.node("ReduceMean", [x], g.shape[x][:2], axes=[2], keepdims=0)
    return [g.node("Softmax", [g.gemm(m, 6)], (1, 6), axis=1)]


def autoencoder(g: Graph) -> list:
    """An anomaly-detection autoencoder of fully connected layers."""
    r = g.rng
    d = int(r.choice([128, 320, 640]))
    hid, code = int(r.choice([64, 128])), int(r.choice([8, 16]))
    x = g.input((1, d))
    for n in [hid, hid, code, hid, hid]:
        x = g.gemm(x, n, act="relu")
    return [g.gemm(x, d)]


def unet(g: Graph) -> list:
    """A denoising encoder-decoder: max-pooled encoder, ConvTranspose or Resize up,
    skip connections by Concat."""
    r = g.rng
    h, w = [(32, 32), (48, 48), (40, 56)][r.integers(3)]
    cin, c = int(r.choice([1, 3])), int(r.choice([8, 12, 16]))
    up = ["convT2", "convT4", "linear", "nearest"]
    skips = []
    x = g.conv(g.input((1, cin, h, w)), c, 3)
    for _ in range(2):
        skips.append(x)
        x = g.conv(g.pool(x, "MaxPool", 2), 2 * g.shape[x][1], 3)
    for skip in reversed(skips):
        kind = up[r.integers(len(up))]
        cs = g.shape[skip][1]
        if kind == "convT2":
            x = g.conv_transpose(x, cs, 2, 2, 0)
        elif kind == "convT4":
            x = g.conv_transpose(x, cs, 4, 2, 1)
        else:
            x = g.conv(g.resize2x(x, kind), cs, 1)
        x = g.conv(g.concat([x, skip], 1), cs, 3)
    return [g.conv(x, cin, 1, act=None)]


def crnn(g: Graph) -> list:
    """A keyword-spotting CRNN: a strided conv over (time, frequency), a projection and a
    GRU over time, the last step classified."""
    r = g.rng
    t, f = [(49, 10), (61, 13), (40, 20)][r.integers(3)]
    c, hid = int(r.choice([8, 16])), int(r.choice([32, 48, 64]))
    x = g.conv(g.input((1, 1, t, f)), c, (5, 3), stride=(2, 1))
    n, c, tt, ff = g.shape[x]
    x = g.reshape(g.transpose(x, [2, 0, 1, 3]), (tt, 1, c * ff))    # (time, batch, features)
    x = g.linear(x, int(r.choice([32, 64])))
    hid3 = 3 * hid
    d = g.shape[x][2]
    wx = g.const(g.weights((1, hid3, d), d))
    wh = g.const(g.weights((1, hid3, hid), hid))
    b = g.const((0.1 * g.rng.standard_normal((1, 2 * hid3))).astype(np.float32))
    y = g.node("GRU", [x, wx, wh, b], (tt, 1, 1, hid), hidden_size=hid, linear_before_reset=1)
    last = g.node("Gather", [y, g.const(np.int64(tt - 1))], (1, 1, hid), axis=0)
    return [g.gemm(g.reshape(last, (1, hid)), 12)]


def lstm(g: Graph) -> list:
    """A forecasting LSTM (one or two layers, or one bidirectional) and a linear head."""
    r = g.rng
    t, f = int(r.choice([16, 24, 48])), int(r.choice([4, 8, 12]))
    hid = int(r.choice([16, 32, 48]))
    x = g.input((t, 1, f))
    layers = int(r.choice([1, 2]))
    directions = 1 if layers == 2 else int(r.choice([1, 2]))
    for _ in range(layers):
        d = g.shape[x][2]
        nd = directions
        wx = g.const(g.weights((nd, 4 * hid, d), d))
        wh = g.const(g.weights((nd, 4 * hid, hid), hid))
        b = g.const((0.1 * g.rng.standard_normal((nd, 8 * hid))).astype(np.float32))
        y = g.node("LSTM", [x, wx, wh, b], (t, nd, 1, hid), hidden_size=hid,
                   direction="bidirectional" if nd == 2 else "forward")
        x = g.reshape(g.transpose(y, [0, 2, 1, 3]), (t, 1, nd * hid))
    last = g.node("Gather", [x, g.const(np.int64(t - 1))], (1, g.shape[x][2]), axis=0)
    return [g.gemm(last, int(r.choice([1, 4])))]


def transformer(g: Graph) -> list:
    """A keyword transformer: patch embedding, pre-norm multi-head attention blocks with a
    GELU MLP, the mean token classified."""
    r = g.rng
    t, f = [(49, 40), (32, 20), (25, 64)][r.integers(3)]
    d, heads = [(64, 4), (48, 2), (32, 1), (64, 1)][r.integers(4)]
    dh = d // heads
    x = g.linear(g.input((1, t, f)), d)
    pos = g.const((0.1 * g.rng.standard_normal((1, t, d))).astype(np.float32))
    x = g.add(x, pos)
    for _ in range(int(r.choice([1, 2]))):
        y = g.layer_norm(x)
        q, k, v = [g.transpose(g.reshape(g.linear(y, d), (1, t, heads, dh)), [0, 2, 1, 3])
                   for _ in range(3)]
        q = g.node("Mul", [q, g.const(np.float32(1 / np.sqrt(dh)))], g.shape[q])
        s = g.node("MatMul", [q, g.transpose(k, [0, 1, 3, 2])], (1, heads, t, t))
        a = g.node("MatMul", [g.node("Softmax", [s], g.shape[s], axis=-1), v],
                   (1, heads, t, dh))
        a = g.reshape(g.transpose(a, [0, 2, 1, 3]), (1, t, d))
        x = g.add(x, g.linear(a, d))
        y = g.gelu(g.linear(g.layer_norm(x), 2 * d))
        x = g.add(x, g.linear(y, d))
    m = g.node("ReduceMean", [g.layer_norm(x)], (1, d), axes=[1], keepdims=0)
    return [g.gemm(m, 12)]


# -- writing them ----------------------------------------------------------------------
def write_family(family: str, seed: int, out: str, int8: bool = True) -> list[str]:
    """Writes <family>_v<seed>.onnx/.npz (and _int8) into out; returns the paths."""
    from mtvm.testing import quantize_qdq
    import onnxruntime as ort
    g = Graph(np.random.default_rng([seed, FAMILIES.index(family)]))
    outputs = globals()[family](g)
    name = f"{family}_v{seed}"
    model = g.model(name, "input", outputs)
    path = os.path.join(out, name + ".onnx")
    onnx.save(model, path)
    rng = np.random.default_rng(seed + 1000)
    shape = g.shape["input"]
    sample = rng.standard_normal(shape).astype(np.float32)
    ys = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"input": sample})
    np.savez(path[:-5] + ".npz", in_0=sample, **{f"out_{i}": y for i, y in enumerate(ys)})
    paths = [path]
    if int8:
        calibration = [rng.standard_normal(shape).astype(np.float32) for _ in range(8)]
        paths.append(quantize_qdq(path, os.path.join(out, name + "_int8.onnx"), "input",
                                  calibration, sample, per_channel=True))
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="directory for the models (created)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--no-int8", action="store_true")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for fam in args.families.split(","):
        if fam not in FAMILIES:
            p.error(f"unknown family {fam!r} (one of {', '.join(FAMILIES)})")
        for path in write_family(fam, args.seed, args.out, int8=not args.no_int8):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
