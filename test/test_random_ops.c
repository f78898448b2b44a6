/* test/test_random_ops.c — dropout2d (torch 1.13's feature dropout: a mask per (x[0], x[1])),
 * the Dropout2d layer, randint, randperm, multinomial and clip_grad_value: shapes, the
 * properties the samples must have (the numbers are the library's Philox stream, not torch's,
 * so they are not compared with torch's), determinism for a seed, and the refusals torch makes,
 * with their messages. */
#include "test_util.h"

static double at(const dg_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t ix[4] = { a, b, c, d };
    return dg_get(t, ix);
}

Test(dropout2d, one_draw_per_channel_4d) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(3);
    dg_tensor *x = dg_add_scalar(dg_rand(DG_SHAPE(8, 16, 3, 5), DG_F32), 1.0);   /* no zeros in x */
    dg_set_requires_grad(x, true);
    dg_tensor *y = dg_dropout2d(x, 0.25, true);
    cr_assert(y, "%s", dg_last_error());
    int dropped = 0;
    for (int n = 0; n < 8; n++)
        for (int c = 0; c < 16; c++) {
            bool drop = at(y, n, c, 0, 0) == 0;
            dropped += drop;
            for (int h = 0; h < 3; h++)
                for (int w = 0; w < 5; w++) {
                    double want = drop ? 0.0 : at(x, n, c, h, w) / 0.75;
                    cr_assert_float_eq(at(y, n, c, h, w), want, 1e-6, "(%d,%d,%d,%d)", n, c, h, w);
                }
        }
    cr_assert(dropped > 10 && dropped < 55, "%d of 128 channels dropped at p 0.25", dropped);
    /* the gradient is the mask */
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    for (int n = 0; n < 8; n++)
        for (int c = 0; c < 16; c++)
            cr_assert_float_eq(at(dg_grad(x), n, c, 2, 4), at(y, n, c, 0, 0) == 0 ? 0.0 : 1 / 0.75, 1e-6);
    dg_scope_end(s);
}

/* 1.13 reads a 3-D input as [N, C, L] (dropout1d's behaviour), a 2-D one as [N, C] */
Test(dropout2d, three_and_two_dims_as_torch_1_13) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_ones(DG_SHAPE(6, 10, 7), DG_F64);
    dg_tensor *y = dg_dropout2d(x, 0.5, true);
    cr_assert(y, "%s", dg_last_error());
    for (int64_t a = 0; a < 6; a++)
        for (int64_t b = 0; b < 10; b++) {
            double v0 = dg_get(y, (int64_t[]){ a, b, 0 });
            cr_assert(v0 == 0 || v0 == 2);
            for (int64_t l = 1; l < 7; l++) cr_assert_eq(dg_get(y, (int64_t[]){ a, b, l }), v0, "[%lld,%lld] varies along L", (long long)a, (long long)b);
        }
    dg_tensor *y2 = dg_dropout2d(dg_ones(DG_SHAPE(20, 30), DG_F32), 0.5, true);
    cr_assert(y2, "%s", dg_last_error());
    double kept = dg_item(dg_sum_all(y2)) / 2;
    cr_assert(kept > 200 && kept < 400, "%g of 600 kept", kept);
    dg_scope_end(s);
}

Test(dropout2d, eval_p0_p1_and_seeds) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(2, 3, 4, 4), DG_F32);
    dg_tensor *e = dg_dropout2d(x, 0.7, false), *z = dg_dropout2d(x, 0.0, true), *one = dg_dropout2d(x, 1.0, true);
    cr_assert(e && z && one);
    cr_assert_eq(max_rel_err(e, x, 1.0), 0.0);
    cr_assert_eq(max_rel_err(z, x, 1.0), 0.0);
    cr_assert_eq(dg_item(dg_sum_all(dg_abs(one))), 0.0);
    dg_generator *g = dg_generator_new(5);
    dg_dropout_params p = dg_dropout_default_params();
    p.p = 0.5;
    p.generator = g;
    dg_tensor *a = dg_dropout2d_ext(x, p);
    dg_generator_manual_seed(g, 5);
    dg_tensor *b = dg_dropout2d_ext(x, p);
    cr_assert(a && b);
    cr_assert_eq(max_rel_err(a, b, 1.0), 0.0, "same seed, same channels");
    dg_generator_free(g);
    dg_scope_end(s);
}

