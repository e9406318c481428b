/* platform_riscv.c (ESP32-C3): the runtime's porting surface (mtvm_platform.h)
 * on the ESP32-C3 without ESP-IDF: UART0 for bytes, the core's cycle counter for
 * time, and what the chip's ROM leaves running at reset -- its watchdogs.
 *
 * Registers: ESP32-C3 Technical Reference Manual (RTC_CNTL at 0x60008000, timer
 * groups at 0x6001F000 and 0x60020000, the CPU's performance-counter CSRs). */
#include <stdint.h>

#include "board_config.h"
#include "mtvm_platform.h"
#include "platform_riscv.h"
#include "riscv.h"
#include "uart.h"

/* ---- watchdogs ----
 * On a boot from flash the ROM leaves the RTC watchdog and timer group 0's
 * watchdog armed (their "flash boot" mode) and the super watchdog runs from
 * reset: each would reset the chip after about a second. Every watchdog register
 * is write-protected until its key is written. */
#define RTC_CNTL_BASE 0x60008000u
#define RTC_WDT_CONFIG0 MTVM_REG(RTC_CNTL_BASE + 0x90u)
#define RTC_WDT_WPROTECT MTVM_REG(RTC_CNTL_BASE + 0xA8u)
#define RTC_SWD_CONF MTVM_REG(RTC_CNTL_BASE + 0xACu)
#define RTC_SWD_WPROTECT MTVM_REG(RTC_CNTL_BASE + 0xB0u)
#define RTC_WDT_KEY 0x50D83AA1u
#define RTC_SWD_KEY 0x8F1D312Au
#define RTC_SWD_AUTO_FEED (1u << 31)

#define TIMG0_BASE 0x6001F000u
#define TIMG1_BASE 0x60020000u
#define TIMG_WDT_CONFIG0(base) MTVM_REG((base) + 0x48u)
#define TIMG_WDT_WPROTECT(base) MTVM_REG((base) + 0x64u)
#define TIMG_WDT_KEY 0x50D83AA1u
#define TIMG_WDT_CONF_UPDATE (1u << 22)   /* EN (31) and FLASHBOOT_MOD_EN (14) left 0 */

static void timg_wdt_off(uint32_t base)
{
    TIMG_WDT_WPROTECT(base) = TIMG_WDT_KEY;
    TIMG_WDT_CONFIG0(base) = TIMG_WDT_CONF_UPDATE;
    TIMG_WDT_WPROTECT(base) = 0u;
}

/* Performance counter CSRs: mpcer selects the event (1: cycles), mpcmr starts
 * the count (1), mpccr is the 32-bit count. The C3 has no mcycle. */
#define CSR_MPCER 0x7E0
#define CSR_MPCMR 0x7E1
#define CSR_MPCCR 0x7E2
#define MTVM_STR_(x) #x
#define MTVM_STR(x) MTVM_STR_(x)

void mtvm_esp32c3_early_init(void);

/* Called by start.S before .bss is zeroed: touches no variable. */
void mtvm_esp32c3_early_init(void)
{
    uint32_t one = 1u;
    RTC_WDT_WPROTECT = RTC_WDT_KEY;
    RTC_WDT_CONFIG0 = 0u;                /* EN and FLASHBOOT_MOD_EN off */
    RTC_WDT_WPROTECT = 0u;
    RTC_SWD_WPROTECT = RTC_SWD_KEY;
    RTC_SWD_CONF |= RTC_SWD_AUTO_FEED;   /* the super watchdog feeds itself */
    RTC_SWD_WPROTECT = 0u;
    timg_wdt_off(TIMG0_BASE);
    timg_wdt_off(TIMG1_BASE);
    __asm__ volatile("csrw " MTVM_STR(CSR_MPCER) ", %0" : : "r"(one));
    __asm__ volatile("csrw " MTVM_STR(CSR_MPCMR) ", %0" : : "r"(one));
}

/* ---- no semihosting on this board ---- */
void mtvm_semihost_write(const char* text)
{
    (void)text;
}

__attribute__((noreturn)) void mtvm_platform_exit(int32_t status)
{
    (void)status;
    mtvm_irq_disable();
    for (;;) {
        mtvm_wfi();
    }
}

/* ---- timer: mpccr, widened to 64 bits ----
 * The count wraps every 2^32 cycles (107 s at 40 MHz); each read carries the
 * wraps it sees, so an interval is right as long as the counter is read at
 * least once per wrap (a timed inference shorter than that). */
static uint32_t last_cycles;
static uint64_t cycles_high;
static uint64_t timer_start_ticks;

static uint64_t now_ticks(void)
{
    uint32_t c;
    __asm__ volatile("csrr %0, " MTVM_STR(CSR_MPCCR) : "=r"(c));
    if (c < last_cycles) {
        cycles_high += (uint64_t)1 << 32;
    }
    last_cycles = c;
    return cycles_high | c;
}

const char* mtvm_platform_timer_name(void)
{
    return "mcycle";
}

void mtvm_platform_timer_start(void)
{
    timer_start_ticks = now_ticks();
}

uint64_t mtvm_platform_timer_stop_ticks(void)
{
    return now_ticks() - timer_start_ticks;
}

uint64_t mtvm_platform_ticks_per_second(void)
{
    return MTVM_CORE_CLOCK_HZ;
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
    (void)now_ticks();
    mtvm_uart_init();
    mtvm_irq_enable();
}

void mtvm_platform_write(const uint8_t* data, size_t size_bytes)
{
    mtvm_uart_write(data, size_bytes);
}

void mtvm_platform_abort(int32_t code)
{
    mtvm_platform_exit(code);
}

void mtvm_platform_log(const char* message)
{
    (void)message;
}
