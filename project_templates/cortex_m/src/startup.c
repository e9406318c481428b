/* startup.c: reset handler and vector table for any Cortex-M (Armv6-M, Armv7-M,
 * Armv8-M). Enables the FPU (and MVE) when the build uses it, copies .data
 * from flash, zeroes .bss, then calls main().
 *
 * Every external interrupt vector points to one dispatcher that reads the
 * active exception number (IPSR) and calls the UART driver for the board's
 * RX interrupt, so the table needs no per-board editing. The table reserves
 * 128 external vectors, more than any supported board has. */
#include <stdint.h>
#include <string.h>

#include "board_config.h"
#include "cortex_m.h"
#include "platform_cortex_m.h"
#include "uart.h"

#define MTVM_EXTERNAL_VECTORS 128
#if MTVM_BOARD_IRQS > MTVM_EXTERNAL_VECTORS
#error "the board has more interrupts than startup.c's vector table reserves"
#endif

/* Symbols from the generated linker script (link.ld). */
extern uint32_t _sidata[], _sdata[], _edata[], _sbss[], _ebss[], _sstack[], _estack[];

int main(void);
void mtvm_reset_handler(void);
void mtvm_default_handler(void);
void mtvm_fault_handler(void);
void mtvm_irq_dispatch(void);

typedef void (*mtvm_vector_t)(void);

#define V1 mtvm_irq_dispatch
#define V8 V1, V1, V1, V1, V1, V1, V1, V1
#define V32 V8, V8, V8, V8

__attribute__((section(".vectors"), used))
const mtvm_vector_t mtvm_vector_table[16 + MTVM_EXTERNAL_VECTORS] = {
    (mtvm_vector_t)(uintptr_t)_estack,   /* initial main stack pointer */
    mtvm_reset_handler,
    mtvm_default_handler,                /* NMI */
    mtvm_fault_handler,                  /* HardFault */
    mtvm_fault_handler,                  /* MemManage */
    mtvm_fault_handler,                  /* BusFault */
    mtvm_fault_handler,                  /* UsageFault */
    mtvm_fault_handler,                  /* SecureFault (Armv8-M) */
    0, 0, 0,
    mtvm_default_handler,                /* SVCall */
    mtvm_default_handler,                /* DebugMonitor */
    0,
    mtvm_default_handler,                /* PendSV */
    mtvm_systick_handler,                /* SysTick */
    V32, V32, V32, V32,
};

static void enable_fpu(void)
{
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* Full access to coprocessors 10 and 11 (FPU, and MVE on Armv8.1-M). */
    SCB_CPACR |= (0xFu << 20);
    mtvm_dsb();
    mtvm_isb();
#endif
}

/* Armv7-M L1 caches (Cortex-M7): invalidate, then enable. The data cache is
 * invalidated line by line (set/way) from the geometry in CCSIDR. Nothing
 * in this firmware uses DMA on a cached core, so no maintenance is needed
 * afterwards. */
#define SCB_CCSIDR  MTVM_REG(0xE000ED80u)
#define SCB_CSSELR  MTVM_REG(0xE000ED84u)
#define SCB_ICIALLU MTVM_REG(0xE000EF50u)
#define SCB_DCISW   MTVM_REG(0xE000EF60u)
#define CCR_DC (1u << 16)
#define CCR_IC (1u << 17)

static void enable_caches(void)
{
#if MTVM_ENABLE_CACHES
    uint32_t ccsidr, sets, ways, set_shift, way_shift, set, way;
    mtvm_dsb();
    mtvm_isb();
    SCB_ICIALLU = 0;
    mtvm_dsb();
    mtvm_isb();
    SCB_CCR |= CCR_IC;
    mtvm_dsb();
    mtvm_isb();
    SCB_CSSELR = 0;                      /* level 1, data cache */
    mtvm_dsb();
    ccsidr = SCB_CCSIDR;
    sets = ((ccsidr >> 13) & 0x7FFFu) + 1u;
    ways = ((ccsidr >> 3) & 0x3FFu) + 1u;
    set_shift = (ccsidr & 7u) + 4u;      /* log2(line bytes) */
    way_shift = ways > 1u ? (uint32_t)__builtin_clz(ways - 1u) : 0u;
    for (set = 0; set < sets; ++set) {
        for (way = 0; way < ways; ++way) {
            SCB_DCISW = (set << set_shift) | (ways > 1u ? way << way_shift : 0u);
        }
    }
    mtvm_dsb();
    SCB_CCR |= CCR_DC;
    mtvm_dsb();
    mtvm_isb();
#endif
}

/* Fills the unused stack with a pattern so mtvm_platform_stack_used_bytes()
 * can report the high-water mark. */
static void paint_stack(void)
{
    uint32_t* p = _sstack;
    uintptr_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    while ((uintptr_t)(p + 16) < sp) {
        *p++ = MTVM_STACK_PAINT;
    }
}

__attribute__((noreturn, used))
void mtvm_reset_handler(void)
{
    uint32_t* src = _sidata;
    uint32_t* dst = _sdata;
    /* No FP instruction may run before this (the compiler may use FP
     * registers in any function built with -mfloat-abi=hard). */
    enable_fpu();
    enable_caches();
    paint_stack();
    SCB_VTOR = (uint32_t)(uintptr_t)mtvm_vector_table;
#if !defined(__ARM_ARCH_6M__)   /* Armv6-M: no divide instruction, CCR read-only */
    SCB_CCR |= (1u << 4);   /* DIV_0_TRP: integer divide by zero faults */
#endif
    while (dst < _edata) {
        *dst++ = *src++;
    }
    for (dst = _sbss; dst < _ebss; ++dst) {
        *dst = 0;
    }
    mtvm_dsb();
    mtvm_isb();
    (void)main();
    mtvm_platform_abort(0);
    for (;;) {
    }
}

void mtvm_irq_dispatch(void)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    if (ipsr == 16u + MTVM_UART_RX_IRQ) {
        mtvm_uart_isr();
        return;
    }
    mtvm_default_handler();
}

void mtvm_default_handler(void)
{
    mtvm_platform_abort(MTVM_ABORT_UNEXPECTED_IRQ);
}

void mtvm_fault_handler(void)
{
    mtvm_platform_abort(MTVM_ABORT_FAULT);
}
