/* mtvm_platform_template.c: copy this file into a new board port and fill in
 * the hooks of mtvm_platform.h. It compiles as is (a do-nothing port) so a
 * port can start from a building project. */
#include "mtvm_platform.h"

void mtvm_platform_init(void)
{
    /* Clocks, UART (baud rate, 8N1), timer. */
}

void mtvm_platform_write(const uint8_t* data, size_t size_bytes)
{
    /* Blocking UART transmit of all bytes, e.g.:
     *   for (i = 0; i < size_bytes; ++i) { while (!(UART->STATE & TXFULL)) {} UART->DATA = data[i]; } */
    (void)data;
    (void)size_bytes;
}

void mtvm_platform_abort(int32_t code)
{
    (void)code;
    for (;;) {
        /* Halt (or NVIC_SystemReset()). Must not return. */
    }
}

static uint32_t start_ticks;

static uint32_t read_counter(void)
{
    return 0;   /* e.g. DWT->CYCCNT (enable DWT in init), or a free-running timer */
}

void mtvm_platform_timer_start(void)
{
    start_ticks = read_counter();
}

uint64_t mtvm_platform_timer_stop_ticks(void)
{
    return (uint32_t)(read_counter() - start_ticks);   /* wraps correctly for 32 bits */
}

uint64_t mtvm_platform_ticks_per_second(void)
{
    return 1000000u;   /* the counter's rate, e.g. SystemCoreClock for DWT->CYCCNT */
}

void mtvm_platform_log(const char* message)
{
    (void)message;     /* only called with -DMTVM_USE_PLATFORM_LOG */
}
