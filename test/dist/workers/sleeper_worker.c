/* test/dist/workers/sleeper_worker.c — a long-running worker for launcher_test.sh: writes its pid
 * to PIDFILE_PREFIX.<rank> (so the test can kill one rank), then prints `step:N loss:[..]` lines
 * like a training loop until killed, or gives up after STEPS steps of 100 ms so a broken launcher
 * cannot leave it running forever. usage: sleeper_worker PIDFILE_PREFIX [STEPS] */
#include "worker_env.h"
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PIDFILE_PREFIX [STEPS]\n", argv[0]);
        return 2;
    }
    const char *id = expect_rank("sleeper_worker", NULL, NULL);
    if (!id) return 2;
    int steps = argc > 2 ? atoi(argv[2]) : 600;
    char path[4096];
    snprintf(path, sizeof path, "%s.%s", argv[1], id);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    /* written then renamed, so the test never reads a half-written pid */
    if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        perror(path);
        return 1;
    }
    for (int step = 0; step < steps; step++) {
        printf("step:%d\tloss:[%.7f]\n", step, 1.0 / (step + 1));
        fflush(stdout);
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}
