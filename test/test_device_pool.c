/* test/test_device_pool.c — the device caching allocator (eager/device_pool.c) with a fake device
 * whose "memory" is address space nobody touches (the pool keeps its bookkeeping on the host, so
 * addresses are never dereferenced): a training-like loop stops asking the device for segments
 * after its first steps even though state made in step 1 stays, reserved memory stays near the
 * live peak, freed neighbours merge, 2 MiB-aligned addresses spread in the live table, and out
 * of memory gives NULL after the free segments were given back. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include "../eager/device_pool.h"

typedef struct fake_device {
    uintptr_t next;
    size_t limit, used;
    int mallocs, frees;
    void *seg[8192];
    size_t seg_size[8192];
} fake_device;

/* 2 MiB-aligned segments, as a GPU driver hands out */
static void *fake_alloc(size_t n, void *ctx) {
    fake_device *d = ctx;
    if (d->used + n > d->limit) return NULL;
    void *p = (void *)d->next;
    d->next += (n + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    d->used += n;
    d->seg[d->mallocs % 8192] = p;
    d->seg_size[d->mallocs % 8192] = n;
    d->mallocs++;
    return p;
}
static void fake_free(void *p, void *ctx) {
    fake_device *d = ctx;
    for (int i = 0; i < 8192; i++)
        if (d->seg[i] == p) { d->used -= d->seg_size[i]; d->seg[i] = NULL; break; }
    d->frees++;
}

static dg_device_pool *pool_on(fake_device *d) {
    d->next = (uintptr_t)1 << 40;
    if (!d->limit) d->limit = (size_t)1 << 40;
    dg_device_pool *p = dg_device_pool_new((dg_device_pool_ops){ fake_alloc, fake_free, d });
    cr_assert(p);
    return p;
}

/* the block sizes of a ResNet-like step at batch 16: activations shrinking layer by layer */
static const size_t acts[] = { 51380224, 51380224, 12845056, 25690112, 12845056, 6422528, 6422528, 3211264, 1605632,
                               802816, 200704, 51200, 4000, 4000, 40, 4 };
static const size_t params[] = { 1728, 256, 73728, 512, 294912, 512, 1179648, 1024, 40960, 40 };
#define NA (sizeof acts / sizeof *acts)
#define NP (sizeof params / sizeof *params)

Test(device_pool, steady_loop_stops_calling_the_device_and_reserves_near_the_peak) {
    static fake_device d;
    memset(&d, 0, sizeof d);
    dg_device_pool *pool = pool_on(&d);
    void *w[NP], *moments[2 * NP], *grads[NP], *a[NA];
    for (size_t i = 0; i < NP; i++) cr_assert(w[i] = dg_device_pool_alloc(pool, params[i]));
    int mallocs_after[10];
    for (int step = 0; step < 10; step++) {
        for (size_t i = 0; i < NA; i++) cr_assert(a[i] = dg_device_pool_alloc(pool, acts[i]));
        for (size_t i = 0; i < NP; i++) cr_assert(grads[i] = dg_device_pool_alloc(pool, params[i]));
        for (size_t i = 0; i < NA / 2; i++) cr_assert(dg_device_pool_free(pool, a[i]));   /* backward frees as it goes */
        if (step == 0)   /* the optimizer's state, made in the first step and kept */
            for (size_t i = 0; i < 2 * NP; i++) cr_assert(moments[i] = dg_device_pool_alloc(pool, params[i % NP]));
        for (size_t i = NA / 2; i < NA; i++) cr_assert(dg_device_pool_free(pool, a[i]));
        for (size_t i = 0; i < NP; i++) cr_assert(dg_device_pool_free(pool, grads[i]));
        mallocs_after[step] = d.mallocs;
    }
    for (int step = 2; step < 10; step++)
        cr_expect_eq(mallocs_after[step], mallocs_after[1], "step %d asked the device for memory (%d segments after step 2, %d now)",
                     step + 1, mallocs_after[1], mallocs_after[step]);
    dg_memory_stats st;
    dg_device_pool_stats(pool, &st);
    /* a segment's worth of slack per pool beside the 15% */
    cr_expect_leq((double)st.reserved, 1.15 * (double)st.peak_allocated + (22u << 20),
                  "reserved %zu for a live peak of %zu", st.reserved, st.peak_allocated);
    for (size_t i = 0; i < NP; i++) dg_device_pool_free(pool, w[i]);
    for (size_t i = 0; i < 2 * NP; i++) dg_device_pool_free(pool, moments[i]);
    dg_device_pool_stats(pool, &st);
    cr_expect_eq(st.allocated, 0);
    dg_device_pool_release_free(pool);
    dg_device_pool_stats(pool, &st);
    cr_expect_eq(st.reserved, 0, "every segment is one free block again once all is freed: %zu reserved", st.reserved);
    cr_expect_eq(d.frees, d.mallocs);
    dg_device_pool_destroy(pool);
}

Test(device_pool, freed_neighbours_merge_into_one_block) {
    static fake_device d;
    memset(&d, 0, sizeof d);
    dg_device_pool *pool = pool_on(&d);
    void *b[8];
    for (int i = 0; i < 8; i++) b[i] = dg_device_pool_alloc(pool, 2u << 20);   /* one 20 MiB segment */
    cr_expect_eq(d.mallocs, 1);
    for (int i = 0; i < 8; i += 2) dg_device_pool_free(pool, b[i]);
    for (int i = 1; i < 8; i += 2) dg_device_pool_free(pool, b[i]);
    void *big = dg_device_pool_alloc(pool, 18u << 20);
    cr_expect_eq(big, b[0], "the merged segment serves a request as large as all its blocks");
    cr_expect_eq(d.mallocs, 1);
    dg_device_pool_destroy(pool);
}

Test(device_pool, aligned_addresses_spread_in_the_live_table) {
    static fake_device d;
    memset(&d, 0, sizeof d);
    dg_device_pool *pool = pool_on(&d);
    enum { N = 4096 };
    static void *p[N];
    for (int i = 0; i < N; i++) cr_assert(p[i] = dg_device_pool_alloc(pool, 12u << 20));   /* a segment each */
    cr_expect_lt(dg_device_pool_max_probe(pool), 40, "longest probe %zu for %d 2 MiB-aligned blocks",
                 dg_device_pool_max_probe(pool), N);
    for (int i = 0; i < N; i++) cr_assert(dg_device_pool_free(pool, p[i]));
    cr_expect_not(dg_device_pool_free(pool, p[0]), "a second free of the same block is refused");
    dg_device_pool_destroy(pool);
}

Test(device_pool, out_of_memory_gives_back_free_segments_then_fails) {
    static fake_device d;
    memset(&d, 0, sizeof d);
    d.limit = 40u << 20;
    dg_device_pool *pool = pool_on(&d);
    void *a = dg_device_pool_alloc(pool, 15u << 20), *b = dg_device_pool_alloc(pool, 15u << 20);
    cr_assert(a && b);
    cr_expect_null(dg_device_pool_alloc(pool, 15u << 20), "a third 20 MiB segment does not fit in 40 MiB");
    dg_device_pool_free(pool, a);
    cr_expect_not_null(dg_device_pool_alloc(pool, 20u << 20), "the free segment is given back for a larger one");
    cr_expect_eq(d.frees, 1);
    dg_device_pool_destroy(pool);
}
