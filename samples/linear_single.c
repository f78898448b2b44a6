/* samples/linear_single.c — Paddle's dynamic-graph distributed quick start's single-card program in C: LinearNet (Linear(10,10) ->
 * Linear(10,1)), MSE loss, Adam (lr 0.001), 20 steps on random batches, printing
 * `step:N\tloss:[X]` like Paddle's tutorial. */
#include "sample_util.h"

int main(int argc, char **argv) {
    /* the tutorial's program takes no flags of its own; --profile FILE as every sample */
    static const char *const flags[] = { SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    if (dg_init(NULL) != 0 || su_profile_start(argc, argv) != 0) { fprintf(stderr, "init: %s\n", dg_last_error()); return 1; }
    dg_manual_seed(2020);
    dg_layer *layer = dg_nn_sequential(2, dg_nn_linear(10, 10), dg_nn_linear(10, 1));   /* LinearNet */
    dg_layer *loss_fn = dg_nn_mse_loss(DG_REDUCE_MEAN);
    int n;
    dg_tensor **params = dg_layer_parameters(layer, &n);
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = 0.001;
    dg_optimizer *adam = dg_adam(params, n, adp);
    free(params);
    if (!layer || !loss_fn || !adam) { fprintf(stderr, "setup: %s\n", dg_last_error()); return 1; }

    for (int step = 0; step < 20; step++) {
        dg_scope *scope = dg_scope_begin();
        dg_tensor *inputs = dg_randn(DG_SHAPE(10, 10), DG_F32);
        dg_tensor *outputs = dg_forward(layer, inputs);
        dg_tensor *labels = dg_randn(DG_SHAPE(10, 1), DG_F32);
        dg_tensor *loss = dg_loss_forward(loss_fn, outputs, labels);
        if (!loss) { fprintf(stderr, "step %d: %s\n", step, dg_last_error()); return 1; }
        printf("step:%d\tloss:[%.7g]\n", step, dg_item(loss));
        if (dg_backward(loss) || dg_optimizer_step(adam)) { fprintf(stderr, "step %d: %s\n", step, dg_last_error()); return 1; }
        dg_optimizer_clear_grad(adam);
        dg_scope_end(scope);
    }
    dg_optimizer_free(adam);
    dg_layer_free(loss_fn);
    dg_layer_free(layer);
    dg_shutdown();
    return 0;
}
