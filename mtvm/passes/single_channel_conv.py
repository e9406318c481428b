"""On Arm DSP cores and x86 hosts, an int8 conv over one input channel goes through
im2col.

The QDQ lowering gives every QConv with one input channel per group and at most 16
taps the depthwise kernel's arithmetic (folded=0: the zero-point terms summed inside
the input, qparams.dense_node). That includes a first layer over a single-channel
input (a spectrogram, a grey image) with group 1: each output channel then reads
the same plane, its window weights in registers. On a Cortex-M4/M7 that kernel is
the faster one where its Thumb-2 2x2 loop runs (3x3 window, stride 1, no dilation, the
full 8-bit output range) or with few channels; with 16 or more output channels, or
another window width, the im2col kernel (the column of a pixel built once for all
channels, four channels a pass) needs fewer instructions. mps2-an386 (QEMU icount),
one conv over one channel: 16 channels 5x3 stride (2, 1) on 40x20 180 K -> 160 K,
kws_crnn_int8's 32-channel first conv 228 K -> 186 K, 32 channels 3x3 stride 2 on 32x32
155 K -> 137 K, 16 channels 3x3 stride (2, 1) 168 K -> 149 K, 8 channels 1x9 on 128 30 K
-> 22 K; the 2x2 loop stays ahead (16 channels 3x3 stride 1 on 32x32: 238 K against
298 K; denoise_unet_int8's first conv), and so does the depthwise kernel at 8 channels
3x3. With 8 to 15 channels a window of more than nine taps takes im2col too where the
im2col kernel copies the padded input plane into scratch by default (knob border_plane,
schedules/generic/qconv_s8.py: a small plane), since then no pixel takes the masked
gather: 8 channels 5x3 stride (2, 1) on 61x13 101 K -> 88 K (crnn_v13_int8's first
layer), on 49x10 58 K -> 54 K; 8 channels 3x3 stride 2 or (2, 1) stay depthwise (40 K
against 43 K, 34 K against 33 K). Helium and RISC-V cores keep the depthwise kernel (on
mps3-an547 and riscv32-virt it is the faster one at 16 channels).

On x86 the im2col kernels vectorize over the output channels (VNNI or AVX2 pair sums;
8 or more of them) where the depthwise kernel has one channel's plane: with AVX-512 VNNI
(bench/host.py, a Zen 5 host) every shape tried is faster, 72 channels 3x3 stride 2 on
49x10 (dscnn_v13_int8's first layer) 23.7 -> 1.5 us, 16 channels 3x3 stride 1 on 32x32
4.7 -> 2.7 us, 32 channels 3x3 stride 2 4.2 -> 1.0 us; with AVX2 only at stride 2 and
more (72 channels 25 -> 12 us, 32 channels 11 -> 9 us; at stride 1 or (2, 1) the
depthwise kernel stays ahead, 16 channels 3x3 11 against 14 us, kws_crnn_int8 39 against
44 us). The portable C ("c"), whose ISA its compiler picks, follows the AVX2 rule.
dscnn_v13_int8: 1.36 -> 0.98 of onnxruntime's time (AVX-512), 0.110 -> 0.089 ms (AVX2).

So on those targets the pass folds the zero-point terms into the bias (folded=1, the
im2col kernel's arithmetic: the same integers, QConv.reference)."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from ..ops.quantized.common import DOMAIN
from ..qparams import zero_point_terms

MIN_CHANNELS = 16   # at least this many output channels, or a window not 3 wide...
MIN_CHANNELS_BORDERED = 8   # ...or this many and a window over 3 x 3 taps, bordered plane
MIN_CHANNELS_X86 = 8        # x86: at least this many output channels


def _bordered_by_default(g: Graph, n: Node, w) -> bool:
    """Whether the im2col kernel copies the input plane with its padding into scratch by
    default (schedules/generic/qconv_s8.py: one input channel, at most BORDER_MAX_BYTES)."""
    from ..ops.quantized.conv import bordered_plane
    from ..ops.quantized.common import conv_geometry
    from ..schedules.generic.qconv_s8 import BORDER_MAX_BYTES
    x = g.tensors.get(n.inputs[0])
    if x is None or x.shape is None or len(x.shape) not in (3, 4):
        return False
    a = n.attrs
    dims = len(x.shape) - 2
    geometry = conv_geometry(x.shape, w.shape, a.get("strides", [1] * dims),
                             a.get("pads", [0] * 2 * dims), a.get("dilations", [1] * dims))
    plane = bordered_plane(*geometry)
    return plane is not None and plane[0] * plane[1] * x.dtype.itemsize <= BORDER_MAX_BYTES


def _depthwise_loop_runs(n: Node, w) -> bool:
    """Whether the depthwise kernel takes its Thumb-2 2x2 loop (ops/quantized/depthwise.py:
    3x3, stride 1, no dilation, the full 8-bit range; its cheap requantization, which
    nearly every layer has, is not checked here)."""
    a = n.attrs
    full = (a.get("act_min", -128), a.get("act_max", 127)) in ((-128, 127), (0, 255))
    return tuple(w.shape[2:]) == (3, 3) and full and \
        all(v == 1 for v in a.get("strides", [1, 1])) and \
        all(v == 1 for v in a.get("dilations", [1, 1]))


def _prefers_im2col(g: Graph, n: Node, target) -> bool:
    if n.domain != DOMAIN or n.op != "QConv" or n.attrs.get("folded", 1) or \
            n.attrs.get("group", 1) != 1 or len(n.inputs) < 3:
        return False
    w, bias = g.tensors.get(n.inputs[1]), g.tensors.get(n.inputs[2])
    if w is None or not w.is_const or bias is None or not bias.is_const:
        return False
    if target.is_x86 or target.is_generic:
        # x86: the kernels vectorize over the output channels (a few leave them nothing to
        # vectorize); with VNNI ahead at every shape tried, without (AVX2, or the portable
        # C, whose ISA the C compiler picks) at strides of 2 and more
        return w.shape[0] >= MIN_CHANNELS_X86 and (
            target.has("avx512vnni") or all(v >= 2 for v in n.attrs.get("strides", [1])))
    if _depthwise_loop_runs(n, w):
        return False
    taps = int(np.prod(w.shape[2:]))
    return w.shape[0] >= MIN_CHANNELS or w.shape[-1] != 3 or \
        (w.shape[0] >= MIN_CHANNELS_BORDERED and taps > 9 and _bordered_by_default(g, n, w))


def im2col_single_channel_convs(graph: Graph, target) -> Graph:
    """graph with its one-input-channel, group-1 QConvs in the folded form where the
    target's im2col kernel is the faster (Arm DSP cores without Helium, x86 hosts)."""
    if target is None or not (target.is_arm_dsp or target.is_x86 or target.is_generic):
        return graph
    found = [i for i, n in enumerate(graph.nodes) if _prefers_im2col(graph, n, target)]
    if not found:
        return graph
    g = graph.copy()   # the same nodes, in the same order
    for i in found:
        n = g.nodes[i]
        w = np.asarray(g.tensors[n.inputs[1]].data)
        w_zp = 0
        if len(n.inputs) > 5 and n.inputs[5]:
            w_zp = np.asarray(g.tensors[n.inputs[5]].data, np.int64)
        bias = np.asarray(g.tensors[n.inputs[2]].data, np.int64)
        folded = bias - zero_point_terms(w, int(n.attrs.get("x_zp", 0)), w_zp)
        if np.abs(folded).max(initial=0) >= 1 << 31:
            continue
        new = n.copy()
        new.inputs[2] = g.add_const(f"{n.name}_bias_folded", folded.astype(np.int32))
        new.attrs["folded"] = 1
        g.nodes[i] = new
    return g
