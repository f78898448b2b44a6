/* test/dist/hier_check.c — the hierarchical all-reduce's collectives, run by every rank of a job
 * (dgrun --nproc_per_node 4 over MPI, or dgrun --gpus 0,1,2,3 over NCCL):
 *   hier_check --inter-nranks N --comm-num K --expect-nodes M
 * makes the world communicator through dg_fleet_init with use_hierarchical_allreduce,
 * hierarchical_allreduce_inter_nranks N (0: the real nodes) and nccl_comm_num K, checks the node
 * layout it reports (M nodes of world / M ranks, this rank's place in its node), so a flat
 * all-reduce cannot pass for it, then all-reduces rank-dependent data of i32, i64, f32 and f64
 * with SUM and MAX (and AVG for floats) at sizes 1, 1000 and 3,000,007 (several 8 MB pieces):
 * every element must equal the flat result computed here from every rank's values, exactly
 * (the float values are small integers, so their sums and the averages over 4 ranks are exact). */
#include "dist_assert.h"
#include <string.h>

static const char *flag(int argc, char **argv, const char *name, const char *def) {
    for (int i = 1; i < argc - 1; i++) if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return def;
}

/* rank q's value at i: integers over +-500000 (i32 sums of a few ranks stay in range), floats
 * over +-600 */
static int64_t ival(int q, int64_t i) { return (i * 7919 + (int64_t)q * 104729) % 1000003 - 500000; }
static double fval(int q, int64_t i) { return (double)((i * 37 + q * 11) % 1001) - 500.0 + q * 3; }
static double val(dg_dtype dt, int q, int64_t i) { return dt == DG_I32 || dt == DG_I64 ? (double)ival(q, i) : fval(q, i); }

/* What the flat all-reduce gives at i (computed in double, exact for these values). */
static double want(dg_dtype dt, dg_comm_op op, int world, int64_t i) {
    double acc = val(dt, 0, i);
    for (int q = 1; q < world; q++) {
        double v = val(dt, q, i);
        acc = op == DG_COMM_MAX ? (v > acc ? v : acc) : acc + v;
    }
    return op == DG_COMM_AVG ? acc / world : acc;
}

static void check(dg_comm *c, dg_dtype dt, dg_comm_op op, int64_t n, int rank, int world) {
    size_t es = dg_dtype_size(dt);
    char *h = malloc((size_t)n * es);
    DIST_ASSERT(h, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        double v = val(dt, rank, i);
        if (dt == DG_I32) ((int32_t *)h)[i] = (int32_t)v;
        else if (dt == DG_I64) ((int64_t *)h)[i] = (int64_t)v;
        else if (dt == DG_F32) ((float *)h)[i] = (float)v;
        else ((double *)h)[i] = v;
    }
    dg_tensor *t = dg_from_data(DG_SHAPE(n), dt, h);
    DIST_ASSERT(t, "from_data");
    DIST_ASSERT(dg_comm_all_reduce(c, t, op) == 0, "all_reduce of %lld %s", (long long)n, dg_dtype_name(dt));
    DIST_ASSERT(dg_to_host(t, h, (size_t)n * es) == 0, "to_host");
    for (int64_t i = 0; i < n; i++) {
        double got = dt == DG_I32 ? ((int32_t *)h)[i] : dt == DG_I64 ? (double)((int64_t *)h)[i]
                   : dt == DG_F32 ? ((float *)h)[i] : ((double *)h)[i];
        double w = want(dt, op, world, i);
        DIST_ASSERT(got == w, "%s %s of %lld: element %lld is %.17g, the flat all-reduce gives %.17g", dg_dtype_name(dt),
                    op == DG_COMM_SUM ? "SUM" : op == DG_COMM_MAX ? "MAX" : "AVG", (long long)n, (long long)i, got, w);
    }
    dg_tensor_free(t);
    free(h);
}

int main(int argc, char **argv) {
    int inter = atoi(flag(argc, argv, "--inter-nranks", "0"));
    int comm_num = atoi(flag(argc, argv, "--comm-num", "1"));
    int expect_nodes = atoi(flag(argc, argv, "--expect-nodes", "0"));
    dg_init_params ip = dg_init_default_params();
    ip.quiet = true;
    ip.num_threads = 1;
    DIST_ASSERT(dg_init(&ip) == 0, "init");
    dg_fleet_strategy st = dg_fleet_default_strategy();
    st.use_hierarchical_allreduce = true;
    st.hierarchical_allreduce_inter_nranks = inter;
    st.nccl_comm_num = comm_num;
    st.timeout_s = 60;
    DIST_ASSERT(dg_fleet_init(true, &st) == 0, "fleet_init");
    dg_comm *c = dg_fleet_comm();
    int rank = dg_comm_rank(c), world = dg_comm_size(c), nodes = 0, local_rank = -1, local_size = 0;
    DIST_ASSERT(dg_comm_topology(c, &nodes, &local_rank, &local_size) == 0, "topology");
    DIST_ASSERT(nodes == expect_nodes && local_size * nodes == world, "%d nodes of %d ranks, want %d nodes", nodes, local_size,
                expect_nodes);
    DIST_ASSERT(inter == 0 || (local_size == inter && local_rank == rank % inter), "local rank %d of %d, want %d of %d",
                local_rank, local_size, rank % inter, inter);
    DIST_ASSERT(dg_comm_num(c) == comm_num, "%d communicators, want %d", dg_comm_num(c), comm_num);
    const dg_dtype types[] = { DG_I32, DG_I64, DG_F32, DG_F64 };
    const int64_t sizes[] = { 1, 1000, 3000007 };
    for (int t = 0; t < 4; t++)
        for (int s = 0; s < 3; s++) {
            check(c, types[t], DG_COMM_SUM, sizes[s], rank, world);
            check(c, types[t], DG_COMM_MAX, sizes[s], rank, world);
            if (dg_dtype_is_float(types[t]) && world == 4) check(c, types[t], DG_COMM_AVG, sizes[s], rank, world);
        }
    printf("hier_check: rank %d: %s, %d nodes of %d (local rank %d), %d communicators: SUM, MAX, AVG equal the flat "
           "all-reduce: ok\n", rank, dg_comm_backend_name(c), nodes, local_size, local_rank, dg_comm_num(c));
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
