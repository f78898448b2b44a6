/* dist/launcher/dgrun.c — dgrun, dygraph's launcher: the counterpart of Paddle's `fleetrun` /
 * `python -m paddle.distributed.launch`. It starts one worker process per GPU (--gpus) or N CPU
 * workers under Open MPI's mpirun (--nproc_per_node), hands every worker the trainer environment
 * that dist/env.c reads (PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS,
 * PADDLE_CURRENT_ENDPOINT, PADDLE_LOCAL_RANK, FLAGS_selected_gpus) and the job's identity
 * (DG_JOB_TOKEN, which the rendezvous store checks), has each worker write its output to
 * <log_dir>/workerlog.<rank> itself (and shows worker 0's log on the terminal, best-effort:
 * output.c), and supervises the job: the first worker to fail stops all the others, so a crashed
 * rank never leaves its peers hanging in a collective, and nothing it started outlives it.
 *
 * The same binary has a hidden mode, `dgrun --worker-shim LOG_DIR ENDPOINTS PROGRAM ARGS...`,
 * which mpirun starts once per rank in CPU mode: it translates Open MPI's rank variables into the
 * PADDLE_* ones, runs the program as its child with the rank's log as its stdout and stderr (so
 * the program's output never passes through mpirun's forwarding) and reports how it ended.
 *
 * Parameter-server jobs (--server_num / --servers) are ps.c's: servers and workers forked here,
 * with the role environment of dist/ps/env.c.
 *
 * Plain POSIX + libc, plus Linux's prctl (parent-death signal, child subreaper) and /proc (to find
 * adopted orphans, and to reopen the terminal non-blocking); no dygraph library calls. */
#include "dgrun.h"

/* ------------------------------------------------------------------------------------------ */
/* GPU mode: dgrun forks the workers itself                                                    */

int run_gpu_mode(const options *o, const layout *L) {
    supervisor S = {.failed = -1, .fail_suffix = "; stopping the other workers", .announce_signals = true,
                    .relays = {{.fd = -1}, {.fd = -1}}};
    S.kids = xmalloc(sizeof(child) * (size_t)L->nlocal);
    /* every file first: a failure here must not leave some workers already running */
    int *log_fd = xmalloc(sizeof(int) * (size_t)L->nlocal);
    for (int i = 0; i < L->nlocal; i++) {
        memset(&S.kids[i], 0, sizeof(child));
        log_fd[i] = open_log(o->log_dir, L->first_rank + i, &S.kids[i].log_path);
    }
    /* each worker writes its log itself, so the log never waits for dgrun or the terminal;
     * dgrun shows the first one's as it grows */
    follower F;
    follow_open(&F, S.kids[0].log_path, L->first_rank);
    S.follow = &F;
    for (int i = 0; i < L->nlocal; i++) {
        child *k = &S.kids[i];
        env_var env[8];
        int nenv = worker_env(o, L, i, env);
        k->pid = spawn(o->prog, env, nenv, NULL, log_fd[i], log_fd[i], SIGKILL);
        k->label = xasprintf("worker %d (rank %d, pid %d)", i, L->first_rank + i, (int)k->pid);
        S.nkids = i + 1;
        close(log_fd[i]);
    }
    free(log_fd);
    int rc = supervise(&S);
    if (S.stop_signal) term_finish(&F, SIGNAL_FINISH_MS, SIGNAL_FINISH_MS);
    else term_finish(&F, FINISH_STALL_MS, FINISH_MAX_MS);
    for (int i = 0; i < S.nkids; i++) {
        free(S.kids[i].label);
        free(S.kids[i].log_path);
    }
    free(S.kids);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* CPU mode: one mpirun, which starts the shim once per rank                                   */

bool find_in_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    char *copy = xstrdup(path);
    bool found = false;
    for (char *save = NULL, *dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        char *full = xasprintf("%s/%s", *dir ? dir : ".", prog);
        found = access(full, X_OK) == 0;
        free(full);
    }
    free(copy);
    return found;
}

char *self_path(void) {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n < 0) die(1, "readlink(/proc/self/exe): %s", strerror(errno));
    buf[n] = 0;
    return xstrdup(buf);
}

/* Before anything is printed or written: CPU mode cannot start without mpirun. */
void check_cpu_mode(const options *o) {
    if (!find_in_path(o->mpirun))
        die(1, "cannot find '%s': CPU mode (--nproc_per_node) runs the workers under Open MPI's mpirun. "
            "Install the Debian package openmpi-bin (apt-get install openmpi-bin) or give its path with --mpirun PATH",
            o->mpirun);
    if (o->nips > 1 && o->node_index != 0)
        die(1, "in CPU mode with several --ips, run dgrun on the first node (%s) only: its mpirun starts "
            "the workers of every node over ssh", o->ips[0]);
}

