/* stm32_common.h: clock gating and pin muxing shared by the STM32 USART
 * drivers. The board data gives the RCC enable bits as (register, bit) pairs
 * and the pins as port/pin/alternate function, so no per-family tables are
 * needed here. Only register writes, no polling of ready flags (QEMU leaves
 * RCC and GPIO unimplemented: writes are ignored, reads return 0). */
#ifndef MTVM_STM32_COMMON_H_
#define MTVM_STM32_COMMON_H_

#include <stdint.h>

#include "board_config.h"
#include "cortex_m.h"

typedef struct { uint32_t reg; uint32_t bit; } mtvm_reg_bit_t;

static inline void stm32_set_bits(const mtvm_reg_bit_t* list, uint32_t n)
{
    uint32_t i;
    for (i = 0; i < n; ++i) {
        MTVM_REG(list[i].reg) |= 1u << list[i].bit;
        (void)MTVM_REG(list[i].reg);   /* read back: the clock is on after this */
    }
}

/* GPIO port registers (same layout on F4, F7, L4): MODER at 0x00 (2 bits per
 * pin, 0b10 = alternate function), OSPEEDR at 0x08, AFR[0..1] at 0x20/0x24
 * (4 bits per pin). */
static inline void stm32_pin_af(uint32_t port, uint32_t pin, uint32_t af)
{
    uint32_t base = MTVM_GPIO_BASE + 0x400u * port;
    uint32_t afr = base + (pin < 8u ? 0x20u : 0x24u);
    uint32_t shift4 = (pin & 7u) * 4u;
    MTVM_REG(afr) = (MTVM_REG(afr) & ~(0xFu << shift4)) | (af << shift4);
    MTVM_REG(base + 0x08u) |= 2u << (pin * 2u);                       /* fast */
    MTVM_REG(base + 0x00u) = (MTVM_REG(base + 0x00u) & ~(3u << (pin * 2u))) | (2u << (pin * 2u));
}

static inline void stm32_uart_pins_and_clocks(void)
{
    static const mtvm_reg_bit_t clocks[] = MTVM_UART_CLOCK_ENABLES;
    static const mtvm_reg_bit_t extra[] = MTVM_UART_SET_BITS;
    stm32_set_bits(clocks, MTVM_UART_CLOCK_ENABLE_COUNT);
    stm32_set_bits(extra, MTVM_UART_SET_BITS_COUNT);
    stm32_pin_af(MTVM_UART_TX_PORT, MTVM_UART_TX_PIN, MTVM_UART_AF);
    stm32_pin_af(MTVM_UART_RX_PORT, MTVM_UART_RX_PIN, MTVM_UART_AF);
}

#endif /* MTVM_STM32_COMMON_H_ */
