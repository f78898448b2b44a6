/* eager/ops/random.c — sampling: torch.randint, torch.randperm and torch.multinomial. None has a
 * gradient. Each draws from a generator's Philox stream (eager/rng.c) the way dg_rand does: a
 * reservation of counters, element i's 64 random bits from counter ctr + i/2 (two of its four
 * 32-bit words), computed on the host, so a seed gives the same samples on every device and
 * thread count. The numbers are not torch's (its CPU generator is an mt19937), as for every
 * random op of the library. The results are uploaded to the device (randint, randperm: the
 * current one; multinomial: its input's). */
#include "op_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 64 random bits for element i of a reservation starting at ctr */
static uint64_t bits64(uint64_t seed, uint64_t ctr, uint64_t i) {
    uint32_t o[4];
    dg_philox4x32(seed, ctr + i / 2, o);
    int h = (int)(i % 2) * 2;
    return ((uint64_t)o[h] << 32) | o[h + 1];
}
/* U[0, 1) with 53 bits */
static double u01(uint64_t b) { return (double)(b >> 11) * (1.0 / 9007199254740992.0); }

/* host int64 values (n of them) as a tensor of dtype dt shaped shp[nd] on device dev */
static dg_tensor *upload_i64(const int64_t *v, const int64_t *shp, int nd, dg_dtype dt, dg_device dev) {
    dg_tensor *h = dg_tensor_alloc(shp, nd, DG_I64, dg_cpu());
    if (!h) return NULL;
    if (h->numel) memcpy(h->storage->data, v, sizeof *v * (size_t)h->numel);
    dg_tensor *c = h;
    if (dt != DG_I64) {   /* the CPU copy kernel converts, exactly for the ranges checked by the callers */
        c = dg_tensor_alloc(shp, nd, dt, dg_cpu());
        if (c && DG_KCALL(c, copy, DG_KV(h), DG_KV(c)) != 0) { dg_tensor_free(c); c = NULL; }
        dg_tensor_free(h);
        if (!c) return NULL;
    }
    if (dev.type == DG_CPU) return c;
    dg_tensor *t = dg_tensor_alloc(shp, nd, dt, dev);
    if (t && t->numel && DG_KCALL(t, upload, t->storage->data, c->storage->data, (size_t)t->numel * dg_dtype_bytes(dt)) != 0) {
        dg_tensor_free(t);
        t = NULL;
    }
    dg_tensor_free(c);
    return t;
}

dg_tensor *dg_randint(int64_t low, int64_t high, dg_shape shape) {
    DG_CHECK(high > low, "randint: expects low < high, got low %lld, high %lld", (long long)low, (long long)high);
    DG_CHECK(shape.ndim >= 0 && shape.ndim <= DG_MAX_DIMS, "randint: %d dims (at most %d)", shape.ndim, DG_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < shape.ndim; i++) {
        DG_CHECK(shape.d[i] >= 0, "randint: negative dimension %lld in the shape", (long long)shape.d[i]);
        n *= shape.d[i];
    }
    int64_t *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) { DG_ERR(DG_ENOMEM, "randint: out of memory for %lld values", (long long)n); return NULL; }
    uint64_t range = (uint64_t)high - (uint64_t)low, seed;
    uint64_t ctr = dg_generator_reserve(NULL, (uint64_t)n * 2, &seed);
    for (int64_t i = 0; i < n; i++) v[i] = (int64_t)((uint64_t)low + bits64(seed, ctr, (uint64_t)i) % range);
    dg_tensor *t = upload_i64(v, shape.d, shape.ndim, DG_I64, dg_current_device());
    free(v);
    return t;
}

