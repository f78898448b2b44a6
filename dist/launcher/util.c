/* dist/launcher/util.c — the launcher's small utilities (errors, parsing, logs) and its signal
 * handling: a self-pipe, so the supervisor's poll() sees signals and child output in one place. */
#include "dgrun.h"

const char *usage_text =
    "usage: dgrun [options] program [program args...]\n"
    "\n"
    "Starts a dygraph distributed job (like Paddle's fleetrun / python -m paddle.distributed.launch).\n"
    "\n"
    "options (each accepts `--opt value` and `--opt=value`):\n"
    "  --gpus 0,1            GPU mode: one worker per listed GPU on this node; each worker gets\n"
    "                        FLAGS_selected_gpus=<its GPU>  (alias: --selected_gpus)\n"
    "  --nproc_per_node N    CPU mode: N workers per node, started as one MPI world by\n"
    "                        `mpirun -np N --oversubscribe --bind-to none` (Open MPI)\n"
    "  --ips ip1,ip2         the nodes of the job (default 127.0.0.1)  (alias: --cluster_node_ips)\n"
    "                        GPU mode: run the same dgrun command on every node.\n"
    "                        CPU mode: run dgrun on the FIRST node only; mpirun starts the workers\n"
    "                        of the other nodes over ssh (`-H ip1:N,ip2:N`), so it needs\n"
    "                        password-less ssh between the nodes and Open MPI, dgrun and the\n"
    "                        program installed at the same paths on every node\n"
    "  --node_ip IP          this node's entry of --ips (default: the entry that is an address of\n"
    "                        this machine, else the first)\n"
    "  --started_port P      worker i of a node listens on P+i (default: free ports picked by the\n"
    "                        system on a single node, 6170 with several nodes)\n"
    "  --log_dir DIR         worker logs: DIR/workerlog.<rank>, DIR/endpoints.log (default: log)\n"
    "  --mpirun PATH         the mpirun to use in CPU mode (default: mpirun from PATH)\n"
    "parameter-server mode (Paddle's launch_ps; not with the flags above):\n"
    "  --server_num S        S servers on free ports of 127.0.0.1 ...\n"
    "  --worker_num W        ... and W workers, all on this node\n"
    "  --servers ip:port,... the servers of a job on several nodes (this dgrun starts those whose\n"
    "                        address is this machine's; run the same command on every node)\n"
    "  --workers ip,...      the workers' addresses, likewise (default: --worker_num on 127.0.0.1)\n"
    "  --server_grace SEC    once every worker has ended, a server still running this long is\n"
    "                        stopped, and that is reported (default 10)\n"
    "                        Logs: DIR/serverlog.<i>, DIR/workerlog.<i>. Each process gets both\n"
    "                        naming schemes: TRAINING_ROLE / PADDLE_TRAINING_ROLE (PSERVER|TRAINER),\n"
    "                        PADDLE_PSERVERS_IP_PORT_LIST (and PADDLE_PSERVER_IPS + PADDLE_PSERVER_PORT\n"
    "                        when all servers share a port), PADDLE_TRAINERS_NUM / PADDLE_TRAINERS,\n"
    "                        PADDLE_TRAINER_ID (workers), POD_IP / PADDLE_CURRENT_IP, PADDLE_PORT (servers)\n"
    "  -h, --help            this help\n"
    "\n"
    "Every worker gets DG_JOB_TOKEN, the job's identity: dgrun's own DG_JOB_TOKEN when set (a GPU job\n"
    "on several nodes needs the same value given to every node's dgrun), else 128 random bits. The\n"
    "rendezvous store refuses the ranks of another job started on the same ports.\n"
    "\n"
    "Each worker writes its stdout+stderr to DIR/workerlog.<rank> itself (DIR is log unless\n"
    "--log_dir says otherwise); dgrun shows the first worker's log on its stdout as it grows\n"
    "(a program writing to a file should fflush(stdout) for its lines to show as they come).\n"
    "The terminal is best-effort: dgrun never waits for it. When it falls more than 1 MiB behind,\n"
    "the copy skips ahead with a line saying how many bytes were skipped; the log has them all.\n"
    "If any worker exits non-zero or is killed, the others are sent SIGTERM, then SIGKILL after 2 s,\n"
    "and dgrun exits non-zero; SIGINT/SIGTERM to dgrun stop the job the same way.\n"
    "Exit status: 0 when every worker exited 0, 1 when a worker failed, 2 on bad usage,\n"
    "128+n when dgrun was stopped by signal n.\n";

/* ------------------------------------------------------------------------------------------ */
/* small utilities                                                                             */

void die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("dgrun: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

void usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("dgrun: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n\n", stderr);
    va_end(ap);
    fputs(usage_text, stderr);
    exit(2);
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die(1, "out of memory (%zu bytes)", n);
    return p;
}

char *xstrdup(const char *s) {
    char *p = strdup(s);
    if (!p) die(1, "out of memory");
    return p;
}

char *xasprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) die(1, "formatting a string failed");
    char *s = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* A decimal integer in [lo, hi], or -1 (every caller's valid range is non-negative). */
long parse_int(const char *s, long lo, long hi) {
    if (!s || !*s) return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p)) return -1;
        v = v * 10 + (*p - '0');
        if (v > hi) return -1;
    }
    return v < lo ? -1 : v;
}

