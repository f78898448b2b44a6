/* test/test_formats_images.c — the image-list dataset: PNG (gray, RGB, RGBA) and JPEG (RGB,
 * gray) files written here with libpng/libjpeg decode to the right values; bad list lines and
 * missing, truncated or corrupt images are errors naming the file and the list line; get() is
 * safe from several threads at once. */
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

static unsigned char img_val(int c, int y, int x) { return (unsigned char)(20 + c * 40 + y * 6 + x * 4); }

static void write_png(const char *path, int w, int h, int channels) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
    unsigned char *b = malloc((size_t)w * h * channels);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < channels; c++) b[(y * w + x) * channels + c] = c == 3 ? (unsigned char)(x * 40) : img_val(c, y, x);
    cr_assert(png_image_write_to_file(&im, path, 0, b, 0, NULL), "png write: %s", im.message);
    free(b);
}

static size_t jpeg_bytes(unsigned char **out, int w, int h, int channels) {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    unsigned long len = 0;
    *out = NULL;
    jpeg_mem_dest(&ci, out, &len);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = channels;
    ci.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 100, TRUE);
    jpeg_start_compress(&ci, TRUE);
    unsigned char *row = malloc((size_t)w * channels);
    while (ci.next_scanline < ci.image_height) {
        int y = (int)ci.next_scanline;
        for (int x = 0; x < w; x++)
            for (int c = 0; c < channels; c++) row[x * channels + c] = img_val(c, y, x);
        JSAMPROW r = row;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    return len;
}

static void check_image(const dg_tensor *t, int w, int h, int channels, float tol) {
    cr_assert(dg_ndim(t) == 3 && dg_dim(t, 0) == 3 && dg_dim(t, 1) == h && dg_dim(t, 2) == w, "shape");
    cr_assert_eq(dg_dtype_of(t), DG_F32);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                float want = (float)img_val(channels == 1 ? 0 : c, y, x) / 255.0f, got = px_at(t, c, y, x);
                cr_assert(fabsf(got - want) <= tol, "c%d y%d x%d: %g vs %g", c, y, x, got, want);
            }
}

static void make_image_tree(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/img", tmpdir);
    mkdir(dir, 0755);
    write_png(tpath("img/gray.png"), 5, 4, 1);
    write_png(tpath("img/rgb.png"), 6, 3, 3);
    write_png(tpath("img/rgba a.png"), 4, 4, 4);
    unsigned char *j;
    size_t jl = jpeg_bytes(&j, 16, 8, 3);
    write_file(tpath("img/rgb.jpeg"), j, jl);
    write_file(tpath("img/cut.jpeg"), j, jl / 2);   /* truncated */
    free(j);
    jl = jpeg_bytes(&j, 8, 8, 1);
    write_file(tpath("img/gray.jpg"), j, jl);
    /* starts like a JPEG (SOI), then no valid marker */
    unsigned char junk[64] = { 0xff, 0xd8, 0xff, 0x00, 1, 2, 3 };
    write_file(tpath("img/junk.jpeg"), junk, sizeof junk);
    free(j);
    write_str(tpath("img/text.png"), "not an image");
}

