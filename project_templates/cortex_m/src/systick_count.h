/* systick_count.h: SysTick's 24-bit down counter + the handler's wrap count
 * -> a 64-bit tick count that never runs backwards. Pure arithmetic, no
 * registers, so the host tests compile it (tests/device/test_timer.py).
 *
 * The counter counts reload, ..., 1, 0, reload, ...; reaching 0 is the wrap:
 * it sets the SysTick pending bit, and the handler counts it. So 0 is the
 * first tick of the new period (phase 0), reload the second (phase 1).
 *
 * The race this closes: the counter has wrapped and pended the interrupt,
 * but the handler has not counted the wrap yet (the interrupt is taken a few
 * instructions later, or later still when interrupts are masked; under QEMU
 * the wrap is even posted by another thread). A reader that combines the old
 * wrap count with the new counter value is one whole period (2^24 ticks)
 * behind, and a time measured across the wrap comes out negative: 2^64 - 16 M
 * ticks, "245956587649247353 us" per inference.
 *
 * The reader therefore, with interrupts masked so the wrap count holds
 * still, reads the counter (before), the pending bit, and the counter again
 * (after). Pending set: the wrap happened before the pending bit was read, so
 * `after` is in the new period and the wrap counts. Pending clear: no
 * uncounted wrap happened before the pending bit was read, so `before`
 * belongs with the wrap count -- unless it is 0 with nothing pending, which
 * an emulator shows between reaching 0 and delivering the wrap: the reader
 * reads again (mtvm_systick_ambiguous). */
#ifndef MTVM_SYSTICK_COUNT_H_
#define MTVM_SYSTICK_COUNT_H_

#include <stdint.h>

/* Reload value: the counter runs reload..0, a period of reload + 1 ticks. */
#ifndef MTVM_SYSTICK_RELOAD
#define MTVM_SYSTICK_RELOAD 0x00FFFFFFu
#endif

/* Ticks since the wrap that started the current period. */
static inline uint32_t mtvm_systick_phase(uint32_t value, uint32_t reload)
{
    if (value > reload) {          /* the counter never holds more than reload */
        value = reload;
    }
    return value == 0u ? 0u : reload - value + 1u;
}

/* Nonzero: this reading cannot be placed; read again. */
static inline int mtvm_systick_ambiguous(uint32_t before, int pending, uint32_t after)
{
    (void)after;
    return !pending && before == 0u;
}

static inline uint64_t mtvm_systick_compose(uint32_t wraps, uint32_t before, int pending,
                                            uint32_t after, uint32_t reload)
{
    uint64_t period = (uint64_t)reload + 1u;
    if (pending) {
        return ((uint64_t)wraps + 1u) * period + mtvm_systick_phase(after, reload);
    }
    return (uint64_t)wraps * period + mtvm_systick_phase(before, reload);
}

#endif /* MTVM_SYSTICK_COUNT_H_ */
