/* test/test_dist_hier.c — the hierarchical all-reduce's and comm_num's settings inside one
 * process: defaults, bad values refused with the field named (dg_comm_params and the fleet
 * strategy), the layout a world of one reports, and dist/topology.c's node rule (endpoint IPs,
 * or blocks of ranks_per_node) on synthetic environments. The multi-rank runs are
 * test/dist/hierarchical.sh and test-gpu-emu. */
#include "test_util.h"
#include "../dist/dist_internal.h"

static void clear_env(void) {
    const char *vars[] = { "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT",
                           "FLAGS_selected_gpus", "DG_JOB_TOKEN", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK" };
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

Test(dist_hier, defaults) {
    dg_comm_params p = dg_comm_default_params();
    cr_assert(!p.hierarchical);
    cr_assert_eq(p.ranks_per_node, 0);
    cr_assert_eq(p.comm_num, 1);
    dg_fleet_strategy s = dg_fleet_default_strategy();
    cr_assert(!s.use_hierarchical_allreduce);
    cr_assert_eq(s.hierarchical_allreduce_inter_nranks, 0);
    cr_assert_eq(s.nccl_comm_num, 1);
}

static void refused_comm(dg_comm_params p, const char *field) {
    dg_clear_error();
    cr_assert_null(dg_comm_new(p));
    cr_assert(strstr(dg_last_error(), field), "'%s' does not name %s", dg_last_error(), field);
}

Test(dist_hier, bad_comm_params_name_the_field) {
    clear_env();
    dg_comm_params p = dg_comm_default_params();
    p.comm_num = 0;
    refused_comm(p, "comm_num");
    p.comm_num = DG_COMM_MAX_NUM + 1;
    refused_comm(p, "comm_num");
    p = dg_comm_default_params();
    p.hierarchical = true;
    p.ranks_per_node = -1;
    refused_comm(p, "ranks_per_node");
    p.ranks_per_node = 2;   /* a world of 1 is not whole nodes of 2 */
    refused_comm(p, "ranks_per_node");
}

Test(dist_hier, bad_strategy_names_the_field) {
    clear_env();
    dg_fleet_strategy s = dg_fleet_default_strategy();
    s.nccl_comm_num = 0;
    cr_assert_lt(dg_fleet_init(true, &s), 0);
    cr_assert(strstr(dg_last_error(), "nccl_comm_num"), "%s", dg_last_error());
    s = dg_fleet_default_strategy();
    s.hierarchical_allreduce_inter_nranks = -3;
    cr_assert_lt(dg_fleet_init(true, &s), 0);
    cr_assert(strstr(dg_last_error(), "hierarchical_allreduce_inter_nranks"), "%s", dg_last_error());
    s.use_hierarchical_allreduce = true;
    s.hierarchical_allreduce_inter_nranks = 3;
    cr_assert_lt(dg_fleet_init(true, &s), 0);
    cr_assert(strstr(dg_last_error(), "hierarchical_allreduce_inter_nranks 3 does not divide"), "%s", dg_last_error());
}

Test(dist_hier, world_of_one_topology) {
    clear_env();
    int nodes = 9, lr = 9, ls = 9;
    dg_comm *flat = dg_comm_new(dg_comm_default_params());
    cr_assert(flat, "%s", dg_last_error());
    cr_assert_eq(dg_comm_topology(flat, &nodes, &lr, &ls), 0);
    cr_assert(nodes == 0 && lr == -1 && ls == 0, "a flat communicator reports %d nodes, local %d of %d", nodes, lr, ls);
    cr_assert_eq(dg_comm_num(flat), 1);
    dg_comm_free(flat);
    dg_fleet_strategy s = dg_fleet_default_strategy();
    s.use_hierarchical_allreduce = true;
    s.nccl_comm_num = 3;
    cr_assert_eq(dg_fleet_init(true, &s), 0, "%s", dg_last_error());
    cr_assert_eq(dg_comm_topology(dg_fleet_comm(), &nodes, &lr, &ls), 0);
    cr_assert(nodes == 1 && lr == 0 && ls == 1, "%d nodes, local %d of %d", nodes, lr, ls);
    cr_assert_eq(dg_comm_num(dg_fleet_comm()), 3);
    dg_tensor *t = dg_arange(0, 4, 1, DG_F32);
    cr_assert_eq(dg_comm_all_reduce(dg_fleet_comm(), t, DG_COMM_SUM), 0, "%s", dg_last_error());
    cr_assert_float_eq(dg_item(dg_sum_all(t)), 6.0f, 0);
    dg_tensor_free(t);
    cr_assert_lt(dg_comm_topology(NULL, &nodes, &lr, &ls), 0);
    dg_fleet_shutdown();
}

static dg_node_layout layout(const char *eps, int rank, int world, int per_node) {
    dg_dist_env env = { .rank = rank, .world_size = world, .endpoints = (char *)eps };
    dg_node_layout L;
    cr_assert_eq(dg_dist_node_layout(&env, per_node, &L), 0, "%s", dg_last_error());
    return L;
}

Test(dist_hier, nodes_by_endpoint_ip) {
    const char *eps = "10.0.0.1:6170,10.0.0.1:6171,10.0.0.2:6170,10.0.0.2:6171";
    dg_node_layout L = layout(eps, 3, 4, 0);
    cr_assert(L.nodes == 2 && L.node == 2 && L.local_rank == 1 && L.local_size == 2 && L.uniform);
    L = layout(eps, 0, 4, 0);
    cr_assert(L.nodes == 2 && L.node == 0 && L.local_rank == 0 && L.local_size == 2);
    /* interleaved and unequal: a node is its IP's ranks wherever they stand, named by its first */
    const char *mixed = "10.0.0.1:1,10.0.0.2:1,10.0.0.1:2,10.0.0.3:1,10.0.0.1:3";
    L = layout(mixed, 4, 5, 0);
    cr_assert(L.nodes == 3 && L.node == 0 && L.local_rank == 2 && L.local_size == 3 && !L.uniform,
              "%d nodes, node %d, local %d of %d", L.nodes, L.node, L.local_rank, L.local_size);
    L = layout(mixed, 3, 5, 0);
    cr_assert(L.node == 3 && L.local_rank == 0 && L.local_size == 1);
    /* ranks_per_node wins over the IPs: blocks of consecutive ranks */
    L = layout(mixed, 4, 6, 2);
    cr_assert(L.nodes == 3 && L.node == 2 && L.local_rank == 0 && L.local_size == 2 && L.uniform);
    dg_dist_env none = { .rank = 0, .world_size = 2, .endpoints = NULL };
    dg_node_layout M;
    cr_assert_lt(dg_dist_node_layout(&none, 0, &M), 0);
    cr_assert(strstr(dg_last_error(), "ranks_per_node"), "%s", dg_last_error());
}
