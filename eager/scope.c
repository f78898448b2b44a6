/* eager/scope.c — ownership scopes. Each thread has a stack of scopes; a tensor made while one
 * is open is registered in the innermost and released when it ends, so a training step's
 * temporaries are freed in one place and a loop's memory stays flat. */
#include "internal.h"
#include <pthread.h>

struct dg_scope {
    dg_tensor **items;
    int64_t n, cap;
    struct dg_scope *parent;
};

static _Thread_local dg_scope *top;

/* The largest item array a scope of this thread has ended with, kept for the next scope: a step
 * that makes thousands of tensors would otherwise grow it by realloc from 64 slots every time
 * (glibc's realloc/free was a third of a thousand-op step). Freed when the thread exits. */
static _Thread_local dg_tensor **t_spare;
static _Thread_local int64_t t_spare_cap;
static pthread_key_t g_spare_key;
static pthread_once_t g_spare_once = PTHREAD_ONCE_INIT;
static void spare_free(void *p) { free(p); }
static void spare_key_make(void) { pthread_key_create(&g_spare_key, spare_free); }

static void spare_keep(dg_tensor **items, int64_t cap) {
    if (cap <= t_spare_cap) { free(items); return; }
    free(t_spare);
    t_spare = items;
    t_spare_cap = cap;
    pthread_once(&g_spare_once, spare_key_make);
    pthread_setspecific(g_spare_key, t_spare);
}

dg_scope *dg_scope_begin(void) {
    dg_scope *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "scope_begin: out of memory"); return NULL; }
    s->parent = top;
    s->items = t_spare;
    s->cap = t_spare_cap;
    t_spare = NULL;
    t_spare_cap = 0;
    pthread_once(&g_spare_once, spare_key_make);
    pthread_setspecific(g_spare_key, NULL);
    top = s;
    return s;
}

static int scope_push(dg_scope *s, dg_tensor *t) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 64;
        dg_tensor **items = realloc(s->items, sizeof *items * (size_t)cap);
        if (!items) return -1;
        s->items = items;
        s->cap = cap;
    }
    t->scope = s;
    t->scope_slot = s->n;
    s->items[s->n++] = t;
    return 0;
}

void dg_scope_adopt(dg_tensor *t) {
    /* Out of memory here leaves the tensor with its creator, who still holds the reference. */
    if (top && scope_push(top, t) != 0) t->scope = NULL;
}

bool dg_scope_owns(const dg_scope *s, const dg_tensor *t) { return s && dg_tensor_live(t) && t->scope == s; }

int dg_adopt(dg_tensor *t) {
    DG_CHECK_INPUT_INT("adopt", t);
    if (t->scope) { DG_ERR(DG_ESTATE, "adopt: the tensor already belongs to a scope"); return DG_ESTATE; }
    dg_scope_adopt(t);
    return 0;
}

void dg_scope_forget(dg_tensor *t) {
    dg_scope *s = t->scope;
    if (!s) return;
    s->items[t->scope_slot] = NULL;
    /* Trim trailing holes so a make-and-free loop inside one scope does not grow the array. */
    while (s->n > 0 && s->items[s->n - 1] == NULL) s->n--;
    t->scope = NULL;
}

void dg_scope_end(dg_scope *s) {
    if (!s) return;
    /* Ending an outer scope ends the inner ones the caller forgot. */
    while (top && top != s) dg_scope_end(top);
    if (top != s) return;  /* not on this thread's stack: nothing we may free */
    for (int64_t i = s->n - 1; i >= 0; i--) {
        dg_tensor *t = s->items[i];
        if (t) { t->scope = NULL; t->released_by = DG_RELEASED_BY_SCOPE; dg_tensor_release(t); }
    }
    top = s->parent;
    spare_keep(s->items, s->cap);
    free(s);
}

dg_tensor *dg_keep(dg_tensor *t) {
    if (!t) return NULL;
    DG_CHECK_INPUT("keep", t);
    dg_scope_forget(t);
    return t;
}

dg_tensor *dg_keep_in_parent(dg_tensor *t) {
    if (!t) return NULL;
    DG_CHECK_INPUT("keep_in_parent", t);
    if (!t->scope) return t;
    dg_scope *parent = t->scope->parent;
    dg_scope_forget(t);
    if (parent && scope_push(parent, t) != 0) t->scope = NULL;
    return t;
}

void dg_scope_release_thread(void) {
    dg_scope *outermost = top;
    while (outermost && outermost->parent) outermost = outermost->parent;
    if (outermost) dg_scope_end(outermost);
    free(t_spare);
    t_spare = NULL;
    t_spare_cap = 0;
    pthread_once(&g_spare_once, spare_key_make);
    pthread_setspecific(g_spare_key, NULL);
}