int run_cpu_mode(const options *o, const layout *L) {
    char *log_dir = realpath(o->log_dir, NULL); /* the shims may start elsewhere (other nodes) */
    if (!log_dir) die(1, "realpath(%s): %s", o->log_dir, strerror(errno));

    char **argv = xmalloc(sizeof(char *) * (size_t)(o->nprog + 20));
    int n = 0;
    argv[n++] = (char *)o->mpirun;
    argv[n++] = "-np";
    char *np = xasprintf("%d", L->world), *hosts = NULL, *self = self_path();
    argv[n++] = np;
    argv[n++] = "--oversubscribe";
    argv[n++] = "--bind-to";
    argv[n++] = "none";
    argv[n++] = "-x";        /* the job token to every rank, on other nodes too */
    argv[n++] = TOKEN_ENV;
    if (geteuid() == 0) argv[n++] = "--allow-run-as-root";
    if (o->nips > 1) {
        size_t len = 1;
        for (int i = 0; i < o->nips; i++) len += strlen(o->ips[i]) + 16;
        hosts = xmalloc(len);
        hosts[0] = 0;
        for (int i = 0; i < o->nips; i++)
            snprintf(hosts + strlen(hosts), len - strlen(hosts), "%s%s:%d", i ? "," : "", o->ips[i], L->nlocal);
        argv[n++] = "-H";
        argv[n++] = hosts;
        argv[n++] = "--map-by"; /* fill node 0 first, so rank r is on node r / nproc like the endpoints */
        argv[n++] = "slot";
    }
    argv[n++] = self;
    argv[n++] = SHIM_FLAG;
    argv[n++] = log_dir;
    argv[n++] = L->endpoints;
    for (int i = 0; i < o->nprog; i++) argv[n++] = o->prog[i];
    argv[n] = NULL;

    /* The shims write every rank's output straight to its log: none of it passes through mpirun,
     * whose forwarding would queue whatever the terminal does not take, without bound. Rank 0's
     * log is made here, so dgrun follows it from the start (the shim of rank 0 opens the same
     * file); mpirun's own stdout and stderr, which carry only what mpirun and the shims say, come
     * to dgrun through pipes that it always reads. */
    char *log0_path;
    close(open_log(o->log_dir, 0, &log0_path));
    follower F;
    follow_open(&F, log0_path, 0);
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) die(1, "pipe2 (mpirun's output): %s", strerror(errno));
    if (fcntl(out_pipe[0], F_SETFL, O_NONBLOCK) != 0 || fcntl(err_pipe[0], F_SETFL, O_NONBLOCK) != 0)
        die(1, "fcntl(O_NONBLOCK) on mpirun's output pipes: %s", strerror(errno));

    supervisor S = {.failed = -1, .fail_suffix = "; stopping the other workers", .announce_signals = true,
                    .follow = &F, .relays = {{out_pipe[0], 0, "mpirun's stdout"}, {err_pipe[0], 1, "mpirun's stderr"}}};
    child k = {0};
    /* SIGTERM, not SIGKILL, if dgrun dies: mpirun then takes its ranks down itself */
    env_var token = {TOKEN_ENV, "", L->token};
    k.pid = spawn(argv, &token, 1, NULL, out_pipe[1], err_pipe[1], SIGTERM);
    close(out_pipe[1]);
    close(err_pipe[1]);
    k.label = xasprintf("mpirun (pid %d)", (int)k.pid);
    S.kids = &k;
    S.nkids = 1;
    int rc = supervise(&S);
    if (S.failed >= 0)
        say("the failing worker is named above; every worker's output is in %s/workerlog.<rank>", o->log_dir);
    if (S.stop_signal) term_finish(&F, SIGNAL_FINISH_MS, SIGNAL_FINISH_MS);
    else term_finish(&F, FINISH_STALL_MS, FINISH_MAX_MS);
    for (int i = 0; i < 2; i++)
        if (S.relays[i].fd >= 0) close(S.relays[i].fd);
    free(log0_path);
    free(k.label);
    free(np);
    free(hosts);
    free(self);
    free(log_dir);
    free(argv);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* the shim: one per rank under mpirun                                                         */

int env_index(const char *name, long max) {
    const char *v = getenv(name);
    long x = parse_int(v, 0, max);
    if (x < 0) die(2, "%s: %s='%s' is not set to a number; the shim runs only under dgrun's mpirun",
                   SHIM_FLAG, name, v ? v : "");
    return (int)x;
}

