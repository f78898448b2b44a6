/* test/dist/rendezvous_worker.c — a worker for launcher_test.sh's two-jobs-on-the-same-ports
 * check: it meets its peers through the rendezvous store (dg_comm_new, as fleet_init does), then
 * all-reduces its rank + 1 and checks the sum, so a job whose store another job's rank joined
 * fails visibly. --delay-rank R --delay S makes rank R wait S seconds before it joins, which holds
 * the job's rank 0 in the rendezvous while the test starts a second job on the same ports.
 *
 *   rendezvous_worker [--delay-rank R] [--delay S] */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f, const char *prog) { fprintf(f, "usage: %s [--delay-rank R] [--delay S]\n", prog); }

int main(int argc, char **argv) {
    int delay_rank = -1;
    double delay = 0;
    /* flags as argparse takes them: --name value or --name=value, anything else exits 2 */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout, argv[0]); return 0; }
        const char *names[] = { "--delay-rank", "--delay" };
        int which = -1;
        for (int k = 0; k < 2; k++) {
            size_t n = strlen(names[k]);
            if (!strncmp(a, names[k], n) && a[n] == '=') { which = k; v = a + n + 1; }
            else if (!strcmp(a, names[k])) {
                which = k;
                if (i + 1 >= argc) { usage(stderr, argv[0]); fprintf(stderr, "%s: error: argument %s: expected one argument\n", argv[0], a); return 2; }
                v = argv[++i];
            }
        }
        char *end = NULL;
        double x = which >= 0 ? strtod(v, &end) : 0;
        if (which < 0) { usage(stderr, argv[0]); fprintf(stderr, "%s: error: unrecognized arguments: %s\n", argv[0], a); return 2; }
        if (!*v || *end || x < 0) {
            usage(stderr, argv[0]);
            fprintf(stderr, "%s: error: argument %s: invalid value: '%s'\n", argv[0], names[which], v);
            return 2;
        }
        if (which == 0) delay_rank = (int)x; else delay = x;
    }
    if (dg_init(NULL) != 0) { fprintf(stderr, "init: %s\n", dg_last_error()); return 1; }
    const char *id = getenv("PADDLE_TRAINER_ID");
    int rank = id ? atoi(id) : 0;
    if (rank == delay_rank && delay > 0) {
        struct timespec ts = { (time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9) };
        nanosleep(&ts, NULL);
    }
    printf("rank %d: joining\n", rank);
    fflush(stdout);
    dg_comm *c = dg_comm_new(dg_comm_default_params());
    if (!c) { fprintf(stderr, "rank %d: comm_new: %s\n", rank, dg_last_error()); return 1; }
    int world = dg_comm_size(c);
    dg_tensor *t = dg_full(DG_SHAPE(1), (double)(dg_comm_rank(c) + 1), DG_F32);
    if (!t || dg_comm_all_reduce(c, t, DG_COMM_SUM) != 0) { fprintf(stderr, "rank %d: all_reduce: %s\n", rank, dg_last_error()); return 1; }
    double got = dg_item(t), want = world * (world + 1) / 2.0;
    if (got != want) { fprintf(stderr, "rank %d: all_reduce gave %g, expected %g\n", rank, got, want); return 1; }
    printf("rank %d of %d: all_reduce ok (%g)\n", dg_comm_rank(c), world, got);
    fflush(stdout);
    dg_tensor_free(t);
    dg_comm_free(c);
    dg_shutdown();
    return 0;
}
