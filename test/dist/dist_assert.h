/* test/dist/dist_assert.h — the assertion of the test programs that a job runs (under dgrun or
 * mpirun, one process a rank): a failed check prints this rank, the file and line, the condition,
 * what it means and the library's last error, and ends the process with exit 1, which the
 * launcher turns into a failed job naming the rank. */
#ifndef DG_TEST_DIST_ASSERT_H
#define DG_TEST_DIST_ASSERT_H

#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>

#define DIST_ASSERT(cond, ...)                                                                                         \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: rank %d: assertion failed: %s: ", __FILE__, __LINE__, dg_fleet_worker_index(), #cond); \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fprintf(stderr, " (%s)\n", dg_last_error());                                                               \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

#endif
