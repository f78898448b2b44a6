/* dist/ps/table_sparse.c — a shard of a sparse table (table_sparse.h). Rows live in one growing
 * array, found through an open-addressing map id -> row; the rule's state and the counters sit
 * in arrays beside them, row for row. A row's first values depend only on (seed, id), so the same
 * id gets the same row however many servers share the table. The step is the optimizers' fused
 * update (dg_fused_update, the rule of eager/update_rule.h), so a row moves exactly as the same
 * row of a local embedding stepped by that optimizer would (Adam: with the row's own step count). */
#include "../dist_internal.h"
#include "table_sparse.h"
#include <dygraph/custom_op.h>
#include <dygraph/extension.h>

struct dg_ps_sparse_table {
    dg_ps_sparse_msg m;
    int64_t *keys;          /* map slot -> id; slot free when its row index is -1 */
    int64_t *idx;           /* map slot -> row */
    size_t cap;             /* map slots, a power of two */
    int64_t n;              /* rows */
    int64_t row_cap;
    float *values, *s0, *s1;  /* n x dim each (s1: Adam only) */
    int64_t *ids;           /* row -> id, in the order the rows were made */
    dg_ps_row_meta *meta;
};

static bool has_s1(const dg_ps_sparse_msg *m) { return m->kind == DG_PS_SPARSE_ADAM; }

static bool map_alloc(dg_ps_sparse_table *t, size_t cap) {
    int64_t *k = malloc(cap * sizeof *k), *ix = malloc(cap * sizeof *ix);
    if (!k || !ix) { free(k); free(ix); return false; }
    for (size_t i = 0; i < cap; i++) ix[i] = -1;
    free(t->keys);
    free(t->idx);
    t->keys = k, t->idx = ix, t->cap = cap;
    return true;
}

dg_ps_sparse_table *dg_ps_sparse_table_new(const dg_ps_sparse_msg *m) {
    dg_ps_sparse_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->m = *m;
    if (!map_alloc(t, 1024)) { dg_ps_sparse_table_free(t); return NULL; }
    return t;
}

void dg_ps_sparse_table_free(dg_ps_sparse_table *t) {
    if (!t) return;
    free(t->keys);
    free(t->idx);
    free(t->values);
    free(t->s0);
    free(t->s1);
    free(t->ids);
    free(t->meta);
    free(t);
}

const dg_ps_sparse_msg *dg_ps_sparse_table_settings(const dg_ps_sparse_table *t) { return &t->m; }
int64_t dg_ps_sparse_table_rows(const dg_ps_sparse_table *t) { return t->n; }
int64_t dg_ps_sparse_table_id(const dg_ps_sparse_table *t, int64_t k) { return t->ids[k]; }
float *dg_ps_sparse_table_row_at(dg_ps_sparse_table *t, int64_t k) { return t->values + k * t->m.dim; }
float *dg_ps_sparse_table_s0_at(dg_ps_sparse_table *t, int64_t k) { return t->s0 + k * t->m.dim; }
float *dg_ps_sparse_table_s1_at(dg_ps_sparse_table *t, int64_t k) { return t->s1 ? t->s1 + k * t->m.dim : NULL; }
dg_ps_row_meta *dg_ps_sparse_table_meta_at(dg_ps_sparse_table *t, int64_t k) { return t->meta + k; }

static size_t slot_of(const dg_ps_sparse_table *t, int64_t id) {
    uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & (t->cap - 1);
    while (t->idx[i] >= 0 && t->keys[i] != id) i = (i + 1) & (t->cap - 1);
    return i;
}

/* The map rebuilt from ids[0, n) at cap slots. */
static bool rehash(dg_ps_sparse_table *t, size_t cap) {
    int64_t *ok = t->keys, *oi = t->idx;
    size_t ocap = t->cap;
    t->keys = t->idx = NULL;
    if (!map_alloc(t, cap)) { t->keys = ok, t->idx = oi, t->cap = ocap; return false; }
    free(ok);
    free(oi);
    for (int64_t r = 0; r < t->n; r++) {
        size_t s = slot_of(t, t->ids[r]);
        t->keys[s] = t->ids[r];
        t->idx[s] = r;
    }
    return true;
}

void dg_ps_sparse_init_row(uint64_t seed, double init_range, int64_t id, int64_t dim, float *out) {
    for (int64_t j = 0; j < dim; j += 4) {
        uint32_t r[4];
        dg_philox4x32(seed, (uint64_t)id * 0x10000u + (uint64_t)(j / 4), r);
        for (int k = 0; k < 4 && j + k < dim; k++) {
            double u = (double)(r[k] >> 8) * (1.0 / 16777216.0);   /* [0, 1) on 24 bits */
            out[j + k] = (float)(init_range * (2 * u - 1));
        }
    }
}

