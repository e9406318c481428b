/* start.S (ESP32-C3): the reset entry. The ROM boot loader has copied the image
 * into SRAM and jumps to _start (the image header's entry point). It sets gp, sp
 * and tp, points mtvec at the vector table below (the C3 only vectors: an
 * exception goes to the table's first entry, CPU interrupt n to entry n), turns
 * the watchdogs off and the cycle counter on (mtvm_esp32c3_early_init, in
 * platform_riscv.c), then calls mtvm_c_start (startup.c), which copies .data,
 * zeroes .bss and calls main. The C3 has no mie CSR: interrupts are enabled in
 * its interrupt matrix (the UART driver) and by mstatus.MIE. */
#include "board_config.h"

    .section .text.init, "ax", @progbits
    .globl _start
    .type _start, @function
_start:
    .option push
    .option norelax
    la gp, __global_pointer$
    .option pop
    csrci mstatus, 8                 /* MIE: interrupts off until the platform is up */
    la sp, _estack
    la tp, __tls_base
    la t0, mtvm_vector_table
    ori t0, t0, 1                    /* vectored mode (the only one the C3 has) */
    csrw mtvec, t0
    call mtvm_esp32c3_early_init
    call mtvm_c_start
1:  j 1b
    .size _start, . - _start

/* The vector table: 32 jumps, 256-byte aligned (the C3 ignores mtvec's low 8
 * bits). Entry 0 takes exceptions, entry n CPU interrupt n; the UART's CPU
 * interrupt goes to the driver's handler, everything else to startup.c's trap
 * handler, which reports it and aborts. Uncompressed: 4 bytes per entry. */
    .section .text.mtvm_vectors, "ax", @progbits
    .balign 256
    .globl mtvm_vector_table
    .type mtvm_vector_table, @function
    .option push
    .option norvc
mtvm_vector_table:
    .set mtvm_entry, 0
    .rept 32
    .if mtvm_entry == MTVM_INTMATRIX_CPU_INT
    j mtvm_uart_irq_entry
    .else
    j mtvm_trap_entry
    .endif
    .set mtvm_entry, mtvm_entry + 1
    .endr
    .option pop
    .size mtvm_vector_table, . - mtvm_vector_table

