/* test/test_safetensors.c — safetensors round trip, and every kind of bad file is an error that
 * names the file and a byte offset, with nothing loaded. */
#include "test_util.h"
#include <unistd.h>

static dg_tensor_dict *sample_dict(void) {
    dg_tensor_dict *d = dg_tensor_dict_new();
    dg_scope *scope = dg_scope_begin();   /* the dict keeps its own references */
    dg_tensor *a = dg_arange(0, 6, 1, DG_F32), *b = dg_full(DG_SHAPE(2, 2), -1.25, DG_F64);
    dg_tensor *c = dg_arange(0, 3, 1, DG_I64), *s = dg_scalar(7, DG_F32);
    dg_tensor *t = dg_transpose(dg_reshape(a, DG_SHAPE(2, 3)), 0, 1);   /* non-contiguous view */
    dg_tensor_dict_set(d, "layer1.0.conv1.weight", a);
    dg_tensor_dict_set(d, "bn.running_var", b);
    dg_tensor_dict_set(d, "bn.num_batches_tracked", c);
    dg_tensor_dict_set(d, "scalar", s);
    dg_tensor_dict_set(d, "transposed \"quoted\"", t);
    dg_scope_end(scope);
    return d;
}

static void *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(*len);
    cr_assert_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

Test(safetensors, round_trip) {
    char path[] = "/tmp/dg_st_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    dg_tensor_dict *d = sample_dict();
    cr_assert_eq(dg_save_safetensors(path, d), 0, "%s", dg_last_error());
    dg_tensor_dict *r = dg_load_safetensors(path);
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(dg_tensor_dict_size(r), 5);
    for (int i = 0; i < dg_tensor_dict_size(d); i++) {
        const char *name = dg_tensor_dict_name(d, i);
        dg_tensor *x = dg_tensor_dict_tensor(d, i), *y = dg_tensor_dict_get(r, name);
        cr_assert_not_null(y, "%s missing", name);
        cr_assert_eq(dg_dtype_of(x), dg_dtype_of(y));
        cr_assert_eq(dg_ndim(x), dg_ndim(y));
        for (int k = 0; k < dg_ndim(x); k++) cr_assert_eq(dg_dim(x, k), dg_dim(y, k));
        cr_assert_eq(max_rel_err(y, x, 1.0), 0.0, "%s values", name);
    }
    size_t len;
    unsigned char *b = slurp(path, &len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[i];
    cr_assert_eq((8 + hlen) % 8, 0, "data is 8-byte aligned");
    free(b);
    dg_tensor_dict_free(d);
    dg_tensor_dict_free(r);
    unlink(path);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* A file with this header and data, handed to the loader from memory. */
static dg_tensor_dict *load_bytes(const char *header, size_t data_len) {
    size_t hl = strlen(header), len = 8 + hl + data_len;
    unsigned char *b = calloc(1, len);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    dg_clear_error();
    dg_tensor_dict *d = dg_load_safetensors_buffer(b, len, "case.safetensors");
    free(b);
    return d;
}

static void expect_bad(const char *header, size_t data_len, const char *needle) {
    dg_tensor_dict *d = load_bytes(header, data_len);
    cr_assert_null(d, "should reject: %s", header);
    cr_assert(strstr(dg_last_error(), "case.safetensors"), "names the file: %s", dg_last_error());
    cr_assert(strstr(dg_last_error(), "byte"), "gives a byte offset: %s", dg_last_error());
    cr_assert(strstr(dg_last_error(), needle), "says '%s': %s", needle, dg_last_error());
    cr_assert_eq(dg_live_tensors(), 0, "nothing partially loaded");
    dg_clear_error();
}

Test(safetensors, good_minimal_and_metadata) {
    dg_tensor_dict *d = load_bytes("{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    cr_assert_not_null(d, "%s", dg_last_error());
    cr_assert_eq(dg_numel(dg_tensor_dict_get(d, "a")), 2);
    dg_tensor_dict_free(d);
    d = load_bytes("{}", 0);
    cr_assert_not_null(d);
    cr_assert_eq(dg_tensor_dict_size(d), 0);
    dg_tensor_dict_free(d);
}

Test(safetensors, bad_files) {
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "data_offsets");        /* truncated data */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,8]}}", 8, "data_offsets");      /* shape vs bytes */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "hole");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "after the last tensor");
    expect_bad("{\"a\":{\"dtype\":\"Q8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "dtype");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "key");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, "lacks");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "duplicate");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "8 dims");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4, "overflow");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", 4, "trailing");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "expected");
    expect_bad("[1,2]", 0, "expected '{'");
}

Test(safetensors, bad_lengths_and_random_bytes) {
    dg_clear_error();
    unsigned char small[5] = {1, 2, 3, 4, 5};
    cr_assert_null(dg_load_safetensors_buffer(small, sizeof small, "tiny.safetensors"));
    cr_assert(strstr(dg_last_error(), "tiny.safetensors") && strstr(dg_last_error(), "byte 0"), "%s", dg_last_error());
    dg_clear_error();
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    cr_assert_null(dg_load_safetensors_buffer(huge, sizeof huge, "huge.safetensors"));
    cr_assert(strstr(dg_last_error(), "header length"), "%s", dg_last_error());
    dg_clear_error();
    /* random files never load and never crash */
    dg_manual_seed(11);
    for (int trial = 0; trial < 200; trial++) {
        unsigned char buf[256];
        dg_tensor *r = dg_rand(DG_SHAPE(256), DG_F32);
        for (int i = 0; i < 256; i++) buf[i] = (unsigned char)(((float *)dg_data(r))[i] * 256);
        dg_tensor_free(r);
        uint64_t hl = 200;
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i));
        buf[8] = '{';
        cr_assert_null(dg_load_safetensors_buffer(buf, sizeof buf, "random.safetensors"));
        dg_clear_error();
    }
    cr_assert_null(dg_load_safetensors("/nonexistent/dir/x.safetensors"));
    cr_assert(strstr(dg_last_error(), "/nonexistent/dir/x.safetensors"));
    dg_clear_error();
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(safetensors, failed_save_keeps_old_file) {
    char path[] = "/tmp/dg_st_keep_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    dg_tensor_dict *d = sample_dict();
    cr_assert_eq(dg_save_safetensors(path, d), 0);
    size_t len0;
    void *before = slurp(path, &len0);
    /* a save that cannot complete must fail... */
    dg_clear_error();
    cr_assert_neq(dg_save_safetensors("/nonexistent/dir/x.safetensors", d), 0);
    cr_assert(strstr(dg_last_error(), "/nonexistent/dir/x.safetensors"), "%s", dg_last_error());
    dg_clear_error();
    /* ...and the earlier file is byte-identical, with no temp files left beside it */
    size_t len1;
    void *after = slurp(path, &len1);
    cr_assert_eq(len0, len1);
    cr_assert_eq(memcmp(before, after, len0), 0);
    free(before); free(after);
    dg_tensor_dict_free(d);
    unlink(path);
}
