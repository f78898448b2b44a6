/* test/test_hostile_files.c — small files that once cost large memory, CPU or silently bad data:
 * a gzip bomb behind a lying IDX header, a bad magic at the front of a large file, an
 * mnist.json.gz inflating far past the streaming cap, 80k tensors in one safetensors file, and a
 * keypoint CSV with 1e300 and an embedded NUL. Every file is generated here. Memory is measured in
 * a forked child as its peak RSS (VmHWM, reset through /proc/self/clear_refs) above its RSS before
 * the load, so neither the parent's history nor other tests can hide a peak. */
#include "test_util.h"
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "formats_test_util.h"
#include "../data/formats/formats.h"

#define MB (1024.0 * 1024.0)
/* AddressSanitizer's shadow memory and quarantine add to every allocation's footprint, so the
 * RSS bounds are for ordinary builds; under ASan the same loads are checked for their errors
 * and for memory errors, with the bounds scaled. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_SCALE 4.0
#else
#define RSS_SCALE 1.0
#endif

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0) { v = atol(line + kl); break; }
    fclose(f);
    return v;
}

/* Runs load() in a forked child; returns the child's peak RSS growth in MB and copies the error
 * the load reported (it must fail) into err. The child's address space is bounded at +2 GiB so
 * that a reader without a cap fails with ENOMEM instead of taking the machine. */
typedef bool (*load_fn)(void *ctx);   /* true: the load was refused */
static double child_peak_mb(load_fn load, void *ctx, char *err, size_t errlen) {
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        struct rlimit rl = { .rlim_cur = (rlim_t)status_kb("VmSize:") * 1024 + ((rlim_t)2 << 30) };
        rl.rlim_max = rl.rlim_cur;
        setrlimit(RLIMIT_AS, &rl);
        FILE *cr = fopen("/proc/self/clear_refs", "w");   /* "5" resets VmHWM to the current RSS */
        bool reset = cr && fputs("5", cr) >= 0 && fclose(cr) == 0;
        if (cr && !reset) cr = NULL;
        long before = status_kb("VmRSS:");
        struct rusage ru0;
        getrusage(RUSAGE_SELF, &ru0);
        bool refused = load(ctx);
        long hwm = status_kb("VmHWM:");
        struct rusage ru1;
        getrusage(RUSAGE_SELF, &ru1);
        /* without clear_refs, ru_maxrss growth is the best available (it can only under-report) */
        double mb = reset ? (double)(hwm - before) / 1024.0 : (double)(ru1.ru_maxrss - ru0.ru_maxrss) / 1024.0;
        char msg[1200];
        int n = snprintf(msg, sizeof msg, "%.3f %d %s", mb, refused, dg_last_error());
        if (write(pfd[1], msg, (size_t)n) < 0) _exit(2);
        _exit(0);
    }
    close(pfd[1]);
    char msg[1200];
    ssize_t n = 0, k;
    while ((k = read(pfd[0], msg + n, sizeof msg - 1 - (size_t)n)) > 0) n += k;
    close(pfd[0]);
    msg[n > 0 ? n : 0] = 0;
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child died (status %d)", st);
    double mb;
    int refused, off = 0;
    cr_assert_eq(sscanf(msg, "%lf %d %n", &mb, &refused, &off), 2, "child said: %s", msg);
    cr_assert(refused, "the hostile file loaded");
    snprintf(err, errlen, "%s", msg + off);
    return mb;
}

