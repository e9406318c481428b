/* uart.h: what a UART driver (src/drivers/uart_<driver>.c, chosen by the
 * board's "uart.driver") provides, and the receive ring buffer it fills.
 *
 * Reception is interrupt driven: the driver's interrupt handler moves every
 * received byte into the ring (uart_ring.c); the main loop drains it with
 * mtvm_uart_read() and feeds the RPC server. The ring holds
 * MTVM_UART_RX_RING_BYTES (a power of two, set by the project generator from
 * the announced maximum packet size), so a whole request fits in it even
 * while the main loop is busy running the model. */
#ifndef MTVM_UART_H_
#define MTVM_UART_H_

#include <stddef.h>
#include <stdint.h>

/* Driver: baud rate, 8N1, pins and clocks, RX interrupt enabled. */
void mtvm_uart_init(void);
/* Driver: blocking transmit of every byte. */
void mtvm_uart_write(const uint8_t* data, size_t size_bytes);
/* Driver: the RX interrupt handler (the vector table dispatches to it). */
void mtvm_uart_isr(void);

/* Ring: called by the driver's handler for each received byte. */
void mtvm_uart_ring_push(uint8_t byte);
/* Ring: moves up to max_bytes received bytes to out; returns how many. */
size_t mtvm_uart_read(uint8_t* out, size_t max_bytes);
/* Ring: bytes dropped because the ring was full (or the UART overran). */
uint32_t mtvm_uart_dropped(void);
void mtvm_uart_note_overrun(void);

#endif /* MTVM_UART_H_ */
