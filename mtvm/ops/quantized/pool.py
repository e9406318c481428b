"""Quantized pooling: QAvgPool (requantized window sums) and QMaxPool (directly on
the integers: max commutes with the monotone dequantization)."""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import (VOID, Assign, Cast, Const, Decl, ExprStmt, For, If, RawExpr,
                                Type, Var, and_, call, ge, gt, index_type, lt, render_c,
                                select)
from ..base import register
from .common import (
    DOMAIN,
    IntOp,
    conv_acc,
    conv_geometry,
    coord,
    finish,
    requantize_helper,
)


I32 = Type("int32")


def avgpool_table_index(table_size: int, taps: int, count_include_pad, inside, const=int):
    """The entry of QAvgPool's multiplier/shift tables a window uses: 0 where the tables
    have one entry (every window counts all its taps), else its element count -- `taps`
    (KH*KW) with padding counted, else `inside`, the taps inside the input (a value of
    the caller's kind: an array, a C or LLVM expression; `const` makes one of an int).
    The one rule of the reference, the C kernel and the LLVM nest."""
    if table_size == 1:
        return const(0)
    return const(taps) if count_include_pad else inside


@register("QAvgPool", domain=DOMAIN)
class QAvgPool(IntOp):
    """Average of (x - zx) over each window, requantized with the multiplier of
    its element count: inputs x, mult [KH*KW + 1], shift [KH*KW + 1] (index =
    count), or mult [1], shift [1] where every window counts KH*KW (padding
    counted, or none: a global pool's 150-entry tables were 1.2 KB of
    kws_dscnn_int8's flash). Global pooling is a window as large as the input; the
    output may have any shape of the same size (ReduceMean with keepdims=0)."""

    def reference(self, x, mult, shift, *, kernel_shape, strides, pads, count_include_pad=0,
                  x_zp=0, y_zp=0, act_min=-128, act_max=127, out_shape=None):
        n, c = x.shape[:2]
        xs = x.reshape(n, c, -1, x.shape[-1]) if x.ndim >= 3 else x.reshape(n, c, 1, 1)
        kh, kw = _pool2d(kernel_shape)
        geo = dict(strides=_pool2d(strides, 1), pads=_pool4(pads), dilations=[1, 1])
        acc, (oh, ow) = conv_acc(xs.astype(np.int64) - x_zp, np.ones((c, 1, kh, kw), np.int64),
                                 0, group=c, **geo)
        # taps inside the input: the same window sum over a tensor of ones
        inside = conv_acc(np.ones((1, 1) + xs.shape[2:], np.int64),
                          np.ones((1, 1, kh, kw), np.int64), 0, group=1, **geo)[0].ravel()
        cnt = avgpool_table_index(np.asarray(mult).size, kh * kw, count_include_pad, inside,
                                  const=lambda v: np.full(oh * ow, v, np.int64))
        m, s = np.asarray(mult)[cnt], np.asarray(shift)[cnt]
        out_dtype = np.int8 if act_min < 0 else np.uint8
        y = finish(acc, m, s, y_zp, act_min, act_max, out_dtype)
        return y.reshape(out_shape if out_shape is not None else (n, c, oh, ow))

    def emit(self, k, *, kernel_shape, strides, pads, count_include_pad=0, x_zp=0, y_zp=0,
             act_min=-128, act_max=127, out_shape=None):
        x, mult, shift = k.ins[:3]
        n, c = x.shape[:2]
        h = int(np.prod(x.shape[2:-1])) if len(x.shape) >= 4 else 1
        wd = x.shape[-1] if len(x.shape) >= 3 else 1
        kh, kw = _pool2d(kernel_shape)
        sh, sw = _pool2d(strides, 1)
        ph, pw, _, _ = _pool4(pads)
        _, _, _, _, oh, ow, *_ = conv_geometry((n, c, h, wd), (c, 1, kh, kw), [sh, sw],
                                               _pool4(pads), [1, 1])
        rq = requantize_helper(k)
        acc, cnt = Var("acc", I32), Var("cnt", I32)
        table_size = int(np.prod(mult.shape))
        n_taps = avgpool_table_index(table_size, kh * kw, count_include_pad, cnt, const=Const)
        # cnt counted but not read (the index a constant): cast to void for -Wextra
        return _window_nest(
            k, x, n=n, c=c, h=h, wd=wd, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, ph=ph, pw=pw,
            dh=1, dw=1,
            init=[Decl(acc, 0), Decl(cnt, 0)],
            tap=lambda v: [Assign(acc, _add(Cast(I32, v), -int(x_zp)), "+="),
                           Assign(cnt, 1, "+=")],
            finish=([ExprStmt(Cast(Type(VOID), cnt))] if n_taps is not cnt else []) + [
                Assign(acc, _add(call(rq, acc, Var(mult.c)[n_taps], Var(shift.c)[n_taps]),
                                 int(y_zp))),
                Assign(acc, select(lt(acc, act_min), act_min,
                                   select(gt(acc, act_max), act_max, acc)))],
            result=acc)


