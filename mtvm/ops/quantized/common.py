"""Integer kernels of quantized models (domain "mtvm": created by the
QDQ -> integer pass, mtvm/passes/quantize.py, never read from ONNX).

Every kernel takes int8/uint8 tensors, accumulates in int32 and requantizes
with a fixed-point multiplier and shift, as TFLite and CMSIS-NN do:

    y = clamp(zero_point_y + requantize(acc, mult, shift), act_min, act_max)
    requantize(acc, m, s) = round(acc * m * 2^(s - 31))

computed from the exact 64-bit product with a single rounding (`mtvm_requantize`,
c_runtime/kernels/generic/mtvm_requantize.h; TFLite's and CMSIS-NN's single-rounding
mode). gemmlowp's double
rounding (rounding doubling high multiply, then rounding shift) was tried
first: it differed from onnxruntime (which rounds acc * scale once, in float)
on ~0.1-1% of the outputs of each layer; single rounding differs only where
float32 rounding in onnxruntime does (see docs/quantization.md). Nothing in these kernels
touches float at run time; `act_min`/`act_max` carry a fused Relu/Clip.

The constant inputs are prepared by the pass so the kernels do the least work:
weights stay as the model stores them (int8, per-channel scales), and the bias
input already holds the zero-point corrections

    sum_k (x_k - zx)(w_k - zw) + b  =  [b - zx*sum_k w_k + K*zx*zw] + sum_k x_k w_k - zw*sum_k x_k

so the inner loop is a plain int8 dot product (padding reads as zx). The dot
product has a Cortex-M DSP variant (SMLAD on pairs of sign-extended bytes,
`#if defined(__ARM_FEATURE_DSP)`), selected by the compiler flags alone; the
im2col convolution also has an x86 host variant (AVX2 / AVX-512 VNNI, `#if
defined(MTVM_INT8_X86)`, c_runtime/kernels/x86/mtvm_mm_s16_x86.h). All paths compute
the same exact integer sums, so results are bit-identical.

Each `reference` below is the bit-exact NumPy model of its C kernel.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import Op, c_literal

DOMAIN = "mtvm"


def quantize_multiplier(real) -> tuple[np.ndarray, np.ndarray]:
    """real ~= mult * 2^(shift - 31) with mult in [2^30, 2^31) (int32 arrays)."""
    real = np.atleast_1d(np.asarray(real, np.float64))
    mult, shift = np.zeros(real.shape, np.int32), np.zeros(real.shape, np.int32)
    for i, r in enumerate(real.ravel()):
        if r <= 0 or not math.isfinite(r):
            continue  # a zero multiplier: the term vanishes
        q, e = math.frexp(r)
        m = int(round(q * (1 << 31)))
        if m == 1 << 31:
            m //= 2
            e += 1
        if e < -31:                        # below the shift range: denormalize
            m = int(round(r * 2.0 ** 62))
            e = -31
        if e > 30:
            raise ValueError(f"requantization multiplier {r} is too large")
        if e <= -2 and ((m & -m).bit_length() - 1) >= -e and m * 2.0 ** (e - 31) != r \
                and (1 << 30) < m < (1 << 31) - 1:
            # The rounded mantissa happens to end in zeros though r is not exactly
            # representable: step one unit toward r (an odd mantissa; the error stays
            # below 2^-30) so no product can be an exact tie (see ties_impossible).
            m += 1 if m * 2.0 ** (e - 31) < r else -1
        mult.flat[i], shift.flat[i] = m, e
    return mult, shift


def round_shift(v, n) -> np.ndarray:
    """Bit-exact model of mtvm_round_shift: round(v / 2^n), halves to even."""
    v, n = np.asarray(v, np.int64), np.asarray(n, np.int64)
    return (v + (np.int64(1) << (n - 1)) - 1 + ((v >> n) & 1)) >> n


def requantize(acc, mult, shift) -> np.ndarray:
    """Bit-exact NumPy model of mtvm_requantize (int64 arrays, broadcasting)."""
    prod = np.asarray(acc, np.int64) * np.asarray(mult, np.int64)
    r = round_shift(prod, 31 - np.asarray(shift, np.int64))
    return np.clip(r, -(1 << 31), (1 << 31) - 1)


def finish(acc, mult, shift, y_zp, act_min, act_max, dtype):
    """requantize + zero point + clamp, as the kernels end."""
    v = requantize(acc, mult, shift) + y_zp
    return np.clip(v, act_min, act_max).astype(dtype)


INT8_EXT = {"int8": ("int8_t", "s8", "__sxtb16"), "uint8": ("uint8_t", "u8", "__uxtb16")}


INT8_EXT_ROR8 = {"__sxtb16": "mtvm_sxtb16_ror8", "__uxtb16": "mtvm_uxtb16_ror8"}


def requantize_helper(k) -> str:
    k.library("mtvm_requantize.h")
    return "mtvm_requantize"


def ties_impossible(mult, shift) -> bool:
    """True if round(acc * mult / 2^(31 - shift)) can never be an exact .5 for an
    int32 acc (then the cheap half-up rounding is bit-exact): a tie needs
    v2(acc) + v2(mult) = 30 - shift, and v2(acc) <= 30."""
    if mult is None or shift is None:
        return False
    for m, s in zip(np.asarray(mult).ravel().tolist(), np.asarray(shift).ravel().tolist()):
        if s > -2 or m <= 0 or ((m & -m).bit_length() - 1) >= -s:
            return False
    return True


def requantize_fn(k, mult, shift) -> str:
    """The requantization routine for constant multipliers: the cheap one when exact."""
    if mult is not None and shift is not None and mult.const is not None and \
            shift.const is not None and ties_impossible(mult.const, shift.const):
        requantize_helper(k)
        k.library("mtvm_requantize_nt.h")
        return "mtvm_requantize_nt"
    return requantize_helper(k)


def per_channel(buf, index: str) -> str:
    """C expression of a per-channel parameter array (a literal when it has one value)."""
    if buf.const is not None and buf.size == 1:
        return c_literal(buf.const.ravel()[0], buf.dtype)
    return f"{buf.c}[{index}]"


def store_lines(k, acc: str, y_zp: int, act_min: int, act_max: int, mult, shift, ch: str,
                dst: str) -> list[str]:
    """C lines: requantize `acc` with channel `ch`'s multiplier, clamp, store to `dst`."""
    rq = requantize_fn(k, mult, shift)
    return [f"{acc} = {rq}({acc}, {per_channel(mult, ch)}, {per_channel(shift, ch)}){plus(y_zp)};"
            ] + clamp_store_lines(k, acc, act_min, act_max, dst, ch)


