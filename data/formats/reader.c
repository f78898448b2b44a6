/* data/formats/reader.c — byte access shared by the dataset parsers: whole-file reads with
 * gzip inflated in memory (IDX, CIFAR, image lists), a windowed source over a file read through
 * zlib's gzread (plain or gzip, for the streaming JSON and CSV parsers) or over a memory buffer,
 * and a locale-independent decimal number parser. */
#include "formats.h"
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>

bool dgf_is_gzip(const unsigned char *buf, size_t len) { return len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b; }

int dgf_maybe_gunzip(const unsigned char *buf, size_t len, size_t max, const char *what, const char *name,
                     const unsigned char **out, size_t *out_len, bool *owned) {
    *owned = false;
    if (!dgf_is_gzip(buf, len)) { *out = buf; *out_len = len; return 0; }
    /* the trailer's ISIZE (size mod 2^32) is a good first guess for the output size */
    size_t cap = len >= 18 ? (size_t)buf[len - 4] | (size_t)buf[len - 3] << 8 | (size_t)buf[len - 2] << 16 | (size_t)buf[len - 1] << 24 : 0;
    if (cap / 1032 > len) cap = len * 1032;   /* deflate cannot expand more than ~1032:1 */
    if (cap < 4096) cap = 4096;
    if (cap > max) cap = max;
    unsigned char *o = malloc(cap);
    if (!o) { DG_ERR(DG_ENOMEM, "%s '%s': out of memory inflating", what, name); return DG_ENOMEM; }
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) { free(o); DG_ERR(DG_ENOMEM, "%s '%s': zlib init failed", what, name); return DG_ENOMEM; }
    size_t n = 0, in_pos = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= max) {
                DG_ERR(DG_EFORMAT, "%s '%s': gzip data inflates past the %zu-byte limit (at compressed byte %zu)", what, name, max, in_pos);
                rc = DG_EFORMAT;
                break;
            }
            size_t nc = cap > max / 2 ? max : cap * 2;
            unsigned char *b = realloc(o, nc);
            if (!b) { DG_ERR(DG_ENOMEM, "%s '%s': out of memory inflating (%zu bytes)", what, name, nc); rc = DG_ENOMEM; break; }
            o = b;
            cap = nc;
        }
        size_t in_left = len - in_pos, out_left = cap - n;
        z.next_in = (unsigned char *)buf + in_pos;
        z.avail_in = in_left > UINT32_MAX ? UINT32_MAX : (uInt)in_left;
        z.next_out = o + n;
        z.avail_out = out_left > UINT32_MAX ? UINT32_MAX : (uInt)out_left;
        uInt ai = z.avail_in, ao = z.avail_out;
        int zr = inflate(&z, Z_NO_FLUSH);
        in_pos += ai - z.avail_in;
        n += ao - z.avail_out;
        if (zr == Z_STREAM_END) {
            if (in_pos == len) break;
            /* another gzip member may follow (concatenated .gz files) */
            if (!dgf_is_gzip(buf + in_pos, len - in_pos)) {
                DG_ERR(DG_EFORMAT, "%s '%s': %zu trailing bytes after the gzip stream at byte %zu", what, name, len - in_pos, in_pos);
                rc = DG_EFORMAT;
                break;
            }
            inflateReset(&z);
            continue;
        }
        if (zr == Z_OK) continue;
        if (zr == Z_BUF_ERROR && z.avail_out != 0) {
            DG_ERR(DG_EFORMAT, "%s '%s': gzip data truncated at byte %zu", what, name, in_pos);
            rc = DG_EFORMAT;
            break;
        }
        if (zr == Z_BUF_ERROR) continue;   /* output full: grow */
        DG_ERR(DG_EFORMAT, "%s '%s': corrupt gzip data near byte %zu: %s", what, name, in_pos, z.msg ? z.msg : "inflate error");
        rc = zr == Z_MEM_ERROR ? DG_ENOMEM : DG_EFORMAT;
        break;
    }
    inflateEnd(&z);
    if (rc) { free(o); return rc; }
    *out = o;
    *out_len = n;
    *owned = true;
    return 0;
}

int dgf_read_file(const char *path, const char *what, unsigned char **buf, size_t *len, bool *gz) {
    *buf = NULL;
    *len = 0;
    if (gz) *gz = false;
    if (!path) { DG_ERR(DG_EINVAL, "%s: path is NULL", what); return DG_EINVAL; }
    FILE *f = fopen(path, "rb");
    if (!f) { DG_ERR(DG_EIO, "%s: cannot open '%s': %s", what, path, strerror(errno)); return DG_EIO; }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        DG_ERR(DG_EIO, "%s: '%s' is not a regular file", what, path);
        return DG_EIO;
    }
    size_t n = (size_t)st.st_size;
    unsigned char *b = malloc(n ? n : 1);
    if (!b) { fclose(f); DG_ERR(DG_ENOMEM, "%s: cannot hold '%s' (%zu bytes) in memory", what, path, n); return DG_ENOMEM; }
    size_t got = fread(b, 1, n, f);
    int ferr = ferror(f);
    fclose(f);
    if (got != n || ferr) { free(b); DG_ERR(DG_EIO, "%s: read %zu of %zu bytes of '%s'", what, got, n, path); return DG_EIO; }
    const unsigned char *o;
    size_t on;
    bool owned;
    int rc = dgf_maybe_gunzip(b, n, DGF_MAX_INFLATE, what, path, &o, &on, &owned);
    if (rc) { free(b); return rc; }
    if (owned) { free(b); b = (unsigned char *)o; if (gz) *gz = true; }
    *buf = b;
    *len = on;
    return 0;
}

