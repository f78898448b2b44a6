/* dist/launcher/supervise.c — starting children (fork + exec in their own process groups) and
 * supervising them: the first to fail stops the rest, nothing outlives the launcher. */
#include "dgrun.h"

/* ------------------------------------------------------------------------------------------ */
/* the supervisor: children, each the leader of its own process group, plus an optional tee     */



void send_signal(pid_t target, int sig) {
    if (kill(target, sig) != 0 && errno != ESRCH)
        fprintf(stderr, "dgrun: kill(%d, %s): %s\n", (int)target, signal_name(sig), strerror(errno));
}

/* Signals every direct child and its process group. As a subreaper, the launcher inherits the
 * orphans of the programs it ran (a background job of a worker that exited, the workers of a
 * shim that mpirun killed); they have no pid stored anywhere, so /proc is the only list. */
void signal_children(int sig) {
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

void signal_all(supervisor *S, int sig) {
    /* whole groups, to reach their children too; not the group of a reaped leader, whose id the
     * kernel may have handed to someone else once the group emptied (its members that are left
     * were adopted, and signal_children finds them) */
    for (int i = 0; i < S->nkids; i++)
        if (!S->kids[i].reaped) send_signal(-S->kids[i].pid, sig);
    signal_children(sig);
}

void begin_stop(supervisor *S) {
    if (S->stopping) return;
    S->stopping = true;
    S->deadline = now_ms() + STOP_GRACE_MS;
    signal_all(S, SIGTERM);
}

void report_failure(supervisor *S, int i) {
    child *k = &S->kids[i];
    if (WIFSIGNALED(k->status)) {
        int sig = WTERMSIG(k->status);
        fprintf(stderr, "dgrun: %s was killed by signal %d (%s)%s\n", k->label, sig, signal_name(sig), S->fail_suffix);
    } else {
        fprintf(stderr, "dgrun: %s exited with status %d%s\n", k->label, WEXITSTATUS(k->status), S->fail_suffix);
    }
    if (k->log_path) fprintf(stderr, "dgrun: its output is in %s\n", k->log_path);
}

bool status_ok(int status) {
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Collects every child that ended; notes whether any child (ours or adopted) is left. */
void reap(supervisor *S) {
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

void handle_signals(supervisor *S) {
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
int pump_tee(supervisor *S) {
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

void close_tee(supervisor *S) {
    if (S->tee_fd < 0) return;
    /* whatever is still buffered in the pipe after the last writer died */
    if (fcntl(S->tee_fd, F_SETFL, O_NONBLOCK) != 0)
        fprintf(stderr, "dgrun: fcntl(O_NONBLOCK) on the output pipe: %s\n", strerror(errno));
    else
        while (pump_tee(S) == TEE_DATA) {}
    close(S->tee_fd);
    S->tee_fd = -1;
}

bool leaders_alive(const supervisor *S) {
    for (int i = 0; i < S->nkids; i++)
        if (!S->kids[i].reaped) return true;
    return false;
}

/* Runs until every child and every process below it is gone; the caller is a subreaper, so that
 * is when waitpid says there are no children left. Returns the exit status for the launcher:
 * 0 only when every child exited 0. */
int supervise(supervisor *S) {
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


/* fork + exec in its own process group, with stdin from /dev/null (a background group reading
 * the terminal would be stopped by SIGTTIN) and stdout+stderr to out_fd. */
pid_t spawn(char *const argv[], const env_var *env, int nenv, const char *unset, int out_fd, int pdeath_sig) {
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