/* One gzip member of `len` copies of byte `c`, compressed at level 9 (about 1000:1). */
static unsigned char *gz_member(const void *prefix, size_t plen, int c, size_t len, size_t *out_len) {
    z_stream z = {0};
    cr_assert_eq(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = plen + len / 500 + 4096;
    unsigned char *out = malloc(cap), chunk[65536];
    memset(chunk, c, sizeof chunk);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    z.next_in = (unsigned char *)prefix;
    z.avail_in = (uInt)plen;
    cr_assert_eq(deflate(&z, Z_NO_FLUSH), Z_OK);
    for (size_t done = 0; done < len; done += sizeof chunk) {
        z.next_in = chunk;
        z.avail_in = (uInt)(len - done < sizeof chunk ? len - done : sizeof chunk);
        cr_assert_eq(deflate(&z, Z_NO_FLUSH), Z_OK);
    }
    cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

/* ---- IDX: a 1-image header in front of a gigabyte of zeros ---- */
typedef struct { const char *img, *lab; } idx_paths;
static bool load_idx(void *ctx) {
    idx_paths *p = ctx;
    dg_dataset *ds = dg_mnist_idx_dataset(p->img, p->lab);
    dg_dataset_free(ds);
    return ds == NULL;
}

Test(hostile_files, idx_gzip_bomb_lying_header, .timeout = 120) {
    mk_tmpdir();
    /* the header declares one 28x28 image (784 bytes); the members inflate to 1 GiB */
    unsigned char hdr[16] = { 0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28 };
    size_t ml;
    unsigned char *m = gz_member(hdr, sizeof hdr, 0, (size_t)64 << 20, &ml);
    FILE *f = fopen(tpath("bomb.gz"), "wb");
    cr_assert_eq(fwrite(m, 1, ml, f), ml);
    free(m);
    m = gz_member(NULL, 0, 0, (size_t)64 << 20, &ml);   /* further members: concatenated gzip */
    for (int k = 0; k < 15; k++) cr_assert_eq(fwrite(m, 1, ml, f), ml);
    free(m);
    fclose(f);
    unsigned char lab[9];
    write_file(tpath("lab"), lab, idx_labels(lab, 1));
    idx_paths p = { tpath("bomb.gz"), tpath("lab") };
    char err[1200];
    double mb = child_peak_mb(load_idx, &p, err, sizeof err);
    cr_assert(strstr(err, tpath("bomb.gz")) && strstr(err, "header") && strstr(err, "byte"), "error: %s", err);
    cr_log_info("idx bomb: peak RSS +%.1f MB", mb);
    cr_assert(mb <= 64 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a bomb whose header declares 800 bytes (%s)", mb, err);
    rm_tmpdir();
}

Test(hostile_files, idx_bad_magic_large_file, .timeout = 60) {
    mk_tmpdir();
    /* 512 MB of plain bytes whose first byte is wrong: only the first bytes may be read */
    FILE *f = fopen(tpath("big"), "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fputc(0x42, f), 0x42);
    cr_assert_eq(ftruncate(fileno(f), (off_t)512 << 20), 0);   /* sparse: no disk used */
    fclose(f);
    unsigned char lab[9];
    write_file(tpath("lab"), lab, idx_labels(lab, 1));
    idx_paths p = { tpath("big"), tpath("lab") };
    char err[1200];
    double mb = child_peak_mb(load_idx, &p, err, sizeof err);
    cr_assert(strstr(err, tpath("big")) && strstr(err, "magic") && strstr(err, "byte 0"), "error: %s", err);
    cr_log_info("bad magic: peak RSS +%.1f MB", mb);
    cr_assert(mb <= 16 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a file by its first byte (%s)", mb, err);
    rm_tmpdir();
}

/* ---- mnist.json.gz: 640 MB of valid-looking images in 1.1 MB (the operator's case) ---- */
static bool load_json(void *ctx) {
    dg_dataset *ds = dg_mnist_json_dataset(ctx, 0);
    dg_dataset_free(ds);
    return ds == NULL;
}

Test(hostile_files, mnist_json_gzip_past_cap, .timeout = 120) {
    mk_tmpdir();
    /* one image is 784 zeros; a block of 640 images is compressed once and repeated */
    size_t il = 1 + 784 * 2;
    char *img = malloc(il + 1);
    img[0] = '[';
    for (int k = 0; k < 784; k++) { img[1 + 2 * k] = '0'; img[2 + 2 * k] = k < 783 ? ',' : ']'; }
    img[il] = ',';
    size_t bl = 640 * (il + 1);
    char *block = malloc(bl);
    for (int i = 0; i < 640; i++) memcpy(block + i * (il + 1), img, il + 1);
    z_stream z = {0};
    cr_assert_eq(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = bl, ml;
    unsigned char *m = malloc(cap);
    z.next_in = (unsigned char *)block;
    z.avail_in = (uInt)bl;
    z.next_out = m;
    z.avail_out = (uInt)cap;
    cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    ml = cap - z.avail_out;
    deflateEnd(&z);
    FILE *f = fopen(tpath("m.json.gz"), "wb");
    gzFile g = gzdopen(dup(fileno(f)), "wb");
    gzputs(g, "[[[");
    gzclose(g);
    fseek(f, 0, SEEK_END);
    for (int k = 0; k < 640; k++) cr_assert_eq(fwrite(m, 1, ml, f), ml);   /* 410k images, 640 MB inflated from 1.1 MB */
    fclose(f);
    free(m);
    free(block);
    free(img);
    struct stat st;
    stat(tpath("m.json.gz"), &st);
    char err[1200];
    double mb = child_peak_mb(load_json, (void *)tpath("m.json.gz"), err, sizeof err);
    cr_assert(strstr(err, tpath("m.json.gz")) && strstr(err, "limit") && strstr(err, "byte"), "error: %s", err);
    cr_log_info("json cap: peak RSS +%.1f MB", mb);
    cr_assert(mb <= 64 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a %.1f MB mnist.json.gz (%s)", mb, st.st_size / MB, err);
    rm_tmpdir();
}

/* ---- safetensors: 80k tiny tensors load in linear time ---- */
Test(hostile_files, safetensors_80k_tensors, .timeout = 120) {
    const int n = 80000;
    size_t cap = (size_t)n * 80 + 64, hl = 0;
    char *h = malloc(cap);
    hl += (size_t)sprintf(h + hl, "{");
    for (int i = 0; i < n; i++)
        hl += (size_t)sprintf(h + hl, "%s\"layer.%d.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                              i ? "," : "", i, 4 * i, 4 * i + 4);
    hl += (size_t)sprintf(h + hl, "}");
    while (hl % 8) h[hl++] = ' ';
    char path[] = "/tmp/dg_st80k_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(h, 1, hl, f);
    for (int i = 0; i < n; i++) { float v = (float)i; fwrite(&v, 4, 1, f); }
    fclose(f);
    free(h);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    dg_tensor_dict *d = dg_load_safetensors(path);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    unlink(path);
    cr_assert_not_null(d, "%s", dg_last_error());
    cr_assert_eq(dg_tensor_dict_size(d), n);
    dg_tensor *t = dg_tensor_dict_get(d, "layer.79999.weight");
    cr_assert_not_null(t);
    cr_assert_eq(*(const float *)dg_data(t), 79999.0f);
    dg_tensor_dict_free(d);
    cr_log_info("80k tensors: %.3f s", s);
    /* a guard against quadratic parsing (80k^2 steps would take minutes), not a speed target: the
     * bound is wide because this runs under ASan on a 2-core machine that may be busy (2.4 s seen) */
    cr_assert(s < 15.0, "80k tensors took %.2f s to load", s);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- face keypoints CSV: a value past float32 and an embedded NUL ---- */
/* the header, then one row whose first keypoint is `first` (len bytes, may hold a NUL) */
static size_t csv_row(char *b, const char *first, size_t len) {
    size_t n = (size_t)sprintf(b, "%s\n", kp_header);
    memcpy(b + n, first, len);
    n += len;
    for (int k = 1; k < 30; k++) n += (size_t)sprintf(b + n, ",%d.5", 30 + k);
    b[n++] = ',';
    for (int k = 0; k < 9216; k++) n += (size_t)sprintf(b + n, k ? " %d" : "%d", k % 256);
    b[n++] = '\n';
    return n;
}

Test(hostile_files, face_csv_out_of_float_range_and_nul) {
    mk_tmpdir();
    char *b = malloc(64 << 10);
    size_t n = csv_row(b, "66.5", 4);   /* the valid row loads */
    write_file(tpath("ok.csv"), b, n);
    dg_dataset *ds = dg_face_keypoints_dataset(tpath("ok.csv"));
    cr_assert_not_null(ds, "%s", dg_last_error());
    dg_dataset_free(ds);

    size_t hl = strlen(kp_header) + 1;
    n = csv_row(b, "1e300", 5);
    write_file(tpath("big.csv"), b, n);
    cr_assert_null(dg_face_keypoints_dataset(tpath("big.csv")), "1e300 loaded as a float32 keypoint");
    char at[32];
    snprintf(at, sizeof at, "byte %zu", hl);
    expect_error(tpath("big.csv"), "line 2", at);
    n = csv_row(b, "-1e39", 5);
    cr_assert_null(dg_face_keypoints_dataset_buffer(b, n, "mem"), "-1e39 loaded as a float32 keypoint");
    expect_error("float32", "-1e39", NULL);

    n = csv_row(b, "66\0" "9", 4);   /* "66" then NUL: once read as 66 */
    write_file(tpath("nul.csv"), b, n);
    cr_assert_null(dg_face_keypoints_dataset(tpath("nul.csv")), "a field with a NUL loaded");
    snprintf(at, sizeof at, "byte %zu", hl + 2);
    expect_error(tpath("nul.csv"), "NUL", at);
    n = csv_row(b, "\"6\0\"", 4);     /* quoted */
    cr_assert_null(dg_face_keypoints_dataset_buffer(b, n, "mem"));
    expect_error("NUL", "line 2", NULL);
    free(b);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- headerless gzip streams: valid records, padding that lifts the compressed size, a defect at the end ---- */

/* A gzip file made of concatenated members (one inflated stream), counting both sizes. */
typedef struct gzcat { FILE *f; uint64_t packed, inflated; } gzcat;
static void gzcat_put(gzcat *g, const void *buf, size_t len, int times) {
    size_t ml;
    unsigned char *m = ft_gzip(buf, len, 9, &ml);
    for (int k = 0; k < times; k++) cr_assert_eq(fwrite(m, 1, ml, g->f), ml);
    g->packed += (uint64_t)ml * (uint64_t)times;
    g->inflated += (uint64_t)len * (uint64_t)times;
    free(m);
}
/* Adds filler members (bytes the format skips or drops, hard to compress) until the stream is well
 * inside the streaming ratio cap: the parser, not the cap, must then bound the memory. */
static void gzcat_pad(gzcat *g, const void *filler, size_t len, size_t tail) {
    while ((double)(g->inflated + tail) > 0.8 * DGF_STREAM_RATIO * (double)g->packed) gzcat_put(g, filler, len, 1);
}
/* the top byte of an LCG step (its low bits repeat with short periods and would compress away) */
static uint32_t lcg(uint32_t *s) { *s = *s * 1664525u + 1013904223u; return *s >> 24; }

/* the whole file in memory, for the _buffer entries */
typedef struct { unsigned char *buf; size_t len; const char *path; int split; } membuf;
static membuf slurp(const char *path) {
    membuf m = { .path = path };
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    m.len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    m.buf = malloc(m.len);
    cr_assert_eq(fread(m.buf, 1, m.len, f), m.len);
    fclose(f);
    return m;
}

static bool load_json_buffer(void *ctx) {
    membuf *m = ctx;
    dg_dataset *ds = dg_mnist_json_dataset_buffer(m->buf, m->len, m->split, "mem.json.gz");
    dg_dataset_free(ds);
    return ds == NULL;
}

Test(hostile_files, mnist_json_valid_images_padded_then_cut, .timeout = 180) {
    mk_tmpdir();
    /* 100k all-zero images (157 MB, about 78 MB kept as bytes) behind "[[[", random whitespace
     * that brings the compressed size to ~2.7 MB (so the 64x ratio cap allows it all), then the
     * stream ends inside the image list */
    size_t il = 1 + 784 * 2;
    char *block = malloc(640 * (il + 1));
    for (int i = 0; i < 640; i++) {
        char *p = block + i * (il + 1);
        p[0] = '[';
        for (int k = 0; k < 784; k++) { p[1 + 2 * k] = '0'; p[2 + 2 * k] = k < 783 ? ',' : ']'; }
        p[il] = ',';
    }
    size_t fl = (size_t)1 << 20;
    char *ws = malloc(fl);
    uint32_t seed = 7;
    for (size_t k = 0; k < fl; k++) ws[k] = " \t\n\r"[lcg(&seed) & 3];
    gzcat g = { fopen(tpath("pad.json.gz"), "wb") };
    cr_assert_not_null(g.f);
    gzcat_put(&g, "[[[", 3, 1);
    gzcat_put(&g, block, 640 * (il + 1), 160);
    gzcat_pad(&g, ws, fl, 0);
    gzcat_put(&g, "[0,0,]", 6, 1);   /* the defect: a value is missing */
    fclose(g.f);
    free(ws);
    free(block);
    cr_log_info("json padded: %.1f MB inflated from %.2f MB", g.inflated / MB, g.packed / MB);
    cr_assert((double)g.inflated < DGF_STREAM_RATIO * (double)g.packed, "the ratio cap would stop this file");
    char err[1200];
    double mb = child_peak_mb(load_json, (void *)tpath("pad.json.gz"), err, sizeof err);
    cr_log_info("json padded, file: peak RSS +%.1f MB (%s)", mb, err);
    cr_assert(strstr(err, tpath("pad.json.gz")) && strstr(err, "expected a number") && strstr(err, "byte"), "error: %s", err);
    cr_assert(mb <= 64 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a %.1f MB mnist.json.gz (%s)", mb, g.packed / MB, err);
    membuf m = slurp(tpath("pad.json.gz"));
    mb = child_peak_mb(load_json_buffer, &m, err, sizeof err);
    cr_log_info("json padded, buffer: peak RSS +%.1f MB (%s)", mb, err);
    cr_assert(strstr(err, "mem.json.gz") && strstr(err, "expected a number") && strstr(err, "byte"), "error: %s", err);
    cr_assert(mb <= 64 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a %.1f MB mnist.json.gz buffer (%s)", mb, m.len / MB, err);
    free(m.buf);
    rm_tmpdir();
}

Test(hostile_files, mnist_json_out_of_float_range_and_nul) {
    /* 1e300 is a finite double but +inf as the float32 a pixel is kept as */
    static const char big[] = "[[[[1,1,1,1e300]],[1]],[[],[]],[[],[]]]";
    dgf_src s;
    dgf_src_open_mem(&s, big, strlen(big), "mnist_json", "big");
    dg_dataset *ds = dgf_mnist_json_parse(&s, 0, 2);
    cr_assert_null(ds, "1e300 loaded as a float32 pixel");
    expect_error("'big'", "float32", "byte 10");
    static const char nul[] = "[[[[1,1,1,1\0]],[1]],[[],[]],[[],[]]]";
    dgf_src_open_mem(&s, nul, sizeof nul - 1, "mnist_json", "nul");
    cr_assert_null(dgf_mnist_json_parse(&s, 0, 2), "a NUL after a value loaded");
    expect_error("'nul'", "byte 11", NULL);
    cr_assert_eq(dg_live_tensors(), 0);
}

static bool load_csv(void *ctx) {
    dg_dataset *ds = dg_face_keypoints_dataset(ctx);
    dg_dataset_free(ds);
    return ds == NULL;
}
static bool load_csv_buffer(void *ctx) {
    membuf *m = ctx;
    dg_dataset *ds = dg_face_keypoints_dataset_buffer(m->buf, m->len, "mem.csv.gz");
    dg_dataset_free(ds);
    return ds == NULL;
}

Test(hostile_files, face_csv_valid_rows_padded_then_1e300, .timeout = 180) {
    mk_tmpdir();
    /* 8,320 complete rows of zeros (about 77 MB kept), dropped rows of random pixels (a missing
     * keypoint) bringing the compressed size to ~2.5 MB, then a row with 1e300 */
    char *row = malloc(64 << 10);
    size_t rl = 0;
    for (int k = 0; k < 30; k++) rl += (size_t)sprintf(row + rl, "%d.5,", 30 + k);
    for (int k = 0; k < 9216; k++) rl += (size_t)sprintf(row + rl, k ? " 0" : "0");
    row[rl++] = '\n';
    char *block = malloc(64 * rl);
    for (int i = 0; i < 64; i++) memcpy(block + i * rl, row, rl);
    char *fill = malloc(40 * (64 << 10));
    size_t fl = 0;
    uint32_t seed = 11;
    for (int r = 0; r < 32; r++) {
        for (int k = 0; k < 30; k++) fl += (size_t)sprintf(fill + fl, k ? "%d.5," : ",", 30 + k);
        for (int k = 0; k < 9216; k++) fl += (size_t)sprintf(fill + fl, k ? " %u" : "%u", lcg(&seed) % 256);
        fill[fl++] = '\n';
    }
    gzcat g = { fopen(tpath("pad.csv.gz"), "wb") };
    cr_assert_not_null(g.f);
    size_t hl = (size_t)sprintf(row, "%s\n", kp_header);
    gzcat_put(&g, row, hl, 1);
    gzcat_put(&g, block, 64 * rl, 130);
    gzcat_pad(&g, fill, fl, 0);
    size_t bl = csv_row(row, "1e300", 5);
    gzcat_put(&g, row + hl, bl - hl, 1);
    fclose(g.f);
    free(fill);
    free(block);
    free(row);
    cr_log_info("csv padded: %.1f MB inflated from %.2f MB", g.inflated / MB, g.packed / MB);
    cr_assert((double)g.inflated < DGF_STREAM_RATIO * (double)g.packed, "the ratio cap would stop this file");
    char err[1200];
    double mb = child_peak_mb(load_csv, (void *)tpath("pad.csv.gz"), err, sizeof err);
    cr_log_info("csv padded, file: peak RSS +%.1f MB (%s)", mb, err);
    cr_assert(strstr(err, tpath("pad.csv.gz")) && strstr(err, "1e300") && strstr(err, "float32"), "error: %s", err);
    cr_assert(mb <= 64 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a %.1f MB keypoint CSV (%s)", mb, g.packed / MB, err);
    membuf m = slurp(tpath("pad.csv.gz"));
    mb = child_peak_mb(load_csv_buffer, &m, err, sizeof err);
    cr_log_info("csv padded, buffer: peak RSS +%.1f MB (%s)", mb, err);
    cr_assert(strstr(err, "mem.csv.gz") && strstr(err, "1e300"), "error: %s", err);
    cr_assert(mb <= 64 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a %.1f MB keypoint CSV buffer (%s)", mb, m.len / MB, err);
    free(m.buf);
    rm_tmpdir();
}

/* ---- CIFAR-10: a batch holds 10,000 records of 3073 bytes ---- */
static bool load_cifar_test(void *ctx) {
    dg_dataset *ds = dg_cifar10_dataset(ctx, false);
    dg_dataset_free(ds);
    return ds == NULL;
}
static bool load_cifar_buffer(void *ctx) {
    membuf *m = ctx;
    dg_dataset *ds = dg_cifar10_dataset_buffer(m->buf, m->len, "mem.bin.gz");
    dg_dataset_free(ds);
    return ds == NULL;
}

Test(hostile_files, cifar_gzip_bomb, .timeout = 120) {
    mk_tmpdir();
    /* 1 GiB of zeros (valid records of class 0, black) in ~1 MB, then half a record */
    size_t ml;
    unsigned char *m = gz_member(NULL, 0, 0, (size_t)64 << 20, &ml);
    FILE *f = fopen(tpath("test_batch.bin"), "wb");
    cr_assert_not_null(f);
    for (int k = 0; k < 16; k++) cr_assert_eq(fwrite(m, 1, ml, f), ml);
    free(m);
    m = gz_member(NULL, 0, 0, 1500, &ml);
    cr_assert_eq(fwrite(m, 1, ml, f), ml);
    free(m);
    fclose(f);
    char err[1200];
    double mb = child_peak_mb(load_cifar_test, tmpdir, err, sizeof err);
    cr_log_info("cifar bomb, file: peak RSS +%.1f MB (%s)", mb, err);
    cr_assert(strstr(err, tpath("test_batch.bin")) && strstr(err, "10000 records") && strstr(err, "byte"), "error: %s", err);
    cr_assert(mb <= 64 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a CIFAR-10 gzip bomb (%s)", mb, err);
    membuf b = slurp(tpath("test_batch.bin"));
    mb = child_peak_mb(load_cifar_buffer, &b, err, sizeof err);
    cr_log_info("cifar bomb, buffer: peak RSS +%.1f MB (%s)", mb, err);
    cr_assert(strstr(err, "mem.bin.gz") && strstr(err, "byte"), "error: %s", err);
    cr_assert(mb <= 64 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a CIFAR-10 gzip bomb buffer (%s)", mb, err);
    free(b.buf);
    rm_tmpdir();
}

Test(hostile_files, cifar_bad_label_large_file, .timeout = 60) {
    mk_tmpdir();
    /* 512 MB (sparse) whose first record's label is 66: refused from the first byte */
    FILE *f = fopen(tpath("test_batch.bin"), "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fputc(66, f), 66);
    cr_assert_eq(ftruncate(fileno(f), (off_t)3073 << 17), 0);
    fclose(f);
    char err[1200];
    double mb = child_peak_mb(load_cifar_test, tmpdir, err, sizeof err);
    cr_log_info("cifar bad label: peak RSS +%.1f MB (%s)", mb, err);
    cr_assert(strstr(err, tpath("test_batch.bin")) && strstr(err, "label 66") && strstr(err, "byte 0"), "error: %s", err);
    cr_assert(mb <= 16 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a file by its first byte (%s)", mb, err);
    rm_tmpdir();
}

/* ---- image lists: text lines, and image files opened per entry ---- */
typedef struct { const char *root, *list; } il_paths;
static bool load_list(void *ctx) {
    il_paths *p = ctx;
    dg_dataset *ds = dg_image_list_dataset(p->root, p->list);
    dg_dataset_free(ds);
    return ds == NULL;
}
static bool load_list_buffer(void *ctx) {
    membuf *m = ctx;
    dg_dataset *ds = dg_image_list_dataset_buffer("/nonexistent", m->buf, m->len, "mem.txt.gz");
    dg_dataset_free(ds);
    return ds == NULL;
}
/* the list loads; fetching its first image must fail */
static bool load_first_image(void *ctx) {
    il_paths *p = ctx;
    dg_dataset *ds = dg_image_list_dataset(p->root, p->list);
    if (!ds) return false;
    dg_sample s;
    int rc = dg_dataset_get(ds, 0, 0, &s);
    if (!rc) dg_sample_clear(&s);
    dg_dataset_free(ds);
    return rc != 0;
}

Test(hostile_files, image_list_valid_lines_padded_then_bad, .timeout = 180) {
    mk_tmpdir();
    /* 6.5M entries "n01440764/n01440764_10026.JPEG 417" (about 220 MB inflated, more kept),
     * whitespace-only lines bringing the compressed size up, then a line whose label is a word */
    static const char line[] = "n01440764/n01440764_10026.JPEG 417\n";
    size_t ll = sizeof line - 1, n = 32768;
    char *block = malloc(n * ll);
    for (size_t i = 0; i < n; i++) memcpy(block + i * ll, line, ll);
    size_t fl = (size_t)1 << 20;
    char *ws = malloc(fl);
    uint32_t seed = 5;
    for (size_t k = 0; k < fl; k++) ws[k] = " \t\n\r"[lcg(&seed) & 3];
    ws[fl - 1] = '\n';
    gzcat g = { fopen(tpath("list.txt.gz"), "wb") };
    cr_assert_not_null(g.f);
    gzcat_put(&g, block, n * ll, 200);
    gzcat_pad(&g, ws, fl, 0);
    gzcat_put(&g, "a/b.png one\n", 12, 1);
    fclose(g.f);
    free(ws);
    free(block);
    cr_log_info("list padded: %.1f MB inflated from %.2f MB", g.inflated / MB, g.packed / MB);
    cr_assert((double)g.inflated < DGF_STREAM_RATIO * (double)g.packed, "the ratio cap would stop this file");
    il_paths p = { tmpdir, tpath("list.txt.gz") };
    char err[1200];
    double mb = child_peak_mb(load_list, &p, err, sizeof err);
    cr_log_info("list padded, file: peak RSS +%.1f MB (%s)", mb, err);
    cr_assert(strstr(err, tpath("list.txt.gz")) && strstr(err, "'one'") && strstr(err, "byte"), "error: %s", err);
    cr_assert(mb <= 64 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a %.1f MB image list (%s)", mb, g.packed / MB, err);
    membuf m = slurp(tpath("list.txt.gz"));
    mb = child_peak_mb(load_list_buffer, &m, err, sizeof err);
    cr_log_info("list padded, buffer: peak RSS +%.1f MB (%s)", mb, err);
    cr_assert(strstr(err, "mem.txt.gz") && strstr(err, "'one'"), "error: %s", err);
    cr_assert(mb <= 64 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a %.1f MB image list buffer (%s)", mb, m.len / MB, err);
    free(m.buf);
    rm_tmpdir();
}

Test(hostile_files, image_list_huge_line, .timeout = 120) {
    mk_tmpdir();
    /* 1 GiB of 'a' with no line end in ~1 MB */
    size_t ml;
    unsigned char *m = gz_member("img/", 4, 'a', (size_t)64 << 20, &ml);
    FILE *f = fopen(tpath("list.txt.gz"), "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(m, 1, ml, f), ml);
    free(m);
    m = gz_member(NULL, 0, 'a', (size_t)64 << 20, &ml);
    for (int k = 0; k < 15; k++) cr_assert_eq(fwrite(m, 1, ml, f), ml);
    free(m);
    fclose(f);
    il_paths p = { tmpdir, tpath("list.txt.gz") };
    char err[1200];
    double mb = child_peak_mb(load_list, &p, err, sizeof err);
    cr_log_info("list huge line: peak RSS +%.1f MB (%s)", mb, err);
    cr_assert(strstr(err, tpath("list.txt.gz")) && strstr(err, "line 1") && strstr(err, "longer"), "error: %s", err);
    cr_assert(mb <= 16 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a 1 GiB line (%s)", mb, err);
    rm_tmpdir();
}

Test(hostile_files, image_list_large_image_files, .timeout = 60) {
    mk_tmpdir();
    /* 512 MB (sparse) image files: one with no image magic, one a PNG whose header declares 1x1
     * pixels and whose bytes go on (zeros) past its header; neither may be read whole */
    static const unsigned char png[33] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                           0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0, 0x90, 0x77, 0x53, 0xde };
    const char *names[2] = { "junk.png", "lying.png" };
    for (int c = 0; c < 2; c++) {
        FILE *f = fopen(tpath(names[c]), "wb");
        cr_assert_not_null(f);
        if (c == 0) cr_assert_eq(fputc('J', f), 'J');
        else cr_assert_eq(fwrite(png, 1, sizeof png, f), sizeof png);
        cr_assert_eq(ftruncate(fileno(f), (off_t)512 << 20), 0);
        fclose(f);
        char line[64];
        snprintf(line, sizeof line, "%s 3\n", names[c]);
        write_str(tpath("list.txt"), line);
        il_paths p = { tmpdir, tpath("list.txt") };
        char err[1200];
        double mb = child_peak_mb(load_first_image, &p, err, sizeof err);
        cr_log_info("list image %s: peak RSS +%.1f MB (%s)", names[c], mb, err);
        cr_assert(strstr(err, tpath(names[c])) && strstr(err, "line 1"), "error: %s", err);
        cr_assert(strstr(err, c == 0 ? "not a JPEG or PNG" : "PNG"), "error: %s", err);
        cr_assert(mb <= 16 * RSS_SCALE, "peak RSS grew by %.1f MB rejecting a 512 MB image file (%s)", mb, err);
    }
    rm_tmpdir();
}