def _clamp_lines(k, acc: str, act_min: int, act_max: int) -> list[str]:
    clamp = f"{acc} = {acc} < {act_min} ? {act_min} : ({acc} > {act_max} ? {act_max} : {acc});"
    sat = {(-128, 127): "__ssat", (0, 255): "__usat"}.get((int(act_min), int(act_max)))
    if sat:   # the whole 8-bit range: one saturating instruction on a DSP core
        k.library("mtvm_dsp.h")
        return ["#if defined(__ARM_FEATURE_DSP)", f"{acc} = {sat}({acc}, 8);", "#else", clamp,
                "#endif"]
    return [clamp]


def has_post_add(k) -> bool:
    """Whether the kernel's QMatMul ends with a folded bias Add (passes/matmul_bias.py)."""
    return k.node.op == "QMatMul" and "post_shift" in k.node.attrs


def post_add_pairs(post) -> tuple[np.ndarray, np.ndarray]:
    """(c, ia) of a folded bias Add's constants: per column of [N][2], or the columns'
    c and the one ia of [N + 1] (passes/matmul_bias.py)."""
    p = np.asarray(post)
    return (p[:-1], p[-1]) if p.ndim == 1 else (p[:, 0], p[:, 1])


def post_add_lines(k, acc: str, ch: str) -> list[str]:
    """C lines taking a clamped 8-bit `acc` of output column `ch` through the QMatMul's
    folded bias Add: (c + acc ia) >> n with (c, ia) the column's pair of input 6, or its
    entry and the one ia after the columns' ([N + 1]), clamped (no lines without one)."""
    if not has_post_add(k):
        return []
    a = k.node.attrs
    post = k.ins[6]
    term = f"{post.c}[{ch}] + {acc} * {post.c}[{post.size - 1}]" if len(post.shape) == 1 \
        else f"{post.c}[2 * ({ch})] + {acc} * {post.c}[2 * ({ch}) + 1]"
    return ([f"{acc} = ({term}) >> {int(a['post_shift'])};"]
            + _clamp_lines(k, acc, a["post_min"], a["post_max"]))


def clamp_store_lines(k, acc: str, act_min: int, act_max: int, dst: str,
                      ch: str | None = None) -> list[str]:
    """C lines: clamp a requantized `acc` and store it to `dst` (a QMatMul's folded bias
    Add of output column `ch` in between: post_add_lines)."""
    post = post_add_lines(k, acc, ch) if ch is not None else []
    if has_post_add(k) and ch is None:
        raise AssertionError(f"{k.fname}: a folded bias Add needs the output column")
    return _clamp_lines(k, acc, act_min, act_max) + post + [f"{dst} = ({k.out.ctype}){acc};"]


def plus(v: int) -> str:
    """' + v' / ' - |v|' / '' : a readable C term adding integer v."""
    v = int(v)
    return f" + {v}" if v > 0 else (f" - {-v}" if v < 0 else "")


def minus(v: int) -> str:
    return plus(-int(v))


def coord(o: str, stride: int, pad: int, k: str, dil: int) -> str:
    """C expression o * stride - pad + k * dil, without the * 1 and - 0."""
    s = o if stride == 1 else f"{o} * {stride}"
    s += minus(pad)
    return s + (f" + {k}" if dil == 1 else f" + {k} * {dil}")


def indent_c(lines, n=1) -> list[str]:
    """Indent C lines (preprocessor lines stay at the margin)."""
    return ["    " * n + line if line and not line.startswith("#") else line for line in lines]


