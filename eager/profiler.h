/* eager/profiler.h — the profiler's hooks inside eager/ (the public side is
 * include/dygraph/profiler.h). The op entry path (eager/ops/op_entry.c) and the backward walk
 * call dg_prof_op for every op they run while a profiler records; with none recording each
 * hook costs one load of dg_prof_active. */
#ifndef DG_EAGER_PROFILER_H
#define DG_EAGER_PROFILER_H

#include "internal.h"
#include <dygraph/profiler.h>

/* nonzero while a profiler records (any thread) */
extern int dg_prof_active;
static inline bool dg_profiling(void) { return __atomic_load_n(&dg_prof_active, __ATOMIC_RELAXED) != 0; }

/* monotonic clock, nanoseconds */
uint64_t dg_prof_now(void);

enum { DG_PROF_FORWARD = 0, DG_PROF_BACKWARD = 1 };
/* One op ran on this thread from t0 (dg_prof_now) to now: its name, phase, inputs (NULL
 * entries allowed) and output (NULL when it failed). Ops nest: a composite's range holds the
 * ranges of the ops it is made of. A t0 of 0 (the profiler was off when the op began) records
 * nothing. A backward event is named "<name>_backward"; its inputs are the gradients the rule
 * made for the node's inputs, its output the gradient it received. */
void dg_prof_op(const char *name, int phase, uint64_t t0, const dg_tensor *const *in, int n_in, const dg_tensor *out);
/* An op's t0 (0 while no profiler records), for an entry path that also wants the op's device
 * time: when its first non-NULL input is on a GPU, an event is recorded on that GPU's stream now
 * and another when dg_prof_op(…, t0, …) reports the op's end, and the pair becomes a "kernel"
 * event (the op's name; device time, on the GPU's row) when the session stops. Begin/end pairs
 * nest per thread like the ops; a t0 from dg_prof_now works too, without device time. */
uint64_t dg_prof_op_begin(const dg_tensor *const *in, int n_in);

/* DG_PROFILE: read once, at the first use of the library (dg_init, or the first tensor made);
 * when it names a file, a session starts there and ends at dg_shutdown or at exit. */
extern int dg_prof_env_done;
void dg_prof_env_start(void);
static inline void dg_prof_env_once(void) {
    if (!__atomic_load_n(&dg_prof_env_done, __ATOMIC_RELAXED)) dg_prof_env_start();
}
/* dg_shutdown: a recording session stops (writing what its params ask for). */
void dg_prof_shutdown(void);

#endif
