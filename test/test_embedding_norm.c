/* test/test_embedding_norm.c — embedding (dense and sparse gradients, padding_idx, max_norm),
 * layer_norm and group_norm: PyTorch goldens (test/goldens/make_seq_goldens.py) in f32 and f64,
 * finite-difference checks, the sparse gradient's bookkeeping, and bad input. */
#include "golden_check.h"

/* ------------------------------------------------------------------------------- goldens */
static dg_tensor *run_seq_op(golden *g, dg_tensor *in, dg_tensor *w, dg_tensor *b) {
    int kind = (int)param(g, "iparams", 0);
    bool a = param(g, "iparams", 1) != 0;
    int64_t bb = param(g, "iparams", 2);
    int n = (int)param(g, "iparams", 3);
    double f0 = dg_get(golden_get(g, "fparams"), (int64_t[]){0}), f1 = dg_get(golden_get(g, "fparams"), (int64_t[]){1});
    if (kind == 0) {
        dg_embedding_params p = dg_embedding_default_params();
        if (a) p.padding_idx = bb;
        p.max_norm = f0;
        p.norm_type = f1;
        return dg_embedding(in, w, p);
    }
    if (kind == 1) {
        dg_shape ns = { .ndim = n };
        for (int i = 0; i < n; i++) ns.d[i] = param(g, "iparams", 4 + i);
        return dg_layer_norm(in, ns, w, b, f0);
    }
    return dg_group_norm(in, bb, w, b, f0);
}

static void run_seq(const char *file) {
    golden *g = load(file);
    bool embedding = param(g, "iparams", 0) == 0, affine = embedding || param(g, "iparams", 1) != 0;
    for (int pass = 0; pass < 2; pass++) {
        dg_dtype dt = pass ? DG_F64 : DG_F32;
        dg_scope *s = dg_scope_begin();
        dg_tensor *x = embedding ? golden_get(g, "ids") : golden_leaf(g, "x");
        dg_tensor *w = affine ? golden_leaf(g, "w") : NULL, *b = affine && !embedding ? golden_leaf(g, "b") : NULL;
        if (pass) {   /* the same leaves in f64 */
            dg_tensor **leaves[3] = { embedding ? NULL : &x, &w, &b };
            for (int i = 0; i < 3; i++)
                if (leaves[i] && *leaves[i]) { *leaves[i] = dg_detach(dg_cast(*leaves[i], DG_F64)); dg_set_requires_grad(*leaves[i], true); }
        }
        dg_tensor *out = run_seq_op(g, x, w, b);
        cr_assert(out && dg_dtype_of(out) == dt, "%s: the op failed: %s", file, dg_last_error());
        expect_close(file, pass ? "out (f64)" : "out", dg_cast(out, DG_F32), golden_get(g, "out"), TOL_VALUE);
        cr_assert_eq(dg_backward(dg_sum_all(dg_mul(out, dg_cast(golden_get(g, "gout"), dt)))), 0, "%s: backward: %s", file, dg_last_error());
        const char *names[3] = { "x", "w", "b" };
        dg_tensor *leaf[3] = { embedding ? NULL : x, w, b };
        for (int i = 0; i < 3; i++) {
            if (!leaf[i]) continue;
            char key[16];
            snprintf(key, sizeof key, "grad_%s", names[i]);
            cr_assert(dg_grad(leaf[i]), "%s: no gradient for %s", file, names[i]);
            expect_close(file, key, dg_cast(dg_grad(leaf[i]), DG_F32), golden_get(g, key), TOL_GRAD);
            if (!pass) cr_log_info("%s: %s %.2e (max relative error)", file, key,
                                   max_rel_err(dg_grad(leaf[i]), golden_get(g, key), floor_for(golden_get(g, key))));
        }
        if (embedding && dg_get(golden_get(g, "fparams"), (int64_t[]){0}) > 0)   /* max_norm rewrote the table */
            expect_close(file, "w after the renorm", dg_cast(w, DG_F32), golden_get(g, "w_after"), TOL_VALUE);
        if (!pass) cr_log_info("%s: out %.2e (max relative error)", file, max_rel_err(out, golden_get(g, "out"), floor_for(golden_get(g, "out"))));
        dg_scope_end(s);
    }
    golden_free(g);
}

