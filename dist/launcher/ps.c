/* dist/launcher/ps.c — dgrun's parameter-server mode (Paddle's launch_ps): `--server_num S
 * --worker_num W` starts S servers on free ports of 127.0.0.1 and W workers, or `--servers
 * ip:port,... --workers ip,...` describes a job on several nodes, of which this dgrun starts the
 * processes whose address is this machine's. Every process gets both naming schemes' variables
 * (dist/ps/env.c reads either), the job token, and its own log (serverlog.N / workerlog.N). The
 * supervisor (supervise.c) stops the job when any process fails, naming it, and stops servers
 * that outlive the last worker by the grace period. */
#include "dgrun.h"

/* PS mode takes none of the collective flags, and needs both counts. */
void check_ps_options(const options *o) {
    if (o->collective_flag)
        usage_error("%s is for collective jobs; it cannot be combined with the parameter-server flags "
                    "(--server_num, --worker_num, --servers, --workers)", o->collective_flag);
    if (!o->server_num && !o->servers_text) usage_error("parameter-server mode needs --server_num or --servers");
    if (!o->worker_num && !o->workers_text) usage_error("parameter-server mode needs --worker_num or --workers");
}

static bool valid_host(const char *s) {
    if (!*s) return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_') return false;
    return true;
}

static char *join(char **items, int n, const char *suffix_fmt, const int *nums) {
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(items[i]) + 16;
    char *out = xmalloc(len);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t at = strlen(out);
        snprintf(out + at, len - at, "%s%s", i ? "," : "", items[i]);
        if (suffix_fmt) snprintf(out + strlen(out), len - strlen(out), suffix_fmt, nums[i]);
    }
    return out;
}

void make_ps_layout(const options *o, ps_layout *P) {
    memset(P, 0, sizeof *P);
    if (o->servers_text) {
        char **eps = split_commas(o->servers_text, &P->nservers, MAX_NODES);
        if (!eps) usage_error("--servers '%s' is not a comma-separated list of ip:port", o->servers_text);
        if (o->server_num && o->server_num != P->nservers)
            usage_error("--server_num %ld does not match the %d servers of --servers %s", o->server_num, P->nservers,
                        o->servers_text);
        P->server_ip = xmalloc(sizeof(char *) * (size_t)P->nservers);
        P->server_port = xmalloc(sizeof(int) * (size_t)P->nservers);
        for (int i = 0; i < P->nservers; i++) {
            char *colon = strrchr(eps[i], ':');
            long port = colon ? parse_int(colon + 1, 1, 65535) : -1;
            if (colon) *colon = 0;
            if (!colon || port < 1 || !valid_host(eps[i]))
                usage_error("--servers '%s': entry %d is not ip:port with a port from 1 to 65535", o->servers_text, i);
            P->server_ip[i] = eps[i];
            P->server_port[i] = (int)port;
            for (int j = 0; j < i; j++)
                if (!strcmp(P->server_ip[j], eps[i]) && P->server_port[j] == port)
                    usage_error("--servers '%s' lists %s:%ld twice", o->servers_text, eps[i], port);
        }
        free(eps);
    } else {
        P->nservers = (int)o->server_num;
        P->server_ip = xmalloc(sizeof(char *) * (size_t)P->nservers);
        P->server_port = xmalloc(sizeof(int) * (size_t)P->nservers);
        pick_free_ports(P->nservers, P->server_port);
        for (int i = 0; i < P->nservers; i++) P->server_ip[i] = xstrdup("127.0.0.1");
    }
    if (o->workers_text) {
        P->worker_ip = split_commas(o->workers_text, &P->nworkers, MAX_NODES * MAX_LOCAL);
        if (!P->worker_ip) usage_error("--workers '%s' is not a comma-separated list of addresses", o->workers_text);
        if (o->worker_num && o->worker_num != P->nworkers)
            usage_error("--worker_num %ld does not match the %d workers of --workers %s", o->worker_num, P->nworkers,
                        o->workers_text);
        for (int i = 0; i < P->nworkers; i++)   /* several workers per node: an address may repeat */
            if (!valid_host(P->worker_ip[i])) usage_error("--workers '%s': '%s' is not an address", o->workers_text, P->worker_ip[i]);
    } else {
        P->nworkers = (int)o->worker_num;
        P->worker_ip = xmalloc(sizeof(char *) * (size_t)P->nworkers);
        for (int i = 0; i < P->nworkers; i++) P->worker_ip[i] = xstrdup("127.0.0.1");
    }
    P->list = join(P->server_ip, P->nservers, ":%d", P->server_port);
    P->shared_port = P->server_port[0];
    for (int i = 1; i < P->nservers; i++)
        if (P->server_port[i] != P->shared_port) P->shared_port = 0;
    /* the tutorial's PADDLE_PSERVER_IPS + one PADDLE_PSERVER_PORT can say this only when every
     * server has the same port (the addresses then differ: duplicates were refused above) */
    if (P->shared_port) P->ips = join(P->server_ip, P->nservers, NULL, NULL);

    P->server_here = xmalloc(sizeof(bool) * (size_t)P->nservers);
    P->worker_here = xmalloc(sizeof(bool) * (size_t)P->nworkers);
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) die(1, "getifaddrs (which processes run here): %s", strerror(errno));
    bool all_here = true, any_here = false;
    for (int i = 0; i < P->nservers; i++) {
        P->server_here[i] = is_local_address(P->server_ip[i], ifs);
        all_here &= P->server_here[i];
        any_here |= P->server_here[i];
    }
    for (int i = 0; i < P->nworkers; i++) {
        P->worker_here[i] = is_local_address(P->worker_ip[i], ifs);
        all_here &= P->worker_here[i];
        any_here |= P->worker_here[i];
    }
    freeifaddrs(ifs);
    if (!any_here)
        die(2, "none of the servers (%s) or workers is on this machine: run dgrun on the nodes named there", P->list);

    const char *given = getenv(TOKEN_ENV);
    if (given && *given) {
        size_t n = strlen(given);
        if (n > TOKEN_MAX) die(2, "%s has %zu characters; at most %d", TOKEN_ENV, n, TOKEN_MAX);
        for (size_t i = 0; i < n; i++)
            if (!isgraph((unsigned char)given[i])) die(2, "%s has a blank or unprintable character at position %zu", TOKEN_ENV, i);
        memcpy(P->token, given, n + 1);
    } else if (!all_here) {
        /* one dgrun per node, each drawing its own token, would make one job several */
        die(2, "a parameter-server job on several nodes needs one job token shared by every node's dgrun: run "
            "`export %s=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n')` once and give the same value "
            "to the dgrun command on every node", TOKEN_ENV);
    } else {
        make_job_token(P->token, sizeof P->token);
    }
}

