/* test/test_extension.c — the extension API (dygraph/extension.h): wrapping external memory with
 * a deleter, raw addresses and strides, the device stream, raising errors. */
#include <criterion/criterion.h>
#include <dygraph.h>
#include <dygraph/extension.h>
#include <string.h>

static int g_deleted;
static void *g_deleted_data, *g_deleted_user;
static void count_delete(void *data, void *user) { g_deleted++; g_deleted_data = data; g_deleted_user = user; }

Test(extension, from_blob_calls_the_deleter_once_after_the_last_view) {
    float buf[6] = { 1, 2, 3, 4, 5, 6 };
    int tag;
    g_deleted = 0;
    dg_tensor *t = dg_from_blob(buf, DG_SHAPE(2, 3), DG_F32, dg_cpu(), count_delete, &tag);
    cr_assert(t, "%s", dg_last_error());
    cr_expect_eq(dg_tensor_ptr(t), (void *)buf, "no copy: the tensor is the caller's memory");
    cr_expect_eq(dg_stride(t, 0), 3);
    cr_expect_eq(dg_stride(t, -1), 1);
    dg_tensor *v = dg_transpose(t, 0, 1);          /* a view shares the blob */
    cr_assert(v, "%s", dg_last_error());
    cr_expect_eq(dg_stride(v, 0), 1);
    dg_tensor *s = dg_sum_all(v);
    cr_expect_float_eq(dg_item(s), 21.0, 1e-6);
    dg_tensor_free(t);
    cr_expect_eq(g_deleted, 0, "a view still uses the memory");
    dg_tensor_free(v);
    cr_expect_eq(g_deleted, 1);
    cr_expect_eq(g_deleted_data, (void *)buf);
    cr_expect_eq(g_deleted_user, (void *)&tag);
    dg_tensor_free(s);
}

Test(extension, from_blob_without_a_deleter_leaves_the_memory_to_the_caller) {
    float *buf = malloc(4 * sizeof *buf);
    for (int i = 0; i < 4; i++) buf[i] = (float)i;
    dg_tensor *t = dg_from_blob(buf, DG_SHAPE(4), DG_F32, dg_cpu(), NULL, NULL);
    cr_assert(t, "%s", dg_last_error());
    dg_tensor *twice = dg_mul_scalar(t, 2.0);
    cr_expect_float_eq(dg_get(twice, (int64_t[]){ 3 }), 6.0, 1e-6);
    dg_tensor_free(t);
    buf[0] = 42;                                    /* still the caller's, still valid */
    cr_expect_float_eq(buf[0], 42.0f, 0);
    free(buf);
    dg_tensor_free(twice);
}

Test(extension, from_blob_rejects_bad_arguments_and_keeps_ownership) {
    float buf[2];
    g_deleted = 0;
    dg_clear_error();
    cr_expect_null(dg_from_blob(NULL, DG_SHAPE(2), DG_F32, dg_cpu(), count_delete, NULL));
    cr_expect(strstr(dg_last_error(), "from_blob"), "%s", dg_last_error());
    dg_clear_error();
    cr_expect_null(dg_from_blob(buf, DG_SHAPE(2), (dg_dtype)99, dg_cpu(), count_delete, NULL));
    cr_expect(strstr(dg_last_error(), "dtype"), "%s", dg_last_error());
    dg_clear_error();
    cr_expect_null(dg_from_blob(buf, DG_SHAPE(2), DG_F32, (dg_device){ DG_CUDA, 7 }, count_delete, NULL));
    cr_expect_eq(g_deleted, 0, "a failed wrap never frees the caller's memory");
    dg_clear_error();
    dg_tensor *t = dg_from_blob(buf, DG_SHAPE(2), DG_F32, dg_cpu(), NULL, NULL);
    cr_expect_eq(dg_stride(t, 5), 0);
    cr_expect(strstr(dg_last_error(), "axis 5"), "%s", dg_last_error());
    dg_clear_error();
    dg_tensor_free(t);
}

Test(extension, cpu_has_no_stream_and_errors_carry_the_callers_location) {
    cr_expect_null(dg_device_stream(dg_cpu()));
    dg_clear_error();
    cr_expect_not(dg_has_error());
    DG_RAISE(DG_EFORMAT, "my_dataset: record %d is short", 7);
    cr_expect(dg_has_error());
    cr_expect_eq(dg_last_status(), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "my_dataset: record 7 is short (test/test_extension.c:"), "%s", dg_last_error());
    dg_clear_error();
}