class IntOp(Op):
    """Common shape rule: the pass creates the output tensor itself."""
    elementwise_inplace = False   # out[i] depends on in0[i] only: may overwrite input 0

    def infer(self, node, inputs, consts):
        raise NotImplementedError("integer kernels are created by the quantization pass")

    def inplace_input(self, node, graph):
        """Input 0's buffer may take the output (the planner decides, see
        memory.inplace_steps) when each output element is computed from the input
        elements at or before it in the same position, as for these per-element kernels."""
        if not self.elementwise_inplace:
            return None
        x, y = graph.tensors[node.inputs[0]], graph.tensors[node.kernel_outputs[0]]
        return 0 if tuple(x.shape) == tuple(y.shape) and x.dtype == y.dtype else None


def operands(k) -> tuple:
    """(x, w, bias, mult, shift, w_zp) of a QConv or QMatMul kernel: its inputs in
    the quantization pass's order, the optional ones None (no mult/shift: the
    int32 accumulator is the output; no w_zp: symmetric weights)."""
    ins = list(k.ins) + [None] * 6
    return ins[0], ins[1], ins[2], ins[3], ins[4], ins[5]


def narrow_shifts(k) -> dict:
    """Schedule.weight_layout's part for a QConv on an Arm DSP core: the per-channel
    shifts (input 4) as int8, a quarter of their flash. The Thumb kernels index them
    in C (a byte load is as cheap as a word load there); the x86 and Helium kernels
    load them as int32 vectors, so they keep the model's int32."""
    shift = k.ins[4] if len(k.ins) > 4 else None
    if not k.target.is_arm_dsp or shift is None or shift.const is None or shift.size == 1 or \
            shift.dtype != np.int32:
        return {}
    v = np.asarray(shift.const)
    if v.min() < -128 or v.max() > 127:
        return {}
    return {4: v.astype(np.int8)}


def shift_table_m1(shift) -> np.ndarray | None:
    """The int8 table of m - 1 = -2 - shift (m = -1 - shift, the right shift of the
    requantization) for per-channel constant shifts, or None: what the Arm DSP QConv
    kernels index instead of the model's shifts (computing m from them took gcc three
    instructions a channel); right_shift reads either."""
    if shift is None or shift.const is None or shift.size == 1:
        return None
    return (-2 - np.asarray(shift.const, np.int64).ravel()).astype(np.int8)


def right_shift(shift, ch: str, m1_table: bool) -> str:
    """C of channel ch's right shift m = -1 - shift, its table holding the model's shifts
    or (m1_table) m - 1 (shift_table_m1)."""
    return f"{per_channel(shift, ch)} + 1" if m1_table else f"-1 - {per_channel(shift, ch)}"


def conv_geometry(x_shape, w_shape, strides, pads, dilations):
    """(H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw) for a 1-D or 2-D convolution."""
    if len(x_shape) == 3:
        x_shape, w_shape = (*x_shape[:2], 1, x_shape[2]), (*w_shape[:2], 1, w_shape[2])
        strides, dilations = [1, strides[0]], [1, dilations[0]]
        pads = [0, pads[0], 0, pads[1]]
    h, w = x_shape[2], x_shape[3]
    kh, kw = w_shape[2], w_shape[3]
    oh = (h + pads[0] + pads[2] - ((kh - 1) * dilations[0] + 1)) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - ((kw - 1) * dilations[1] + 1)) // strides[1] + 1
    return h, w, kh, kw, oh, ow, strides[0], strides[1], pads[0], pads[1], dilations[0], \
        dilations[1]


def conv_acc(x, w, x_zp, strides, pads, dilations, group, w_zp=None):
    """int64 sum over taps of xpad * w - w_zp[oc] * sum over taps of xpad (xpad: x
    padded with x_zp), shape (N, OC, OH*OW), as the kernel computes it."""
    n, c = x.shape[:2]
    oc = w.shape[0]
    h, wd, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = conv_geometry(
        x.shape, w.shape, strides, pads, dilations)
    x4 = x.reshape(n, c, h, wd).astype(np.int64)
    w4 = w.reshape(oc, w.shape[1], kh, kw).astype(np.int64)
    big = np.full((n, c, h + ph + (oh - 1) * sh + (kh - 1) * dh + 1,
                   wd + pw + (ow - 1) * sw + (kw - 1) * dw + 1), x_zp, np.int64)
    big[:, :, ph:ph + h, pw:pw + wd] = x4
    cols = np.empty((n, c, kh, kw, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = big[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                                   j * dw:j * dw + (ow - 1) * sw + 1:sw]
    cg, mg = c // group, oc // group
    cols = cols.reshape(n, group, cg * kh * kw, oh * ow)
    wg = w4.reshape(group, mg, cg * kh * kw)
    acc = np.einsum("ngkp,gmk->ngmp", cols, wg).reshape(n, oc, oh * ow)
    if w_zp is not None:
        colsum = cols.sum(axis=2)                                    # n, g, p
        zw = np.asarray(w_zp, np.int64).reshape(group, mg)
        acc -= (zw[None, :, :, None] * colsum[:, :, None, :]).reshape(n, oc, oh * ow)
    return acc, (oh, ow)
