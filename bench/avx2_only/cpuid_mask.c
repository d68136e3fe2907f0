/* Makes this process see an AVX2-only x86-64 CPU: no AVX-512, no AVX-VNNI, no bf16, no AMX.
 *
 * Loaded with LD_PRELOAD by bench/avx2_only/run.sh. It turns on the kernel's CPUID faulting for
 * the process (arch_prctl ARCH_SET_CPUID, Linux on CPUs with the cpuid_fault flag), so every CPUID
 * instruction traps; the handler runs the real CPUID with faulting briefly off and clears the
 * feature bits before handing the result back. Libraries that pick their kernels by CPUID (oneDNN
 * in torch and OpenVINO, ONNX Runtime's MLAS, MKL) then choose their AVX2 code paths. The setting
 * is inherited by threads and child processes. glibc has read CPUID before this runs; its string
 * routines may still use wider registers, which matters little to matrix-bound work.
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define BIT(n) (1u << (n))

static void real_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

static void mask(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    if (leaf == 7 && sub == 0) {
        /* EBX: AVX512 F, DQ, IFMA, PF, ER, CD, BW, VL */
        r[1] &= ~(BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31));
        /* ECX: AVX512 VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ */
        r[2] &= ~(BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14));
        /* EDX: AVX512 4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16, AVX512-FP16, AMX-TILE, AMX-INT8 */
        r[3] &= ~(BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25));
    } else if (leaf == 7 && sub == 1) {
        r[0] &= ~(BIT(4) | BIT(5) | BIT(21) | BIT(23)); /* AVX-VNNI, AVX512-BF16, AMX-FP16, AVX-IFMA */
        r[3] &= ~(BIT(4) | BIT(5));                     /* AVX-VNNI-INT8, AVX-NE-CONVERT */
    }
}

static void on_fault(int sig, siginfo_t *info, void *context) {
    greg_t *reg = ((ucontext_t *)context)->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)reg[REG_RIP];
    (void)info;
    if (ip[0] != 0x0f || ip[1] != 0xa2) { /* a real crash: let it happen as it would have */
        signal(sig, SIG_DFL);
        return;
    }
    uint32_t leaf = (uint32_t)reg[REG_RAX], sub = (uint32_t)reg[REG_RCX], r[4];
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
    real_cpuid(leaf, sub, r);
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
    mask(leaf, sub, r);
    reg[REG_RAX] = r[0];
    reg[REG_RBX] = r[1];
    reg[REG_RCX] = r[2];
    reg[REG_RDX] = r[3];
    reg[REG_RIP] += 2;
}

__attribute__((constructor)) static void start(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    if (sigaction(SIGSEGV, &action, 0) != 0 || syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) {
        fprintf(stderr, "avx2_only: this kernel or CPU cannot fault on CPUID (no cpuid_fault flag): features not hidden\n");
        _exit(3);
    }
}
