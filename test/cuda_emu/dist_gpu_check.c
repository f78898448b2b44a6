/* test/cuda_emu/dist_gpu_check.c — GPU tensors through a communicator under plain `mpirun -np 2`
 * (no PADDLE_* variables, no endpoints), on the emulated GPU (test/cuda_emu/run_tests.sh runs it).
 *   dist_gpu_check mpi|auto OVERLAP
 * mpi:  the MPI transport with GPU tensors (defect 2: the reducer handed device pointers to MPI)
 * auto: NCCL (defect 4: the NCCL id had no way to travel without a rendezvous endpoint) */
#include <dygraph.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIE(...) do { fprintf(stderr, "rank %d: ", rank); fprintf(stderr, __VA_ARGS__); \
                      fprintf(stderr, ": %s\n", dg_last_error()); return 1; } while (0)

int main(int argc, char **argv) {
    int rank = atoi(getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "0");
    bool mpi = argc > 1 && !strcmp(argv[1], "mpi");
    bool overlap = argc > 2 && atoi(argv[2]);
    char dev[16];
    snprintf(dev, sizeof dev, "gpu:%d", rank % 2);
    dg_init_params ip = dg_init_default_params();
    ip.device = dev;
    ip.quiet = true;
    ip.num_threads = 1;
    if (dg_init(&ip)) DIE("init");
    dg_comm_params cmp = dg_comm_default_params();
    cmp.kind = mpi ? DG_COMM_MPI : DG_COMM_AUTO;
    cmp.timeout_s = 30;
    dg_comm *c = dg_comm_new(cmp);
    if (!c) DIE("comm_new");
    int n = dg_comm_size(c);
    if (rank == 0) printf("transport %s, %d ranks, overlap %d\n", dg_comm_backend_name(c), n, overlap);

    /* plain collectives on GPU tensors */
    float v[5];
    for (int i = 0; i < 5; i++) v[i] = (float)(rank + 1) * (float)(i + 1);
    dg_tensor *t = dg_from_data(DG_SHAPE(5), DG_F32, v);
    if (!t) DIE("from_data");
    if (dg_comm_all_reduce(c, t, DG_COMM_SUM)) DIE("all_reduce");
    dg_to_host(t, v, sizeof v);
    for (int i = 0; i < 5; i++) if (v[i] != (float)(n * (n + 1) / 2) * (float)(i + 1)) DIE("all_reduce result %d is %g", i, v[i]);
    if (dg_comm_broadcast(c, t, 1 % n)) DIE("broadcast");
    dg_tensor *g = dg_comm_all_gather(c, t);
    if (!g) DIE("all_gather");

    /* DataParallel: the reduced gradients are the sum of every rank's local ones */
    dg_manual_seed(7 + (uint64_t)rank);
    dg_layer *net = dg_nn_sequential(3, dg_nn_linear(10, 64), dg_nn_relu(), dg_nn_linear(64, 3));
    dg_dp_params dpp = dg_dp_default_params();
    dpp.bucket_mb = 1e-3;
    dpp.first_bucket_mb = 1e-3;
    dpp.overlap = overlap;
    dg_layer *dp = dg_data_parallel(net, c, dpp);
    if (!dp) DIE("data_parallel");
    int np = 0;
    dg_named_tensor *ps = dg_layer_named_parameters(net, &np);
    float x[4 * 10], y[4 * 3];
    for (int i = 0; i < 40; i++) x[i] = (float)sin(i * 0.7 + rank);
    for (int i = 0; i < 12; i++) y[i] = (float)cos(i * 0.3 - rank);
    dg_tensor *xt = dg_from_data(DG_SHAPE(4, 10), DG_F32, x), *yt = dg_from_data(DG_SHAPE(4, 3), DG_F32, y);
    float *local[16], *final[16];
    for (int pass = 0; pass < 2; pass++) {
        dg_layer_clear_gradients(net);
        dg_dp_no_sync(dp, pass == 0);
        dg_scope *sc = dg_scope_begin();
        dg_tensor *loss = dg_mse_loss(dg_forward(dp, xt), yt);
        if (!loss || dg_backward(loss)) DIE("backward");
        dg_scope_end(sc);
        if (dg_dp_apply_collective_grads(dp)) DIE("apply_collective_grads (pass %d)", pass);
        for (int k = 0; k < np && k < 16; k++) {
            int64_t m = dg_numel(ps[k].tensor);
            float *h = malloc(sizeof(float) * (size_t)m);
            dg_to_host(dg_grad(ps[k].tensor), h, sizeof(float) * (size_t)m);
            (pass ? final : local)[k] = h;
        }
    }
    for (int k = 0; k < np && k < 16; k++) {
        int64_t m = dg_numel(ps[k].tensor);
        dg_tensor *s = dg_from_data(DG_SHAPE(m), DG_F32, local[k]);
        if (dg_comm_all_reduce(c, s, DG_COMM_SUM)) DIE("all_reduce of the local grads");
        float *want = malloc(sizeof(float) * (size_t)m);
        dg_to_host(s, want, sizeof(float) * (size_t)m);
        for (int64_t i = 0; i < m; i++)
            if (fabsf(want[i] - final[k][i]) > 1e-5f * fmaxf(1.0f, fabsf(want[i])))
                DIE("%s[%lld]: reduced %g, want %g", ps[k].name, (long long)i, final[k][i], want[i]);
    }
    printf("rank %d: %d parameters' gradients are the sum over the ranks: ok\n", rank, np);
    dg_layer_free(dp);
    dg_comm_free(c);
    return 0;
}
