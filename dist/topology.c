/* dist/topology.c — which ranks form a node, for the hierarchical all-reduce over NCCL:
 * consecutive blocks of ranks_per_node ranks when it is given (Paddle's
 * hierarchical_allreduce_inter_nranks, how one machine plays several nodes), else the ranks
 * whose endpoint in PADDLE_TRAINER_ENDPOINTS has the same IP (Paddle's rule), which holds for
 * real hosts and for network namespaces alike. The MPI transport asks MPI (shared-memory
 * domains) instead unless ranks_per_node is given. */
#include "dist_internal.h"

/* Entry i's host part into host (hlen bytes). */
static int endpoint_host(const dg_dist_env *env, int i, char *host, size_t hlen) {
    char ep[DG_DIST_MAX_ENDPOINT];
    int port;
    int rc = dg_dist_env_endpoint(env, i, ep, sizeof ep);
    return rc ? rc : dg_dist_split_endpoint(ep, host, hlen, &port);
}

int dg_dist_node_layout(const dg_dist_env *env, int ranks_per_node, dg_node_layout *out) {
    int w = env->world_size, r = env->rank;
    if (ranks_per_node > 0) {
        DG_CHECK_INT(w % ranks_per_node == 0, "ranks_per_node %d does not divide the world of %d ranks into whole nodes",
                     ranks_per_node, w);
        *out = (dg_node_layout){ .node = r / ranks_per_node, .nodes = w / ranks_per_node, .local_rank = r % ranks_per_node,
                                 .local_size = ranks_per_node, .uniform = true };
        return 0;
    }
    DG_CHECK_INT(env->endpoints, "the hierarchical all-reduce finds nodes by the IPs of PADDLE_TRAINER_ENDPOINTS, which "
                 "this job lacks (plain mpirun?): give ranks_per_node (hierarchical_allreduce_inter_nranks)");
    char (*hosts)[DG_DIST_MAX_ENDPOINT] = malloc(sizeof *hosts * (size_t)w);
    DG_CHECK_INT(hosts, "node layout: out of memory");
    int rc = 0;
    for (int i = 0; i < w && !rc; i++) rc = endpoint_host(env, i, hosts[i], sizeof hosts[i]);
    if (rc) { free(hosts); return rc; }
    /* a node is named by its first rank; every node's size is compared with the first's */
    dg_node_layout L = { .node = -1, .uniform = true };
    int first_size = -1;
    for (int i = 0; i < w; i++) {
        int first = 0, size = 0;
        while (strcmp(hosts[first], hosts[i]) != 0) first++;
        if (first != i) continue;   /* counted with its node's first rank */
        for (int j = i; j < w; j++) size += strcmp(hosts[j], hosts[i]) == 0;
        if (first_size < 0) first_size = size;
        L.uniform &= size == first_size;
        L.nodes++;
        if (strcmp(hosts[i], hosts[r]) == 0) {
            L.node = i;
            L.local_size = size;
            for (int j = i; j < r; j++) L.local_rank += strcmp(hosts[j], hosts[r]) == 0;
        }
    }
    free(hosts);
    *out = L;
    return 0;
}
