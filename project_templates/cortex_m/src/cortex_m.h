/* cortex_m.h: the few Cortex-M core registers the template touches (System
 * Control Block, NVIC, SysTick, DWT), as plain addresses from the Armv7-M /
 * Armv8-M architecture reference manuals. No CMSIS dependency. */
#ifndef MTVM_CORTEX_M_H_
#define MTVM_CORTEX_M_H_

#include <stdint.h>

#define MTVM_REG(addr) (*(volatile uint32_t*)(uintptr_t)(addr))

/* System Control Block */
#define SCB_ICSR     MTVM_REG(0xE000ED04u)
#define SCB_VTOR     MTVM_REG(0xE000ED08u)
#define SCB_AIRCR    MTVM_REG(0xE000ED0Cu)
#define SCB_CCR      MTVM_REG(0xE000ED14u)
#define SCB_CPACR    MTVM_REG(0xE000ED88u)
#define SCB_DEMCR    MTVM_REG(0xE000EDFCu)
#define SCB_ICSR_PENDSTSET (1u << 26)   /* SysTick interrupt pending */

/* NVIC: set-enable registers, one bit per external interrupt */
#define NVIC_ISER(n) MTVM_REG(0xE000E100u + 4u * (n))
#define NVIC_ICPR(n) MTVM_REG(0xE000E280u + 4u * (n))

/* SysTick: 24-bit down counter */
#define SYST_CSR     MTVM_REG(0xE000E010u)
#define SYST_RVR     MTVM_REG(0xE000E014u)
#define SYST_CVR     MTVM_REG(0xE000E018u)
#define SYST_CSR_ENABLE    (1u << 0)
#define SYST_CSR_TICKINT   (1u << 1)
#define SYST_CSR_CLKSOURCE (1u << 2)   /* 1 = processor clock */
#define SYST_CSR_COUNTFLAG (1u << 16)

/* DWT cycle counter (absent on Cortex-M0/M0+ and not emulated by QEMU) */
#define DWT_CTRL     MTVM_REG(0xE0001000u)
#define DWT_CYCCNT   MTVM_REG(0xE0001004u)
#define DWT_LAR      MTVM_REG(0xE0001FB0u)
#define DEMCR_TRCENA (1u << 24)
#define DWT_CTRL_CYCCNTENA   (1u << 0)
#define DWT_CTRL_NOCYCCNT    (1u << 25)

static inline void mtvm_nvic_enable(uint32_t irq)
{
    NVIC_ICPR(irq >> 5) = 1u << (irq & 31u);
    NVIC_ISER(irq >> 5) = 1u << (irq & 31u);
}

static inline void mtvm_dsb(void) { __asm__ volatile("dsb" ::: "memory"); }
static inline void mtvm_isb(void) { __asm__ volatile("isb" ::: "memory"); }
static inline void mtvm_irq_enable(void) { __asm__ volatile("cpsie i" ::: "memory"); }
static inline void mtvm_irq_disable(void) { __asm__ volatile("cpsid i" ::: "memory"); }
/* Masks interrupts and returns the previous PRIMASK for mtvm_irq_restore. */
static inline uint32_t mtvm_irq_save(void)
{
    uint32_t primask;
    __asm__ volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask) : : "memory");
    return primask;
}
static inline void mtvm_irq_restore(uint32_t primask)
{
    __asm__ volatile("msr primask, %0" : : "r"(primask) : "memory");
}
static inline void mtvm_wfi(void) { __asm__ volatile("wfi" ::: "memory"); }

#endif /* MTVM_CORTEX_M_H_ */
