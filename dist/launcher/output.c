/* dist/launcher/output.c — dgrun's terminal, best-effort. Every worker writes its stdout+stderr
 * to its own log file itself, so the log never waits for anyone; what dgrun shows on its own
 * stdout (the first local worker's output, followed from that log like `tail -f`) and stderr
 * (its own messages, and in CPU mode what mpirun says) goes out through small bounded buffers
 * with writes that never block. A terminal that is slow, stopped (Ctrl-S, a pager nobody
 * scrolls) or a pipe nobody reads therefore costs dgrun at most those buffers: while it does not
 * keep up, output for it is skipped, with a notice saying how much and where the full log is,
 * and neither the workers nor dgrun's handling of Ctrl-C ever waits for it. */
#include "dgrun.h"

#include <sys/socket.h>

#define SINK_CAP (256 * 1024)     /* per stream: what a terminal that pauses may be owed */
#define FOLLOW_CHUNK (64 * 1024)  /* one read of the followed log */
#define FOLLOW_BUDGET (1 << 20)   /* bytes per follow_pump call, so signals are seen between calls */
#define LAG_MAX (1 << 20)         /* a stalled terminal this far behind the log skips ahead ... */
#define SKIP_KEEP (64 * 1024)     /* ... to this much before the log's end: the latest output */
#define SKIP_LINE_MAX (64 * 1024) /* after a skip, how far to look for a line start */

enum { OUT_PLAIN, OUT_OWN, OUT_SEND, OUT_POLL };

typedef struct {
    int fd;
    int how;
    const char *name;              /* "stdout" / "stderr", for nothing but debugging */
    char buf[SINK_CAP];
    size_t off, len;               /* pending bytes: buf[off, off + len) */
    unsigned long long dropped;    /* put while full, not yet announced */
    bool broken;                   /* the reader is gone (EPIPE, EIO, ...): drop silently */
} sink;

static sink sinks[2] = {{.fd = STDOUT_FILENO, .name = "stdout"}, {.fd = STDERR_FILENO, .name = "stderr"}};
static bool term_on;               /* term_open ran: dgrun's messages go through the sinks */
static unsigned long long written; /* bytes the terminal took, to tell a slow one from a stopped one */

/* A description of fd that is dgrun's own, so it can be non-blocking without touching the one
 * dgrun shares with the shell (O_NONBLOCK there would break the shell or its other jobs): a
 * pipe or a terminal opened anew through /proc. A regular file never makes a writer wait for a
 * reader, so it is used as it is; a socket takes MSG_DONTWAIT per call. Where /proc cannot
 * reopen it, each write first asks poll() and writes at most PIPE_BUF, which a pipe that
 * reported room always takes whole. */
static void sink_open(sink *s) {
    struct stat st;
    if (fstat(s->fd, &st) != 0) { s->broken = true; return; }
    if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) { s->how = OUT_PLAIN; return; }
    if (S_ISSOCK(st.st_mode)) { s->how = OUT_SEND; return; }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", s->fd);
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0) {
        s->fd = fd;
        s->how = OUT_OWN;
    } else {
        s->how = OUT_POLL;
    }
}

void term_open(void) {
    fflush(NULL);
    for (int i = 0; i < 2; i++) sink_open(&sinks[i]);
    term_on = true;
}

/* One write that does not block: bytes written, 0 when the reader is not taking any now, -1
 * when it is gone for good. */
