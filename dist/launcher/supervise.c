/* dist/launcher/supervise.c — starting children (fork + exec in their own process groups) and
 * supervising them: the first to fail stops the rest, nothing outlives the launcher. */
#include "dgrun.h"

/* ------------------------------------------------------------------------------------------ */
/* the supervisor: children, each the leader of its own process group, and the terminal      */



void send_signal(pid_t target, int sig) {
    if (kill(target, sig) != 0 && errno != ESRCH)
        say("kill(%d, %s): %s", (int)target, signal_name(sig), strerror(errno));
}

/* Signals every direct child and its process group. As a subreaper, the launcher inherits the
 * orphans of the programs it ran (a background job of a worker that exited, the workers of a
 * shim that mpirun killed); they have no pid stored anywhere, so /proc is the only list. */
void signal_children(int sig) {
    DIR *d = opendir("/proc");
    if (!d) {
        say("opendir(/proc): %s; orphans of the workers may survive", strerror(errno));
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
    /* a stopped worker (SIGSTOP, a debugger's or Ctrl-Z's stop: the rank its peers timed out
     * on) acts on SIGTERM only once it runs again; continued now, it ends now, not at the
     * SIGKILL after the grace period */
    signal_all(S, SIGCONT);
}

void report_failure(supervisor *S, int i) {
    child *k = &S->kids[i];
    if (WIFSIGNALED(k->status)) {
        int sig = WTERMSIG(k->status);
        say("%s was killed by signal %d (%s)%s", k->label, sig, signal_name(sig), S->fail_suffix);
    } else {
        say("%s exited with status %d%s", k->label, WEXITSTATUS(k->status), S->fail_suffix);
    }
    if (k->log_path) say("its output is in %s", k->log_path);
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
                if (S->announce_signals) say("got %s; stopping the workers", signal_name(sig));
            }
            begin_stop(S);
        }
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) die(1, "read(signal pipe): %s", strerror(errno));
    reap(S);
}

/* Parameter-server mode: servers normally end on their own once every worker is gone (the
 * workers tell them). When every local worker has ended well and a server is still running after
 * the grace period, it is stopped and named. Returns ms until the deadline, -1 = not waiting. */
static int ps_grace(supervisor *S) {
    /* no worker here, or some elsewhere: the servers end with the job's other nodes, not by ours */
    if (S->ps_servers >= S->nkids || S->ps_grace_ms < 0) return -1;
    bool server_left = false;
    for (int i = 0; i < S->nkids; i++) {
        if (i >= S->ps_servers && (!S->kids[i].reaped || !status_ok(S->kids[i].status))) return -1;
        if (i < S->ps_servers && !S->kids[i].reaped) server_left = true;
    }
    if (!server_left) return -1;
    long long now = now_ms();
    if (!S->ps_grace_deadline) S->ps_grace_deadline = now + S->ps_grace_ms;
    if (now < S->ps_grace_deadline) return (int)(S->ps_grace_deadline - now);
    for (int i = 0; i < S->ps_servers; i++)
        if (!S->kids[i].reaped)
            say("%s has not ended %.1f s after every worker finished; stopping it", S->kids[i].label, S->ps_grace_ms / 1000.0);
    S->ps_servers_terminated = true;
    begin_stop(S);
    return -1;
}

bool leaders_alive(const supervisor *S) {
    for (int i = 0; i < S->nkids; i++)
        if (!S->kids[i].reaped) return true;
    return false;
}

/* Runs until every child and every process below it is gone; the caller is a subreaper, so that
 * is when waitpid says there are no children left. Meanwhile it copies the followed log and
 * mpirun's pipes to the terminal, as far as the terminal takes them (output.c): nothing here
 * waits for the terminal, so a stop is never held up by it. Returns the exit status for the
 * launcher: 0 only when every child exited 0. */
