/* test/dist/dist_equiv.c — the data-parallel equivalence check. Run by N ranks (dgrun or mpirun)
 * with batch B each, or by one process with batch N*B: every step draws one global batch of N*B
 * samples from a fixed seed and each rank trains on its slice, so after the steps the N-rank
 * parameters must equal the single-process ones up to rounding. Ranks start from different
 * initial weights on purpose: the wrap-time broadcast must make them rank 0's. At the end the
 * ranks compare parameter checksums (bit-identical across ranks) and rank 0 saves them.
 *
 *   dist_equiv --model linear|mnist --batch B --world-batch N [--steps 20] [--bucket-mb X]
 *              [--first-bucket-mb X] [--overlap 0|1] [--hierarchical 0|1 --inter-nranks N --expect-nodes M]
 *              [--comm-num K] --out FILE
 *   dist_equiv --compare A B [--rtol 1e-5]      (exit 0 when every parameter matches) */
#include <dygraph.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *flag(int argc, char **argv, const char *name, const char *def) {
    for (int i = 1; i < argc - 1; i++) if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return def;
}
#define FAIL(...) do { fprintf(stderr, "dist_equiv rank %d: ", dg_fleet_worker_index()); fprintf(stderr, __VA_ARGS__); \
                       fprintf(stderr, ": %s\n", dg_last_error()); return 1; } while (0)