/* Splits a comma list into fresh strings; NULL when it has an empty entry (",," or a trailing ','),
 * which is always a typo worth rejecting rather than silently skipping. */
char **split_commas(const char *list, int *count, int max) {
    if (!list || !*list) return NULL;
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    if (n > max) return NULL;
    char **out = xmalloc(sizeof(char *) * (size_t)n);
    const char *p = list;
    for (int i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        if (len == 0) { free(out); return NULL; }
        out[i] = xmalloc(len + 1);
        memcpy(out[i], p, len);
        out[i][len] = 0;
        p += len + (p[len] == ',');
    }
    *count = n;
    return out;
}

long long now_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) die(1, "clock_gettime(CLOCK_MONOTONIC): %s", strerror(errno));
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *signal_name(int sig) {
    static const struct { int sig; const char *name; } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
        {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
        {SIGTTOU, "SIGTTOU"}, {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
        {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig) return names[i].name;
    return "unknown signal";
}

/* Full write, retrying short writes and EINTR; false on any other error. */
bool write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

void mkdir_p(const char *dir) {
    char *path = xstrdup(dir);
    for (char *p = path + 1; ; p++) {
        if (*p != '/' && *p != 0) continue;
        char c = *p;
        *p = 0;
        if (mkdir(path, 0755) != 0 && errno != EEXIST) die(1, "mkdir(%s): %s", path, strerror(errno));
        *p = c;
        if (!c) break;
    }
    struct stat st;
    if (stat(dir, &st) != 0) die(1, "stat(%s): %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) die(1, "log_dir %s exists and is not a directory", dir);
    free(path);
}

int open_log(const char *log_dir, int rank, char **path_out) {
    char *path = xasprintf("%s/workerlog.%d", log_dir, rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die(1, "open(%s): %s", path, strerror(errno));
    *path_out = path;
    return fd;
}

/* TOKEN_BYTES random bytes as hex into out (len > 2 * TOKEN_BYTES): the job's token, which the
 * rendezvous store checks on every connection so that another job's ranks on the same ports are
 * refused. getrandom, or /dev/urandom where the kernel lacks it. */
void make_job_token(char *out, size_t len) {
    unsigned char b[TOKEN_BYTES];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    if (got < sizeof b) {
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd < 0) die(1, "no random bytes for the job token: getrandom and /dev/urandom failed (%s)", strerror(errno));
        got = 0;
        while (got < sizeof b) {
            ssize_t n = read(fd, b + got, sizeof b - got);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) die(1, "reading /dev/urandom for the job token: %s", n < 0 ? strerror(errno) : "end of file");
            got += (size_t)n;
        }
        close(fd);
    }
    if (len < 2 * sizeof b + 1) die(1, "internal: job token buffer of %zu bytes", len);
    for (size_t i = 0; i < sizeof b; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* ------------------------------------------------------------------------------------------ */
/* signals: a self-pipe, so the supervisor's poll() sees signals and child output in one place  */

int sig_pipe[2] = {-1, -1};
/* SIGHUP/SIGINT ignored when dgrun started (nohup, `dgrun ... &` in a script) stay ignored, for
 * dgrun and its workers, as a shell would have it */
static bool hup_ignored, int_ignored;

void on_signal(int sig) {
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t w = write(sig_pipe[1], &c, 1); /* a full pipe only drops duplicates of pending signals */
    (void)w;
    errno = saved;
}

void install_signals(void) {
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) die(1, "pipe2 (signal pipe): %s", strerror(errno));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    if (sigemptyset(&sa.sa_mask) != 0) die(1, "sigemptyset: %s", strerror(errno));
    const int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) != 0) die(1, "sigaction(%s): %s", signal_name(sigs[i]), strerror(errno));
        if (old.sa_handler == SIG_IGN && (sigs[i] == SIGHUP || sigs[i] == SIGINT)) {
            *(sigs[i] == SIGHUP ? &hup_ignored : &int_ignored) = true;
            continue;
        }
        if (sigaction(sigs[i], &sa, NULL) != 0) die(1, "sigaction(%s): %s", signal_name(sigs[i]), strerror(errno));
    }
    /* a closed terminal must not kill the supervisor while workers still need stopping */
    sa.sa_handler = SIG_IGN;
    if (sigaction(SIGPIPE, &sa, NULL) != 0) die(1, "sigaction(SIGPIPE): %s", strerror(errno));
}

/* In a freshly forked child, with every signal still blocked: until exec, a signal caught by
 * on_signal would land in the parent's self-pipe (the child shares it) and look like one sent to
 * the parent. Defaults first, then the old mask, so a SIGTERM already pending acts as it should.
 * SIG_IGN of SIGPIPE would even survive exec. */
void child_reset_signals(const sigset_t *old_mask) {
    const int sigs[] = {SIGCHLD, SIGTERM, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
    signal(SIGHUP, hup_ignored ? SIG_IGN : SIG_DFL);
    signal(SIGINT, int_ignored ? SIG_IGN : SIG_DFL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
}
