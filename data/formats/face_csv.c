/* data/formats/face_csv.c — the Kaggle facial keypoints CSV (training.csv / test.csv).
 *
 * training.csv: a header with the 30 keypoint columns in Kaggle's names and order, then Image;
 * each row has 30 numbers (any may be empty: missing) and Image, 96*96 space-separated pixel
 * values 0..255. test.csv: ImageId,Image. The file is read as a stream and checked whole: the
 * header, every row's column count, every number, every pixel count and range; only then does the
 * dataset exist. Rows with any missing value are dropped (the tutorial's dropna). Lines end in \n or
 * \r\n; empty lines are skipped; a field may be double-quoted ("" is a quote); a leading UTF-8 BOM
 * is skipped. Pixels are kept as bytes; get() gives the image f32 [1, 96, 96] / 255 and, with
 * labels, the keypoints f32 [30] / 96.
 *
 * No header declares the number of rows and a defect may be in the last one, so complete rows are
 * kept only up to the source's keep budget (DGF_KEEP_UNVALIDATED) while the file is unchecked;
 * past it the parser drops them and counts, and a valid file is read a second time keeping exactly
 * the counted rows. Rejecting any file costs at most the budget, whatever its size. */
#include "formats.h"
#include <math.h>
#include <stdarg.h>

#define NKP 30
#define MAXTOK 64

static const char *kaggle_cols[NKP] = {
    "left_eye_center_x", "left_eye_center_y", "right_eye_center_x", "right_eye_center_y",
    "left_eye_inner_corner_x", "left_eye_inner_corner_y", "left_eye_outer_corner_x", "left_eye_outer_corner_y",
    "right_eye_inner_corner_x", "right_eye_inner_corner_y", "right_eye_outer_corner_x", "right_eye_outer_corner_y",
    "left_eyebrow_inner_end_x", "left_eyebrow_inner_end_y", "left_eyebrow_outer_end_x", "left_eyebrow_outer_end_y",
    "right_eyebrow_inner_end_x", "right_eyebrow_inner_end_y", "right_eyebrow_outer_end_x", "right_eyebrow_outer_end_y",
    "nose_tip_x", "nose_tip_y", "mouth_left_corner_x", "mouth_left_corner_y", "mouth_right_corner_x",
    "mouth_right_corner_y", "mouth_center_top_lip_x", "mouth_center_top_lip_y", "mouth_center_bottom_lip_x",
    "mouth_center_bottom_lip_y",
};

typedef struct face_ds {
    int64_t n;
    int side;
    bool has_labels;
    unsigned char *pixels;   /* n * side * side */
    float *labels;           /* n * 30, in pixels (divided by 96 in get) */
    char *name;
} face_ds;

static int64_t face_len(void *self) { return ((face_ds *)self)->n; }

static int face_get(void *self, int64_t i, uint64_t seed, dg_sample *out) {
    face_ds *d = self;
    if (i < 0 || i >= d->n) return dg_dataset_error("%s: index %lld out of range [0, %lld)", d->name, (long long)i, (long long)d->n);
    int64_t px = (int64_t)d->side * d->side, shape[3] = { 1, d->side, d->side }, lshape[1] = { NKP };
    dg_tensor *img = dgf_cpu_tensor(3, shape, DG_F32);
    dg_tensor *lab = img && d->has_labels ? dgf_cpu_tensor(1, lshape, DG_F32) : NULL;
    if (!img || (d->has_labels && !lab)) { dg_tensor_free(img); return dg_last_status() ? dg_last_status() : DG_ENOMEM; }
    float *x = dg_tensor_ptr(img);
    const unsigned char *p = d->pixels + i * px;
    for (int64_t k = 0; k < px; k++) x[k] = (float)p[k] / 255.0f;
    out->t[0] = img;
    out->n = 1;
    if (lab) {
        float *y = dg_tensor_ptr(lab);
        for (int k = 0; k < NKP; k++) y[k] = d->labels[i * NKP + k] / (float)d->side;
        out->t[1] = lab;
        out->n = 2;
    }
    return 0;
}

static void face_free(void *self) {
    face_ds *d = self;
    if (!d) return;
    free(d->pixels);
    free(d->labels);
    free(d->name);
    free(d);
}

static const dg_dataset_vtable face_vt = { face_len, face_get, face_free };

