/* data/formats/mnist_json.c — the mnist.json(.gz) of Paddle's multi-GPU MNIST tutorial: a JSON array [train, valid, eval],
 * each [images, labels] with images a list of 784-number lists and labels a list of integers.
 *
 * The file is parsed as a stream (the tutorial's file inflates to a few hundred megabytes) by a small
 * strict parser that accepts exactly that shape: JSON numbers per RFC 8259, whitespace anywhere,
 * nothing else. All three splits are checked (784 values per image, each finite as a float32,
 * integer labels >= 0, as many labels as images, nothing after the array) before the dataset
 * exists; only the requested split is kept. Pixels are stored as one byte per value with a palette
 * when the split has at most 256 distinct values (as 8-bit MNIST in any affine scaling does), else
 * as float.
 *
 * Nothing declares the file's size, and its defect may be in its last byte: the kept split is held
 * only up to the source's keep budget (DGF_KEEP_UNVALIDATED) while the file is unchecked. Past it
 * the parser drops it and goes on counting; a valid file is then read a second time keeping
 * exactly the counted images. */
#include "formats.h"
#include <math.h>

static const char *split_names[3] = { "train", "valid", "eval" };

typedef struct json_ds {
    int64_t n;
    int side;
    unsigned char *u8;    /* n * side * side palette indices, or NULL */
    float pal[256];
    float *f32;           /* n * side * side values when there were more than 256 distinct */
    int64_t *labels;
    char *name;
} json_ds;

static int64_t json_len(void *self) { return ((json_ds *)self)->n; }

static int json_get(void *self, int64_t i, uint64_t seed, dg_sample *out) {
    json_ds *d = self;
    if (i < 0 || i >= d->n) return dg_dataset_error("%s: index %lld out of range [0, %lld)", d->name, (long long)i, (long long)d->n);
    int64_t shape[3] = { 1, d->side, d->side }, px = (int64_t)d->side * d->side;
    dg_tensor *img = dgf_cpu_tensor(3, shape, DG_F32);
    dg_tensor *lab = img ? dgf_label_i64(d->labels[i]) : NULL;
    if (!lab) { dg_tensor_free(img); return dg_last_status() ? dg_last_status() : DG_ENOMEM; }
    float *x = dg_tensor_ptr(img);
    if (d->u8) for (int64_t k = 0; k < px; k++) x[k] = d->pal[d->u8[i * px + k]];
    else memcpy(x, d->f32 + i * px, sizeof(float) * (size_t)px);
    out->n = 2;
    out->t[0] = img;
    out->t[1] = lab;
    return 0;
}

static void json_free(void *self) {
    json_ds *d = self;
    if (!d) return;
    free(d->u8);
    free(d->f32);
    free(d->labels);
    free(d->name);
    free(d);
}

static const dg_dataset_vtable json_vt = { json_len, json_get, json_free };

/* ---- the kept split's storage ---- */
typedef struct store {
    int64_t n_vals, cap_vals, n_labels, cap_labels;
    unsigned char *u8;
    float *f32;
    float pal[256];
    int npal;
    int16_t slot[1024];   /* hash of float bits -> palette index, -1 empty */
    int64_t *labels;
    uint64_t budget;      /* first pass: the most bytes it may hold before the file is checked */
    bool dropped;         /* first pass, past the budget: counting only */
    bool exact;           /* second pass: sized for the counted values; growing means the file changed */
} store;

static void store_init(store *st, uint64_t budget) {
    memset(st, 0, sizeof *st);
    memset(st->slot, 0xff, sizeof st->slot);
    st->budget = budget;
}

static void store_free(store *st) {
    free(st->u8);
    free(st->f32);
    free(st->labels);
    st->u8 = NULL;
    st->f32 = NULL;
    st->labels = NULL;
    st->cap_vals = st->cap_labels = 0;
}

static uint64_t store_bytes(int64_t cap_vals, bool f32, int64_t cap_labels) {
    return (uint64_t)cap_vals * (f32 ? 4 : 1) + (uint64_t)cap_labels * sizeof(int64_t);
}