def _pool2d(v, fill=1):
    v = list(v)
    return [fill] * (2 - len(v)) + v if len(v) < 2 else v[-2:]


def _pool4(pads):
    p = list(pads or [])
    if len(p) == 4:
        return p
    if len(p) == 2:
        return [0, p[0], 0, p[1]]
    return [0, 0, 0, 0]


@register("QMaxPool", domain=DOMAIN)
class QMaxPool(IntOp):
    """Max over each window of an 8-bit tensor (input and output share scale and
    zero point, so no requantization; padding never wins)."""

    def reference(self, x, *, kernel_shape, strides, pads, dilations=None):
        n, c = x.shape[:2]
        xs = x.reshape(n, c, -1, x.shape[-1]) if x.ndim == 4 else x.reshape(n, c, 1, -1)
        kh, kw = _pool2d(kernel_shape)
        sh, sw = _pool2d(strides, 1)
        dh, dw = _pool2d(dilations or [1, 1], 1)
        ph, pw, pe_h, pe_w = _pool4(pads)
        lo = np.iinfo(x.dtype).min
        big = np.full((n, c, xs.shape[2] + ph + pe_h, xs.shape[3] + pw + pe_w), lo, x.dtype)
        big[:, :, ph:ph + xs.shape[2], pw:pw + xs.shape[3]] = xs
        _, _, _, _, oh, ow, *_ = conv_geometry(xs.shape, (c, 1, kh, kw), [sh, sw],
                                               [ph, pw, pe_h, pe_w], [dh, dw])
        y = np.full((n, c, oh, ow), lo, x.dtype)
        for i in range(kh):
            for j in range(kw):
                y = np.maximum(y, big[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                                      j * dw:j * dw + (ow - 1) * sw + 1:sw])
        return y.reshape((n, c, oh, ow) if x.ndim == 4 else (n, c, ow))

    def emit(self, k, *, kernel_shape, strides, pads, dilations=None):
        x = k.ins[0]
        n, c = x.shape[:2]
        h, wd = (x.shape[2], x.shape[3]) if len(x.shape) == 4 else (1, x.shape[-1])
        kh, kw = _pool2d(kernel_shape)
        sh, sw = _pool2d(strides, 1)
        dh, dw = _pool2d(dilations or [1, 1], 1)
        ph, pw, _, _ = _pool4(pads)
        _, _, _, _, oh, ow, *_ = conv_geometry((n, c, h, wd), (c, 1, kh, kw), [sh, sw],
                                               _pool4(pads), [dh, dw])
        m, v = Var("m", I32), Var("v", I32)
        return _window_nest(
            k, x, n=n, c=c, h=h, wd=wd, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, ph=ph, pw=pw,
            dh=dh, dw=dw, init=[Decl(m, int(np.iinfo(x.dtype).min))],
            tap=lambda x_at: [Decl(v, x_at), Assign(m, select(gt(v, m), v, m))],
            finish=[], result=m)


def _add(e, v: int):
    """e + v, written e - |v| for a negative v and e for 0 (as plus())."""
    return e + v if v > 0 else (e - (-v) if v < 0 else e)


def _window_nest(k, x, *, n, c, h, wd, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, init, tap,
                 finish, result) -> str:
    """C of a quantized pool's loop nest: per plane p and output pixel (oy, ox), `init`,
    then for each tap of the window inside the input the statements tap(x value), then
    `finish`; the int32 `result` stored, cast to the output type."""
    p, oy, ox, ky, kx = Var("p"), *(Var(v, I32) for v in ("oy", "ox", "ky", "kx"))
    ih, iw = Var("ih", I32), Var("iw", I32)
    xc = Var("xc", Type(x.dtype, pointer=True, const=True))
    x_at = xc[Cast(index_type(), ih) * wd + Cast(index_type(), iw)]
    cols = For(kx, kw, [Decl(iw, RawExpr(coord("ox", sw, pw, "kx", dw))),
                        If(and_(ge(iw, 0), lt(iw, wd)), tap(x_at))])
    rows = For(ky, kh, [Decl(ih, RawExpr(coord("oy", sh, ph, "ky", dh))),
                        If(and_(ge(ih, 0), lt(ih, h)), [cols])])
    y_at = Var("out0")[p * (oh * ow) + Cast(index_type(), oy) * ow + Cast(index_type(), ox)]
    pixel = list(init) + [rows] + list(finish) + [Assign(y_at, Cast(Type(k.out.dtype), result))]
    return render_c(For(p, n * c, [Decl(xc, Var(x.c) + p * (h * wd)),
                                   For(oy, oh, [For(ox, ow, pixel)])]))
