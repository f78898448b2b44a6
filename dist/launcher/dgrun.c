/* dist/launcher/dgrun.c — dgrun, dygraph's launcher: the counterpart of Paddle's `fleetrun` /
 * `python -m paddle.distributed.launch`. It starts one worker process per GPU (--gpus) or N CPU
 * workers under Open MPI's mpirun (--nproc_per_node), hands every worker the trainer environment
 * that dist/env.c reads (PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS,
 * PADDLE_CURRENT_ENDPOINT, PADDLE_LOCAL_RANK, FLAGS_selected_gpus), writes each worker's output
 * to <log_dir>/workerlog.<rank> (worker 0's also to the terminal), and supervises the job: the
 * first worker to fail stops all the others, so a crashed rank never leaves its peers hanging in
 * a collective, and nothing it started outlives it.
 *
 * The same binary has a hidden mode, `dgrun --worker-shim LOG_DIR ENDPOINTS PROGRAM ARGS...`,
 * which mpirun starts once per rank in CPU mode: it translates Open MPI's rank variables into the
 * PADDLE_* ones, runs the program as its child and reports how it ended.
 *
 * Plain POSIX + libc, plus Linux's prctl (parent-death signal, child subreaper) and /proc (to find
 * adopted orphans); no dygraph library calls. */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_LOCAL 1024         /* workers on one node: far above any GPU count or sane CPU split */
#define MAX_NODES 4096
#define STOP_GRACE_MS 5000     /* SIGTERM → SIGKILL: long enough to flush logs, short enough to notice */
#define SHIM_FLAG "--worker-shim"

static const char *usage_text =
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
    "  -h, --help            this help\n"
    "\n"
    "Each worker's stdout+stderr go to DIR/workerlog.<rank>; the first worker's also to the terminal\n"
    "(a program writing to a pipe should fflush(stdout) for its lines to show as they come).\n"
    "If any worker exits non-zero or is killed, the others are sent SIGTERM, then SIGKILL after 5 s,\n"
    "and dgrun exits non-zero; SIGINT/SIGTERM to dgrun stop the job the same way.\n"
    "Exit status: 0 when every worker exited 0, 1 when a worker failed, 2 on bad usage,\n"
    "128+n when dgrun was stopped by signal n.\n";

/* ------------------------------------------------------------------------------------------ */
/* small utilities                                                                             */

static void die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("dgrun: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

static void usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("dgrun: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n\n", stderr);
    va_end(ap);
    fputs(usage_text, stderr);
    exit(2);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die(1, "out of memory (%zu bytes)", n);
    return p;
}

static char *xstrdup(const char *s) {
    char *p = strdup(s);
    if (!p) die(1, "out of memory");
    return p;
}

