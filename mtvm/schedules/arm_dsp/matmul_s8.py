"""int8 QMatMul and QBatchMatMul on Armv7E-M/v8-M cores with the DSP extension (M4, M7,
M33; not Helium cores, whose own dot products the op files choose): one operand packed once
per call into int16 pairs in scratch, 4 to 6 vectors interleaved (`vectors`), and the other
read in place as bytes -- one LDR and two SXTB16 per four of its bytes, then an LDRD and
two SMLADs per packed vector (c_runtime/kernels/arm_dsp/mtvm_mm_s8_dsp.h): 3 + 3 v
instructions per 4 v MACs (15 per 16 with four vectors, 18 per 20 with five) where the
portable dense kernel widens both operands (23 per 16).

QMatMul packs v rows of x and runs through every weight row (a block of v outputs of one
channel a pass, its multiplier and shift loaded once); QBatchMatMul packs b's columns, v a
block, per batch entry, and runs each row of a through them. The sums are the same exact
integers, so the outputs are the portable kernels' bit for bit.
"""
from __future__ import annotations

import numpy as np

from ...codegen.cwriter import (Assign, Cast, Comment, Const, Decl, ExprStmt, For, Raw,
                                RawExpr, Type, Var, call, lt, render_c, select)
from ...ops.quantized.common import (INT8_EXT, clamp_store_lines, has_post_add, operands,
                                     per_channel, post_add_pairs, store_lines)
from .. import Knob, Schedule, register

_I32 = Type("int32")


def _ext(buf) -> str | None:
    """'s8' / 'u8' of an 8-bit buffer, else None."""
    e = INT8_EXT.get(np.dtype(buf.dtype).name)
    return e[1] if e else None