void free_ps_layout(ps_layout *P) {
    for (int i = 0; i < P->nservers; i++) free(P->server_ip[i]);
    for (int i = 0; i < P->nworkers; i++) free(P->worker_ip[i]);
    free(P->server_ip);
    free(P->worker_ip);
    free(P->server_port);
    free(P->list);
    free(P->ips);
    free(P->server_here);
    free(P->worker_here);
}

/* The variables of server i (server) or worker i; n = how many (at most 14). */
static int ps_env(const ps_layout *P, bool server, int i, env_var *env) {
    int n = 0;
    const char *role = server ? "PSERVER" : "TRAINER";
    env[n++] = (env_var){"TRAINING_ROLE", "", role};
    env[n++] = (env_var){"PADDLE_TRAINING_ROLE", "", role};
    env[n++] = (env_var){"PADDLE_PSERVERS_IP_PORT_LIST", "", P->list};
    if (P->ips) {
        env[n++] = (env_var){"PADDLE_PSERVER_IPS", "", P->ips};
        env[n] = (env_var){"PADDLE_PSERVER_PORT", "", NULL};
        snprintf(env[n++].value, sizeof env[0].value, "%d", P->shared_port);
    }
    env[n] = (env_var){"PADDLE_TRAINERS_NUM", "", NULL};
    snprintf(env[n++].value, sizeof env[0].value, "%d", P->nworkers);
    env[n] = (env_var){"PADDLE_TRAINERS", "", NULL};
    snprintf(env[n++].value, sizeof env[0].value, "%d", P->nworkers);
    const char *ip = server ? P->server_ip[i] : P->worker_ip[i];
    env[n++] = (env_var){"POD_IP", "", ip};
    env[n++] = (env_var){"PADDLE_CURRENT_IP", "", ip};
    if (server) {
        env[n] = (env_var){"PADDLE_PORT", "", NULL};
        snprintf(env[n++].value, sizeof env[0].value, "%d", P->server_port[i]);
    } else {
        env[n] = (env_var){"PADDLE_TRAINER_ID", "", NULL};
        snprintf(env[n++].value, sizeof env[0].value, "%d", i);
    }
    env[n++] = (env_var){TOKEN_ENV, "", P->token};
    return n;
}

static void print_table(const char *title, const env_var *env, int n) {
    static const char border[] = "=======================================================================================";
    static const char line[] = "---------------------------------------------------------------------------------------";
    printf("    +%s+\n", border);
    print_env_row(title, "Value");
    printf("    +%s+\n", line);
    for (int i = 0; i < n; i++)   /* not the token: the table goes to the terminal */
        if (strcmp(env[i].name, TOKEN_ENV)) print_env_row(env[i].name, env[i].long_value ? env[i].long_value : env[i].value);
    printf("    +%s+\n\n", border);
}

static int first_here(const bool *here, int n) {
    for (int i = 0; i < n; i++)
        if (here[i]) return i;
    return -1;
}

