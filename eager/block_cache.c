/* eager/block_cache.c — malloc for the eager loop's many small, short-lived blocks (tensor and
 * storage structs, CPU buffers of small tensors): per-thread free lists by power-of-two size
 * class. A training step of a small model makes and drops thousands of these; through glibc's
 * malloc they cost about a third of the step (perf on the LinearNet step: _int_malloc,
 * _int_free, malloc_consolidate). Blocks are 64-byte aligned; a 64-byte header keeps the class
 * so a block may be freed on another thread (DataLoader batches are) and simply joins that
 * thread's list. Each list is capped (at most 4096 blocks and 2 MB per class per thread, ≈22 MB
 * in all: enough for a step that records a thousand ops before its scope ends) and a
 * thread's lists are released when it exits. Every thread's lists are also on one registry so
 * that dg_shutdown can empty them all (it runs when no other thread is inside the library).
 *
 * Blocks above 256 KB (activations) come from eager/large_blocks.c, whose header slot here
 * keeps their size. */
#include "internal.h"
#include <pthread.h>

#define HDR 64
#define MIN_SHIFT 7                  /* 128-byte blocks (header included) */
#define MAX_SHIFT 18                 /* 256 KB: larger blocks go to eager/large_blocks.c */
#define NCLASS (MAX_SHIFT - MIN_SHIFT + 1)
#define CLASS_CAP_BYTES ((size_t)2 << 20)
#define CLASS_CAP_COUNT 4096

typedef struct free_block { struct free_block *next; } free_block;
typedef struct lists {
    free_block *head[NCLASS];
    int count[NCLASS];
    struct lists *prev, *next;       /* the registry */
} lists;

static _Thread_local lists *t_lists;
static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static lists *g_registry;

static void empty_lists(lists *l) {
    for (int c = 0; c < NCLASS; c++) {
        while (l->head[c]) { free_block *b = l->head[c]; l->head[c] = b->next; free(b); }
        l->count[c] = 0;
    }
}
static void release_lists(void *p) {
    lists *l = p;
    pthread_mutex_lock(&g_reg_lock);
    if (l->prev) l->prev->next = l->next; else g_registry = l->next;
    if (l->next) l->next->prev = l->prev;
    pthread_mutex_unlock(&g_reg_lock);
    empty_lists(l);
    free(l);
}
static void make_key(void) { pthread_key_create(&g_key, release_lists); }

static lists *my_lists(void) {
    if (t_lists) return t_lists;
    pthread_once(&g_once, make_key);
    t_lists = calloc(1, sizeof *t_lists);
    if (!t_lists) return NULL;
    pthread_setspecific(g_key, t_lists);
    pthread_mutex_lock(&g_reg_lock);
    t_lists->next = g_registry;
    if (g_registry) g_registry->prev = t_lists;
    g_registry = t_lists;
    pthread_mutex_unlock(&g_reg_lock);
    return t_lists;
}

void dg_block_cache_release_all(void) {
    pthread_mutex_lock(&g_reg_lock);
    for (lists *l = g_registry; l; l = l->next) empty_lists(l);
    pthread_mutex_unlock(&g_reg_lock);
    dg_large_release_all();
}

static int class_of(size_t total) {
    int s = MIN_SHIFT;
    while (((size_t)1 << s) < total) s++;
    return s - MIN_SHIFT;
}

/* large blocks: tagged LARGE_TAG, with the size large_blocks.c gave at byte 8 of the header */
#define LARGE_TAG (-2)

/* Under AddressSanitizer every block goes to and from the system, so a use after free or an
 * overflow is caught there instead of landing in a cached block. */
#ifdef __SANITIZE_ADDRESS__
#define CACHE_ON 0
#else
#define CACHE_ON 1
#endif

void *dg_block_alloc(size_t n) {
    if (n > SIZE_MAX / 2) return NULL;   /* no size this large can be had; n + HDR must not wrap */
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
        size_t size;
        b = dg_large_alloc(total, &size);
        if (!b) return NULL;
        *(size_t *)(b + 8) = size;
        c = LARGE_TAG;
    }
    if (!b) return NULL;
    *(int *)b = c;
    return b + HDR;
}

void dg_block_free(void *p) {
    if (!p) return;
    char *b = (char *)p - HDR;
    int c = *(int *)b;
    if (c == LARGE_TAG) { dg_large_free(b, *(size_t *)(b + 8)); return; }
    lists *l = c >= 0 ? my_lists() : NULL;
    size_t sz = c >= 0 ? (size_t)1 << (c + MIN_SHIFT) : 0;
    if (l && l->count[c] < CLASS_CAP_COUNT && (size_t)(l->count[c] + 1) * sz <= CLASS_CAP_BYTES) {
        free_block *f = (free_block *)b;
        f->next = l->head[c];
        l->head[c] = f;
        l->count[c]++;
        return;
    }
    free(b);
}
