/* uart_fe310_uart.c: the SiFive FE310 UART (QEMU's sifive_e machine, HiFive1).
 * Registers (FE310-G002 manual, chapter 18): txdata 0x00 (bit 31: full), rxdata
 * 0x04 (bit 31: empty), txctrl 0x08, rxctrl 0x0C, ie 0x10, ip 0x14, div 0x18
 * (baud = tlclk / (div + 1)). The pins are switched to the UART by the GPIO
 * block's IOF registers. */
#include "board_config.h"
#include "riscv.h"
#include "uart.h"

#define UART_TXDATA MTVM_REG(MTVM_UART_BASE + 0x00u)
#define UART_RXDATA MTVM_REG(MTVM_UART_BASE + 0x04u)
#define UART_TXCTRL MTVM_REG(MTVM_UART_BASE + 0x08u)
#define UART_RXCTRL MTVM_REG(MTVM_UART_BASE + 0x0Cu)
#define UART_IE MTVM_REG(MTVM_UART_BASE + 0x10u)
#define UART_DIV MTVM_REG(MTVM_UART_BASE + 0x18u)

#define GPIO_IOF_EN MTVM_REG(MTVM_GPIO_BASE + 0x38u)
#define GPIO_IOF_SEL MTVM_REG(MTVM_GPIO_BASE + 0x3Cu)

#define TXDATA_FULL 0x80000000u
#define RXDATA_EMPTY 0x80000000u
#define TXCTRL_TXEN 1u                    /* one stop bit, watermark 0 */
#define RXCTRL_RXEN 1u                    /* watermark 0: interrupt from one byte on */
#define IE_RXWM 2u

void mtvm_uart_init(void)
{
    uint32_t pins = (1u << MTVM_UART_TX_PIN) | (1u << MTVM_UART_RX_PIN);
    GPIO_IOF_SEL &= ~pins;               /* IOF0: the UART */
    GPIO_IOF_EN |= pins;
    UART_DIV = MTVM_UART_PCLK_HZ / MTVM_UART_BAUD - 1u;
    UART_TXCTRL = TXCTRL_TXEN;
    UART_RXCTRL = RXCTRL_RXEN;
    UART_IE = IE_RXWM;
    mtvm_irq_source_enable(MTVM_UART_RX_IRQ);
}

void mtvm_uart_write(const uint8_t* data, size_t size_bytes)
{
    size_t i;
    for (i = 0; i < size_bytes; ++i) {
        while (UART_TXDATA & TXDATA_FULL) {
        }
        UART_TXDATA = data[i];
    }
}

void mtvm_uart_isr(void)
{
    for (;;) {
        uint32_t v = UART_RXDATA;        /* one read pops one byte */
        if (v & RXDATA_EMPTY) {
            break;
        }
        mtvm_uart_ring_push((uint8_t)(v & 0xFFu));
    }
}
