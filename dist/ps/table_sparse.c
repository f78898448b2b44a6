/* dist/ps/table_sparse.c — a server's shard of a sparse table (table_sparse.h). Rows live in one
 * growing array, found through an open-addressing map id -> row; Adagrad's accumulators sit in a
 * second array beside them. A row's first values depend only on (seed, id), so the same id gets
 * the same row however many servers share the table. The step is the optimizers' fused update
 * (dg_fused_update, the rule of eager/update_rule.h), so a row on a server moves exactly as the
 * same row of a local embedding stepped by that optimizer. */
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
    float *values, *acc;    /* n x dim each (acc: Adagrad) */
    int64_t *ids;           /* row -> id, in the order the rows were made */
};

dg_ps_sparse_table *dg_ps_sparse_table_new(const dg_ps_sparse_msg *m) {
    dg_ps_sparse_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->m = *m;
    t->cap = 1024;
    t->keys = malloc(t->cap * sizeof *t->keys);
    t->idx = malloc(t->cap * sizeof *t->idx);
    if (!t->keys || !t->idx) { dg_ps_sparse_table_free(t); return NULL; }
    for (size_t i = 0; i < t->cap; i++) t->idx[i] = -1;
    return t;
}

void dg_ps_sparse_table_free(dg_ps_sparse_table *t) {
    if (!t) return;
    free(t->keys);
    free(t->idx);
    free(t->values);
    free(t->acc);
    free(t->ids);
    free(t);
}

const dg_ps_sparse_msg *dg_ps_sparse_table_settings(const dg_ps_sparse_table *t) { return &t->m; }
int64_t dg_ps_sparse_table_rows(const dg_ps_sparse_table *t) { return t->n; }
int64_t dg_ps_sparse_table_id(const dg_ps_sparse_table *t, int64_t k) { return t->ids[k]; }
float *dg_ps_sparse_table_row_at(dg_ps_sparse_table *t, int64_t k) { return t->values + k * t->m.dim; }
float *dg_ps_sparse_table_acc_at(dg_ps_sparse_table *t, int64_t k) { return t->acc + k * t->m.dim; }

static size_t slot_of(const dg_ps_sparse_table *t, int64_t id) {
    uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & (t->cap - 1);
    while (t->idx[i] >= 0 && t->keys[i] != id) i = (i + 1) & (t->cap - 1);
    return i;
}

static bool grow_map(dg_ps_sparse_table *t) {
    size_t old = t->cap;
    int64_t *ok = t->keys, *oi = t->idx;
    t->cap = old * 2;
    t->keys = malloc(t->cap * sizeof *t->keys);
    t->idx = malloc(t->cap * sizeof *t->idx);
    if (!t->keys || !t->idx) {
        free(t->keys);
        free(t->idx);
        t->keys = ok, t->idx = oi, t->cap = old;
        return false;
    }
    for (size_t i = 0; i < t->cap; i++) t->idx[i] = -1;
    for (size_t i = 0; i < old; i++)
        if (oi[i] >= 0) {
            size_t s = slot_of(t, ok[i]);
            t->keys[s] = ok[i];
            t->idx[s] = oi[i];
        }
    free(ok);
    free(oi);
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

float *dg_ps_sparse_table_find(const dg_ps_sparse_table *t, int64_t id) {
    size_t s = slot_of(t, id);
    return t->idx[s] >= 0 ? t->values + t->idx[s] * t->m.dim : NULL;
}

float *dg_ps_sparse_table_row(dg_ps_sparse_table *t, int64_t id) {
    size_t s = slot_of(t, id);
    if (t->idx[s] >= 0) return t->values + t->idx[s] * t->m.dim;
    if ((size_t)(t->n + 1) * 2 > t->cap) {
        if (!grow_map(t)) return NULL;
        s = slot_of(t, id);
    }
    if (t->n == t->row_cap) {
        int64_t nc = t->row_cap ? t->row_cap * 2 : 256;
        float *v = realloc(t->values, (size_t)nc * t->m.dim * sizeof(float));
        if (!v) return NULL;
        t->values = v;
        float *a = realloc(t->acc, (size_t)nc * t->m.dim * sizeof(float));
        if (!a) return NULL;
        t->acc = a;
        int64_t *ids = realloc(t->ids, (size_t)nc * sizeof *ids);
        if (!ids) return NULL;
        t->ids = ids;
        t->row_cap = nc;
    }
    float *row = t->values + t->n * t->m.dim;
    dg_ps_sparse_init_row(t->m.seed, t->m.init_range, id, t->m.dim, row);
    for (uint32_t j = 0; j < t->m.dim; j++) t->acc[t->n * t->m.dim + j] = (float)t->m.init_acc;
    t->keys[s] = id;
    t->ids[t->n] = id;
    t->idx[s] = t->n++;
    return row;
}

float *dg_ps_sparse_table_acc(dg_ps_sparse_table *t, int64_t id) {
    float *row = dg_ps_sparse_table_row(t, id);
    return row ? t->acc + (row - t->values) : NULL;
}

int dg_ps_sparse_table_step(dg_ps_sparse_table *t, int64_t id, const float *g) {
    float *row = dg_ps_sparse_table_row(t, id);
    if (!row) return DG_ENOMEM;
    float *acc = t->acc + (row - t->values);
    dg_update_params u = { .kind = t->m.kind == DG_PS_SPARSE_ADAGRAD ? DG_UPD_ADAGRAD : DG_UPD_SGD, .lr = t->m.lr, .eps = t->m.eps };
    dg_update_tensor ut = { .p = row, .g = g, .s0 = t->m.kind == DG_PS_SPARSE_ADAGRAD ? acc : NULL, .n = t->m.dim, .step_size = t->m.lr };
    return dg_fused_update(dg_cpu(), DG_F32, &u, &ut, 1);
}
