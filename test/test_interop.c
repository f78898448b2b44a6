/* test/test_interop.c — torchvision interop. test/goldens/resnet_interop.py (run by `make
 * test` before the suite) saves torchvision's resnet18(num_classes=10) state as safetensors,
 * an input batch, its eval logits and the state after one SGD-momentum step in train mode.
 * Here dygraph's ResNet18 loads that file with zero renaming, matches the logits and the
 * post-step state, and saves its state back for the script to check from the PyTorch side. */
#include "test_util.h"

#define DIR_ "build/interop"

static void cmp(const char *what, const dg_tensor *got, const dg_tensor *want, double tol) {
    cr_assert_not_null(got, "%s: missing (%s)", what, dg_last_error());
    cr_assert_eq(dg_numel(got), dg_numel(want), "%s: %lld vs %lld elements", what, (long long)dg_numel(got), (long long)dg_numel(want));
    /* normwise: max|got - want| / max|want| (floor 1e-3). An element that cancels to ~0 carries
     * the f32 noise of its larger neighbours, so an elementwise ratio would measure noise */
    dg_scope *s = dg_scope_begin();
    double scale = dg_item(dg_max(dg_abs(dg_cast(want, DG_F64)), NULL, 0, false));
    dg_scope_end(s);
    double e = max_rel_err(got, want, fmax(1e-3, scale));
    if (getenv("DG_INTEROP_VERBOSE")) fprintf(stderr, "%-45s %.3g\n", what, e);
    cr_assert(e <= tol, "%s: rel. error %.3g > %.1g", what, e, tol);
}

Test(interop, torchvision_resnet18_load_logits_step_and_save) {
    dg_tensor_dict *io = dg_load_safetensors(DIR_ "/resnet18_io.safetensors");
    cr_assert_not_null(io, "run `make test` (it writes " DIR_ " with test/goldens/resnet_interop.py): %s", dg_last_error());
    dg_resnet_params rp = dg_resnet_default_params();
    rp.num_classes = 10;
    dg_layer *net = dg_resnet18(rp);
    dg_load_report r;
    cr_assert_eq(dg_layer_load(net, DIR_ "/resnet18_init.safetensors", dg_load_default_params(), &r), 0, "%s", dg_last_error());
    cr_assert_eq(r.loaded, 122, "every torchvision entry maps onto dygraph's by name: %d", r.loaded);

    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_tensor_dict_get(io, "x"), *y = dg_tensor_dict_get(io, "y");
    dg_layer_eval(net);
    dg_no_grad_begin();
    cmp("eval logits", dg_forward(net, x), dg_tensor_dict_get(io, "logits_eval"), 1e-4);
    dg_no_grad_end();

    dg_layer_train(net);
    int n;
    dg_tensor **params = dg_layer_parameters(net, &n);
    dg_momentum_params momp = dg_momentum_default_params();
    momp.lr = 0.1;
    momp.momentum = 0.9;
    momp.weight_decay = 1e-4;
    dg_optimizer *opt = dg_momentum(params, n, momp);
    free(params);
    dg_tensor *loss = dg_cross_entropy(dg_forward(net, x), y);
    cmp("train loss", loss, dg_tensor_dict_get(io, "loss_train"), 1e-5);
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    cr_assert_eq(dg_optimizer_step(opt), 0, "%s", dg_last_error());
    dg_scope_end(s);

    int ns;
    dg_named_tensor *sd = dg_layer_state_dict(net, &ns);
    for (int i = 0; i < ns; i++) {
        char key[256];
        snprintf(key, sizeof key, "after.%s", sd[i].name);
        cmp(key, sd[i].tensor, dg_tensor_dict_get(io, key), 1e-4);
    }
    free(sd);
    dg_optimizer_free(opt);

    /* the other way: reload the initial state and save it for the script's reader */
    cr_assert_eq(dg_layer_load(net, DIR_ "/resnet18_init.safetensors", dg_load_default_params(), NULL), 0);
    cr_assert_eq(dg_layer_save(net, DIR_ "/from_dygraph.safetensors"), 0, "%s", dg_last_error());
    dg_layer_free(net);
    dg_tensor_dict_free(io);
    cr_assert_eq(dg_live_tensors(), 0);
}
