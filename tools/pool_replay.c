/* tools/pool_replay.c — replays a device allocation trace (DG_CUDA_ALLOC_TRACE=FILE, written by the
 * CUDA backend: "a <bytes> <ptr>" per request, "f <ptr>" per release, "t" where the backend gave
 * its fully free segments back) against the caching
 * allocator of eager/device_pool.c with a segment provider that only hands out address space, and
 * prints what the pool would hold: reserved bytes at the last request (a run's end frees
 * everything), peak live bytes, their ratio, the segments made and the line of the last one (a
 * steady loop makes none).
 * --trim-once-sizes trims after releasing a block of at least 4 MiB whose size occurs once in the
 * trace (what a search workspace looks like), for traces written before the backend did it.
 * A real GPU run's pattern (its cuDNN workspaces included) can so be studied on any machine.
 *
 * usage: pool_replay TRACE [--trim-once-sizes] */
#include "../eager/device_pool.h"
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../samples/flags.h"

typedef struct { uintptr_t next; size_t live, segments; } space;

/* 2 MiB-aligned address space that is never touched: the pool keeps its books in host memory */
static void *seg_alloc(size_t n, void *ctx) {
    space *s = ctx;
    uintptr_t p = s->next;
    s->next += (n + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    s->segments++;
    return (void *)p;
}
static void seg_free(void *p, void *ctx) { (void)p; (void)ctx; }

/* live requests: the trace's pointer -> the replay's block (open addressing) */
typedef struct { uintptr_t key; void *val; size_t size; } slot;
static slot *tab;
static size_t cap;
static size_t hash(uintptr_t k) { return (size_t)((k >> 8) * 0x9E3779B97F4A7C15ull) & (cap - 1); }
static void put(uintptr_t k, void *v, size_t size) {
    size_t i = hash(k);
    while (tab[i].key && tab[i].key != k) i = (i + 1) & (cap - 1);
    tab[i] = (slot){ k, v, size };
}
static void *take(uintptr_t k, size_t *size) {
    size_t i = hash(k);
    while (tab[i].key) {
        if (tab[i].key == k) {
            void *v = tab[i].val;
            *size = tab[i].size;
            /* backward-shift deletion keeps every probe chain whole */
            size_t j = i;
            for (;;) {
                tab[i].key = 0;
                for (;;) {
                    j = (j + 1) & (cap - 1);
                    if (!tab[j].key) return v;
                    size_t h = hash(tab[j].key);
                    if (i <= j ? (h <= i || h > j) : (h <= i && h > j)) break;
                }
                tab[i] = tab[j];
                i = j;
            }
        }
        i = (i + 1) & (cap - 1);
    }
    return NULL;
}

/* the sizes requested once in the whole trace (--trim-once-sizes): a sorted array */
static size_t *once;
static size_t nonce;
static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}
static bool requested_once(size_t n) { return bsearch(&n, once, nonce, sizeof *once, cmp_size) != NULL; }
static int find_once(FILE *f) {
    size_t cap_ = 1024, len = 0, *all = malloc(cap_ * sizeof *all);
    char line[256];
    size_t n;
    void *p;
    while (all && fgets(line, sizeof line, f))
        if (sscanf(line, "a %zu %p", &n, &p) == 2) {
            if (len == cap_) {
                size_t *q = realloc(all, (cap_ *= 2) * sizeof *all);
                if (!q) { free(all); all = NULL; break; }
                all = q;
            }
            all[len++] = n;
        }
    if (!all || !(once = malloc((len + 1) * sizeof *once))) return -1;
    qsort(all, len, sizeof *all, cmp_size);
    for (size_t i = 0; i < len; i++)
        if ((i == 0 || all[i - 1] != all[i]) && (i + 1 == len || all[i + 1] != all[i])) once[nonce++] = all[i];
    free(all);
    rewind(f);
    return 0;
}

int main(int argc, char **argv) {
    static const char *const flags[] = { "--trim-once-sizes!", NULL };
    su_positional pos = { .usage = "TRACE", .min = 1, .max = 1 };
    su_args_pos(argc, argv, flags, &pos);
    const char *path = pos.args[0];
    bool trim_once = su_has(argc, argv, "--trim-once-sizes");
    free(pos.args);
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "pool_replay: %s: %s\n", path, strerror(errno)); return 1; }
    if (trim_once && find_once(f)) { fprintf(stderr, "pool_replay: out of memory\n"); return 1; }
    cap = (size_t)1 << 20;
    tab = calloc(cap, sizeof *tab);
    space sp = { (uintptr_t)1 << 40, 0, 0 };
    dg_device_pool *pool = dg_device_pool_new((dg_device_pool_ops){ seg_alloc, seg_free, &sp });
    if (!tab || !pool) { fprintf(stderr, "pool_replay: out of memory\n"); return 1; }
    char line[256];
    long ln = 0, requests = 0, trims = 0, last_segment_line = 0;
    uint64_t segments = 0;
    size_t live = 0, reserved_last = 0;
    dg_memory_stats st;
    while (fgets(line, sizeof line, f)) {
        ln++;
        size_t n;
        void *p;
        if (sscanf(line, "a %zu %p", &n, &p) == 2) {
            void *b = dg_device_pool_alloc(pool, n);
            if (!b) { fprintf(stderr, "pool_replay: %s:%ld: the pool refused %zu bytes\n", path, ln, n); return 1; }
            if (live * 2 >= cap) { fprintf(stderr, "pool_replay: %s:%ld: more than %zu live blocks\n", path, ln, cap / 2); return 1; }
            put((uintptr_t)p, b, n);
            live++;
            requests++;
            dg_device_pool_stats(pool, &st);
            reserved_last = st.reserved;
            if (st.device_mallocs != segments) {
                segments = st.device_mallocs;
                last_segment_line = ln;
            }
        } else if (sscanf(line, "f %p", &p) == 1) {
            size_t sz = 0;
            void *b = take((uintptr_t)p, &sz);
            if (!b) { fprintf(stderr, "pool_replay: %s:%ld: release of %p, which is not live\n", path, ln, p); return 1; }
            dg_device_pool_free(pool, b);
            live--;
            if (trim_once && sz >= ((size_t)4 << 20) && requested_once(sz)) {
                dg_device_pool_release_free(pool);
                trims++;
            }
        } else if (strcmp(line, "t\n") == 0) {
            dg_device_pool_release_free(pool);
            trims++;
        } else {
            fprintf(stderr, "pool_replay: %s:%ld: not a trace line: %s", path, ln, line);
            return 1;
        }
    }
    fclose(f);
    dg_device_pool_stats(pool, &st);
    printf("lines %ld requests %ld trims %ld segments %" PRIu64 " (the last made at line %ld) reserved_mb %.1f peak_mb %.1f reserved/peak %.3f\n", ln,
           requests, trims, st.device_mallocs, last_segment_line, reserved_last / 1048576.0, st.peak_allocated / 1048576.0,
           st.peak_allocated ? (double)reserved_last / (double)st.peak_allocated : 0.0);
    dg_device_pool_destroy(pool);
    free(tab);
    free(once);
    return 0;
}
