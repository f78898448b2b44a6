/* test/test_onnx.c — dg_onnx_export's refusals and bookkeeping (the exported models themselves are
 * checked in ONNX Runtime by make test-onnx): NULL and bad arguments, an unwritable path named in
 * the message, a custom op (dg_record from user code), a built-in op without an ONNX form (a loss,
 * also one fed topk's traced indices) and a value the trace cannot follow (data built inside the
 * forward) each failing with a message naming it and writing no file, while a mask made with
 * comparison ops exports, as do a comparison and a where across dtypes (promoted, with Cast); and
 * the layer's train/eval modes (a mix of them), frozen parameters, grad mode and the thread's
 * trace state are as they were afterwards, on success and on failure. */
#include "test_util.h"
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];
static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dg_onnx_test_XXXXXX");
    cr_assert(mkdtemp(tmpdir));
}
static const char *tmp_path(const char *name, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s", tmpdir, name);
    return buf;
}
static bool exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

static dg_layer *small_net(void) {
    return dg_nn_sequential(3, dg_nn_linear(4, 3), dg_nn_relu(), dg_nn_linear(3, 2));
}

Test(onnx, argument_errors) {
    make_tmpdir();
    char path[128];
    tmp_path("m.onnx", path, sizeof path);
    dg_layer *net = small_net();
    dg_tensor *x = dg_randn(DG_SHAPE(1, 4), DG_F32);
    dg_onnx_export_params p = dg_onnx_export_default_params();
    cr_assert_eq(p.opset, 17);
    cr_assert(p.dynamic_batch && !p.fold_batch_norm && !strcmp(p.input_name, "input") && !strcmp(p.output_name, "output"));

    cr_assert_neq(dg_onnx_export(NULL, x, path, p), 0);
    expect_error_contains("NULL layer", "onnx_export", "layer is NULL");
    cr_assert_neq(dg_onnx_export(net, NULL, path, p), 0);
    expect_error_contains("NULL input", "onnx_export", "NULL");
    cr_assert_neq(dg_onnx_export(net, x, NULL, p), 0);
    expect_error_contains("NULL path", "onnx_export", "path is NULL");
    cr_assert_neq(dg_onnx_export(net, x, "", p), 0);
    expect_error_contains("empty path", "onnx_export", "path is empty");
    dg_onnx_export_params bad = p;
    bad.opset = 12;
    cr_assert_neq(dg_onnx_export(net, x, path, bad), 0);
    expect_error_contains("opset 12", "opset 12", "13..17");
    bad.opset = 18;
    cr_assert_neq(dg_onnx_export(net, x, path, bad), 0);
    expect_error_contains("opset 18", "opset 18", "13..17");
    bad = p;
    bad.output_name = "input";
    cr_assert_neq(dg_onnx_export(net, x, path, bad), 0);
    expect_error_contains("same names", "input_name and output_name", NULL);
    bad.output_name = NULL;
    cr_assert_neq(dg_onnx_export(net, x, path, bad), 0);
    expect_error_contains("NULL name", "input_name and output_name", NULL);
    dg_tensor *xd = dg_randn(DG_SHAPE(1, 4), DG_F64);
    cr_assert_neq(dg_onnx_export(net, xd, path, p), 0);
    expect_error_contains("float64 input", "example input is float64", NULL);
    cr_assert(!exists(path), "no file after refused calls");

    /* an unwritable place: the error names the path; nothing is left behind */
    const char *nowhere = "/nonexistent_dir_for_dg/model.onnx";
    cr_assert_neq(dg_onnx_export(net, x, nowhere, p), 0);
    expect_error_contains("unwritable path", nowhere, "No such file");
    /* a shape the layer refuses: the layer's message */
    cr_assert_neq(dg_onnx_export(net, dg_randn(DG_SHAPE(1, 5), DG_F32), path, p), 0);
    cr_assert(strstr(dg_last_error(), "Linear"), "%s", dg_last_error());
    dg_clear_error();
    cr_assert(!exists(path));

    cr_assert_eq(dg_onnx_export(net, x, path, p), 0, "%s", dg_last_error());
    cr_assert(exists(path));
    unlink(path);
    rmdir(tmpdir);
    dg_tensor_free(x);
    dg_tensor_free(xd);
    dg_layer_free(net);
}

