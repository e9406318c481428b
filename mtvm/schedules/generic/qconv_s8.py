"""Integer convolution (QConv, int8/uint8 data and weights, int32 sums) in
portable C, any target.

im2col (folded=1): pairs of output pixels gathered into an int16 column in
scratch, met two output channels at a time by the pair micro-kernels
(SMLAD where the target has the Arm DSP extension, plain C elsewhere; four
channels on x86 and RV32 cores), the weights laid out in the order those
kernels load them (pack_conv_weights). On x86 hosts the direct AVX2 /
AVX-512 VNNI kernels replace the column where they apply (knob x86_direct).

depthwise (folded=0): one input channel per output channel, the window
summed over the taps inside the input (mtvm.ops.quantized.depthwise).

The code is in mtvm/ops/quantized/conv.py (emit_qconv) and depthwise.py;
other targets' variants: schedules/riscv/qconv_s8.py, arm_mve/qconv_s8.py.
"""
from __future__ import annotations

import numpy as np

from ...ops.quantized.common import narrow_shifts
from ...ops.quantized.conv import (border_plane_bytes, emit_qconv, pack_conv_weights,
                                   qconv_scratch_bytes, shifts_as_m1, widened_bytes)
from .. import Knob, Schedule, register


WIDEN_MAX_BYTES = 4096    # the widened weights' scratch, default at most
WIDEN_MIN_PIXELS = 8      # output pixels a channel, default at least
BORDER_MAX_BYTES = 2048   # the bordered planes' scratch, default at most (one channel a group)


class QConvIm2colBase(Schedule):
    """What the im2col variants share: when they apply, their weight layout."""
    op = "QConv"
    domain = "mtvm"
    variant: dict = {}

    def applies(self, k, /, **attrs) -> bool:
        return bool(attrs.get("folded", 1))

    @staticmethod
    def group_taps(k, attrs) -> tuple[int, int]:
        """(group, taps per output: C/group x KH x KW)."""
        x, w = k.ins[0], k.plain(1)
        group = attrs.get("group", 1)
        return group, x.shape[1] // group * int(np.prod(w.shape[2:]))

    def weight_layout(self, k, /, **attrs):
        w = k.ins[1]
        if w.const is None:
            return {}
        m1 = shifts_as_m1(k, int(attrs.get("y_zp", 0)))
        return {1: pack_conv_weights(w.const, attrs.get("group", 1)), **narrow_shifts(k),
                **({4: m1} if m1 is not None else {})}

    def scratch_bytes(self, k, /, **attrs) -> int:
        return qconv_scratch_bytes(k, **attrs, **self.variant,
                                   widen_weights=k.knobs.get("widen_weights", False),
                                   border_plane=k.knobs.get("border_plane", False))

    def emit(self, k, /, **attrs) -> str:
        return emit_qconv(k, **attrs, **self.variant, **k.knobs)


