/* platform_cortex_m.h: the bare-metal template's own hooks, beside the
 * runtime's mtvm_platform.h (which this file implements). */
#ifndef MTVM_PLATFORM_CORTEX_M_H_
#define MTVM_PLATFORM_CORTEX_M_H_

#include <stdint.h>

#include "mtvm_platform.h"

/* Abort codes used by the startup code (the runtime's own codes are
 * MTVM_STATUS_*; these stay out of their range). */
#define MTVM_ABORT_FAULT 0x7F01
#define MTVM_ABORT_UNEXPECTED_IRQ 0x7F02

/* SysTick interrupt: extends the 24-bit counter to 64 bits. */
void mtvm_systick_handler(void);

/* Emulated boards: ends the QEMU process with `status` through semihosting
 * (SYS_EXIT_EXTENDED). Real boards: halts in a low-power loop. */
__attribute__((noreturn)) void mtvm_platform_exit(int32_t status);

/* Debug text: semihosting on emulated boards, nothing on real ones. */
void mtvm_semihost_write(const char* text);

/* Stack high-water mark: bytes of the stack reserve ever used since reset
 * (the reset handler paints the reserve with MTVM_STACK_PAINT). */
#define MTVM_STACK_PAINT 0xA5A5A5A5u
uint32_t mtvm_platform_stack_used_bytes(void);
uint32_t mtvm_platform_stack_reserve_bytes(void);

/* Which counter the timer uses: "dwt" or "systick" (after fallback). */
const char* mtvm_platform_timer_name(void);

#endif /* MTVM_PLATFORM_CORTEX_M_H_ */