/* Every parameter of a within rtol of b (relative to max(|b|, 1e-3, 1e-2 max|b|)); 0 when so. */
static int expect_close(const char *a, const char *b, double rtol) {
    dg_tensor_dict *da = dg_load_safetensors(a), *db = dg_load_safetensors(b);
    if (!da || !db) { fprintf(stderr, "compare: %s\n", dg_last_error()); return 1; }
    int n = dg_tensor_dict_size(da), bad = 0;
    if (n != dg_tensor_dict_size(db)) { fprintf(stderr, "compare: %d vs %d tensors\n", n, dg_tensor_dict_size(db)); return 1; }
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const char *name = dg_tensor_dict_name(da, i);
        dg_tensor *x = dg_tensor_dict_get(da, name), *y = dg_tensor_dict_get(db, name);
        if (!y || dg_numel(x) != dg_numel(y)) { fprintf(stderr, "compare: '%s' missing or resized\n", name); return 1; }
        int64_t m = dg_numel(x);
        float *px = malloc(sizeof(float) * (size_t)m), *py = malloc(sizeof(float) * (size_t)m);
        dg_to_host(x, px, sizeof(float) * (size_t)m);
        dg_to_host(y, py, sizeof(float) * (size_t)m);
        double scale = 0;
        for (int64_t k = 0; k < m; k++) scale = fmax(scale, fabs(py[k]));
        for (int64_t k = 0; k < m; k++) {
            double e = fabs((double)px[k] - py[k]) / fmax(fabs(py[k]), fmax(1e-3, 1e-2 * scale));
            if (e > worst) worst = e;
            if (e > rtol && bad++ < 5) fprintf(stderr, "compare: %s[%lld] %.9g vs %.9g (rel %.3g)\n", name, (long long)k, px[k], py[k], e);
        }
        free(px); free(py);
    }
    printf("compare %s %s: %d tensors, worst rel. error %.3g (limit %.1g) %s\n", a, b, n, worst, rtol, bad ? "FAIL" : "ok");
    dg_tensor_dict_free(da);
    dg_tensor_dict_free(db);
    return bad ? 1 : 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    const char *cmp = flag(argc, argv, "--compare", NULL);
    if (cmp) return expect_close(cmp, argv[argc - 1], atof(flag(argc, argv, "--rtol", "1e-5")));
    const char *model = flag(argc, argv, "--model", "linear"), *out = flag(argc, argv, "--out", NULL);
    int64_t B = atoll(flag(argc, argv, "--batch", "8"));
    int world_batch = atoi(flag(argc, argv, "--world-batch", "2"));   /* global batch = world_batch * B */
    int steps = atoi(flag(argc, argv, "--steps", "20"));
    dg_fleet_strategy st = dg_fleet_default_strategy();
    /* without the flags: the strategy's defaults (25 MB buckets, a 1 MB first one) */
    st.fuse_grad_size_in_MB = atof(flag(argc, argv, "--bucket-mb", "25"));
    st.first_bucket_mb = atof(flag(argc, argv, "--first-bucket-mb", "1"));
    st.overlap = atoi(flag(argc, argv, "--overlap", "0")) != 0;
    st.use_hierarchical_allreduce = atoi(flag(argc, argv, "--hierarchical", "0")) != 0;
    st.hierarchical_allreduce_inter_nranks = atoi(flag(argc, argv, "--inter-nranks", "0"));
    st.nccl_comm_num = atoi(flag(argc, argv, "--comm-num", "1"));
    int expect_nodes = atoi(flag(argc, argv, "--expect-nodes", "0"));
    dg_init_params ip = dg_init_default_params();
    ip.quiet = true;
    ip.num_threads = 1;
    if (dg_init(&ip)) FAIL("init");
    if (dg_fleet_init(true, &st)) FAIL("fleet_init");
    int rank = dg_fleet_worker_index(), world = dg_fleet_worker_num();
    int nodes = 0;
    dg_comm_topology(dg_fleet_comm(), &nodes, NULL, NULL);
    /* the hierarchy really in use: a flat communicator reports 0 nodes */
    if (nodes != expect_nodes) FAIL("the communicator reports %d nodes, --expect-nodes says %d", nodes, expect_nodes);
    int64_t global = (int64_t)world_batch * B, per = global / world;
    if (per * world != global) { fprintf(stderr, "global batch %lld does not split over %d ranks\n", (long long)global, world); return 2; }

    bool mnist = strcmp(model, "mnist") == 0;
    dg_manual_seed(100 + (uint64_t)rank);     /* different on every rank: the broadcast must fix it */
    dg_layer *net = mnist ? dg_mnist_cnn() : dg_nn_sequential(2, dg_nn_linear(10, 10), dg_nn_linear(10, 1));
    if (!net) FAIL("model");
    dg_layer *dp = dg_fleet_distributed_model(dg_layer_ref(net));
    if (!dp) FAIL("distributed_model");
    int n;
    dg_tensor **params = dg_layer_parameters(net, &n);
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = 1e-3;
    dg_optimizer *opt = dg_fleet_distributed_optimizer(dg_adam(params, n, adp));
    free(params);
    if (!opt) FAIL("optimizer");

    for (int step = 0; step < steps; step++) {
        dg_scope *sc = dg_scope_begin();
        dg_manual_seed(5000 + (uint64_t)step);   /* the same global batch on every rank */
        dg_tensor *x = mnist ? dg_randn(DG_SHAPE(global, 1, 28, 28), DG_F32) : dg_randn(DG_SHAPE(global, 10), DG_F32);
        dg_tensor *y = mnist ? dg_cast(dg_mul_scalar(dg_rand(DG_SHAPE(global), DG_F32), 9.999), DG_I64)
                             : dg_randn(DG_SHAPE(global, 1), DG_F32);
        dg_tensor *xs = dg_slice(x, 0, rank * per, (rank + 1) * per, 1), *ys = dg_slice(y, 0, rank * per, (rank + 1) * per, 1);
        dg_tensor *pred = dg_forward(dp, xs);
        dg_tensor *loss = mnist ? dg_cross_entropy(pred, ys) : dg_mse_loss(pred, ys);
        if (!loss) FAIL("step %d forward", step);
        loss = dg_dp_scale_loss(dp, loss);
        if (dg_backward(loss) || dg_dp_apply_collective_grads(dp) || dg_optimizer_step(opt)) FAIL("step %d", step);
        dg_optimizer_clear_grad(opt);
        dg_scope_end(sc);
    }

    /* bit-identical across ranks: every rank's checksum gathered and compared */
    dg_named_tensor *np_ = dg_layer_named_parameters(net, &n);
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)dg_numel(np_[i].tensor) * sizeof(float);
        float *buf = malloc(bytes);
        dg_to_host(np_[i].tensor, buf, bytes);
        h = fnv(h, buf, bytes);
        free(buf);
    }
    free(np_);
    dg_tensor *mine = dg_scalar((double)(int64_t)(h >> 1), DG_I64);
    dg_tensor *all = dg_comm_all_gather(dg_fleet_comm(), mine);
    if (!all) FAIL("all_gather");
    int64_t hs[64];
    dg_to_host(all, hs, sizeof(int64_t) * (size_t)world);
    for (int r = 1; r < world; r++)
        if (hs[r] != hs[0]) { fprintf(stderr, "dist_equiv: rank %d parameters differ from rank 0's (checksum)\n", r); return 1; }
    if (rank == 0) printf("dist_equiv: %s, world %d, batch %lld per rank, %d steps, %s all-reduce over %d nodes, "
                          "%d communicators: parameters identical on all ranks\n", model, world, (long long)per, steps,
                          nodes ? "hierarchical" : "flat", nodes, dg_comm_num(dg_fleet_comm()));
    if (out && dg_fleet_save(net, out)) FAIL("save");
    dg_tensor_free(mine);
    dg_tensor_free(all);
    dg_optimizer_free(opt);
    dg_layer_free(dp);
    dg_layer_free(net);
    dg_fleet_shutdown();
    return 0;
}
