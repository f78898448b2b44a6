/* eager/cpu_features.c — what the CPU can do, asked of the CPU itself (CPUID and the OS's saved
 * register state), so the core decides on the bf16 path without asking a kernel library. */
#include "internal.h"
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* AVX-512 state (opmask, upper ZMM halves, ZMM16-31) enabled by the OS in XCR0 */
static bool os_saves_avx512(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;   /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xE6u) == 0xE6u;
}

bool dg_cpu_has_bf16(void) {
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7 || !os_saves_avx512()) return false;
    __cpuid_count(7, 0, a, b, c, d);
    bool amx_bf16 = d & (1u << 22);
    __cpuid_count(7, 1, a, b, c, d);
    bool avx512_bf16 = a & (1u << 5);
    return avx512_bf16 || amx_bf16;
}
#else
bool dg_cpu_has_bf16(void) { return false; }
#endif

/* ---- the bf16 switch for CPU convolutions (dg_set_cpu_bf16) ---- */
static bool g_cpu_bf16 = false;

int dg_set_cpu_bf16(bool on) {
    if (on && !dg_cpu_has_bf16()) {
        DG_ERR(DG_EUNSUPPORTED, "set_cpu_bf16: this CPU has no bf16 instructions (AVX512-BF16 or AMX); convolutions stay f32");
        return DG_EUNSUPPORTED;
    }
    g_cpu_bf16 = on;
    return 0;
}
bool dg_get_cpu_bf16(void) { return g_cpu_bf16; }
void dg_cpu_bf16_reset(void) { g_cpu_bf16 = false; }
