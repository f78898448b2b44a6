/* test/dist/workers/flood_worker.c — a worker that prints a lot, for launcher_test.sh's checks that
 * a slow or stopped terminal neither blocks a worker nor makes dgrun or mpirun hold its output.
 * Writes its pid to PREFIX.<rank>; then rank 0 writes MEGABYTES MiB to stdout as numbered lines of
 * exactly 64 bytes ("%015d" and filler), in 64 KiB write(2) calls, puts the milliseconds that took
 * in PREFIX_time (written then renamed; not PREFIX.time, which the test would take for a pid file)
 * and sleeps SECONDS (default 0) before it exits 0; with `ignore-term` it ignores SIGTERM, so only
 * the launcher's SIGKILL ends it. The other ranks print one line and then sleep the same.
 * usage: flood_worker PREFIX MEGABYTES [SECONDS [ignore-term]] */
#include "worker_env.h"
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LINE 64

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int write_file(const char *path, const char *text) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    /* written then renamed, so the test never reads half a file */
    if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5 || (argc == 5 && strcmp(argv[4], "ignore-term"))) {
        fprintf(stderr, "usage: %s PREFIX MEGABYTES [SECONDS [ignore-term]]\n", argv[0]);
        return 2;
    }
    if (argc == 5) signal(SIGTERM, SIG_IGN);
    unsigned seconds = argc > 3 ? (unsigned)atoi(argv[3]) : 0;
    int rank;
    const char *id = expect_rank("flood_worker", &rank, NULL);
    if (!id) return 2;
    long long mb = atoll(argv[2]);
    char path[4096], text[64];
    snprintf(path, sizeof path, "%s.%s", argv[1], id);
    snprintf(text, sizeof text, "%d\n", (int)getpid());
    if (write_file(path, text) != 0) return 1;
    if (rank != 0) {
        printf("rank %d: nothing to say\n", rank);
        fflush(stdout);
        while (seconds) seconds = sleep(seconds);
        return 0;
    }
    /* 1024 lines of 64 bytes per write; line numbers run on across writes */
    static char buf[1024 * LINE];
    long long lines = mb * 1024 * 1024 / LINE, line = 0, t0 = now_ms();
    while (line < lines) {
        for (int i = 0; i < 1024; i++, line++) {
            char *p = buf + (size_t)i * LINE;
            int n = snprintf(p, LINE, "%015lld flood line ", line);
            memset(p + n, '.', LINE - 1 - (size_t)n);
            p[LINE - 1] = '\n';
        }
        size_t off = 0;
        while (off < sizeof buf) {
            ssize_t w = write(STDOUT_FILENO, buf + off, sizeof buf - off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                fprintf(stderr, "flood_worker: write: %s\n", strerror(errno));
                return 1;
            }
            off += (size_t)w;
        }
    }
    snprintf(path, sizeof path, "%s_time", argv[1]);
    snprintf(text, sizeof text, "%lld\n", now_ms() - t0);
    if (write_file(path, text) != 0) return 1;
    while (seconds) seconds = sleep(seconds);
    return 0;
}
