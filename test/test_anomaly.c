/* test/test_anomaly.c — anomaly mode (dg_set_anomaly, torch.autograd.detect_anomaly): a NaN made
 * in forward (log of a negative) fails the op naming it, its input and the layer it ran in; one
 * made in backward (sqrt's gradient at 0) fails dg_backward naming the rule, the forward op that
 * recorded the node and its layer; with the mode off the same values flow through silently. */
#include "test_util.h"

static dg_tensor *log_fw(dg_layer *self, const dg_tensor *x) { return dg_log(x); }
static dg_tensor *sqrt_fw(dg_layer *self, const dg_tensor *x) { return dg_sqrt(x); }
static const dg_layer_class log_cls = DG_LAYER_CLASS("LogHead");
static const dg_layer_class sqrt_cls = DG_LAYER_CLASS("SqrtHead");

/* Sequential(ReLU, head, ...): the head runs as sublayer '1' */
static dg_layer *net_with(const dg_layer_class *cls, dg_layer_forward_fn fn) {
    return dg_nn_sequential(2, dg_nn_tanh(), dg_layer_new(cls, fn, NULL, NULL));
}

Test(anomaly, forward_nan_names_the_op_its_input_and_the_layer) {
    dg_manual_seed(7);
    dg_layer *net = net_with(&log_cls, log_fw);
    dg_tensor *x = dg_full(DG_SHAPE(2, 3), -0.5, DG_F32);   /* tanh keeps it negative: log makes NaN */
    dg_set_anomaly(true);
    dg_tensor *y = dg_forward(net, x);
    dg_set_anomaly(false);
    cr_assert_null(y, "a NaN from log passed anomaly mode");
    const char *m = dg_last_error();
    cr_assert(strstr(m, "anomaly") && strstr(m, "op 'log'") && strstr(m, "NaN"), "message: %s", m);
    cr_assert(strstr(m, "float32 [2, 3]"), "the input's shape is missing: %s", m);
    cr_assert(strstr(m, "LogHead") && strstr(m, "'1'"), "the layer path is missing: %s", m);
    dg_clear_error();
    /* off: the same forward gives NaN and no error */
    y = dg_forward(net, x);
    cr_assert(y, "%s", dg_last_error());
    cr_assert(isnan(dg_item(dg_sum_all(y))));
    dg_tensor_free(y);
    dg_tensor_free(x);
    dg_layer_free(net);
}

Test(anomaly, backward_inf_names_the_rule_the_forward_op_and_the_layer) {
    dg_layer *head = dg_layer_new(&sqrt_cls, sqrt_fw, NULL, NULL);
    dg_layer *net = dg_nn_sequential(1, head);
    dg_tensor *x = dg_zeros(DG_SHAPE(4), DG_F32);   /* sqrt(0) = 0 is fine; its gradient 0.5 / 0 is not */
    dg_set_requires_grad(x, true);
    dg_set_anomaly(true);
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = dg_forward(net, x);
    cr_assert(y, "forward of sqrt(0) failed: %s", dg_last_error());
    int rc = dg_backward(dg_sum_all(y));
    dg_set_anomaly(false);
    cr_assert_neq(rc, 0, "an infinite gradient passed anomaly mode");
    const char *m = dg_last_error();
    cr_assert(strstr(m, "backward of 'sqrt'") && strstr(m, "infinite"), "message: %s", m);
    cr_assert(strstr(m, "recorded by the forward op 'sqrt'"), "the forward op is missing: %s", m);
    cr_assert(strstr(m, "SqrtHead") && strstr(m, "'0'"), "the layer path is missing: %s", m);
    cr_assert(strstr(m, "float32 [4]"), "the gradient's shape is missing: %s", m);
    dg_scope_end(s);
    dg_clear_error();
    /* off: backward succeeds with an infinite gradient */
    dg_clear_grad(x);
    s = dg_scope_begin();
    cr_assert_eq(dg_backward(dg_sum_all(dg_forward(net, x))), 0, "%s", dg_last_error());
    cr_assert(isinf(dg_item(dg_sum_all(dg_grad(x)))));
    dg_scope_end(s);
    dg_tensor_free(x);
    dg_layer_free(net);
}

Test(anomaly, outside_a_layer_and_on_a_clean_run) {
    dg_set_anomaly(true);
    cr_assert(dg_anomaly_enabled());
    dg_tensor *x = dg_full(DG_SHAPE(3), -1.0, DG_F64);
    dg_tensor *y = dg_sqrt(x);
    cr_assert_null(y);
    cr_assert(strstr(dg_last_error(), "op 'sqrt'") && strstr(dg_last_error(), "called outside any layer"), "%s", dg_last_error());
    dg_clear_error();
    dg_tensor *z = dg_exp(x);   /* finite: no error, and the result is kept */
    cr_assert(z, "%s", dg_last_error());
    cr_assert_float_eq(dg_item(dg_sum_all(z)), 3 * exp(-1.0), 1e-12);
    dg_set_anomaly(false);
    cr_assert(!dg_anomaly_enabled());
    dg_tensor_free(z);
    dg_tensor_free(x);
}