void print_ps_tables(const options *o, const ps_layout *P) {
    printf("-----------  Configuration Arguments -----------\n");
    printf("log_dir: %s\n", o->log_dir);
    printf("server_num: %d\n", P->nservers);
    printf("servers: %s\n", P->list);
    printf("worker_num: %d\n", P->nworkers);
    printf("workers: ");
    print_py_list(P->worker_ip, P->nworkers);
    printf("\ntraining_script: %s\n", o->prog[0]);
    printf("training_script_args: ");
    print_py_list(o->prog + 1, o->nprog - 1);
    printf("\n------------------------------------------------\n");
    int ns = 0, nw = 0;
    for (int i = 0; i < P->nservers; i++) ns += P->server_here[i];
    for (int i = 0; i < P->nworkers; i++) nw += P->worker_here[i];
    printf("launch train in parameter-server mode\n");
    print_log_prefix();
    printf("Local start %d servers and %d workers. First processes' distributed environment info (Only For Debug):\n", ns, nw);
    env_var env[16];
    int s = first_here(P->server_here, P->nservers), w = first_here(P->worker_here, P->nworkers);
    if (s >= 0) print_table("Server Envs", env, ps_env(P, true, s, env));
    if (w >= 0) print_table("Worker Envs", env, ps_env(P, false, w, env));
    print_log_prefix();
    printf("details about the servers can be found in %s/endpoints.log, and running logs in %s/serverlog.<i> and "
           "%s/workerlog.<i>\n", o->log_dir, o->log_dir, o->log_dir);
    char *path = xasprintf("%s/endpoints.log", o->log_dir);
    FILE *f = fopen(path, "w");
    if (!f) die(1, "fopen(%s): %s", path, strerror(errno));
    fprintf(f, "PADDLE_PSERVERS_IP_PORT_LIST: \n");
    for (int i = 0; i < P->nservers; i++) fprintf(f, "%s:%d\n", P->server_ip[i], P->server_port[i]);
    if (fclose(f) != 0) die(1, "writing %s: %s", path, strerror(errno));
    free(path);
    fflush(stdout);
}

static int open_named_log(const char *log_dir, const char *kind, int i, char **path_out) {
    char *path = xasprintf("%s/%s.%d", log_dir, kind, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die(1, "open(%s): %s", path, strerror(errno));
    *path_out = path;
    return fd;
}

int run_ps_mode(const options *o, const ps_layout *P) {
    supervisor S = {.failed = -1, .fail_suffix = "; stopping the job", .announce_signals = true,
                    .relays = {{.fd = -1}, {.fd = -1}}};
    int n = 0;
    for (int i = 0; i < P->nservers; i++) n += P->server_here[i];
    S.ps_servers = n;
    for (int i = 0; i < P->nworkers; i++) n += P->worker_here[i];
    bool all_workers_here = true;
    for (int i = 0; i < P->nworkers; i++) all_workers_here &= P->worker_here[i];
    /* with workers on other nodes, ours finishing says nothing about whether the servers are done */
    S.ps_grace_ms = all_workers_here ? o->server_grace_s * 1000LL : -1;
    S.kids = xmalloc(sizeof(child) * (size_t)n);
    int *log_fd = xmalloc(sizeof(int) * (size_t)n), *index = xmalloc(sizeof(int) * (size_t)n);
    /* every file first: a failure here must not leave some processes already running */
    int k = 0;
    for (int i = 0; i < P->nservers; i++)
        if (P->server_here[i]) { memset(&S.kids[k], 0, sizeof(child)); index[k] = i; log_fd[k] = open_named_log(o->log_dir, "serverlog", i, &S.kids[k].log_path); k++; }
    for (int i = 0; i < P->nworkers; i++)
        if (P->worker_here[i]) { memset(&S.kids[k], 0, sizeof(child)); index[k] = i; log_fd[k] = open_named_log(o->log_dir, "workerlog", i, &S.kids[k].log_path); k++; }
    /* the terminal shows the first worker's log (the training's progress), else the first server's */
    follower F;
    int shown = n > S.ps_servers ? S.ps_servers : 0;
    follow_open(&F, S.kids[shown].log_path, index[shown]);
    S.follow = &F;
    for (k = 0; k < n; k++) {
        bool server = k < S.ps_servers;
        env_var env[16];
        int nenv = ps_env(P, server, index[k], env);
        /* a server has no trainer id: a stale one from the shell would make it look like a worker */
        S.kids[k].pid = spawn(o->prog, env, nenv, server ? "PADDLE_TRAINER_ID" : NULL, log_fd[k], log_fd[k], SIGKILL);
        if (server)
            S.kids[k].label = xasprintf("server %d (%s:%d, pid %d)", index[k], P->server_ip[index[k]],
                                        P->server_port[index[k]], (int)S.kids[k].pid);
        else
            S.kids[k].label = xasprintf("worker %d (pid %d)", index[k], (int)S.kids[k].pid);
        S.nkids = k + 1;
        close(log_fd[k]);
    }
    free(log_fd);
    int rc = supervise(&S);
    if (S.failed >= 0) say("every process's output is in %s/serverlog.<i> and %s/workerlog.<i>", o->log_dir, o->log_dir);
    if (S.stop_signal) term_finish(&F, SIGNAL_FINISH_MS, SIGNAL_FINISH_MS);
    else term_finish(&F, FINISH_STALL_MS, FINISH_MAX_MS);
    for (k = 0; k < S.nkids; k++) {
        free(S.kids[k].label);
        free(S.kids[k].log_path);
    }
    free(S.kids);
    free(index);
    return rc;
}
