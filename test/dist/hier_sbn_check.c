/* test/dist/hier_sbn_check.c — SyncBatchNorm under DataParallel with overlap and the hierarchical
 * MPI all-reduce (4 ranks as 2 nodes x 2): SyncBatchNorm's all-reduces run inside backward while
 * the buckets' hierarchical stages are in flight; they go on a channel of their own
 * (DG_COMM_CH_USER), so 3 steps finish instead of waiting for a bucket nobody polls.
 *   hier_sbn_check HIER OVERLAP COMM_NUM */
#include "dist_assert.h"
#include <string.h>
int main(int argc, char **argv) {
    int hier = argc > 1 ? atoi(argv[1]) : 1, overlap = argc > 2 ? atoi(argv[2]) : 1, cn = argc > 3 ? atoi(argv[3]) : 1;
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = 1; ip.quiet = true;
    DIST_ASSERT(dg_init(&ip) == 0, "init");
    dg_fleet_strategy st = dg_fleet_default_strategy();
    st.use_hierarchical_allreduce = hier;
    st.hierarchical_allreduce_inter_nranks = hier ? 2 : 0;
    st.nccl_comm_num = cn;
    st.timeout_s = 20;
    DIST_ASSERT(dg_fleet_init(true, &st) == 0, "fleet_init");
    dg_comm *c = dg_fleet_comm();
    dg_manual_seed(11);
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params(); cp.padding = 1;
    dg_nn_batch_norm_params bp = dg_nn_batch_norm_default_params();
    dg_layer *net = dg_nn_sequential(5, dg_nn_conv2d(2, 4, 3, cp), dg_nn_batch_norm2d(4, bp), dg_nn_relu(),
                                     dg_nn_conv2d(4, 3, 3, cp), dg_nn_batch_norm2d(3, bp));
    net = dg_nn_convert_sync_batch_norm(net, c);
    DIST_ASSERT(net, "convert");
    dg_dp_params dpp = dg_dp_default_params();
    dpp.overlap = overlap; dpp.bucket_mb = 1e-4; dpp.first_bucket_mb = 1e-4;
    dg_layer *dp = dg_data_parallel(net, c, dpp);
    DIST_ASSERT(dp, "data_parallel");
    for (int step = 0; step < 3; step++) {
        dg_scope *sc = dg_scope_begin();
        dg_manual_seed(200 + step + dg_comm_rank(c));
        dg_tensor *x = dg_randn(DG_SHAPE(4, 2, 6, 6), DG_F32), *t = dg_randn(DG_SHAPE(4, 3, 6, 6), DG_F32);
        dg_tensor *y = dg_forward(dp, x);
        DIST_ASSERT(y, "forward");
        DIST_ASSERT(!dg_backward(dg_dp_scale_loss(dp, dg_mse_loss(y, t))), "backward step %d", step);
        DIST_ASSERT(!dg_dp_apply_collective_grads(dp), "apply step %d", step);
        dg_scope_end(sc);
    }
    printf("hier_sbn_check: rank %d: ok\n", dg_comm_rank(c));
    dg_layer_free(dp);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