dg_tensor *dg_randperm(int64_t n, dg_dtype dt) {
    DG_CHECK(n >= 0, "randperm: n must be non-negative, got %lld", (long long)n);
    DG_CHECK(dt == DG_I64 || dt == DG_I32 || dt == DG_F32 || dt == DG_F64, "randperm: dtype %s not supported (int64, int32, float32, float64)",
             dg_dtype_name(dt));
    DG_CHECK(dt != DG_I32 || n <= 2147483648LL, "randperm: n %lld does not fit int32", (long long)n);
    DG_CHECK(dt != DG_F32 || n <= (1LL << 24) + 1, "randperm: n cannot be greater than 2^24+1 for float32 (got %lld), as torch's", (long long)n);
    DG_CHECK(dt != DG_F64 || n <= (1LL << 53) + 1, "randperm: n cannot be greater than 2^53+1 for float64 (got %lld)", (long long)n);
    int64_t *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) { DG_ERR(DG_ENOMEM, "randperm: out of memory for %lld values", (long long)n); return NULL; }
    for (int64_t i = 0; i < n; i++) v[i] = i;
    uint64_t seed, ctr = dg_generator_reserve(NULL, (uint64_t)n * 2, &seed);
    for (int64_t i = n - 1; i > 0; i--) {   /* Fisher-Yates: position i takes one of 0..i */
        int64_t j = (int64_t)(bits64(seed, ctr, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    dg_tensor *t = upload_i64(v, &n, 1, dt, dg_current_device());
    free(v);
    return t;
}

/* ---- multinomial ---- */
#define OP "multinomial"

/* row p[0..k) without replacement (or one sample): torch's algorithm, the n largest of
 * p[j] / E[j] with E ~ Exp(1), largest first, a tie to the lower index */
static void sample_topk(const double *p, int64_t k, int64_t n, uint64_t seed, uint64_t ctr, uint64_t first, double *key, int64_t *out) {
    for (int64_t j = 0; j < k; j++) {
        double e = -log1p(-u01(bits64(seed, ctr, first + (uint64_t)j)));
        key[j] = p[j] / (e > 0 ? e : 0x1p-1022);   /* u = 0 exactly: the smallest draw, not 0 / 0 */
    }
    for (int64_t s = 0; s < n; s++) {   /* selection: n is at most k, and small in practice */
        int64_t best = -1;
        for (int64_t j = 0; j < k; j++)
            if (key[j] >= 0 && (best < 0 || key[j] > key[best])) best = j;
        out[s] = best;
        key[best] = -1;   /* taken (keys are >= 0) */
    }
}

/* row p[0..k) with replacement: the first category whose cumulative share exceeds u */
static void sample_cdf(const double *p, int64_t k, int64_t n, uint64_t seed, uint64_t ctr, uint64_t first, double *cdf, int64_t *out) {
    double sum = 0;
    for (int64_t j = 0; j < k; j++) sum += p[j];
    double acc = 0;
    for (int64_t j = 0; j < k; j++) { acc += p[j]; cdf[j] = acc / sum; }
    cdf[k - 1] = 1.0;
    for (int64_t s = 0; s < n; s++) {
        double u = u01(bits64(seed, ctr, first + (uint64_t)s));
        int64_t lo = 0, hi = k - 1;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (cdf[mid] <= u) lo = mid + 1;
            else hi = mid;
        }
        while (lo > 0 && p[lo] == 0) lo--;   /* never a zero-weight category (u on a flat step) */
        out[s] = lo;
    }
}

static dg_tensor *multinomial_op(const dg_tensor *probs, int64_t n, bool replacement) {
    DG_CHECK_INPUT(OP, probs);
    DG_CHECK(dg_dtype_is_float(probs->dtype), OP ": only supports floating-point dtypes for input, got %s %s", dg_dtype_name(probs->dtype),
             DG_SHAPE_STR(probs));
    DG_CHECK(probs->ndim == 1 || probs->ndim == 2, OP ": prob_dist must be 1 or 2 dim, got %s", DG_SHAPE_STR(probs));
    DG_CHECK(n > 0, OP ": cannot sample n_sample <= 0 samples (num_samples %lld, probs %s)", (long long)n, DG_SHAPE_STR(probs));
    int64_t k = probs->shape[probs->ndim - 1], rows = probs->ndim == 2 ? probs->shape[0] : 1;
    DG_CHECK(replacement || n <= k, OP ": cannot sample n_sample > prob_dist.size(-1) samples without replacement (num_samples %lld, probs %s)",
             (long long)n, DG_SHAPE_STR(probs));
    DG_CHECK(k <= (1LL << 24), OP ": number of categories cannot exceed 2^24 (probs %s)", DG_SHAPE_STR(probs));
    DG_CHECK(k > 0 || rows == 0, OP ": no categories to sample from (probs %s)", DG_SHAPE_STR(probs));
    /* the weights on the host in float64 (the copy kernel widens exactly) */
    dg_tensor *w = dg_tensor_alloc(probs->shape, probs->ndim, DG_F64, probs->storage->device);
    if (!w) return NULL;
    size_t total = (size_t)(rows * k);
    double *p = malloc(sizeof *p * (total ? total : 1)), *scratch = malloc(sizeof *p * (size_t)(k ? k : 1));
    int64_t nout = rows * n, *out = malloc(sizeof *out * (size_t)(nout ? nout : 1));
    int rc = !p || !scratch || !out ? DG_ENOMEM : DG_KCALL(probs, copy, DG_KV(probs), DG_KV(w));
    if (!rc) rc = dg_to_host(w, p, sizeof *p * (total ? total : 1));
    dg_tensor_free(w);
    dg_tensor *y = NULL;
    if (rc) { if (rc == DG_ENOMEM) DG_ERR(rc, OP ": out of memory for probs %s", DG_SHAPE_STR(probs)); goto done; }
    /* torch's checks, per row */
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0;
        for (int64_t j = 0; j < k; j++) {
            double v = p[r * k + j];
            if (!isfinite(v) || v < 0) {
                DG_ERR(DG_EINVAL, OP ": probability tensor contains either `inf`, `nan` or element < 0 (row %lld of probs %s)", (long long)r,
                       DG_SHAPE_STR(probs));
                goto done;
            }
            sum += v;
        }
        if (!(sum > 0)) {
            DG_ERR(DG_EINVAL, OP ": invalid multinomial distribution (sum of probabilities <= 0) (row %lld of probs %s)", (long long)r,
                   DG_SHAPE_STR(probs));
            goto done;
        }
    }
    bool topk = !replacement || n == 1;
    uint64_t per_row = (uint64_t)(topk ? k : n), seed;
    uint64_t ctr = dg_generator_reserve(NULL, (uint64_t)rows * per_row * 2, &seed);
    for (int64_t r = 0; r < rows; r++) {
        if (topk) sample_topk(p + r * k, k, n, seed, ctr, (uint64_t)r * per_row, scratch, out + r * n);
        else sample_cdf(p + r * k, k, n, seed, ctr, (uint64_t)r * per_row, scratch, out + r * n);
    }
    int64_t shp[2] = { rows, n };
    y = probs->ndim == 2 ? upload_i64(out, shp, 2, DG_I64, probs->storage->device) : upload_i64(out, &n, 1, DG_I64, probs->storage->device);
    if (y) dg_trace_value(DG_OP_MULTINOMIAL, y, (const dg_tensor *[]){ probs }, 1, NULL, 0);   /* not exportable: the exporter says so */
done:
    free(p);
    free(scratch);
    free(out);
    return y;
}

dg_tensor *dg_multinomial(const dg_tensor *probs, int64_t num_samples, bool replacement) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_MULTINOMIAL, DG_OP_IN(probs));
    return dg_op_leave(&f, multinomial_op(f.arg[0], num_samples, replacement));
}