Test(golden_seq, embedding_padding_idx) { run_seq("seq_embedding_pad2.txt"); }
Test(golden_seq, embedding_negative_padding_idx) { run_seq("seq_embedding_pad_neg.txt"); }
Test(golden_seq, embedding_plain_1d_ids) { run_seq("seq_embedding_plain.txt"); }
Test(golden_seq, embedding_max_norm) { run_seq("seq_embedding_max_norm.txt"); }
Test(golden_seq, embedding_max_norm_p1) { run_seq("seq_embedding_max_norm_p1.txt"); }
Test(golden_seq, layer_norm_two_dims_affine) { run_seq("seq_layer_norm_2d_affine.txt"); }
Test(golden_seq, layer_norm_last_dim_constant_row) { run_seq("seq_layer_norm_last_plain.txt"); }
Test(golden_seq, group_norm_3_groups_affine) { run_seq("seq_group_norm_3_affine.txt"); }
Test(golden_seq, group_norm_2d_input) { run_seq("seq_group_norm_2d_plain.txt"); }
Test(golden_seq, group_norm_one_group) { run_seq("seq_group_norm_1_affine.txt"); }

/* ------------------------------------------------------------------------------- gradients */
static dg_tensor *f_layer_norm(dg_tensor *const *in, void *ctx) {
    (void)ctx;
    return dg_layer_norm(in[0], DG_SHAPE(3, 4), in[1], in[2], 1e-5);
}
static dg_tensor *f_group_norm(dg_tensor *const *in, void *ctx) {
    (void)ctx;
    return dg_group_norm(in[0], 2, in[1], in[2], 1e-5);
}
/* without padding_idx: the padding row's zero gradient is a rule, not the derivative (goldens check it) */
static dg_tensor *f_embedding(dg_tensor *const *in, void *ctx) {
    return dg_embedding((const dg_tensor *)ctx, in[0], dg_embedding_default_params());
}

Test(grad_seq, finite_differences) {
    dg_manual_seed(7);
    dg_tensor *ln[3] = { gc_input(DG_SHAPE(2, 3, 4), -2, 2), gc_input(DG_SHAPE(3, 4), 0.5, 1.5), gc_input(DG_SHAPE(3, 4), -1, 1) };
    gradcheck("layer_norm", f_layer_norm, ln, 3, NULL, 1e-6);
    dg_tensor *gn[3] = { gc_input(DG_SHAPE(2, 4, 3), -2, 2), gc_input(DG_SHAPE(4), 0.5, 1.5), gc_input(DG_SHAPE(4), -1, 1) };
    gradcheck("group_norm", f_group_norm, gn, 3, NULL, 1e-6);
    dg_tensor *ids = dg_from_data(DG_SHAPE(2, 3), DG_I64, (int64_t[]){ 0, 1, 3, 3, 1, 2 });
    dg_tensor *w = gc_input(DG_SHAPE(4, 3), -1, 1);
    gradcheck("embedding", f_embedding, &w, 1, ids, 1e-6);
    for (int i = 0; i < 3; i++) { dg_tensor_free(ln[i]); dg_tensor_free(gn[i]); }
    dg_tensor_free(ids);
    dg_tensor_free(w);
}

/* ------------------------------------------------------------------------------- sparse rows */
static dg_tensor *table(void) {
    dg_manual_seed(3);
    dg_tensor *w = dg_randn(DG_SHAPE(10, 4), DG_F64);
    dg_set_requires_grad(w, true);
    return w;
}

/* sum(embedding(ids) * weighting) backpropagated; the weighting is fixed by the seed */
static void backward_through(dg_tensor *w, const int64_t *ids, int n, dg_embedding_params p, int seed) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = dg_embedding(dg_from_data(DG_SHAPE(n), DG_I64, ids), w, p);
    cr_assert(y, "%s", dg_last_error());
    dg_manual_seed((uint64_t)seed);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y, dg_uniform(dg_shape_of(y), 0.5, 1.5, DG_F64)))), 0, "%s", dg_last_error());
    dg_scope_end(s);
}

