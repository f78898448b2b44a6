/* samples/linear_fleet.c — Paddle's dynamic-graph distributed quick start's multi-card program in C: the LinearNet of
 * samples/linear_single.c with the four distributed steps marked. Run it with the launcher:
 *
 *   dgrun --nproc_per_node 2 build/bin/linear_fleet      (CPU workers, MPI)
 *   dgrun --gpus 0,1 build/bin/linear_fleet              (one GPU per worker, NCCL)
 *
 * and alone it is the single-card program (a world of one). */
#include "sample_util.h"

int main(int argc, char **argv) {
    /* the tutorial's program takes no flags of its own; --profile FILE as every sample */
    static const char *const flags[] = { SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    if (dg_init(NULL) != 0 || su_profile_start(argc, argv) != 0) { fprintf(stderr, "init: %s\n", dg_last_error()); return 1; }
    /* distributed step 1 and 2: the fleet environment (what the launcher exported) */
    if (dg_fleet_init(true, NULL) != 0) { fprintf(stderr, "fleet init: %s\n", dg_last_error()); return 1; }
    dg_manual_seed(2020 + (uint64_t)dg_fleet_worker_index());   /* each worker draws its own data */

    dg_layer *layer = dg_nn_sequential(2, dg_nn_linear(10, 10), dg_nn_linear(10, 1));   /* LinearNet */
    dg_layer *loss_fn = dg_nn_mse_loss(DG_REDUCE_MEAN);
    int n;
    dg_tensor **params = dg_layer_parameters(layer, &n);
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = 0.001;
    dg_optimizer *adam = dg_adam(params, n, adp);
    free(params);

    /* distributed step 3: distributed optimizer and model (parameters broadcast from rank 0) */
    adam = dg_fleet_distributed_optimizer(adam);
    dg_layer *dp_layer = dg_fleet_distributed_model(layer);
    if (!dp_layer || !loss_fn || !adam) { fprintf(stderr, "setup: %s\n", dg_last_error()); return 1; }

    for (int step = 0; step < 20; step++) {
        dg_scope *scope = dg_scope_begin();
        dg_tensor *inputs = dg_randn(DG_SHAPE(10, 10), DG_F32);
        dg_tensor *outputs = dg_forward(dp_layer, inputs);
        dg_tensor *labels = dg_randn(DG_SHAPE(10, 1), DG_F32);
        dg_tensor *loss = dg_loss_forward(loss_fn, outputs, labels);
        if (!loss) { fprintf(stderr, "step %d: %s\n", step, dg_last_error()); return 1; }
        printf("step:%d\tloss:[%.7g]\n", step, dg_item(loss));
        fflush(stdout);

        /* distributed step 4: scale the loss, backward, all-reduce the gradients */
        loss = dg_dp_scale_loss(dp_layer, loss);
        if (dg_backward(loss) || dg_dp_apply_collective_grads(dp_layer) || dg_optimizer_step(adam)) {
            fprintf(stderr, "step %d: %s\n", step, dg_last_error());
            return 1;
        }
        dg_optimizer_clear_grad(adam);
        dg_scope_end(scope);
    }
    dg_optimizer_free(adam);
    dg_layer_free(loss_fn);
    dg_layer_free(dp_layer);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