Test(dropout2d, refusals_name_the_op) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    cr_assert_null(dg_dropout2d(dg_ones(DG_SHAPE(5), DG_F32), 0.5, true));
    expect_error_contains("1-D", "dropout2d", "[5]");
    cr_assert_null(dg_dropout2d(dg_ones(DG_SHAPE(2, 3, 4, 4), DG_F32), 1.5, true));
    expect_error_contains("p", "dropout2d", "1.5");
    int64_t v[2] = { 1, 2 };
    cr_assert_null(dg_dropout2d(dg_from_data(DG_SHAPE(1, 2), DG_I64, v), 0.5, true));
    expect_error_contains("dtype", "dropout2d", "int64");
    dg_clear_error();
    dg_scope_end(s);
}

Test(dropout2d, layer) {
    dg_layer *l = dg_nn_dropout2d(0.5);
    cr_assert(l, "%s", dg_last_error());
    cr_assert_str_eq(dg_layer_type(l), "Dropout2d");
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_ones(DG_SHAPE(4, 8, 2, 2), DG_F32);
    dg_tensor *y = dg_forward(l, x);
    cr_assert(y, "%s", dg_last_error());
    for (int n = 0; n < 4; n++)
        for (int c = 0; c < 8; c++) cr_assert_eq(at(y, n, c, 0, 0), at(y, n, c, 1, 1));
    dg_layer_eval(l);
    cr_assert_eq(max_rel_err(dg_forward(l, x), x, 1.0), 0.0);
    dg_scope_end(s);
    dg_layer_free(l);
    dg_clear_error();
    cr_assert_null(dg_nn_dropout2d(-0.1));
    expect_error_contains("p", "Dropout2d", "p must be in [0, 1]");
    dg_clear_error();
}

Test(randint, range_shape_and_seed) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(9);
    dg_tensor *t = dg_randint(-3, 4, DG_SHAPE(10, 50));
    cr_assert(t && dg_dtype_of(t) == DG_I64 && dg_numel(t) == 500, "%s", dg_last_error());
    int seen[7] = { 0 };
    const int64_t *v = dg_data(t);
    for (int i = 0; i < 500; i++) {
        cr_assert(v[i] >= -3 && v[i] < 4, "value %lld", (long long)v[i]);
        seen[v[i] + 3]++;
    }
    for (int i = 0; i < 7; i++) cr_assert(seen[i] > 40, "value %d drawn %d times of 500", i - 3, seen[i]);
    dg_manual_seed(9);
    dg_tensor *u = dg_randint(-3, 4, DG_SHAPE(10, 50));
    cr_assert(!memcmp(dg_data(u), v, 500 * sizeof(int64_t)), "same seed, same draws");
    dg_tensor *big = dg_randint(INT64_MIN, INT64_MAX, DG_SHAPE(4));
    cr_assert(big, "%s", dg_last_error());
    dg_clear_error();
    cr_assert_null(dg_randint(5, 5, DG_SHAPE(2)));
    expect_error_contains("empty range", "randint", "low 5, high 5");
    dg_clear_error();
    dg_scope_end(s);
}

