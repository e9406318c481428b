/* mtvm_copy.h: Copies inside a kernel (a channel saved before it is written over in place, a
 * row into a padded plane). On Thumb-2 cores with an FPU (M4F, M7, M33) whole words move
 * through the FPU's registers with VLDMIA/VSTMIA, sixteen words in two instructions, where
 * newlib's memcpy takes one LDR and one STR a word; the bits are moved, never converted.
 * Elsewhere, and for unaligned or short copies, memcpy.
 * Part of mtvm's kernel library (c_runtime/kernels/README.md). */
#ifndef MTVM_COPY_H_
#define MTVM_COPY_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__thumb2__) && defined(__ARM_FP)
#define MTVM_COPY_VFP 1
/* One block of N words through s0..s(N-1) (caller-saved: nothing to preserve). */
#define MTVM_COPY_BLOCK(regs, ...) \
    __asm__ volatile("vldmia %0!, {" regs "}\n\tvstmia %1!, {" regs "}" \
                     : "+r"(s), "+r"(d) : : __VA_ARGS__, "memory")
#endif

/* bytes from src to dst (not overlapping). */
static inline void mtvm_copy(void* dst, const void* src, size_t bytes)
{
#if defined(MTVM_COPY_VFP)
    if ((((uintptr_t)dst | (uintptr_t)src) & 3u) == 0 && bytes >= 16) {
        uint32_t* d = (uint32_t*)dst;
        const uint32_t* s = (const uint32_t*)src;
        size_t n = bytes / 4;
        for (; n >= 16; n -= 16) {
            MTVM_COPY_BLOCK("s0-s15", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9",
                            "s10", "s11", "s12", "s13", "s14", "s15");
        }
        if (n >= 8) {
            MTVM_COPY_BLOCK("s0-s7", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7");
            n -= 8;
        }
        if (n >= 4) {
            MTVM_COPY_BLOCK("s0-s3", "s0", "s1", "s2", "s3");
            n -= 4;
        }
        for (; n > 0; --n) {
            *d++ = *s++;
        }
        const size_t tail = bytes & 3u;
        if (tail) {
            memcpy(d, s, tail);
        }
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

/* 16 bytes between word-aligned buffers (a float GEMM tile's column of four): one VLDMIA
 * and one VSTMIA inline, where a loop of four becomes a call to memmove. */
static inline void mtvm_copy16(void* dst, const void* src)
{
#if defined(MTVM_COPY_VFP)
    uint32_t* d = (uint32_t*)dst;
    const uint32_t* s = (const uint32_t*)src;
    MTVM_COPY_BLOCK("s0-s3", "s0", "s1", "s2", "s3");
#else
    memcpy(dst, src, 16);
#endif
}

#endif  /* MTVM_COPY_H_ */
