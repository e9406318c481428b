/* platform_riscv.c: the runtime's porting surface (mtvm_platform.h) for a
 * bare-metal RV32 board: the board's UART driver for bytes, the CLINT's mtime
 * or the mcycle CSR for time (minstret under QEMU -icount, where it is the exact
 * instruction count), semihosting to end a QEMU run with a status. */
#include <stdint.h>

#include "board_config.h"
#include "mtvm_platform.h"
#include "platform_riscv.h"
#include "riscv.h"
#include "uart.h"

/* ---- semihosting (emulated boards only) ---- */
#define SEMIHOST_SYS_WRITE0 0x04
#define SEMIHOST_SYS_EXIT 0x18
#define SEMIHOST_SYS_EXIT_EXTENDED 0x20
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

void mtvm_semihost_write(const char* text)
{
#if MTVM_SEMIHOSTING
    (void)mtvm_semihost_call(SEMIHOST_SYS_WRITE0, (void*)(uintptr_t)text);
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
    (void)mtvm_semihost_call(SEMIHOST_SYS_EXIT_EXTENDED, block);
    (void)mtvm_semihost_call(SEMIHOST_SYS_EXIT, (void*)(uintptr_t)ADP_STOPPED_APPLICATION_EXIT);
#else
    (void)status;
#endif
    mtvm_irq_disable();
    for (;;) {
        mtvm_wfi();
    }
}

/* ---- timer ---- */
enum { TIMER_MTIME, TIMER_MCYCLE, TIMER_MINSTRET };
static int timer_kind;
static uint64_t timer_start_ticks;

/* A 64-bit counter read as two 32-bit halves: high, low, high again until the
 * high half did not change (a carry between the reads). */
#define READ_CSR64(lo_csr, hi_csr, out)          \
    do {                                        \
        uint32_t hi_, lo_, hi2_;                \
        do {                                    \
            MTVM_CSR_READ(hi_csr, hi_);         \
            MTVM_CSR_READ(lo_csr, lo_);         \
            MTVM_CSR_READ(hi_csr, hi2_);        \
        } while (hi_ != hi2_);                  \
        (out) = ((uint64_t)hi_ << 32) | lo_;    \
    } while (0)

static uint64_t read_mtime(void)
{
    uint32_t hi, lo, hi2;
    do {
        hi = MTVM_REG(MTVM_MTIME_ADDR + 4u);
        lo = MTVM_REG(MTVM_MTIME_ADDR);
        hi2 = MTVM_REG(MTVM_MTIME_ADDR + 4u);
    } while (hi != hi2);
    return ((uint64_t)hi << 32) | lo;
}

static uint64_t read_minstret(void)
{
    uint64_t v;
    READ_CSR64(minstret, minstreth, v);
    return v;
}

static uint64_t now_ticks(void)
{
    uint64_t v;
    if (timer_kind == TIMER_MTIME) {
        return read_mtime();
    }
    if (timer_kind == TIMER_MINSTRET) {
        return read_minstret();
    }
    READ_CSR64(mcycle, mcycleh, v);
    return v;
}

#if MTVM_EMULATED && !defined(MTVM_NO_ICOUNT_DETECT)
/* minstret across a loop of 2 * n instructions (addi, bnez), plus the same few
 * around it on every call (not inlined: one copy of the code). */
__attribute__((noinline)) static uint32_t loop_instret(uint32_t n)
{
    uint32_t a, b;
    MTVM_CSR_READ(minstret, a);
    __asm__ volatile("1:\n\taddi %0, %0, -1\n\tbnez %0, 1b" : "+r"(n));
    MTVM_CSR_READ(minstret, b);
    return b - a;
}

/* QEMU with -icount counts minstret exactly (one per instruction, 1 ns of
 * virtual time each at shift=0); without it minstret reads the host's clock. */
static int counts_instructions(void)
{
    uint32_t a = loop_instret(1000u), b = loop_instret(1000u), c = loop_instret(2000u);
    return a == b && c - a == 2000u;
}
#endif

const char* mtvm_platform_timer_name(void)
{
    return timer_kind == TIMER_MINSTRET ? "minstret" : timer_kind == TIMER_MTIME ? "mtime"
                                                                                  : "mcycle";
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
    if (timer_kind == TIMER_MINSTRET) {
        return 1000000000u;             /* -icount shift=0: 1 instruction = 1 ns */
    }
    return timer_kind == TIMER_MTIME ? MTVM_MTIME_HZ : MTVM_CORE_CLOCK_HZ;
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
    timer_kind = MTVM_TIMER_MTIME ? TIMER_MTIME : TIMER_MCYCLE;
#if MTVM_EMULATED && !defined(MTVM_NO_ICOUNT_DETECT)
    if (counts_instructions()) {
        timer_kind = TIMER_MINSTRET;
    }
#endif
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
