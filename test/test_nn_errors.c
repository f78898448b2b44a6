/* test/test_nn_errors.c — bad input to the nn layers: every constructor and forward refuses
 * wrong arguments, shapes and dtypes with a message naming the layer, and leaks nothing. */
#include "test_util.h"

Test(nn, bad_input) {
    dg_clear_error();
    dg_scope *s = dg_scope_begin();
    dg_layer *m = dg_nn_sequential(2, dg_nn_linear(4, 3), dg_nn_linear(5, 2));
    /* a shape mismatch deep in a model names the layer, its path and the shapes */
    cr_assert_null(dg_forward(m, dg_ones(DG_SHAPE(2, 4), DG_F32)));
    expect_error_contains("linear in_features", "Linear '1' (in_features=5, out_features=2, bias=True)", "input [2, 3]");
    cr_assert_null(dg_forward(dg_layer_child(m, 0), dg_ones(DG_SHAPE(2, 4), DG_F64)));
    expect_error_contains("dtype", "float64", "float32");
    /* NULL input keeps the first message */
    cr_assert_null(dg_forward(m, dg_reshape(dg_ones(DG_SHAPE(2, 4), DG_F32), DG_SHAPE(3, 3))));
    expect_error_contains("NULL propagates", "reshape", NULL);
    cr_assert_null(dg_forward(m, NULL));
    expect_error_contains("NULL input", "Sequential", "input is NULL");
    cr_assert_null(dg_forward(NULL, dg_ones(DG_SHAPE(1), DG_F32)));
    expect_error_contains("NULL layer", "layer is NULL", NULL);

    dg_layer *conv = dg_nn_conv2d(3, 4, 3, dg_nn_conv2d_default_params());
    cr_assert_null(dg_forward(conv, dg_ones(DG_SHAPE(3, 8, 8), DG_F32)));
    expect_error_contains("conv 3-D", "Conv2d", "[3, 8, 8] must be [N, 3, H, W]");
    cr_assert_null(dg_forward(conv, dg_ones(DG_SHAPE(1, 3, 2, 8), DG_F32)));
    expect_error_contains("conv too small", "Conv2d", "too small");
    dg_layer *bn = dg_nn_batch_norm2d(4, dg_nn_batch_norm_default_params());
    cr_assert_null(dg_forward(bn, dg_ones(DG_SHAPE(2, 3, 4, 4), DG_F32)));
    expect_error_contains("bn channels", "BatchNorm2d", "[2, 3, 4, 4]");
    dg_layer *pool = dg_nn_max_pool2d(2, dg_nn_pool2d_default_params());
    cr_assert_null(dg_forward(pool, dg_ones(DG_SHAPE(4, 4), DG_F32)));
    expect_error_contains("pool 2-D", "MaxPool2d", "[4, 4]");
    dg_layer *sm = dg_nn_softmax(3);
    cr_assert_null(dg_forward(sm, dg_ones(DG_SHAPE(4, 4), DG_F32)));
    expect_error_contains("softmax axis", "Softmax", "axis 3");

    /* bad configurations */
    cr_assert_null(dg_nn_linear(0, 3));
    expect_error_contains("linear 0", "Linear", "in_features > 0");
    dg_nn_linear_params linp = dg_nn_linear_default_params();
    linp.dtype = DG_I64;
    cr_assert_null(dg_nn_linear_ext(2, 3, linp));
    expect_error_contains("linear i64", "Linear", "int64");
    dg_nn_conv2d_params ncp = dg_nn_conv2d_default_params();
    ncp.groups = 2;
    cr_assert_null(dg_nn_conv2d(3, 4, 3, ncp));
    expect_error_contains("conv groups", "Conv2d", "groups");
    cr_assert_null(dg_nn_dropout(1.5));
    expect_error_contains("dropout p", "Dropout", "p must be in [0, 1]");
    dg_nn_pool2d_params npp = dg_nn_pool2d_default_params();
    npp.padding = 2;
    cr_assert_null(dg_nn_max_pool2d(2, npp));
    expect_error_contains("pool padding", "MaxPool2d", "padding");
    cr_assert_null(dg_nn_batch_norm1d(0, dg_nn_batch_norm_default_params()));
    expect_error_contains("bn 0", "BatchNorm1d", "num_features");
    cr_assert_null(dg_nn_adaptive_avg_pool2d(0, 1));
    expect_error_contains("adaptive 0", "AdaptiveAvgPool2d", "positive");
    /* a failed constructor inside a Sequential: NULL, first message kept, the rest freed */
    cr_assert_null(dg_nn_sequential(3, dg_nn_linear(2, 2), dg_nn_linear(-1, 2), dg_nn_relu()));
    expect_error_contains("sequential with NULL", "Linear", "in_features > 0");
    cr_assert_null(dg_nn_sequential(2, dg_nn_relu(), NULL));
    expect_error_contains("sequential NULL", "Sequential", "layer 1 of 2 is NULL");
    cr_assert_eq(dg_nn_sequential_append(bn, dg_nn_relu()), DG_EINVAL);
    expect_error_contains("append to non-sequential", "BatchNorm2d", "not a Sequential");

    /* registration */
    static const dg_layer_class custom_class = DG_LAYER_CLASS("Custom"), unnamed_class = DG_LAYER_CLASS("");
    dg_layer *c = dg_layer_new(&custom_class, NULL, NULL, NULL);
    cr_assert_eq(dg_layer_add_parameter(c, "w", dg_ones(DG_SHAPE(2), DG_F32)), 0);
    cr_assert_eq(dg_layer_add_parameter(c, "w", dg_ones(DG_SHAPE(2), DG_F32)), DG_EINVAL);
    expect_error_contains("duplicate", "Custom", "'w' is already used");
    cr_assert_eq(dg_layer_add_buffer(c, "a.b", dg_ones(DG_SHAPE(2), DG_F32)), DG_EINVAL);
    expect_error_contains("dotted", "Custom", "contains '.'");
    cr_assert_eq(dg_layer_add_parameter(c, "", dg_ones(DG_SHAPE(2), DG_F32)), DG_EINVAL);
    expect_error_contains("empty", "Custom", "empty");
    dg_tensor *leaf = dg_ones(DG_SHAPE(2), DG_F32);
    dg_set_requires_grad(leaf, true);
    cr_assert_eq(dg_layer_add_parameter(c, "v", dg_mul_scalar(leaf, 2)), DG_EINVAL);
    expect_error_contains("non-leaf", "Custom", "leaf");
    cr_assert_eq(dg_layer_add_parameter(c, "i", dg_zeros(DG_SHAPE(2), DG_I64)), DG_EINVAL);
    expect_error_contains("int parameter", "Custom", "must be float");
    cr_assert_eq(dg_layer_add_parameter(c, "n", NULL), DG_EINVAL);
    expect_error_contains("NULL parameter", "Custom", "'n' is NULL");
    cr_assert_eq(dg_layer_add_sublayer(c, "me", dg_layer_ref(c)), DG_EINVAL);
    expect_error_contains("cycle", "Custom", "cycles");
    cr_assert_eq(dg_layer_add_sublayer(c, "none", NULL), DG_EINVAL);
    expect_error_contains("NULL sublayer", "Custom", "'none' is NULL");
    cr_assert_null(dg_forward(c, dg_ones(DG_SHAPE(2), DG_F32)));
    expect_error_contains("no forward", "Custom", "no forward function");
    cr_assert_null(dg_layer_new(NULL, NULL, NULL, NULL));
    expect_error_contains("no type", "type name", NULL);
    cr_assert_null(dg_layer_new(&unnamed_class, NULL, NULL, NULL));
    expect_error_contains("empty type", "type name", "empty");
    /* issue 30.4: a class that is not a class. The signature before layer classes took the type
     * name, and C only warns about passing it; a string, one that starts like the tag, an empty
     * one and zeroed or random bytes are refused, user state freed as documented. Each string is
     * its own heap block so AddressSanitizer would report a read past its end. */
    {
        static const char *names[] = { "MyLayer", "", "\x7f", "\x7f" "dgLC", "\x7f" "dgLC1x" };
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            char *str = strdup(names[i]);
            int *user = malloc(sizeof *user);
            cr_assert_null(dg_layer_new((const dg_layer_class *)(const void *)str, NULL, user, free));
            expect_error_contains("string as class", "not a dg_layer_class", "DG_LAYER_CLASS");
            cr_assert_null(dg_loss_layer_new((const dg_layer_class *)(const void *)str, NULL, NULL, NULL));
            expect_error_contains("string as loss class", "not a dg_layer_class", NULL);
            free(str);
        }
        unsigned char junk[64];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 37 + 11);
        cr_assert_null(dg_layer_new_multi((const dg_layer_class *)(const void *)junk, NULL, 2, NULL, NULL));
        expect_error_contains("garbage as class", "not a dg_layer_class", NULL);
        memset(junk, 0, sizeof junk);
        cr_assert_null(dg_layer_new((const dg_layer_class *)(const void *)junk, NULL, NULL, NULL));
        expect_error_contains("zeros as class", "not a dg_layer_class", NULL);
    }
    cr_assert_eq(dg_layer_train(NULL), DG_EINVAL);
    expect_error_contains("train NULL", "layer is NULL", NULL);
    cr_assert_null(dg_layer_parameters(NULL, NULL));
    expect_error_contains("parameters NULL", "layer is NULL", NULL);
    cr_assert_eq(dg_layer_num_parameters(NULL), -1);
    dg_clear_error();
    cr_assert_eq(dg_layer_num_parameters(c), 2, "failed registrations left traces");
    dg_layer_free(NULL);

    dg_scope_end(s);
    dg_layer_free(c);
    dg_layer_free(m);
    dg_layer_free(conv);
    dg_layer_free(bn);
    dg_layer_free(pool);
    dg_layer_free(sm);
    cr_assert_eq(dg_live_tensors(), 0, "bad input leaked %zu tensors", dg_live_tensors());
}

/* ---------------- no leaks over training-like use ---------------- */