/* Whether the store may hold cap_vals values (4 bytes each as float) and cap_labels labels; in the
 * first pass, past the budget it drops what it holds and only counts from then on. */
static bool store_fits(store *st, int64_t cap_vals, bool f32, int64_t cap_labels) {
    if (st->exact || store_bytes(cap_vals, f32, cap_labels) <= st->budget) return true;
    store_free(st);
    st->dropped = true;
    return false;
}

/* The next capacity after cap for n + 1 elements: doubled, but stopping at the most the budget
 * allows (room elements) rather than doubling past it. */
static int64_t next_cap(int64_t cap, int64_t first, int64_t n, uint64_t room) {
    int64_t nc = cap ? cap * 2 : first;
    if ((uint64_t)nc > room && (uint64_t)n + 1 <= room) nc = (int64_t)room;
    return nc;
}

/* 0, DG_ENOMEM, or DG_EFORMAT: the second pass has more values than the first counted */
static int store_value(store *st, float v) {
    if (st->dropped) { st->n_vals++; return 0; }
    if (st->n_vals == st->cap_vals) {
        if (st->exact) return DG_EFORMAT;
        uint64_t used = store_bytes(0, false, st->cap_labels), size = st->f32 ? 4 : 1;
        int64_t nc = next_cap(st->cap_vals, 256, st->n_vals, used > st->budget ? 0 : (st->budget - used) / size);
        if (!store_fits(st, nc, st->f32 != NULL, st->cap_labels)) { st->n_vals++; return 0; }
        if (st->f32) {
            float *b = realloc(st->f32, sizeof(float) * (size_t)nc);
            if (!b) return DG_ENOMEM;
            st->f32 = b;
        } else {
            unsigned char *b = realloc(st->u8, (size_t)nc);
            if (!b) return DG_ENOMEM;
            st->u8 = b;
        }
        st->cap_vals = nc;
    }
    if (st->f32) { st->f32[st->n_vals++] = v; return 0; }
    uint32_t bits;
    memcpy(&bits, &v, 4);
    uint32_t h = (bits * 2654435761u) >> 22;
    while (st->slot[h] >= 0 && memcmp(&st->pal[st->slot[h]], &v, 4) != 0) h = (h + 1) & 1023;
    if (st->slot[h] < 0) {
        if (st->npal == 256) {
            /* a 257th distinct value: switch to float storage (the bytes are freed after the copy) */
            if (!store_fits(st, st->cap_vals * 5, false, st->cap_labels)) { st->n_vals++; return 0; }
            float *f = malloc(sizeof(float) * (size_t)st->cap_vals);
            if (!f) return DG_ENOMEM;
            for (int64_t k = 0; k < st->n_vals; k++) f[k] = st->pal[st->u8[k]];
            free(st->u8);
            st->u8 = NULL;
            st->f32 = f;
            st->f32[st->n_vals++] = v;
            return 0;
        }
        st->pal[st->npal] = v;
        st->slot[h] = (int16_t)st->npal++;
    }
    st->u8[st->n_vals++] = (unsigned char)st->slot[h];
    return 0;
}

static int store_label(store *st, int64_t v) {
    if (st->dropped) { st->n_labels++; return 0; }
    if (st->n_labels == st->cap_labels) {
        if (st->exact) return DG_EFORMAT;
        uint64_t used = store_bytes(st->cap_vals, st->f32 != NULL, 0);
        int64_t nc = next_cap(st->cap_labels, 64, st->n_labels, used > st->budget ? 0 : (st->budget - used) / sizeof(int64_t));
        if (!store_fits(st, st->cap_vals, st->f32 != NULL, nc)) { st->n_labels++; return 0; }
        int64_t *b = realloc(st->labels, sizeof(int64_t) * (size_t)nc);
        if (!b) return DG_ENOMEM;
        st->labels = b;
        st->cap_labels = nc;
    }
    st->labels[st->n_labels++] = v;
    return 0;
}

