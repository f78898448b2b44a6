/* dist/launcher/options.c — the command line, the job's layout (this node, every rank's
 * endpoint) and what Paddle's launcher prints (configuration block, "Distributed Envs"). */
#include "dgrun.h"

/* ------------------------------------------------------------------------------------------ */
/* options                                                                                     */


/* "--name value" or "--name=value": the value, advancing *i past what it used; NULL = not this option. */
const char *option_value(int argc, char **argv, int *i, const char *name) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != 0) return NULL;
    if (*i + 1 >= argc) usage_error("option %s needs a value", name);
    return argv[++*i];
}

void parse_gpus(options *o, const char *text) {
    char **items = split_commas(text, &o->ngpus, MAX_LOCAL);
    if (!items) usage_error("--gpus '%s' is not a comma-separated list of GPU ids like 0,1", text);
    o->gpus = xmalloc(sizeof(int) * (size_t)o->ngpus);
    for (int i = 0; i < o->ngpus; i++) {
        long id = parse_int(items[i], 0, 65535);
        if (id < 0) usage_error("--gpus '%s': '%s' is not a GPU id (a non-negative integer)", text, items[i]);
        for (int j = 0; j < i; j++)
            if (o->gpus[j] == id) usage_error("--gpus '%s' lists GPU %ld twice", text, id);
        o->gpus[i] = (int)id;
        free(items[i]);
    }
    free(items);
    o->gpus_text = text;
}

void parse_ips(options *o, const char *text) {
    o->ips = split_commas(text, &o->nips, MAX_NODES);
    if (!o->ips) usage_error("--ips '%s' is not a comma-separated list of node addresses", text);
    for (int i = 0; i < o->nips; i++) {
        for (const char *p = o->ips[i]; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
                usage_error("--ips '%s': '%s' is not an IPv4 address or host name", text, o->ips[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(o->ips[i], o->ips[j])) usage_error("--ips '%s' lists %s twice", text, o->ips[i]);
    }
    o->ips_text = text;
}

void parse_options(options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->log_dir = "log";
    o->mpirun = "mpirun";
    o->server_grace_s = 10;
    bool grace_given = false;
    const char *ips = "127.0.0.1";
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--")) { i++; break; }
        if (a[0] != '-' || !a[1]) break; /* the program: everything after it is its own */
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_text, stdout); exit(0); }
        /* flags of collective jobs only, remembered so that PS mode can refuse them by name */
        static const char *const collective[] = {"--gpus", "--selected_gpus", "--nproc_per_node", "--ips",
                                                 "--cluster_node_ips", "--node_ip", "--started_port", "--mpirun"};
        for (size_t c = 0; c < sizeof collective / sizeof *collective && !o->collective_flag; c++) {
            size_t n = strlen(collective[c]);
            if (!strncmp(a, collective[c], n) && (a[n] == 0 || a[n] == '=')) o->collective_flag = collective[c];
        }
        if ((v = option_value(argc, argv, &i, "--server_num"))) {
            o->server_num = parse_int(v, 1, MAX_LOCAL);
            if (o->server_num < 1) usage_error("--server_num '%s' is not a server count from 1 to %d", v, MAX_LOCAL);
            o->ps = true;
        } else if ((v = option_value(argc, argv, &i, "--worker_num"))) {
            o->worker_num = parse_int(v, 1, MAX_LOCAL);
            if (o->worker_num < 1) usage_error("--worker_num '%s' is not a worker count from 1 to %d", v, MAX_LOCAL);
            o->ps = true;
        } else if ((v = option_value(argc, argv, &i, "--servers"))) {
            o->servers_text = v;
            o->ps = true;
        } else if ((v = option_value(argc, argv, &i, "--workers"))) {
            o->workers_text = v;
            o->ps = true;
        } else if ((v = option_value(argc, argv, &i, "--server_grace"))) {
            o->server_grace_s = parse_int(v, 0, 86400);
            grace_given = true;
            if (o->server_grace_s < 0) usage_error("--server_grace '%s' is not a number of seconds from 0 to 86400", v);
        } else if ((v = option_value(argc, argv, &i, "--gpus")) || (v = option_value(argc, argv, &i, "--selected_gpus")))
            parse_gpus(o, v);
        else if ((v = option_value(argc, argv, &i, "--nproc_per_node"))) {
            o->nproc = parse_int(v, 1, MAX_LOCAL);
            if (o->nproc < 1) usage_error("--nproc_per_node '%s' is not a worker count from 1 to %d", v, MAX_LOCAL);
        } else if ((v = option_value(argc, argv, &i, "--ips")) || (v = option_value(argc, argv, &i, "--cluster_node_ips")))
            ips = v;
        else if ((v = option_value(argc, argv, &i, "--node_ip")))
            o->node_ip = v;
        else if ((v = option_value(argc, argv, &i, "--started_port"))) {
            o->started_port = parse_int(v, 1, 65535);
            if (o->started_port < 1) usage_error("--started_port '%s' is not a port from 1 to 65535", v);
        } else if ((v = option_value(argc, argv, &i, "--log_dir"))) {
            if (!*v) usage_error("--log_dir is empty");
            o->log_dir = v;
        } else if ((v = option_value(argc, argv, &i, "--mpirun"))) {
            if (!*v) usage_error("--mpirun is empty");
            o->mpirun = v;
        } else
            usage_error("unknown option '%s'", a);
    }
    if (i >= argc) usage_error("no program to run");
    o->prog = argv + i;
    o->nprog = argc - i;
    if (o->ps) { check_ps_options(o); return; }
    if (grace_given) usage_error("--server_grace is for parameter-server jobs (--server_num, --servers)");
    parse_ips(o, ips);
    if (o->gpus && o->nproc && o->nproc != o->ngpus)
        usage_error("--nproc_per_node %ld does not match the %d GPUs of --gpus %s", o->nproc, o->ngpus, o->gpus_text);
    int local = o->gpus ? o->ngpus : (o->nproc ? (int)o->nproc : 1);
    if (o->started_port && o->started_port + local - 1 > 65535)
        usage_error("--started_port %ld leaves no room for %d workers below port 65536", o->started_port, local);
}

