/* test/test_bad_input.c — bad input returns NULL (or a negative status) with a message that
 * names the op and the shapes/dtypes; NULL inputs propagate and keep the first message. */
#include "test_util.h"

static void expect_error(dg_tensor *r, const char *op, const char *what) {
    cr_assert_null(r, "%s should fail (%s)", op, what);
    cr_assert(strstr(dg_last_error(), op) != NULL, "message for %s names the op: '%s'", what, dg_last_error());
    cr_assert(dg_last_status() < 0);
    dg_clear_error();
}

typedef dg_tensor *(*binop)(const dg_tensor *, const dg_tensor *);

Test(bad_input, binary_shapes) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32), *b = dg_ones(DG_SHAPE(4, 3), DG_F32);
    struct { const char *name; binop f; } ops[] = {
        {"add", dg_add}, {"sub", dg_sub}, {"mul", dg_mul}, {"div", dg_div},
        {"maximum", dg_maximum}, {"minimum", dg_minimum}, {"pow", dg_pow},
        {"greater", dg_greater}, {"equal", dg_equal},
    };
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        expect_error(ops[i].f(a, b), ops[i].name, "shapes [2,3] vs [4,3]");
        dg_tensor *r = ops[i].f(a, b);
        cr_assert_null(r);
        cr_assert(strstr(dg_last_error(), "[2, 3]") && strstr(dg_last_error(), "[4, 3]"), "shapes in message: %s", dg_last_error());
        dg_clear_error();
    }
    dg_scope_end(s);
}

/* Arithmetic promotes as torch does (test/int_promotion_cases.h); what stays refused names the
 * op and the dtypes. */
Test(bad_input, binary_dtypes) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *f = dg_ones(DG_SHAPE(2), DG_F32), *d = dg_ones(DG_SHAPE(2), DG_F64), *i = dg_ones(DG_SHAPE(2), DG_I64);
    dg_tensor *m = dg_greater(f, d);
    expect_error(dg_add(m, m), "add", "bool + bool");
    cr_assert_null(dg_mul(m, f));
    cr_assert(strstr(dg_last_error(), "bool") && strstr(dg_last_error(), "float32"), "%s", dg_last_error());
    dg_clear_error();
    expect_error(dg_pow(i, i), "pow", "int64 pow");
    expect_error(dg_relu(i), "relu", "int64 relu");
    expect_error(dg_mean_all(i), "mean", "int mean");
    expect_error(dg_matmul(f, d), "matmul", "mixed dtypes");
    expect_error(dg_softmax(i, -1), "softmax", "int softmax");
    dg_scope_end(s);
}

Test(bad_input, matmul_shapes) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32), *b = dg_ones(DG_SHAPE(4, 5), DG_F32);
    expect_error(dg_matmul(a, b), "matmul", "inner dims");
    cr_assert_null(dg_matmul(a, b));
    cr_assert(strstr(dg_last_error(), "3 vs 4"), "%s", dg_last_error());
    dg_clear_error();
    expect_error(dg_matmul(dg_ones(DG_SHAPE(2, 2, 3), DG_F32), dg_ones(DG_SHAPE(3, 3, 4), DG_F32)), "matmul", "batch broadcast");
    expect_error(dg_matmul(dg_scalar(1, DG_F32), a), "matmul", "0-d operand");
    expect_error(dg_linear(a, dg_ones(DG_SHAPE(2, 4), DG_F32), NULL), "linear", "in_features");
    expect_error(dg_linear(a, dg_ones(DG_SHAPE(2, 3), DG_F32), dg_ones(DG_SHAPE(3), DG_F32)), "linear", "bias");
    dg_scope_end(s);
}

Test(bad_input, shape_ops) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32);
    expect_error(dg_reshape(a, DG_SHAPE(4, 2)), "reshape", "element count");
    expect_error(dg_reshape(a, DG_SHAPE(-1, -1)), "reshape", "two -1");
    expect_error(dg_transpose(a, 0, 5), "transpose", "axis");
    expect_error(dg_permute(a, (int[]){0, 0}), "permute", "not a permutation");
    expect_error(dg_squeeze(a, 1), "squeeze", "non-1 axis");
    expect_error(dg_expand(a, DG_SHAPE(2, 4)), "expand", "bad expand");
    expect_error(dg_slice(a, 3, 0, 1, 1), "slice", "axis");
    expect_error(dg_concat((dg_tensor *[]){a, dg_ones(DG_SHAPE(3, 3), DG_F32)}, 2, 1), "concat", "other axis differs");
    dg_tensor *out[2];
    cr_assert_neq(dg_split(a, 2, NULL, 1, out), 0);
    cr_assert(strstr(dg_last_error(), "split"));
    dg_clear_error();
    expect_error(dg_sum(a, (int[]){2}, 1, false), "sum", "axis");
    expect_error(dg_argmax(a, 2, false), "argmax", "axis");
    expect_error(dg_index_select(a, dg_ones(DG_SHAPE(2), DG_F32), 0), "index_select", "float index");
    expect_error(dg_index_select(a, dg_full(DG_SHAPE(1), 7, DG_I64), 0), "index_select", "index out of range");
    expect_error(dg_gather(a, dg_ones(DG_SHAPE(3, 1), DG_I64), 1), "gather", "index shape");
    dg_scope_end(s);
}