/* The second pass's store: room for exactly the values and labels the first pass counted. */
static int store_exact(store *st, int64_t n_vals, int64_t n_labels) {
    store_init(st, UINT64_MAX);
    st->exact = true;
    st->u8 = n_vals ? malloc((size_t)n_vals) : NULL;
    st->labels = n_labels ? malloc(sizeof(int64_t) * (size_t)n_labels) : NULL;
    st->cap_vals = n_vals;
    st->cap_labels = n_labels;
    if ((n_vals && !st->u8) || (n_labels && !st->labels)) { store_free(st); return DG_ENOMEM; }
    return 0;
}

/* ---- the parser ---- */
typedef struct jp {
    dgf_src *s;
    int side, keep;
    int failed;
    int split;              /* context for messages: split being parsed (-1: top level) */
    int64_t image, value;   /* image index and value index within it (-1: not inside) */
    int64_t label;
} jp;

static int jfail(jp *j, uint64_t at, const char *what) {
    if (j->failed) return DG_EFORMAT;
    j->failed = 1;
    if (j->s->io_error) return DG_EFORMAT;   /* the source's message (a read error, the cap) is the cause */
    char ctx[160] = "";
    if (j->split >= 0) {
        int k = snprintf(ctx, sizeof ctx, " (split %d '%s'", j->split, split_names[j->split]);
        if (j->image >= 0) k += snprintf(ctx + k, sizeof ctx - (size_t)k, ", image %lld", (long long)j->image);
        if (j->value >= 0) k += snprintf(ctx + k, sizeof ctx - (size_t)k, ", value %lld", (long long)j->value);
        if (j->label >= 0) k += snprintf(ctx + k, sizeof ctx - (size_t)k, ", label %lld", (long long)j->label);
        snprintf(ctx + k, sizeof ctx - (size_t)k, ")");
    }
    DG_ERR(DG_EFORMAT, "mnist_json '%s': %s at %sbyte %llu%s", j->s->name, what, j->s->is_gz ? "uncompressed " : "",
           (unsigned long long)at, ctx);
    return DG_EFORMAT;
}

static void jws(jp *j) {
    for (;;) {
        int c = dgf_peek(j->s);
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') j->s->p++;
        else return;
    }
}

static int jexpect(jp *j, char c, const char *what) {
    jws(j);
    if (dgf_peek(j->s) != c) return jfail(j, dgf_pos(j->s), what);
    j->s->p++;
    return 0;
}

/* ',' -> 1, close -> 0, anything else -> error */
static int jsep(jp *j, char close, const char *what) {
    jws(j);
    int c = dgf_peek(j->s);
    if (c == ',') { j->s->p++; return 1; }
    if (c == close) { j->s->p++; return 0; }
    jfail(j, dgf_pos(j->s), what);
    return -1;
}

