"""Generate torch_gru.onnx / torch_lstm.onnx and torch_{gru,lstm}.npz beside this
file: tiny PyTorch recurrent models (fixed seed) exported with torch.onnx's
TorchScript exporter, as most deployed GRU/LSTM ONNX files were, plus the
inputs and torch's own outputs. tests/ops/test_recurrent.py reads them; torch
is needed only to regenerate them (it is not a dependency of mtvm):

    pip install torch && python tests/data/make_torch_rnn.py

Each model holds two recurrent stacks, so one file covers both common shapes:
  a: 2 layers, bidirectional, batch_first, an initial state given as input;
  b: 1 layer, forward, sequence first, no initial state (zeros).
Hidden size 7 and input size 5 (odd, not multiples of a vector width).
"""
import os
import sys

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ, BATCH, INPUT, HIDDEN = 6, 3, 5, 7


class Net(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.lstm = cell is nn.LSTM
        self.a = cell(INPUT, HIDDEN, num_layers=2, bidirectional=True, batch_first=True)
        self.b = cell(INPUT, HIDDEN)

    def forward(self, x, xs, h0, c0=None):
        if self.lstm:
            ya, (ha, ca) = self.a(x, (h0, c0))
            yb, (hb, cb) = self.b(xs)
            return ya, ha, ca, yb, hb, cb
        ya, ha = self.a(x, h0)
        yb, hb = self.b(xs)
        return ya, ha, yb, hb


def export(kind: str, out_dir: str) -> None:
    torch.manual_seed(1234)
    cell = nn.LSTM if kind == "lstm" else nn.GRU
    net = Net(cell).eval()
    with torch.no_grad():   # biases well away from 0, so a doubled bias shows
        for p in net.parameters():
            p.uniform_(-0.8, 0.8)
    state = (4, BATCH, HIDDEN)
    inputs = {"x": torch.randn(BATCH, SEQ, INPUT), "xs": torch.randn(SEQ, BATCH, INPUT),
              "h0": torch.randn(*state)}
    if kind == "lstm":
        inputs["c0"] = torch.randn(*state)
    names = ["ya", "ha", "ca", "yb", "hb", "cb"] if kind == "lstm" else ["ya", "ha", "yb", "hb"]
    path = os.path.join(out_dir, f"torch_{kind}.onnx")
    torch.onnx.export(net, tuple(inputs.values()), path, input_names=list(inputs),
                      output_names=names, opset_version=17, dynamo=False)
    with torch.no_grad():
        outs = net(*inputs.values())
    np.savez_compressed(
        os.path.join(out_dir, f"torch_{kind}.npz"),
        **{f"in_{k}": v.numpy() for k, v in inputs.items()},
        **{f"out_{k}": v.numpy() for k, v in zip(names, outs)})
    print(f"wrote {path} ({os.path.getsize(path)} bytes), torch {torch.__version__}")


if __name__ == "__main__":
    out_dir = sys.argv[1] if len(sys.argv) > 1 else HERE
    for kind in ("gru", "lstm"):
        export(kind, out_dir)
