/* Startup of the kernel-library unit tests on the emulated Cortex-M boards:
 * a vector table, .data/.bss set up, the FPU enabled, then main() with
 * printf and exit() over semihosting (newlib's rdimon), so the test's output
 * and exit status reach the host without a UART driver. */
#include <stdint.h>
#include <stdlib.h>

extern int main(void);
extern void initialise_monitor_handles(void);
extern uint32_t __data_load, __data_start, __data_end, __bss_start__, __bss_end__, __stack_top;

void reset_handler(void);
void reset_handler(void)
{
    uint32_t *s = &__data_load, *d = &__data_start;
    while (d < &__data_end) {
        *d++ = *s++;
    }
    for (d = &__bss_start__; d < &__bss_end__;) {
        *d++ = 0;
    }
#if defined(__ARM_FP)
    *(volatile uint32_t*)0xE000ED88u |= 0xFu << 20;   /* CPACR: full access to CP10/CP11 */
    __asm__ volatile("dsb\n\tisb");
#endif
    initialise_monitor_handles();
    exit(main());
}

static void hang(void)
{
    for (;;) {
    }
}

/* newlib's exit() runs the init/fini arrays through these. */
void _init(void);
void _fini(void);
void _init(void) {}
void _fini(void) {}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))&__stack_top, reset_handler, hang, hang, hang, hang, hang, 0, 0, 0, 0,
    hang, hang, 0, hang, hang};
