/* data/formats/image_list.c — an image list (Paddle's collective FleetAPI guide's ImageNet train.txt / val.txt): one
 * `relative/path.jpeg label` per line, paths relative to a root folder.
 *
 * The list is parsed and checked whole when the dataset is made (every non-empty line is a path,
 * whitespace, and a non-negative integer label; the label is the last field, so paths may hold
 * spaces; \r\n endings are accepted). Images are read and decoded lazily in get(): a missing,
 * unreadable or corrupt image is an error naming the image file and the list line, never a crash.
 * get() reads only the immutable list, so it is thread-safe.
 *
 * The list is read as a stream (plain or gzip, from a file or memory), one line at a time: a line
 * is at most MAX_LINE bytes, and entries are kept only up to the source's keep budget
 * (DGF_KEEP_UNVALIDATED) while the list is unchecked; past it the parser drops them and counts,
 * and a valid list is read a second time keeping exactly the counted entries. An image file is
 * checked from its first bytes (JPEG or PNG magic) and decoded as it is read, never held whole. */
#include "formats.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PATH 4096
/* a path, a label and the whitespace around them */
#define MAX_LINE (2 * MAX_PATH)
#define MAX_IMAGE_FILE ((size_t)1 << 30)

typedef struct il_ds {
    int64_t n;
    char *root;
    char *list;          /* list file name, for messages */
    char *blob;          /* the paths, NUL-separated */
    size_t *path_at;     /* offset of each path in blob */
    int64_t *labels;
    int64_t *lines;      /* 1-based list line of each entry */
    char *name;
} il_ds;

static int64_t il_len(void *self) { return ((il_ds *)self)->n; }

static int il_get(void *self, int64_t i, uint64_t seed, dg_sample *out) {
    il_ds *d = self;
    if (i < 0 || i >= d->n) return dg_dataset_error("%s: index %lld out of range [0, %lld)", d->name, (long long)i, (long long)d->n);
    const char *rel = d->blob + d->path_at[i];
    char path[2 * MAX_PATH + 2];
    if (rel[0] == '/') snprintf(path, sizeof path, "%s", rel);
    else snprintf(path, sizeof path, "%s/%s", d->root, rel);
    char eb[128];
    /* O_NONBLOCK: a FIFO named in a list must not hang the loader (it fails the regular-file check) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        const char *why = strerror_r(errno, eb, sizeof eb);
        return dg_dataset_error("image_list '%s' line %lld: cannot open image '%s': %s", d->list, (long long)d->lines[i], path, why);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > MAX_IMAGE_FILE) {
        close(fd);
        return dg_dataset_error("image_list '%s' line %lld: image '%s' is not a regular file of at most 1 GiB", d->list,
                                (long long)d->lines[i], path);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return dg_dataset_error("image_list '%s' line %lld: cannot read image '%s': out of memory", d->list, (long long)d->lines[i],
                                path);
    }
    /* decoded from the file as it is read: its magic is checked from the first bytes, and no more of
     * it is read than the image its header declares */
    char err[512];
    dg_tensor *img = dgf_decode_image_file(f, err, sizeof err);
    fclose(f);
    if (!img) return dg_dataset_error("image_list '%s' line %lld: image '%s': %s", d->list, (long long)d->lines[i], path, err);
    dg_tensor *lab = dgf_label_i64(d->labels[i]);
    if (!lab) { dg_tensor_free(img); return dg_last_status() ? dg_last_status() : DG_ENOMEM; }
    out->n = 2;
    out->t[0] = img;
    out->t[1] = lab;
    return 0;
}

static void il_free(void *self) {
    il_ds *d = self;
    if (!d) return;
    free(d->root);
    free(d->list);
    free(d->blob);
    free(d->path_at);
    free(d->labels);
    free(d->lines);
    free(d->name);
    free(d);
}

static const dg_dataset_vtable il_vt = { il_len, il_get, il_free };

static bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* ---- the kept entries ---- */
typedef struct keep {
    char *blob;                 /* the paths, NUL-separated */
    size_t blob_n, blob_cap;
    size_t *path_at;
    int64_t *labels, *lines;
    int64_t n, cap;
    uint64_t budget;            /* first pass: the most bytes held before the list is checked */
    bool dropped;               /* first pass, past the budget: counting only */
    bool exact;                 /* second pass: sized for the counted entries; growing means the list changed */
} keep;

#define ENTRY_BYTES (sizeof(size_t) + 2 * sizeof(int64_t))

static void keep_free(keep *k) {
    free(k->blob);
    free(k->path_at);
    free(k->labels);
    free(k->lines);
    k->blob = NULL;
    k->path_at = NULL;
    k->labels = k->lines = NULL;
    k->blob_cap = 0;
    k->cap = 0;
}

