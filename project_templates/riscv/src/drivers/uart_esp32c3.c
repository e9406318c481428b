/* uart_esp32c3.c: UART0 of the ESP32-C3 (ESP32-C3 Technical Reference Manual,
 * chapters "UART Controller" and "Interrupt Matrix"). Registers, 32-bit: FIFO
 * 0x00 (a read pops a received byte, a write queues one), INT_RAW 0x04, INT_ENA
 * 0x0C, INT_CLR 0x10, CLKDIV 0x14 (integer [11:0], sixteenths [23:20]), STATUS 0x1C
 * (RX count [9:0], TX count [25:16]), CONF0 0x20, CONF1 0x24, MEM_CONF 0x60,
 * CLK_CONF 0x78. The ROM leaves the pins (GPIO 21 TX, 20 RX) on UART0.
 *
 * Reception is interrupt driven, as with the other drivers: the interrupt matrix
 * maps the UART's source (MTVM_UART_RX_IRQ) to CPU interrupt MTVM_INTMATRIX_CPU_INT,
 * whose vector table entry (start.S) jumps to mtvm_uart_irq_entry below. The C3
 * has no PLIC: startup.c's trap handler only sees what is not the UART. */
#include "board_config.h"
#include "riscv.h"
#include "uart.h"

#define UART_FIFO MTVM_REG(MTVM_UART_BASE + 0x00u)
#define UART_INT_RAW MTVM_REG(MTVM_UART_BASE + 0x04u)
#define UART_INT_ENA MTVM_REG(MTVM_UART_BASE + 0x0Cu)
#define UART_INT_CLR MTVM_REG(MTVM_UART_BASE + 0x10u)
#define UART_CLKDIV MTVM_REG(MTVM_UART_BASE + 0x14u)
#define UART_STATUS MTVM_REG(MTVM_UART_BASE + 0x1Cu)
#define UART_CONF0 MTVM_REG(MTVM_UART_BASE + 0x20u)
#define UART_CONF1 MTVM_REG(MTVM_UART_BASE + 0x24u)
#define UART_MEM_CONF MTVM_REG(MTVM_UART_BASE + 0x60u)
#define UART_CLK_CONF MTVM_REG(MTVM_UART_BASE + 0x78u)

#define STATUS_RX_COUNT(s) ((s) & 0x3FFu)
#define STATUS_TX_COUNT(s) (((s) >> 16) & 0x3FFu)
#define TX_FIFO_BYTES 128u
#define CONF0_FORMAT_MASK 0x3Fu             /* parity, parity_en, bit_num, stop_bit_num */
#define CONF0_8N1 ((3u << 2) | (1u << 4))   /* 8 data bits, 1 stop bit, no parity */
#define CONF0_RXFIFO_RST (1u << 17)
#define CONF1_RXFIFO_FULL_MASK 0x1FFu
#define CONF1_RX_TOUT_EN (1u << 21)
#define MEM_CONF_RX_TOUT_MASK (0x3FFu << 16)
#define MEM_CONF_RX_TOUT_BITS (10u << 16)   /* idle for one character: timeout */
#define CLK_CONF_DIV_NUM_MASK (0xFFu << 12)
#define CLK_CONF_SEL_MASK (3u << 20)
#define CLK_CONF_SEL_XTAL (3u << 20)        /* the 40 MHz crystal: MTVM_UART_PCLK_HZ */
#define CLK_CONF_ENABLES ((1u << 22) | (1u << 24) | (1u << 25))   /* sclk, tx, rx */
#define INT_RXFIFO_FULL (1u << 0)
#define INT_RXFIFO_OVF (1u << 4)
#define INT_RXFIFO_TOUT (1u << 8)
#define INT_RX (INT_RXFIFO_FULL | INT_RXFIFO_OVF | INT_RXFIFO_TOUT)

/* Interrupt matrix (its CPU-interrupt registers: the C3's interrupt controller). */
#define INTMATRIX_MAP(src) MTVM_REG(MTVM_INTMATRIX_BASE + 4u * (src))
#define CPU_INT_ENABLE MTVM_REG(MTVM_INTMATRIX_BASE + 0x104u)
#define CPU_INT_TYPE MTVM_REG(MTVM_INTMATRIX_BASE + 0x108u)   /* 0: level */
#define CPU_INT_PRI(n) MTVM_REG(MTVM_INTMATRIX_BASE + 0x114u + 4u * (n))
#define CPU_INT_THRESH MTVM_REG(MTVM_INTMATRIX_BASE + 0x194u)

void mtvm_uart_irq_entry(void);

void mtvm_uart_init(void)
{
    uint32_t div16 = (16u * MTVM_UART_PCLK_HZ + MTVM_UART_BAUD / 2u) / MTVM_UART_BAUD;
    uint32_t cpu_int = (uint32_t)MTVM_INTMATRIX_CPU_INT;
    while (STATUS_TX_COUNT(UART_STATUS) != 0u) {   /* let the ROM's last output go */
    }
    UART_INT_ENA = 0u;
    UART_CLK_CONF = (UART_CLK_CONF & ~(CLK_CONF_DIV_NUM_MASK | CLK_CONF_SEL_MASK)) |
                    CLK_CONF_SEL_XTAL | CLK_CONF_ENABLES;
    UART_CLKDIV = ((div16 >> 4) & 0xFFFu) | ((div16 & 0xFu) << 20);
    UART_CONF0 = (UART_CONF0 & ~CONF0_FORMAT_MASK) | CONF0_8N1;
    UART_CONF0 |= CONF0_RXFIFO_RST;
    UART_CONF0 &= ~CONF0_RXFIFO_RST;
    UART_CONF1 = (UART_CONF1 & ~CONF1_RXFIFO_FULL_MASK) | 1u | CONF1_RX_TOUT_EN;
    UART_MEM_CONF = (UART_MEM_CONF & ~MEM_CONF_RX_TOUT_MASK) | MEM_CONF_RX_TOUT_BITS;
    UART_INT_CLR = 0xFFFFFFFFu;
    UART_INT_ENA = INT_RX;

    INTMATRIX_MAP(MTVM_UART_RX_IRQ) = cpu_int;
    CPU_INT_TYPE &= ~(1u << cpu_int);
    CPU_INT_PRI(cpu_int) = 1u;
    CPU_INT_THRESH = 1u;                 /* priority 1 and above are taken */
    CPU_INT_ENABLE |= 1u << cpu_int;
}

void mtvm_uart_write(const uint8_t* data, size_t size_bytes)
{
    size_t i;
    for (i = 0; i < size_bytes; ++i) {
        while (STATUS_TX_COUNT(UART_STATUS) >= TX_FIFO_BYTES - 1u) {
        }
        UART_FIFO = data[i];             /* a 32-bit write: a byte access would read the FIFO */
    }
}

void mtvm_uart_isr(void)
{
    if (UART_INT_RAW & INT_RXFIFO_OVF) {
        mtvm_uart_note_overrun();
    }
    /* Clear first, then drain: a byte that arrives after the drain raises the
     * (level) interrupt again instead of waiting in the FIFO unseen. */
    UART_INT_CLR = INT_RX;
    while (STATUS_RX_COUNT(UART_STATUS) != 0u) {
        mtvm_uart_ring_push((uint8_t)(UART_FIFO & 0xFFu));
    }
}

/* Vector table entry MTVM_INTMATRIX_CPU_INT: GCC saves what the handler uses and
 * returns with mret. */
__attribute__((interrupt("machine"), aligned(4), used))
void mtvm_uart_irq_entry(void)
{
    mtvm_uart_isr();
}