static ssize_t sink_write(sink *s, const char *p, size_t n) {
    for (;;) {
        ssize_t w;
        if (s->how == OUT_SEND) {
            w = send(s->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else if (s->how == OUT_POLL) {
            struct pollfd pfd = {.fd = s->fd, .events = POLLOUT};
            int r = poll(&pfd, 1, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r == 0) return 0;
            if (r > 0 && (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))) return -1;
            w = write(s->fd, p, n < PIPE_BUF ? n : PIPE_BUF);
        } else {
            w = write(s->fd, p, n);
        }
        if (w >= 0) return w;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -1;
    }
}

static void sink_flush(sink *s) {
    while (s->len && !s->broken) {
        ssize_t w = sink_write(s, s->buf + s->off, s->len);
        if (w < 0) { s->broken = true; s->len = 0; break; }
        if (w == 0) break;
        s->off += (size_t)w;
        s->len -= (size_t)w;
        written += (unsigned long long)w;
    }
    if (!s->len) s->off = 0;
}

static size_t sink_room(const sink *s) {
    return SINK_CAP - s->len;
}

static bool sink_append(sink *s, const char *p, size_t n) {
    if (n > sink_room(s)) return false;
    if (s->off + s->len + n > SINK_CAP) {
        memmove(s->buf, s->buf + s->off, s->len);
        s->off = 0;
    }
    memcpy(s->buf + s->off + s->len, p, n);
    s->len += n;
    return true;
}

/* Queues n bytes for stdout (which 0) or stderr (1), whole or not at all, and writes what the
 * terminal takes now. Before term_open (and in the shim, whose stderr is mpirun's pipe, which
 * mpirun always reads) a plain write. */
void term_put(int which, const char *p, size_t n) {
    sink *s = &sinks[which];
    if (!term_on) {
        (void)write_all(s->fd, p, n);
        return;
    }
    if (s->broken) return;
    if (s->dropped) {
        char note[160];
        int m = snprintf(note, sizeof note, "dgrun: [%llu bytes of output not shown here: the terminal did not keep up]\n",
                         s->dropped);
        if (!sink_append(s, note, (size_t)m)) { s->dropped += n; return; }
        s->dropped = 0;
    }
    if (!sink_append(s, p, n)) s->dropped += n;
    sink_flush(s);
}

/* dgrun's own messages: "dgrun: ...\n" on stderr, through its sink once the workers run. */
void say(const char *fmt, ...) {
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + 7, sizeof line - 8, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    memcpy(line, "dgrun: ", 7);
    size_t len = 7 + ((size_t)n < sizeof line - 8 ? (size_t)n : sizeof line - 9);
    line[len++] = '\n';
    term_put(1, line, len);
}

void term_flush(void) {
    if (!term_on) return;
    for (int i = 0; i < 2; i++) sink_flush(&sinks[i]);
}

/* The sinks that wait for their terminal to take more, as poll() entries (POLLOUT). */
int term_pollfds(struct pollfd *fds) {
    int n = 0;
    if (!term_on) return 0;
    for (int i = 0; i < 2; i++) {
        sink *s = &sinks[i];
        if (s->len && !s->broken && s->how != OUT_PLAIN) fds[n++] = (struct pollfd){.fd = s->fd, .events = POLLOUT};
    }
    return n;
}

bool term_pending(void) {
    return term_on && ((sinks[0].len && !sinks[0].broken) || (sinks[1].len && !sinks[1].broken));
}

/* ------------------------------------------------------------------------------------------ */
/* following the first local worker's log to stdout                                            */

void follow_open(follower *f, const char *path, int rank) {
    memset(f, 0, sizeof *f);
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) die(1, "open(%s) to follow it: %s", path, strerror(errno));
    f->path = path;
    f->rank = rank;
    f->last = '\n';
}

/* The terminal skips from here; the notice goes out where it picks up again. */
static void follow_skip(follower *f, off_t to) {
    f->gap += (unsigned long long)(to - f->pos);
    f->dropped += (unsigned long long)(to - f->pos);
    f->pos = to;
    f->skip_line = true;
    f->skipped_in_line = 0;
}

/* The line that marks a skip, where the terminal picks up again. */
static void follow_notice(follower *f) {
    char note[PATH_MAX + 200];
    int m = snprintf(note, sizeof note, "%sdgrun: [%llu bytes of rank %d's output skipped here: the terminal did not "
                     "keep up; the full log is %s]\n", f->last == '\n' ? "" : "\n", f->gap, f->rank, f->path);
    term_put(0, note, m < (int)sizeof note ? (size_t)m : sizeof note - 1);
    f->gap = 0;
    f->last = '\n';
}

/* Copies what the log has gained to stdout, as far as the terminal takes it. Reads only while
 * the stdout sink is at most half full, so memory stays the sink's; when the terminal has
 * stopped taking output and the log is more than LAG_MAX ahead, skips to SKIP_KEEP before the
 * log's end (what the workers print last is what one wants to see) and resumes at the next line
 * start there. Returns true when it stopped for its budget with more
 * to copy (call again without waiting). */