static int keep_alloc(keep *k, size_t blob_cap, int64_t cap) {
    if (blob_cap != k->blob_cap) {
        char *b = realloc(k->blob, blob_cap ? blob_cap : 1);
        if (!b) return DG_ENOMEM;
        k->blob = b;
        k->blob_cap = blob_cap;
    }
    if (cap != k->cap) {
        size_t *pa = realloc(k->path_at, sizeof(size_t) * (size_t)(cap ? cap : 1));
        if (pa) k->path_at = pa;
        int64_t *lb = pa ? realloc(k->labels, sizeof(int64_t) * (size_t)(cap ? cap : 1)) : NULL;
        if (lb) k->labels = lb;
        int64_t *ln = lb ? realloc(k->lines, sizeof(int64_t) * (size_t)(cap ? cap : 1)) : NULL;
        if (!ln) return DG_ENOMEM;
        k->lines = ln;
        k->cap = cap;
    }
    return 0;
}

/* One entry: 0, DG_ENOMEM, or DG_EFORMAT (second pass: more than the first pass counted). Past the
 * budget the first pass drops what it holds and counts from then on. */
static int keep_entry(keep *k, const unsigned char *path, size_t plen, int64_t label, int64_t line) {
    uint64_t need_b = k->blob_n + plen + 1, need_c = (uint64_t)k->n + 1;
    if (!k->dropped && (need_b > k->blob_cap || need_c > (uint64_t)k->cap)) {
        if (k->exact) return DG_EFORMAT;
        uint64_t nb = k->blob_cap, nc = (uint64_t)k->cap;
        if (need_b > nb) { nb = nb ? nb : 4096; while (nb < need_b) nb *= 2; }
        if (need_c > nc) nc = nc ? nc * 2 : 256;
        if (nb + nc * ENTRY_BYTES > k->budget) {
            /* the last step stops at the budget instead of doubling past it: what is needed, and
             * the rest of the budget shared between the arrays that grow */
            uint64_t mb = need_b > k->blob_cap ? need_b : k->blob_cap, mc = need_c > (uint64_t)k->cap ? need_c : (uint64_t)k->cap;
            if (mb + mc * ENTRY_BYTES <= k->budget) {
                uint64_t spare = k->budget - mb - mc * ENTRY_BYTES;
                if (nb > mb && nc > mc) spare /= 2;
                if (nb > mb) mb += nb - mb < spare ? nb - mb : spare;
                if (nc > mc) mc += nc - mc < spare / ENTRY_BYTES ? nc - mc : spare / ENTRY_BYTES;
            }
            nb = mb;
            nc = mc;
        }
        if (nb + nc * ENTRY_BYTES > k->budget) {
            keep_free(k);
            k->dropped = true;
        } else if (keep_alloc(k, (size_t)nb, (int64_t)nc)) {
            return DG_ENOMEM;
        }
    }
    if (!k->dropped) {
        k->path_at[k->n] = k->blob_n;
        memcpy(k->blob + k->blob_n, path, plen);
        k->blob[k->blob_n + plen] = 0;
        k->labels[k->n] = label;
        k->lines[k->n] = line;
    }
    k->blob_n += plen + 1;
    k->n++;
    return 0;
}

/* One pass over the whole list into k; 0 or an error naming the list, line and byte. */
static int il_parse_all(dgf_src *s, unsigned char *b, keep *k) {
    const char *list = s->name, *inf = s->is_gz ? "uncompressed " : "";
    int64_t line = 0;
    /* a UTF-8 byte order mark is skipped (looked for in the first window, as face_csv does) */
    if (dgf_peek(s) == 0xef && s->end - s->p >= 3 && memcmp(s->p, "\xef\xbb\xbf", 3) == 0) s->p += 3;
    while (dgf_peek(s) != -1) {
        /* a line into b, never more than MAX_LINE bytes of it */
        line++;
        uint64_t at = dgf_pos(s);
        size_t len = 0;
        int c;
        while ((c = dgf_next(s)) != -1 && c != '\n') {
            if (len == MAX_LINE) {
                DG_ERR(DG_EFORMAT, "image_list '%s': line %lld (%sbyte %llu): longer than %d bytes (a path is at most %d)", list,
                       (long long)line, inf, (unsigned long long)at, MAX_LINE, MAX_PATH - 1);
                return DG_EFORMAT;
            }
            b[len++] = (unsigned char)c;
        }
        if (s->io_error) return DG_EIO;
        size_t e = len;
        while (e > 0 && is_ws(b[e - 1])) e--;           /* trailing whitespace and \r */
        size_t st = 0;
        while (st < e && is_ws(b[st])) st++;
        if (st == e) continue;                            /* empty line */
        size_t lab = e;
        while (lab > st && !is_ws(b[lab - 1])) lab--;     /* the last field is the label */
        size_t pe = lab;
        while (pe > st && is_ws(b[pe - 1])) pe--;
        if (pe == st) {
            DG_ERR(DG_EFORMAT, "image_list '%s': line %lld (%sbyte %llu): expected 'path label', found one field", list,
                   (long long)line, inf, (unsigned long long)(at + st));
            return DG_EFORMAT;
        }
        int64_t v = 0;
        for (size_t q = lab; q < e; q++) {
            if (b[q] < '0' || b[q] > '9' || v > (INT64_MAX - 9) / 10) {
                char tok[33];
                size_t tn = 0;
                for (size_t r = lab; r < e && tn < 32; r++) tok[tn++] = b[r] >= 0x20 && b[r] < 0x7f ? (char)b[r] : '?';
                tok[tn] = 0;
                DG_ERR(DG_EFORMAT, "image_list '%s': line %lld (%sbyte %llu): the label '%s' is not a non-negative integer", list,
                       (long long)line, inf, (unsigned long long)(at + lab), tok);
                return DG_EFORMAT;
            }
            v = v * 10 + (b[q] - '0');
        }
        for (size_t q = st; q < pe; q++)
            if (b[q] == 0 || (b[q] < 0x20 && b[q] != '\t')) {
                DG_ERR(DG_EFORMAT, "image_list '%s': line %lld (%sbyte %llu): control character 0x%02x in the path", list,
                       (long long)line, inf, (unsigned long long)(at + q), b[q]);
                return DG_EFORMAT;
            }
        if (pe - st >= MAX_PATH) {
            DG_ERR(DG_EFORMAT, "image_list '%s': line %lld (%sbyte %llu): path longer than %d bytes", list, (long long)line,
                   inf, (unsigned long long)(at + st), MAX_PATH - 1);
            return DG_EFORMAT;
        }
        int rc = keep_entry(k, b + st, pe - st, v, line);
        if (rc == DG_ENOMEM) { DG_ERR(DG_ENOMEM, "image_list '%s': out of memory at line %lld", list, (long long)line); return rc; }
        if (rc) {
            DG_ERR(DG_EFORMAT, "image_list '%s': line %lld (%sbyte %llu): the list changed while it was read (more entries than "
                   "its first reading had)", list, (long long)line, inf, (unsigned long long)at);
            return rc;
        }
    }
    return s->io_error ? DG_EIO : 0;
}

