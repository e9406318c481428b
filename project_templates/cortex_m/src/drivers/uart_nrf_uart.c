/* uart_nrf_uart.c: Nordic nRF51 UART (no DMA; nRF51 Series Reference
 * Manual v3.0, chapter 29), as on the BBC micro:bit. Transmit writes TXD and
 * waits for the TXDRDY event; reception takes the RXDRDY interrupt and reads
 * RXD, which pops the UART's 6-byte receive FIFO (the event is cleared before
 * the read, so a byte that arrives meanwhile raises it again). */
#include "board_config.h"
#include "cortex_m.h"
#include "uart.h"

#define UART(off) MTVM_REG(MTVM_UART_BASE + (off))
#define TASKS_STARTRX   UART(0x000u)
#define TASKS_STARTTX   UART(0x008u)
#define EVENTS_RXDRDY   UART(0x108u)
#define EVENTS_TXDRDY   UART(0x11Cu)
#define EVENTS_ERROR    UART(0x124u)
#define INTENSET        UART(0x304u)
#define ERRORSRC        UART(0x480u)
#define ENABLE          UART(0x500u)
#define PSELRTS         UART(0x508u)
#define PSELTXD         UART(0x50Cu)
#define PSELCTS         UART(0x510u)
#define PSELRXD         UART(0x514u)
#define RXD             UART(0x518u)
#define TXD             UART(0x51Cu)
#define BAUDRATE        UART(0x524u)
#define CONFIG          UART(0x56Cu)

#define INT_RXDRDY      (1u << 2)
#define INT_ERROR       (1u << 9)
#define ENABLE_UART     4u
#define PSEL_DISCONNECTED 0xFFFFFFFFu

/* GPIO: OUTSET at 0x50000508, PIN_CNF[n] at 0x50000700 + 4n. */
#define GPIO_OUTSET     MTVM_REG(0x50000508u)
#define GPIO_PIN_CNF(n) MTVM_REG(0x50000700u + 4u * (n))

void mtvm_uart_init(void)
{
    GPIO_OUTSET = 1u << MTVM_UART_TX_PIN;   /* idle high before the UART takes it */
    GPIO_PIN_CNF(MTVM_UART_TX_PIN) = 1u;    /* output */
    GPIO_PIN_CNF(MTVM_UART_RX_PIN) = 0u;    /* input, buffer connected */
    PSELTXD = MTVM_UART_TX_PIN;
    PSELRXD = MTVM_UART_RX_PIN;
    PSELRTS = PSEL_DISCONNECTED;
    PSELCTS = PSEL_DISCONNECTED;
    BAUDRATE = MTVM_UART_BAUD_REG;
    CONFIG = 0;                             /* 8N1, no flow control */
    ENABLE = ENABLE_UART;
    EVENTS_RXDRDY = 0;
    EVENTS_ERROR = 0;
    INTENSET = INT_RXDRDY | INT_ERROR;
    mtvm_nvic_enable(MTVM_UART_RX_IRQ);
    TASKS_STARTTX = 1;
    TASKS_STARTRX = 1;
}

void mtvm_uart_write(const uint8_t* data, size_t size_bytes)
{
    size_t i;
    for (i = 0; i < size_bytes; ++i) {
        EVENTS_TXDRDY = 0;
        TXD = data[i];
        while (!EVENTS_TXDRDY) {
        }
    }
}

void mtvm_uart_isr(void)
{
    if (EVENTS_ERROR) {
        EVENTS_ERROR = 0;
        ERRORSRC = ERRORSRC;                /* write 1 to clear */
        mtvm_uart_note_overrun();
    }
    while (EVENTS_RXDRDY) {
        EVENTS_RXDRDY = 0;
        mtvm_uart_ring_push((uint8_t)RXD);
    }
}
