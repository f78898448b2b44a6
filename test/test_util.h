/* test/test_util.h — shared test helpers: finite-difference gradient checks in f64, golden
 * file reading, tensor comparison. Used with Criterion. */
#ifndef DG_TEST_UTIL_H
#define DG_TEST_UTIL_H

#include <dygraph.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef dg_tensor *(*gc_fn)(dg_tensor *const *in, void *ctx);

/* Random f64 leaf that requires grad. */
static inline dg_tensor *gc_input(dg_shape s, double lo, double hi) {
    dg_tensor *t = dg_uniform(s, lo, hi, DG_F64);
    dg_set_requires_grad(t, true);
    return t;
}

/* Checks d(sum(f(in) * w))/d(in[i]) against central differences for every input that
 * requires grad; w is a fixed random weighting so every output element matters. */
static inline void gradcheck(const char *name, gc_fn f, dg_tensor *const *in, int n, void *ctx, double tol) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = f(in, ctx);
    cr_assert(y, "%s: forward failed: %s", name, dg_last_error());
    dg_tensor *w = dg_uniform(dg_shape_of(y), 0.5, 1.5, DG_F64);
    dg_tensor *loss = dg_sum_all(dg_mul(y, w));
    for (int i = 0; i < n; i++) if (in[i]) dg_clear_grad(in[i]);
    cr_assert_eq(dg_backward(loss), 0, "%s: backward failed: %s", name, dg_last_error());
    for (int i = 0; i < n; i++) {
        if (!in[i] || !dg_requires_grad(in[i])) continue;
        dg_tensor *g = dg_grad(in[i]);
        cr_assert(g, "%s: no gradient for input %d", name, i);
        double *x = dg_data(in[i]);
        const double *ga = dg_data(g);
        cr_assert(dg_is_contiguous(g));
        int64_t m = dg_numel(in[i]);
        for (int64_t k = 0; k < m; k++) {
            double old = x[k], h = 1e-6 * fmax(1.0, fabs(old));
            dg_no_grad_begin();
            x[k] = old + h;
            double lp = dg_item(dg_sum_all(dg_mul(f(in, ctx), w)));
            x[k] = old - h;
            double lm = dg_item(dg_sum_all(dg_mul(f(in, ctx), w)));
            dg_no_grad_end();
            x[k] = old;
            double num = (lp - lm) / (2 * h);
            double err = fabs(num - ga[k]) / fmax(1.0, fabs(num));
            cr_assert(err <= tol, "%s: input %d element %lld: analytic %.10g numeric %.10g (err %.3g)", name, i,
                      (long long)k, ga[k], num, err);
        }
    }
    dg_scope_end(s);
}

/* The last error names what failed: it contains s1 (and s2 when given). Clears it. */
static inline void expect_error_contains(const char *what, const char *s1, const char *s2) {
    const char *m = dg_last_error();
    cr_assert(m[0], "%s: no error message", what);
    cr_assert(strstr(m, s1), "%s: message '%s' lacks '%s'", what, m, s1);
    if (s2) cr_assert(strstr(m, s2), "%s: message '%s' lacks '%s'", what, m, s2);
    dg_clear_error();
}

/* Max relative error between two same-shaped tensors (any float dtype), relative to max(|b|, floor). */
static inline double max_rel_err(const dg_tensor *a, const dg_tensor *b, double floor_) {
    int64_t n = dg_numel(a);
    cr_assert_eq(n, dg_numel(b), "element counts differ: %lld vs %lld", (long long)n, (long long)dg_numel(b));
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1)), *y = malloc(sizeof(double) * (size_t)(n ? n : 1));
    dg_scope *s = dg_scope_begin();
    dg_to_host(dg_cast(a, DG_F64), x, sizeof(double) * (size_t)n);
    dg_to_host(dg_cast(b, DG_F64), y, sizeof(double) * (size_t)n);
    dg_scope_end(s);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(x[i] - y[i]) / fmax(fabs(y[i]), floor_);
        if (e > worst || isnan(e)) worst = isnan(e) ? INFINITY : e;
    }
    free(x);
    free(y);
    return worst;
}

/* A DistributedBatchSampler that must construct. */
static inline dg_batch_sampler *dist_sampler(int64_t n, int64_t bs, int R, int r, bool shuffle, bool drop_last, uint64_t seed) {
    dg_distributed_batch_sampler_params dbsp = dg_distributed_batch_sampler_default_params();
    dbsp.batch_size = bs;
    dbsp.num_replicas = R;
    dbsp.rank = r;
    dbsp.shuffle = shuffle;
    dbsp.drop_last = drop_last;
    dbsp.seed = seed;
    dg_batch_sampler *s = dg_distributed_batch_sampler_new(n, dbsp);
    cr_assert(s, "distributed sampler n=%lld R=%d r=%d: %s", (long long)n, R, r, dg_last_error());
    return s;
}

/* ---- golden files: written by test/goldens/make_goldens.py ----
 * Text format, one tensor per record:
 *   tensor <name> <dtype: f32|i64> <ndim> <d0> ... <dn-1>
 *   <values, whitespace separated>
 */
typedef struct golden { int n; char names[32][64]; dg_tensor *t[32]; } golden;

static inline golden *golden_load(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open golden file %s (run from the repo root)", path);
    golden *g = calloc(1, sizeof *g);
    char kw[16], dt[8];
    while (fscanf(f, "%15s", kw) == 1) {
        cr_assert_str_eq(kw, "tensor", "%s: bad record", path);
        int nd;
        cr_assert(fscanf(f, "%63s %7s %d", g->names[g->n], dt, &nd) == 3);
        dg_shape s = { .ndim = nd };
        int64_t numel = 1;
        for (int i = 0; i < nd; i++) { long long d; cr_assert(fscanf(f, "%lld", &d) == 1); s.d[i] = d; numel *= d; }
        bool is_int = strcmp(dt, "i64") == 0;
        void *buf = malloc(8 * (size_t)(numel ? numel : 1));
        for (int64_t i = 0; i < numel; i++) {
            if (is_int) { long long v; cr_assert(fscanf(f, "%lld", &v) == 1); ((int64_t *)buf)[i] = v; }
            else { double v; cr_assert(fscanf(f, "%lf", &v) == 1); ((float *)buf)[i] = (float)v; }
        }
        g->t[g->n] = dg_from_data(s, is_int ? DG_I64 : DG_F32, buf);
        dg_keep(g->t[g->n]);
        free(buf);
        g->n++;
    }
    fclose(f);
    return g;
}
static inline dg_tensor *golden_get(golden *g, const char *name) {
    for (int i = 0; i < g->n; i++) if (strcmp(g->names[i], name) == 0) return g->t[i];
    cr_assert_fail("golden tensor '%s' missing", name);
    return NULL;
}
static inline void golden_free(golden *g) {
    for (int i = 0; i < g->n; i++) dg_tensor_free(g->t[i]);
    free(g);
}
/* A leaf copy of a golden tensor that requires grad. */
static inline dg_tensor *golden_leaf(golden *g, const char *name) {
    dg_tensor *t = dg_clone(golden_get(g, name));
    dg_set_requires_grad(t, true);
    return t;
}

#endif