bool follow_pump(follower *f) {
    sink *s = &sinks[0];
    if (f->fd < 0) return false;
    if (s->broken) { f->done = true; return false; } /* `dgrun | head`: no one to show it to */
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        say("fstat(%s): %s; its output is no longer shown here", f->path, strerror(errno));
        close(f->fd);
        f->fd = -1;
        return false;
    }
    if (st.st_size < f->pos) f->pos = 0; /* truncated: started anew */
    size_t budget = FOLLOW_BUDGET;
    char buf[FOLLOW_CHUNK];
    while (f->pos < st.st_size) {
        if (sink_room(s) < SINK_CAP / 2 + 512) {
            if (st.st_size - f->pos > LAG_MAX) follow_skip(f, st.st_size - SKIP_KEEP);
            return false;
        }
        if (!budget) return true;
        ssize_t n = pread(f->fd, buf, sizeof buf, f->pos);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break; /* the size we saw is not there yet (or an error: try again later) */
        f->pos += n;
        budget = (size_t)n < budget ? budget - (size_t)n : 0;
        const char *p = buf;
        size_t len = (size_t)n;
        if (f->skip_line) {
            const char *nl = memchr(p, '\n', len);
            size_t cut = nl ? (size_t)(nl + 1 - p) : len;
            if (!nl && f->skipped_in_line + len >= SKIP_LINE_MAX) cut = 0; /* no line start in sight */
            f->gap += cut;
            f->dropped += cut;
            f->skipped_in_line += cut;
            if (nl || cut == 0) f->skip_line = false;
            p += cut;
            len -= cut;
        }
        if (!len) continue;
        if (f->gap) follow_notice(f);
        term_put(0, p, len);
        f->last = p[len - 1];
    }
    return false;
}

/* Whether the self-pipe holds a signal other than SIGCHLD (the children are gone by now). */
static bool got_stop_signal(void) {
    unsigned char buf[64];
    ssize_t n;
    bool stop = false;
    while ((n = read(sig_pipe[0], buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++) stop |= buf[i] != SIGCHLD;
    return stop;
}

/* After the job: what the log gained last, as long as the terminal keeps taking it; then the
 * one line on stderr that says how much the terminal missed. Gives up when the terminal took
 * nothing for stall_ms or after total_ms in all, or at a signal (the user wants out). */
void term_finish(follower *f, int stall_ms, int total_ms) {
    if (!term_on) return;
    long long start = now_ms(), last_progress = start;
    unsigned long long seen = written;
    for (;;) {
        bool more = f && f->fd >= 0 && follow_pump(f);
        term_flush();
        struct stat st;
        bool log_done = !f || f->fd < 0 || f->done || (fstat(f->fd, &st) == 0 && f->pos >= st.st_size);
        if (log_done && !term_pending()) break;
        long long now = now_ms();
        if (written != seen) { seen = written; last_progress = now; }
        if (now - last_progress >= stall_ms || now - start >= total_ms) break;
        if (more) continue;
        struct pollfd fds[3];
        int n = term_pollfds(fds);
        fds[n++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
        int r = poll(fds, (nfds_t)n, 50);
        if (r > 0 && (fds[n - 1].revents & POLLIN) && got_stop_signal()) break; /* Ctrl-C while waiting for the terminal */
    }
    if (f && f->fd >= 0 && !f->done) {
        struct stat st;
        if (fstat(f->fd, &st) == 0 && st.st_size > f->pos) follow_skip(f, st.st_size);
        /* what still waits in the sink was not shown either (nearly all of it is the log's) */
        f->dropped += sinks[0].len;
        sinks[0].len = sinks[0].off = 0;
    }
    if (f && f->gap && !sinks[0].broken) follow_notice(f); /* skipped at the very end */
    if (f && f->dropped) {
        say("%llu bytes of rank %d's output were not shown here: the terminal did not keep up. "
            "The full output is in %s", f->dropped, f->rank, f->path);
        /* one more short chance for that line */
        long long until = now_ms() + (stall_ms < 200 ? stall_ms : 200);
        while (term_pending() && now_ms() < until) {
            term_flush();
            struct pollfd fds[2];
            int n = term_pollfds(fds);
            if (n) poll(fds, (nfds_t)n, 20);
        }
    }
    if (f && f->fd >= 0) close(f->fd);
}

/* ------------------------------------------------------------------------------------------ */
/* mpirun's own stdout and stderr (CPU mode): always read, so mpirun never waits or queues      */

/* Reads what the pipe holds now into its stream's sink (skipped when the sink is full).
 * Returns false at the end of the pipe. */
bool relay_pump(relay *r) {
    char buf[16384];
    for (;;) {
        ssize_t n = read(r->fd, buf, sizeof buf);
        if (n > 0) { term_put(r->to, buf, (size_t)n); continue; }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        if (n < 0) say("read(%s): %s", r->what, strerror(errno));
        close(r->fd);
        r->fd = -1;
        return false;
    }
}