int supervise(supervisor *S) {
    reap(S);
    while (leaders_alive(S) || S->has_children) {
        /* the children are done but something they started is not: it would become an orphan */
        if (!leaders_alive(S) && !S->stopping) {
            if (S->announce_signals) say("the workers have exited; stopping what they left running");
            begin_stop(S);
        }
        int timeout = -1;
        long long now = now_ms();
        if (S->stopping && !S->killed) timeout = (int)(S->deadline > now ? S->deadline - now : 0);
        if (S->stopping) timeout = timeout < 0 || timeout > 100 ? 100 : timeout; /* orphans send no SIGCHLD yet */
        if (S->watch_ppid) timeout = timeout < 0 || timeout > 1000 ? 1000 : timeout;
        if (S->ps_servers && !S->stopping) {
            int t = ps_grace(S);
            if (t >= 0 && (timeout < 0 || t < timeout)) timeout = t;
        }
        /* a regular file has no readiness to wait for: the log is looked at every FOLLOW_MS */
        if (S->follow && S->follow->fd >= 0) {
            if (follow_pump(S->follow)) timeout = 0;
            else timeout = timeout < 0 || timeout > FOLLOW_MS ? FOLLOW_MS : timeout;
        }

        struct pollfd fds[5];
        int nfds = 0, first_relay;
        fds[nfds++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
        first_relay = nfds;
        for (int i = 0; i < 2; i++) fds[nfds++] = (struct pollfd){.fd = S->relays[i].fd, .events = POLLIN}; /* -1: skipped */
        nfds += term_pollfds(fds + nfds);
        int r = poll(fds, (nfds_t)nfds, timeout);
        if (r < 0 && errno != EINTR) die(1, "poll: %s", strerror(errno));
        if (r > 0 && fds[0].revents) handle_signals(S);
        for (int i = 0; i < 2; i++)
            if (r > 0 && S->relays[i].fd >= 0 && fds[first_relay + i].revents) relay_pump(&S->relays[i]);
        term_flush();
        reap(S); /* cheap, and covers a SIGCHLD whose pipe byte was dropped */
        /* after the deadline, again on every pass: orphans keep arriving as their parents die */
        if (S->stopping && (S->killed || now_ms() >= S->deadline) && (leaders_alive(S) || S->has_children)) {
            signal_all(S, SIGKILL);
            S->killed = true;
        }
        if (S->watch_ppid && getppid() != S->watch_ppid && !S->killed) {
            say("mpirun (pid %d) is gone; killing the worker", (int)S->watch_ppid);
            S->stopping = true;
            signal_all(S, SIGKILL);
            S->killed = true;
        }
    }
    /* what mpirun wrote last: its pipes end now that it and everything below it are gone */
    for (int i = 0; i < 2; i++)
        if (S->relays[i].fd >= 0) relay_pump(&S->relays[i]);
    if (S->stop_signal) return 128 + S->stop_signal;
    for (int i = S->ps_servers_terminated ? S->ps_servers : 0; i < S->nkids; i++)
        if (!status_ok(S->kids[i].status)) return 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* starting children                                                                           */


/* fork + exec in its own process group, with stdin from /dev/null (a background group reading
 * the terminal would be stopped by SIGTTIN), stdout to out_fd and stderr to err_fd (-1: dgrun's). */
pid_t spawn(char *const argv[], const env_var *env, int nenv, const char *unset, int out_fd, int err_fd, int pdeath_sig) {
    pid_t parent = getpid();
    fflush(NULL); /* or the child's exit paths could write the parent's buffered text twice */
    sigset_t all, old;
    if (sigfillset(&all) != 0 || sigprocmask(SIG_BLOCK, &all, &old) != 0) die(1, "sigprocmask: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die(1, "fork: %s", strerror(errno));
    if (pid == 0) {
        child_reset_signals(&old);
        int say_fd = err_fd >= 0 ? err_fd : STDERR_FILENO; /* the worker's log, until dup2 */
        if (setpgid(0, 0) != 0) { dprintf(say_fd, "dgrun: setpgid: %s\n", strerror(errno)); _exit(127); }
        if (pdeath_sig && prctl(PR_SET_PDEATHSIG, pdeath_sig) != 0) {
            dprintf(say_fd, "dgrun: prctl(PR_SET_PDEATHSIG): %s\n", strerror(errno));
            _exit(127);
        }
        if (getppid() != parent) _exit(127); /* the launcher died before prctl took effect */
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0) {
            dprintf(say_fd, "dgrun: redirecting stdin from /dev/null: %s\n", strerror(errno));
            _exit(127);
        }
        if ((out_fd >= 0 && dup2(out_fd, STDOUT_FILENO) < 0) || (err_fd >= 0 && dup2(err_fd, STDERR_FILENO) < 0)) {
            dprintf(say_fd, "dgrun: dup2 (worker output): %s\n", strerror(errno));
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
