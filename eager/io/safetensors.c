/* eager/io/safetensors.c — the safetensors reader and writer. The reader checks the whole
 * file (header length, JSON grammar, dtypes, shapes, offsets in bounds, no overlap, no hole,
 * byte counts) before it allocates a single tensor, and names the file and byte offset of the
 * first defect. A file is read header first: the 8-byte length and the JSON header are checked
 * before any data byte is read, and the data go straight into the tensors. Checking is linear in
 * the number of tensors (duplicate names through a hash), since a 100 MB header can name
 * millions. The writer goes through a temporary file, fsync and rename. */
#include "../internal.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>

#define MAX_HEADER (100u << 20)   /* the format's own limit on the JSON header */
#define MAX_NAME 1024

typedef struct entry {
    size_t name;                  /* offset of the name in the names arena (a 1 KB array per entry
                                     made a header of a million tensors cost a gigabyte) */
    dg_dtype dtype;
    int ndim;
    int64_t shape[DG_MAX_DIMS];
    uint64_t begin, end;
    size_t at;                    /* header byte where this entry starts, for messages */
} entry;

typedef struct parser {
    const char *p, *end, *start;
    const char *file;
    int failed;
} parser;

static size_t where(const parser *ps) { return 8 + (size_t)(ps->p - ps->start); }

static int fail(parser *ps, const char *what) {
    if (!ps->failed) DG_ERR(DG_EFORMAT, "safetensors '%s': %s at byte %zu", ps->file, what, where(ps));
    ps->failed = 1;
    return DG_EFORMAT;
}

static void ws(parser *ps) { while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t')) ps->p++; }

static int expect(parser *ps, char c) {
    ws(ps);
    if (ps->p >= ps->end || *ps->p != c) {
        char msg[48];
        snprintf(msg, sizeof msg, "expected '%c'", c);
        return fail(ps, msg);
    }
    ps->p++;
    return 0;
}

static bool peek(parser *ps, char c) { ws(ps); return ps->p < ps->end && *ps->p == c; }

/* JSON string into out (escapes \" \\ \/ \b \f \n \r \t and \u00XX). */
static int string(parser *ps, char *out, size_t cap) {
    if (expect(ps, '"')) return DG_EFORMAT;
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if ((unsigned char)c < 0x20) return fail(ps, "control character in string");
        if (c == '\\') {
            if (ps->p >= ps->end) return fail(ps, "unterminated escape");
            char e = *ps->p++;
            switch (e) {
            case '"': case '\\': case '/': c = e; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                unsigned v = 0;
                for (int i = 0; i < 4; i++) {
                    if (ps->p >= ps->end) return fail(ps, "short \\u escape");
                    char h = *ps->p++;
                    v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 :
                                            h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
                    if (v > 0xFFFF) return fail(ps, "bad \\u escape");
                }
                if (v == 0 || v > 0x7F) return fail(ps, "non-ASCII \\u escape in a name");
                c = (char)v;
                break;
            }
            default: return fail(ps, "bad escape");
            }
        }
        if (n + 1 >= cap) return fail(ps, "string too long");
        out[n++] = c;
    }
    if (ps->p >= ps->end) return fail(ps, "unterminated string");
    ps->p++;
    out[n] = 0;
    return 0;
}

static int uint_(parser *ps, uint64_t *v) {
    ws(ps);
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, "expected a non-negative integer");
    uint64_t x = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        if (x > (UINT64_MAX - 9) / 10) return fail(ps, "integer overflows");
        x = x * 10 + (uint64_t)(*ps->p++ - '0');
    }
    *v = x;
    return 0;
}

static int dtype_of(const char *s, dg_dtype *dt) {
    static const struct { const char *n; dg_dtype d; } m[] = {
        {"F32", DG_F32}, {"F64", DG_F64}, {"I64", DG_I64}, {"I32", DG_I32}, {"BOOL", DG_BOOL}, {"F16", DG_F16}, {"BF16", DG_BF16},
    };
    for (size_t i = 0; i < sizeof m / sizeof *m; i++) if (strcmp(s, m[i].n) == 0) { *dt = m[i].d; return 0; }
    return -1;
}
static const char *dtype_tag(dg_dtype dt) {
    switch (dt) {
    case DG_F32: return "F32"; case DG_F64: return "F64"; case DG_I64: return "I64"; case DG_I32: return "I32";
    case DG_BOOL: return "BOOL"; case DG_F16: return "F16"; case DG_BF16: return "BF16";
    }
    return "?";
}