int run_shim(int argc, char **argv) {
    if (argc < 5) die(2, "usage: dgrun %s LOG_DIR ENDPOINTS PROGRAM [ARGS...] (started by dgrun's mpirun)", SHIM_FLAG);
    const char *log_dir = argv[2], *endpoints = argv[3];
    char **prog = argv + 4;
    int world = env_index("OMPI_COMM_WORLD_SIZE", 1 << 20);
    int rank = env_index("OMPI_COMM_WORLD_RANK", 1 << 20);
    int local = env_index("OMPI_COMM_WORLD_LOCAL_RANK", 1 << 20);
    int neps = 0;
    char **eps = split_commas(endpoints, &neps, 1 << 20);
    if (!eps || neps != world || rank >= world)
        die(2, "%s: %d endpoints for a world of %d (rank %d): '%s'", SHIM_FLAG, eps ? neps : 0, world, rank, endpoints);

    install_signals();
    /* the program's orphans come back here to be reaped, not to init on a node without dgrun */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die(1, "prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
    mkdir_p(log_dir); /* on another node the directory may not exist yet */
    char *log_path;
    /* the program writes its log itself: its output never passes through mpirun (for rank 0,
     * dgrun follows this file to the terminal) */
    int log_fd = open_log(log_dir, rank, &log_path);
    env_var env[5] = {{"PADDLE_TRAINER_ID", "", NULL}, {"PADDLE_TRAINERS_NUM", "", NULL},
                      {"PADDLE_CURRENT_ENDPOINT", "", eps[rank]}, {"PADDLE_TRAINER_ENDPOINTS", "", endpoints},
                      {"PADDLE_LOCAL_RANK", "", NULL}};
    snprintf(env[0].value, sizeof env[0].value, "%d", rank);
    snprintf(env[1].value, sizeof env[1].value, "%d", world);
    snprintf(env[4].value, sizeof env[4].value, "%d", local);

    supervisor S = {.failed = -1, .fail_suffix = "", .watch_ppid = getppid(), .relays = {{.fd = -1}, {.fd = -1}}};
    child k = {0};
    /* no FLAGS_selected_gpus in CPU mode: a stale one from the shell would put the worker on a GPU */
    k.pid = spawn(prog, env, 5, "FLAGS_selected_gpus", log_fd, log_fd, SIGKILL);
    k.label = xasprintf("worker %d (pid %d)", rank, (int)k.pid);
    k.log_path = log_path;
    S.kids = &k;
    S.nkids = 1;
    int rc = supervise(&S);
    if (!status_ok(k.status)) {
        /* the log keeps the reason even when mpirun's copy of stderr scrolls away */
        int sig = WIFSIGNALED(k.status) ? WTERMSIG(k.status) : 0;
        if (sig) dprintf(log_fd, "dgrun: worker %d (pid %d) was killed by signal %d (%s)\n", rank, (int)k.pid, sig, signal_name(sig));
        else dprintf(log_fd, "dgrun: worker %d (pid %d) exited with status %d\n", rank, (int)k.pid, WEXITSTATUS(k.status));
        rc = sig ? 128 + sig : WEXITSTATUS(k.status);
    }
    close(log_fd);
    free(k.label);
    free(log_path);
    for (int i = 0; i < neps; i++) free(eps[i]);
    free(eps);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], SHIM_FLAG)) return run_shim(argc, argv);

    options o;
    parse_options(&o, argc, argv);
    if (o.ps) {
        ps_layout P;
        make_ps_layout(&o, &P);
        mkdir_p(o.log_dir);
        print_ps_tables(&o, &P);
        install_signals();
        term_open();
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die(1, "prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
        int rc = run_ps_mode(&o, &P);
        fflush(stdout);
        free_ps_layout(&P);
        return rc;
    }
    choose_node(&o);
    if (!o.gpus) check_cpu_mode(&o);
    layout L;
    make_layout(&o, &L);
    choose_job_token(&o, &L);
    mkdir_p(o.log_dir);
    write_endpoints_log(o.log_dir, &L);
    print_configuration(&o);
    print_envs(&o, &L);

    install_signals();
    /* from here on dgrun's stdout and stderr never block it (output.c) */
    term_open();
    /* orphaned grandchildren come back to dgrun instead of init, so it can reap what it kills */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die(1, "prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
    int rc = o.gpus ? run_gpu_mode(&o, &L) : run_cpu_mode(&o, &L);
    fflush(stdout);
    free_layout(&L);
    free_options(&o);
    return rc;
}
