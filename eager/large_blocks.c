/* eager/large_blocks.c — where CPU blocks above 256 KB (activations, gradients, optimizer state)
 * live: one address range reserved at first use and handed out best-fit, with freed ranges
 * merged with their free neighbours.
 *
 * Why not malloc: glibc maps each such block on its own and unmaps it on free, so a training
 * step paid a page fault per 4 KB of every activation, every step (≈6% of a ResNet18 step).
 * Why not bins of equal sizes (what this file replaces): a freed block then only serves its own
 * size, so a forward whose activations shrink layer by layer kept the stem's 103 MB blocks and
 * still took new ones for every smaller size; ResNet18 inference held 383 MB for 208 MB of live
 * data. Here a freed 103 MB range is split for the next layer's blocks, so the memory touched
 * stays close to the most that is live at once, and a loop that asks for the same sizes in the
 * same order every step gets the same addresses back: no page is faulted in after the first step.
 *
 * Free ranges keep their pages until more than DG_LARGE_KEEP bytes of them are resident; beyond
 * that, a range being freed gives its pages back (madvise) but stays reusable. dg_empty_cache(cpu)
 * gives back all free pages. If the reservation cannot be made, blocks come from aligned_alloc.
 * dg_shutdown unmaps the reservation once no block of it is live (a later block reserves anew);
 * while a tensor the program kept still lives in it, only the free pages go back. */
#include "internal.h"
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define PAGE ((size_t)4096)
#define DG_LARGE_KEEP ((size_t)1 << 30)
#define MIN_SPLIT ((size_t)64 << 10)   /* a remainder smaller than this stays with the block */

typedef struct range {
    char *p;
    size_t size;
    bool resident;                     /* may still hold pages (free ranges only) */
} range;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char *g_base;                   /* the reservation: PROT_NONE beyond g_top */
static size_t g_reserved_bytes, g_top; /* g_top: bytes made readable/writable so far */
static bool g_tried;
static range *g_free;                  /* sorted by address, never adjacent (merged) */
static int g_nfree, g_capfree;
static size_t g_live, g_peak_live, g_resident_free;
static uint64_t g_grows;               /* times the top moved: flat once a loop is steady */

static bool reserve(void) {
    g_tried = true;
    /* PROT_NONE costs no commit charge even under strict overcommit; pages become usable as g_top
     * grows. Under an address-space limit (ulimit -v) it takes at most half of it, leaving the
     * rest to malloc, thread stacks and JIT code. */
    size_t most = (size_t)64 << 30;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 < most) most = rl.rlim_cur / 2;
    for (size_t gb = 64; gb >= 4; gb /= 2) {
        if ((gb << 30) > most) continue;
        void *p = mmap(NULL, gb << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) { g_base = p; g_reserved_bytes = gb << 30; return true; }
    }
    return false;
}

static bool free_insert_at(int i, range r) {
    if (g_nfree == g_capfree) {
        int cap = g_capfree ? g_capfree * 2 : 64;
        range *q = realloc(g_free, sizeof *q * (size_t)cap);
        if (!q) return false;
        g_free = q; g_capfree = cap;
    }
    memmove(&g_free[i + 1], &g_free[i], sizeof *g_free * (size_t)(g_nfree - i));
    g_free[i] = r;
    g_nfree++;
    return true;
}
static void free_remove_at(int i) {
    memmove(&g_free[i], &g_free[i + 1], sizeof *g_free * (size_t)(g_nfree - i - 1));
    g_nfree--;
}

/* *size is a multiple of PAGE; it grows when a free range is taken whole. Caller holds the lock. */
static char *take(size_t *size) {
    size_t want = *size;
    int best = -1;
    for (int i = 0; i < g_nfree; i++)
        if (g_free[i].size >= want && (best < 0 || g_free[i].size < g_free[best].size)) best = i;
    if (best >= 0) {
        range *r = &g_free[best];
        char *p = r->p;
        if (r->size < want + MIN_SPLIT) *size = r->size;
        if (r->resident) g_resident_free -= *size;
        if (*size == r->size) free_remove_at(best);
        else { r->p += *size; r->size -= *size; }
        return p;
    }
    /* nothing free fits: grow the top, starting from a free range that ends there */
    range *last = g_nfree ? &g_free[g_nfree - 1] : NULL;
    bool last_at_top = last && last->p + last->size == g_base + g_top;
    size_t from = last_at_top ? (size_t)(last->p - g_base) : g_top;
    if (from + want > g_reserved_bytes) return NULL;
    if (mprotect(g_base + g_top, from + want - g_top, PROT_READ | PROT_WRITE) != 0) return NULL;
    g_top = from + want;
    g_grows++;
    if (last_at_top) {
        if (last->resident) g_resident_free -= last->size;
        free_remove_at(g_nfree - 1);
    }
    return g_base + from;
}

