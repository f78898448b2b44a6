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

/* The optimizer step as an op, for optimizer authors: one SGD step through raw addresses, and
 * the errors for what the rules cannot run on. */
Test(extension, fused_update_runs_the_rule_and_checks_its_arguments) {
    dg_tensor *p = dg_from_data(DG_SHAPE(3), DG_F32, (float[]){ 1, 2, 3 });
    dg_tensor *g = dg_from_data(DG_SHAPE(3), DG_F32, (float[]){ 10, 20, 30 });
    dg_update_params u = { .kind = DG_UPD_SGD, .lr = 0.1 };
    dg_update_tensor t = { .p = dg_tensor_ptr(p), .g = dg_tensor_ptr(g), .n = 3, .step_size = 0.1 };
    cr_assert_eq(dg_fused_update(dg_cpu(), DG_F32, &u, &t, 1), 0, "%s", dg_last_error());
    for (int i = 0; i < 3; i++)
        cr_expect_float_eq(dg_get(p, (int64_t[]){ i }), 0.0, 1e-6, "p[%d] = %g", i, dg_get(p, (int64_t[]){ i }));
    cr_expect_eq(dg_fused_update(dg_cpu(), DG_F32, &u, NULL, 0), 0, "nothing to do is fine");
    dg_clear_error();
    cr_expect_eq(dg_fused_update(dg_cpu(), DG_I64, &u, &t, 1), DG_EINVAL);
    cr_expect(strstr(dg_last_error(), "fused_update"), "%s", dg_last_error());
    dg_clear_error();
    dg_update_params bad = { .kind = (dg_update_kind)42 };
    cr_expect_eq(dg_fused_update(dg_cpu(), DG_F32, &bad, &t, 1), DG_EINVAL);
    dg_clear_error();
    dg_tensor_free(p);
    dg_tensor_free(g);
}

/* dg_adopt hands a caller-owned tensor to the innermost scope, once. */
Test(extension, adopt_gives_a_tensor_to_the_innermost_scope) {
    size_t before = dg_live_tensors();
    dg_tensor *t = dg_ones(DG_SHAPE(2), DG_F32);     /* no scope: the caller's */
    dg_scope *s = dg_scope_begin();
    cr_assert_eq(dg_adopt(t), 0, "%s", dg_last_error());
    cr_expect_eq(dg_adopt(t), DG_ESTATE, "a second adopt is an error");
    dg_clear_error();
    dg_scope_end(s);
    cr_expect_eq(dg_live_tensors(), before, "the scope freed the adopted tensor");
}

/* dg_scope_owns and dg_tensor_swap_data, what a layer container and a device move build on. */
Test(extension, scope_owns_and_swap_data) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *a = dg_full(DG_SHAPE(2, 2), 1.0, DG_F32), *b = dg_full(DG_SHAPE(2, 2), 2.0, DG_F32);
    dg_tensor *c = dg_keep(dg_full(DG_SHAPE(3), 3.0, DG_F32));
    cr_expect(dg_scope_owns(s, a));
    cr_expect_not(dg_scope_owns(s, c), "kept: the caller's");
    cr_assert_eq(dg_tensor_swap_data(a, b), 0, "%s", dg_last_error());
    cr_expect_float_eq(dg_get(a, (int64_t[]){ 1, 1 }), 2.0, 0);
    cr_expect_float_eq(dg_get(b, (int64_t[]){ 0, 0 }), 1.0, 0);
    dg_clear_error();
    cr_expect_eq(dg_tensor_swap_data(a, c), DG_EINVAL, "shapes differ");
    cr_expect(strstr(dg_last_error(), "tensor_swap_data"), "%s", dg_last_error());
    dg_clear_error();
    dg_scope_end(s);
    dg_tensor_free(c);
}