/* ---- the parser ---- */
typedef struct cp {
    dgf_src *s;
    int64_t line;         /* 1-based line of the current record */
    int col;              /* 0-based column being read */
    int failed;
    char names[NKP + 1][MAXTOK + 1];
    int ncols;
} cp;

static int cfail(cp *c, uint64_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cfail(cp *c, uint64_t at, const char *fmt, ...) {
    if (c->failed) return DG_EFORMAT;
    c->failed = 1;
    if (c->s->io_error) return DG_EFORMAT;   /* the source's message (a read error, the cap) is the cause */
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char col[96] = "";
    if (c->col >= 0 && c->ncols > 0 && c->col < c->ncols) snprintf(col, sizeof col, ", column %d ('%s')", c->col + 1, c->names[c->col]);
    DG_ERR(DG_EFORMAT, "face_keypoints '%s': line %lld%s, %sbyte %llu: %s", c->s->name, (long long)c->line, col,
           c->s->is_gz ? "uncompressed " : "", (unsigned long long)at, msg);
    return DG_EFORMAT;
}

/* A copy of s for a message: non-printable bytes become '?'. */
static const char *printable(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (; *s && n + 1 < cap; s++) out[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    out[n] = 0;
    return out;
}

/* After a field: ',' -> 1 (more fields), end of line or file -> 0, else error (-1). */
static int field_end(cp *c) {
    int ch = dgf_peek(c->s);
    if (ch == ',') { c->s->p++; return 1; }
    if (ch == '\n') { c->s->p++; return 0; }
    if (ch == -1) return 0;
    if (ch == '\r') {
        uint64_t at = dgf_pos(c->s);
        c->s->p++;
        if (dgf_peek(c->s) == '\n') { c->s->p++; return 0; }
        cfail(c, at, "carriage return not followed by a line feed");
        return -1;
    }
    cfail(c, dgf_pos(c->s), "unexpected character 0x%02x after a field", ch);
    return -1;
}

/* Reads a field of at most MAXTOK characters into tok (quotes removed); returns field_end's result. */
static int token(cp *c, char *tok, int *len) {
    int n = 0;
    uint64_t at = dgf_pos(c->s);
    if (dgf_peek(c->s) == '"') {
        c->s->p++;
        for (;;) {
            int ch = dgf_next(c->s);
            if (ch == -1 || ch == '\n' || ch == '\r') { cfail(c, at, "unterminated quoted field"); return -1; }
            if (ch == '"') {
                if (dgf_peek(c->s) != '"') break;
                c->s->p++;
            }
            /* a NUL would end the C string early and the rest of the field would vanish unchecked */
            if (ch == 0) { cfail(c, dgf_pos(c->s) - 1, "NUL byte (0x00) inside a field"); return -1; }
            if (n == MAXTOK) { cfail(c, at, "field longer than %d characters", MAXTOK); return -1; }
            tok[n++] = (char)ch;
        }
    } else {
        for (;;) {
            int ch = dgf_peek(c->s);
            if (ch == -1 || ch == ',' || ch == '\n' || ch == '\r') break;
            if (ch == '"') { cfail(c, dgf_pos(c->s), "quote inside an unquoted field"); return -1; }
            if (ch == 0) { cfail(c, dgf_pos(c->s), "NUL byte (0x00) inside a field"); return -1; }
            if (n == MAXTOK) { cfail(c, at, "field longer than %d characters", MAXTOK); return -1; }
            tok[n++] = (char)ch;
            c->s->p++;
        }
    }
    tok[n] = 0;
    *len = n;
    return field_end(c);
}

/* Counts the rest of the fields on the line (for a message). */
static int count_rest(cp *c) {
    int n = 0;
    for (;;) {
        int ch = dgf_next(c->s);
        if (ch == -1 || ch == '\n') return n;
        if (ch == ',') n++;
    }
}

/* The Image field: side*side integers 0..255 separated by spaces, maybe quoted. Empty -> *missing. */
static int pixels(cp *c, unsigned char *out, int side, bool *missing) {
    int64_t npx = (int64_t)side * side;
    uint64_t at = dgf_pos(c->s);
    bool quoted = dgf_peek(c->s) == '"';
    if (quoted) c->s->p++;
    int64_t k = 0;
    *missing = false;
    for (;;) {
        int ch = dgf_peek(c->s);
        while (ch == ' ') { c->s->p++; ch = dgf_peek(c->s); }
        if (ch < '0' || ch > '9') break;
        uint64_t vat = dgf_pos(c->s);
        int v = 0;
        while (ch >= '0' && ch <= '9') {
            v = v * 10 + (ch - '0');
            if (v > 255) return cfail(c, vat, "pixel %lld is not an integer in 0..255", (long long)k);
            c->s->p++;
            ch = dgf_peek(c->s);
        }
        if (k == npx) return cfail(c, vat, "more than %lld pixels", (long long)npx);
        out[k++] = (unsigned char)v;
        if (ch != ' ' && ch != '"' && ch != ',' && ch != '\n' && ch != '\r' && ch != -1)
            return cfail(c, dgf_pos(c->s), "pixel %lld is not an integer in 0..255 (character 0x%02x)", (long long)k - 1, ch);
    }
    int ch = dgf_peek(c->s);
    if (quoted) {
        if (ch != '"') return cfail(c, dgf_pos(c->s), ch == -1 || ch == '\n' || ch == '\r' ? "unterminated quoted field" :
                                    "pixel %lld is not an integer in 0..255 (character 0x%02x)", (long long)k, ch);
        c->s->p++;
        ch = dgf_peek(c->s);
    }
    if (ch != ',' && ch != '\n' && ch != '\r' && ch != -1)
        return cfail(c, dgf_pos(c->s), "pixel %lld is not an integer in 0..255 (character 0x%02x)", (long long)k, ch);
    if (k == 0) { *missing = true; return 0; }
    if (k != npx) return cfail(c, at, "the image has %lld pixels, expected %lld (%dx%d)", (long long)k, (long long)npx, side, side);
    return 0;
}

/* ---- the kept rows ---- */
typedef struct vec { unsigned char *p; size_t n, cap; } vec;
typedef struct keep {
    vec pix, lab;         /* pixels and (training.csv) keypoints of the complete rows */
    int64_t kept;         /* complete rows seen */
    uint64_t budget;      /* first pass: the most bytes held before the file is checked */
    bool dropped;         /* first pass, past the budget: counting only */
    bool exact;           /* second pass: sized for the counted rows; growing means the file changed */
} keep;

static void keep_free(keep *k) {
    free(k->pix.p);
    free(k->lab.p);
    memset(&k->pix, 0, sizeof k->pix);
    memset(&k->lab, 0, sizeof k->lab);
}

/* Room for `more` bytes in v: 0, DG_ENOMEM, or DG_EFORMAT (second pass: more rows than counted).
 * Past the budget the first pass drops what it holds (k->dropped) and returns 0. */
static int keep_grow(keep *k, vec *v, size_t more) {
    if (v->n + more <= v->cap) return 0;
    if (k->exact) return DG_EFORMAT;
    size_t nc = v->cap ? v->cap : 4096;
    while (nc < v->n + more) nc *= 2;
    vec *other = v == &k->pix ? &k->lab : &k->pix;
    /* the last step stops at the budget instead of doubling past it */
    if ((uint64_t)nc + other->cap > k->budget && (uint64_t)(v->n + more) + other->cap <= k->budget)
        nc = (size_t)(k->budget - other->cap);
    if ((uint64_t)nc + other->cap > k->budget) {
        keep_free(k);
        k->dropped = true;
        return 0;
    }
    unsigned char *b = realloc(v->p, nc);
    if (!b) return DG_ENOMEM;
    v->p = b;
    v->cap = nc;
    return 0;
}

static int keep_row(keep *k, const unsigned char *row, size_t npx, const float *vals, bool has_labels) {
    k->kept++;
    if (k->dropped) return 0;
    size_t lb = has_labels ? sizeof(float) * NKP : 0;
    int rc = keep_grow(k, &k->pix, npx);
    if (!rc && !k->dropped && lb) rc = keep_grow(k, &k->lab, lb);
    if (rc || k->dropped) return rc;
    memcpy(k->pix.p + k->pix.n, row, npx);
    k->pix.n += npx;
    if (lb) { memcpy(k->lab.p + k->lab.n, vals, lb); k->lab.n += lb; }
    return 0;
}

/* One pass over the whole file: the header, then every row, complete ones into k. */
static int parse_all(dgf_src *s, int side, unsigned char *row, keep *k, bool *has_labels_out) {
    cp c = { .s = s, .line = 1, .col = -1 };
    int64_t npx = (int64_t)side * side;
    int rc = 0;
    bool has_labels = false;

    /* header */
    if (!rc) {
        if (dgf_peek(s) == -1) rc = s->io_error ? DG_EIO : cfail(&c, 0, "empty file, expected a header");
        /* a UTF-8 byte order mark (spreadsheet exports) is skipped, as pandas does */
        if (!rc && s->end - s->p >= 3 && memcmp(s->p, "\xef\xbb\xbf", 3) == 0) s->p += 3;
        int more = 1;
        while (!rc && more) {
            char tok[MAXTOK + 1];
            int n;
            uint64_t at = dgf_pos(s);
            if (c.ncols == NKP + 1) {
                rc = cfail(&c, at, "the header has more than %d columns (30 keypoint columns and Image, or ImageId,Image)", NKP + 1);
                break;
            }
            more = token(&c, tok, &n);
            if (more < 0) { rc = DG_EFORMAT; break; }
            memcpy(c.names[c.ncols++], tok, (size_t)n + 1);
        }
    }
    if (!rc) {
        if (c.ncols == 2 && strcmp(c.names[0], "ImageId") == 0 && strcmp(c.names[1], "Image") == 0) {
            has_labels = false;
        } else if (c.ncols == NKP + 1 && strcmp(c.names[NKP], "Image") == 0) {
            has_labels = true;
            for (int k = 0; k < NKP && !rc; k++)
                if (strcmp(c.names[k], kaggle_cols[k]) != 0)
                    rc = cfail(&c, 0, "header column %d is '%s', Kaggle's layout has '%s' there", k + 1,
                               printable(c.names[k], (char[MAXTOK + 1]){0}, MAXTOK + 1), kaggle_cols[k]);
        } else {
            rc = cfail(&c, 0, "the header has %d columns ending in '%s'; expected the 30 keypoint columns and Image "
                       "(training.csv) or ImageId,Image (test.csv)", c.ncols,
                       printable(c.names[c.ncols - 1], (char[MAXTOK + 1]){0}, MAXTOK + 1));
        }
    }

    /* rows */
    float vals[NKP];
    while (!rc) {
        c.line++;
        c.col = -1;
        int ch = dgf_peek(s);
        if (ch == -1) break;
        if (ch == '\n') { s->p++; continue; }
        if (ch == '\r') {
            uint64_t at = dgf_pos(s);
            s->p++;
            if (dgf_peek(s) == '\n') { s->p++; continue; }
            rc = cfail(&c, at, "carriage return not followed by a line feed");
            break;
        }
        uint64_t row_at = dgf_pos(s);
        bool missing = false, image_missing = false;
        int nlab = has_labels ? NKP : 1;   /* test.csv: ImageId */
        for (int k = 0; k < nlab && !rc; k++) {
            c.col = k;
            char tok[MAXTOK + 1];
            int n;
            uint64_t at = dgf_pos(s);
            int more = token(&c, tok, &n);
            if (more < 0) { rc = DG_EFORMAT; break; }
            if (!more) { c.col = -1; rc = cfail(&c, at, "the row has %d columns, the header has %d", k + 1, c.ncols); break; }
            if (n == 0) { missing = true; continue; }
            double v;
            if (dgf_parse_double(tok, &v)) {
                rc = cfail(&c, at, "'%s' is not a number", printable(tok, (char[MAXTOK + 1]){0}, MAXTOK + 1));
                break;
            }
            /* checked after the cast: a finite double such as 1e300 is +inf as a float */
            float fv = (float)v;
            if (!isfinite(fv)) {
                rc = cfail(&c, at, "'%s' does not fit a float32 keypoint (it would be %s)", printable(tok, (char[MAXTOK + 1]){0}, MAXTOK + 1),
                           fv > 0 ? "+inf" : "-inf");
                break;
            }
            if (has_labels) vals[k] = fv;
        }
        if (rc) break;
        c.col = c.ncols - 1;
        rc = pixels(&c, row, side, &image_missing);
        if (rc) break;
        uint64_t at = dgf_pos(s);
        int more = field_end(&c);
        if (more < 0) { rc = DG_EFORMAT; break; }
        if (more) {
            c.col = -1;
            rc = cfail(&c, at, "the row has %d columns, the header has %d", c.ncols + 1 + count_rest(&c), c.ncols);
            break;
        }
        if (missing || image_missing) continue;   /* dropna(how="any") */
        int kr = keep_row(k, row, (size_t)npx, vals, has_labels);
        if (kr == DG_ENOMEM) {
            DG_ERR(DG_ENOMEM, "face_keypoints: out of memory");
            rc = DG_ENOMEM;
        } else if (kr) {
            c.col = -1;
            rc = cfail(&c, row_at, "the file changed while it was read (more complete rows than its first reading had)");
        }
    }
    if (!rc && s->io_error) rc = DG_EIO;
    *has_labels_out = has_labels;
    return rc;
}

dg_dataset *dgf_face_csv_parse(dgf_src *s, int side) {
    int64_t npx = (int64_t)side * side;
    unsigned char *row = malloc((size_t)npx);
    if (!row) { DG_ERR(DG_ENOMEM, "face_keypoints: out of memory"); return NULL; }
    keep k = { .budget = s->keep_budget };
    bool has_labels = false;
    int rc = parse_all(s, side, row, &k, &has_labels);
    if (!rc && k.dropped) {
        /* valid, but the rows outgrew the budget while unchecked: again, keeping exactly what was counted */
        int64_t kept = k.kept;
        size_t lb = has_labels ? sizeof(float) * NKP : 0;
        rc = dgf_src_rewind(s);
        if (!rc) {
            k = (keep){ .exact = true, .budget = UINT64_MAX };
            k.pix.cap = (size_t)kept * (size_t)npx;
            k.lab.cap = (size_t)kept * lb;
            k.pix.p = k.pix.cap ? malloc(k.pix.cap) : NULL;
            k.lab.p = k.lab.cap ? malloc(k.lab.cap) : NULL;
            if ((k.pix.cap && !k.pix.p) || (k.lab.cap && !k.lab.p)) {
                DG_ERR(DG_ENOMEM, "face_keypoints '%s': out of memory for %lld rows", s->name, (long long)kept);
                rc = DG_ENOMEM;
            }
        }
        if (!rc) rc = parse_all(s, side, row, &k, &has_labels);
        if (!rc && k.kept != kept) {
            DG_ERR(DG_EFORMAT, "face_keypoints '%s': the file changed while it was read (%lld complete rows, %lld before)",
                   s->name, (long long)k.kept, (long long)kept);
            rc = DG_EFORMAT;
        }
    }
    free(row);
    face_ds *d = rc ? NULL : calloc(1, sizeof *d);
    size_t nl = strlen(s->name) + 24;
    char *name = d ? malloc(nl) : NULL;
    if (!name) {
        if (!rc) DG_ERR(DG_ENOMEM, "face_keypoints: out of memory");
        free(d);
        keep_free(&k);
        return NULL;
    }
    snprintf(name, nl, "face_keypoints:%s", s->name);
    d->name = name;
    d->n = k.kept;
    d->side = side;
    d->has_labels = has_labels;
    d->pixels = k.pix.p ? k.pix.p : malloc(1);
    d->labels = (float *)(void *)k.lab.p;
    if (!d->pixels) { face_free(d); DG_ERR(DG_ENOMEM, "face_keypoints: out of memory"); return NULL; }
    return dgf_dataset_wrap(&face_vt, d, d->name);
}

dg_dataset *dg_face_keypoints_dataset(const char *csv_path) {
    DG_CHECK(csv_path, "face_keypoints_dataset: path is NULL");
    dgf_src s;
    if (dgf_src_open_file(&s, csv_path, "face_keypoints")) return NULL;
    dg_dataset *ds = dgf_face_csv_parse(&s, 96);
    dgf_src_close(&s);
    return ds;
}

dg_dataset *dg_face_keypoints_dataset_buffer(const void *buf, size_t len, const char *name) {
    DG_CHECK(buf || !len, "face_keypoints_dataset_buffer: buffer is NULL");
    if (!name) name = "(buffer)";
    static const unsigned char empty[1];
    /* gzip is inflated window by window as the parser reads, never whole */
    dgf_src s;
    if (dgf_src_open_buffer(&s, buf ? buf : empty, len, "face_keypoints", name)) return NULL;
    dg_dataset *ds = dgf_face_csv_parse(&s, 96);
    dgf_src_close(&s);
    return ds;
}
