/* startup.c: what runs between start.S and main() on a bare-metal RV32 board --
 * the stack paint, .data and .tdata copied from flash, .bss and .tbss zeroed --
 * and the machine-mode trap handler: the PLIC's external interrupt goes to the
 * UART driver, anything else (an exception, another interrupt) aborts with the
 * cause and address on the semihosting console. */
#include <stdint.h>

#include "board_config.h"
#include "mtvm_standalone.h"
#include "platform_riscv.h"
#include "riscv.h"
#include "uart.h"

/* Symbols from the generated linker script (link.ld). */
extern uint32_t _sidata[], _sdata[], _edata[], _sbss[], _ebss[], _sstack[], _estack[];
extern uint32_t __tdata_source[], __tls_base[], __tdata_end[], __tbss_start[], __tbss_end[];

int main(void);
void mtvm_c_start(void);
void mtvm_trap_entry(void);

/* Fills the unused stack with a pattern so mtvm_platform_stack_used_bytes()
 * can report the high-water mark. */
static void paint_stack(void)
{
    uint32_t* p = _sstack;
    uintptr_t sp;
    __asm__ volatile("mv %0, sp" : "=r"(sp));
    while ((uintptr_t)(p + 16) < sp) {
        *p++ = MTVM_STACK_PAINT;
    }
}

static void copy_words(uint32_t* dst, const uint32_t* src, const uint32_t* end)
{
    while (dst < end) {
        *dst++ = *src++;
    }
}

static void zero_words(uint32_t* dst, const uint32_t* end)
{
    while (dst < end) {
        *dst++ = 0;
    }
}

__attribute__((noreturn, used))
void mtvm_c_start(void)
{
    paint_stack();
    copy_words(_sdata, _sidata, _edata);
    copy_words(__tls_base, __tdata_source, __tdata_end);
    zero_words(__tbss_start, __tbss_end);
    zero_words(_sbss, _ebss);
    mtvm_fence();
    (void)main();
    mtvm_platform_abort(0);
    for (;;) {
    }
}

static void report_trap(uint32_t cause, uint32_t epc, uint32_t tval)
{
    char line[96];
    uint32_t pos = mtvm_fmt_str(line, 0, sizeof line, "mtvm: trap mcause=");
    pos = mtvm_fmt_u64(line, pos, sizeof line, cause);
    pos = mtvm_fmt_str(line, pos, sizeof line, " mepc=");
    pos = mtvm_fmt_u64(line, pos, sizeof line, epc);
    pos = mtvm_fmt_str(line, pos, sizeof line, " mtval=");
    pos = mtvm_fmt_u64(line, pos, sizeof line, tval);
    (void)mtvm_fmt_str(line, pos, sizeof line, "\n");
    mtvm_semihost_write(line);
}

/* Direct-mode trap vector (4-byte aligned): GCC saves what the handler and its
 * callees may clobber and returns with mret. */
__attribute__((interrupt("machine"), aligned(4)))
void mtvm_trap_entry(void)
{
    uint32_t cause, epc, tval, id;
    MTVM_CSR_READ(mcause, cause);
    if (cause == (MCAUSE_INTERRUPT | MCAUSE_MACHINE_EXTERNAL)) {
        while ((id = PLIC_CLAIM(MTVM_PLIC_CONTEXT)) != 0u) {
            if (id == MTVM_UART_RX_IRQ) {
                mtvm_uart_isr();
            }
            PLIC_CLAIM(MTVM_PLIC_CONTEXT) = id;       /* complete */
        }
        return;
    }
    MTVM_CSR_READ(mepc, epc);
    MTVM_CSR_READ(mtval, tval);
    report_trap(cause, epc, tval);
    mtvm_platform_abort((cause & MCAUSE_INTERRUPT) ? MTVM_ABORT_UNEXPECTED_IRQ
                                                     : MTVM_ABORT_FAULT);
}