static int jnumber(jp *j, double *v, uint64_t *at) {
    jws(j);
    *at = dgf_pos(j->s);
    char tok[72];
    int n = 0;
    for (;;) {
        int c = dgf_peek(j->s);
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E')) break;
        if (n == 64) return jfail(j, *at, "number longer than 64 characters");
        tok[n++] = (char)c;
        j->s->p++;
    }
    tok[n] = 0;
    if (!n) return jfail(j, *at, "expected a number");
    /* RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    const char *c = tok;
    if (*c == '-') c++;
    if (*c == '0') c++;
    else if (*c >= '1' && *c <= '9') while (*c >= '0' && *c <= '9') c++;
    else return jfail(j, *at, "malformed number");
    if (*c == '.') {
        c++;
        if (!(*c >= '0' && *c <= '9')) return jfail(j, *at, "malformed number");
        while (*c >= '0' && *c <= '9') c++;
    }
    if (*c == 'e' || *c == 'E') {
        c++;
        if (*c == '+' || *c == '-') c++;
        if (!(*c >= '0' && *c <= '9')) return jfail(j, *at, "malformed number");
        while (*c >= '0' && *c <= '9') c++;
    }
    if (*c) return jfail(j, *at, "malformed number");
    if (dgf_parse_double(tok, v)) return jfail(j, *at, "number out of range");
    return 0;
}

/* A store failure: out of memory, or (second pass) more data than the first pass counted. */
static int store_failed(jp *j, int rc, uint64_t at) {
    if (rc == DG_ENOMEM) {
        j->failed = 1;
        DG_ERR(DG_ENOMEM, "mnist_json '%s': out of memory", j->s->name);
        return DG_ENOMEM;
    }
    return jfail(j, at, "the file changed while it was read (more data than its first reading had)");
}

static int parse_split(jp *j, store *st) {
    bool keep = j->split == j->keep;
    int rc;
    int64_t px = (int64_t)j->side * j->side, n_images = 0, n_labels = 0;
    if (jexpect(j, '[', "expected '[' opening a split [images, labels]")) return DG_EFORMAT;
    if (jexpect(j, '[', "expected '[' opening the image list")) return DG_EFORMAT;
    jws(j);
    if (dgf_peek(j->s) == ']') j->s->p++;
    else for (;;) {
        j->image = n_images;
        if (jexpect(j, '[', "expected '[' opening an image")) return DG_EFORMAT;
        for (int64_t k = 0; k < px; k++) {
            j->value = k;
            double v;
            uint64_t at;
            if (jnumber(j, &v, &at)) return DG_EFORMAT;
            /* checked after the cast: a finite double such as 1e300 is +inf as a float */
            float fv = (float)v;
            if (!isfinite(fv)) return jfail(j, at, fv > 0 ? "value does not fit a float32 pixel (it would be +inf)"
                                                          : "value does not fit a float32 pixel (it would be -inf)");
            if (keep && (rc = store_value(st, fv))) return store_failed(j, rc, at);
            jws(j);
            int c = dgf_peek(j->s);
            if (k + 1 < px && c != ',') return jfail(j, dgf_pos(j->s), c == ']' ? "image has too few values" : "expected ',' between values");
            if (k + 1 == px && c != ']') return jfail(j, dgf_pos(j->s), c == ',' ? "image has too many values" : "expected ']' closing an image");
            j->s->p++;
        }
        j->value = -1;
        n_images++;
        int r = jsep(j, ']', "expected ',' or ']' after an image");
        if (r < 0) return DG_EFORMAT;
        if (!r) break;
    }
    j->image = -1;
    if (jexpect(j, ',', "expected ',' between the image list and the label list")) return DG_EFORMAT;
    jws(j);
    uint64_t labels_at = dgf_pos(j->s);
    if (jexpect(j, '[', "expected '[' opening the label list")) return DG_EFORMAT;
    jws(j);
    if (dgf_peek(j->s) == ']') j->s->p++;
    else for (;;) {
        j->label = n_labels;
        double v;
        uint64_t at;
        if (jnumber(j, &v, &at)) return DG_EFORMAT;
        if (v != floor(v) || v < 0 || v > 2147483647.0) return jfail(j, at, "label is not an integer in 0..2^31-1");
        if (keep && (rc = store_label(st, (int64_t)v))) return store_failed(j, rc, at);
        n_labels++;
        int r = jsep(j, ']', "expected ',' or ']' after a label");
        if (r < 0) return DG_EFORMAT;
        if (!r) break;
    }
    j->label = -1;
    if (n_labels != n_images) {
        char msg[128];
        snprintf(msg, sizeof msg, "%lld labels for %lld images in the label list starting", (long long)n_labels, (long long)n_images);
        return jfail(j, labels_at, msg);
    }
    return jexpect(j, ']', "expected ']' closing the split after its label list");
}

/* One pass over the whole file, keeping the requested split in st. */
static int parse_all(dgf_src *s, int split, int side, store *st) {
    jp j = { .s = s, .side = side, .keep = split, .split = -1, .image = -1, .value = -1, .label = -1 };
    int rc = jexpect(&j, '[', "expected '[' opening [train, valid, eval]");
    for (int k = 0; k < 3 && !rc; k++) {
        j.split = k;
        rc = parse_split(&j, st);
        j.split = -1;
        if (!rc && k < 2) rc = jexpect(&j, ',', k == 0 ? "expected ',' after split 0 (train); the file needs 3 splits"
                                                        : "expected ',' after split 1 (valid); the file needs 3 splits");
    }
    if (!rc) rc = jexpect(&j, ']', "expected ']' closing the top-level array after 3 splits");
    if (!rc) {
        jws(&j);
        if (dgf_peek(s) != -1) rc = jfail(&j, dgf_pos(s), "trailing data after the top-level array");
    }
    if (!rc && s->io_error) rc = DG_EIO;
    return rc;
}

dg_dataset *dgf_mnist_json_parse(dgf_src *s, int split, int side) {
    store st;
    store_init(&st, s->keep_budget);
    int rc = parse_all(s, split, side, &st);
    if (!rc && st.dropped) {
        /* valid, but the split outgrew the budget while unchecked: again, keeping exactly what was counted */
        int64_t n_vals = st.n_vals, n_labels = st.n_labels;
        rc = dgf_src_rewind(s);
        if (!rc && (rc = store_exact(&st, n_vals, n_labels))) DG_ERR(DG_ENOMEM, "mnist_json '%s': out of memory for %lld images",
                                                                       s->name, (long long)n_labels);
        if (!rc) rc = parse_all(s, split, side, &st);
        if (!rc && (st.n_vals != n_vals || st.n_labels != n_labels)) {
            DG_ERR(DG_EFORMAT, "mnist_json '%s': the file changed while it was read (%lld images in the split, %lld before)",
                   s->name, (long long)st.n_labels, (long long)n_labels);
            rc = DG_EFORMAT;
        }
    }
    json_ds *d = NULL;
    if (!rc) {
        d = calloc(1, sizeof *d);
        size_t nl = strlen(s->name) + 40;
        char *name = d ? malloc(nl) : NULL;
        if (!name) { free(d); d = NULL; DG_ERR(DG_ENOMEM, "mnist_json: out of memory"); rc = DG_ENOMEM; }
        else {
            snprintf(name, nl, "mnist_json:%s[%s]", s->name, split_names[split]);
            d->name = name;
            d->n = st.n_labels;
            d->side = side;
            d->u8 = st.u8;
            d->f32 = st.f32;
            memcpy(d->pal, st.pal, sizeof d->pal);
            d->labels = st.labels;
            if (!d->u8 && !d->f32) d->u8 = malloc(1);   /* an empty split */
            if (!d->labels) d->labels = malloc(sizeof(int64_t));
            if ((!d->u8 && !d->f32) || !d->labels) {
                json_free(d);
                DG_ERR(DG_ENOMEM, "mnist_json: out of memory");
                return NULL;
            }
            return dgf_dataset_wrap(&json_vt, d, d->name);
        }
    }
    store_free(&st);
    return NULL;
}

dg_dataset *dg_mnist_json_dataset(const char *path, int split) {
    DG_CHECK(path, "mnist_json_dataset: path is NULL");
    DG_CHECK(split >= 0 && split <= 2, "mnist_json_dataset: split %d is not 0 (train), 1 (valid) or 2 (eval)", split);
    dgf_src s;
    if (dgf_src_open_file(&s, path, "mnist_json")) return NULL;
    dg_dataset *ds = dgf_mnist_json_parse(&s, split, 28);
    dgf_src_close(&s);
    return ds;
}

dg_dataset *dg_mnist_json_dataset_buffer(const void *buf, size_t len, int split, const char *name) {
    DG_CHECK(buf || !len, "mnist_json_dataset_buffer: buffer is NULL");
    DG_CHECK(split >= 0 && split <= 2, "mnist_json_dataset_buffer: split %d is not 0 (train), 1 (valid) or 2 (eval)", split);
    if (!name) name = "(buffer)";
    static const unsigned char empty[1];
    /* gzip is inflated window by window as the parser reads, never whole */
    dgf_src s;
    if (dgf_src_open_buffer(&s, buf ? buf : empty, len, "mnist_json", name)) return NULL;
    dg_dataset *ds = dgf_mnist_json_parse(&s, split, 28);
    dgf_src_close(&s);
    return ds;
}
