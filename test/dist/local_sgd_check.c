/* test/dist/local_sgd_check.c — Local SGD on DataParallel (dg_dp_set_local_sgd), run by
 * dgrun --nproc_per_node 2. A small MLP, each rank on its own data, SGD with momentum:
 *  1. k = 4: between averagings the ranks' parameters drift apart; at every 4th step
 *     dg_dp_local_sgd_step averages them, and they then equal the mean of the ranks' local
 *     parameters (computed here from an all-gather before the call) to 1e-6, bit-identical on
 *     every rank;
 *  2. k = 1 is ordinary DataParallel: a second net, wrapped without Local SGD and trained on the
 *     same batches, ends bit for bit where the k = 1 one does.
 * Prints "local_sgd_check: ok" on success; a failed DIST_ASSERT exits 1 naming the step. */
#include <dygraph.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dist_assert.h"

static dg_layer *make_net(void) {
    dg_manual_seed(5);
    return dg_nn_sequential(3, dg_nn_linear(6, 8), dg_nn_relu(), dg_nn_linear(8, 1));
}

/* Every parameter of net flattened into out (n floats); returns n. */
static int64_t flatten(dg_layer *net, float *out, int64_t cap) {
    int n;
    dg_tensor **p = dg_layer_parameters(net, &n);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t m = dg_numel(p[i]);
        if (at + m <= cap) dg_to_host(p[i], out + at, sizeof(float) * (size_t)m);
        at += m;
    }
    free(p);
    return at;
}

static int step(dg_layer *dp, dg_optimizer *opt, int rank, int s) {
    float x[16 * 6], y[16];
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 6; j++) x[i * 6 + j] = sinf((float)(rank * 131 + s * 17 + i * 7 + j));
        y[i] = cosf((float)(rank * 3 + s + i));
    }
    dg_scope *sc = dg_scope_begin();
    dg_tensor *loss = dg_mse_loss(dg_forward(dp, dg_from_data(DG_SHAPE(16, 6), DG_F32, x)), dg_from_data(DG_SHAPE(16, 1), DG_F32, y));
    int rc = loss ? dg_backward(dg_dp_scale_loss(dp, loss)) : -1;
    if (!rc) rc = dg_dp_apply_collective_grads(dp);
    if (!rc) rc = dg_optimizer_step(opt);
    dg_optimizer_clear_grad(opt);
    dg_scope_end(sc);
    return rc;
}

static dg_optimizer *make_opt(dg_layer *net) {
    int n;
    dg_tensor **p = dg_layer_parameters(net, &n);
    dg_momentum_params mp = dg_momentum_default_params();
    mp.lr = 0.05, mp.momentum = 0.9;
    dg_optimizer *o = dg_momentum(p, n, mp);
    free(p);
    return o;
}

int main(void) {
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = 1;
    if (dg_init(&ip) || dg_fleet_init(true, NULL)) { fprintf(stderr, "init: %s\n", dg_last_error()); return 1; }
    int rank = dg_fleet_worker_index(), world = dg_fleet_worker_num();
    dg_comm *comm = dg_fleet_comm();
    if (world < 2) { fprintf(stderr, "local_sgd_check: run with 2 ranks\n"); return 1; }
    dg_layer *net = make_net(), *dp = dg_data_parallel(net, comm, dg_dp_default_params());
    dg_optimizer *opt = dp ? make_opt(net) : NULL;
    DIST_ASSERT(!(!opt), "model");
    DIST_ASSERT(!(dg_dp_set_local_sgd(dp, 4, false)), "set_local_sgd");
    float local[256], mine[256];
    int64_t n = flatten(net, local, 256);
    bool drifted = false;
    for (int s = 0; s < 12; s++) {
        DIST_ASSERT(!(step(dp, opt, rank, s)), "step %d", s);
        flatten(net, local, 256);
        dg_scope *sc = dg_scope_begin();
        dg_tensor *all = dg_comm_all_gather(comm, dg_from_data(DG_SHAPE(n), DG_F32, local));   /* [world * n] */
        DIST_ASSERT(!(!all), "all_gather");
        float *g = malloc(sizeof(float) * (size_t)(world * n));
        dg_to_host(all, g, sizeof(float) * (size_t)(world * n));
        dg_scope_end(sc);
        for (int64_t k = 0; k < n; k++) drifted = drifted || g[k] != g[n + k];
        int r = dg_dp_local_sgd_step(dp);
        DIST_ASSERT(!(r != ((s + 1) % 4 == 0)), "step %d: local_sgd_step returned %d", s, r);
        if (r == 1) {
            flatten(net, mine, 256);
            for (int64_t k = 0; k < n; k++) {
                double mean = 0;
                for (int w = 0; w < world; w++) mean += g[w * n + k];
                mean /= world;
                DIST_ASSERT(!(fabs(mine[k] - mean) > 1e-6 * fmax(1.0, fabs(mean))), "step %d: element %lld is %.9g, the ranks' mean %.9g", s, (long long)k, mine[k], mean);
            }
            sc = dg_scope_begin();
            dg_tensor *after = dg_comm_all_gather(comm, dg_from_data(DG_SHAPE(n), DG_F32, mine));
            float *h = malloc(sizeof(float) * (size_t)(world * n));
            dg_to_host(after, h, sizeof(float) * (size_t)(world * n));
            dg_scope_end(sc);
            for (int w = 1; w < world; w++)
                DIST_ASSERT(!(memcmp(h, h + w * n, sizeof(float) * (size_t)n)), "step %d: rank %d holds other parameters after averaging", s, w);
            free(h);
        }
        free(g);
    }
    DIST_ASSERT(!(!drifted), "the ranks never drifted apart between averagings: the check cannot fail");
    DIST_ASSERT(!(dg_dp_local_sgd_averagings(dp) != 3), "%lld averagings, want 3", (long long)dg_dp_local_sgd_averagings(dp));

    /* 2. k = 1 against a plain DataParallel on the same batches */
    dg_layer *net2 = make_net(), *dp2 = dg_data_parallel(net2, comm, dg_dp_default_params());
    dg_layer *net1 = make_net(), *dp1 = dg_data_parallel(net1, comm, dg_dp_default_params());
    dg_optimizer *o1 = dp1 ? make_opt(net1) : NULL, *o2 = dp2 ? make_opt(net2) : NULL;
    DIST_ASSERT(!(!o1 || !o2 || dg_dp_set_local_sgd(dp1, 1, false)), "k = 1 models");
    for (int s = 0; s < 6; s++) {
        DIST_ASSERT(!(step(dp1, o1, rank, s) || dg_dp_local_sgd_step(dp1) != 0 || step(dp2, o2, rank, s)), "k = 1 step %d", s);
    }
    float a[256], b[256];
    flatten(net1, a, 256);
    flatten(net2, b, 256);
    DIST_ASSERT(!(memcmp(a, b, sizeof(float) * (size_t)n)), "k = 1 differs from ordinary DataParallel");
    printf("local_sgd_check: ok (rank %d: 3 averagings = the ranks' mean to 1e-6, identical on every rank; k = 1 = DataParallel bit for bit)\n", rank);
    dg_optimizer_free(opt);
    dg_optimizer_free(o1);
    dg_optimizer_free(o2);
    dg_layer_free(dp);
    dg_layer_free(dp1);
    dg_layer_free(dp2);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
