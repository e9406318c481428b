/* mtvm_im2col_slots.h: Where a tail tap of QConv's im2col column goes (the layout of
 * mtvm/ops/quantized/conv.py: tail_slot): the kk % 4 = tl tail taps of a pixel are one or
 * two int16 words, (t0, 0) / (t0, t1) / (t0, t2), (t1, 0), so that the weights' tail words
 * widened by SXTB16 meet them with SMLADs. One function for the kernels that write or
 * read those slots.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_IM2COL_SLOTS_H_
#define MTVM_IM2COL_SLOTS_H_

#include <stdint.h>
#include "mtvm_int8_bytes.h"   /* MTVM_ALWAYS_INLINE */

/* The column slot of tail tap j (0 <= j < tl). */
static MTVM_ALWAYS_INLINE int32_t mtvm_col_tail_slot(int32_t j, int32_t tl)
{
    return tl == 3 && j ? 3 - j : j;
}

#endif  /* MTVM_IM2COL_SLOTS_H_ */