Test(sparse_grad, rows_are_the_dense_gradient_coalesced) {
    dg_tensor *wd = table(), *ws = table();
    dg_embedding_params pd = dg_embedding_default_params(), ps = pd;
    ps.sparse = true;
    pd.padding_idx = ps.padding_idx = 7;
    const int64_t a[6] = { 3, 7, 9, 3, 0, 7 }, b[4] = { 9, 5, 5, 2 };
    backward_through(wd, a, 6, pd, 11);
    backward_through(ws, a, 6, ps, 11);
    dg_tensor *ids, *rows;
    cr_assert_null(dg_grad_fn_name(ws));
    cr_assert_eq(dg_sparse_grad(ws, &ids, &rows), 3, "padding row 7 is not among the rows");
    const int64_t *u = dg_data(ids);
    cr_assert(u[0] == 0 && u[1] == 3 && u[2] == 9, "ids %lld %lld %lld", (long long)u[0], (long long)u[1], (long long)u[2]);
    cr_assert_eq(dg_dim(rows, 0), 3);
    cr_assert_eq(dg_dim(rows, 1), 4);
    /* a second backward merges: 2, 5 and 9 again */
    backward_through(wd, b, 4, pd, 12);
    backward_through(ws, b, 4, ps, 12);
    cr_assert_eq(dg_sparse_grad(ws, &ids, &rows), 5);
    u = dg_data(ids);
    for (int i = 1; i < 5; i++) cr_assert(u[i - 1] < u[i], "sorted and unique");
    /* each row equals the dense gradient's row (same sums, so to rounding) */
    dg_tensor *dense = dg_grad(wd);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++)
            cr_assert_float_eq(dg_get(rows, (int64_t[]){ i, j }), dg_get(dense, (int64_t[]){ u[i], j }), 1e-12);
    /* the dense form on request: equal to the dense run, and the rows are gone */
    cr_assert_lt(max_rel_err(dg_grad(ws), dense, 1e-6), 1e-12);
    cr_assert_eq(dg_sparse_grad(ws, NULL, NULL), 0);
    /* a later sparse backward adds to that dense gradient when folded */
    backward_through(wd, a, 6, pd, 13);
    backward_through(ws, a, 6, ps, 13);
    cr_assert_eq(dg_sparse_grad(ws, NULL, NULL), 3);
    cr_assert_lt(max_rel_err(dg_grad(ws), dg_grad(wd), 1e-6), 1e-12);
    /* clear drops both */
    backward_through(ws, b, 4, ps, 14);
    cr_assert_eq(dg_clear_grad(ws), 0);
    cr_assert_eq(dg_sparse_grad(ws, NULL, NULL), 0);
    cr_assert_null(dg_grad(ws));
    dg_tensor_free(wd);
    dg_tensor_free(ws);
}

Test(sparse_grad, an_optimizer_steps_as_with_the_dense_gradient) {
    dg_tensor *wd = table(), *ws = table();
    dg_embedding_params pd = dg_embedding_default_params(), ps = pd;
    ps.sparse = true;
    dg_optimizer *od = dg_adam(&wd, 1, dg_adam_default_params()), *os = dg_adam(&ws, 1, dg_adam_default_params());
    cr_assert(od && os, "%s", dg_last_error());
    const int64_t ids[5] = { 1, 4, 4, 8, 1 };
    for (int step = 0; step < 3; step++) {
        backward_through(wd, ids, 5, pd, 20 + step);
        backward_through(ws, ids, 5, ps, 20 + step);
        cr_assert_eq(dg_optimizer_step(od), 0, "%s", dg_last_error());
        cr_assert_eq(dg_optimizer_step(os), 0, "%s", dg_last_error());
        dg_optimizer_clear_grad(od);
        dg_optimizer_clear_grad(os);
    }
    cr_assert_lt(max_rel_err(ws, wd, 1e-6), 1e-12);
    dg_optimizer_free(od);
    dg_optimizer_free(os);
    dg_tensor_free(wd);
    dg_tensor_free(ws);
}

Test(sparse_grad, a_weight_made_by_an_op_gets_a_dense_gradient) {
    dg_tensor *w = table();
    dg_scope *s = dg_scope_begin();
    dg_embedding_params p = dg_embedding_default_params();
    p.sparse = true;
    dg_tensor *y = dg_embedding(dg_from_data(DG_SHAPE(2), DG_I64, (int64_t[]){ 1, 1 }), dg_mul_scalar(w, 2.0), p);
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    cr_assert_float_eq(dg_get(dg_grad(w), (int64_t[]){ 1, 0 }), 4.0, 1e-12);
    cr_assert_float_eq(dg_get(dg_grad(w), (int64_t[]){ 0, 0 }), 0.0, 0);
    dg_scope_end(s);
    dg_tensor_free(w);
}

