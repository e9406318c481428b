/* uart_stm32_usart_v1.c: the STM32F1/F2/F4 USART register layout
 * (RM0090): SR 0x00, DR 0x04, BRR 0x08, CR1 0x0C. Also QEMU's
 * stm32f2xx-usart (netduinoplus2). */
#include "board_config.h"
#include "cortex_m.h"
#include "stm32_common.h"
#include "uart.h"

#define USART_SR  MTVM_REG(MTVM_UART_BASE + 0x00u)
#define USART_DR  MTVM_REG(MTVM_UART_BASE + 0x04u)
#define USART_BRR MTVM_REG(MTVM_UART_BASE + 0x08u)
#define USART_CR1 MTVM_REG(MTVM_UART_BASE + 0x0Cu)

#define SR_ORE     (1u << 3)
#define SR_RXNE    (1u << 5)
#define SR_TXE     (1u << 7)
#define CR1_RE     (1u << 2)
#define CR1_TE     (1u << 3)
#define CR1_RXNEIE (1u << 5)
#define CR1_UE     (1u << 13)

void mtvm_uart_init(void)
{
    stm32_uart_pins_and_clocks();
    USART_CR1 = 0;
    /* Oversampling by 16: BRR = fck / baud (mantissa.fraction in 12.4). */
    USART_BRR = (MTVM_UART_PCLK_HZ + MTVM_UART_BAUD / 2u) / MTVM_UART_BAUD;
    USART_CR1 = CR1_UE | CR1_TE | CR1_RE | CR1_RXNEIE;
    mtvm_nvic_enable(MTVM_UART_RX_IRQ);
}

void mtvm_uart_write(const uint8_t* data, size_t size_bytes)
{
    size_t i;
    for (i = 0; i < size_bytes; ++i) {
        while (!(USART_SR & SR_TXE)) {
        }
        USART_DR = data[i];
    }
}

void mtvm_uart_isr(void)
{
    uint32_t sr;
    /* Reading SR then DR clears RXNE and an overrun. */
    while ((sr = USART_SR) & (SR_RXNE | SR_ORE)) {
        uint8_t byte = (uint8_t)USART_DR;
        if (sr & SR_ORE) {
            mtvm_uart_note_overrun();
        }
        if (sr & SR_RXNE) {
            mtvm_uart_ring_push(byte);
        }
    }
}
