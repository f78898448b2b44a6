/* test/test_formats_two_pass.c — the streaming parsers' second pass (data/formats/: mnist.json,
 * the keypoint CSV, image lists). A parser keeps records only up to its source's keep budget while
 * the file is unchecked; past it, it counts, and a valid file is read again keeping exactly the
 * counted records. Here the budget is lowered so that valid files outgrow it everywhere (before
 * the first record, mid-file, at mnist.json's switch from palette bytes to floats), from every
 * source kind (memory, gzip memory inflated window by window, plain and gzip files): each must
 * give the very dataset one pass gives, and a defect must still be found at its byte. */
#include "test_util.h"
#include <zlib.h>
#include <png.h>

#include "formats_test_util.h"
#include "../data/formats/formats.h"

static const uint64_t budgets[] = { 0, 1, 64, 300, 1000, 5000, 40000, DGF_KEEP_UNVALIDATED };
#define NBUDGETS (sizeof budgets / sizeof budgets[0])

enum { MEM, MEM_GZ, FILE_PLAIN, FILE_GZ, NKINDS };
static const char *kind_names[NKINDS] = { "memory", "gzip memory", "plain file", "gzip file" };


typedef dg_dataset *(*parse_fn)(dgf_src *s, const void *ctx);

/* text parsed from a source of the given kind with the given keep budget */
static dg_dataset *parse_as(int kind, uint64_t budget, const char *text, size_t len, parse_fn parse, const void *ctx) {
    dgf_src s;
    unsigned char *gz = NULL;
    size_t gl = 0;
    if (kind == MEM) dgf_src_open_mem(&s, text, len, "two_pass", "mem");
    if (kind == MEM_GZ) {
        gz = ft_gzip(text, len, 6, &gl);
        cr_assert_eq(dgf_src_open_buffer(&s, gz, gl, "two_pass", "memgz"), 0, "%s", dg_last_error());
    }
    if (kind == FILE_PLAIN) {
        write_file(tpath("plain"), text, len);
        cr_assert_eq(dgf_src_open_file(&s, tpath("plain"), "two_pass"), 0, "%s", dg_last_error());
    }
    if (kind == FILE_GZ) {
        write_gz(tpath("file.gz"), text, len);
        cr_assert_eq(dgf_src_open_file(&s, tpath("file.gz"), "two_pass"), 0, "%s", dg_last_error());
    }
    s.keep_budget = budget;
    dg_dataset *ds = parse(&s, ctx);
    dgf_src_close(&s);
    free(gz);
    return ds;
}

/* every sample of a and b: the same tensors, byte for byte */
static void same_dataset(dg_dataset *a, dg_dataset *b, const char *what) {
    cr_assert_not_null(b, "%s: %s", what, dg_last_error());
    cr_assert_eq(dg_dataset_len(a), dg_dataset_len(b), "%s: %lld vs %lld samples", what, (long long)dg_dataset_len(a),
                 (long long)dg_dataset_len(b));
    for (int64_t i = 0; i < dg_dataset_len(a); i++) {
        dg_sample x, y;
        cr_assert_eq(dg_dataset_get(a, i, 0, &x), 0, "%s", dg_last_error());
        cr_assert_eq(dg_dataset_get(b, i, 0, &y), 0, "%s: sample %lld: %s", what, (long long)i, dg_last_error());
        cr_assert_eq(x.n, y.n);
        for (int t = 0; t < x.n; t++) {
            cr_assert_eq(dg_numel(x.t[t]), dg_numel(y.t[t]));
            cr_assert_eq(dg_dtype_of(x.t[t]), dg_dtype_of(y.t[t]));
            size_t bytes = (size_t)dg_numel(x.t[t]) * dg_dtype_size(dg_dtype_of(x.t[t]));
            cr_assert(memcmp(dg_data(x.t[t]), dg_data(y.t[t]), bytes) == 0, "%s: sample %lld tensor %d differs", what,
                      (long long)i, t);
        }
        dg_sample_clear(&x);
        dg_sample_clear(&y);
    }
}

/* the dataset at the default budget from memory, against every kind and budget; then with a
 * defect appended, every kind and budget must fail naming the defect */
static void check_all(const char *text, size_t len, parse_fn parse, const void *ctx, int64_t want_len, const char *defect,
                      const char *defect_error) {
    dg_dataset *ref = parse_as(MEM, DGF_KEEP_UNVALIDATED, text, len, parse, ctx);
    cr_assert_not_null(ref, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(ref), want_len);
    size_t dl = strlen(defect);
    char *bad = malloc(len + dl);
    memcpy(bad, text, len);
    memcpy(bad + len, defect, dl);
    for (int kind = 0; kind < NKINDS; kind++)
        for (size_t b = 0; b < NBUDGETS; b++) {
            char what[96];
            snprintf(what, sizeof what, "%s, budget %llu", kind_names[kind], (unsigned long long)budgets[b]);
            dg_dataset *ds = parse_as(kind, budgets[b], text, len, parse, ctx);
            same_dataset(ref, ds, what);
            dg_dataset_free(ds);
            cr_assert_null(parse_as(kind, budgets[b], bad, len + dl, parse, ctx), "%s: the defect loaded", what);
            const char *e = dg_last_error();
            cr_assert(strstr(e, defect_error), "%s: error lacks \"%s\": %s", what, defect_error, e);
            dg_clear_error();
        }
    free(bad);
    dg_dataset_free(ref);
}