/* ------------------------------------------------------------------------------------------ */
/* the job's layout: which node this is and every rank's endpoint                              */

/* Whether ip, as written in --ips, is one of this machine's interface addresses. */
bool is_local_address(const char *ip, struct ifaddrs *ifs) {
    for (struct ifaddrs *a = ifs; a; a = a->ifa_next) {
        if (!a->ifa_addr) continue;
        char buf[INET6_ADDRSTRLEN];
        const void *raw;
        int fam = a->ifa_addr->sa_family;
        if (fam == AF_INET) raw = &((struct sockaddr_in *)(void *)a->ifa_addr)->sin_addr;
        else if (fam == AF_INET6) raw = &((struct sockaddr_in6 *)(void *)a->ifa_addr)->sin6_addr;
        else continue;
        if (inet_ntop(fam, raw, buf, sizeof buf) && !strcmp(buf, ip)) return true;
    }
    return false;
}

void choose_node(options *o) {
    if (o->node_ip) {
        for (int i = 0; i < o->nips; i++)
            if (!strcmp(o->ips[i], o->node_ip)) { o->node_index = i; return; }
        usage_error("--node_ip %s is not one of --ips %s", o->node_ip, o->ips_text);
    }
    o->node_index = 0;
    o->node_ip = o->ips[0];
    if (o->nips == 1) return;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) {
        fprintf(stderr, "dgrun: getifaddrs: %s; assuming this node is %s\n", strerror(errno), o->ips[0]);
        return;
    }
    for (int i = 0; i < o->nips; i++)
        if (is_local_address(o->ips[i], ifs)) { o->node_index = i; o->node_ip = o->ips[i]; freeifaddrs(ifs); return; }
    freeifaddrs(ifs);
    fprintf(stderr, "dgrun: none of --ips %s is an address of this machine; assuming this node is %s "
            "(use --node_ip to say which)\n", o->ips_text, o->ips[0]);
}

/* n distinct free TCP ports: all sockets stay bound until the last is picked, so the kernel
 * cannot hand out the same port twice. */