/* ---- a custom op: y = 2x with its own backward ---- */
static int twice_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) { gi[0] = dg_mul_scalar(g, 2.0); return 0; }
static dg_tensor *twice(const dg_tensor *x) {
    dg_no_grad_begin();
    dg_tensor *y = dg_mul_scalar(x, 2.0);
    dg_no_grad_end();
    if (y && dg_needs_record(&x, 1) && !dg_record("my_twice_op", y, &x, 1, twice_bw)) { dg_tensor_free(y); return NULL; }
    return y;
}
static const dg_layer_class custom_cls = DG_LAYER_CLASS("UsesCustomOp");
static dg_tensor *custom_fw(dg_layer *self, const dg_tensor *x) { return dg_relu(twice(dg_forward(dg_layer_child(self, 0), x))); }
/* a loss inside the forward: nll_loss has no ONNX mapping (the label is a constant from before the export) */
static dg_tensor *label;
static const dg_layer_class nll_cls = DG_LAYER_CLASS("UsesNllLoss");
static dg_tensor *nll_fw(dg_layer *self, const dg_tensor *x) {
    return dg_nll_loss(dg_log_softmax(dg_forward(dg_layer_child(self, 0), x), 1), label, DG_REDUCE_SUM, -100);
}
/* batch statistics whatever the mode: a functional batch norm with training = true */
static const dg_layer_class bn_cls = DG_LAYER_CLASS("UsesTrainingBatchNorm");
static dg_tensor *bn_fw(dg_layer *self, const dg_tensor *x) {
    dg_batch_norm_params p = dg_batch_norm_default_params();
    p.training = true;
    return dg_batch_norm(dg_forward(dg_layer_child(self, 0), x), NULL, NULL, NULL, NULL, p);
}
/* a tensor built inside the forward from data read off the input: no op the trace saw made it,
 * so it would be the example's values frozen into the model */
static const dg_layer_class host_cls = DG_LAYER_CLASS("UsesHostData");
static dg_tensor *host_fw(dg_layer *self, const dg_tensor *x) {
    dg_tensor *h = dg_forward(dg_layer_child(self, 0), x);
    dg_tensor *c = dg_contiguous(dg_detach(h));
    float buf[2 * 3];
    memcpy(buf, dg_data(c), sizeof buf);
    for (int i = 0; i < 6; i++) buf[i] = buf[i] > 0 ? 1.0f : 0.0f;
    return dg_mul(h, dg_from_data(DG_SHAPE(2, 3), DG_F32, buf));
}
/* the same mask made with ops (comparison, cast, zeros_like): exported, as Greater / Cast / Expand */
static const dg_layer_class mask_cls = DG_LAYER_CLASS("UsesMask");
static dg_tensor *mask_fw(dg_layer *self, const dg_tensor *x) {
    dg_tensor *h = dg_forward(dg_layer_child(self, 0), x);
    return dg_mul(h, dg_cast(dg_greater(h, dg_zeros_like(h)), DG_F32));
}
/* a comparison and a where across dtypes (float32 with the int32 truncation of the same values):
 * promoted to float32 as the arithmetic is, so they export as Cast, then Greater and Where on one type */
static const dg_layer_class mixed_cls = DG_LAYER_CLASS("UsesMixedDtypes");
static dg_tensor *mixed_fw(dg_layer *self, const dg_tensor *x) {
    dg_tensor *h = dg_forward(dg_layer_child(self, 0), x), *t = dg_cast(h, DG_I32);
    return dg_where(dg_greater(h, t), t, h);
}
/* a loss on topk's indices used as a label: cross_entropy has no mapping, even fed a traced value */
static const dg_layer_class ce_cls = DG_LAYER_CLASS("UsesLossOnTopK");
static dg_tensor *ce_fw(dg_layer *self, const dg_tensor *x) {
    dg_tensor *h = dg_forward(dg_layer_child(self, 0), x), *ix = NULL;
    if (dg_topk(h, 1, 1, true, NULL, &ix)) return NULL;
    return dg_nll_loss(dg_log_softmax(h, 1), dg_reshape(ix, DG_SHAPE(2)), DG_REDUCE_SUM, -100);
}

