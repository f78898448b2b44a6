/* test/test_layers_api.c — the layer API an embedder builds on: layer classes (identity by
 * address, never by name; built-in classes; DataParallel refusing other layers), layers with
 * several inputs (dg_layer_new_multi / dg_forward_multi), and moving a layer to a device
 * (dg_layer_to). */
#include "test_util.h"

/* ---------------- classes ---------------- */

static const dg_layer_class gate_class = { .name = "Gate" };
static const dg_layer_class other_gate_class = { .name = "Gate" };   /* same name, another class */
static const dg_layer_class fake_dp_class = { .name = "DataParallel" };

Test(layer_class, user_class_identity_is_by_address) {
    dg_layer *a = dg_layer_new(&gate_class, NULL, NULL, NULL), *b = dg_layer_new(&other_gate_class, NULL, NULL, NULL);
    cr_assert(a && b, "%s", dg_last_error());
    cr_assert_eq(dg_layer_class_of(a), &gate_class);
    cr_assert(dg_layer_is(a, &gate_class));
    cr_assert(!dg_layer_is(a, &other_gate_class), "one name, two classes: not the same class");
    cr_assert(!dg_layer_is(b, &gate_class));
    cr_assert_str_eq(dg_layer_type(a), "Gate");
    cr_assert_str_eq(dg_layer_type(b), "Gate");
    cr_assert(!dg_layer_is(NULL, &gate_class) && !dg_layer_is(a, NULL) && !dg_layer_class_of(NULL));
    char *s = dg_layer_to_string(a);
    cr_assert_str_eq(s, "Gate()");
    free(s);
    dg_layer_free(a);
    dg_layer_free(b);
}

Test(layer_class, built_in_classes) {
    dg_layer *lin = dg_nn_linear(3, 2), *bn1 = dg_nn_batch_norm1d(3, dg_nn_batch_norm_default_params());
    dg_layer *seq = dg_nn_sequential(2, dg_nn_linear(3, 3), dg_nn_relu());
    cr_assert(dg_layer_is(lin, dg_nn_linear_class()) && !dg_layer_is(lin, dg_nn_conv2d_class()));
    cr_assert(dg_layer_is(bn1, dg_nn_batch_norm1d_class()) && !dg_layer_is(bn1, dg_nn_batch_norm2d_class()));
    cr_assert(dg_layer_is(seq, dg_nn_sequential_class()));
    cr_assert(dg_layer_is(dg_layer_child(seq, 1), dg_nn_relu_class()));
    cr_assert_str_eq(dg_layer_class_of(lin)->name, "Linear");
    /* every built-in getter names its class the way torch does */
    const struct { const dg_layer_class *cls; const char *name; } all[] = {
        { dg_nn_linear_class(), "Linear" }, { dg_nn_conv2d_class(), "Conv2d" }, { dg_nn_max_pool2d_class(), "MaxPool2d" },
        { dg_nn_avg_pool2d_class(), "AvgPool2d" }, { dg_nn_adaptive_avg_pool2d_class(), "AdaptiveAvgPool2d" },
        { dg_nn_batch_norm1d_class(), "BatchNorm1d" }, { dg_nn_batch_norm2d_class(), "BatchNorm2d" },
        { dg_nn_dropout_class(), "Dropout" }, { dg_nn_relu_class(), "ReLU" }, { dg_nn_leaky_relu_class(), "LeakyReLU" },
        { dg_nn_sigmoid_class(), "Sigmoid" }, { dg_nn_tanh_class(), "Tanh" }, { dg_nn_gelu_class(), "GELU" },
        { dg_nn_softmax_class(), "Softmax" }, { dg_nn_flatten_class(), "Flatten" }, { dg_nn_identity_class(), "Identity" },
        { dg_nn_sequential_class(), "Sequential" }, { dg_nn_mse_loss_class(), "MSELoss" }, { dg_nn_l1_loss_class(), "L1Loss" },
        { dg_nn_cross_entropy_loss_class(), "CrossEntropyLoss" }, { dg_nn_bce_with_logits_loss_class(), "BCEWithLogitsLoss" },
        { dg_resnet_class(), "ResNet" }, { dg_resnet_basic_block_class(), "BasicBlock" },
        { dg_resnet_bottleneck_class(), "Bottleneck" }, { dg_mnist_cnn_class(), "MNIST" }, { dg_cifar_mynet_class(), "MyNet" },
        { dg_facenet_class(), "FaceNet" }, { dg_data_parallel_class(), "DataParallel" },
    };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        cr_assert(all[i].cls && !strcmp(all[i].cls->name, all[i].name), "class %zu is not %s", i, all[i].name);
        for (size_t j = 0; j < i; j++) cr_assert_neq(all[i].cls, all[j].cls, "%s and %s share a class", all[i].name, all[j].name);
    }
    dg_layer *m = dg_mnist_cnn();
    cr_assert(dg_layer_is(m, dg_mnist_cnn_class()) && dg_layer_is(dg_layer_sublayer(m, "conv1"), dg_nn_conv2d_class()));
    dg_layer_free(m);
    dg_layer_free(lin);
    dg_layer_free(bn1);
    dg_layer_free(seq);
}

/* A user layer that calls itself DataParallel is not one: the dg_dp_* calls refuse it (they
 * used to compare the name and then read its user state as theirs). */
Test(layer_class, data_parallel_refuses_other_layers) {
    int user_state = 42;
    dg_layer *fake = dg_layer_new(&fake_dp_class, NULL, &user_state, NULL), *lin = dg_nn_linear(2, 2);
    dg_clear_error();
    cr_assert_eq(dg_dp_apply_collective_grads(fake), DG_EINVAL);
    expect_error_contains("fake DataParallel", "apply_collective_grads: layer is a DataParallel, not a DataParallel",
                          "wrap it with dg_data_parallel");
    cr_assert_eq(dg_dp_no_sync(lin, true), DG_EINVAL);
    expect_error_contains("Linear as DataParallel", "no_sync: layer is a Linear, not a DataParallel", NULL);
    cr_assert_null(dg_dp_scale_loss(lin, NULL));
    expect_error_contains("scale_loss", "scale_loss", "not a DataParallel");
    cr_assert_null(dg_dp_comm(fake));
    expect_error_contains("dp_comm", "dp_comm", "not a DataParallel");
    cr_assert_null(dg_dp_module(NULL));
    expect_error_contains("dp_module NULL", "dp_module", "NULL");
    cr_assert_eq(user_state, 42);
    dg_layer_free(fake);
    dg_layer_free(lin);
}

Test(layer_class, sequential_append_checks_the_class) {
    static const dg_layer_class seq_name_class = { .name = "Sequential" };
    dg_layer *fake = dg_layer_new(&seq_name_class, NULL, NULL, NULL);
    cr_assert_eq(dg_nn_sequential_append(fake, dg_nn_relu()), DG_EINVAL);
    expect_error_contains("append to a fake Sequential", "Sequential", "not a Sequential");
    dg_layer_free(fake);
}
