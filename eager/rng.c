/* eager/rng.c — Philox4x32-10, the counter-based generator behind every random op. A draw is a
 * pure function of (seed, counter), so any backend reproduces the same numbers for a seed: the
 * global state is only the seed and the next unused counter. */
#include "internal.h"

static uint64_t g_seed = DG_DEFAULT_SEED;
static uint64_t g_counter = 0;

void dg_manual_seed(uint64_t seed) { g_seed = seed; g_counter = 0; }
void dg_rng_reset(void) { g_seed = DG_DEFAULT_SEED; g_counter = 0; }
uint64_t dg_get_seed(void) { return g_seed; }

uint64_t dg_rng_reserve(uint64_t n, uint64_t *seed_out) {
    uint64_t start = g_counter;
    g_counter += (n + 3) / 4;     /* each counter value yields four 32-bit draws */
    *seed_out = g_seed;
    return start;
}

void dg_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c[4] = { (uint32_t)counter, (uint32_t)(counter >> 32), 0, 0 };
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    out[0] = c[0]; out[1] = c[1]; out[2] = c[2]; out[3] = c[3];
}