static void expect_refused(const dg_layer_class *cls, dg_layer_forward_fn fw, const char *needle) {
    make_tmpdir();
    char path[128];
    tmp_path("m.onnx", path, sizeof path);
    dg_layer *l = dg_layer_new(cls, fw, NULL, NULL);
    cr_assert(l && dg_layer_add_sublayer(l, "fc", dg_nn_linear(4, 3)) == 0);
    dg_tensor *x = dg_randn(DG_SHAPE(2, 4), DG_F32);
    dg_scope *s = dg_scope_begin();
    cr_assert_not_null(dg_forward(l, x), "%s", dg_last_error());   /* the layer works ... */
    dg_scope_end(s);
    int rc = dg_onnx_export(l, x, path, dg_onnx_export_default_params());   /* ... but has no ONNX form */
    cr_assert_neq(rc, 0, "%s: exported", cls->name);
    expect_error_contains(cls->name, needle, "onnx_export");
    cr_assert(!exists(path), "%s: a file was written", cls->name);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    cr_assert(!exists(tmp));
    rmdir(tmpdir);
    dg_tensor_free(x);
    dg_layer_free(l);
}

Test(onnx, custom_op_is_refused_by_name) { expect_refused(&custom_cls, custom_fw, "'my_twice_op'"); }
Test(onnx, unmapped_op_is_refused_by_name) {
    int64_t l[2] = { 0, 2 };
    label = dg_from_data(DG_SHAPE(2), DG_I64, l);
    expect_refused(&nll_cls, nll_fw, "'nll_loss'");
    dg_tensor_free(label);
}
Test(onnx, training_batch_norm_is_refused) { expect_refused(&bn_cls, bn_fw, "'batch_norm'"); }
Test(onnx, untraceable_value_is_refused) { expect_refused(&host_cls, host_fw, "made during the forward"); }
Test(onnx, loss_on_traced_indices_is_refused) { expect_refused(&ce_cls, ce_fw, "'nll_loss'"); }

/* a mask computed from the input now exports (ONNX Runtime checks such models in make test-onnx) */
Test(onnx, mask_from_the_input_exports) {
    make_tmpdir();
    char path[128];
    tmp_path("m.onnx", path, sizeof path);
    dg_layer *l = dg_layer_new(&mask_cls, mask_fw, NULL, NULL);
    cr_assert(l && dg_layer_add_sublayer(l, "fc", dg_nn_linear(4, 3)) == 0);
    dg_tensor *x = dg_randn(DG_SHAPE(2, 4), DG_F32);
    cr_assert_eq(dg_onnx_export(l, x, path, dg_onnx_export_default_params()), 0, "%s", dg_last_error());
    cr_assert(exists(path));
    unlink(path);
    rmdir(tmpdir);
    dg_tensor_free(x);
    dg_layer_free(l);
}

/* the file holds the bytes of each of the n names (operator types are plain strings in the protobuf) */
static void expect_ops_in_file(const char *path, const char *const *names, int n) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    static char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (int i = 0; i < n; i++) {
        bool found = false;
        for (size_t k = 0; !found && k + strlen(names[i]) <= len; k++) found = !memcmp(buf + k, names[i], strlen(names[i]));
        cr_expect(found, "%s: no %s node", path, names[i]);
    }
}

/* where and greater across dtypes used to be refused (where in the forward, greater at export:
 * "ONNX compares one type"); promoted, they export with the casts in the graph */
Test(onnx, mixed_dtype_compare_and_where_export) {
    make_tmpdir();
    char path[128];
    tmp_path("m.onnx", path, sizeof path);
    dg_layer *l = dg_layer_new(&mixed_cls, mixed_fw, NULL, NULL);
    cr_assert(l && dg_layer_add_sublayer(l, "fc", dg_nn_linear(4, 3)) == 0);
    dg_tensor *x = dg_randn(DG_SHAPE(2, 4), DG_F32);
    cr_assert_eq(dg_onnx_export(l, x, path, dg_onnx_export_default_params()), 0, "%s", dg_last_error());
    expect_ops_in_file(path, (const char *[]){ "Cast", "Greater", "Where" }, 3);
    unlink(path);
    rmdir(tmpdir);
    dg_tensor_free(x);
    dg_layer_free(l);
}