void pick_free_ports(int n, int *ports) {
    int *fds = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0) die(1, "socket (picking a free port): %s", strerror(errno));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_ANY)};
        if (bind(fds[i], (struct sockaddr *)&sa, sizeof sa) != 0) die(1, "bind (picking a free port): %s", strerror(errno));
        socklen_t len = sizeof sa;
        if (getsockname(fds[i], (struct sockaddr *)&sa, &len) != 0) die(1, "getsockname: %s", strerror(errno));
        ports[i] = ntohs(sa.sin_port);
    }
    for (int i = 0; i < n; i++) close(fds[i]);
    free(fds);
}


void make_layout(const options *o, layout *L) {
    L->nlocal = o->gpus ? o->ngpus : (o->nproc ? (int)o->nproc : 1);
    L->world = L->nlocal * o->nips;
    L->first_rank = o->node_index * L->nlocal;
    L->ports = xmalloc(sizeof(int) * (size_t)L->nlocal);
    long base = o->started_port ? o->started_port : (o->nips > 1 ? 6170 : 0);
    if (base) for (int i = 0; i < L->nlocal; i++) L->ports[i] = (int)base + i;
    else pick_free_ports(L->nlocal, L->ports);
    L->endpoint = xmalloc(sizeof(char *) * (size_t)L->world);
    size_t total = 0;
    for (int r = 0; r < L->world; r++) {
        L->endpoint[r] = xasprintf("%s:%d", o->ips[r / L->nlocal], L->ports[r % L->nlocal]);
        total += strlen(L->endpoint[r]) + 1;
    }
    L->endpoints = xmalloc(total);
    L->endpoints[0] = 0;
    for (int r = 0; r < L->world; r++) {
        if (r) strcat(L->endpoints, ",");
        strcat(L->endpoints, L->endpoint[r]);
    }
}

void free_layout(layout *L) {
    for (int r = 0; r < L->world; r++) free(L->endpoint[r]);
    free(L->endpoint);
    free(L->endpoints);
    free(L->ports);
}

void free_options(options *o) {
    for (int i = 0; i < o->nips; i++) free(o->ips[i]);
    free(o->ips);
    free(o->gpus);
}

/* The job's token: DG_JOB_TOKEN when dgrun's own environment has one (how the dgrun commands of a
 * GPU job on several nodes share one identity), else fresh random bits. A GPU job on several
 * nodes has one dgrun per node, each of which would draw its own, so there it must be given. */
void choose_job_token(const options *o, layout *L) {
    const char *given = getenv(TOKEN_ENV);
    if (given && *given) {
        size_t n = strlen(given);
        if (n > TOKEN_MAX) die(2, "%s has %zu characters; at most %d", TOKEN_ENV, n, TOKEN_MAX);
        for (size_t i = 0; i < n; i++)
            if (!isgraph((unsigned char)given[i]))
                die(2, "%s has a blank or unprintable character at position %zu", TOKEN_ENV, i);
        memcpy(L->token, given, n + 1);
        return;
    }
    if (o->gpus && o->nips > 1)
        die(2, "GPU mode on several nodes (--ips %s) needs one job token shared by every node's dgrun: run "
            "`export %s=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n')` once and give the same value "
            "to the dgrun command on every node", o->ips_text, TOKEN_ENV);
    make_job_token(L->token, sizeof L->token);
}

/* The variables of local worker i; n = how many. */
int worker_env(const options *o, const layout *L, int i, env_var *env) {
    int n = 0;
    env[n] = (env_var){"PADDLE_TRAINER_ID", "", NULL};
    snprintf(env[n++].value, sizeof env[0].value, "%d", L->first_rank + i);
    env[n] = (env_var){"PADDLE_TRAINERS_NUM", "", NULL};
    snprintf(env[n++].value, sizeof env[0].value, "%d", L->world);
    env[n++] = (env_var){"PADDLE_CURRENT_ENDPOINT", "", L->endpoint[L->first_rank + i]};
    env[n++] = (env_var){"PADDLE_TRAINER_ENDPOINTS", "", L->endpoints};
    env[n] = (env_var){"PADDLE_LOCAL_RANK", "", NULL};
    snprintf(env[n++].value, sizeof env[0].value, "%d", i);
    if (o->gpus) {
        env[n] = (env_var){"FLAGS_selected_gpus", "", NULL};
        snprintf(env[n++].value, sizeof env[0].value, "%d", o->gpus[i]);
    }
    env[n++] = (env_var){TOKEN_ENV, "", L->token};
    return n;
}

