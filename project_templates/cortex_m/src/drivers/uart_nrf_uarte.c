/* uart_nrf_uarte.c: Nordic nRF52 UARTE (UART with EasyDMA; nRF52840 PS
 * v1.x, chapter UARTE). DMA buffers must be in RAM, so transmit goes through
 * a small RAM staging buffer, and reception runs one-byte DMA transfers
 * restarted from the ENDRX interrupt (the UARTE's 6-byte RX FIFO covers the
 * restart). */
#include "board_config.h"
#include "cortex_m.h"
#include "uart.h"

#define UARTE(off) MTVM_REG(MTVM_UART_BASE + (off))
#define TASKS_STARTRX   UARTE(0x000u)
#define TASKS_STARTTX   UARTE(0x008u)
#define EVENTS_ENDRX    UARTE(0x110u)
#define EVENTS_ENDTX    UARTE(0x120u)
#define EVENTS_ERROR    UARTE(0x124u)
#define INTENSET        UARTE(0x304u)
#define ERRORSRC        UARTE(0x480u)
#define ENABLE          UARTE(0x500u)
#define PSEL_RTS        UARTE(0x508u)
#define PSEL_TXD        UARTE(0x50Cu)
#define PSEL_CTS        UARTE(0x510u)
#define PSEL_RXD        UARTE(0x514u)
#define BAUDRATE        UARTE(0x524u)
#define RXD_PTR         UARTE(0x534u)
#define RXD_MAXCNT      UARTE(0x538u)
#define RXD_AMOUNT      UARTE(0x53Cu)
#define TXD_PTR         UARTE(0x544u)
#define TXD_MAXCNT      UARTE(0x548u)
#define CONFIG          UARTE(0x56Cu)

#define INT_ENDRX       (1u << 4)
#define ENABLE_UARTE    8u
#define PSEL_DISCONNECTED 0xFFFFFFFFu

/* GPIO P0: PIN_CNF[n] at 0x50000700 + 4n; OUTSET at 0x50000508. */
#define P0_OUTSET       MTVM_REG(0x50000508u)
#define P0_PIN_CNF(n)   MTVM_REG(0x50000700u + 4u * (n))

static uint8_t rx_byte;
static uint8_t tx_buf[64];

static void start_rx(void)
{
    RXD_PTR = (uint32_t)(uintptr_t)&rx_byte;
    RXD_MAXCNT = 1;
    TASKS_STARTRX = 1;
}

void mtvm_uart_init(void)
{
    P0_OUTSET = 1u << MTVM_UART_TX_PIN;     /* idle high before the UARTE takes it */
    P0_PIN_CNF(MTVM_UART_TX_PIN) = 1u;      /* output */
    P0_PIN_CNF(MTVM_UART_RX_PIN) = 0u;      /* input, buffer connected */
    PSEL_TXD = MTVM_UART_TX_PIN;
    PSEL_RXD = MTVM_UART_RX_PIN;
    PSEL_RTS = PSEL_DISCONNECTED;
    PSEL_CTS = PSEL_DISCONNECTED;
    BAUDRATE = MTVM_UART_BAUD_REG;
    CONFIG = 0;                             /* 8N1, no flow control */
    ENABLE = ENABLE_UARTE;
    EVENTS_ENDRX = 0;
    INTENSET = INT_ENDRX;
    mtvm_nvic_enable(MTVM_UART_RX_IRQ);
    start_rx();
}

void mtvm_uart_write(const uint8_t* data, size_t size_bytes)
{
    while (size_bytes > 0) {
        size_t i, n = size_bytes < sizeof tx_buf ? size_bytes : sizeof tx_buf;
        for (i = 0; i < n; ++i) {
            tx_buf[i] = data[i];
        }
        EVENTS_ENDTX = 0;
        TXD_PTR = (uint32_t)(uintptr_t)tx_buf;
        TXD_MAXCNT = (uint32_t)n;
        TASKS_STARTTX = 1;
        while (!EVENTS_ENDTX) {
        }
        data += n;
        size_bytes -= n;
    }
}

void mtvm_uart_isr(void)
{
    if (EVENTS_ERROR) {
        EVENTS_ERROR = 0;
        ERRORSRC = ERRORSRC;                /* write 1 to clear */
        mtvm_uart_note_overrun();
    }
    if (EVENTS_ENDRX) {
        EVENTS_ENDRX = 0;
        if (RXD_AMOUNT) {
            mtvm_uart_ring_push(rx_byte);
        }
        start_rx();
    }
}