/* ---- mnist.json with 2x2 images ---- */
typedef struct { int split; } json_ctx;
static dg_dataset *parse_json(dgf_src *s, const void *ctx) {
    return dgf_mnist_json_parse(s, ((const json_ctx *)ctx)->split, 2);
}

Test(formats_two_pass, mnist_json) {
    mk_tmpdir();
    int counts[3] = { 90, 7, 3 };
    for (int many = 0; many < 2; many++) {   /* palette bytes; then 360 distinct values in train (floats) */
        size_t cap = 1 << 16, n = 0;
        char *t = malloc(cap);
        n += (size_t)sprintf(t + n, "[");
        for (int sp = 0; sp < 3; sp++) {
            n += (size_t)sprintf(t + n, "%s[[", sp ? ",\n" : "");
            for (int i = 0; i < counts[sp]; i++) {
                n += (size_t)sprintf(t + n, "%s[", i ? "," : "");
                for (int k = 0; k < 4; k++)
                    n += (size_t)sprintf(t + n, "%s%g", k ? "," : "", many ? (i * 4 + k) * 0.5 : (double)((i + k + sp) % 5));
                n += (size_t)sprintf(t + n, "]");
            }
            n += (size_t)sprintf(t + n, "],[");
            for (int i = 0; i < counts[sp]; i++) n += (size_t)sprintf(t + n, "%s%d", i ? "," : "", (i * 3 + sp) % 10);
            n += (size_t)sprintf(t + n, "]]");
        }
        n += (size_t)sprintf(t + n, "]\n");
        cr_assert(n < cap);
        for (int sp = 0; sp < 3; sp++) {
            json_ctx c = { sp };
            check_all(t, n, parse_json, &c, counts[sp], "x", "trailing data after the top-level array");
        }
        free(t);
    }
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- the keypoint CSV with 2x2 images ---- */
static dg_dataset *parse_csv(dgf_src *s, const void *ctx) { (void)ctx; return dgf_face_csv_parse(s, 2); }

Test(formats_two_pass, face_csv) {
    mk_tmpdir();
    size_t cap = 1 << 16, n = 0;
    char *t = malloc(cap);
    n += (size_t)sprintf(t + n, "%s\r\n", kp_header);
    int complete = 0;
    for (int r = 0; r < 60; r++) {
        bool missing = r % 7 == 3;   /* dropped rows between kept ones */
        for (int k = 0; k < 30; k++) n += (size_t)sprintf(t + n, missing && k == 5 ? "," : "%d.25,", r + k);
        n += (size_t)sprintf(t + n, "\"%d %d %d %d\"\n", r % 256, (r * 3) % 256, 7, 255 - r);
        complete += !missing;
    }
    cr_assert(n < cap);
    check_all(t, n, parse_csv, NULL, complete, "1,2\n", "the row has 2 columns, the header has 31");
    free(t);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- an image list of one 3x2 PNG under several spellings and labels ---- */
static dg_dataset *parse_list(dgf_src *s, const void *ctx) { return dgf_image_list_parse(s, ctx); }

Test(formats_two_pass, image_list) {
    mk_tmpdir();
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = 3;
    im.height = 2;
    im.format = PNG_FORMAT_RGB;
    unsigned char px[18];
    for (int k = 0; k < 18; k++) px[k] = (unsigned char)(k * 13);
    cr_assert(png_image_write_to_file(&im, tpath("a b.png"), 0, px, 0, NULL), "png write: %s", im.message);
    static const char *spell[4] = { "a b.png", "./a b.png", ".//a b.png", "././a b.png" };
    size_t cap = 1 << 16, n = 0;
    char *t = malloc(cap);
    n += (size_t)sprintf(t + n, "\xef\xbb\xbf");
    for (int i = 0; i < 300; i++) {
        n += (size_t)sprintf(t + n, "%s%s\t %d%s\n", i % 3 ? "" : "  ", spell[i % 4], i * 7 % 1000, i % 5 ? "" : "\r");
        if (i % 11 == 0) n += (size_t)sprintf(t + n, " \t\n");   /* blank lines */
    }
    cr_assert(n < cap);
    check_all(t, n, parse_list, tmpdir, 300, "a.png -1\n", "label '-1' is not a non-negative integer");
    free(t);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}
