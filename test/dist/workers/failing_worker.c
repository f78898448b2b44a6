/* test/dist/workers/failing_worker.c — a worker for launcher_test.sh whose rank 1 exits with
 * status 3 after a moment, while the other ranks keep "training" (for up to 60 s) until the
 * launcher stops them. usage: failing_worker [PIDFILE_PREFIX] */
#include "worker_env.h"
#include <string.h>
#include <time.h>
#include <unistd.h>

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    const char *id = expect_rank("failing_worker", NULL, NULL);
    if (!id) return 2;
    if (argc > 1) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%s", argv[1], id);
        FILE *f = fopen(path, "w");
        if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
            perror(path);
            return 1;
        }
    }
    /* long enough that every rank is up before rank 1 fails */
    nap_ms(500);
    if (!strcmp(id, "1")) {
        printf("rank 1: failing with status 3\n");
        fflush(stdout);
        return 3;
    }
    for (int step = 0; step < 600; step++) {
        printf("step:%d\tloss:[%.7f]\n", step, 1.0 / (step + 1));
        fflush(stdout);
        nap_ms(100);
    }
    return 0;
}
