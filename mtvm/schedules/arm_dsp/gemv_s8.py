"""int8 QMatMul with fewer than four input rows (batch-1 fully connected layers: a
matrix-vector product with constant weights) on Armv7E-M/v8-M cores with the DSP
extension and without Helium (M4, M7, M33): the input row packed once into int16 pairs
in scratch, then four weight rows a pass (c_runtime/kernels/arm_dsp/mtvm_gemv_s8_dsp.h),
the weights laid out for it (interleaved_rows: per eight columns the four rows' bytes one
after the other, so one pointer walks a block of four rows with LDRDs): per 32 MACs two
LDRDs of the packed input plus four times (LDRD, four SXTB16, four SMLADs). With rows read
in place at their stride it took 21 instructions per 16 MACs; now 19 plus the loop (four
per 128 MACs): an autoencoder's 640 -> 64 and 64 -> 640 layers on the M4, 56,880 -> 51,120
and 61,640 -> 56,520 instructions, for the same flash.
The last nn % 4 weight rows go through the dense kernel's one-row dot product; weight
matrices under 1024 bytes keep the dense kernel (the flash would outweigh the
instructions saved; an autoencoder's 8 -> 128 layer, 1,024 bytes: 4,640 -> 2,920
instructions on the M4) unless they have 32 rows or more, where the per-output
requantization (SMMLA here, the dense kernel's 64-bit form there) outweighs it: an
autoencoder's 8 -> 64 bottleneck, 512 bytes, 2,360 -> 1,480 instructions for 356 bytes
more flash (a 64 -> 12 classifier keeps the dense kernel). The sums are the same exact
integers, so the outputs are the portable kernel's bit for bit.
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import Cast, Comment, Decl, ExprStmt, For, Type, Var, call, render_c
from ...ops.quantized.common import operands
from .. import Schedule, register
from .matmul_s8 import _I32, _ext, _stores, _words, requant_form, requant_layout

MIN_WEIGHTS = 1024   # smaller weight matrices keep the dense kernel...
MIN_ROWS = 32        # ...unless they have this many output rows


def interleaved_rows(w: np.ndarray) -> np.ndarray:
    """The weights [nn][kk] as mtvm_gemv4_8_dsp reads them: each block of four rows with,
    per eight columns, the eight bytes of row 0, 1, 2 and 3 in turn, then the four rows'
    kk % 8 last bytes row after row; the nn % 4 rows past the blocks as they are. The same
    bytes (and shape), another order."""
    nn, kk = w.shape
    n4, k8 = nn - nn % 4, kk - kk % 8
    blocks = w[:n4].reshape(n4 // 4, 4, kk)
    eights = blocks[:, :, :k8].reshape(n4 // 4, 4, k8 // 8, 8).transpose(0, 2, 1, 3)
    laid = np.concatenate([eights.reshape(n4 // 4, -1), blocks[:, :, k8:].reshape(n4 // 4, -1)],
                          axis=1)
    return np.concatenate([laid.ravel(), w[n4:].ravel()]).reshape(nn, kk)


@register
class QMatMulGemvDsp(Schedule):
    op = "QMatMul"
    domain = "mtvm"
    name = "qmatmul_s8.dsp_gemv"
    family = "arm_dsp"
    priority = 9

    def applies(self, k, /, **attrs) -> bool:
        x, w = k.ins[0], k.ins[1]
        if not k.target.is_arm_dsp or k.inplace is not None:
            return False
        if _ext(x) is None or _ext(w) is None or w.const is None or operands(k)[5] is not None:
            return False
        kk = x.shape[-1]
        # small layers (a classifier's last few outputs) stay with the dense kernel: the
        # packing and the assembly would cost more flash than their instructions save
        return x.size // kk < 4 and w.shape[0] >= 4 and kk >= 8 and \
            (w.size >= MIN_WEIGHTS or w.shape[0] >= MIN_ROWS)

    def scratch_bytes(self, k, /, **attrs) -> int:
        return 4 * _words(1, k.ins[0].shape[-1])

    def weight_layout(self, k, /, **attrs):
        return {1: interleaved_rows(np.asarray(k.ins[1].const)),
                **requant_layout(k, attrs.get("y_zp", 0))}

    def emit(self, k, /, *, x_zp=0, y_zp=0, act_min=-128, act_max=127,
             post_shift=None, post_min=None, post_max=None):
        # post_*: a folded bias Add (passes/matmul_bias.py), applied by _stores
        x, w, bias, mult, shift, _ = operands(k)
        kk, nn = x.shape[-1], w.shape[0]
        m = x.size // kk
        k.library("mtvm_mm_s8_dsp.h")
        k.library("mtvm_gemv_s8_dsp.h")
        rq = requant_form(k, y_zp)
        xp = Var("xp", Type("uint32", pointer=True))
        xr = Var("xr", Type(x.dtype, pointer=True, const=True))
        i, o = Var("i"), Var("o")
        accs = [Var(f"acc{r}", _I32) for r in range(4)]
        n4 = nn - nn % 4
        ex, ew = _ext(x), _ext(w)
        row = [Decl(xr, Var(x.c) + i * kk),
               ExprStmt(call(f"mtvm_packv_{ex}_dsp", xr, kk, 1, 1, 1, kk, xp))]
        inner = [Decl(accs[r], Var(bias.c)[o + r]) for r in range(4)]
        inner.append(ExprStmt(call(f"mtvm_gemv4_{ex}_{ew}_dsp", Var(w.c) + o * kk, xp, xr, kk,
                                   *accs)))
        inner += _stores(k, accs, 4, mult, shift, y_zp, act_min, act_max,
                         lambda r: f"o + {r}", lambda r: f"{k.out.c}[i * {nn} + o + {r}]",
                         rq)
        row.append(For(o, n4, inner, step=4))
        if nn % 4:
            from ...ops.quantized.matmul import dot_helper
            dot1 = dot_helper(k, x.dtype, w.dtype)
            tail = [Decl(accs[0], Var(bias.c)[o] + call(dot1, xr, Var(w.c) + o * kk, kk))]
            tail += _stores(k, accs[:1], 1, mult, shift, y_zp, act_min, act_max,
                            lambda r: "o", lambda r: f"{k.out.c}[i * {nn} + o]",
                            rq)
            row.append(For(o, nn, tail, begin=n4))
        body = [Comment(f"{x.c}: input [{m}][{kk}], {w.c}: weights [{nn}][{kk}] (transposed), "
                        f"{bias.c}: int32 bias; each input row packed into int16 pairs "
                        f"(scratch), four weight rows a pass (interleaved per eight "
                        f"columns)"),
                Decl(xp, Cast(xp.type, Var("scratch")))]
        if isinstance(rq, str):
            body.append(Comment(f"{rq}: (mult, rnd, sh) per output, the exact requantization "
                                "as (high word of acc * mult + rnd) >> sh"))
        body.append(For(i, m, row))
        return render_c(body)