Test(onnx, modes_and_flags_are_restored) {
    make_tmpdir();
    char path[128];
    tmp_path("m.onnx", path, sizeof path);
    dg_layer *net = dg_nn_sequential(3, dg_nn_linear(4, 3), dg_nn_dropout(0.5), dg_nn_linear(3, 2));
    dg_layer_eval(dg_layer_child(net, 2));   /* a mix: root and child 0, 1 training, child 2 eval */
    dg_tensor *w0 = dg_layer_parameter(net, "0.weight");
    cr_assert_eq(dg_set_requires_grad(w0, false), 0);   /* frozen */
    dg_tensor *x = dg_randn(DG_SHAPE(1, 4), DG_F32);
    dg_no_grad_begin();   /* called under no_grad: the trace still sees every op */
    cr_assert_eq(dg_onnx_export(net, x, path, dg_onnx_export_default_params()), 0, "%s", dg_last_error());
    cr_assert(!dg_is_grad_enabled(), "grad mode changed");
    dg_no_grad_end();
    cr_assert(dg_layer_is_training(net) && dg_layer_is_training(dg_layer_child(net, 0)) && dg_layer_is_training(dg_layer_child(net, 1)));
    cr_assert(!dg_layer_is_training(dg_layer_child(net, 2)));
    cr_assert(!dg_requires_grad(w0), "a frozen parameter was unfrozen");
    cr_assert(dg_requires_grad(dg_layer_parameter(net, "2.weight")));
    cr_assert(!dg_requires_grad(x) && dg_is_leaf(x), "the example input was changed");
    cr_assert(exists(path));
    /* a failure restores them too */
    cr_assert_neq(dg_onnx_export(net, x, "/nonexistent_dir_for_dg/m.onnx", dg_onnx_export_default_params()), 0);
    dg_clear_error();
    cr_assert(dg_layer_is_training(net) && !dg_layer_is_training(dg_layer_child(net, 2)) && !dg_requires_grad(w0));
    /* and the library records normally afterwards (no trace left active) */
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = dg_forward(net, x);
    cr_assert(y && dg_grad_fn_name(y));
    dg_scope_end(s);
    unlink(path);
    rmdir(tmpdir);
    dg_tensor_free(x);
    dg_layer_free(net);
}

/* An LSTM's h_n: with a dynamic batch, the squeeze of its [1, N, H] row would fix the batch, so
 * the export is refused naming the reshape; with dynamic_batch = false it exports. (The LSTM's
 * output itself exports either way: make test-onnx runs such models in ONNX Runtime.) */
static const dg_layer_class hn_cls = DG_LAYER_CLASS("ReadsLSTMHn");
static dg_tensor *hn_fw(dg_layer *self, const dg_tensor *x) {
    dg_rnn_result r;
    return dg_nn_rnn_forward(dg_layer_child(self, 0), x, NULL, NULL, NULL, false, &r) ? NULL : r.h_n;
}
Test(onnx, lstm_h_n_needs_a_fixed_batch) {
    make_tmpdir();
    char path[128];
    tmp_path("m.onnx", path, sizeof path);
    dg_nn_rnn_params rp = dg_nn_rnn_default_params();
    rp.batch_first = true;
    dg_layer *l = dg_layer_new(&hn_cls, hn_fw, NULL, NULL);
    cr_assert(l && dg_layer_add_sublayer(l, "lstm", dg_nn_rnn(DG_RNN_LSTM, 4, 3, rp)) == 0, "%s", dg_last_error());
    dg_tensor *x = dg_randn(DG_SHAPE(2, 5, 4), DG_F32);
    cr_assert_neq(dg_onnx_export(l, x, path, dg_onnx_export_default_params()), 0, "h_n exported with a dynamic batch");
    expect_error_contains("h_n, dynamic batch", "'reshape'", "dynamic_batch = false");
    cr_assert(!exists(path));
    dg_onnx_export_params p = dg_onnx_export_default_params();
    p.dynamic_batch = false;
    cr_assert_eq(dg_onnx_export(l, x, path, p), 0, "%s", dg_last_error());
    cr_assert(exists(path));
    unlink(path);
    rmdir(tmpdir);
    dg_tensor_free(x);
    dg_layer_free(l);
}
