/* start.S: the reset entry of a bare-metal RV32 firmware. The boot ROM (QEMU's
 * reset code) jumps to the first byte of flash, which the linker script makes
 * _start. It sets gp (linker relaxation), sp (the top of the stack reserve) and
 * tp (the thread-local block: picolibc's errno), enables the FPU when the build
 * uses one, points mtvec at the trap handler, then calls mtvm_c_start
 * (startup.c), which copies .data, zeroes .bss and calls main. Harts other
 * than 0 park in WFI. */
    .section .text.init, "ax", @progbits
    .globl _start
    .type _start, @function
_start:
    .option push
    .option norelax
    la gp, __global_pointer$
    .option pop
    csrw mie, zero
    csrci mstatus, 8                 /* MIE: interrupts off until the platform is up */
    csrr t0, mhartid
    bnez t0, 2f
    la sp, _estack
    la tp, __tls_base
#if defined(__riscv_flen)
    li t0, (1 << 13)                 /* mstatus.FS = Initial: FP instructions allowed */
    csrs mstatus, t0
    csrw fcsr, zero
#endif
    la t0, mtvm_trap_entry
    csrw mtvec, t0                   /* direct mode: every trap to one handler */
    call mtvm_c_start
1:  j 1b
2:  wfi
    j 2b
    .size _start, . - _start

/* int32_t mtvm_semihost_call(int32_t op, void* arg): the RISC-V semihosting
 * sequence (slli/ebreak/srai, uncompressed and on one page), answered by QEMU
 * with -semihosting-config enable=on. Emulated boards only: on hardware without
 * a debugger the ebreak traps. */
    .section .text.mtvm_semihost_call, "ax", @progbits
    .globl mtvm_semihost_call
    .type mtvm_semihost_call, @function
    .balign 16
    .option push
    .option norvc
mtvm_semihost_call:
    slli x0, x0, 0x1f
    ebreak
    srai x0, x0, 7
    ret
    .option pop
    .size mtvm_semihost_call, . - mtvm_semihost_call
