/* test/dist/workers/worker_env.h — the check every launcher-test worker makes first: dgrun (or
 * its shim under mpirun) must have given it PADDLE_TRAINER_ID and PADDLE_TRAINERS_NUM, a rank
 * below the world size. A worker started without them says so and exits 2, so a launcher that
 * forgets the environment fails the test instead of passing on a default. */
#ifndef DG_TEST_WORKER_ENV_H
#define DG_TEST_WORKER_ENV_H

#include <stdio.h>
#include <stdlib.h>

/* The rank as text (for file names), or NULL after printing why the environment is wrong. */
static inline const char *expect_rank(const char *prog, int *rank, int *world) {
    const char *id = getenv("PADDLE_TRAINER_ID"), *num = getenv("PADDLE_TRAINERS_NUM");
    int r = id ? atoi(id) : -1, w = num ? atoi(num) : 0;
    if (!id || !num || r < 0 || w < 1 || r >= w) {
        fprintf(stderr, "%s: expected PADDLE_TRAINER_ID < PADDLE_TRAINERS_NUM from the launcher, got '%s' and '%s'\n",
                prog, id ? id : "<unset>", num ? num : "<unset>");
        return NULL;
    }
    if (rank) *rank = r;
    if (world) *world = w;
    return id;
}

#endif