/* ------------------------------------------------------------------------------- bad input */
Test(embedding_norm_errors, clear_messages) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *w = dg_randn(DG_SHAPE(5, 3), DG_F32);
    dg_embedding_params p = dg_embedding_default_params();
    cr_assert_null(dg_embedding(dg_zeros(DG_SHAPE(2), DG_F32), w, p));
    expect_error_contains("float ids", "embedding", "int64/int32");
    cr_assert_null(dg_embedding(dg_from_data(DG_SHAPE(2), DG_I64, (int64_t[]){ 1, 5 }), w, p));
    expect_error_contains("id past the table", "5", NULL);
    cr_assert_null(dg_embedding(dg_from_data(DG_SHAPE(1), DG_I64, (int64_t[]){ -1 }), w, p));
    expect_error_contains("negative id", "-1", NULL);
    p.padding_idx = 5;
    cr_assert_null(dg_embedding(dg_zeros(DG_SHAPE(2), DG_I64), w, p));
    expect_error_contains("padding_idx", "padding_idx 5", "5 embeddings");
    p = dg_embedding_default_params();
    p.max_norm = -1;
    cr_assert_null(dg_embedding(dg_zeros(DG_SHAPE(2), DG_I64), w, p));
    expect_error_contains("max_norm", "max_norm", NULL);
    cr_assert_null(dg_embedding(dg_zeros(DG_SHAPE(2), DG_I64), dg_randn(DG_SHAPE(5), DG_F32), dg_embedding_default_params()));
    expect_error_contains("1-D weight", "embedding", "[5]");

    dg_tensor *x = dg_randn(DG_SHAPE(2, 3, 4), DG_F32);
    cr_assert_null(dg_layer_norm(x, DG_SHAPE(3), NULL, NULL, 1e-5));
    expect_error_contains("layer_norm shape", "[2, 3, 4]", "[3]");
    cr_assert_null(dg_layer_norm(x, DG_SHAPE(4), dg_ones(DG_SHAPE(3), DG_F32), NULL, 1e-5));
    expect_error_contains("layer_norm weight", "weight", "[4]");
    cr_assert_null(dg_layer_norm(x, DG_SHAPE(4), dg_ones(DG_SHAPE(4), DG_F64), NULL, 1e-5));
    expect_error_contains("layer_norm dtype", "dtype", NULL);
    cr_assert_null(dg_layer_norm(x, DG_SHAPE(4), NULL, NULL, -1));
    expect_error_contains("layer_norm eps", "eps", NULL);
    cr_assert_null(dg_group_norm(x, 2, NULL, NULL, 1e-5));
    expect_error_contains("group_norm groups", "3 channels", "2 groups");
    cr_assert_null(dg_group_norm(dg_randn(DG_SHAPE(4), DG_F32), 1, NULL, NULL, 1e-5));
    expect_error_contains("group_norm rank", "[N, C, ...]", NULL);
    cr_assert_null(dg_group_norm(x, 3, NULL, dg_zeros(DG_SHAPE(4), DG_F32), 1e-5));
    expect_error_contains("group_norm bias", "bias", "[3]");
    dg_scope_end(s);
}

/* ------------------------------------------------------------------------------- layers */
static void expect_params(dg_layer *l, int n_want, const char *const *names, const dg_shape *shapes) {
    int n;
    dg_named_tensor *p = dg_layer_named_parameters(l, &n);
    cr_assert_eq(n, n_want, "%d parameters", n);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(p[i].name, names[i]);
        cr_assert_eq(dg_ndim(p[i].tensor), shapes[i].ndim, "%s rank", names[i]);
        for (int d = 0; d < shapes[i].ndim; d++) cr_assert_eq(dg_dim(p[i].tensor, d), shapes[i].d[d], "%s dim %d", names[i], d);
    }
    free(p);
}