@register
class QConvIm2colS8(QConvIm2colBase):
    name = "qconv_s8.im2col"
    family = "generic"
    priority = 0
    knobs = (Knob("x86_direct", True, (True, False),
                  "x86: the direct AVX2/VNNI kernels (no column) where they apply"),
             Knob("compact_border", False, (False, True),
                  "the padding pixels' column by the model's shared function (less code)"),
             Knob("widen_weights", False, (False, True),
                  "Arm DSP cores: the weights widened to int16 in scratch once a call"),
             Knob("border_plane", False, (False, True),
                  "the input planes copied with their padding into scratch once a call"))

    def default_knobs(self, k=None) -> dict:
        """On microcontrollers the compact border: flash is the scarcer resource
        there, and the shared border function takes ic_resnet8_int8 on the Cortex-M4
        1.6 KB (2 %) less model flash and 2 % fewer instructions than the taps unrolled
        in each layer (a 1-D model with few border pixels up to 0.7 % more); hosts keep
        the unrolled one.
        On Arm DSP cores the weights widened to int16 where that takes at most
        WIDEN_MAX_BYTES of scratch and the layer has at least WIDEN_MIN_PIXELS
        outputs a channel (the widening, about an instruction a weight, is paid
        back from three pixel pairs on; more scratch is RAM a board may not have,
        the tuner and --memory-budget may trade it). And there the input plane copied
        with its padding (border_plane) where the layer reads one input channel a group
        and the copy takes at most BORDER_MAX_BYTES: a spectrogram's first layer, one
        pixel in five of which touches the padding (its masked gather costs several
        times the others'); crnn_v13_int8's 8-channel 5x3 layer on the M4 101 K -> 88 K
        instructions (with passes/single_channel_conv.py), kws_crnn_int8's 32-channel
        one 186 K -> 177 K, for 975 and 636 bytes of scratch, at the same arena."""
        values = super().default_knobs(k)
        if k is not None and (k.target.is_arm or k.target.is_riscv):
            values["compact_border"] = True
        if k is not None and k.target.is_arm_dsp and len(k.ins) > 1 and k.out is not None:
            w = k.ins[1]
            widened = widened_bytes(1, w.shape[0], int(np.prod(w.shape[1:])))
            pixels = int(np.prod(k.out.shape[2:])) if len(k.out.shape) > 2 else 0
            values["widen_weights"] = widened <= WIDEN_MAX_BYTES and \
                pixels >= WIDEN_MIN_PIXELS
            values["border_plane"] = 0 < self.border_bytes(k) <= BORDER_MAX_BYTES and \
                k.ins[0].shape[1] // k.node.attrs.get("group", 1) == 1
        return values

    @staticmethod
    def border_bytes(k) -> int:
        """The bordered input planes' scratch (0: no padding, or not a conv)."""
        a = k.node.attrs
        if "strides" not in a or len(k.ins[0].shape) < 3:
            return 0
        return border_plane_bytes(k, strides=a["strides"], pads=a["pads"],
                                  dilations=a["dilations"], group=a.get("group", 1))

    def faster_with_scratch(self, k, /, **attrs) -> dict:
        """The widened weights above WIDEN_MAX_BYTES, where the layer has the pixels to
        pay the widening back (and, as free_scratch checks, the widening applies: its
        scratch grows): a MobileNet's late pointwise layers, whose weights are large
        where the activations are small (vww_mobilenetv1_int8 on the Cortex-M4 about
        9 % fewer instructions at the same arena, measured by the tuner). Where those
        are on, the bordered planes of a layer with padding beyond the default's
        (ic_resnet8_int8: one layer, 13.63 M -> 13.59 M instructions)."""
        if not k.target.is_arm_dsp or k.out is None or len(k.out.shape) < 3:
            return {}
        # one at a time (free_scratch takes a kernel's values together or not at all): the
        # widened weights first, the larger gain; the bordered planes where those are on
        if not k.knobs.get("widen_weights", True):
            if int(np.prod(k.out.shape[2:])) >= WIDEN_MIN_PIXELS:
                return {"widen_weights": True}
        elif not k.knobs.get("border_plane", True) and self.border_bytes(k):
            return {"border_plane": True}
        return {}


class QConvDepthwiseBase(Schedule):
    """What the depthwise variants share: they read the plain weights."""
    op = "QConv"
    domain = "mtvm"
    variant: dict = {}

    def applies(self, k, /, **attrs) -> bool:
        return not attrs.get("folded", 1)

    def weight_layout(self, k, /, **attrs):
        return narrow_shifts(k)

    def scratch_bytes(self, k, /, **attrs) -> int:
        return qconv_scratch_bytes(k, **attrs)

    def emit(self, k, /, **attrs) -> str:
        return emit_qconv(k, **attrs, **self.variant)


@register
class QConvDepthwiseS8(QConvDepthwiseBase):
    """Rows of the window, the weights in locals (SMLAD pairs on Arm DSP cores)."""
    name = "qconv_s8.depthwise"
    family = "generic"
    priority = 0
