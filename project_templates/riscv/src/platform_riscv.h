/* platform_riscv.h: the bare-metal RISC-V template's own hooks, beside the
 * runtime's mtvm_platform.h (which platform_riscv.c implements). */
#ifndef MTVM_PLATFORM_RISCV_H_
#define MTVM_PLATFORM_RISCV_H_

#include <stdint.h>

#include "mtvm_platform.h"

/* Abort codes used by the startup code (the runtime's own codes are
 * MTVM_STATUS_*; these stay out of their range). */
#define MTVM_ABORT_FAULT 0x7F01
#define MTVM_ABORT_UNEXPECTED_IRQ 0x7F02

/* Emulated boards: ends the QEMU process with `status` through semihosting
 * (SYS_EXIT_EXTENDED). Real boards: halts in a low-power loop. */
__attribute__((noreturn)) void mtvm_platform_exit(int32_t status);

/* Debug text: semihosting on emulated boards, nothing on real ones. */
void mtvm_semihost_write(const char* text);

/* start.S: one semihosting call (emulated boards only). */
int32_t mtvm_semihost_call(int32_t op, void* arg);

/* Stack high-water mark: bytes of the stack reserve ever used since reset
 * (the startup code paints the reserve with MTVM_STACK_PAINT). */
#define MTVM_STACK_PAINT 0xA5A5A5A5u
uint32_t mtvm_platform_stack_used_bytes(void);
uint32_t mtvm_platform_stack_reserve_bytes(void);

/* Which counter the timer uses: "minstret" (QEMU -icount: instructions),
 * "mtime" or "mcycle". */
const char* mtvm_platform_timer_name(void);

#endif /* MTVM_PLATFORM_RISCV_H_ */