dg_dataset *dgf_image_list_parse(dgf_src *s, const char *root) {
    unsigned char *b = malloc(MAX_LINE);
    if (!b) { DG_ERR(DG_ENOMEM, "image_list: out of memory"); return NULL; }
    keep k = { .budget = s->keep_budget };
    int rc = il_parse_all(s, b, &k);
    if (!rc && k.dropped) {
        /* valid, but the entries outgrew the budget while unchecked: again, keeping exactly what was counted */
        int64_t n = k.n;
        size_t blob_n = k.blob_n;
        rc = dgf_src_rewind(s);
        if (!rc) {
            k = (keep){ .exact = true, .budget = UINT64_MAX };
            if ((rc = keep_alloc(&k, blob_n, n)))
                DG_ERR(DG_ENOMEM, "image_list '%s': out of memory for %lld entries", s->name, (long long)n);
        }
        if (!rc) rc = il_parse_all(s, b, &k);
        if (!rc && (k.n != n || k.blob_n != blob_n)) {
            DG_ERR(DG_EFORMAT, "image_list '%s': the list changed while it was read (%lld entries, %lld before)", s->name,
                   (long long)k.n, (long long)n);
            rc = DG_EFORMAT;
        }
    }
    free(b);
    il_ds *d = rc ? NULL : calloc(1, sizeof *d);
    if (!d) {
        if (!rc) DG_ERR(DG_ENOMEM, "image_list: out of memory");
        keep_free(&k);
        return NULL;
    }
    /* the arrays, shrunk to what they hold, become the dataset's */
    if (keep_alloc(&k, k.blob_n, k.n)) { keep_free(&k); free(d); DG_ERR(DG_ENOMEM, "image_list: out of memory"); return NULL; }
    d->n = k.n;
    d->blob = k.blob;
    d->path_at = k.path_at;
    d->labels = k.labels;
    d->lines = k.lines;
    d->root = dgf_strdup(root);
    d->list = dgf_strdup(s->name);
    size_t nl = strlen(s->name) + 24;
    d->name = malloc(nl);
    if (!d->root || !d->list || !d->name) {
        il_free(d);
        DG_ERR(DG_ENOMEM, "image_list: out of memory");
        return NULL;
    }
    snprintf(d->name, nl, "image_list:%s", s->name);
    return dgf_dataset_wrap(&il_vt, d, d->name);
}

dg_dataset *dg_image_list_dataset(const char *root, const char *list_path) {
    DG_CHECK(root && list_path, "image_list_dataset: %s is NULL", root ? "list_path" : "root");
    dgf_src s;
    if (dgf_src_open_file(&s, list_path, "image_list")) return NULL;
    dg_dataset *ds = dgf_image_list_parse(&s, root);
    dgf_src_close(&s);
    return ds;
}

dg_dataset *dg_image_list_dataset_buffer(const char *root, const void *list, size_t len, const char *name) {
    DG_CHECK(root, "image_list_dataset_buffer: root is NULL");
    DG_CHECK(list || !len, "image_list_dataset_buffer: buffer is NULL");
    if (!name) name = "(buffer)";
    static const unsigned char empty[1];
    /* gzip is inflated window by window as the parser reads, never whole */
    dgf_src s;
    if (dgf_src_open_buffer(&s, list ? list : empty, len, "image_list", name)) return NULL;
    dg_dataset *ds = dgf_image_list_parse(&s, root);
    dgf_src_close(&s);
    return ds;
}