Test(randperm, is_a_permutation) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *p = dg_randperm(1000, DG_I64);
    cr_assert(p && dg_dtype_of(p) == DG_I64 && dg_ndim(p) == 1 && dg_numel(p) == 1000, "%s", dg_last_error());
    bool seen[1000] = { false };
    const int64_t *v = dg_data(p);
    int fixed = 0;
    for (int i = 0; i < 1000; i++) {
        cr_assert(v[i] >= 0 && v[i] < 1000 && !seen[v[i]], "element %d: %lld", i, (long long)v[i]);
        seen[v[i]] = true;
        fixed += v[i] == i;
    }
    cr_assert(fixed < 10, "%d fixed points: not shuffled", fixed);
    dg_tensor *f = dg_randperm(5, DG_F32), *i32 = dg_randperm(7, DG_I32), *e = dg_randperm(0, DG_I64);
    cr_assert(f && dg_dtype_of(f) == DG_F32 && i32 && dg_dtype_of(i32) == DG_I32 && e && dg_numel(e) == 0, "%s", dg_last_error());
    cr_assert_float_eq(dg_item(dg_sum_all(f)), 10.0, 1e-6);
    dg_clear_error();
    cr_assert_null(dg_randperm(-1, DG_I64));
    expect_error_contains("negative", "randperm", "-1");
    cr_assert_null(dg_randperm(3, DG_BOOL));
    expect_error_contains("dtype", "randperm", "bool");
    dg_clear_error();
    dg_scope_end(s);
}

Test(multinomial, with_replacement_follows_the_weights) {
    dg_scope *s = dg_scope_begin();
    double w[4] = { 1, 0, 3, 4 };   /* not normalised; category 1 never drawn */
    dg_tensor *p = dg_from_data(DG_SHAPE(4), DG_F64, w);
    dg_tensor *y = dg_multinomial(p, 8000, true);
    cr_assert(y && dg_dtype_of(y) == DG_I64 && dg_ndim(y) == 1 && dg_numel(y) == 8000, "%s", dg_last_error());
    int cnt[4] = { 0 };
    const int64_t *v = dg_data(y);
    for (int i = 0; i < 8000; i++) cnt[v[i]]++;
    cr_assert_eq(cnt[1], 0);
    cr_assert(abs(cnt[0] - 1000) < 150 && abs(cnt[2] - 3000) < 250 && abs(cnt[3] - 4000) < 250, "%d %d %d", cnt[0], cnt[2], cnt[3]);
    dg_scope_end(s);
}

Test(multinomial, without_replacement_2d) {
    dg_scope *s = dg_scope_begin();
    float w[3 * 5] = { 1, 1, 1, 1, 1, 0, 0, 5, 1, 0, 9, 0, 0, 0, 1 };
    dg_tensor *p = dg_from_data(DG_SHAPE(3, 5), DG_F32, w);
    dg_tensor *y = dg_multinomial(p, 2, false);
    cr_assert(y && dg_ndim(y) == 2 && dg_dim(y, 0) == 3 && dg_dim(y, 1) == 2, "%s", dg_last_error());
    for (int64_t r = 0; r < 3; r++) cr_assert_neq(dg_get(y, (int64_t[]){ r, 0 }), dg_get(y, (int64_t[]){ r, 1 }));
    /* row 1: exactly categories 2 and 3 are possible; row 2: 0 and 4 */
    double a = dg_get(y, (int64_t[]){ 1, 0 }), b = dg_get(y, (int64_t[]){ 1, 1 });
    cr_assert((a == 2 && b == 3) || (a == 3 && b == 2), "%g %g", a, b);
    a = dg_get(y, (int64_t[]){ 2, 0 }), b = dg_get(y, (int64_t[]){ 2, 1 });
    cr_assert((a == 0 && b == 4) || (a == 4 && b == 0), "%g %g", a, b);
    dg_tensor *all = dg_multinomial(p, 5, false);   /* every category once per row, zeros last */
    cr_assert(all, "%s", dg_last_error());
    dg_tensor *one = dg_multinomial(dg_cast(p, DG_BF16), 1, false);
    cr_assert(one && dg_dim(one, 1) == 1, "%s", dg_last_error());
    /* the first draw follows the weights: row [1, 3] gives 1 about three times in four */
    double w2[2] = { 1, 3 };
    int ones = 0;
    dg_tensor *p2 = dg_from_data(DG_SHAPE(2), DG_F64, w2);
    for (int i = 0; i < 2000; i++) {
        dg_scope *si = dg_scope_begin();
        ones += dg_get(dg_multinomial(p2, 1, false), (int64_t[]){ 0 }) == 1;
        dg_scope_end(si);
    }
    cr_assert(ones > 1400 && ones < 1600, "%d of 2000", ones);
    dg_scope_end(s);
}

