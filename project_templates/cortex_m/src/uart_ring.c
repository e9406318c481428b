/* uart_ring.c: single-producer (RX interrupt) / single-consumer (main loop)
 * ring buffer. Indices are free-running; the size is a power of two. */
#include "uart.h"

#include "board_config.h"

#if (MTVM_UART_RX_RING_BYTES & (MTVM_UART_RX_RING_BYTES - 1)) != 0
#error "MTVM_UART_RX_RING_BYTES must be a power of two"
#endif

static uint8_t ring[MTVM_UART_RX_RING_BYTES];
static volatile uint32_t ring_head;   /* written by the interrupt */
static volatile uint32_t ring_tail;   /* written by the main loop */
static volatile uint32_t ring_dropped;

void mtvm_uart_ring_push(uint8_t byte)
{
    uint32_t head = ring_head;
    if (head - ring_tail >= MTVM_UART_RX_RING_BYTES) {
        ring_dropped++;
        return;
    }
    ring[head & (MTVM_UART_RX_RING_BYTES - 1u)] = byte;
    ring_head = head + 1u;
}

size_t mtvm_uart_read(uint8_t* out, size_t max_bytes)
{
    size_t n = 0;
    uint32_t tail = ring_tail;
    uint32_t head = ring_head;
    while (tail != head && n < max_bytes) {
        out[n++] = ring[tail & (MTVM_UART_RX_RING_BYTES - 1u)];
        tail++;
    }
    ring_tail = tail;
    return n;
}

uint32_t mtvm_uart_dropped(void)
{
    return ring_dropped;
}

void mtvm_uart_note_overrun(void)
{
    ring_dropped++;
}