static char *xasprintf(const char *fmt, ...) {
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
static long parse_int(const char *s, long lo, long hi) {
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
static char **split_commas(const char *list, int *count, int max) {
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

static long long now_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) die(1, "clock_gettime(CLOCK_MONOTONIC): %s", strerror(errno));
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *signal_name(int sig) {
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
static bool write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static void mkdir_p(const char *dir) {
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

static int open_log(const char *log_dir, int rank, char **path_out) {
    char *path = xasprintf("%s/workerlog.%d", log_dir, rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die(1, "open(%s): %s", path, strerror(errno));
    *path_out = path;
    return fd;
}

/* ------------------------------------------------------------------------------------------ */
/* signals: a self-pipe, so the supervisor's poll() sees signals and child output in one place  */

static int sig_pipe[2] = {-1, -1};
/* SIGHUP/SIGINT ignored when dgrun started (nohup, `dgrun ... &` in a script) stay ignored, for
 * dgrun and its workers, as a shell would have it */
static bool hup_ignored, int_ignored;

static void on_signal(int sig) {
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t w = write(sig_pipe[1], &c, 1); /* a full pipe only drops duplicates of pending signals */
    (void)w;
    errno = saved;
}

static void install_signals(void) {
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
static void child_reset_signals(const sigset_t *old_mask) {
    const int sigs[] = {SIGCHLD, SIGTERM, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
    signal(SIGHUP, hup_ignored ? SIG_IGN : SIG_DFL);
    signal(SIGINT, int_ignored ? SIG_IGN : SIG_DFL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* the supervisor: children, each the leader of its own process group, plus an optional tee     */

typedef struct {
    pid_t pid;        /* also the process group id: setpgid(pid, pid) at fork */
    char *label;      /* "worker 1 (rank 1, pid 1234)", for messages */
    char *log_path;   /* where to look, named in the failure message; NULL for mpirun */
    bool reaped;
    int status;
} child;

typedef struct {
    child *kids;
    int nkids;
    int tee_fd;              /* read end of the first worker's output pipe, -1 when none */
    int tee_log;             /* that worker's log */
    const char *tee_log_path;
    bool tee_terminal;       /* still copying to stdout (false after EPIPE) */
    const char *fail_suffix; /* appended to the failure line: "; stopping the other workers" */
    pid_t watch_ppid;        /* shim: stop everything when reparented (mpirun died), 0 = off */
    bool announce_signals;   /* the launcher says why it stops; a shim told to stop by mpirun does not */
    bool stopping, killed;
    long long deadline;
    int stop_signal;         /* the signal that stopped the supervisor itself, 0 = none */
    int failed;              /* index of the first failed child, -1 = none */
    bool has_children;       /* any process left below us: with a subreaper, "no descendants" */
} supervisor;

static void send_signal(pid_t target, int sig) {
    if (kill(target, sig) != 0 && errno != ESRCH)
        fprintf(stderr, "dgrun: kill(%d, %s): %s\n", (int)target, signal_name(sig), strerror(errno));
}

/* Signals every direct child and its process group. As a subreaper, the launcher inherits the
 * orphans of the programs it ran (a background job of a worker that exited, the workers of a
 * shim that mpirun killed); they have no pid stored anywhere, so /proc is the only list. */
static void signal_children(int sig) {
    DIR *d = opendir("/proc");
    if (!d) {
        fprintf(stderr, "dgrun: opendir(/proc): %s; orphans of the workers may survive\n", strerror(errno));
        return;
    }
    pid_t self = getpid(), own_group = getpgrp();
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = parse_int(e->d_name, 1, INT_MAX);
        if (pid < 1) continue;
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* it exited while we looked */
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *after_comm = strrchr(buf, ')'), state; /* the command name may hold spaces and ')' */
        int ppid, pgrp;
        if (!after_comm || sscanf(after_comm + 1, " %c %d %d", &state, &ppid, &pgrp) != 3 || ppid != self) continue;
        if (pgrp > 1 && pgrp != own_group) send_signal(-pgrp, sig);
        send_signal((pid_t)pid, sig);
    }
    closedir(d);
}

static void signal_all(supervisor *S, int sig) {
    /* whole groups, to reach their children too; not the group of a reaped leader, whose id the
     * kernel may have handed to someone else once the group emptied (its members that are left
     * were adopted, and signal_children finds them) */
    for (int i = 0; i < S->nkids; i++)
        if (!S->kids[i].reaped) send_signal(-S->kids[i].pid, sig);
    signal_children(sig);
}

static void begin_stop(supervisor *S) {
    if (S->stopping) return;
    S->stopping = true;
    S->deadline = now_ms() + STOP_GRACE_MS;
    signal_all(S, SIGTERM);
}

static void report_failure(supervisor *S, int i) {
    child *k = &S->kids[i];
    if (WIFSIGNALED(k->status)) {
        int sig = WTERMSIG(k->status);
        fprintf(stderr, "dgrun: %s was killed by signal %d (%s)%s\n", k->label, sig, signal_name(sig), S->fail_suffix);
    } else {
        fprintf(stderr, "dgrun: %s exited with status %d%s\n", k->label, WEXITSTATUS(k->status), S->fail_suffix);
    }
    if (k->log_path) fprintf(stderr, "dgrun: its output is in %s\n", k->log_path);
}

static bool status_ok(int status) {
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Collects every child that ended; notes whether any child (ours or adopted) is left. */
static void reap(supervisor *S) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0 && errno == ECHILD) { S->has_children = false; return; }
        if (pid < 0) die(1, "waitpid: %s", strerror(errno));
        if (pid == 0) { S->has_children = true; return; }
        for (int i = 0; i < S->nkids; i++) {
            child *k = &S->kids[i];
            if (k->pid != pid) continue; /* else an orphan we adopted as subreaper: just reaped */
            k->reaped = true;
            k->status = status;
            if (!status_ok(status) && !S->stopping && S->failed < 0) {
                S->failed = i;
                report_failure(S, i);
                begin_stop(S);
            }
        }
    }
}

static void handle_signals(supervisor *S) {
    unsigned char buf[64];
    ssize_t n;
    while ((n = read(sig_pipe[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            int sig = buf[i];
            if (sig == SIGCHLD) continue;
            if (S->stopping && S->stop_signal) {
                /* a second Ctrl-C: the user does not want to wait out the grace period */
                signal_all(S, SIGKILL);
                S->killed = true;
                continue;
            }
            if (!S->stop_signal) {
                S->stop_signal = sig;
                if (S->announce_signals) fprintf(stderr, "dgrun: got %s; stopping the workers\n", signal_name(sig));
            }
            begin_stop(S);
        }
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) die(1, "read(signal pipe): %s", strerror(errno));
    reap(S);
}

enum { TEE_DATA, TEE_EMPTY, TEE_END };

/* Copies what the first worker wrote to its log and to the terminal, as it comes: no line
 * buffering here, so a worker that flushes its lines has them on the terminal at once. */
static int pump_tee(supervisor *S) {
    char buf[8192];
    ssize_t n = read(S->tee_fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return TEE_EMPTY;
    if (n < 0) {
        fprintf(stderr, "dgrun: read(output pipe of the first worker): %s\n", strerror(errno));
        return TEE_END;
    }
    if (n == 0) return TEE_END;
    if (S->tee_log >= 0 && !write_all(S->tee_log, buf, (size_t)n)) {
        fprintf(stderr, "dgrun: write(%s): %s; its output now goes to the terminal only\n", S->tee_log_path, strerror(errno));
        S->tee_log = -1;
    }
    if (S->tee_terminal && !write_all(STDOUT_FILENO, buf, (size_t)n)) S->tee_terminal = false;
    return TEE_DATA;
}

static void close_tee(supervisor *S) {
    if (S->tee_fd < 0) return;
    /* whatever is still buffered in the pipe after the last writer died */
    if (fcntl(S->tee_fd, F_SETFL, O_NONBLOCK) != 0)
        fprintf(stderr, "dgrun: fcntl(O_NONBLOCK) on the output pipe: %s\n", strerror(errno));
    else
        while (pump_tee(S) == TEE_DATA) {}
    close(S->tee_fd);
    S->tee_fd = -1;
}

static bool leaders_alive(const supervisor *S) {
    for (int i = 0; i < S->nkids; i++)
        if (!S->kids[i].reaped) return true;
    return false;
}

/* Runs until every child and every process below it is gone; the caller is a subreaper, so that
 * is when waitpid says there are no children left. Returns the exit status for the launcher:
 * 0 only when every child exited 0. */
static int supervise(supervisor *S) {
    reap(S);
    while (leaders_alive(S) || S->has_children) {
        /* the children are done but something they started is not: it would become an orphan */
        if (!leaders_alive(S) && !S->stopping) {
            if (S->announce_signals) fprintf(stderr, "dgrun: the workers have exited; stopping what they left running\n");
            begin_stop(S);
        }
        int timeout = -1;
        long long now = now_ms();
        if (S->stopping && !S->killed) timeout = (int)(S->deadline > now ? S->deadline - now : 0);
        if (S->stopping) timeout = timeout < 0 || timeout > 100 ? 100 : timeout; /* orphans send no SIGCHLD yet */
        if (S->watch_ppid) timeout = timeout < 0 || timeout > 1000 ? 1000 : timeout;

        struct pollfd fds[2] = {{.fd = sig_pipe[0], .events = POLLIN}, {.fd = S->tee_fd, .events = POLLIN}};
        int r = poll(fds, S->tee_fd >= 0 ? 2 : 1, timeout);
        if (r < 0 && errno != EINTR) die(1, "poll: %s", strerror(errno));
        if (r > 0 && fds[0].revents) handle_signals(S);
        if (r > 0 && S->tee_fd >= 0 && fds[1].revents && pump_tee(S) == TEE_END) {
            close(S->tee_fd);
            S->tee_fd = -1;
        }
        reap(S); /* cheap, and covers a SIGCHLD whose pipe byte was dropped */
        /* after the deadline, again on every pass: orphans keep arriving as their parents die */
        if (S->stopping && (S->killed || now_ms() >= S->deadline) && (leaders_alive(S) || S->has_children)) {
            signal_all(S, SIGKILL);
            S->killed = true;
        }
        if (S->watch_ppid && getppid() != S->watch_ppid && !S->killed) {
            fprintf(stderr, "dgrun: mpirun (pid %d) is gone; killing the worker\n", (int)S->watch_ppid);
            S->stopping = true;
            signal_all(S, SIGKILL);
            S->killed = true;
        }
    }
    close_tee(S);
    if (S->stop_signal) return 128 + S->stop_signal;
    for (int i = 0; i < S->nkids; i++)
        if (!status_ok(S->kids[i].status)) return 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* starting children                                                                           */

typedef struct {
    const char *name;
    char value[64];
    const char *long_value; /* for values that do not fit (the endpoint list) */
} env_var;

/* fork + exec in its own process group, with stdin from /dev/null (a background group reading
 * the terminal would be stopped by SIGTTIN) and stdout+stderr to out_fd. */
static pid_t spawn(char *const argv[], const env_var *env, int nenv, const char *unset, int out_fd, int pdeath_sig) {
    pid_t parent = getpid();
    fflush(NULL); /* or the child's exit paths could write the parent's buffered text twice */
    sigset_t all, old;
    if (sigfillset(&all) != 0 || sigprocmask(SIG_BLOCK, &all, &old) != 0) die(1, "sigprocmask: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die(1, "fork: %s", strerror(errno));
    if (pid == 0) {
        child_reset_signals(&old);
        int err_fd = out_fd >= 0 ? out_fd : STDERR_FILENO; /* the worker's log, until dup2 */
        if (setpgid(0, 0) != 0) { dprintf(err_fd, "dgrun: setpgid: %s\n", strerror(errno)); _exit(127); }
        if (pdeath_sig && prctl(PR_SET_PDEATHSIG, pdeath_sig) != 0) {
            dprintf(err_fd, "dgrun: prctl(PR_SET_PDEATHSIG): %s\n", strerror(errno));
            _exit(127);
        }
        if (getppid() != parent) _exit(127); /* the launcher died before prctl took effect */
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0) {
            dprintf(err_fd, "dgrun: redirecting stdin from /dev/null: %s\n", strerror(errno));
            _exit(127);
        }
        if (out_fd >= 0 && (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(out_fd, STDERR_FILENO) < 0)) {
            dprintf(err_fd, "dgrun: dup2 (worker output): %s\n", strerror(errno));
            _exit(127);
        }
        if (devnull > STDERR_FILENO) close(devnull);
        if (unset) unsetenv(unset);
        for (int i = 0; i < nenv; i++)
            if (setenv(env[i].name, env[i].long_value ? env[i].long_value : env[i].value, 1) != 0) {
                fprintf(stderr, "dgrun: setenv(%s): %s\n", env[i].name, strerror(errno));
                _exit(127);
            }
        execvp(argv[0], argv);
        fprintf(stderr, "dgrun: cannot execute '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    /* both sides set the group, so it exists before anyone signals it */
    if (setpgid(pid, pid) != 0 && errno != EACCES && errno != ESRCH)
        die(1, "setpgid(%d): %s", (int)pid, strerror(errno));
    if (sigprocmask(SIG_SETMASK, &old, NULL) != 0) die(1, "sigprocmask: %s", strerror(errno));
    return pid;
}

/* ------------------------------------------------------------------------------------------ */
/* options                                                                                     */

typedef struct {
    const char *gpus_text;   /* as given, for the configuration block; NULL = absent */
    int *gpus;
    int ngpus;
    long nproc;              /* 0 = absent */
    const char *ips_text;
    char **ips;
    int nips;
    const char *node_ip;
    int node_index;
    long started_port;       /* 0 = absent */
    const char *log_dir;
    const char *mpirun;
    char **prog;             /* program and its args, NULL-terminated (it is argv's tail) */
    int nprog;
} options;

/* "--name value" or "--name=value": the value, advancing *i past what it used; NULL = not this option. */
static const char *option_value(int argc, char **argv, int *i, const char *name) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != 0) return NULL;
    if (*i + 1 >= argc) usage_error("option %s needs a value", name);
    return argv[++*i];
}

static void parse_gpus(options *o, const char *text) {
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

static void parse_ips(options *o, const char *text) {
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

static void parse_options(options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->log_dir = "log";
    o->mpirun = "mpirun";
    const char *ips = "127.0.0.1";
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--")) { i++; break; }
        if (a[0] != '-' || !a[1]) break; /* the program: everything after it is its own */
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_text, stdout); exit(0); }
        if ((v = option_value(argc, argv, &i, "--gpus")) || (v = option_value(argc, argv, &i, "--selected_gpus")))
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
static bool is_local_address(const char *ip, struct ifaddrs *ifs) {
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

static void choose_node(options *o) {
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
static void pick_free_ports(int n, int *ports) {
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

typedef struct {
    int nlocal, world, first_rank;
    int *ports;          /* per local index */
    char **endpoint;     /* per rank */
    char *endpoints;     /* comma-joined, rank order */
} layout;

static void make_layout(const options *o, layout *L) {
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

static void free_layout(layout *L) {
    for (int r = 0; r < L->world; r++) free(L->endpoint[r]);
    free(L->endpoint);
    free(L->endpoints);
    free(L->ports);
}

static void free_options(options *o) {
    for (int i = 0; i < o->nips; i++) free(o->ips[i]);
    free(o->ips);
    free(o->gpus);
}

/* The variables of local worker i; n = how many. */
static int worker_env(const options *o, const layout *L, int i, env_var *env) {
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
    return n;
}

static void write_endpoints_log(const char *log_dir, const layout *L) {
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

static void print_py_list(char **items, int n) {
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

static void print_configuration(const options *o) {
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
static void print_env_row(const char *key, const char *value) {
    char shown[64];
    size_t len = strlen(value);
    if (len >= 45) snprintf(shown, sizeof shown, "... %s", value + len - 41);
    else snprintf(shown, sizeof shown, "%s", value);
    int pad = 45 - (int)strlen(shown), left = pad / 2;
    printf("    |%40s  %*s%s%*s|\n", key, left, "", shown, pad - left, "");
}

static void print_log_prefix(void) {
    struct timespec ts = {0, 0};
    struct tm tm;
    char when[32] = "";
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && localtime_r(&ts.tv_sec, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    printf("INFO %s,%03ld dgrun] ", when, ts.tv_nsec / 1000000);
}

static void print_envs(const options *o, const layout *L) {
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
    for (int i = 0; i < n; i++) print_env_row(env[i].name, env[i].long_value ? env[i].long_value : env[i].value);
    printf("    +%s+\n\n", border);
    print_log_prefix();
    printf("details about PADDLE_TRAINER_ENDPOINTS can be found in %s/endpoints.log, and detail running logs "
           "maybe found in %s/workerlog.%d\n", o->log_dir, o->log_dir, L->first_rank);
    fflush(stdout);
}

/* ------------------------------------------------------------------------------------------ */
/* GPU mode: dgrun forks the workers itself                                                    */

static int run_gpu_mode(const options *o, const layout *L) {
    supervisor S = {.tee_fd = -1, .tee_log = -1, .tee_terminal = true, .failed = -1,
                    .fail_suffix = "; stopping the other workers", .announce_signals = true};
    S.kids = xmalloc(sizeof(child) * (size_t)L->nlocal);
    /* every file first: a failure here must not leave some workers already running */
    int *log_fd = xmalloc(sizeof(int) * (size_t)L->nlocal), pipefd[2];
    for (int i = 0; i < L->nlocal; i++) {
        memset(&S.kids[i], 0, sizeof(child));
        log_fd[i] = open_log(o->log_dir, L->first_rank + i, &S.kids[i].log_path);
    }
    if (pipe2(pipefd, O_CLOEXEC) != 0) die(1, "pipe2 (output of worker 0): %s", strerror(errno));
    S.tee_fd = pipefd[0];
    S.tee_log = log_fd[0];
    S.tee_log_path = S.kids[0].log_path;
    for (int i = 0; i < L->nlocal; i++) {
        child *k = &S.kids[i];
        env_var env[8];
        int nenv = worker_env(o, L, i, env);
        k->pid = spawn(o->prog, env, nenv, NULL, i == 0 ? pipefd[1] : log_fd[i], SIGKILL);
        k->label = xasprintf("worker %d (rank %d, pid %d)", i, L->first_rank + i, (int)k->pid);
        S.nkids = i + 1;
        if (i == 0) close(pipefd[1]); /* so the pipe ends when worker 0 and its children do */
        else close(log_fd[i]);
    }
    free(log_fd);
    int rc = supervise(&S);
    if (S.tee_log >= 0) close(S.tee_log);
    for (int i = 0; i < S.nkids; i++) {
        free(S.kids[i].label);
        free(S.kids[i].log_path);
    }
    free(S.kids);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* CPU mode: one mpirun, which starts the shim once per rank                                   */

static bool find_in_path(const char *prog) {
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

static char *self_path(void) {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n < 0) die(1, "readlink(/proc/self/exe): %s", strerror(errno));
    buf[n] = 0;
    return xstrdup(buf);
}

/* Before anything is printed or written: CPU mode cannot start without mpirun. */
static void check_cpu_mode(const options *o) {
    if (!find_in_path(o->mpirun))
        die(1, "cannot find '%s': CPU mode (--nproc_per_node) runs the workers under Open MPI's mpirun. "
            "Install the Debian package openmpi-bin (apt-get install openmpi-bin) or give its path with --mpirun PATH",
            o->mpirun);
    if (o->nips > 1 && o->node_index != 0)
        die(1, "in CPU mode with several --ips, run dgrun on the first node (%s) only: its mpirun starts "
            "the workers of every node over ssh", o->ips[0]);
}

static int run_cpu_mode(const options *o, const layout *L) {
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

    supervisor S = {.tee_fd = -1, .tee_log = -1, .failed = -1, .fail_suffix = "; stopping the other workers",
                    .announce_signals = true};
    child k = {0};
    /* SIGTERM, not SIGKILL, if dgrun dies: mpirun then takes its ranks down itself */
    k.pid = spawn(argv, NULL, 0, NULL, -1, SIGTERM);
    k.label = xasprintf("mpirun (pid %d)", (int)k.pid);
    S.kids = &k;
    S.nkids = 1;
    int rc = supervise(&S);
    if (S.failed >= 0)
        fprintf(stderr, "dgrun: the failing worker is named above; every worker's output is in %s/workerlog.<rank>\n",
                o->log_dir);
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

static int env_index(const char *name, long max) {
    const char *v = getenv(name);
    long x = parse_int(v, 0, max);
    if (x < 0) die(2, "%s: %s='%s' is not set to a number; the shim runs only under dgrun's mpirun",
                   SHIM_FLAG, name, v ? v : "");
    return (int)x;
}

static int run_shim(int argc, char **argv) {
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
    int log_fd = open_log(log_dir, rank, &log_path);
    int out_fd = log_fd, pipefd[2] = {-1, -1};
    if (rank == 0) {
        if (pipe2(pipefd, O_CLOEXEC) != 0) die(1, "pipe2 (output of worker 0): %s", strerror(errno));
        out_fd = pipefd[1];
    }
    env_var env[5] = {{"PADDLE_TRAINER_ID", "", NULL}, {"PADDLE_TRAINERS_NUM", "", NULL},
                      {"PADDLE_CURRENT_ENDPOINT", "", eps[rank]}, {"PADDLE_TRAINER_ENDPOINTS", "", endpoints},
                      {"PADDLE_LOCAL_RANK", "", NULL}};
    snprintf(env[0].value, sizeof env[0].value, "%d", rank);
    snprintf(env[1].value, sizeof env[1].value, "%d", world);
    snprintf(env[4].value, sizeof env[4].value, "%d", local);

    supervisor S = {.tee_fd = -1, .tee_log = -1, .tee_terminal = true, .failed = -1, .fail_suffix = "",
                    .watch_ppid = getppid()};
    child k = {0};
    /* no FLAGS_selected_gpus in CPU mode: a stale one from the shell would put the worker on a GPU */
    k.pid = spawn(prog, env, 5, "FLAGS_selected_gpus", out_fd, SIGKILL);
    k.label = xasprintf("worker %d (pid %d)", rank, (int)k.pid);
    k.log_path = log_path;
    S.kids = &k;
    S.nkids = 1;
    if (rank == 0) {
        close(pipefd[1]);
        S.tee_fd = pipefd[0];
        S.tee_log = log_fd;
        S.tee_log_path = log_path;
    }
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
    choose_node(&o);
    if (!o.gpus) check_cpu_mode(&o);
    layout L;
    make_layout(&o, &L);
    mkdir_p(o.log_dir);
    write_endpoints_log(o.log_dir, &L);
    print_configuration(&o);
    print_envs(&o, &L);

    install_signals();
    /* orphaned grandchildren come back to dgrun instead of init, so it can reap what it kills */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die(1, "prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
    int rc = o.gpus ? run_gpu_mode(&o, &L) : run_cpu_mode(&o, &L);
    fflush(stdout);
    free_layout(&L);
    free_options(&o);
    return rc;
}
