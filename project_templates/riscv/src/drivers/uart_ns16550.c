/* uart_ns16550.c: the 16550 UART (QEMU's RISC-V virt machine, and many SoCs),
 * byte-wide registers: RBR/THR 0, IER 1, FCR 2, LCR 3, MCR 4, LSR 5; with
 * LCR.DLAB set, DLL 0 and DLM 1. */
#include "board_config.h"
#include "riscv.h"
#include "uart.h"

#define UART_RBR MTVM_REG8(MTVM_UART_BASE + 0u)
#define UART_THR MTVM_REG8(MTVM_UART_BASE + 0u)
#define UART_DLL MTVM_REG8(MTVM_UART_BASE + 0u)
#define UART_IER MTVM_REG8(MTVM_UART_BASE + 1u)
#define UART_DLM MTVM_REG8(MTVM_UART_BASE + 1u)
#define UART_FCR MTVM_REG8(MTVM_UART_BASE + 2u)
#define UART_LCR MTVM_REG8(MTVM_UART_BASE + 3u)
#define UART_MCR MTVM_REG8(MTVM_UART_BASE + 4u)
#define UART_LSR MTVM_REG8(MTVM_UART_BASE + 5u)

#define LCR_DLAB 0x80u
#define LCR_8N1 0x03u
#define FCR_ENABLE_CLEAR 0x07u            /* FIFOs on and cleared, RX trigger at 1 byte */
#define MCR_OUT2 0x08u                    /* gates the interrupt line on PC-style boards */
#define IER_RX_AVAILABLE 0x01u
#define LSR_DATA_READY 0x01u
#define LSR_OVERRUN 0x02u
#define LSR_THR_EMPTY 0x20u

void mtvm_uart_init(void)
{
    uint32_t div = (MTVM_UART_PCLK_HZ + 8u * MTVM_UART_BAUD) / (16u * MTVM_UART_BAUD);
    if (div == 0u) {
        div = 1u;
    }
    UART_IER = 0u;
    UART_LCR = LCR_DLAB;
    UART_DLL = (uint8_t)(div & 0xFFu);
    UART_DLM = (uint8_t)((div >> 8) & 0xFFu);
    UART_LCR = LCR_8N1;
    UART_FCR = FCR_ENABLE_CLEAR;
    UART_MCR = MCR_OUT2;
    UART_IER = IER_RX_AVAILABLE;
    mtvm_irq_source_enable(MTVM_UART_RX_IRQ);
}

void mtvm_uart_write(const uint8_t* data, size_t size_bytes)
{
    size_t i;
    for (i = 0; i < size_bytes; ++i) {
        while ((UART_LSR & LSR_THR_EMPTY) == 0u) {
        }
        UART_THR = data[i];
    }
}

void mtvm_uart_isr(void)
{
    uint8_t lsr;
    while ((lsr = UART_LSR) & LSR_DATA_READY) {
        if (lsr & LSR_OVERRUN) {
            mtvm_uart_note_overrun();
        }
        mtvm_uart_ring_push(UART_RBR);
    }
}