/* ---- windowed source ---- */
#define SRC_CHUNK (256u << 10)

void dgf_src_open_mem(dgf_src *s, const void *buf, size_t len, const char *what, const char *name) {
    memset(s, 0, sizeof *s);
    s->win = s->p = buf;
    s->end = s->p + len;
    s->what = what;
    s->name = name;
}

int dgf_src_open_file(dgf_src *s, const char *path, const char *what) {
    memset(s, 0, sizeof *s);
    s->what = what;
    s->name = path;
    if (!path) { DG_ERR(DG_EINVAL, "%s: path is NULL", what); return DG_EINVAL; }
    FILE *f = fopen(path, "rb");
    if (!f) { DG_ERR(DG_EIO, "%s: cannot open '%s': %s", what, path, strerror(errno)); return DG_EIO; }
    struct stat st;
    int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    unsigned char magic[2] = {0, 0};
    size_t m = fread(magic, 1, 2, f);
    fclose(f);
    if (!regular) { DG_ERR(DG_EIO, "%s: '%s' is not a regular file", what, path); return DG_EIO; }
    s->is_gz = dgf_is_gzip(magic, m);
    s->gz = gzopen(path, "rb");
    s->buf = malloc(SRC_CHUNK);
    if (!s->gz || !s->buf) {
        dgf_src_close(s);
        DG_ERR(DG_EIO, "%s: cannot open '%s': %s", what, path, errno ? strerror(errno) : "out of memory");
        return DG_EIO;
    }
    gzbuffer(s->gz, SRC_CHUNK);
    s->cap = SRC_CHUNK;
    s->win = s->p = s->end = s->buf;
    return 0;
}

void dgf_src_close(dgf_src *s) {
    if (s->gz) gzclose(s->gz);
    free(s->buf);
    s->gz = NULL;
    s->buf = NULL;
}

int dgf_src_fill(dgf_src *s) {
    if (!s->gz || s->io_error) return 0;
    s->base += (uint64_t)(s->end - s->win);
    s->win = s->p = s->end = s->buf;
    int n = gzread(s->gz, s->buf, (unsigned)s->cap);
    int errnum = Z_OK;
    const char *msg = gzerror(s->gz, &errnum);
    if (n < 0 || (n == 0 && errnum != Z_OK && errnum != Z_STREAM_END)) {
        s->io_error = 1;
        DG_ERR(errnum == Z_ERRNO ? DG_EIO : DG_EFORMAT, "%s '%s': %s at %sbyte %llu: %s", s->what, s->name,
               errnum == Z_ERRNO ? "read error" : "corrupt or truncated gzip data", s->is_gz ? "uncompressed " : "",
               (unsigned long long)s->base, errnum == Z_ERRNO ? strerror(errno) : msg);
        return 0;
    }
    s->end = s->buf + n;
    return n > 0;
}

/* ---- numbers ---- */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

int dgf_parse_double(const char *tok, double *out) {
    /* [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)? — no hex, inf or nan */
    const char *c = tok;
    if (*c == '+' || *c == '-') c++;
    int digits = 0;
    while (*c >= '0' && *c <= '9') { c++; digits++; }
    if (*c == '.') { c++; while (*c >= '0' && *c <= '9') { c++; digits++; } }
    if (!digits) return -1;
    if (*c == 'e' || *c == 'E') {
        c++;
        if (*c == '+' || *c == '-') c++;
        if (!(*c >= '0' && *c <= '9')) return -1;
        while (*c >= '0' && *c <= '9') c++;
    }
    if (*c) return -1;
    pthread_once(&c_locale_once, make_c_locale);
    char *e;
    double v = c_locale ? strtod_l(tok, &e, c_locale) : strtod(tok, &e);
    if (*e || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* ---- dataset helpers ---- */
dg_dataset *dgf_dataset_wrap(const dg_dataset_vtable *vt, void *self, const char *name) {
    dg_dataset *ds = dg_dataset_new(vt, self, name);
    if (!ds && vt->free) vt->free(self);
    return ds;
}

dg_tensor *dgf_cpu_tensor(int ndim, const int64_t *shape, dg_dtype dtype) {
    return dg_data_cpu_tensor(shape, ndim, dtype);
}

dg_tensor *dgf_label_i64(int64_t v) {
    dg_tensor *t = dg_empty_on(dg_make_shape(0, NULL), DG_I64, dg_cpu());
    if (t) *(int64_t *)dg_tensor_ptr(t) = v;
    return t;
}

char *dgf_strdup(const char *s) {
    size_t n = strlen(s ? s : "") + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s ? s : "", n);
    return d;
}
