/* uart_cmsdk_uart.c: Arm CMSDK APB UART (MPS2 and MPS3 FPGA images).
 * Registers (Cortex-M System Design Kit TRM): DATA 0x00, STATE 0x04,
 * CTRL 0x08, INTSTATUS/INTCLEAR 0x0C, BAUDDIV 0x10. */
#include "board_config.h"
#include "cortex_m.h"
#include "uart.h"

#define UART_DATA    MTVM_REG(MTVM_UART_BASE + 0x00u)
#define UART_STATE   MTVM_REG(MTVM_UART_BASE + 0x04u)
#define UART_CTRL    MTVM_REG(MTVM_UART_BASE + 0x08u)
#define UART_INT     MTVM_REG(MTVM_UART_BASE + 0x0Cu)
#define UART_BAUDDIV MTVM_REG(MTVM_UART_BASE + 0x10u)

#define STATE_TX_FULL    (1u << 0)
#define STATE_RX_FULL    (1u << 1)
#define STATE_RX_OVERRUN (1u << 3)
#define CTRL_TX_EN       (1u << 0)
#define CTRL_RX_EN       (1u << 1)
#define CTRL_RX_INT_EN   (1u << 3)
#define INT_RX           (1u << 1)

void mtvm_uart_init(void)
{
    uint32_t div = MTVM_UART_PCLK_HZ / MTVM_UART_BAUD;
    UART_BAUDDIV = div < 16u ? 16u : div;   /* the UART needs at least 16 */
    UART_CTRL = CTRL_TX_EN | CTRL_RX_EN | CTRL_RX_INT_EN;
    mtvm_nvic_enable(MTVM_UART_RX_IRQ);
}

void mtvm_uart_write(const uint8_t* data, size_t size_bytes)
{
    size_t i;
    for (i = 0; i < size_bytes; ++i) {
        while (UART_STATE & STATE_TX_FULL) {
        }
        UART_DATA = data[i];
    }
}

void mtvm_uart_isr(void)
{
    /* Clear first: a byte arriving after the clear raises the line again. */
    UART_INT = INT_RX;
    if (UART_STATE & STATE_RX_OVERRUN) {
        UART_STATE = STATE_RX_OVERRUN;   /* write 1 to clear */
        mtvm_uart_note_overrun();
    }
    while (UART_STATE & STATE_RX_FULL) {
        mtvm_uart_ring_push((uint8_t)UART_DATA);
    }
}
