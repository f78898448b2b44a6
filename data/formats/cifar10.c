/* data/formats/cifar10.c — the CIFAR-10 binary version (cifar-10-batches-bin/).
 *
 * Each file is a run of 3073-byte records: one label byte (0..9), then 1024 red, 1024 green and
 * 1024 blue bytes of a 32x32 image, row-major. Training reads data_batch_1.bin .. data_batch_5.bin,
 * testing test_batch.bin. Every file is checked whole (non-empty, whole records, labels 0..9)
 * before the dataset exists; the records stay as bytes in memory and become f32 [3, 32, 32] / 255
 * in get().
 *
 * The format has no header, but it declares its size all the same: a batch holds 10,000 records
 * (CIFAR-10's description of the binary version). The first record's label is checked from the
 * first byte before anything else is read, and no more than 10,000 records (plus a fixed slack,
 * for an exact message) are read or inflated from a file or buffer: a gzip bomb costs at most one
 * batch's 30.7 MB while it is being refused. */
#include "formats.h"

#define REC 3073
#define PIX 3072
#define BATCH_RECORDS 10000
#define BATCH_DECLARES "a CIFAR-10 batch (10000 records of 3073 bytes) holds at most"

typedef struct cifar_ds {
    unsigned char *data;   /* n records of REC bytes, as in the files */
    int64_t n;
    char *name;
} cifar_ds;

static int64_t cifar_len(void *self) { return ((cifar_ds *)self)->n; }

static int cifar_get(void *self, int64_t i, uint64_t seed, dg_sample *out) {
    cifar_ds *d = self;
    if (i < 0 || i >= d->n) return dg_dataset_error("%s: index %lld out of range [0, %lld)", d->name, (long long)i, (long long)d->n);
    const unsigned char *r = d->data + (size_t)i * REC;
    int64_t shape[3] = { 3, 32, 32 };
    dg_tensor *img = dgf_cpu_tensor(3, shape, DG_F32);
    dg_tensor *lab = img ? dgf_label_i64(r[0]) : NULL;
    if (!lab) { dg_tensor_free(img); return dg_last_status() ? dg_last_status() : DG_ENOMEM; }
    float *x = dg_tensor_ptr(img);
    for (int k = 0; k < PIX; k++) x[k] = (float)r[1 + k] / 255.0f;
    out->n = 2;
    out->t[0] = img;
    out->t[1] = lab;
    return 0;
}

static void cifar_free(void *self) {
    cifar_ds *d = self;
    if (!d) return;
    free(d->data);
    free(d->name);
    free(d);
}

static const dg_dataset_vtable cifar_vt = { cifar_len, cifar_get, cifar_free };

static int cifar_check(const unsigned char *b, size_t len, const char *file) {
    if (len == 0) { DG_ERR(DG_EFORMAT, "cifar10 '%s': empty file, no 3073-byte record at byte 0", file); return DG_EFORMAT; }
    if (len > (size_t)BATCH_RECORDS * REC) {
        DG_ERR(DG_EFORMAT, "cifar10 '%s': more than 10000 records: record 10000 starts at byte %zu, but %s %zu bytes", file,
               (size_t)BATCH_RECORDS * REC, BATCH_DECLARES, (size_t)BATCH_RECORDS * REC);
        return DG_EFORMAT;
    }
    if (len % REC) {
        size_t k = len / REC;
        DG_ERR(DG_EFORMAT, "cifar10 '%s': %zu bytes is not a whole number of 3073-byte records: record %zu (from byte %zu) "
               "is truncated at byte %zu", file, len, k, k * REC, len);
        return DG_EFORMAT;
    }
    for (size_t k = 0; k < len / REC; k++)
        if (b[k * REC] > 9) {
            DG_ERR(DG_EFORMAT, "cifar10 '%s': record %zu has label %d at byte %zu (labels are 0..9)", file, k, b[k * REC], k * REC);
            return DG_EFORMAT;
        }
    return 0;
}

/* dgf_head_fn: the first record's label from the first byte; a batch's size from the format */
static int cifar_head(const unsigned char *head, size_t n, void *ctx, uint64_t *limit) {
    const char *file = ctx;
    if (n == 0) { DG_ERR(DG_EFORMAT, "cifar10 '%s': empty file, no 3073-byte record at byte 0", file); return DG_EFORMAT; }
    if (head[0] > 9) {
        DG_ERR(DG_EFORMAT, "cifar10 '%s': record 0 has label %d at byte 0 (labels are 0..9)", file, head[0]);
        return DG_EFORMAT;
    }
    *limit = (uint64_t)BATCH_RECORDS * REC;
    return 0;
}

static dg_dataset *cifar_make(unsigned char *data, size_t len, const char *what) {
    cifar_ds *d = calloc(1, sizeof *d);
    size_t nl = strlen(what) + 16;
    char *name = malloc(nl);
    if (!d || !name) { free(d); free(name); free(data); DG_ERR(DG_ENOMEM, "cifar10: out of memory"); return NULL; }
    snprintf(name, nl, "cifar10:%s", what);
    d->data = data;
    d->n = (int64_t)(len / REC);
    d->name = name;
    return dgf_dataset_wrap(&cifar_vt, d, d->name);
}

dg_dataset *dg_cifar10_dataset(const char *dir, bool train) {
    DG_CHECK(dir, "cifar10_dataset: dir is NULL");
    int nf = train ? 5 : 1;
    unsigned char *all = NULL;
    size_t total = 0;
    for (int f = 0; f < nf; f++) {
        char path[4096];
        if (train) snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, f + 1);
        else snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        unsigned char *b;
        size_t len;
        if (dgf_read_file_head(path, "cifar10", 1, cifar_head, path, BATCH_DECLARES, &b, &len, NULL) || cifar_check(b, len, path)) {
            free(b);
            free(all);
            return NULL;
        }
        if (!all) { all = b; total = len; continue; }
        unsigned char *bigger = realloc(all, total + len);
        if (!bigger) { free(b); free(all); DG_ERR(DG_ENOMEM, "cifar10: out of memory reading '%s'", path); return NULL; }
        all = bigger;
        memcpy(all + total, b, len);
        total += len;
        free(b);
    }
    char what[4200];
    snprintf(what, sizeof what, "%s/%s", dir, train ? "data_batch_1..5.bin" : "test_batch.bin");
    return cifar_make(all, total, what);
}

dg_dataset *dg_cifar10_dataset_buffer(const void *buf, size_t len, const char *name) {
    DG_CHECK(buf || !len, "cifar10_dataset_buffer: buffer is NULL");
    if (!name) name = "(buffer)";
    static const unsigned char empty[1];
    const unsigned char *b;
    size_t n;
    bool owned;
    if (dgf_maybe_gunzip_head(buf ? buf : empty, len, "cifar10", name, 1, cifar_head, (void *)name, BATCH_DECLARES, &b, &n, &owned))
        return NULL;
    if (cifar_check(b, n, name)) { if (owned) free((void *)b); return NULL; }
    unsigned char *copy = owned ? (unsigned char *)b : malloc(n);
    if (!copy) { DG_ERR(DG_ENOMEM, "cifar10: out of memory"); return NULL; }
    if (!owned) memcpy(copy, b, n);
    return cifar_make(copy, n, name);
}
