/* data/dataset.c — the dataset base (a refcounted vtable + name), samples, per-sample seeds,
 * subsets and the deterministic random split. */
#include "data_util.h"
#include <math.h>
#include <stdarg.h>

struct dg_dataset {
    int refcount;                 /* atomic */
    dg_dataset_vtable vt;
    void *self;
    char name[128];
};

dg_dataset *dg_dataset_new(const dg_dataset_vtable *vt, void *self, const char *name) {
    DG_CHECK(vt && vt->len && vt->get, "dataset_new: %s", !vt ? "vtable is NULL" : "vtable needs len and get");
    dg_dataset *ds = calloc(1, sizeof *ds);
    DG_CHECK(ds, "dataset_new: out of memory");
    ds->refcount = 1;
    ds->vt = *vt;
    ds->self = self;
    snprintf(ds->name, sizeof ds->name, "%s", name && *name ? name : "dataset");
    return ds;
}

dg_dataset *dg_dataset_ref(dg_dataset *ds) {
    if (ds) __atomic_add_fetch(&ds->refcount, 1, __ATOMIC_RELAXED);
    return ds;
}

void dg_dataset_free(dg_dataset *ds) {
    if (!ds) return;
    if (__atomic_sub_fetch(&ds->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (ds->vt.free) ds->vt.free(ds->self);
    free(ds);
}

int64_t dg_dataset_len(const dg_dataset *ds) {
    DG_CHECK_HANDLE_INT(ds, "dataset_len: dataset is NULL");
    return ds->vt.len(ds->self);
}

const char *dg_dataset_name(const dg_dataset *ds) { return ds ? ds->name : "(null)"; }

void dg_sample_clear(dg_sample *s) {
    if (!s) return;
    int n = s->n < 0 ? 0 : s->n > DG_MAX_SAMPLE_FIELDS ? DG_MAX_SAMPLE_FIELDS : s->n;
    for (int i = 0; i < n; i++) { dg_tensor_free(s->t[i]); s->t[i] = NULL; }
    s->n = 0;
}

int dg_dataset_error(const char *fmt, ...) {
    char buf[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt ? fmt : "(no message)", ap);
    va_end(ap);
    DG_ERR(DG_EFORMAT, "%s", buf);
    return DG_EFORMAT;
}


int dg_dataset_get(dg_dataset *ds, int64_t index, uint64_t seed, dg_sample *out) {
    DG_CHECK_HANDLE_INT(ds, "dataset_get: dataset is NULL");
    DG_CHECK_INT(out, "dataset_get: out is NULL");
    memset(out, 0, sizeof *out);
    int64_t len = ds->vt.len(ds->self);
    if (index < 0 || index >= len) {
        DG_ERR(DG_EINVAL, "dataset '%s' index %lld: out of range (length %lld)", ds->name, (long long)index, (long long)len);
        return DG_EINVAL;
    }
    uint64_t errs = dg_error_count();
    int rc = ds->vt.get(ds->self, index, seed, out);
    if (rc == 0) {
        int n = out->n;
        bool ok = n >= 1 && n <= DG_MAX_SAMPLE_FIELDS;
        for (int i = 0; ok && i < n; i++) ok = out->t[i] != NULL;
        if (ok) return 0;
        if (n > 0 && n <= DG_MAX_SAMPLE_FIELDS)
            for (int i = 0; i < n; i++) dg_tensor_free(out->t[i]);
        memset(out, 0, sizeof *out);
        DG_ERR(DG_EINVAL, "dataset '%s' index %lld: get returned %d fields%s (expected 1..%d tensors)", ds->name,
               (long long)index, n, n >= 1 && n <= DG_MAX_SAMPLE_FIELDS ? " with a NULL tensor" : "", DG_MAX_SAMPLE_FIELDS);
        return DG_EINVAL;
    }
    if (out->n > 0 && out->n <= DG_MAX_SAMPLE_FIELDS)
        for (int i = 0; i < out->n; i++) dg_tensor_free(out->t[i]);
    memset(out, 0, sizeof *out);
    int status = rc < 0 ? rc : DG_EINVAL;
    /* Name the dataset and index unless an inner dataset (a subset's base, a transform's input)
     * already did: its index is the one that points at the bad record. Only a message recorded
     * by this get counts: an older one is about something else. */
    const char *inner = dg_error_since(errs) ? dg_last_error() : NULL;
    if (!inner || strncmp(inner, "dataset '", 9) != 0) {
        char msg[900];
        snprintf(msg, sizeof msg, "%s", inner ? inner : "get failed without a message");
        const char *file = __FILE__;
        int line = __LINE__;
        dg_error_split_location(msg, &file, &line);
        dg_set_error_at(status, file, line, "dataset '%s' index %lld: %s", ds->name, (long long)index, msg);
    }
    return status;
}

/* ---- per-sample seeds and the Philox stream used for permutations ---- */
uint64_t dg_sample_seed(uint64_t loader_seed, int64_t epoch, int64_t index) {
    return dg_data_philox64(dg_data_philox64(loader_seed, (uint64_t)epoch), (uint64_t)index);
}


/* ---- subsets ---- */
typedef struct subset { dg_dataset *base; int64_t *idx; int64_t n; } subset;

static int64_t subset_len(void *self) { return ((subset *)self)->n; }
static int subset_get(void *self, int64_t index, uint64_t seed, dg_sample *out) {
    subset *s = self;
    return dg_dataset_get(s->base, s->idx[index], seed, out);
}
static void subset_free(void *self) {
    subset *s = self;
    dg_dataset_free(s->base);
    free(s->idx);
    free(s);
}
static const dg_dataset_vtable subset_vt = { subset_len, subset_get, subset_free };

dg_dataset *dg_dataset_subset(dg_dataset *base, const int64_t *indices, int64_t n) {
    DG_CHECK_HANDLE(base, "dataset_subset: base is NULL");
    DG_CHECK(n >= 0 && (indices || n == 0), "dataset_subset('%s'): %s", base->name, n < 0 ? "negative count" : "indices is NULL");
    int64_t len = dg_dataset_len(base);
    for (int64_t i = 0; i < n; i++)
        DG_CHECK(indices[i] >= 0 && indices[i] < len, "dataset_subset('%s'): indices[%lld] = %lld is outside [0, %lld)",
                 base->name, (long long)i, (long long)indices[i], (long long)len);
    subset *s = calloc(1, sizeof *s);
    int64_t *idx = malloc(sizeof *idx * (size_t)(n ? n : 1));
    if (!s || !idx) { free(s); free(idx); DG_ERR(DG_ENOMEM, "dataset_subset: out of memory"); return NULL; }
    if (n) memcpy(idx, indices, sizeof *idx * (size_t)n);
    s->base = dg_dataset_ref(base);
    s->idx = idx;
    s->n = n;
    char name[128];
    snprintf(name, sizeof name, "%.90s[subset of %lld]", base->name, (long long)n);
    dg_dataset *ds = dg_dataset_new(&subset_vt, s, name);
    if (!ds) subset_free(s);
    return ds;
}

int dg_dataset_random_split(dg_dataset *base, double fraction, uint64_t seed, dg_dataset **first, dg_dataset **second) {
    DG_CHECK_HANDLE_INT(base, "dataset_random_split: base is NULL");
    DG_CHECK_INT(first && second, "dataset_random_split: an output pointer is NULL");
    *first = *second = NULL;
    DG_CHECK_INT(fraction >= 0 && fraction <= 1, "dataset_random_split('%s'): fraction %g is outside [0, 1]", base->name, fraction);
    int64_t n = dg_dataset_len(base);
    DG_CHECK_INT(n >= 0, "dataset_random_split('%s'): length %lld", base->name, (long long)n);
    int64_t *perm = malloc(sizeof *perm * (size_t)(n ? n : 1));
    if (!perm) { DG_ERR(DG_ENOMEM, "dataset_random_split: out of memory"); return DG_ENOMEM; }
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    uint64_t counter = 0;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)dg_data_uniform_upto(seed, &counter, (uint64_t)i);
        int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    int64_t k = (int64_t)llround((double)n * fraction);
    if (k > n) k = n;
    *first = dg_dataset_subset(base, perm, k);
    *second = *first ? dg_dataset_subset(base, perm + k, n - k) : NULL;
    free(perm);
    if (!*first || !*second) {
        dg_dataset_free(*first);
        *first = NULL;
        return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    return 0;
}
