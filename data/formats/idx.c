/* data/formats/idx.c — MNIST / Fashion-MNIST IDX files (LeCun's format), plain or gzip.
 *
 * An IDX file is a 4-byte magic (0, 0, data type, number of dims), one big-endian uint32 per
 * dim, then the data. Images are unsigned bytes [N, rows, cols], labels unsigned bytes [N]. Both
 * files are checked whole (magic, type, dims, exact data size, no trailing bytes, equal counts)
 * before the dataset exists; the header is checked from the first bytes before the rest is read or
 * inflated, and no more than the size it declares (plus a fixed slack) is ever read. Pixels stay as bytes in memory (47 MB for 60,000 28x28 images) and
 * become f32 [1, rows, cols] / 255 in get(), which only reads shared data (thread-safe). */
#include "formats.h"

typedef struct idx_ds {
    unsigned char *img_owned;       /* the images buffer when it is ours */
    const unsigned char *pixels;    /* n * rows * cols bytes */
    unsigned char *labels;          /* n bytes (copied) */
    int64_t n, rows, cols;
    char *name;
} idx_ds;

static int64_t idx_len(void *self) { return ((idx_ds *)self)->n; }

static int idx_get(void *self, int64_t i, uint64_t seed, dg_sample *out) {
    idx_ds *d = self;
    if (i < 0 || i >= d->n) return dg_dataset_error("%s: index %lld out of range [0, %lld)", d->name, (long long)i, (long long)d->n);
    int64_t shape[3] = { 1, d->rows, d->cols };
    dg_tensor *img = dgf_cpu_tensor(3, shape, DG_F32);
    dg_tensor *lab = img ? dgf_label_i64(d->labels[i]) : NULL;
    if (!lab) { dg_tensor_free(img); return dg_last_status() ? dg_last_status() : DG_ENOMEM; }
    float *x = dg_tensor_ptr(img);
    const unsigned char *p = d->pixels + i * d->rows * d->cols;
    for (int64_t k = 0; k < d->rows * d->cols; k++) x[k] = (float)p[k] / 255.0f;
    out->n = 2;
    out->t[0] = img;
    out->t[1] = lab;
    return 0;
}

static void idx_free(void *self) {
    idx_ds *d = self;
    if (!d) return;
    free(d->img_owned);
    free(d->labels);
    free(d->name);
    free(d);
}

static const dg_dataset_vtable idx_vt = { idx_len, idx_get, idx_free };

/* Checks the header (magic, type, dims) from the first bytes; fills dims and *total (data bytes);
 * returns the header size, 0 after setting an error. */
static size_t idx_head(const unsigned char *b, size_t len, int ndim, const char *file, bool gz, uint32_t *dims, uint64_t *total_out) {
    const char *what = ndim == 1 ? "labels" : "images";
    const char *inf = gz ? " of the inflated data" : "";
    if (len < 4) {
        DG_ERR(DG_EFORMAT, "mnist_idx: %s file '%s': %zu bytes%s, shorter than the 4-byte magic at byte 0", what, file, len, inf);
        return 0;
    }
    if (b[0] != 0 || b[1] != 0) {
        DG_ERR(DG_EFORMAT, "mnist_idx: %s file '%s': bad magic %02x %02x %02x %02x at byte 0 (an IDX file starts 00 00 08 %02x)",
               what, file, b[0], b[1], b[2], b[3], ndim);
        return 0;
    }
    if (b[2] != 0x08) {
        DG_ERR(DG_EFORMAT, "mnist_idx: %s file '%s': data type 0x%02x at byte 2 is not unsigned byte (0x08)", what, file, b[2]);
        return 0;
    }
    if (b[3] != ndim) {
        DG_ERR(DG_EFORMAT, "mnist_idx: %s file '%s': %d dims at byte 3, expected %d (%s)", what, file, b[3], ndim,
               ndim == 1 ? "[N] labels" : "[N, rows, cols] images");
        return 0;
    }
    size_t hdr = 4 + 4 * (size_t)ndim;
    if (len < hdr) {
        DG_ERR(DG_EFORMAT, "mnist_idx: %s file '%s': truncated header: %zu bytes%s, the %d dims end at byte %zu", what, file,
               len, inf, ndim, hdr);
        return 0;
    }
    uint64_t total = 1;
    for (int k = 0; k < ndim; k++) {
        const unsigned char *q = b + 4 + 4 * k;
        dims[k] = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
        if (k > 0 && dims[k] == 0) {
            DG_ERR(DG_EFORMAT, "mnist_idx: %s file '%s': dim %d is 0 at byte %d", what, file, k, 4 + 4 * k);
            return 0;
        }
        if (dims[k] && total > ((uint64_t)1 << 40) / dims[k]) {
            DG_ERR(DG_EFORMAT, "mnist_idx: %s file '%s': dims at byte 4 declare more than 2^40 bytes", what, file);
            return 0;
        }
        total *= dims[k];
    }
    *total_out = total;
    return hdr;
}

