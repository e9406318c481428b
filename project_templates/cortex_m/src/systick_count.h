/* systick_count.h: SysTick's 24-bit down counter + the handler's wrap count
 * -> a 64-bit tick count that never runs backwards. Pure arithmetic, no
 * registers, so the host tests compile it (tests/device/test_timer.py).
 *
 * The race it closes: the counter reloads (wraps) and pends the SysTick
 * interrupt, but the handler has not yet counted the wrap (the interrupt is
 * taken a few instructions later, or later still when interrupts are masked;
 * under QEMU the wrap is even posted by another thread). A reader that
 * combines the old wrap count with the reloaded counter is one whole period
 * (2^24 ticks) behind, so a time measured across the wrap comes out
 * negative: 2^64 - 16 M ticks, "245956587649247353 us" per inference.
 *
 * The reader therefore (with interrupts masked, so the wrap count holds
 * still) reads the counter (before), the SysTick pending bit, and the
 * counter again (after). Pending set: the wrap happened before the pending
 * bit was read, so `after` is past it and the wrap counts. Pending clear:
 * no uncounted wrap happened before the pending bit was read, so `before`
 * belongs with the wrap count. */
#ifndef MTVM_SYSTICK_COUNT_H_
#define MTVM_SYSTICK_COUNT_H_

#include <stdint.h>

/* Reload value: the counter runs reload..0, a period of reload + 1 ticks. */
#ifndef MTVM_SYSTICK_RELOAD
#define MTVM_SYSTICK_RELOAD 0x00FFFFFFu
#endif

static inline uint64_t mtvm_systick_compose(uint32_t wraps, uint32_t before, int pending,
                                            uint32_t after, uint32_t reload)
{
    uint64_t period = (uint64_t)reload + 1u;
    uint32_t value = pending ? after : before;
    if (value > reload) {          /* the counter never holds more than reload */
        value = reload;
    }
    return ((uint64_t)wraps + (pending ? 1u : 0u)) * period + (uint64_t)(reload - value);
}

#endif /* MTVM_SYSTICK_COUNT_H_ */
