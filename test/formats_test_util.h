/* test/formats_test_util.h — helpers shared by the file-format tests: a private temp folder,
 * writing plain/gzip files, small IDX files, and checking an error names file and position. */
#ifndef DG_FORMATS_TEST_UTIL_H
#define DG_FORMATS_TEST_UTIL_H

#include <zlib.h>

static char tmpdir[64];

static inline void mk_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dg_formats_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}
static inline void rm_tmpdir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}
static inline const char *tpath(const char *name) {
    static _Thread_local char buf[8][512];
    static _Thread_local int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}
static inline void write_file(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
}
static inline void write_gz(const char *path, const void *buf, size_t len) {
    gzFile g = gzopen(path, "wb");
    cr_assert_not_null(g);
    cr_assert_eq(gzwrite(g, buf, (unsigned)len), (int)len);
    cr_assert_eq(gzclose(g), Z_OK);
}
static inline void write_str(const char *path, const char *s) { write_file(path, s, strlen(s)); }

/* every substring must occur in the last error; then the error is cleared */
static inline void expect_error(const char *a, const char *b, const char *c) {
    const char *e = dg_last_error();
    cr_assert(e[0], "expected an error");
    const char *subs[3] = { a, b, c };
    for (int i = 0; i < 3; i++)
        if (subs[i]) cr_assert(strstr(e, subs[i]), "error lacks \"%s\": %s", subs[i], e);
    dg_clear_error();
}

static inline float px_at(const dg_tensor *t, int64_t c, int64_t y, int64_t x) {
    return ((const float *)dg_data(t))[(c * dg_dim(t, 1) + y) * dg_dim(t, 2) + x];
}
static inline int64_t label_of(const dg_sample *s) {
    cr_assert_eq(dg_dtype_of(s->t[1]), DG_I64);
    cr_assert_eq(dg_ndim(s->t[1]), 0);
    return *(const int64_t *)dg_data(s->t[1]);
}

/* ---- the Kaggle facial keypoints training.csv header, without its line end ---- */
static const char *const kp_header =
    "left_eye_center_x,left_eye_center_y,right_eye_center_x,right_eye_center_y,left_eye_inner_corner_x,"
    "left_eye_inner_corner_y,left_eye_outer_corner_x,left_eye_outer_corner_y,right_eye_inner_corner_x,"
    "right_eye_inner_corner_y,right_eye_outer_corner_x,right_eye_outer_corner_y,left_eyebrow_inner_end_x,"
    "left_eyebrow_inner_end_y,left_eyebrow_outer_end_x,left_eyebrow_outer_end_y,right_eyebrow_inner_end_x,"
    "right_eyebrow_inner_end_y,right_eyebrow_outer_end_x,right_eyebrow_outer_end_y,nose_tip_x,nose_tip_y,"
    "mouth_left_corner_x,mouth_left_corner_y,mouth_right_corner_x,mouth_right_corner_y,mouth_center_top_lip_x,"
    "mouth_center_top_lip_y,mouth_center_bottom_lip_x,mouth_center_bottom_lip_y,Image";

/* ---- IDX ---- */
static inline unsigned char idx_px(int i, int k) { return (unsigned char)((i * 37 + k * 11) % 256); }

static inline size_t idx_images(unsigned char *b, int n, int rows, int cols) {
    unsigned char h[16] = { 0, 0, 8, 3, 0, 0, 0, (unsigned char)n, 0, 0, 0, (unsigned char)rows, 0, 0, 0, (unsigned char)cols };
    memcpy(b, h, 16);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < rows * cols; k++) b[16 + i * rows * cols + k] = idx_px(i, k);
    return 16 + (size_t)n * rows * cols;
}
static inline size_t idx_labels(unsigned char *b, int n) {
    unsigned char h[8] = { 0, 0, 8, 1, 0, 0, 0, (unsigned char)n };
    memcpy(b, h, 8);
    for (int i = 0; i < n; i++) b[8 + i] = (unsigned char)(i * 3 % 10);
    return 8 + (size_t)n;
}


/* One gzip member (with its header) holding len bytes of buf, at the given zlib level; malloc'd. */
static inline unsigned char *ft_gzip(const void *buf, size_t len, int level, size_t *out_len) {
    z_stream z = {0};
    cr_assert_eq(deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, level >= 9 ? 9 : 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)len) + 64;
    unsigned char *out = malloc(cap);
    z.next_in = (unsigned char *)buf;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

#endif
