/* riscv.h: the few machine-mode CSRs and SiFive PLIC registers the template
 * touches (RISC-V privileged spec; the PLIC layout SiFive's cores and QEMU's
 * virt and sifive_e machines share). No vendor SDK dependency. */
#ifndef MTVM_RISCV_H_
#define MTVM_RISCV_H_

#include <stdint.h>

#include "board_config.h"

#define MTVM_REG(addr) (*(volatile uint32_t*)(uintptr_t)(addr))
#define MTVM_REG8(addr) (*(volatile uint8_t*)(uintptr_t)(addr))

#define MTVM_CSR_READ(csr, out) __asm__ volatile("csrr %0, " #csr : "=r"(out))
#define MTVM_CSR_WRITE(csr, value) __asm__ volatile("csrw " #csr ", %0" : : "r"(value))
#define MTVM_CSR_SET(csr, bits) __asm__ volatile("csrs " #csr ", %0" : : "r"(bits) : "memory")

#define MSTATUS_MIE (1u << 3)
#define MIE_MEIE (1u << 11)                 /* machine external interrupts (the PLIC) */
#define MCAUSE_INTERRUPT 0x80000000u
#define MCAUSE_MACHINE_EXTERNAL 11u

/* SiFive PLIC: priority per source, enable bits and threshold per context, claim/complete. */
#define PLIC_PRIORITY(src) MTVM_REG(MTVM_PLIC_BASE + 4u * (src))
#define PLIC_ENABLE(ctx, word) MTVM_REG(MTVM_PLIC_BASE + 0x2000u + 0x80u * (ctx) + 4u * (word))
#define PLIC_THRESHOLD(ctx) MTVM_REG(MTVM_PLIC_BASE + 0x200000u + 0x1000u * (ctx))
#define PLIC_CLAIM(ctx) MTVM_REG(MTVM_PLIC_BASE + 0x200004u + 0x1000u * (ctx))

/* Routes a PLIC source (a UART's RX interrupt) to this hart's machine mode. */
static inline void mtvm_irq_source_enable(uint32_t src)
{
    PLIC_PRIORITY(src) = 1u;
    PLIC_ENABLE(MTVM_PLIC_CONTEXT, src >> 5) |= 1u << (src & 31u);
    PLIC_THRESHOLD(MTVM_PLIC_CONTEXT) = 0u;
    MTVM_CSR_SET(mie, MIE_MEIE);
}

static inline void mtvm_irq_enable(void) { __asm__ volatile("csrsi mstatus, 8" ::: "memory"); }
static inline void mtvm_irq_disable(void) { __asm__ volatile("csrci mstatus, 8" ::: "memory"); }
/* Masks interrupts and returns the previous mstatus for mtvm_irq_restore. */
static inline uint32_t mtvm_irq_save(void)
{
    uint32_t mstatus;
    __asm__ volatile("csrrci %0, mstatus, 8" : "=r"(mstatus) : : "memory");
    return mstatus;
}
static inline void mtvm_irq_restore(uint32_t mstatus)
{
    if (mstatus & MSTATUS_MIE) {
        mtvm_irq_enable();
    }
}
/* Waits for an interrupt; wakes on a pending enabled one even with MIE clear. */
static inline void mtvm_wfi(void) { __asm__ volatile("wfi" ::: "memory"); }
static inline void mtvm_fence(void) { __asm__ volatile("fence" ::: "memory"); }

#endif /* MTVM_RISCV_H_ */
