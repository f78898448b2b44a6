/* test/test_tensor.c — creation, views, host copies, printing, scopes and the RNG. */
#include "test_util.h"
#include <dygraph/extension.h>

Test(tensor, create_and_read) {
    dg_tensor *t = dg_full(DG_SHAPE(2, 3), 1.5, DG_F32);
    cr_assert_eq(dg_ndim(t), 2);
    cr_assert_eq(dg_dim(t, -1), 3);
    cr_assert_eq(dg_numel(t), 6);
    float buf[6];
    cr_assert_eq(dg_to_host(t, buf, sizeof buf), 0);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(buf[i], 1.5f, 0);
    dg_tensor *a = dg_arange(0, 5, 1, DG_I64);
    cr_assert_eq(dg_numel(a), 5);
    cr_assert_eq(dg_get(a, (int64_t[]){4}), 4.0);
    dg_tensor_free(t);
    dg_tensor_free(a);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(tensor, views_share_storage) {
    dg_scope *s = dg_scope_begin();
    float v[6] = {0, 1, 2, 3, 4, 5};
    dg_tensor *x = dg_from_data(DG_SHAPE(2, 3), DG_F32, v);
    dg_tensor *t = dg_transpose(x, 0, 1);
    cr_assert_eq(dg_dim(t, 0), 3);
    cr_assert(!dg_is_contiguous(t));
    cr_assert_eq(dg_data(t), dg_data(x));
    cr_assert_eq(dg_get(t, (int64_t[]){2, 1}), 5.0);
    dg_tensor *c = dg_contiguous(t);
    float out[6];
    dg_to_host(c, out, sizeof out);
    float want[6] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++) cr_assert_float_eq(out[i], want[i], 0);
    dg_tensor *r = dg_reshape(x, DG_SHAPE(3, -1));
    cr_assert_eq(dg_dim(r, 1), 2);
    cr_assert_eq(dg_data(r), dg_data(x), "reshape of a contiguous tensor is a view");
    dg_tensor *sl = dg_slice(x, 1, 1, 3, 1);
    cr_assert_eq(dg_get(sl, (int64_t[]){1, 0}), 4.0);
    dg_tensor *e = dg_expand(dg_slice(x, 0, 0, 1, 1), DG_SHAPE(4, 3));
    cr_assert_eq(dg_get(e, (int64_t[]){3, 2}), 2.0);
    dg_tensor *sq = dg_unsqueeze(x, 0);
    cr_assert_eq(dg_ndim(sq), 3);
    cr_assert_eq(dg_ndim(dg_squeeze(sq, 0)), 2);
    dg_scope_end(s);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(tensor, scope_frees_unless_kept) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *a = dg_ones(DG_SHAPE(4), DG_F32);
    dg_tensor *b = dg_keep(dg_add(a, a));
    dg_scope *inner = dg_scope_begin();
    dg_tensor *c = dg_keep_in_parent(dg_mul(b, b));
    dg_ones(DG_SHAPE(8), DG_F32);
    dg_scope_end(inner);
    cr_assert_eq(dg_get(c, (int64_t[]){0}), 4.0, "kept into the outer scope");
    dg_scope_end(s);
    cr_assert_eq(dg_live_tensors(), 1, "only the kept tensor survives");
    cr_assert_eq(dg_get(b, (int64_t[]){3}), 2.0);
    dg_tensor_free(b);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(tensor, rng_is_deterministic) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(42);
    dg_tensor *a = dg_randn(DG_SHAPE(1000), DG_F32);
    dg_manual_seed(42);
    dg_tensor *b = dg_randn(DG_SHAPE(1000), DG_F32);
    cr_assert_eq(memcmp(dg_data(a), dg_data(b), 4000), 0);
    dg_tensor *c = dg_randn(DG_SHAPE(1000), DG_F32);
    cr_assert_neq(memcmp(dg_data(a), dg_data(c), 4000), 0, "next draws differ");
    /* moments of N(0,1) and U(0,1) */
    double m = dg_item(dg_mean_all(a)), v = dg_item(dg_mean_all(dg_mul(a, a)));
    cr_assert(fabs(m) < 0.1 && fabs(v - 1) < 0.15, "randn mean %g var %g", m, v);
    dg_tensor *u = dg_rand(DG_SHAPE(10000), DG_F64);
    double um = dg_item(dg_mean_all(u));
    cr_assert(fabs(um - 0.5) < 0.02, "rand mean %g", um);
    cr_assert(dg_item(dg_max(u, NULL, 0, false)) < 1.0 && dg_item(dg_min(u, NULL, 0, false)) >= 0.0);
    dg_scope_end(s);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(tensor, rng_independent_of_threads) {
    dg_set_num_threads(1);
    dg_manual_seed(7);
    dg_tensor *a = dg_randn(DG_SHAPE(100000), DG_F32);
    dg_set_num_threads(2);
    dg_manual_seed(7);
    dg_tensor *b = dg_randn(DG_SHAPE(100000), DG_F32);
    cr_assert_eq(memcmp(dg_data(a), dg_data(b), 400000), 0);
    dg_tensor_free(a); dg_tensor_free(b);
}

Test(tensor, print_elides_large) {
    dg_tensor *t = dg_arange(0, 6, 1, DG_F32);
    char *s = dg_to_string(t);
    cr_assert(strstr(s, "shape=[6]") && strstr(s, "float32") && strstr(s, "[0, 1, 2, 3, 4, 5]"), "%s", s);
    free(s);
    dg_tensor *big = dg_zeros(DG_SHAPE(40, 40), DG_F32);
    s = dg_to_string(big);
    cr_assert(strstr(s, "...") != NULL, "%s", s);
    cr_assert(strlen(s) < 1000);
    free(s);
    dg_tensor_free(t); dg_tensor_free(big);
}

Test(tensor, concat_split) {
    dg_scope *sc = dg_scope_begin();
    dg_tensor *a = dg_full(DG_SHAPE(2, 2), 1, DG_F32), *b = dg_full(DG_SHAPE(2, 3), 2, DG_F32);
    dg_tensor *c = dg_concat((dg_tensor *[]){a, b}, 2, 1);
    cr_assert_eq(dg_dim(c, 1), 5);
    cr_assert_eq(dg_get(c, (int64_t[]){1, 4}), 2.0);
    dg_tensor *parts[2];
    cr_assert_eq(dg_split(c, 2, (int64_t[]){2, 3}, 1, parts), 0);
    cr_assert_eq(dg_dim(parts[1], 1), 3);
    cr_assert_eq(dg_item(dg_sum_all(parts[1])), 12.0);
    dg_scope_end(sc);
}