/* {"__metadata__": {...strings...}} is accepted and ignored */
static int skip_metadata(parser *ps) {
    char buf[MAX_NAME];
    if (expect(ps, '{')) return DG_EFORMAT;
    if (peek(ps, '}')) { ps->p++; return 0; }
    for (;;) {
        if (string(ps, buf, sizeof buf) || expect(ps, ':') || string(ps, buf, sizeof buf)) return DG_EFORMAT;
        if (peek(ps, ',')) { ps->p++; continue; }
        return expect(ps, '}');
    }
}

static int tensor_entry(parser *ps, entry *e) {
    char key[32], val[16];
    bool have_dtype = false, have_shape = false, have_offsets = false;
    if (expect(ps, '{')) return DG_EFORMAT;
    for (;;) {
        if (string(ps, key, sizeof key) || expect(ps, ':')) return DG_EFORMAT;
        if (strcmp(key, "dtype") == 0 && !have_dtype) {
            if (string(ps, val, sizeof val)) return DG_EFORMAT;
            if (dtype_of(val, &e->dtype)) return fail(ps, "unknown dtype");
            have_dtype = true;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (expect(ps, '[')) return DG_EFORMAT;
            e->ndim = 0;
            if (peek(ps, ']')) ps->p++;
            else for (;;) {
                uint64_t d;
                if (uint_(ps, &d)) return DG_EFORMAT;
                if (e->ndim == DG_MAX_DIMS) return fail(ps, "more than 8 dims");
                if (d > (uint64_t)INT64_MAX / 2) return fail(ps, "dim too large");
                e->shape[e->ndim++] = (int64_t)d;
                if (peek(ps, ',')) { ps->p++; continue; }
                if (expect(ps, ']')) return DG_EFORMAT;
                break;
            }
            have_shape = true;
        } else if (strcmp(key, "data_offsets") == 0 && !have_offsets) {
            if (expect(ps, '[') || uint_(ps, &e->begin) || expect(ps, ',') || uint_(ps, &e->end) || expect(ps, ']')) return DG_EFORMAT;
            have_offsets = true;
        } else {
            return fail(ps, "unknown or repeated key in a tensor entry");
        }
        if (peek(ps, ',')) { ps->p++; continue; }
        if (expect(ps, '}')) return DG_EFORMAT;
        break;
    }
    if (!have_dtype || !have_shape || !have_offsets) return fail(ps, "tensor entry lacks dtype, shape or data_offsets");
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const entry *x = *(entry *const *)a, *y = *(entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

typedef struct header {
    entry *es;
    size_t n;
    char *names;          /* the names, NUL-separated */
    size_t names_n, names_cap;
    uint64_t hlen, data_len;
} header;

static void header_free(header *h) { free(h->es); free(h->names); }

static uint64_t str_hash(const char *s) {   /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Checks the JSON header (hdr, h->hlen bytes, starting at file byte 8) against h->data_len data bytes. */
static int parse_header(const char *hdr, header *h, const char *name) {
    parser ps = { .p = hdr, .end = hdr + h->hlen, .start = hdr, .file = name };
    size_t cap = 16, *slots = NULL, nslots = 0;
    entry **order = NULL;
    h->es = malloc(sizeof *h->es * cap);
    if (!h->es) { DG_ERR(DG_ENOMEM, "load_safetensors: out of memory"); return DG_ENOMEM; }
    char key[MAX_NAME];
    if (expect(&ps, '{')) goto bad;
    if (peek(&ps, '}')) ps.p++;
    else for (;;) {
        size_t at = where(&ps);
        if (string(&ps, key, sizeof key) || expect(&ps, ':')) goto bad;
        if (strcmp(key, "__metadata__") == 0) {
            if (skip_metadata(&ps)) goto bad;
        } else {
            if (h->n == cap) {
                entry *bigger = realloc(h->es, sizeof *h->es * cap * 2);
                if (!bigger) { DG_ERR(DG_ENOMEM, "load_safetensors: out of memory"); goto bad; }
                h->es = bigger;
                cap *= 2;
            }
            size_t kl = strlen(key) + 1;
            if (h->names_n + kl > h->names_cap) {
                size_t nc = h->names_cap ? h->names_cap * 2 : 4096;
                while (nc < h->names_n + kl) nc *= 2;
                char *b = realloc(h->names, nc);
                if (!b) { DG_ERR(DG_ENOMEM, "load_safetensors: out of memory"); goto bad; }
                h->names = b;
                h->names_cap = nc;
            }
            entry *e = &h->es[h->n];
            memset(e, 0, sizeof *e);
            e->name = h->names_n;
            memcpy(h->names + h->names_n, key, kl);
            h->names_n += kl;
            e->at = at;
            if (tensor_entry(&ps, e)) goto bad;
            h->n++;
        }
        if (peek(&ps, ',')) { ps.p++; continue; }
        if (expect(&ps, '}')) goto bad;
        break;
    }
    ws(&ps);
    if (ps.p != ps.end) { fail(&ps, "trailing bytes after the JSON header"); goto bad; }

    /* duplicate names: an open-addressing hash of entry indices, linear in the entry count */
    nslots = 16;
    while (nslots < 2 * h->n) nslots *= 2;
    slots = calloc(nslots, sizeof *slots);
    if (!slots) { DG_ERR(DG_ENOMEM, "load_safetensors: out of memory"); goto bad; }
    for (size_t i = 0; i < h->n; i++) {
        const char *nm = h->names + h->es[i].name;
        size_t k = (size_t)str_hash(nm) & (nslots - 1);
        while (slots[k] && strcmp(h->names + h->es[slots[k] - 1].name, nm) != 0) k = (k + 1) & (nslots - 1);
        if (slots[k]) { ps.p = ps.start + (h->es[i].at - 8); fail(&ps, "duplicate tensor name"); goto bad; }
        slots[k] = i + 1;
    }

    /* offsets: each entry's byte count matches its shape, entries tile the data exactly */
    uint64_t data_len = h->data_len, hlen = h->hlen;
    order = malloc(sizeof *order * (h->n ? h->n : 1));
    if (!order) { DG_ERR(DG_ENOMEM, "load_safetensors: out of memory"); goto bad; }
    for (size_t i = 0; i < h->n; i++) {
        entry *e = &h->es[i];
        order[i] = e;
        uint64_t numel = 1;
        for (int k = 0; k < e->ndim; k++) {
            if (e->shape[k] && numel > UINT64_MAX / (uint64_t)e->shape[k]) numel = UINT64_MAX;
            else numel *= (uint64_t)e->shape[k];
        }
        uint64_t es_ = dg_dtype_size(e->dtype);
        if (e->begin > e->end || e->end > data_len || numel > UINT64_MAX / es_ || numel * es_ != e->end - e->begin) {
            DG_ERR(DG_EFORMAT, "safetensors '%s': tensor '%s' (header byte %zu) has data_offsets [%llu, %llu] that do not fit "
                   "its %s shape (%llu bytes) inside the %llu data bytes starting at byte %llu", name, h->names + e->name, e->at,
                   (unsigned long long)e->begin, (unsigned long long)e->end, dtype_tag(e->dtype),
                   (unsigned long long)(numel > UINT64_MAX / es_ ? UINT64_MAX : numel * es_), (unsigned long long)data_len,
                   (unsigned long long)(8 + hlen));
            goto bad;
        }
    }
    qsort(order, h->n, sizeof *order, cmp_begin);
    uint64_t pos = 0;
    for (size_t i = 0; i < h->n; i++) {
        if (order[i]->begin != pos) {
            DG_ERR(DG_EFORMAT, "safetensors '%s': tensor '%s' starts at data byte %llu (file byte %llu) but the previous tensor ends at %llu: %s",
                   name, h->names + order[i]->name, (unsigned long long)order[i]->begin, (unsigned long long)(8 + hlen + order[i]->begin),
                   (unsigned long long)pos, order[i]->begin < pos ? "overlap" : "hole");
            goto bad;
        }
        pos = order[i]->end;
    }
    if (pos != data_len) {
        DG_ERR(DG_EFORMAT, "safetensors '%s': %llu data bytes after the last tensor, at file byte %llu", name,
               (unsigned long long)(data_len - pos), (unsigned long long)(8 + hlen + pos));
        goto bad;
    }
    free(slots);
    free(order);
    return 0;
bad:
    free(slots);
    free(order);
    return DG_EFORMAT;
}

/* The 8-byte header length at byte 0, checked against the file size and the format's limit. */
static int header_length(const unsigned char b[8], uint64_t len, const char *name, uint64_t *hlen) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    if (v > MAX_HEADER || v > len - 8) {
        DG_ERR(DG_EFORMAT, "safetensors '%s': header length %llu at byte 0 exceeds the file (%llu bytes) or the 100 MB limit",
               name, (unsigned long long)v, (unsigned long long)len);
        return DG_EFORMAT;
    }
    *hlen = v;
    return 0;
}

/* All checks passed: make the tensors, their bytes copied from data (a buffer) or read from f. */
static dg_tensor_dict *make_dict(const header *h, const unsigned char *data, FILE *f, const char *name) {
    dg_tensor_dict *d = dg_tensor_dict_new();
    if (!d) return NULL;
    for (size_t i = 0; i < h->n; i++) {
        const entry *e = &h->es[i];
        dg_tensor *t = dg_tensor_alloc(e->shape, e->ndim, e->dtype, dg_cpu());
        if (!t) goto bad;
        dg_keep(t);
        size_t nb = (size_t)(e->end - e->begin);
        if (data) memcpy(dg_tensor_ptr(t), data + e->begin, nb);
        else if (nb && (fseeko(f, (off_t)(8 + h->hlen + e->begin), SEEK_SET) != 0 || fread(dg_tensor_ptr(t), 1, nb, f) != nb)) {
            DG_ERR(DG_EIO, "load_safetensors: '%s': cannot read tensor '%s' (%zu bytes at file byte %llu): %s", name,
                   h->names + e->name, nb, (unsigned long long)(8 + h->hlen + e->begin), ferror(f) ? strerror(errno) : "file shrank");
            dg_tensor_release(t);
            goto bad;
        }
        int rc = dg_tensor_dict_set(d, h->names + e->name, t);
        dg_tensor_release(t);
        if (rc) goto bad;
    }
    return d;
bad:
    dg_tensor_dict_free(d);
    return NULL;
}

dg_tensor_dict *dg_load_safetensors_buffer(const void *buf, size_t len, const char *name) {
    const unsigned char *b = buf;
    if (!name) name = "(buffer)";
    DG_CHECK(buf || len == 0, "load_safetensors: buffer is NULL");
    if (len < 8) { DG_ERR(DG_EFORMAT, "safetensors '%s': %zu bytes, shorter than the 8-byte header length at byte 0", name, len); return NULL; }
    header h = {0};
    if (header_length(b, len, name, &h.hlen)) return NULL;
    h.data_len = len - 8 - h.hlen;
    dg_tensor_dict *d = parse_header((const char *)b + 8, &h, name) ? NULL : make_dict(&h, b + 8 + h.hlen, NULL, name);
    header_free(&h);
    return d;
}

dg_tensor_dict *dg_load_safetensors(const char *path) {
    DG_CHECK(path, "load_safetensors: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) { DG_ERR(DG_EIO, "load_safetensors: cannot open '%s': %s", path, strerror(errno)); return NULL; }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) { fclose(f); DG_ERR(DG_EIO, "load_safetensors: '%s' is not a regular file", path); return NULL; }
    uint64_t len = (uint64_t)st.st_size;
    unsigned char len8[8];
    if (len < 8) {
        fclose(f);
        DG_ERR(DG_EFORMAT, "safetensors '%s': %llu bytes, shorter than the 8-byte header length at byte 0", path, (unsigned long long)len);
        return NULL;
    }
    header h = {0};
    /* the first 8 bytes say how much header follows: nothing more is read until they pass */
    if (fread(len8, 1, 8, f) != 8) { fclose(f); DG_ERR(DG_EIO, "load_safetensors: cannot read the first 8 bytes of '%s'", path); return NULL; }
    if (header_length(len8, len, path, &h.hlen)) { fclose(f); return NULL; }
    h.data_len = len - 8 - h.hlen;
    char *hdr = malloc(h.hlen ? h.hlen : 1);
    if (!hdr) { fclose(f); DG_ERR(DG_ENOMEM, "load_safetensors: cannot hold the %llu-byte header of '%s'", (unsigned long long)h.hlen, path); return NULL; }
    dg_tensor_dict *d = NULL;
    if (fread(hdr, 1, h.hlen, f) != h.hlen)
        DG_ERR(DG_EIO, "load_safetensors: cannot read the %llu-byte header of '%s' at byte 8", (unsigned long long)h.hlen, path);
    else if (!parse_header(hdr, &h, path))
        d = make_dict(&h, NULL, f, path);
    free(hdr);
    header_free(&h);
    fclose(f);
    return d;
}

/* ---- writer ---- */
typedef struct sb { char *p; size_t n, cap; } sb;
static int sb_put(sb *s, const char *str, size_t k) {
    if (s->n + k + 1 > s->cap) {
        size_t cap = (s->cap + k + 1) * 2;
        char *q = realloc(s->p, cap);
        if (!q) return -1;
        s->p = q;
        s->cap = cap;
    }
    memcpy(s->p + s->n, str, k);
    s->n += k;
    s->p[s->n] = 0;
    return 0;
}
static int sb_fmt(sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sb_fmt(sb *s, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return k < 0 || (size_t)k >= sizeof tmp ? -1 : sb_put(s, tmp, (size_t)k);
}
static int sb_json_string(sb *s, const char *str) {
    if (sb_put(s, "\"", 1)) return -1;
    for (const char *c = str; *c; c++) {
        if (*c == '"' || *c == '\\') { char e[2] = {'\\', *c}; if (sb_put(s, e, 2)) return -1; }
        else if ((unsigned char)*c < 0x20) { if (sb_fmt(s, "\\u%04x", (unsigned char)*c)) return -1; }
        else if (sb_put(s, c, 1)) return -1;
    }
    return sb_put(s, "\"", 1);
}

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0) { if (errno == EINTR) continue; return -1; }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The process's umask, read without changing it (umask(2) can only be read by setting it, which
 * would race with other threads creating files): /proc/self/status says it on Linux >= 4.7. */
static mode_t current_umask(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    unsigned m = 022;
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) found = sscanf(line, "Umask: %o", &m) == 1;
    if (f) fclose(f);
    if (!found) { mode_t old = umask(022); umask(old); m = old; }
    return (mode_t)m;
}

/* Removes PATH.tmp.<pid>.XXXXXX files of saves whose process is gone (killed while saving),
 * and the pid-less PATH.tmp.XXXXXX of older versions once an hour old. A live process's
 * temporary is left alone: its save is still running. */
static void remove_stale_temporaries(const char *path) {
    char *copy1 = strdup(path), *copy2 = strdup(path);
    if (!copy1 || !copy2) { free(copy1); free(copy2); return; }
    const char *dir = dirname(copy1), *base = basename(copy2);
    size_t bl = strlen(base);
    DIR *dp = opendir(dir);
    struct dirent *e;
    while (dp && (e = readdir(dp))) {
        if (strncmp(e->d_name, base, bl) != 0 || strncmp(e->d_name + bl, ".tmp.", 5) != 0) continue;
        const char *rest = e->d_name + bl + 5;
        char *end;
        long pid = strtol(rest, &end, 10);
        char full[4096];
        if (snprintf(full, sizeof full, "%s/%s", dir, e->d_name) >= (int)sizeof full) continue;
        bool stale;
        if (end != rest && *end == '.') {
            stale = pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
        } else {
            struct stat st;
            stale = strlen(rest) == 6 && stat(full, &st) == 0 && time(NULL) - st.st_mtime > 3600;
        }
        if (stale) unlink(full);
    }
    if (dp) closedir(dp);
    free(copy1);
    free(copy2);
}

int dg_save_safetensors(const char *path, const dg_tensor_dict *d) {
    DG_CHECK_HANDLE_INT(d, "save_safetensors: dict is NULL");
    DG_CHECK_INT(path, "save_safetensors: path is NULL");
    sb h = {0};
    uint64_t off = 0;
    int bad = sb_put(&h, "{", 1);
    for (int i = 0; i < dg_tensor_dict_size(d) && !bad; i++) {
        dg_tensor *t = dg_tensor_dict_tensor(d, i);
        uint64_t nb = (uint64_t)t->numel * dg_dtype_size(t->dtype);
        bad |= (i ? sb_put(&h, ",", 1) : 0) | sb_json_string(&h, dg_tensor_dict_name(d, i));
        bad |= sb_fmt(&h, ":{\"dtype\":\"%s\",\"shape\":[", dtype_tag(t->dtype));
        for (int k = 0; k < t->ndim && !bad; k++) bad |= sb_fmt(&h, k ? ",%lld" : "%lld", (long long)t->shape[k]);
        bad |= sb_fmt(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + nb));
        off += nb;
    }
    bad = bad || sb_put(&h, "}", 1);
    while (!bad && (8 + h.n) % 8) bad = sb_put(&h, " ", 1);   /* data starts 8-byte aligned */
    if (bad) { free(h.p); DG_ERR(DG_ENOMEM, "save_safetensors: out of memory building the header"); return DG_ENOMEM; }

    /* temp file beside the target so rename() is atomic on the same filesystem; its name carries
     * our pid, so that a later save can tell a killed save's leftover from a live one's */
    remove_stale_temporaries(path);
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 40);
    if (!tmp) { free(h.p); DG_ERR(DG_ENOMEM, "save_safetensors: out of memory"); return DG_ENOMEM; }
    snprintf(tmp, pl + 40, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
    int fd = mkstemp(tmp);
    if (fd < 0) {
        DG_ERR(DG_EIO, "save_safetensors: cannot create a temporary file beside '%s': %s", path, strerror(errno));
        free(tmp); free(h.p);
        return DG_EIO;
    }
    fchmod(fd, 0666 & ~current_umask());   /* mkstemp makes 0600; a saved file follows the umask */
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    uint64_t errs = dg_error_count();
    int rc = write_all(fd, len8, 8) || write_all(fd, h.p, h.n) ? DG_EIO : 0;
    for (int i = 0; i < dg_tensor_dict_size(d) && !rc; i++) {
        dg_tensor *t = dg_tensor_dict_tensor(d, i);
        size_t nb = (size_t)t->numel * dg_dtype_size(t->dtype);
        void *host = malloc(nb ? nb : 1);
        if (!host) { rc = DG_ENOMEM; break; }
        if (dg_to_host(t, host, nb) != 0 || write_all(fd, host, nb)) rc = rc ? rc : DG_EIO;
        free(host);
    }
    if (!rc && fsync(fd) != 0) rc = DG_EIO;
    if (close(fd) != 0 && !rc) rc = DG_EIO;
    if (!rc && rename(tmp, path) != 0) rc = DG_EIO;
    if (rc) {
        int e = errno;
        unlink(tmp);
        if (!dg_error_since(errs)) DG_ERR(rc, "save_safetensors: writing '%s' failed: %s (the previous file, if any, is untouched)", path, strerror(e));
    } else {
        /* make the rename itself durable */
        char *dir = strdup(path);
        int dfd = dir ? open(dirname(dir), O_RDONLY | O_DIRECTORY) : -1;
        if (dfd >= 0) { fsync(dfd); close(dfd); }
        free(dir);
    }
    free(tmp);
    free(h.p);
    return rc;
}