Test(seq_layers, names_shapes_init_and_repr_are_torchs) {
    dg_manual_seed(4);
    dg_nn_embedding_params ep = dg_nn_embedding_default_params();
    ep.padding_idx = -2;
    dg_layer *emb = dg_nn_embedding(300, 16, ep);
    cr_assert(emb && dg_layer_is(emb, dg_nn_embedding_class()), "%s", dg_last_error());
    expect_params(emb, 1, (const char *[]){ "weight" }, (dg_shape[]){ DG_SHAPE(300, 16) });
    dg_tensor *w = dg_layer_parameter(emb, "weight");
    dg_scope *s = dg_scope_begin();
    /* N(0, 1) with the padding row (298) zeroed */
    cr_assert_float_eq(dg_item(dg_sum_all(dg_abs(dg_slice(w, 0, 298, 299, 1)))), 0.0, 0);
    double mean = dg_item(dg_mean_all(w)), sd = dg_item(dg_std(w, NULL, 0, true, false));
    cr_assert(fabs(mean) < 0.05 && fabs(sd - 1.0) < 0.05, "init mean %g std %g", mean, sd);
    char *r = dg_layer_to_string(emb);
    cr_assert(strstr(r, "Embedding(300, 16, padding_idx=298)"), "%s", r);
    free(r);
    dg_tensor *y = dg_forward(emb, dg_from_data(DG_SHAPE(2, 2), DG_I32, (int32_t[]){ 0, 298, 5, 7 }));
    cr_assert(y && dg_ndim(y) == 3 && dg_dim(y, 2) == 16, "%s", dg_last_error());
    cr_assert_null(dg_forward(emb, dg_zeros(DG_SHAPE(2), DG_F32)));
    expect_error_contains("float ids", "Embedding", "int64 or int32");

    dg_layer *ln = dg_nn_layer_norm(DG_SHAPE(3, 4), dg_nn_layer_norm_default_params());
    cr_assert(ln && dg_layer_is(ln, dg_nn_layer_norm_class()), "%s", dg_last_error());
    expect_params(ln, 2, (const char *[]){ "weight", "bias" }, (dg_shape[]){ DG_SHAPE(3, 4), DG_SHAPE(3, 4) });
    cr_assert_float_eq(dg_item(dg_sum_all(dg_layer_parameter(ln, "weight"))), 12.0, 0);
    r = dg_layer_to_string(ln);
    cr_assert(strstr(r, "LayerNorm((3, 4), eps=1e-05, elementwise_affine=True)"), "%s", r);
    free(r);
    dg_nn_layer_norm_params lp = dg_nn_layer_norm_default_params();
    lp.elementwise_affine = false;
    dg_layer *ln_plain = dg_nn_layer_norm(DG_SHAPE(5), lp);
    expect_params(ln_plain, 0, NULL, NULL);
    r = dg_layer_to_string(ln_plain);
    cr_assert(strstr(r, "LayerNorm((5,), eps=1e-05, elementwise_affine=False)"), "%s", r);
    free(r);
    cr_assert_null(dg_forward(ln_plain, dg_zeros(DG_SHAPE(2, 4), DG_F32)));
    expect_error_contains("layer_norm input", "[2, 4]", "[5]");

    dg_layer *gn = dg_nn_group_norm(2, 6, dg_nn_layer_norm_default_params());
    cr_assert(gn && dg_layer_is(gn, dg_nn_group_norm_class()), "%s", dg_last_error());
    expect_params(gn, 2, (const char *[]){ "weight", "bias" }, (dg_shape[]){ DG_SHAPE(6), DG_SHAPE(6) });
    r = dg_layer_to_string(gn);
    cr_assert(strstr(r, "GroupNorm(2, 6, eps=1e-05, affine=True)"), "%s", r);
    free(r);
    cr_assert_null(dg_forward(gn, dg_zeros(DG_SHAPE(2, 4, 3), DG_F32)));
    expect_error_contains("group_norm channels", "GroupNorm", "[N, 6, ...]");
    /* the layer equals the op */
    dg_tensor *x = dg_randn(DG_SHAPE(2, 6, 5), DG_F32);
    cr_assert_lt(max_rel_err(dg_forward(gn, x), dg_group_norm(x, 2, NULL, NULL, 1e-5), 1e-3), 1e-6);
    dg_scope_end(s);

    cr_assert_null(dg_nn_group_norm(4, 6, dg_nn_layer_norm_default_params()));
    expect_error_contains("groups not dividing", "GroupNorm", "divisible");
    ep.padding_idx = 300;
    cr_assert_null(dg_nn_embedding(300, 16, ep));
    expect_error_contains("padding past the table", "Embedding", "padding_idx 300");
    cr_assert_null(dg_nn_layer_norm(DG_SHAPE(0), dg_nn_layer_norm_default_params()));
    expect_error_contains("empty normalized_shape", "LayerNorm", "positive sizes");
    dg_layer_free(emb);
    dg_layer_free(ln);
    dg_layer_free(ln_plain);
    dg_layer_free(gn);
}