void write_endpoints_log(const char *log_dir, const layout *L) {
    char *path = xasprintf("%s/endpoints.log", log_dir);
    FILE *f = fopen(path, "w");
    if (!f) die(1, "fopen(%s): %s", path, strerror(errno));
    fprintf(f, "PADDLE_TRAINER_ENDPOINTS: \n");
    for (int r = 0; r < L->world; r++) fprintf(f, "%s\n", L->endpoint[r]);
    if (fclose(f) != 0) die(1, "writing %s: %s", path, strerror(errno));
    free(path);
}

/* ------------------------------------------------------------------------------------------ */
/* what Paddle's launcher prints                                                               */

void print_py_list(char **items, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) {
        printf("%s'", i ? ", " : "");
        for (const char *p = items[i]; *p; p++) {
            if (*p == '\'' || *p == '\\') putchar('\\');
            putchar(*p);
        }
        putchar('\'');
    }
    putchar(']');
}

void print_configuration(const options *o) {
    printf("-----------  Configuration Arguments -----------\n");
    printf("gpus: %s\n", o->gpus_text ? o->gpus_text : "None");
    printf("ips: %s\n", o->ips_text);
    printf("log_dir: %s\n", o->log_dir);
    if (o->nproc) printf("nproc_per_node: %ld\n", o->nproc);
    else printf("nproc_per_node: None\n");
    if (o->started_port) printf("started_port: %ld\n", o->started_port);
    else printf("started_port: None\n");
    printf("training_script: %s\n", o->prog[0]);
    printf("training_script_args: ");
    print_py_list(o->prog + 1, o->nprog - 1);
    printf("\n------------------------------------------------\n");
}

/* Paddle's pretty_print_envs: keys right-aligned in 40, values centred in 45, long values cut
 * to their last 41 characters — 89 columns in all. */
void print_env_row(const char *key, const char *value) {
    char shown[64];
    size_t len = strlen(value);
    if (len >= 45) snprintf(shown, sizeof shown, "... %s", value + len - 41);
    else snprintf(shown, sizeof shown, "%s", value);
    int pad = 45 - (int)strlen(shown), left = pad / 2;
    printf("    |%40s  %*s%s%*s|\n", key, left, "", shown, pad - left, "");
}

void print_log_prefix(void) {
    struct timespec ts = {0, 0};
    struct tm tm;
    char when[32] = "";
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && localtime_r(&ts.tv_sec, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    printf("INFO %s,%03ld dgrun] ", when, ts.tv_nsec / 1000000);
}

void print_envs(const options *o, const layout *L) {
    env_var env[8];
    int n = worker_env(o, L, 0, env);
    printf("launch train in %s mode\n", o->gpus ? "GPU" : "CPU (mpirun)");
    print_log_prefix();
    if (o->gpus || o->nips == 1)
        printf("Local start %d processes. First process distributed environment info (Only For Debug):\n", L->nlocal);
    else
        printf("Start %d processes on %d nodes with mpirun. First process distributed environment info (Only For Debug):\n",
               L->world, o->nips);
    static const char border[] = "=======================================================================================";
    static const char line[] = "---------------------------------------------------------------------------------------";
    printf("    +%s+\n", border);
    print_env_row("Distributed Envs", "Value");
    printf("    +%s+\n", line);
    for (int i = 0; i < n; i++)   /* not the token: the table goes to the terminal and to worker 0's log */
        if (strcmp(env[i].name, TOKEN_ENV)) print_env_row(env[i].name, env[i].long_value ? env[i].long_value : env[i].value);
    printf("    +%s+\n\n", border);
    print_log_prefix();
    printf("details about PADDLE_TRAINER_ENDPOINTS can be found in %s/endpoints.log, and detail running logs "
           "maybe found in %s/workerlog.%d\n", o->log_dir, o->log_dir, L->first_rank);
    fflush(stdout);
}
