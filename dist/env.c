/* dist/env.c — the trainer environment: what dgrun / paddle.distributed.launch export
 * (PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT,
 * FLAGS_selected_gpus, and DG_JOB_TOKEN, the job identity the rendezvous store checks) or, under
 * mpirun, Open MPI's rank variables. Every inconsistency is an error naming the variable, so a
 * misconfigured rank fails at init instead of hanging later. */
#include "dist_internal.h"
#include <ctype.h>

/* A non-negative decimal integer, or -1. */
static int parse_index(const char *s) {
    if (!s || !*s) return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p) || v > 1000000) return -1;
        v = v * 10 + (*p - '0');
    }
    return (int)v;
}

static int count_endpoints(const char *list) {
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    return n;
}

int dg_dist_env_endpoint(const dg_dist_env *env, int i, char *buf, size_t len) {
    DG_CHECK_INT(env && buf && len, "dist_env_endpoint: NULL argument");
    DG_CHECK_INT(env->endpoints, "dist_env_endpoint: PADDLE_TRAINER_ENDPOINTS is not set");
    const char *p = env->endpoints;
    for (int k = 0; k < i && p; k++) { p = strchr(p, ','); if (p) p++; }
    DG_CHECK_INT(p && i >= 0, "dist_env_endpoint: no endpoint %d in PADDLE_TRAINER_ENDPOINTS='%s'", i, env->endpoints);
    size_t n = strcspn(p, ",");
    DG_CHECK_INT(n < len, "dist_env_endpoint: endpoint %d of PADDLE_TRAINER_ENDPOINTS is too long", i);
    memcpy(buf, p, n);
    buf[n] = 0;
    return 0;
}

int dg_dist_split_endpoint(const char *ep, char *host, size_t hlen, int *port) {
    const char *colon = strrchr(ep, ':');
    DG_CHECK_INT(colon && colon != ep, "endpoint '%s' is not ip:port", ep);
    int pt = parse_index(colon + 1);
    DG_CHECK_INT(pt > 0 && pt < 65536, "endpoint '%s' has no valid port", ep);
    size_t n = (size_t)(colon - ep);
    DG_CHECK_INT(n < hlen, "endpoint '%s': host too long", ep);
    memcpy(host, ep, n);
    host[n] = 0;
    *port = pt;
    return 0;
}

int dg_dist_job_token(char *buf, size_t len) {
    const char *t = getenv("DG_JOB_TOKEN");
    if (!t) t = "";
    size_t n = strlen(t);
    DG_CHECK_INT(n <= DG_STORE_MAX_TOKEN && n < len, "DG_JOB_TOKEN has %zu characters; at most %d", n, DG_STORE_MAX_TOKEN);
    /* printable and without blanks: a token pasted with a newline would otherwise split one job in two */
    for (size_t i = 0; i < n; i++)
        DG_CHECK_INT(isgraph((unsigned char)t[i]), "DG_JOB_TOKEN has a blank or unprintable character at position %zu", i);
    memcpy(buf, t, n + 1);
    return 0;
}

void dg_dist_env_clear(dg_dist_env *env) {
    if (!env) return;
    free(env->endpoints);
    memset(env, 0, sizeof *env);
    env->world_size = 1;
    env->gpu = -1;
}

int dg_dist_env_read(dg_dist_env *env) {
    DG_CHECK_INT(env, "dist_env_read: env is NULL");
    memset(env, 0, sizeof *env);
    env->world_size = 1;
    env->gpu = -1;
    const char *gpus = getenv("FLAGS_selected_gpus");
    if (gpus && *gpus) {
        char first[16];
        size_t n = strcspn(gpus, ",");
        snprintf(first, sizeof first, "%.*s", (int)(n < 15 ? n : 15), gpus);
        env->gpu = parse_index(first);
        DG_CHECK_INT(env->gpu >= 0, "FLAGS_selected_gpus='%s' is not a GPU index", gpus);
    }
    const char *orank = getenv("OMPI_COMM_WORLD_RANK"), *osize = getenv("OMPI_COMM_WORLD_SIZE");
    env->under_mpirun = orank && osize;
    const char *id = getenv("PADDLE_TRAINER_ID"), *num = getenv("PADDLE_TRAINERS_NUM");
    if (id || num) {
        env->launched = true;
        env->rank = parse_index(id);
        env->world_size = parse_index(num);
        DG_CHECK_INT(env->rank >= 0, "PADDLE_TRAINER_ID='%s' is not a rank (a non-negative integer)", id ? id : "");
        DG_CHECK_INT(env->world_size >= 1, "PADDLE_TRAINERS_NUM='%s' is not a world size (a positive integer)", num ? num : "");
        DG_CHECK_INT(env->rank < env->world_size, "PADDLE_TRAINER_ID=%d is not below PADDLE_TRAINERS_NUM=%d",
                     env->rank, env->world_size);
        const char *eps = getenv("PADDLE_TRAINER_ENDPOINTS"), *cur = getenv("PADDLE_CURRENT_ENDPOINT");
        if (env->world_size > 1) {
            DG_CHECK_INT(eps && *eps, "PADDLE_TRAINER_ENDPOINTS is missing (world of %d needs rank 0's endpoint)", env->world_size);
            DG_CHECK_INT(count_endpoints(eps) == env->world_size, "PADDLE_TRAINER_ENDPOINTS has %d endpoints but PADDLE_TRAINERS_NUM=%d",
                         count_endpoints(eps), env->world_size);
        }
        if (eps && *eps) {
            env->endpoints = strdup(eps);
            DG_CHECK_INT(env->endpoints, "dist_env_read: out of memory");
            char mine[DG_DIST_MAX_ENDPOINT], host[DG_DIST_MAX_ENDPOINT];
            int port, rc = dg_dist_env_endpoint(env, env->rank, mine, sizeof mine);
            if (!rc) rc = dg_dist_split_endpoint(mine, host, sizeof host, &port);
            if (rc) { dg_dist_env_clear(env); return rc; }
            if (cur && *cur && strcmp(cur, mine) != 0) {
                DG_ERR(DG_EINVAL, "PADDLE_CURRENT_ENDPOINT=%s but entry %d of PADDLE_TRAINER_ENDPOINTS is %s", cur, env->rank, mine);
                dg_dist_env_clear(env);
                return DG_EINVAL;
            }
            snprintf(env->current_endpoint, sizeof env->current_endpoint, "%s", mine);
        }
        if (env->under_mpirun) {
            int r = parse_index(orank), s = parse_index(osize);
            if (r != env->rank || s != env->world_size) {
                DG_ERR(DG_EINVAL, "PADDLE_TRAINER_ID=%d/PADDLE_TRAINERS_NUM=%d disagree with mpirun's rank %s of %s",
                       env->rank, env->world_size, orank, osize);
                dg_dist_env_clear(env);
                return DG_EINVAL;
            }
        }
    } else if (env->under_mpirun) {
        env->launched = true;
        env->rank = parse_index(orank);
        env->world_size = parse_index(osize);
        DG_CHECK_INT(env->rank >= 0 && env->world_size >= 1 && env->rank < env->world_size,
                     "OMPI_COMM_WORLD_RANK='%s' / OMPI_COMM_WORLD_SIZE='%s' are not a rank below a world size", orank, osize);
    }
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!lr) lr = getenv("PADDLE_LOCAL_RANK");
    env->local_rank = lr ? parse_index(lr) : env->rank;
    if (env->local_rank < 0) env->local_rank = 0;
    return 0;
}
