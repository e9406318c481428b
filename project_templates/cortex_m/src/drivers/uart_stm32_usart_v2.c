/* uart_stm32_usart_v2.c: the newer STM32 USART/LPUART register layout
 * (F0/F3/F7/L4/G4/H7; RM0385, RM0432): CR1 0x00, BRR 0x0C, ISR 0x1C,
 * ICR 0x20, RDR 0x24, TDR 0x28. MTVM_UART_LPUART selects the LPUART baud
 * formula (BRR = 256 * fck / baud). */
#include "board_config.h"
#include "cortex_m.h"
#include "stm32_common.h"
#include "uart.h"

#define USART_CR1 MTVM_REG(MTVM_UART_BASE + 0x00u)
#define USART_BRR MTVM_REG(MTVM_UART_BASE + 0x0Cu)
#define USART_ISR MTVM_REG(MTVM_UART_BASE + 0x1Cu)
#define USART_ICR MTVM_REG(MTVM_UART_BASE + 0x20u)
#define USART_RDR MTVM_REG(MTVM_UART_BASE + 0x24u)
#define USART_TDR MTVM_REG(MTVM_UART_BASE + 0x28u)

#define CR1_UE     (1u << 0)
#define CR1_RE     (1u << 2)
#define CR1_TE     (1u << 3)
#define CR1_RXNEIE (1u << 5)
#define ISR_ORE    (1u << 3)
#define ISR_RXNE   (1u << 5)
#define ISR_TXE    (1u << 7)
#define ICR_ORECF  (1u << 3)

void mtvm_uart_init(void)
{
    stm32_uart_pins_and_clocks();
    USART_CR1 = 0;
#if MTVM_UART_LPUART
    USART_BRR = (uint32_t)((256ull * MTVM_UART_PCLK_HZ + MTVM_UART_BAUD / 2u) / MTVM_UART_BAUD);
#else
    USART_BRR = (MTVM_UART_PCLK_HZ + MTVM_UART_BAUD / 2u) / MTVM_UART_BAUD;
#endif
    USART_CR1 = CR1_TE | CR1_RE | CR1_RXNEIE;
    USART_CR1 |= CR1_UE;
    mtvm_nvic_enable(MTVM_UART_RX_IRQ);
}

void mtvm_uart_write(const uint8_t* data, size_t size_bytes)
{
    size_t i;
    for (i = 0; i < size_bytes; ++i) {
        while (!(USART_ISR & ISR_TXE)) {
        }
        USART_TDR = data[i];
    }
}

void mtvm_uart_isr(void)
{
    uint32_t isr;
    while ((isr = USART_ISR) & (ISR_RXNE | ISR_ORE)) {
        if (isr & ISR_ORE) {
            USART_ICR = ICR_ORECF;
            mtvm_uart_note_overrun();
        }
        if (isr & ISR_RXNE) {
            mtvm_uart_ring_push((uint8_t)USART_RDR);
        }
    }
}