/* Validates one IDX buffer of unsigned bytes with `ndim` dims; fills dims, returns the data start. */
static const unsigned char *idx_check(const unsigned char *b, size_t len, int ndim, const char *file, bool gz,
                                      uint32_t *dims) {
    const char *what = ndim == 1 ? "labels" : "images";
    const char *inf = gz ? " of the inflated data" : "";
    uint64_t total;
    size_t hdr = idx_head(b, len, ndim, file, gz, dims, &total);
    if (!hdr) return NULL;
    uint64_t have = len - hdr;
    if (have < total) {
        DG_ERR(DG_EFORMAT, "mnist_idx: %s file '%s': truncated: the header declares %llu data bytes from byte %zu, the file%s "
               "ends at byte %zu (record %llu is incomplete)", what, file, (unsigned long long)total, hdr, inf, len,
               (unsigned long long)(ndim == 1 ? have : have / ((uint64_t)dims[1] * dims[2])));
        return NULL;
    }
    if (have > total) {
        DG_ERR(DG_EFORMAT, "mnist_idx: %s file '%s': %llu trailing bytes after the data, at byte %llu%s", what, file,
               (unsigned long long)(have - total), (unsigned long long)(hdr + total), inf);
        return NULL;
    }
    return b + hdr;
}

/* Takes ownership of img_owned (may be NULL when img points into the caller's memory). */
static dg_dataset *idx_make(const unsigned char *img, size_t img_len, unsigned char *img_owned, bool img_gz,
                            const unsigned char *lab, size_t lab_len, bool lab_gz, const char *img_name,
                            const char *lab_name) {
    uint32_t di[3], dl[1];
    const unsigned char *px = idx_check(img, img_len, 3, img_name, img_gz, di);
    const unsigned char *lb = px ? idx_check(lab, lab_len, 1, lab_name, lab_gz, dl) : NULL;
    if (!px || !lb) { free(img_owned); return NULL; }
    if (dl[0] != di[0]) {
        DG_ERR(DG_EFORMAT, "mnist_idx: label count %u ('%s' byte 4) differs from image count %u ('%s' byte 4)", dl[0],
               lab_name, di[0], img_name);
        free(img_owned);
        return NULL;
    }
    idx_ds *d = calloc(1, sizeof *d);
    size_t npx = (size_t)di[0] * di[1] * di[2];
    if (d) {
        d->n = di[0];
        d->rows = di[1];
        d->cols = di[2];
        d->labels = malloc(dl[0] ? dl[0] : 1);
        size_t nl = strlen(img_name) + 16;
        d->name = malloc(nl);
        if (d->name) snprintf(d->name, nl, "mnist_idx:%s", img_name);
        if (img_owned) {
            d->img_owned = img_owned;
            d->pixels = px;
        } else {   /* pixels in the caller's memory are copied: it need not outlive the dataset */
            d->img_owned = malloc(npx ? npx : 1);
            if (d->img_owned) memcpy(d->img_owned, px, npx);
            d->pixels = d->img_owned;
        }
        img_owned = NULL;
    }
    if (!d || !d->labels || !d->name || !d->pixels) {
        free(img_owned);
        idx_free(d);
        DG_ERR(DG_ENOMEM, "mnist_idx: out of memory for %zu pixels", npx);
        return NULL;
    }
    memcpy(d->labels, lb, dl[0]);
    return dgf_dataset_wrap(&idx_vt, d, d->name);
}

