/* data/formats/image_list.c — an image list (Paddle's collective FleetAPI guide's ImageNet train.txt / val.txt): one
 * `relative/path.jpeg label` per line, paths relative to a root folder.
 *
 * The list is parsed and checked whole when the dataset is made (every non-empty line is a path,
 * whitespace, and a non-negative integer label; the label is the last field, so paths may hold
 * spaces; \r\n endings are accepted). Images are read and decoded lazily in get(): a missing,
 * unreadable or corrupt image is an error naming the image file and the list line, never a crash.
 * get() reads only the immutable list, so it is thread-safe. */
#include "formats.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PATH 4096
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
    size_t len = (size_t)st.st_size, got = 0;
    unsigned char *buf = malloc(len ? len : 1);
    while (buf && got < len) {
        ssize_t k = read(fd, buf + got, len - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (!buf || got != len) {
        free(buf);
        return dg_dataset_error("image_list '%s' line %lld: read %zu of %zu bytes of image '%s'", d->list,
                                (long long)d->lines[i], got, len, path);
    }
    char err[512];
    dg_tensor *img = dgf_decode_image(buf, len, err, sizeof err);
    free(buf);
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

static dg_dataset *il_parse(const char *root, const unsigned char *b, size_t len, const char *list, bool gz) {
    il_ds *d = calloc(1, sizeof *d);
    if (!d) { DG_ERR(DG_ENOMEM, "image_list: out of memory"); return NULL; }
    d->root = dgf_strdup(root);
    d->list = dgf_strdup(list);
    size_t nl = strlen(list) + 24;
    d->name = malloc(nl);
    /* at most one entry per line: count lines for the arrays */
    size_t lines = 1;
    for (size_t k = 0; k < len; k++) lines += b[k] == '\n';
    d->path_at = malloc(sizeof(size_t) * lines);
    d->labels = malloc(sizeof(int64_t) * lines);
    d->lines = malloc(sizeof(int64_t) * lines);
    d->blob = malloc(len + 1);
    if (!d->root || !d->list || !d->name || !d->path_at || !d->labels || !d->lines || !d->blob) {
        il_free(d);
        DG_ERR(DG_ENOMEM, "image_list: out of memory");
        return NULL;
    }
    snprintf(d->name, nl, "image_list:%s", list);
    const char *inf = gz ? "uncompressed " : "";
    size_t blob_n = 0, pos = len >= 3 && memcmp(b, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;   /* skip a UTF-8 BOM */
    int64_t line = 0;
    while (pos < len) {
        line++;
        size_t start = pos, end = pos;
        while (end < len && b[end] != '\n') end++;
        pos = end + (end < len);
        size_t e = end;
        while (e > start && is_ws(b[e - 1])) e--;           /* trailing whitespace and \r */
        size_t s = start;
        while (s < e && is_ws(b[s])) s++;
        if (s == e) continue;                                /* empty line */
        size_t lab = e;
        while (lab > s && !is_ws(b[lab - 1])) lab--;         /* the last field is the label */
        size_t pe = lab;
        while (pe > s && is_ws(b[pe - 1])) pe--;
        if (pe == s) {
            DG_ERR(DG_EFORMAT, "image_list '%s': line %lld (%sbyte %zu): expected 'path label', found one field", list,
                   (long long)line, inf, s);
            il_free(d);
            return NULL;
        }
        int64_t v = 0;
        for (size_t k = lab; k < e; k++) {
            if (b[k] < '0' || b[k] > '9' || v > (INT64_MAX - 9) / 10) {
                char tok[33];
                size_t tn = 0;
                for (size_t q = lab; q < e && tn < 32; q++) tok[tn++] = b[q] >= 0x20 && b[q] < 0x7f ? (char)b[q] : '?';
                tok[tn] = 0;
                DG_ERR(DG_EFORMAT, "image_list '%s': line %lld (%sbyte %zu): the label '%s' is not a non-negative integer",
                       list, (long long)line, inf, lab, tok);
                il_free(d);
                return NULL;
            }
            v = v * 10 + (b[k] - '0');
        }
        for (size_t k = s; k < pe; k++)
            if (b[k] == 0 || (b[k] < 0x20 && b[k] != '\t')) {
                DG_ERR(DG_EFORMAT, "image_list '%s': line %lld (%sbyte %zu): control character 0x%02x in the path", list,
                       (long long)line, inf, k, b[k]);
                il_free(d);
                return NULL;
            }
        if (pe - s >= MAX_PATH) {
            DG_ERR(DG_EFORMAT, "image_list '%s': line %lld (%sbyte %zu): path longer than %d bytes", list, (long long)line,
                   inf, s, MAX_PATH - 1);
            il_free(d);
            return NULL;
        }
        d->path_at[d->n] = blob_n;
        memcpy(d->blob + blob_n, b + s, pe - s);
        blob_n += pe - s;
        d->blob[blob_n++] = 0;
        d->labels[d->n] = v;
        d->lines[d->n] = line;
        d->n++;
    }
    return dgf_dataset_wrap(&il_vt, d, d->name);
}

dg_dataset *dg_image_list_dataset(const char *root, const char *list_path) {
    DG_CHECK(root && list_path, "image_list_dataset: %s is NULL", root ? "list_path" : "root");
    unsigned char *b;
    size_t len;
    bool gz;
    if (dgf_read_file(list_path, "image_list", &b, &len, &gz)) return NULL;
    dg_dataset *ds = il_parse(root, b, len, list_path, gz);
    free(b);
    return ds;
}

dg_dataset *dg_image_list_dataset_buffer(const char *root, const void *list, size_t len, const char *name) {
    DG_CHECK(root, "image_list_dataset_buffer: root is NULL");
    DG_CHECK(list || !len, "image_list_dataset_buffer: buffer is NULL");
    if (!name) name = "(buffer)";
    static const unsigned char empty[1];
    const unsigned char *b;
    size_t n;
    bool owned;
    if (dgf_maybe_gunzip(list ? list : empty, len, DGF_MAX_INFLATE, "image_list", name, &b, &n, &owned)) return NULL;
    dg_dataset *ds = il_parse(root, b, n, name, owned);
    if (owned) free((void *)b);
    return ds;
}