Test(bad_input, losses) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *x = dg_ones(DG_SHAPE(4, 3), DG_F32);
    expect_error(dg_mse_loss(x, dg_ones(DG_SHAPE(4, 1), DG_F32)), "mse_loss", "shape");
    expect_error(dg_cross_entropy(x, dg_ones(DG_SHAPE(4), DG_F32)), "cross_entropy", "float labels");
    expect_error(dg_cross_entropy(x, dg_ones(DG_SHAPE(3), DG_I64)), "cross_entropy", "label count");
    expect_error(dg_cross_entropy(x, dg_full(DG_SHAPE(4), 3, DG_I64)), "cross_entropy", "label out of range");
    expect_error(dg_cross_entropy(x, dg_full(DG_SHAPE(4), -1, DG_I64)), "cross_entropy", "negative label");
    expect_error(dg_accuracy(x, dg_ones(DG_SHAPE(4), DG_F32), 1), "accuracy", "float labels");
    expect_error(dg_binary_cross_entropy_with_logits(x, dg_ones(DG_SHAPE(3, 4), DG_F32), DG_REDUCE_MEAN),
                 "binary_cross_entropy_with_logits", "shape");
    dg_scope_end(s);
}

Test(bad_input, null_propagates_first_message) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32), *b = dg_ones(DG_SHAPE(5), DG_F32);
    /* the first failure is the add; everything after sees NULL and keeps that message */
    dg_tensor *y = dg_mean_all(dg_relu(dg_matmul(dg_add(a, b), a)));
    cr_assert_null(y);
    cr_assert(strstr(dg_last_error(), "add:") == dg_last_error(), "first message kept: %s", dg_last_error());
    cr_assert_neq(dg_backward(y), 0);
    cr_assert(isnan(dg_item(NULL)));
    dg_clear_error();
    expect_error(dg_exp(NULL), "exp", "NULL");
    expect_error(dg_matmul(NULL, a), "matmul", "NULL");
    expect_error(dg_reshape(NULL, DG_SHAPE(1)), "reshape", "NULL");
    expect_error(dg_cross_entropy(a, NULL), "cross_entropy", "NULL");
    cr_assert_neq(dg_to_host(a, NULL, 0), 0);
    dg_clear_error();
    cr_assert_neq(dg_set_requires_grad(dg_ones(DG_SHAPE(1), DG_I64), true), 0, "int tensors cannot require grad");
    dg_clear_error();
    dg_scope_end(s);
}

Test(bad_input, inplace_on_grad_leaf_refused) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *p = dg_ones(DG_SHAPE(3), DG_F32);
    dg_set_requires_grad(p, true);
    cr_assert_eq(dg_fill_(p, 2.0), DG_ESTATE);
    cr_assert(strstr(dg_last_error(), "no_grad"), "%s", dg_last_error());
    dg_clear_error();
    dg_no_grad_begin();
    cr_assert_eq(dg_axpy_(p, -0.5, dg_ones(DG_SHAPE(3), DG_F32)), 0);
    dg_no_grad_end();
    cr_assert_float_eq(dg_get(p, (int64_t[]){0}), 0.5, 0);
    cr_assert_neq(dg_copy_(dg_ones(DG_SHAPE(3), DG_F32), dg_ones(DG_SHAPE(4), DG_F32)), 0);
    cr_assert(strstr(dg_last_error(), "copy_"));
    dg_clear_error();
    cr_assert_neq(dg_set_device("tpu"), 0);
    cr_assert(strstr(dg_last_error(), "tpu"));
    dg_clear_error();
    dg_scope_end(s);
}

/* Sizes no machine holds fail cleanly: an element count whose byte size overflows, and a
 * 4 TB tensor the allocator cannot give (neither crashes, wraps around or returns a tiny block). */
Test(bad_input, impossible_sizes) {
    dg_clear_error();
    cr_assert_null(dg_zeros(DG_SHAPE((int64_t)1 << 40, (int64_t)1 << 40), DG_F32));
    cr_assert(strstr(dg_last_error(), "more elements than memory can hold"), "%s", dg_last_error());
    dg_clear_error();
    cr_assert_null(dg_empty(DG_SHAPE((int64_t)1 << 40), DG_F32));
    cr_assert(strstr(dg_last_error(), "out of memory"), "%s", dg_last_error());
    dg_clear_error();
    dg_tensor *ok = dg_zeros(DG_SHAPE(1 << 20), DG_F32);   /* and the allocator still works */
    cr_assert_not_null(ok, "%s", dg_last_error());
    dg_tensor_free(ok);
}