/* dgf_head_fn for an IDX file: the header alone says how many bytes the file may hold */
typedef struct idx_hctx { int ndim; const char *file; bool gz; } idx_hctx;
static int idx_head_check(const unsigned char *head, size_t n, void *ctx, uint64_t *limit) {
    idx_hctx *c = ctx;
    uint32_t dims[3];
    uint64_t total;
    size_t hdr = idx_head(head, n, c->ndim, c->file, c->gz, dims, &total);
    if (!hdr) return DG_EFORMAT;
    *limit = hdr + total;
    return 0;
}

static int idx_read(const char *path, int ndim, unsigned char **b, size_t *len, bool *gz) {
    idx_hctx c = { ndim, path, false };
    FILE *f = fopen(path, "rb");   /* gzip or not, for the messages of the header check */
    if (f) { unsigned char m[2] = {0, 0}; c.gz = dgf_is_gzip(m, fread(m, 1, 2, f)); fclose(f); }
    return dgf_read_file_head(path, "mnist_idx", 4 + 4 * (size_t)ndim, idx_head_check, &c, "its header at byte 0 declares",
                              b, len, gz);
}

dg_dataset *dg_mnist_idx_dataset(const char *images_path, const char *labels_path) {
    DG_CHECK(images_path && labels_path, "mnist_idx_dataset: %s path is NULL", images_path ? "labels" : "images");
    unsigned char *ib, *lb;
    size_t il, ll;
    bool igz, lgz;
    /* header first: a bad magic or a lying size is refused before the data are read or inflated */
    if (idx_read(images_path, 3, &ib, &il, &igz)) return NULL;
    if (idx_read(labels_path, 1, &lb, &ll, &lgz)) { free(ib); return NULL; }
    /* the images buffer becomes the dataset's storage (no second copy of 47 MB) */
    dg_dataset *ds = idx_make(ib, il, ib, igz, lb, ll, lgz, images_path, labels_path);
    free(lb);
    return ds;
}

dg_dataset *dg_mnist_idx_dataset_buffer(const void *images, size_t images_len, const void *labels, size_t labels_len,
                                        const char *name) {
    DG_CHECK((images || !images_len) && (labels || !labels_len), "mnist_idx_dataset_buffer: buffer is NULL");
    if (!name) name = "(buffer)";
    char in[512], ln[512];
    snprintf(in, sizeof in, "%s:images", name);
    snprintf(ln, sizeof ln, "%s:labels", name);
    const unsigned char *ib, *lb;
    size_t il, ll;
    bool iown, lown;
    static const unsigned char empty[1];
    const unsigned char *ip = images ? images : empty, *lp = labels ? labels : empty;
    idx_hctx ic = { 3, in, dgf_is_gzip(ip, images_len) }, lc = { 1, ln, dgf_is_gzip(lp, labels_len) };
    if (dgf_maybe_gunzip_head(ip, images_len, "mnist_idx", in, 16, idx_head_check, &ic, "its header at byte 0 declares", &ib,
                              &il, &iown)) return NULL;
    if (dgf_maybe_gunzip_head(lp, labels_len, "mnist_idx", ln, 8, idx_head_check, &lc, "its header at byte 0 declares", &lb,
                              &ll, &lown)) {
        if (iown) free((void *)ib);
        return NULL;
    }
    dg_dataset *ds = idx_make(ib, il, iown ? (unsigned char *)ib : NULL, iown, lb, ll, lown, in, ln);
    if (lown) free((void *)lb);
    return ds;
}