/* Caller holds the lock. */
static void give_back(char *p, size_t size) {
    int i = 0;
    while (i < g_nfree && g_free[i].p < p) i++;
    range r = { p, size, true };
    g_resident_free += size;
    if (i > 0 && g_free[i - 1].p + g_free[i - 1].size == p) {       /* merge with the one before */
        i--;
        r.p = g_free[i].p;
        r.size += g_free[i].size;
        if (!g_free[i].resident) g_resident_free += g_free[i].size;  /* counted resident from now on */
        free_remove_at(i);
    }
    if (i < g_nfree && r.p + r.size == g_free[i].p) {               /* and with the one after */
        r.size += g_free[i].size;
        if (!g_free[i].resident) g_resident_free += g_free[i].size;
        free_remove_at(i);
    }
    if (g_resident_free > DG_LARGE_KEEP && madvise(r.p, r.size, MADV_DONTNEED) == 0) {
        r.resident = false;
        g_resident_free -= r.size;
    }
    if (!free_insert_at(i, r)) {
        /* no room to remember it: the range is lost to reuse, but its pages go back */
        madvise(r.p, r.size, MADV_DONTNEED);
        if (r.resident) g_resident_free -= r.size;
    }
}

/* A block of at least `total` bytes, 64-byte aligned (page aligned here); *size_out is what it
 * holds, to pass back to dg_large_free. */
void *dg_large_alloc(size_t total, size_t *size_out) {
    if (total > SIZE_MAX - PAGE) { *size_out = 0; return NULL; }
    size_t size = (total + PAGE - 1) / PAGE * PAGE;
    char *p = NULL;
    pthread_mutex_lock(&g_lock);
    if ((g_base || (!g_tried && reserve())) && size <= g_reserved_bytes) {
        p = take(&size);
        if (p) {
            g_live += size;
            if (g_live > g_peak_live) g_peak_live = g_live;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (!p) { p = aligned_alloc(64, size); size = 0; }   /* outside the reservation: size 0 says so */
    *size_out = size;
    return p;
}

void dg_large_free(void *p, size_t size) {
    if (!size) { free(p); return; }
    pthread_mutex_lock(&g_lock);
    g_live -= size;
    give_back(p, size);
    pthread_mutex_unlock(&g_lock);
}

/* The CPU's dg_memory_stats: blocks of this file only (the small ones are per-thread caches). */
int dg_large_stats(dg_memory_stats *out) {
    pthread_mutex_lock(&g_lock);
    out->allocated = g_live;
    out->reserved = g_live + g_resident_free;   /* bytes that may hold pages */
    out->peak_allocated = g_peak_live;
    out->device_mallocs = g_grows;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* dg_empty_cache(cpu): gives every free range's pages back; the ranges stay reusable. */
int dg_large_release_free(void) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nfree; i++)
        if (g_free[i].resident && madvise(g_free[i].p, g_free[i].size, MADV_DONTNEED) == 0) {
            g_free[i].resident = false;
            g_resident_free -= g_free[i].size;
        }
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* dg_shutdown. */
void dg_large_release_all(void) {
    pthread_mutex_lock(&g_lock);
    if (g_base && g_live == 0) {
        munmap(g_base, g_reserved_bytes);
        free(g_free);
        g_base = NULL;
        g_free = NULL;
        g_nfree = g_capfree = 0;
        g_reserved_bytes = g_top = 0;
        g_resident_free = g_peak_live = 0;
        g_grows = 0;
        g_tried = false;
        pthread_mutex_unlock(&g_lock);
        return;
    }
    pthread_mutex_unlock(&g_lock);
    dg_large_release_free();
}
