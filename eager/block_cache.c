/* eager/block_cache.c — malloc for the eager loop's many small, short-lived blocks (tensor and
 * storage structs, CPU buffers of small tensors): per-thread free lists by power-of-two size
 * class. A training step of a small model makes and drops thousands of these; through glibc's
 * malloc they cost about a third of the step (perf on the LinearNet step: _int_malloc,
 * _int_free, malloc_consolidate). Blocks are 64-byte aligned; a 64-byte header keeps the class
 * so a block may be freed on another thread (DataLoader batches are) and simply joins that
 * thread's list. Each list is capped (at most 64 blocks and 4 MB per class per thread) and a
 * thread's lists are released when it exits, so the cache never holds much.
 *
 * Blocks above 256 KB (activations) would otherwise be mmap'd and unmapped by glibc on every
 * step, paying a page fault per 4 KB each time (≈6% of a ResNet18 training step here). They
 * are rounded to eight classes per power of two and kept in shared bins for reuse, up to
 * DG_LARGE_CACHE_MAX bytes in all (a steady loop asks for the same sizes every step). */
#include "internal.h"
#include <pthread.h>

#define HDR 64
#define MIN_SHIFT 7                  /* 128-byte blocks (header included) */
#define MAX_SHIFT 18                 /* 256 KB: larger blocks go straight to the system */
#define NCLASS (MAX_SHIFT - MIN_SHIFT + 1)
#define CLASS_CAP_BYTES ((size_t)4 << 20)
#define DG_LARGE_CACHE_MAX ((size_t)1 << 30)

typedef struct free_block { struct free_block *next; } free_block;
typedef struct lists { free_block *head[NCLASS]; int count[NCLASS]; } lists;

static _Thread_local lists *t_lists;
static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void release_lists(void *p) {
    lists *l = p;
    for (int c = 0; c < NCLASS; c++)
        while (l->head[c]) { free_block *b = l->head[c]; l->head[c] = b->next; free(b); }
    free(l);
}
static void make_key(void) { pthread_key_create(&g_key, release_lists); }

static lists *my_lists(void) {
    if (t_lists) return t_lists;
    pthread_once(&g_once, make_key);
    t_lists = calloc(1, sizeof *t_lists);
    if (t_lists) pthread_setspecific(g_key, t_lists);
    return t_lists;
}

static int class_of(size_t total) {
    int s = MIN_SHIFT;
    while (((size_t)1 << s) < total) s++;
    return s - MIN_SHIFT;
}

/* ---- large blocks: shared bins, class in the header as -(bin index) - 2 ---- */
typedef struct large_bin { size_t size; void **p; int n, cap; } large_bin;
static pthread_mutex_t g_large_lock = PTHREAD_MUTEX_INITIALIZER;
static large_bin *g_large; static int g_nlarge, g_caplarge;
static size_t g_large_cached;

static size_t large_round(size_t total) {
    size_t top = (size_t)1 << (63 - __builtin_clzll((unsigned long long)total));
    size_t step = top / 8;
    return (total + step - 1) / step * step;
}
/* bin index for size (made when absent); -1 when out of memory. Caller holds the lock. */
static int large_bin_of(size_t size) {
    for (int i = 0; i < g_nlarge; i++) if (g_large[i].size == size) return i;
    if (g_nlarge == g_caplarge) {
        int cap = g_caplarge ? g_caplarge * 2 : 32;
        large_bin *q = realloc(g_large, sizeof *q * (size_t)cap);
        if (!q) return -1;
        g_large = q; g_caplarge = cap;
    }
    g_large[g_nlarge] = (large_bin){ size, NULL, 0, 0 };
    return g_nlarge++;
}

static char *large_alloc(size_t total, int *tag) {
    size_t size = large_round(total);
    char *b = NULL;
    pthread_mutex_lock(&g_large_lock);
    int i = large_bin_of(size);
    if (i >= 0 && g_large[i].n) { b = g_large[i].p[--g_large[i].n]; g_large_cached -= size; }
    pthread_mutex_unlock(&g_large_lock);
    if (!b) b = aligned_alloc(HDR, size);
    *tag = i >= 0 ? -i - 2 : -1;
    return b;
}

static void large_free(char *b, int tag) {
    int i = -tag - 2;
    pthread_mutex_lock(&g_large_lock);
    large_bin *bin = &g_large[i];
    bool keep = g_large_cached + bin->size <= DG_LARGE_CACHE_MAX;
    if (keep && bin->n == bin->cap) {
        int cap = bin->cap ? bin->cap * 2 : 8;
        void **q = realloc(bin->p, sizeof *q * (size_t)cap);
        if (q) { bin->p = q; bin->cap = cap; } else keep = false;
    }
    if (keep) { bin->p[bin->n++] = b; g_large_cached += bin->size; }
    pthread_mutex_unlock(&g_large_lock);
    if (!keep) free(b);
}

/* Under AddressSanitizer every block goes to and from the system, so a use after free or an
 * overflow is caught there instead of landing in a cached block. */
#ifdef __SANITIZE_ADDRESS__
#define CACHE_ON 0
#else
#define CACHE_ON 1
#endif

void *dg_block_alloc(size_t n) {
    size_t total = n + HDR;
    if (!CACHE_ON) {
        char *b = aligned_alloc(HDR, (total + HDR - 1) / HDR * HDR);
        if (!b) return NULL;
        *(int *)b = -1;
        return b + HDR;
    }
    int c = total <= ((size_t)1 << MAX_SHIFT) ? class_of(total) : -1;
    char *b = NULL;
    lists *l = c >= 0 ? my_lists() : NULL;
    if (l && l->head[c]) {
        free_block *f = l->head[c];
        l->head[c] = f->next;
        l->count[c]--;
        b = (char *)f;
    } else if (c >= 0) {
        b = aligned_alloc(HDR, (size_t)1 << (c + MIN_SHIFT));
    } else {
        b = large_alloc(total, &c);
    }
    if (!b) return NULL;
    *(int *)b = c;
    return b + HDR;
}

void dg_block_free(void *p) {
    if (!p) return;
    char *b = (char *)p - HDR;
    int c = *(int *)b;
    if (c <= -2) { large_free(b, c); return; }
    lists *l = c >= 0 ? my_lists() : NULL;
    size_t sz = c >= 0 ? (size_t)1 << (c + MIN_SHIFT) : 0;
    if (l && l->count[c] < 64 && (size_t)(l->count[c] + 1) * sz <= CLASS_CAP_BYTES) {
        free_block *f = (free_block *)b;
        f->next = l->head[c];
        l->head[c] = f;
        l->count[c]++;
        return;
    }
    free(b);
}
