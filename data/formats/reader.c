/* data/formats/reader.c — byte access shared by the dataset parsers: whole-file reads with
 * gzip inflated in memory within a size checked from the first bytes (IDX, CIFAR), a windowed
 * source over a file read through zlib's gzread (plain or gzip) or over a memory buffer (inflated
 * window by window when gzip) that the streaming parsers (JSON, CSV, image lists) read and can
 * rewind for a second pass, and a locale-independent decimal number parser. */
#include "formats.h"
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>

bool dgf_is_gzip(const unsigned char *buf, size_t len) { return len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b; }

/* If buf starts with the gzip magic, inflates it into *out (malloc'd, *owned = true) within max
 * bytes (`why` says where max comes from in the message past it); otherwise *out = buf. */
static int gunzip(const unsigned char *buf, size_t len, size_t max, const char *why, const char *what, const char *name,
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
                DG_ERR(DG_EFORMAT, "%s '%s': gzip data inflates past the %zu-byte limit%s%s%s (at compressed byte %zu)", what, name,
                       max, why ? " (" : "", why ? why : "", why ? ")" : "", in_pos);
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

uint64_t dgf_stream_limit(uint64_t compressed_len) {
    uint64_t l = compressed_len > DGF_MAX_INFLATE / DGF_STREAM_RATIO ? DGF_MAX_INFLATE : compressed_len * DGF_STREAM_RATIO;
    return l < DGF_STREAM_FLOOR ? DGF_STREAM_FLOOR : l;
}

/* gzread until n bytes or the end; -1 after setting an error */
static int64_t gz_read_full(gzFile g, unsigned char *b, size_t n, uint64_t at, const char *what, const char *path) {
    size_t got = 0;
    while (got < n) {
        unsigned k = n - got > (1u << 30) ? 1u << 30 : (unsigned)(n - got);
        int r = gzread(g, b + got, k);
        if (r < 0 || (r == 0 && !gzeof(g))) {
            int errnum = Z_OK;
            const char *msg = gzerror(g, &errnum);
            DG_ERR(errnum == Z_ERRNO ? DG_EIO : DG_EFORMAT, "%s '%s': %s at uncompressed byte %llu: %s", what, path,
                   errnum == Z_ERRNO ? "read error" : "corrupt or truncated gzip data", (unsigned long long)(at + got),
                   errnum == Z_ERRNO ? strerror(errno) : msg);
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    /* a truncated gzip stream ends in an error zlib reports only through gzerror */
    int errnum = Z_OK;
    const char *msg = gzerror(g, &errnum);
    if (errnum != Z_OK && errnum != Z_STREAM_END) {
        DG_ERR(DG_EFORMAT, "%s '%s': corrupt or truncated gzip data at uncompressed byte %llu: %s", what, path,
               (unsigned long long)(at + got), msg);
        return -1;
    }
    return (int64_t)got;
}

/* path's stat and whether it starts as gzip, or an error naming it (NULL, unopenable, not a
 * regular file): the first step of both file readers. */
static int sniff_file(const char *path, const char *what, struct stat *st, bool *is_gz) {
    if (!path) { DG_ERR(DG_EINVAL, "%s: path is NULL", what); return DG_EINVAL; }
    FILE *f = fopen(path, "rb");
    if (!f) { DG_ERR(DG_EIO, "%s: cannot open '%s': %s", what, path, strerror(errno)); return DG_EIO; }
    bool regular = fstat(fileno(f), st) == 0 && S_ISREG(st->st_mode);
    unsigned char magic[2] = {0, 0};
    size_t m = regular ? fread(magic, 1, 2, f) : 0;
    fclose(f);
    if (!regular) { DG_ERR(DG_EIO, "%s: '%s' is not a regular file", what, path); return DG_EIO; }
    *is_gz = dgf_is_gzip(magic, m);
    return 0;
}

int dgf_read_file_head(const char *path, const char *what, size_t head, dgf_head_fn check, void *ctx, const char *declares,
                       unsigned char **buf, size_t *len, bool *gz) {
    *buf = NULL;
    *len = 0;
    if (gz) *gz = false;
    struct stat st;
    bool is_gz;
    int rc = sniff_file(path, what, &st, &is_gz);
    if (rc) return rc;
    /* zlib reads plain files transparently, so one path serves both */
    gzFile g = gzopen(path, "rb");
    if (!g) { DG_ERR(DG_EIO, "%s: cannot open '%s': %s", what, path, errno ? strerror(errno) : "out of memory"); return DG_EIO; }
    gzbuffer(g, 1u << 17);
    unsigned char hb[256];
    if (head > sizeof hb) head = sizeof hb;
    int64_t hn = gz_read_full(g, hb, head, 0, what, path);
    uint64_t limit = 0;
    if (hn < 0 || check(hb, (size_t)hn, ctx, &limit)) { gzclose(g); return DG_EFORMAT; }
    uint64_t max = limit > UINT64_MAX - DGF_INFLATE_SLACK ? UINT64_MAX : limit + DGF_INFLATE_SLACK;
    if (!is_gz && (uint64_t)st.st_size > max) {
        gzclose(g);
        DG_ERR(DG_EFORMAT, "%s '%s': the file has %llu bytes, but %s %llu; refused unread from byte %llu", what, path,
               (unsigned long long)st.st_size, declares, (unsigned long long)limit, (unsigned long long)max);
        return DG_EFORMAT;
    }
    if ((size_t)hn < head) max = (uint64_t)hn;   /* the data ended inside the header */
    /* deflate expands at most ~1032:1: no bigger first guess than that */
    uint64_t guess = is_gz ? (uint64_t)st.st_size * 1032 + 4096 : (uint64_t)st.st_size;
    if (guess > max + 1) guess = max + 1;
    if (guess < (uint64_t)hn + 1) guess = (uint64_t)hn + 1;
    if (guess > SIZE_MAX / 2) guess = SIZE_MAX / 2;
    size_t cap = (size_t)guess, n = (size_t)hn;
    unsigned char *b = malloc(cap);
    if (!b) { gzclose(g); DG_ERR(DG_ENOMEM, "%s: cannot hold '%s' (%zu bytes) in memory", what, path, cap); return DG_ENOMEM; }
    memcpy(b, hb, n);
    rc = 0;
    while ((size_t)hn == head) {
        if (n == cap) {
            if ((uint64_t)cap > max) {
                DG_ERR(DG_EFORMAT, "%s '%s': the %sdata goes on past byte %llu, but %s %llu bytes (reading stopped there)",
                       what, path, is_gz ? "inflated " : "", (unsigned long long)max, declares, (unsigned long long)limit);
                rc = DG_EFORMAT;
                break;
            }
            size_t nc = (uint64_t)cap * 2 > max + 1 ? (size_t)(max + 1) : cap * 2;
            unsigned char *nb = realloc(b, nc);
            if (!nb) { DG_ERR(DG_ENOMEM, "%s: out of memory reading '%s' (%zu bytes)", what, path, nc); rc = DG_ENOMEM; break; }
            b = nb;
            cap = nc;
        }
        int64_t r = gz_read_full(g, b + n, cap - n, n, what, path);
        if (r < 0) { rc = DG_EFORMAT; break; }
        n += (size_t)r;
        if (n < cap) break;   /* the end of the data */
    }
    gzclose(g);
    if (rc) { free(b); return rc; }
    *buf = b;
    *len = n;
    if (gz) *gz = is_gz;
    return 0;
}

int dgf_maybe_gunzip_head(const unsigned char *buf, size_t len, const char *what, const char *name, size_t head,
                          dgf_head_fn check, void *ctx, const char *declares, const unsigned char **out, size_t *out_len,
                          bool *owned) {
    *owned = false;
    uint64_t limit;
    if (!dgf_is_gzip(buf, len)) {
        if (check(buf, len < head ? len : head, ctx, &limit)) return DG_EFORMAT;
        *out = buf;
        *out_len = len;
        return 0;
    }
    /* inflate only the header's bytes first */
    unsigned char hb[256];
    if (head > sizeof hb) head = sizeof hb;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) { DG_ERR(DG_ENOMEM, "%s '%s': zlib init failed", what, name); return DG_ENOMEM; }
    z.next_in = (unsigned char *)buf;
    z.avail_in = len > UINT32_MAX ? UINT32_MAX : (uInt)len;
    z.next_out = hb;
    z.avail_out = (uInt)head;
    int zr = Z_OK;
    while (z.avail_out && zr == Z_OK) zr = inflate(&z, Z_NO_FLUSH);
    size_t hn = head - z.avail_out;
    inflateEnd(&z);
    if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
        DG_ERR(DG_EFORMAT, "%s '%s': corrupt gzip data near byte %zu: %s", what, name, (size_t)(z.next_in - buf),
               z.msg ? z.msg : "inflate error");
        return DG_EFORMAT;
    }
    if (check(hb, hn, ctx, &limit)) return DG_EFORMAT;
    uint64_t max = limit > DGF_MAX_INFLATE - DGF_INFLATE_SLACK ? DGF_MAX_INFLATE : limit + DGF_INFLATE_SLACK;
    char why[160];
    snprintf(why, sizeof why, "%s %llu bytes", declares, (unsigned long long)limit);
    return gunzip(buf, len, (size_t)max, why, what, name, out, out_len, owned);
}

/* ---- windowed source ---- */
#define SRC_CHUNK (256u << 10)

void dgf_src_open_mem(dgf_src *s, const void *buf, size_t len, const char *what, const char *name) {
    memset(s, 0, sizeof *s);
    s->mem = s->win = s->p = buf;
    s->mem_len = len;
    s->end = s->p + len;
    s->what = what;
    s->name = name;
    s->limit = UINT64_MAX;
    s->keep_budget = DGF_KEEP_UNVALIDATED;
}

int dgf_src_open_buffer(dgf_src *s, const void *buf, size_t len, const char *what, const char *name) {
    dgf_src_open_mem(s, buf, len, what, name);
    if (!dgf_is_gzip(buf, len)) return 0;
    s->is_gz = true;
    s->limit = dgf_stream_limit(len);
    s->buf = malloc(SRC_CHUNK);
    s->zs = calloc(1, sizeof *s->zs);
    if (!s->buf || !s->zs || inflateInit2(s->zs, 16 + MAX_WBITS) != Z_OK) {
        free(s->zs);
        s->zs = NULL;
        dgf_src_close(s);
        DG_ERR(DG_ENOMEM, "%s '%s': out of memory starting to inflate", what, name);
        return DG_ENOMEM;
    }
    s->cap = SRC_CHUNK;
    s->win = s->p = s->end = s->buf;
    return 0;
}

int dgf_src_open_file(dgf_src *s, const char *path, const char *what) {
    memset(s, 0, sizeof *s);
    s->what = what;
    s->name = path;
    struct stat st;
    int rc = sniff_file(path, what, &st, &s->is_gz);
    if (rc) return rc;
    s->gz = gzopen(path, "rb");
    s->buf = malloc(SRC_CHUNK);
    if (!s->gz || !s->buf) {
        dgf_src_close(s);
        DG_ERR(DG_EIO, "%s: cannot open '%s': %s", what, path, errno ? strerror(errno) : "out of memory");
        return DG_EIO;
    }
    gzbuffer(s->gz, SRC_CHUNK);
    s->cap = SRC_CHUNK;
    s->limit = s->is_gz ? dgf_stream_limit((uint64_t)st.st_size) : UINT64_MAX;
    s->keep_budget = DGF_KEEP_UNVALIDATED;
    s->win = s->p = s->end = s->buf;
    return 0;
}

void dgf_src_close(dgf_src *s) {
    if (s->gz) gzclose(s->gz);
    if (s->zs) { inflateEnd(s->zs); free(s->zs); }
    free(s->buf);
    s->gz = NULL;
    s->zs = NULL;
    s->buf = NULL;
}

int dgf_src_rewind(dgf_src *s) {
    s->io_error = 0;
    s->base = 0;
    if (s->gz) {
        if (gzrewind(s->gz) != 0) {
            s->io_error = 1;
            DG_ERR(DG_EIO, "%s '%s': cannot go back to byte 0 for the second pass: %s", s->what, s->name, strerror(errno));
            return DG_EIO;
        }
        s->win = s->p = s->end = s->buf;
    } else if (s->zs) {
        inflateReset(s->zs);
        s->mem_pos = 0;
        s->zdone = false;
        s->win = s->p = s->end = s->buf;
    } else {
        s->win = s->p = s->mem;
        s->end = s->mem + s->mem_len;
    }
    return 0;
}

/* zs: inflates the next window of a gzip buffer into s->buf; its length, or -1 after an error */
static int64_t mem_inflate(dgf_src *s) {
    z_stream *z = s->zs;
    z->next_out = s->buf;
    z->avail_out = (uInt)s->cap;
    while (z->avail_out == s->cap && !s->zdone) {
        size_t in_left = s->mem_len - s->mem_pos;
        z->next_in = (unsigned char *)s->mem + s->mem_pos;
        z->avail_in = in_left > UINT32_MAX ? UINT32_MAX : (uInt)in_left;
        uInt ai = z->avail_in;
        int zr = inflate(z, Z_NO_FLUSH);
        s->mem_pos += ai - z->avail_in;
        if (zr == Z_STREAM_END) {
            if (s->mem_pos == s->mem_len) { s->zdone = true; break; }
            /* another gzip member may follow (concatenated .gz files), nothing else */
            if (!dgf_is_gzip(s->mem + s->mem_pos, s->mem_len - s->mem_pos)) {
                DG_ERR(DG_EFORMAT, "%s '%s': %zu trailing bytes after the gzip stream at compressed byte %zu", s->what, s->name,
                       s->mem_len - s->mem_pos, s->mem_pos);
                return -1;
            }
            inflateReset(z);
            continue;
        }
        if (zr == Z_OK) continue;
        if (zr == Z_BUF_ERROR) {   /* no progress with input left to give: the data ends early */
            DG_ERR(DG_EFORMAT, "%s '%s': gzip data truncated at compressed byte %zu (uncompressed byte %llu)", s->what, s->name,
                   s->mem_pos, (unsigned long long)(s->base + (s->cap - z->avail_out)));
            return -1;
        }
        DG_ERR(zr == Z_MEM_ERROR ? DG_ENOMEM : DG_EFORMAT, "%s '%s': corrupt gzip data near compressed byte %zu: %s", s->what,
               s->name, s->mem_pos, z->msg ? z->msg : "inflate error");
        return -1;
    }
    return (int64_t)(s->cap - z->avail_out);
}

int dgf_src_fill(dgf_src *s) {
    if ((!s->gz && !s->zs) || s->io_error) return 0;
    s->base += (uint64_t)(s->end - s->win);
    s->win = s->p = s->end = s->buf;
    int64_t n;
    if (s->zs) {
        n = mem_inflate(s);
        if (n < 0) { s->io_error = 1; return 0; }
    } else {
        n = gzread(s->gz, s->buf, (unsigned)s->cap);
        int errnum = Z_OK;
        const char *msg = gzerror(s->gz, &errnum);
        if (n < 0 || (n == 0 && errnum != Z_OK && errnum != Z_STREAM_END)) {
            s->io_error = 1;
            DG_ERR(errnum == Z_ERRNO ? DG_EIO : DG_EFORMAT, "%s '%s': %s at %sbyte %llu: %s", s->what, s->name,
                   errnum == Z_ERRNO ? "read error" : "corrupt or truncated gzip data", s->is_gz ? "uncompressed " : "",
                   (unsigned long long)s->base, errnum == Z_ERRNO ? strerror(errno) : msg);
            return 0;
        }
    }
    if ((uint64_t)n > s->limit - s->base) {
        /* no header says how big the stream is: the ratio cap stops a bomb before it costs much time */
        s->io_error = 1;
        DG_ERR(DG_EFORMAT, "%s '%s': gzip data inflates past the %llu-byte limit (%dx the compressed size, at least %llu MiB) "
               "at uncompressed byte %llu", s->what, s->name, (unsigned long long)s->limit, DGF_STREAM_RATIO,
               (unsigned long long)(DGF_STREAM_FLOOR >> 20), (unsigned long long)s->limit);
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