Test(multinomial, refusals_as_torch) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    cr_assert_null(dg_multinomial(dg_zeros(DG_SHAPE(2, 3), DG_F32), 1, true));
    expect_error_contains("sum 0", "invalid multinomial distribution (sum of probabilities <= 0)", "[2, 3]");
    cr_assert_null(dg_multinomial(dg_zeros(DG_SHAPE(4), DG_F32), 10, true));
    expect_error_contains("sum 0 with replacement", "invalid multinomial distribution (sum of probabilities <= 0)", NULL);
    cr_assert_null(dg_multinomial(dg_ones(DG_SHAPE(4), DG_F32), 5, false));
    expect_error_contains("too many", "cannot sample n_sample > prob_dist.size(-1) samples without replacement", "[4]");
    cr_assert_null(dg_multinomial(dg_full(DG_SHAPE(3), -1, DG_F32), 1, true));
    expect_error_contains("negative", "multinomial", "element < 0");
    cr_assert_null(dg_multinomial(dg_full(DG_SHAPE(3), INFINITY, DG_F32), 2, true));
    expect_error_contains("inf", "multinomial", "inf");
    cr_assert_null(dg_multinomial(dg_ones(DG_SHAPE(2, 2, 2), DG_F32), 1, true));
    expect_error_contains("3-D", "prob_dist must be 1 or 2 dim", "[2, 2, 2]");
    cr_assert_null(dg_multinomial(dg_ones(DG_SHAPE(3), DG_F32), 0, true));
    expect_error_contains("0 samples", "multinomial", "n_sample <= 0");
    int64_t iv[3] = { 1, 1, 1 };
    cr_assert_null(dg_multinomial(dg_from_data(DG_SHAPE(3), DG_I64, iv), 1, true));
    expect_error_contains("int", "multinomial", "int64");
    dg_clear_error();
    dg_scope_end(s);
}

Test(clip_grad_value, clamps_in_place) {
    dg_scope *s = dg_scope_begin();
    double a[4] = { -3, -0.5, 0.25, 7 }, b[2] = { NAN, 2 };
    dg_tensor *p[3] = { dg_zeros(DG_SHAPE(4), DG_F64), dg_zeros(DG_SHAPE(2), DG_F64), dg_zeros(DG_SHAPE(2), DG_F32) };
    for (int i = 0; i < 3; i++) dg_set_requires_grad(p[i], true);
    dg_tensor *loss = dg_add(dg_sum_all(dg_mul(p[0], dg_from_data(DG_SHAPE(4), DG_F64, a))),
                             dg_sum_all(dg_mul(p[1], dg_from_data(DG_SHAPE(2), DG_F64, b))));
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());   /* p[2] has no gradient: skipped */
    cr_assert_eq(dg_clip_grad_value(p, 3, 1.0), 0, "%s", dg_last_error());
    const double want[4] = { -1, -0.5, 0.25, 1 };
    for (int64_t i = 0; i < 4; i++) cr_assert_eq(dg_get(dg_grad(p[0]), &i), want[i]);
    cr_assert(isnan(dg_get(dg_grad(p[1]), (int64_t[]){ 0 })), "NaN stays NaN, as torch's clamp_");
    cr_assert_eq(dg_get(dg_grad(p[1]), (int64_t[]){ 1 }), 1.0);
    cr_assert_null(dg_grad(p[2]));
    cr_assert_eq(dg_clip_grad_value(p, 3, INFINITY), 0);
    dg_clear_error();
    cr_assert_lt(dg_clip_grad_value(p, 3, -1.0), 0);
    expect_error_contains("negative", "clip_grad_value", "-1");
    cr_assert_lt(dg_clip_grad_value(NULL, 2, 1.0), 0);
    expect_error_contains("NULL", "clip_grad_value", "params is NULL");
    dg_clear_error();
    dg_scope_end(s);
}
