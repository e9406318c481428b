"""QMaxPool on Armv7E-M/v8-M DSP cores: unpadded 2-wide windows at stride 2 along the rows
(the 1-D MaxPool 2 of the IMU and audio nets; 1x2 and 2x2 windows in 2-D) four outputs a
step with the byte-wise SSUB8/SEL maximum (c_runtime/kernels/arm_dsp/mtvm_maxpool_8_dsp.h).
QAvgPool whose window is a plane's whole height and one column (a transformer's mean over
its tokens, ReduceMean over axis 1): the column sums four columns a step in int16 lanes
(mtvm_colsum4_8_dsp: LDR, two extends, two SADD16s a row), where the window loop took six
instructions a byte. QAvgPool whose window is a whole plane (GlobalAveragePool, a CNN's
last pool): four bytes a step with USADA8 (mtvm_planemean_8_dsp), where the window loop
took seven instructions a byte. The same integers as the portable window loops
(mtvm.ops.quantized.pool), which every other pool keeps.
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import Cast, ExprStmt, For, RawExpr, Type, Var, call, render_c
from ...ops.quantized.pool import _pool2d, _pool4
from .. import Schedule, register


def _geometry(k, kernel_shape, strides, pads, dilations):
    """(planes, rows in, width in, rows out, outputs a row, window rows) of a pool this
    schedule computes, or None."""
    x = k.ins[0]
    if np.dtype(x.dtype) not in (np.int8, np.uint8) or len(x.shape) not in (3, 4):
        return None
    kh, kw = _pool2d(kernel_shape)
    sh, sw = _pool2d(strides, 1)
    if kw != 2 or sw != 2 or kh not in (1, 2) or sh != kh or any(_pool4(pads)) or \
            any(d != 1 for d in (dilations or [1])):
        return None
    h, wd = (x.shape[2], x.shape[3]) if len(x.shape) == 4 else (1, x.shape[-1])
    oh, ow = (h - kh) // kh + 1, (wd - 2) // 2 + 1
    if oh < 1 or ow < 1:
        return None
    return x.shape[0] * x.shape[1], h, wd, oh, ow, kh


@register
class QMaxPoolDsp(Schedule):
    op = "QMaxPool"
    domain = "mtvm"
    name = "qmaxpool_s8.dsp_pairs"
    family = "arm_dsp"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        return k.target.is_arm_dsp and _geometry(
            k, attrs["kernel_shape"], attrs["strides"], attrs.get("pads", [0, 0]),
            attrs.get("dilations")) is not None

    def emit(self, k, /, *, kernel_shape, strides, pads, dilations=None) -> str:
        planes, h, wd, oh, ow, kh = _geometry(k, kernel_shape, strides, pads, dilations)
        x = k.ins[0]
        k.library("mtvm_maxpool_8_dsp.h")
        u = int(np.dtype(x.dtype) == np.uint8)
        u8c, u8 = Type("uint8", pointer=True, const=True), Type("uint8", pointer=True)
        xv, yv = Cast(u8c, Var(x.c)), Cast(u8, Var(k.out.c))
        second = (lambda at: xv + at + wd) if kh == 2 else (lambda at: RawExpr("NULL"))
        if wd == 2 * ow and (kh == 1 or h == 2 * oh):
            # every input row is used, pairs never straddle two rows: one run of rows
            rows = planes * oh
            if kh == 1:
                return render_c(ExprStmt(call("mtvm_maxpool2_8_dsp", xv, RawExpr("NULL"), yv,
                                              rows * ow, u)))
            r = Var("r")
            return render_c(For(r, rows, [ExprStmt(call(
                "mtvm_maxpool2_8_dsp", xv + r * (2 * wd), second(r * (2 * wd)), yv + r * ow,
                ow, u))]))
        p, oy = Var("p"), Var("oy")
        at = p * (h * wd) + oy * (kh * wd)
        return render_c(For(p, planes, [For(oy, oh, [ExprStmt(call(
            "mtvm_maxpool2_8_dsp", xv + at, second(at), yv + (p * oh + oy) * ow, ow, u))])]))


def _column_means(k, kernel_shape, strides, pads) -> tuple[int, int, int] | None:
    """(planes, rows, columns) of a QAvgPool this schedule computes -- each plane's window
    its whole height and one column, unpadded, one table entry (every window counts the
    rows), columns a multiple of 4, rows within int16 lanes -- or None."""
    x, mult = k.ins[0], k.ins[1]
    if np.dtype(x.dtype) not in (np.int8, np.uint8) or len(x.shape) != 4 or mult.size != 1:
        return None
    kh, kw = _pool2d(kernel_shape)
    h, wd = x.shape[2], x.shape[3]
    if kh != h or kw != 1 or any(_pool4(pads)) or _pool2d(strides, 1)[1] != 1 or wd % 4 or \
            h > (128 if np.dtype(x.dtype) == np.uint8 else 255):
        return None
    return x.shape[0] * x.shape[1], h, wd


@register
class QAvgPoolColumnsDsp(Schedule):
    op = "QAvgPool"
    domain = "mtvm"
    name = "qavgpool_s8.dsp_columns"
    family = "arm_dsp"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        return k.target.is_arm_dsp and _column_means(
            k, attrs["kernel_shape"], attrs.get("strides", [1, 1]), attrs.get("pads")) \
            is not None

    def emit(self, k, /, *, kernel_shape, strides=(1, 1), pads=None, count_include_pad=0,
             x_zp=0, y_zp=0, act_min=-128, act_max=127, out_shape=None) -> str:
        planes, h, wd = _column_means(k, kernel_shape, strides, pads)
        x, mult, shift = k.ins[:3]
        k.library("mtvm_colmean_8_dsp.h")
        u = int(np.dtype(x.dtype) == np.uint8)
        p = Var("p")
        u8c, u8 = Type("uint8", pointer=True, const=True), Type("uint8", pointer=True)
        return render_c([For(p, planes, [ExprStmt(call(
            "mtvm_colmean_8_dsp", Cast(u8c, Var(x.c)) + p * (h * wd), u, h, wd, int(x_zp),
            Var(mult.c)[0], Var(shift.c)[0], int(y_zp), int(act_min), int(act_max),
            Cast(u8, Var(k.out.c)) + p * wd))])])


def _plane_means(k, kernel_shape, pads) -> tuple[int, int] | None:
    """(planes, bytes a plane) of a QAvgPool this schedule computes -- each plane's window
    the whole plane, unpadded, one output a plane, one table entry -- or None."""
    x, mult = k.ins[0], k.ins[1]
    if np.dtype(x.dtype) not in (np.int8, np.uint8) or len(x.shape) not in (3, 4) or \
            mult.size != 1:
        return None
    h, wd = (x.shape[2], x.shape[3]) if len(x.shape) == 4 else (1, x.shape[-1])
    if list(_pool2d(kernel_shape)) != [h, wd] or any(_pool4(pads)):
        return None
    return x.shape[0] * x.shape[1], h * wd


@register
class QAvgPoolPlaneDsp(Schedule):
    op = "QAvgPool"
    domain = "mtvm"
    name = "qavgpool_s8.dsp_plane"
    family = "arm_dsp"
    priority = 10

    def applies(self, k, /, **attrs) -> bool:
        return k.target.is_arm_dsp and \
            _plane_means(k, attrs["kernel_shape"], attrs.get("pads")) is not None

    def emit(self, k, /, *, kernel_shape, strides=(1, 1), pads=None, count_include_pad=0,
             x_zp=0, y_zp=0, act_min=-128, act_max=127, out_shape=None) -> str:
        planes, n = _plane_means(k, kernel_shape, pads)
        x, mult, shift = k.ins[:3]
        k.library("mtvm_colmean_8_dsp.h")
        u8c, u8 = Type("uint8", pointer=True, const=True), Type("uint8", pointer=True)
        return render_c(ExprStmt(call(
            "mtvm_planemean_8_dsp", Cast(u8c, Var(x.c)), int(np.dtype(x.dtype) == np.uint8),
            planes, n, int(x_zp), Var(mult.c)[0], Var(shift.c)[0], int(y_zp), int(act_min),
            int(act_max), Cast(u8, Var(k.out.c)))))
