"""QAdd in 32 bits on every target without a schedule of its own (x86 hosts, RISC-V, the
Arm cores without DSP): the constants of mtvm.ops.quantized.narrow, which give every pair
of input values the reference's output, as y = clamp((c + a ia + b ib) >> n) over the
op's rows. The op's own loop keeps a 64-bit product and mtvm_round_shift an element
(kwt_tiny_int8's bias and residual adds: 30 us of 234 on an AVX2 host); this one is
int32 arithmetic the compiler vectorizes. Where no such constants exist (exact halves) or
the operands are not rows, the op's loop stays.
"""
from __future__ import annotations

from ...ops.quantized.elementwise import binary_loop, row_layout
from ...ops.quantized.narrow import narrow_qadd
from .. import Schedule, register


@register
class QAddNarrow(Schedule):
    op = "QAdd"
    domain = "mtvm"
    name = "qadd_s8.narrow"
    family = "generic"
    priority = 5

    def _constants(self, k, attrs):
        return narrow_qadd(k, attrs["a_zp"], attrs["b_zp"], attrs["y_zp"], attrs["a_mult"],
                           attrs["b_mult"], attrs["shift"], int(attrs.get("act_min", -128)),
                           int(attrs.get("act_max", 127)))

    def applies(self, k, /, **attrs) -> bool:
        return row_layout(k) is not None and self._constants(k, attrs) is not None

    def emit(self, k, /, **attrs) -> str:
        c, ia, ib, n = self._constants(k, attrs)
        lo, hi = int(attrs.get("act_min", -128)), int(attrs.get("act_max", 127))
        return binary_loop(k, lambda ea, eb, y: [
            f"int32_t v = ({c} + (int32_t){ea} * {ia} + (int32_t){eb} * {ib}) >> {n};",
            f"v = v < {lo} ? {lo} : (v > {hi} ? {hi} : v);",
            f"{y} = ({k.out.ctype})v;"])