def _words(v: int, n: int) -> int:
    """Words of one packed block of v vectors of n elements (MTVM_PACKV_WORDS)."""
    return 2 * v * ((n + 3) // 4)


def vectors(count: int, n: int) -> int:
    """How many vectors a packed block holds (4, 5 or 6: the sums the micro-kernel keeps in
    registers), for `count` vectors of n elements: the fewest instructions, a partial last
    block computing zeros (3 + 3 v per group of four elements, about 16 per block and
    pass outside the loop)."""
    groups = (n + 3) // 4
    return min((4, 5, 6), key=lambda v: -(-count // v) * (groups * (3 + 3 * v) + 16))


def fast_requant_table(k, y_zp: int) -> np.ndarray | None:
    """[C][3] int32 (mult, rnd, sh) per output channel of a QMatMul with constant weights,
    where (high word of acc * mult + rnd) >> sh is its exact requantization plus the output
    zero point (no tie, no overflow within the accumulator's bound:
    depthwise._fast_requant / fast_requant_bounded): SMMLA and ASR
    (mtvm_dw_requantize) instead of the 64-bit product's rounding; None elsewhere. Read
    from the plain inputs (the table itself takes the multipliers' place: requant_layout)."""
    from ...ops.quantized.depthwise import _fast_requant, fast_requant_bounded
    x, w, bias, mult, shift, w_zp = (k.plain(i) if i < len(k.ins) and k.ins[i] is not None
                                     else None for i in range(6))
    if w_zp is not None or bias is None or w.const is None or mult is None or \
            shift is None or mult.const is None or shift.const is None:
        return None
    if not (_fast_requant(k, bias, w, None, mult, shift, y_zp, x) or
            fast_requant_bounded(k, bias, w, None, mult, shift, y_zp, x)):
        return None
    nn = w.shape[0]
    m = -1 - np.broadcast_to(np.asarray(shift.const, np.int64).ravel(), (nn,))
    rnd = (np.int64(1) << (m - 1)) + int(y_zp) * (np.int64(1) << m)
    mv = np.broadcast_to(np.asarray(mult.const, np.int64).ravel(), (nn,))
    return np.stack([mv, rnd, m], axis=1).astype(np.int32)


def requant_layout(k, y_zp: int) -> dict:
    """Schedule.weight_layout's part for fast_requant_table: with per-channel multipliers,
    the table replaces them (input 3, flattened) and the shifts shrink to one unused
    value (input 4), so the flash holds 12 bytes a channel where it held 8, not 20."""
    table = fast_requant_table(k, y_zp)
    if table is None or k.plain(3).size == 1 and k.plain(4).size == 1:
        return {}
    return {3: table.ravel(), 4: np.zeros(1, np.int32)}


def requant_form(k, y_zp: int):
    """How _stores requantizes: the laid-out table's C name (requant_layout), the
    (mult, rnd, sh) of a per-tensor requantization as literals, or None (store_lines)."""
    if 3 in k.plain_ins:
        return k.ins[3].c
    table = fast_requant_table(k, y_zp)
    return None if table is None else tuple(int(v) for v in table[0])


def _stores(k, accs, nv, mult, shift, y_zp, act_min, act_max, ch, dst, rq=None) -> list:
    """Requantize and store sums accs[r], r < nv (channel ch(r), address dst(r)); with rq
    (requant_form: a table's name or three literals), by the SMMLA form."""
    out = []
    for r in range(nv):
        if mult is None:
            out.append(Assign(RawExpr(dst(r)), accs[r]))
        elif rq is not None:
            c = f"3 * ({ch(r)})"
            k.library("mtvm_depthwise_s8.h")
            args = [Const(int(v), "int32") for v in rq] if isinstance(rq, tuple) else \
                [RawExpr(f"{rq}[{c}{off}]") for off in ("", " + 1", " + 2")]
            out.append(Assign(accs[r], call("mtvm_dw_requantize", accs[r], *args)))
            out.append(Raw("\n".join(clamp_store_lines(k, accs[r].name, act_min, act_max,
                                                       dst(r), ch(r)))))
        else:
            out.append(Raw("\n".join(store_lines(k, accs[r].name, y_zp, act_min, act_max, mult,
                                                 shift, ch(r), dst(r)))))
    return out


def _row_blocks(m: int, v: int, block) -> list:
    """The loop over the blocks of v of m rows; block(row, text): the statements of the
    block from row `row` (text: its C). Where v does not divide m the last block overlaps
    the one before (rows m - v .. m - 1, some computed twice, the same values stored
    again): as many dot products as a zero-padded partial block, and one copy of the
    block's code instead of two."""
    i = Var("i")
    if not m % v:
        return [For(i, m, block(i, "i"), step=v)]
    i0 = Var("i0")
    return [Comment(f"the last block is rows {m - v} .. {m - 1}, overlapping the one before: "
                    "one copy of the code"),
            For(i, m, [Decl(i0, select(lt(i, m - v), i, m - v))] + block(i0, "i0"), step=v)]


def _fused_vectors(m: int, kk: int) -> int:
    """`vectors` among the fused kernel's 4 and 5 (its 13 registers hold 5 sums)."""
    groups = kk // 4
    return min((4, 5), key=lambda v: -(-m // v) * (groups * (3 + 3 * v) + 16))


def fused_applies(k, attrs: dict) -> bool:
    """Whether QMatMulDsp takes the fused kernel (mtvm_mm_rq_s8_dsp.h): int8 rows and
    weights, no weight zero points, the SMMLA requantization (fast_requant_table), the
    whole int8 range out, a depth in whole groups of four, and a folded bias Add (if any)
    clamped to the whole range too; the rows' stores at constant offsets (STRB's 12 bits)."""
    x, w = k.plain(0), k.plain(1)
    if _ext(x) != "s8" or _ext(w) != "s8" or operands(k)[5] is not None:
        return False
    kk, nn = x.shape[-1], w.shape[0]
    m = x.size // kk
    if kk % 4 or m < 4 or (attrs.get("act_min", -128), attrs.get("act_max", 127)) != (-128, 127):
        return False
    if has_post_add(k) and ((attrs.get("post_min"), attrs.get("post_max")) != (-128, 127) or
                            not 0 <= int(attrs["post_shift"]) < 32):
        return False
    if (_fused_vectors(m, kk) - 1) * nn >= 4096:
        return False
    return fast_requant_table(k, attrs.get("y_zp", 0)) is not None



def rq_step_form(kk: int) -> str:
    """The fused loop's step form of a depth of kk (a multiple of 4; MTVM_MM_RQ_STEPS):
    eight groups a step, four with 0-3 after the loop, two, one. Depths of one form share
    a copy of the loop."""
    g = kk // 4
    if g % 8 == 0 and g >= 16:
        return "8"
    if g >= 4:
        return f"4t{g % 4}"
    return "2" if g % 2 == 0 else "1"


def fused_post(k) -> int:
    """The fused kernel's `post`: 0 without a folded bias Add, 1 with one whose ia is one
    value for all columns (the table holds it once, after the columns), 2 with an ia per
    column."""
    if not has_post_add(k):
        return 0
    return 1 if np.asarray(k.plain(6).const).ndim == 1 else 2


PACKED = 4   # MTVM_MM_RQ_PACKED of mtvm_mm_rq_s8_dsp.h: rnd | sh in one word
# The least depth whose layers pack rnd | sh by default: the unpacking's one instruction a
# column and block of 4-5 rows is then at most 0.5 % of the layer (at a depth of 32, 0.7 %:
# transformer_v11_int8 would go from 1.4995 instructions a MAC to 1.503), for 4 bytes of
# flash a column (transformer_v14_int8, depth 48: 1.08 -> 1.04 of emx-onnx-cgen's).
PACK_MIN_DEPTH = 48


def fused_packed(k, y_zp: int) -> bool:
    """Whether the fused kernel's table holds rnd | sh in one word: the knob pack_shifts on
    and every sh from 6 to 31 (rnd = 2^(sh - 1) + zp 2^sh then has its low five bits
    clear)."""
    if not k.knobs.get("pack_shifts", False):
        return False
    sh = fast_requant_table(k, y_zp)[:, 2]
    return bool(np.all((sh >= 6) & (sh <= 31)))


def fused_table(k, y_zp: int) -> np.ndarray:
    """The fused kernel's parameters (int32, flat): per output channel bias, mult, rnd, sh
    (fast_requant_table; rnd | sh in one word where fused_packed) and with a folded bias
    Add its c and (post 2) ia; with post 1 the one ia after the last channel."""
    nn = k.plain(1).shape[0]
    bias = np.broadcast_to(np.asarray(k.plain(2).const, np.int64).ravel(), (nn,))
    rq = fast_requant_table(k, y_zp).astype(np.int64)
    if fused_packed(k, y_zp):
        rq = np.stack([rq[:, 0], rq[:, 1] | rq[:, 2]], axis=1)
    cols = [bias[:, None], rq]
    post = fused_post(k)
    if post:
        c, ia = post_add_pairs(k.plain(6).const)
        cols.append(np.asarray(c, np.int64).reshape(nn, 1))
        if post == 2:
            cols.append(np.asarray(ia, np.int64).reshape(nn, 1))
    table = np.concatenate(cols, axis=1).ravel()
    if post == 1:
        table = np.append(table, int(np.asarray(ia).ravel()[0]))
    return table.astype(np.int32)


@register
class QMatMulDsp(Schedule):
    op = "QMatMul"
    domain = "mtvm"
    name = "qmatmul_s8.dsp_packed"
    family = "arm_dsp"
    priority = 10
    knobs = (Knob("widen_weights", False, (False, True),
                  "the fused kernel's weights widened to int16 pairs in scratch once a call"),
             Knob("pack_shifts", False, (False, True),
                  "the fused kernel's table with rnd | sh in one word (less flash, an "
                  "instruction more a column and block of rows)"))

    def default_knobs(self, k=None) -> dict:
        """pack_shifts from a depth of PACK_MIN_DEPTH on."""
        values = super().default_knobs(k)
        if k is not None and k.ins and k.ins[0] is not None and len(k.ins[0].shape):
            values["pack_shifts"] = k.ins[0].shape[-1] >= PACK_MIN_DEPTH
        return values

    def applies(self, k, /, **attrs) -> bool:
        x, w = k.ins[0], k.ins[1]
        if not k.target.is_arm_dsp or k.inplace is not None:
            return False
        if _ext(x) is None or _ext(w) is None or w.const is None:
            return False
        return x.size // x.shape[-1] >= 4    # a row at a time stays with the dense kernel

    @staticmethod
    def _widened(k, attrs) -> int:
        """Bytes of the widened weights (2 per weight; 0 where the knob is off or the
        fused kernel does not apply)."""
        if not k.knobs.get("widen_weights", False) or not fused_applies(k, attrs):
            return 0
        return 2 * k.plain(1).size

    def scratch_bytes(self, k, /, **attrs) -> int:
        x = k.ins[0]
        kk = x.shape[-1]
        v = _fused_vectors(x.size // kk, kk) if fused_applies(k, attrs) else \
            vectors(x.size // kk, kk)
        return 4 * _words(v, kk) + self._widened(k, attrs)

    def faster_with_scratch(self, k, /, **attrs) -> dict:
        """The widened weights where the fused kernel runs (one LDRD a group of four
        weights per block of rows where it takes an LDR and two SXTB16; the widening, about
        two instructions a weight, is paid back from the second block): taken where the
        planned arena does not grow. transformer_v11_int8's 32 x 32 projections on the
        Cortex-M4: 65.8 K -> 62.5 K instructions each."""
        if not fused_applies(k, attrs) or k.knobs.get("widen_weights", False):
            return {}
        kk = k.plain(0).shape[-1]
        blocks = -(-(k.plain(0).size // kk) // _fused_vectors(k.plain(0).size // kk, kk))
        return {"widen_weights": True} if blocks >= 2 else {}

    def weight_layout(self, k, /, **attrs):
        if fused_applies(k, attrs):   # one table: the bias, the requantization, the Add
            one = np.zeros(1, np.int32)
            out = {2: one, 3: fused_table(k, attrs.get("y_zp", 0)), 4: one}
            if has_post_add(k):
                out[6] = one
            return out
        return requant_layout(k, attrs.get("y_zp", 0))

    def emit(self, k, /, *, x_zp=0, y_zp=0, act_min=-128, act_max=127,
             post_shift=None, post_min=None, post_max=None):
        # post_*: a folded bias Add (passes/matmul_bias.py), applied by _stores
        attrs = dict(y_zp=y_zp, act_min=act_min, act_max=act_max, post_shift=post_shift,
                     post_min=post_min, post_max=post_max)
        if fused_applies(k, attrs):
            return self._emit_fused(k, post_shift, attrs)
        x, w, bias, mult, shift, w_zp = operands(k)
        kk, nn = x.shape[-1], w.shape[0]
        m = x.size // kk
        v = vectors(m, kk)
        k.library("mtvm_mm_s8_dsp.h")
        pk = Var("pk", Type("uint32", pointer=True))
        o = Var("o")
        accs = [Var(f"acc{r}", _I32) for r in range(v)]
        asums = [Var(f"asum{r}", _I32) for r in range(v)]
        xv = Var(x.c, Type(x.dtype, pointer=True, const=True))
        rq = requant_form(k, y_zp)

        def block(i0, row: str) -> list:
            """Rows i0 .. i0 + v - 1 (row: C text of i0)."""
            s = [ExprStmt(call(f"mtvm_packv_{_ext(x)}_dsp", xv + i0 * kk, kk, 1, v, v, kk, pk))]
            if w_zp is not None:
                s += [Decl(asums[r], call(f"mtvm_sum_{_ext(x)}_dsp", xv + (i0 + r) * kk, kk))
                      for r in range(v)]
            inner = [Decl(a, Var(bias.c)[o]) for a in accs]
            inner.append(ExprStmt(call(f"mtvm_dot{v}p_{_ext(w)}_dsp", Var(w.c) + o * kk, pk,
                                       kk, *accs)))
            if w_zp is not None:
                wz = RawExpr(per_channel(w_zp, "o"))
                inner += [Assign(accs[r], wz * asums[r], "-=") for r in range(v)]
            # the v stores through one pointer at constant offsets: v pointers of their
            # own do not stay in registers beside the v sums and the dot's operands
            yo = Var("yo", Type(k.out.dtype, pointer=True))
            inner += [Decl(yo, Var(k.out.c) + RawExpr(f"{row} * {nn} + o"))]
            inner += _stores(k, accs, v, mult, shift, y_zp, act_min, act_max,
                             lambda r: "o", lambda r: f"yo[{r * nn}]", rq)
            return s + [For(o, nn, inner)]

        body = [Comment(f"{x.c}: input [{m}][{kk}], {w.c}: weights [{nn}][{kk}] (transposed), "
                        f"{bias.c}: int32 bias; {v} rows of the input packed into int16 pairs "
                        f"(scratch), each weight row read once per {v} rows"),
                Decl(pk, Cast(pk.type, Var("scratch")))]
        if isinstance(rq, str):
            body.append(Comment(f"{rq}: (mult, rnd, sh) per channel, the exact requantization "
                                "as (high word of acc * mult + rnd) >> sh"))
        # v <= m: applies() asks for 4 rows or more, and `vectors` never takes more
        # vectors than rows (one block of 4 costs less than one of 5 or 6)
        assert v <= m, (v, m)
        return render_c(body + _row_blocks(m, v, block))

    def _emit_fused(self, k, post_shift, attrs) -> str:
        """Per block of v rows: the rows packed, then one call of the fused kernel over
        every weight row (mtvm_mm_rq_s8_dsp.h)."""
        x, w, prm = k.ins[0], k.ins[1], k.ins[3]
        kk, nn = x.shape[-1], w.shape[0]
        m = x.size // kk
        v = _fused_vectors(m, kk)
        post = fused_post(k)
        k.library("mtvm_mm_s8_dsp.h")
        k.library("mtvm_mm_rq_s8_dsp.h")
        pk = Var("pk", Type("uint32", pointer=True))
        xv = Var(x.c, Type(x.dtype, pointer=True, const=True))

        shift = int(post_shift) if post else 0
        wide = 1 if self._widened(k, attrs) else 0
        packed = fused_packed(k, attrs.get("y_zp", 0))
        # one out-of-line copy per step form of the depth and output width
        # (mtvm_mm_rq_s8_dsp.h, MTVM_DEFINE_MM_RQ_S8_DSP_K: the depth an argument)
        form = rq_step_form(kk)
        fn = f"mtvm_mm_rq_s8_dsp_{v}xk{form}x{nn}" + (f"_add{post}s{shift}" if post else "") + \
            ("_w" if wide else "") + ("_p" if packed else "")
        if fn not in k.helpers:
            k.helper(fn, f"MTVM_DEFINE_MM_RQ_S8_DSP_K({fn}, {v}, {kk}, {nn}, {nn}, "
                     f"{post | (PACKED if packed else 0)}, {shift}, {wide})")
        # the widened weights after the packed rows (word-aligned: whole groups of words)
        ww = Var("ww", Type("uint32", pointer=True))
        weights = Cast(Type("int8", pointer=True, const=True), ww) if wide else Var(w.c)

        def block(row) -> list:
            return [ExprStmt(call("mtvm_packv_s8_dsp", xv + row * kk, kk, 1, v, v, kk, pk)),
                    ExprStmt(call(fn, weights, pk, Var(prm.c), Var(k.out.c) + row * nn, kk))]
        body = [Comment(f"{x.c}: input [{m}][{kk}], {w.c}: weights [{nn}][{kk}] (transposed), "
                        f"{v} rows of the input packed into int16 pairs (scratch), then per "
                        f"weight row their {v} sums, requantized"
                        + (" and through the folded bias Add" if post else "")
                        + f" and stored in one loop; {prm.c}: per channel bias, mult, "
                        + ("rnd | sh" if packed else "rnd, sh")
                        + {0: "", 1: ", c (then the Add's one ia)", 2: ", c, ia"}[post]
                + ("; the weights widened to int16 pairs once a call (scratch after the rows)"
                   if wide else "")),
                Decl(pk, Cast(pk.type, Var("scratch")))]
        if wide:
            body += [Decl(ww, pk + _words(v, kk)),
                     ExprStmt(call("mtvm_mm_rq_widen_s8", Var(w.c), nn * kk, ww))]
        return render_c(body + _row_blocks(m, v, lambda row, _: block(row)))


def _batch_requant_form(mult, shift, y_zp: int) -> tuple[int, int, int] | None:
    """A QBatchMatMul's per-tensor requantization as (mult, rnd, sh) literals for the
    SMMLA form (mtvm_dw_requantize), where no product of an int32 sum is a tie and the
    rounding constant fits (fast_requant): two instructions where store_lines takes
    five, with the zero point folded in -- a third of kwt_tiny_int8's attention
    scores' instructions were their requantization (16 MACs an output)."""
    from ...ops.quantized.conv import fast_requant
    if mult is None or shift is None or mult.size != 1 or shift.size != 1:
        return None
    m = fast_requant(mult, shift, y_zp)
    if m is None:
        return None
    sh = int(m[0])
    return (int(np.asarray(mult.const).ravel()[0]),
            (1 << (sh - 1)) + int(y_zp) * (1 << sh), sh)


def _row_copy(kk: int) -> int:
    """Bytes of the copy of a's row that QBatchMatMulDsp reads where the depth kk is not a
    multiple of four (0 where it is): the dot product then runs over whole groups of four
    (the packed columns hold zeros past kk, so the copy's last bytes, never written, add
    nothing) and never reads past a's last row. With the last odd group in assembly
    (mtvm_mm_s8_dsp.h), attention weights times values at a depth of 49 tokens,
    transformer_v9_int8's, went from 121,080 to 112,040 instructions."""
    return (kk + 3) // 4 * 4 if kk % 4 else 0


@register
class QBatchMatMulDsp(Schedule):
    op = "QBatchMatMul"
    domain = "mtvm"
    name = "qbatchmatmul_s8.dsp_packed"
    family = "arm_dsp"
    priority = 10
    knobs = (Knob("fused_chunks", 0, (0, 1, 2, 3),
                  "b's columns widened without their zero point (in this many chunks) and "
                  "a's rows through the fused QMatMul loop; 0: the packed columns"),)

    def default_knobs(self, k=None) -> dict:
        """The fused form in the fewest chunks whose scratch is no more than the packed
        columns' (so the arena cannot grow); faster_with_scratch offers one chunk."""
        values = super().default_knobs(k)
        if k is not None and self._fused_form(k, dict(k.node.attrs)) is not None:
            unfused = self._scratch(k, k.node.attrs, 0)
            values["fused_chunks"] = next(
                (c for c in (1, 2, 3) if self._scratch(k, k.node.attrs, c) <= unfused), 0)
        return values

    def applies(self, k, /, **attrs) -> bool:
        a, b = k.ins[0], k.ins[1]
        return (k.target.is_arm_dsp and k.inplace is None and _ext(a) is not None
                and _ext(b) is not None)

    @staticmethod
    def _fused_form(k, attrs) -> tuple[int, int] | None:
        """(rows a block, depth rounded up to four) of the fused form -- a's rows packed
        V at a time against b's columns widened per batch entry with b's zero point taken
        off (mtvm_mm_rq_cols_s8), through the fused QMatMul loop (mtvm_mm_rq_s8_dsp.h):
        its epilogue in the loop, where the generated C spilled the sums -- or None where
        it does not apply (int8 operands, the SMMLA requantization, the whole int8 range
        out, four rows or more, the rows' stores within STRB's offsets)."""
        a, b = k.ins[0], k.ins[1]
        mult, shift = (list(k.ins) + [None, None])[2:4]
        if _ext(a) != "s8" or _ext(b) != "s8" or \
                (attrs.get("act_min", -128), attrs.get("act_max", 127)) != (-128, 127):
            return None
        if _batch_requant_form(mult, shift, attrs.get("y_zp", 0)) is None:
            return None
        m, kk, n = a.shape[-2], a.shape[-1], b.shape[-1]
        kp = (kk + 3) // 4 * 4
        if m < 4:
            return None
        v = _fused_vectors(m, kp)
        return (v, kp) if (v - 1) * n < 4096 else None

    def _fused(self, k, attrs) -> tuple[int, int, int] | None:
        """(rows a block, depth rounded up, columns a chunk) of the fused form the knob
        asks for, or None."""
        chunks = int(k.knobs.get("fused_chunks", 0))
        form = self._fused_form(k, attrs) if chunks else None
        return (*form, -(-k.ins[1].shape[-1] // chunks)) if form else None

    def _scratch(self, k, attrs, chunks: int) -> int:
        """b's columns packed (`vectors` a block), with a's zero point their sums, and
        with a depth not a multiple of four a copy of a's row (_row_copy); fused (chunks
        > 0): a block of a's rows packed, a chunk of b's columns widened and their
        parameter blocks."""
        kk, n = k.ins[0].shape[-1], k.ins[1].shape[-1]
        form = self._fused_form(k, attrs) if chunks else None
        if form:
            v, kp = form
            cw = -(-n // chunks)
            return 4 * _words(v, kp) + 2 * cw * kp + 16 * cw
        v = vectors(n, kk)
        return 4 * _words(v, kk) * -(-n // v) + (4 * n if attrs.get("a_zp", 0) else 0) + \
            _row_copy(kk)

    def scratch_bytes(self, k, /, **attrs) -> int:
        return self._scratch(k, attrs, int(k.knobs.get("fused_chunks", 0)))

    def faster_with_scratch(self, k, /, **attrs) -> dict:
        """The fused form in one chunk (a's rows packed once), where it applies and the
        planned arena does not grow."""
        if k.knobs.get("fused_chunks", 0) == 1 or self._fused_form(k, attrs) is None:
            return {}
        return {"fused_chunks": 1}

    def emit(self, k, /, *, a_zp=0, b_zp=0, y_zp=0, act_min=-128, act_max=127):
        from ...ops.quantized.matmul import batch_offset_c
        a, b = k.ins[:2]
        mult, shift = (list(k.ins) + [None, None])[2:4]
        m, kk, n = a.shape[-2], a.shape[-1], b.shape[-1]
        batch = k.out.shape[:-2]
        nb = int(np.prod(batch, dtype=np.int64))
        k.library("mtvm_mm_s8_dsp.h")

        def offset(buf):
            return batch_offset_c(buf.shape, batch)

        fused = self._fused(k, dict(y_zp=y_zp, act_min=act_min, act_max=act_max))
        if fused:
            return self._emit_fused(k, fused, a_zp, b_zp, y_zp, nb, offset)

        v = vectors(n, kk)
        nblk = -(-n // v)
        wq = _words(1, kk)     # words of a packed block per column
        pk = Var("pk", Type("uint32", pointer=True))
        bsum = Var("bsum", Type("int32", pointer=True))
        t, i, j = Var("t"), Var("i"), Var("j")
        asum = Var("asum", _I32)
        pa = Var("pa", Type(a.dtype, pointer=True, const=True))
        pb = Var("pb", Type(b.dtype, pointer=True, const=True))
        ar = Var("ar", Type(a.dtype, pointer=True, const=True))
        accs = [Var(f"acc{r}", _I32) for r in range(v)]
        nv_ = n - n % v

        # with n % v columns left and more than v in all, the last block is the columns
        # n - v .. n - 1, overlapping the one before (packed into its own slot, some sums
        # computed twice and stored again): one copy of the block's code, not two
        overlap = n % v != 0 and n > v
        j0 = Var("j0")

        def pack(j0, nv, slot=None):
            return ExprStmt(call(f"mtvm_packv_{_ext(b)}_dsp", pb + j0, 1, n, nv, v, kk,
                                 pk + (j0 if slot is None else slot) * wq))

        def const(col):
            """sum (a - za)(b - zb) = sum a b - zb sum a - za sum b + K za zb: the terms
            but the first, for column col."""
            e = RawExpr(str(kk * a_zp * b_zp))
            for zp, term in ((b_zp, asum), (a_zp, bsum[col])):
                if zp:
                    e = e - zp * term if zp > 0 else e + (-zp) * term
            return e

        copy = _row_copy(kk)

        def block(j0, col: str, nv: int, slot=None) -> list:
            s = [Decl(accs[r], const(j0 + r)) for r in range(v)]
            s.append(ExprStmt(call(f"mtvm_dot{v}p_{_ext(a)}_dsp", ar,
                                   pk + (j0 if slot is None else slot) * wq, copy or kk,
                                   *accs)))
            return s + _stores(k, accs, nv, mult, shift, y_zp, act_min, act_max,
                               lambda r: f"{col} + {r}",
                               lambda r: f"{k.out.c}[(t * {m} + i) * {n} + {col} + {r}]",
                               rq=_batch_requant_form(mult, shift, y_zp))

        first = Decl(j0, select(lt(j, n - v), j, n - v))
        per_t = [Decl(pa, Var(a.c) + RawExpr(offset(a))), Decl(pb, Var(b.c) + RawExpr(offset(b)))]
        if overlap:
            per_t.append(For(j, n, [first, pack(j0, v, slot=j)], step=v))
        else:
            per_t.append(For(j, nv_, [pack(j, v)], step=v))
            if n % v:
                per_t.append(pack(nv_, n % v))
        if a_zp:   # b's column sums, four columns a step (mtvm_colsum_8_dsp)
            per_t.append(ExprStmt(call(f"mtvm_colsum_{_ext(b)}_dsp", pb, kk, n, bsum)))
        if copy:
            arow = Var("arow", Type(a.dtype, pointer=True))
            row = [ExprStmt(call("memcpy", arow, pa + i * kk, kk)), Decl(ar, arow)]
        else:
            row = [Decl(ar, pa + i * kk)]
        if b_zp:
            row.append(Decl(asum, call(f"mtvm_sum_{_ext(a)}_dsp", ar, kk)))
        if overlap:
            row.append(For(j, n, [first] + block(j0, "j0", v, slot=j), step=v))
        else:
            row.append(For(j, nv_, block(j, "j", v), step=v))
            if n % v:
                row += block(nv_, str(nv_), n % v)
        per_t.append(For(i, m, row))
        body = [Comment(f"per batch entry, b's columns packed into int16 pairs, {v} a block "
                        f"({nblk} blocks of {_words(v, kk)} words), each row of a read in "
                        "place against them"),
                Comment("sum (a - za)(b - zb) = sum a b - zb sum a - za sum b + K za zb"),
                Decl(pk, Cast(pk.type, Var("scratch")))]
        if a_zp:
            body.append(Decl(bsum, Cast(bsum.type, Var("scratch") + 4 * _words(v, kk) * nblk)))
        if copy:
            body += [Comment(f"a's row copied ({kk} bytes; the dot product reads {copy}: "
                             "zeros in the packed columns past the depth)"),
                     Decl(arow, Cast(arow.type, Var("scratch") + 4 * _words(v, kk) * nblk +
                                     (4 * n if a_zp else 0)))]
        body.append(For(t, nb, per_t))
        return render_c(body)

    def _emit_fused(self, k, fused, a_zp, b_zp, y_zp, nb, offset) -> str:
        """Per batch entry b's columns widened (their zero point off) with their parameter
        blocks, then per block of v rows of a: the rows packed and one call of the fused
        QMatMul loop over every column."""
        a, b = k.ins[:2]
        mult, shift = (list(k.ins) + [None, None])[2:4]
        m, kk, n = a.shape[-2], a.shape[-1], b.shape[-1]
        v, kp, cw = fused
        k.library("mtvm_mm_rq_s8_dsp.h")
        mq, rnd, sh = _batch_requant_form(mult, shift, y_zp)
        fn = f"mtvm_mm_rq_s8_dsp_{v}x{kp}x{cw}" + (f"l{n}" if cw != n else "") + "_w"
        if fn not in k.helpers:   # one out-of-line copy per shape (shared with QMatMul's)
            k.helper(fn, f"MTVM_DEFINE_MM_RQ_S8_DSP({fn}, {v}, {kp}, {cw}, {n}, 0, 0, 1)")
        pk = Var("pk", Type("uint32", pointer=True))
        bw = Var("bw", Type("uint32", pointer=True))
        prm = Var("prm", Type("int32", pointer=True))
        t = Var("t")
        pa = Var("pa", Type(a.dtype, pointer=True, const=True))
        pb = Var("pb", Type(b.dtype, pointer=True, const=True))
        yt = Var("yt", Type(k.out.dtype, pointer=True))

        j, j0 = Var("j"), Var("j0")
        col0 = j0 if cw < n else 0

        def block(row) -> list:
            return [ExprStmt(call("mtvm_packv_s8_dsp", pa + row * kk, kk, 1, v, v, kk, pk)),
                    ExprStmt(call(fn, Cast(Type("int8", pointer=True, const=True), bw), pk,
                                  prm, yt + row * n + col0))]
        chunk = [ExprStmt(call("mtvm_mm_rq_cols_s8", pb + col0, kk, cw, n, kp, b_zp, a_zp, mq,
                               rnd, sh, bw, prm))] + _row_blocks(m, v, lambda row, _: block(row))
        if cw < n:   # the last chunk overlapping the one before: one copy of the code
            chunk = [For(j, n, [Decl(j0, select(lt(j, n - cw), j, n - cw))] + chunk, step=cw)]
        per_t = [Decl(pa, Var(a.c) + RawExpr(offset(a))), Decl(pb, Var(b.c) + RawExpr(offset(b))),
                 Decl(yt, Var(k.out.c) + t * (m * n))] + chunk
        body = [Comment(f"per batch entry b's {n} columns widened to int16 pairs less their "
                        f"zero point ({kp} values each, zeros past {kk}) with per column "
                        "-za sum (b - zb) and the requantization"
                        + (f", {cw} columns a chunk" if cw < n else "") + ", then per block of "
                        f"{v} rows of a: the rows packed, the fused QMatMul loop over the "
                        "columns"),
                Comment("sum a (b - zb) - za sum (b - zb) = sum (a - za)(b - zb)"),
                Decl(pk, Cast(pk.type, Var("scratch"))),
                Decl(bw, pk + _words(v, kp)),
                Decl(prm, Cast(prm.type, bw + cw * kp // 2)),
                For(t, nb, per_t)]
        return render_c(body)