static bool grow_rows(dg_ps_sparse_table *t) {
    int64_t nc = t->row_cap ? t->row_cap * 2 : 256;
    size_t fl = (size_t)nc * t->m.dim * sizeof(float);
    float *v = realloc(t->values, fl);
    if (v) t->values = v;
    float *a = v ? realloc(t->s0, fl) : NULL;
    if (a) t->s0 = a;
    float *b = a && has_s1(&t->m) ? realloc(t->s1, fl) : NULL;
    if (b) t->s1 = b;
    int64_t *ids = a && (b || !has_s1(&t->m)) ? realloc(t->ids, (size_t)nc * sizeof *ids) : NULL;
    if (ids) t->ids = ids;
    dg_ps_row_meta *meta = ids ? realloc(t->meta, (size_t)nc * sizeof *meta) : NULL;
    if (!meta) return false;   /* what was grown stays valid: row_cap still bounds the rows */
    t->meta = meta;
    t->row_cap = nc;
    return true;
}

int64_t dg_ps_sparse_table_index(dg_ps_sparse_table *t, int64_t id) {
    size_t s = slot_of(t, id);
    if (t->idx[s] >= 0) return t->idx[s];
    if ((size_t)(t->n + 1) * 2 > t->cap) {
        if (!rehash(t, t->cap * 2)) return -1;
        s = slot_of(t, id);
    }
    if (t->n == t->row_cap && !grow_rows(t)) return -1;
    int64_t k = t->n++;
    uint32_t dim = t->m.dim;
    dg_ps_sparse_init_row(t->m.seed, t->m.init_range, id, dim, t->values + k * dim);
    float init_s0 = t->m.kind == DG_PS_SPARSE_ADAGRAD ? (float)t->m.init_acc : 0;
    for (uint32_t j = 0; j < dim; j++) t->s0[k * dim + j] = init_s0;
    if (t->s1) memset(t->s1 + k * dim, 0, dim * sizeof(float));
    t->meta[k] = (dg_ps_row_meta){ 0, 0, 0 };
    t->keys[s] = id;
    t->ids[k] = id;
    t->idx[s] = k;
    return k;
}

float *dg_ps_sparse_table_row(dg_ps_sparse_table *t, int64_t id) {
    int64_t k = dg_ps_sparse_table_index(t, id);
    return k < 0 ? NULL : t->values + k * t->m.dim;
}

float *dg_ps_sparse_table_find(const dg_ps_sparse_table *t, int64_t id) {
    size_t s = slot_of(t, id);
    return t->idx[s] >= 0 ? t->values + t->idx[s] * t->m.dim : NULL;
}

int dg_ps_sparse_table_step_at(dg_ps_sparse_table *t, int64_t k, const float *g) {
    uint32_t dim = t->m.dim;
    int64_t step = ++t->meta[k].steps;
    static const dg_update_kind rule[] = { [DG_PS_SPARSE_SGD] = DG_UPD_SGD, [DG_PS_SPARSE_ADAGRAD] = DG_UPD_ADAGRAD,
                                           [DG_PS_SPARSE_ADAM] = DG_UPD_ADAM };
    dg_update_params u = { .kind = rule[t->m.kind], .lr = t->m.lr, .eps = t->m.eps, .beta1 = t->m.beta1, .beta2 = t->m.beta2 };
    dg_update_tensor ut = { .p = t->values + k * dim, .g = g, .n = dim, .step_size = t->m.lr };
    if (t->m.kind == DG_PS_SPARSE_ADAGRAD) ut.s0 = t->s0 + k * dim;
    if (t->m.kind == DG_PS_SPARSE_ADAM) {
        ut.s0 = t->s0 + k * dim;
        ut.s1 = t->s1 + k * dim;
        ut.step_size = t->m.lr / (1 - pow(t->m.beta1, (double)step));
        ut.bc2_sqrt = sqrt(1 - pow(t->m.beta2, (double)step));
    }
    return dg_fused_update(dg_cpu(), DG_F32, &u, &ut, 1);
}

int dg_ps_sparse_table_step(dg_ps_sparse_table *t, int64_t id, const float *g) {
    int64_t k = dg_ps_sparse_table_index(t, id);
    return k < 0 ? DG_ENOMEM : dg_ps_sparse_table_step_at(t, k, g);
}

int64_t dg_ps_sparse_table_evict(dg_ps_sparse_table *t, uint64_t now, uint64_t max_age) {
    size_t dim = t->m.dim, fb = dim * sizeof(float);
    int64_t kept = 0;
    for (int64_t r = 0; r < t->n; r++) {
        if (now > t->meta[r].last && now - t->meta[r].last > max_age) continue;
        if (kept != r) {
            memcpy(t->values + kept * dim, t->values + r * dim, fb);
            memcpy(t->s0 + kept * dim, t->s0 + r * dim, fb);
            if (t->s1) memcpy(t->s1 + kept * dim, t->s1 + r * dim, fb);
            t->ids[kept] = t->ids[r];
            t->meta[kept] = t->meta[r];
        }
        kept++;
    }
    int64_t dropped = t->n - kept;
    t->n = kept;
    if (dropped) {
        for (size_t i = 0; i < t->cap; i++) t->idx[i] = -1;
        for (int64_t r = 0; r < t->n; r++) {   /* the same slots: no allocation, so it cannot fail */
            size_t s = slot_of(t, t->ids[r]);
            t->keys[s] = t->ids[r];
            t->idx[s] = r;
        }
    }
    return dropped;
}
