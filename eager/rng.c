/* eager/rng.c — random-number generators (torch.Generator's role) over Philox4x32-10, the
 * counter-based generator behind every random op. A draw is a pure function of (seed, counter),
 * so any backend reproduces the same numbers for a seed, and a generator's whole state is its
 * seed and its next unused counter: saving those two numbers saves the stream's position.
 *
 * Random ops reserve a range of counters and compute from it. The reservation is one atomic
 * fetch-add, so threads drawing from one generator (the default one, typically) get disjoint
 * ranges without a lock; which thread gets which range follows the order they arrive in. */
#include "internal.h"

struct dg_generator {
    uint64_t seed;
    uint64_t counter;   /* the next unused Philox counter; each yields four 32-bit draws */
    bool is_default;
};

/* The seed and counter the library has always started from: programs that never make a
 * generator of their own draw exactly the numbers they drew before generators existed. */
static dg_generator g_default = { DG_DEFAULT_SEED, 0, true };
static _Thread_local dg_generator *t_current;   /* dg_generator_use; NULL: the default */

dg_generator *dg_default_generator(void) { return &g_default; }

static dg_generator *resolve(dg_generator *g) { return g ? g : t_current ? t_current : &g_default; }
dg_generator *dg_generator_current(void) { return resolve(NULL); }

dg_generator *dg_generator_new(uint64_t seed) {
    dg_generator *g = malloc(sizeof *g);
    if (!g) { DG_ERR(DG_ENOMEM, "generator_new: out of memory"); return NULL; }
    g->seed = seed;
    g->counter = 0;
    g->is_default = false;
    return g;
}

void dg_generator_free(dg_generator *g) {
    if (!g || g->is_default) return;   /* the default generator lives as long as the library */
    if (t_current == g) t_current = NULL;
    free(g);
}

dg_generator *dg_generator_use(dg_generator *g) {
    dg_generator *prev = resolve(NULL);
    t_current = g && !g->is_default ? g : NULL;
    return prev;
}

int dg_generator_manual_seed(dg_generator *g, uint64_t seed) {
    DG_CHECK_INT(g, "generator_manual_seed: generator is NULL");
    __atomic_store_n(&g->seed, seed, __ATOMIC_RELAXED);
    __atomic_store_n(&g->counter, 0, __ATOMIC_RELEASE);
    return 0;
}

uint64_t dg_generator_get_seed(const dg_generator *g) {
    if (!g) { DG_ERR(DG_EINVAL, "generator_get_seed: generator is NULL"); return 0; }
    return __atomic_load_n(&g->seed, __ATOMIC_RELAXED);
}

int dg_generator_get_state(const dg_generator *g, dg_generator_state *out) {
    DG_CHECK_INT(g && out, "generator_get_state: %s is NULL", g ? "out" : "generator");
    out->offset = __atomic_load_n(&g->counter, __ATOMIC_ACQUIRE);
    out->seed = __atomic_load_n(&g->seed, __ATOMIC_RELAXED);
    return 0;
}

int dg_generator_set_state(dg_generator *g, const dg_generator_state *state) {
    DG_CHECK_INT(g && state, "generator_set_state: %s is NULL", g ? "state" : "generator");
    __atomic_store_n(&g->seed, state->seed, __ATOMIC_RELAXED);
    __atomic_store_n(&g->counter, state->offset, __ATOMIC_RELEASE);
    return 0;
}

void dg_manual_seed(uint64_t seed) { dg_generator_manual_seed(&g_default, seed); }
uint64_t dg_get_seed(void) { return dg_generator_get_seed(&g_default); }

static _Thread_local dg_rng_log *t_log;
dg_rng_log *dg_rng_log_swap(dg_rng_log *log) {
    dg_rng_log *old = t_log;
    t_log = log;
    return old;
}
static void log_first_draw(dg_generator *g, uint64_t seed, uint64_t start) {
    for (int i = 0; i < t_log->n; i++) if (t_log->e[i].g == g) return;
    if (t_log->n == DG_RNG_LOG_MAX) { t_log->overflow = true; return; }
    t_log->e[t_log->n].g = g;
    t_log->e[t_log->n].seed = seed;
    t_log->e[t_log->n++].counter = start;
}

uint64_t dg_generator_reserve(dg_generator *g, uint64_t n, uint64_t *seed_out) {
    g = resolve(g);
    uint64_t start = __atomic_fetch_add(&g->counter, (n + 3) / 4, __ATOMIC_ACQ_REL);
    uint64_t seed = __atomic_load_n(&g->seed, __ATOMIC_RELAXED);
    if (seed_out) *seed_out = seed;
    if (t_log) log_first_draw(g, seed, start);
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

/* dg_shutdown: the default generator starts over from the seed the library has always used. */
void dg_rng_reset(void) {
    __atomic_store_n(&g_default.counter, 0, __ATOMIC_RELAXED);
    g_default.seed = DG_DEFAULT_SEED;
    t_current = NULL;
    t_log = NULL;
}
