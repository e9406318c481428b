/* Hide AVX-512 (and AMX, AVX-VNNI) from the CPUID instruction of this process,
 * so that onnxruntime's kernel dispatch (MLAS, cpuinfo) picks the kernels it
 * would pick on an AVX2-only host. Used by bench/ort_isa.py for the AVX2
 * comparison: mtvm's C built with -march=x86-64-v3 against onnxruntime on the
 * same instruction set, not against its AVX-512 kernels.
 *
 * Linux can make CPUID fault (arch_prctl ARCH_SET_CPUID, on CPUs with the
 * "cpuid_fault" feature, as rr uses it). The SIGSEGV handler then runs the real
 * CPUID with faulting briefly off, clears the feature bits and steps over the
 * instruction. The setting is per thread, inherited by threads and forks, and
 * reset by execve, so compilers started from the process see the real CPU. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define BIT(n) (1u << (n))

/* CPUID.(EAX=7,ECX=0): AVX512F, DQ, IFMA, PF, ER, CD, BW, VL in EBX; VBMI,
 * VBMI2, VNNI, BITALG, VPOPCNTDQ in ECX; 4VNNIW, 4FMAPS, VP2INTERSECT,
 * AMX-BF16, AVX512-FP16, AMX-TILE, AMX-INT8 in EDX. */
static const uint32_t LEAF7_EBX_HIDDEN = BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) |
                                         BIT(28) | BIT(30) | BIT(31);
static const uint32_t LEAF7_ECX_HIDDEN = BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14);
static const uint32_t LEAF7_EDX_HIDDEN = BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) |
                                         BIT(24) | BIT(25);
/* CPUID.(EAX=7,ECX=1): AVX-VNNI, AVX512-BF16, AVX-IFMA in EAX (x86-64-v3 hosts
 * such as Zen 3 have none of them); AVX-VNNI-INT8, AVX-NE-CONVERT,
 * AVX-VNNI-INT16 in EDX. */
static const uint32_t LEAF7_1_EAX_HIDDEN = BIT(4) | BIT(5) | BIT(23);
static const uint32_t LEAF7_1_EDX_HIDDEN = BIT(4) | BIT(5) | BIT(10);

static void real_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
}

static void on_fault(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *regs = uc->uc_mcontext.gregs;
    const uint8_t *pc = (const uint8_t *)regs[REG_RIP];
    uint32_t r[4];
    (void)info;
    if (pc[0] != 0x0f || pc[1] != 0xa2) {
        /* A real segmentation fault: fault again without this handler. */
        signal(sig, SIG_DFL);
        return;
    }
    uint32_t leaf = (uint32_t)regs[REG_RAX], sub = (uint32_t)regs[REG_RCX];
    real_cpuid(leaf, sub, r);
    if (leaf == 7 && sub == 0) {
        r[1] &= ~LEAF7_EBX_HIDDEN;
        r[2] &= ~LEAF7_ECX_HIDDEN;
        r[3] &= ~LEAF7_EDX_HIDDEN;
    } else if (leaf == 7 && sub == 1) {
        r[0] &= ~LEAF7_1_EAX_HIDDEN;
        r[3] &= ~LEAF7_1_EDX_HIDDEN;
    }
    regs[REG_RAX] = r[0];
    regs[REG_RBX] = r[1];
    regs[REG_RCX] = r[2];
    regs[REG_RDX] = r[3];
    regs[REG_RIP] += 2; /* CPUID is 0F A2 */
}

/* 0 when CPUID now hides the features; -1 (errno set) when the kernel or the
 * CPU cannot fault on CPUID. */
int cpuid_mask_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    if (sigaction(SIGSEGV, &sa, 0) != 0) return -1;
    return (int)syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
}

/* CPUID.(7,0).EBX as this thread sees it (bit 16: AVX512F). */
uint32_t cpuid_mask_leaf7_ebx(void) {
    uint32_t a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    return b;
}