Test(formats, image_list_round_trip) {
    mk_tmpdir();
    make_image_tree();
    write_str(tpath("list.txt"), "img/gray.png 3\nimg/rgb.png 0\r\n\nimg/rgba a.png 7\n  img/rgb.jpeg\t12\nimg/gray.jpg 5");
    dg_dataset *ds = dg_image_list_dataset(tmpdir, tpath("list.txt"));
    cr_assert_not_null(ds, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(ds), 5);
    const struct { int w, h, ch, label; float tol; } want[5] = {
        { 5, 4, 1, 3, 0 }, { 6, 3, 3, 0, 0 }, { 4, 4, 4, 7, 0 }, { 16, 8, 3, 12, 3.0f / 255 }, { 8, 8, 1, 5, 2.0f / 255 },
    };
    for (int i = 0; i < 5; i++) {
        dg_sample s;
        cr_assert_eq(dg_dataset_get(ds, i, 0, &s), 0, "%d: %s", i, dg_last_error());
        check_image(s.t[0], want[i].w, want[i].h, want[i].ch, want[i].tol);
        cr_assert_eq(label_of(&s), want[i].label);
        dg_sample_clear(&s);
    }
    dg_dataset_free(ds);
    /* the same list from memory, and decode_image on bytes */
    ds = dg_image_list_dataset_buffer(tmpdir, "img/rgb.png 1\n", 14, "mem");
    cr_assert_not_null(ds, "%s", dg_last_error());
    dg_sample s;
    cr_assert_eq(dg_dataset_get(ds, 0, 0, &s), 0, "%s", dg_last_error());
    check_image(s.t[0], 6, 3, 3, 0);
    dg_sample_clear(&s);
    dg_dataset_free(ds);
    unsigned char *j;
    size_t jl = jpeg_bytes(&j, 16, 8, 3);
    dg_tensor *t = dg_decode_image(j, jl, "bytes");
    cr_assert_not_null(t, "%s", dg_last_error());
    check_image(t, 16, 8, 3, 3.0f / 255);
    dg_tensor_free(t);
    cr_assert_null(dg_decode_image(j, jl - 40, "cut"));
    expect_error("decode_image 'cut'", "corrupt JPEG", NULL);
    free(j);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(formats, image_list_bad_entries) {
    mk_tmpdir();
    make_image_tree();
    write_str(tpath("list.txt"), "img/rgb.png 1\nimg/none.jpeg 2\nimg/cut.jpeg 3\nimg/junk.jpeg 4\nimg/text.png 5\nimg\n");
    /* a line without a label fails the whole list */
    cr_assert_null(dg_image_list_dataset(tmpdir, tpath("list.txt")));
    expect_error(tpath("list.txt"), "line 6", "expected 'path label'");
    write_str(tpath("list2.txt"), "img/rgb.png 1\nimg/gray.png x1\n");
    cr_assert_null(dg_image_list_dataset(tmpdir, tpath("list2.txt")));
    expect_error("line 2", "label 'x1' is not a non-negative integer", tpath("list2.txt"));
    cr_assert_null(dg_image_list_dataset(tmpdir, tpath("nolist.txt")));
    expect_error(tpath("nolist.txt"), "cannot open", NULL);

    write_str(tpath("list.txt"), "img/rgb.png 1\nimg/none.jpeg 2\nimg/cut.jpeg 3\nimg/junk.jpeg 4\nimg/text.png 5\n");
    dg_dataset *ds = dg_image_list_dataset(tmpdir, tpath("list.txt"));
    cr_assert_not_null(ds, "%s", dg_last_error());
    cr_assert_eq(dg_dataset_len(ds), 5);
    const struct { const char *file, *why; } bad[4] = {
        { "img/none.jpeg", "cannot open" }, { "img/cut.jpeg", "corrupt JPEG" },
        { "img/junk.jpeg", "corrupt JPEG" }, { "img/text.png", "not a JPEG or PNG" },
    };
    for (int i = 0; i < 4; i++) {
        dg_sample s;
        dg_clear_error();
        cr_assert_neq(dg_dataset_get(ds, i + 1, 0, &s), 0, "entry %d decoded", i + 1);
        cr_assert_eq(s.n, 0);
        char line[32];
        snprintf(line, sizeof line, "line %d", i + 2);
        expect_error(tpath(bad[i].file), line, bad[i].why);
    }
    dg_sample s;
    cr_assert_eq(dg_dataset_get(ds, 0, 0, &s), 0, "%s", dg_last_error());   /* the good one still loads */
    dg_sample_clear(&s);
    dg_dataset_free(ds);
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- get() from several threads at once gives the sequential results ---- */
typedef struct par { dg_dataset *ds; int64_t n; double *sums; int rc; } par;
static void *par_worker(void *arg) {
    par *p = arg;
    for (int rep = 0; rep < 3; rep++)
        for (int64_t i = 0; i < p->n; i++) {
            dg_sample s;
            if (dg_dataset_get(p->ds, i, 0, &s)) { p->rc = -1; return NULL; }
            double acc = 0;
            for (int64_t k = 0; k < dg_numel(s.t[0]); k++) acc += ((float *)dg_data(s.t[0]))[k] * (double)(k % 7 + 1);
            if (rep == 0) p->sums[i] = acc + (double)*(int64_t *)dg_data(s.t[1]);
            else if (p->sums[i] != acc + (double)*(int64_t *)dg_data(s.t[1])) p->rc = -2;
            dg_sample_clear(&s);
        }
    return NULL;
}

Test(formats, concurrent_get) {
    mk_tmpdir();
    make_image_tree();
    write_str(tpath("list.txt"), "img/gray.png 3\nimg/rgb.png 0\nimg/rgba a.png 7\nimg/rgb.jpeg 12\nimg/gray.jpg 5\n");
    unsigned char img[16 + 40 * 12], lab[8 + 40];
    size_t il = idx_images(img, 40, 3, 4), ll = idx_labels(lab, 40);
    dg_dataset *sets[2] = { dg_image_list_dataset(tmpdir, tpath("list.txt")), dg_mnist_idx_dataset_buffer(img, il, lab, ll, "m") };
    for (int d = 0; d < 2; d++) {
        cr_assert_not_null(sets[d], "%s", dg_last_error());
        int64_t n = dg_dataset_len(sets[d]);
        par ps[4];
        pthread_t th[4];
        for (int k = 0; k < 4; k++) {
            ps[k] = (par){ sets[d], n, calloc((size_t)n, sizeof(double)), 0 };
            pthread_create(&th[k], NULL, par_worker, &ps[k]);
        }
        for (int k = 0; k < 4; k++) pthread_join(th[k], NULL);
        for (int k = 0; k < 4; k++) {
            cr_assert_eq(ps[k].rc, 0, "thread %d failed", k);
            for (int64_t i = 0; i < n; i++)
                cr_assert_eq(ps[k].sums[i], ps[0].sums[i], "dataset %d thread %d sample %lld: %.17g vs %.17g", d, k,
                             (long long)i, ps[k].sums[i], ps[0].sums[i]);
        }
        for (int k = 0; k < 4; k++) free(ps[k].sums);
        dg_dataset_free(sets[d]);
    }
    rm_tmpdir();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- the data sets of `make data` (a prerequisite of `make test`) ---- */
