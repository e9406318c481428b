/* platform_cortex_m.c: the runtime's porting surface (mtvm_platform.h) for a
 * bare-metal Cortex-M board: the board's UART driver for bytes, DWT CYCCNT or
 * SysTick for time, semihosting to end a QEMU run with a status. */
#include <stdint.h>

#include "board_config.h"
#include "cortex_m.h"
#include "mtvm_platform.h"
#include "platform_cortex_m.h"
#include "systick_count.h"
#include "uart.h"

/* ---- semihosting (emulated boards only: on real hardware without a
 * debugger, BKPT 0xAB would fault) ---- */
#define SEMIHOST_SYS_WRITE0 0x04
#define SEMIHOST_SYS_EXIT 0x18
#define SEMIHOST_SYS_EXIT_EXTENDED 0x20
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

#if MTVM_SEMIHOSTING
static int32_t semihost_call(int32_t op, void* arg)
{
    register int32_t r0 __asm__("r0") = op;
    register void* r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}
#endif

void mtvm_semihost_write(const char* text)
{
#if MTVM_SEMIHOSTING
    semihost_call(SEMIHOST_SYS_WRITE0, (void*)(uintptr_t)text);
#else
    (void)text;
#endif
}

__attribute__((noreturn)) void mtvm_platform_exit(int32_t status)
{
#if MTVM_SEMIHOSTING
    uint32_t block[2];
    block[0] = ADP_STOPPED_APPLICATION_EXIT;
    block[1] = (uint32_t)status;
    semihost_call(SEMIHOST_SYS_EXIT_EXTENDED, block);
    /* An older debugger without the extension: plain exit (status lost). */
    semihost_call(SEMIHOST_SYS_EXIT, (void*)(uintptr_t)ADP_STOPPED_APPLICATION_EXIT);
#else
    (void)status;
#endif
    mtvm_irq_disable();
    for (;;) {
        mtvm_wfi();
    }
}

/* ---- timer ---- */
static volatile uint32_t systick_wraps;
static int use_dwt;
static uint64_t timer_start_ticks;

void mtvm_systick_handler(void)
{
    systick_wraps++;
}

static void systick_init(void)
{
    uint32_t i;
    volatile uint32_t spin;
    SYST_CSR = 0;
    SYST_RVR = MTVM_SYSTICK_RELOAD;
    SYST_CVR = 0;
    SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;
    /* The counter loads the reload value on its next tick; QEMU does it only
     * when its timer thread gets there, which on a busy host can take
     * milliseconds, and until then every reading is 0 (a time of 0 ticks).
     * Wait for it, reading seldom so the emulator's thread gets its turn. */
    for (i = 0; i < 2000u && SYST_CVR == 0u; ++i) {
        for (spin = 0; spin < 1000u; spin = spin + 1u) {
        }
    }
}

static int dwt_init(void)
{
#if MTVM_TIMER_DWT
    uint32_t a, b;
    volatile uint32_t spin;
    SCB_DEMCR |= DEMCR_TRCENA;
    DWT_LAR = 0xC5ACCE55u;            /* unlock (Cortex-M7); ignored elsewhere */
    if (DWT_CTRL & DWT_CTRL_NOCYCCNT) {
        return 0;
    }
    DWT_CYCCNT = 0;
    DWT_CTRL |= DWT_CTRL_CYCCNTENA;
    a = DWT_CYCCNT;
    for (spin = 0; spin < 16u; spin = spin + 1u) {
    }
    b = DWT_CYCCNT;
    return a != b;                    /* QEMU: CYCCNT never moves */
#else
    return 0;
#endif
}

/* SysTick: the wrap count and the counter read together, with interrupts
 * masked (see systick_count.h for why the pending bit is read between two
 * reads of the counter). */
static uint64_t now_ticks(void)
{
    uint32_t primask, wraps, before, after, tries = 0;
    int pending;
    if (use_dwt) {
        return DWT_CYCCNT;
    }
    primask = mtvm_irq_save();
    wraps = systick_wraps;
    do {
        before = SYST_CVR;
        pending = (SCB_ICSR & SCB_ICSR_PENDSTSET) != 0u;
        after = SYST_CVR;
    } while (mtvm_systick_ambiguous(before, pending, after) && ++tries < 100000u);
    mtvm_irq_restore(primask);
    return mtvm_systick_compose(wraps, before, pending, after, MTVM_SYSTICK_RELOAD);
}

const char* mtvm_platform_timer_name(void)
{
    return use_dwt ? "dwt" : "systick";
}

void mtvm_platform_timer_start(void)
{
    timer_start_ticks = now_ticks();
}

uint64_t mtvm_platform_timer_stop_ticks(void)
{
    uint64_t now = now_ticks();
    if (use_dwt) {
        return (uint32_t)((uint32_t)now - (uint32_t)timer_start_ticks);
    }
    return now - timer_start_ticks;
}

uint64_t mtvm_platform_ticks_per_second(void)
{
    return MTVM_TIMER_HZ;
}

/* ---- stack ---- */
extern uint32_t _sstack[], _estack[];

uint32_t mtvm_platform_stack_used_bytes(void)
{
    const uint32_t* p = _sstack;
    while (p < _estack && *p == MTVM_STACK_PAINT) {
        p++;
    }
    return (uint32_t)((uintptr_t)_estack - (uintptr_t)p);
}

uint32_t mtvm_platform_stack_reserve_bytes(void)
{
    return (uint32_t)((uintptr_t)_estack - (uintptr_t)_sstack);
}

/* ---- bytes ---- */
void mtvm_platform_init(void)
{
    use_dwt = dwt_init();
    if (!use_dwt) {
        systick_init();
    }
    mtvm_uart_init();
    mtvm_irq_enable();
}

void mtvm_platform_write(const uint8_t* data, size_t size_bytes)
{
    mtvm_uart_write(data, size_bytes);
}

void mtvm_platform_abort(int32_t code)
{
    if (code != 0) {
        mtvm_semihost_write("mtvm: abort\n");
    }
    mtvm_platform_exit(code);
}

void mtvm_platform_log(const char* message)
{
    mtvm_semihost_write(message);
}
